//! Coefficient tables stored as little-endian `f32`, read in place.
//!
//! A table is a borrowed byte slice whose length is a multiple of four. Nothing is copied: on a
//! device the slice points into flash and every coefficient is decoded with `f32::from_le_bytes`
//! when it is used (one unaligned word load on Cortex-M3/M4). The postcard encoding of a table is
//! the encoding of a byte string: a varint length in bytes, then the bytes.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A read-only table of little-endian `f32` coefficients, borrowed from the blob's bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct F32Table<'a> {
    bytes: &'a [u8],
}

impl<'a> F32Table<'a> {
    /// Views `bytes` as a table. Returns `None` unless the length is a multiple of four.
    pub const fn new(bytes: &'a [u8]) -> Option<Self> {
        if bytes.len() % 4 == 0 {
            Some(Self { bytes })
        } else {
            None
        }
    }

    /// The empty table.
    pub const fn empty() -> Self {
        Self { bytes: &[] }
    }

    /// Number of coefficients.
    pub const fn len(&self) -> usize {
        self.bytes.len() / 4
    }

    /// Whether the table holds no coefficient.
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The raw little-endian bytes.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The coefficient at `index`, or `None` past the end.
    #[inline]
    pub fn get(&self, index: usize) -> Option<f32> {
        let start = index.checked_mul(4)?;
        let word = self.bytes.get(start..start.checked_add(4)?)?;
        Some(f32::from_le_bytes(word.try_into().ok()?))
    }

    /// The `count` coefficients starting at `start` as a table, or `None` if they do not all exist.
    #[inline]
    pub fn slice(&self, start: usize, count: usize) -> Option<F32Table<'a>> {
        let begin = start.checked_mul(4)?;
        let end = begin.checked_add(count.checked_mul(4)?)?;
        Some(F32Table {
            bytes: self.bytes.get(begin..end)?,
        })
    }

    /// Iterates over the coefficients in order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = f32> + 'a {
        // Every chunk has four bytes: the conversion cannot fail (and compiles to a load).
        self.bytes
            .chunks_exact(4)
            .map(|w| <[u8; 4]>::try_from(w).map_or(0.0, f32::from_le_bytes))
    }
}

impl core::fmt::Debug for F32Table<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "F32Table[{} coefficients]", self.len())
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for F32Table<'_> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "F32Table[{=usize} coefficients]", self.len())
    }
}

impl Serialize for F32Table<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.bytes)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for F32Table<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = <&'de [u8]>::deserialize(deserializer)?;
        F32Table::new(bytes)
            .ok_or_else(|| serde::de::Error::invalid_length(bytes.len(), &"a multiple of 4 bytes"))
    }
}

/// Encodes coefficients as the little-endian bytes of a table (the writer's side).
#[cfg(feature = "alloc")]
pub fn encode_f32s(values: impl IntoIterator<Item = f32>) -> alloc::vec::Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_in_place() {
        let bytes = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0]; // 1.0, -2.0
        let t = F32Table::new(&bytes).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0), Some(1.0));
        assert_eq!(t.get(1), Some(-2.0));
        assert_eq!(t.get(2), None);
        assert_eq!(t.get(usize::MAX), None);
        assert_eq!(t.slice(1, 1).unwrap().get(0), Some(-2.0));
        assert!(t.slice(1, 2).is_none());
        assert!(t.slice(usize::MAX, 2).is_none());
        assert_eq!(
            t.iter().collect::<heapless_vec::V>(),
            heapless_vec::V::from([1.0, -2.0])
        );
        assert!(F32Table::new(&bytes[..3]).is_none());
    }

    mod heapless_vec {
        /// A tiny fixed-size collector so this test runs without `alloc`.
        #[derive(Debug, PartialEq)]
        pub struct V([f32; 2], usize);
        impl From<[f32; 2]> for V {
            fn from(a: [f32; 2]) -> Self {
                V(a, 2)
            }
        }
        impl FromIterator<f32> for V {
            fn from_iter<I: IntoIterator<Item = f32>>(iter: I) -> Self {
                let mut v = V([0.0; 2], 0);
                for x in iter {
                    v.0[v.1] = x;
                    v.1 += 1;
                }
                v
            }
        }
    }
}
