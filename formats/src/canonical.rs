//! Canonical postcard decoding: one accepted byte string per value.
//!
//! postcard writes every integer (and every length and enum index) as a LEB128 varint with the
//! fewest bytes, but its decoder also accepts longer encodings of the same number: `83 00` for 3,
//! `80 00` for 0 (fuzzing finding 1, `tests/fuzz/README.md`). A mechanism would then have many
//! accepted encodings, each with its own CRC-32, the value that `mfc inspect` prints and that
//! checkpoints are bound to. [`take_from_bytes`] decodes like `postcard::take_from_bytes` but
//! refuses such overlong varints.
//!
//! A varint is overlong exactly when it ends in a zero byte after at least one byte with the
//! continuation bit (`0x80`) set: postcard already refuses last bytes with bits beyond the
//! integer's width. The decoder reads varints one byte at a time ([`Flavor::pop`]) and floats,
//! strings and tables in runs ([`Flavor::try_take_n`]), so the flavor below refuses a popped zero
//! that follows a popped byte with the continuation bit. The other single bytes postcard pops
//! (the tags of `bool` and `Option`) are 0 or 1, never `0x80` or above, so this refuses overlong
//! varints and nothing else, for the types of this format and of the runtime's checkpoints, which
//! have no `u8` or `i8` field (a raw byte ≥ `0x80` followed by a zero would be refused too).

use postcard::de_flavors::{Flavor, Slice};
use serde::Deserialize;

/// A postcard flavor over a byte slice that refuses overlong varints (module docs).
struct Canonical<'de> {
    bytes: Slice<'de>,
    /// Whether the last byte popped had the continuation bit set.
    continued: bool,
}

impl<'de> Flavor<'de> for Canonical<'de> {
    type Remainder = &'de [u8];
    type Source = &'de [u8];

    // Not inlined: postcard calls it from every varint loop of every type, and the extra test
    // copied into each cost the device 568 bytes of flash (`examples/firmware/budget.sh` on a
    // development build without this attribute).
    #[inline(never)]
    fn pop(&mut self) -> postcard::Result<u8> {
        let byte = self.bytes.pop()?;
        if self.continued && byte == 0 {
            return Err(postcard::Error::DeserializeBadVarint);
        }
        self.continued = byte & 0x80 != 0;
        Ok(byte)
    }

    fn size_hint(&self) -> Option<usize> {
        self.bytes.size_hint()
    }

    fn try_take_n(&mut self, count: usize) -> postcard::Result<&'de [u8]> {
        self.continued = false;
        self.bytes.try_take_n(count)
    }

    fn finalize(self) -> postcard::Result<&'de [u8]> {
        self.bytes.finalize()
    }
}

/// Decodes a `T` from the start of `bytes` as `postcard::take_from_bytes` does, refusing
/// overlong varints (module docs); returns the value and the bytes after it.
pub fn take_from_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> postcard::Result<(T, &'a [u8])> {
    let mut deserializer = postcard::Deserializer::from_flavor(Canonical {
        bytes: Slice::new(bytes),
        continued: false,
    });
    let value = T::deserialize(&mut deserializer)?;
    Ok((value, deserializer.finalize()?))
}

#[cfg(test)]
mod tests {
    use super::take_from_bytes;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Fields<'a> {
        count: u32,
        wide: u64,
        flag: bool,
        maybe: Option<u16>,
        ratio: f64,
        #[serde(borrow)]
        label: &'a str,
    }

    /// Every minimal encoding postcard writes is accepted and decodes to the same value; each
    /// varint of it stretched by one byte (`… | 0x80, 0x00`) is refused, while postcard's own
    /// decoder accepts it; a float whose bytes contain `0x80, 0x00` is not mistaken for one.
    #[test]
    fn minimal_encodings_pass_and_overlong_varints_are_refused() {
        let value = Fields {
            count: 300,
            wide: 1 << 40,
            flag: true,
            maybe: Some(0),
            ratio: f64::from_bits(0x0000_0000_0000_8000),
            label: "mfc",
        };
        let mut buffer = [0u8; 64];
        let bytes: &[u8] = postcard::to_slice(&value, &mut buffer).unwrap();
        assert_eq!(
            bytes[..10],
            [0xac, 0x02, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x01, 0x01]
        );
        let (decoded, rest): (Fields, _) = take_from_bytes(bytes).unwrap();
        assert_eq!(decoded, value);
        assert!(rest.is_empty());

        // (start, length) of each varint: count, wide, the Option's u16 (after its tag) and the
        // string's length (after the 8 bytes of the float).
        for (start, len) in [(0, 2), (2, 6), (10, 1), (19, 1)] {
            let end = start + len;
            let mut stretched = [0u8; 65];
            stretched[..end].copy_from_slice(&bytes[..end]);
            stretched[end - 1] |= 0x80;
            stretched[end] = 0x00;
            stretched[end + 1..=bytes.len()].copy_from_slice(&bytes[end..]);
            let stretched = &stretched[..=bytes.len()];
            let postcard: (Fields, _) = postcard::take_from_bytes(stretched).unwrap();
            assert_eq!(postcard.0, value, "postcard accepts the varint at {start}");
            assert!(
                take_from_bytes::<Fields>(stretched).is_err(),
                "the varint at {start} stretched"
            );
        }
    }
}
