//! The checkpoint's bytes, format version 2 (the parent module's docs lay them out, "Wire
//! format"): the frame — magic, version, length, CRC-32 — around a [postcard] payload, the head
//! and then the state's `f32`s in the order of the stream's form. This module knows the bytes
//! only; what a stream writes into them and what restore checks are `protocol.rs`'s.

use serde::{Deserialize, Serialize};

/// The first eight bytes of every checkpoint.
pub const MAGIC: [u8; 8] = *b"MFCCKPT\0";
/// The checkpoint format version this runtime reads and writes (2: the running sum's
/// compensation follows the sum).
pub const VERSION: u16 = 2;
/// Bytes before the payload: magic, version, payload length.
pub(super) const PREFIX_LEN: usize = 14;
/// The largest postcard encoding of [`Head`]: 5 + 4 + 5 + 10 + 1 + 5 + 5 + 10 + 5.
const MAX_HEAD_LEN: usize = 50;
/// Bytes of the CRC-32 after the payload.
const CHECKSUM_LEN: usize = 4;

/// The most bytes a checkpoint with `floats` floats of state takes: `14 + 50 + 4·floats + 4`
/// (the head's varints are often shorter). `None` on overflow.
pub const fn frame_len(floats: usize) -> Option<usize> {
    let Some(state) = floats.checked_mul(4) else {
        return None;
    };
    state.checked_add(PREFIX_LEN + MAX_HEAD_LEN + CHECKSUM_LEN)
}

/// The CRC-32 of checkpoints: the blob's (ISO-HDLC), but table-driven on every target, since a
/// device checkpoints every step while it checks its blob once (the formats crate computes it bit
/// by bit on bare metal). One 1 KiB table there, 16 on hosts, where checkpoints can be large.
#[cfg(target_os = "none")]
type CrcTables = crc::Table<1>;
#[cfg(not(target_os = "none"))]
type CrcTables = crc::Table<16>;

pub(super) fn checksum(bytes: &[u8]) -> u32 {
    const CRC: crc::Crc<u32, CrcTables> = crc::Crc::<u32, CrcTables>::new(&crc::CRC_32_ISO_HDLC);
    CRC.checksum(bytes)
}

/// The fixed-size part of a checkpoint's payload (field order is wire order).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(super) struct Head {
    pub(super) blob_crc32: u32,
    pub(super) noise_scale: f32,
    pub(super) dim: u32,
    pub(super) offset: u64,
    pub(super) whole_row: bool,
    pub(super) band: u32,
    pub(super) rank: u32,
    pub(super) epoch: u64,
    pub(super) step: u32,
}

/// Why a checkpoint's frame or head could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Truncated, without the magic, or a head postcard does not parse.
    Malformed,
    /// Another format version.
    Version(u16),
    /// The CRC-32 does not match the bytes.
    Checksum {
        /// As stored.
        stored: u32,
        /// Of the bytes as read.
        computed: u32,
    },
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// Checks a checkpoint's frame (magic, version, length, checksum) and parses its head; returns
/// the head and the bytes of the state's floats after it.
pub(super) fn read(bytes: &[u8]) -> Result<(Head, &[u8]), FrameError> {
    if bytes.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(FrameError::Malformed);
    }
    let version = bytes
        .get(8..10)
        .and_then(|b| b.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or(FrameError::Malformed)?;
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let length = u32_at(bytes, 10).ok_or(FrameError::Malformed)? as usize;
    let end = PREFIX_LEN
        .checked_add(length)
        .ok_or(FrameError::Malformed)?;
    let stored = u32_at(bytes, end).ok_or(FrameError::Malformed)?;
    let framed = bytes.get(..end).ok_or(FrameError::Malformed)?;
    let computed = checksum(framed);
    if stored != computed {
        return Err(FrameError::Checksum { stored, computed });
    }
    let payload = framed.get(PREFIX_LEN..).ok_or(FrameError::Malformed)?;
    mfc_formats::canonical::take_from_bytes(payload).map_err(|_| FrameError::Malformed)
}

/// Writes the frame of `head` and the floats of `state` (in order) into `out`; returns the bytes
/// written, or `None` when `out` is too short (nothing else can fail).
pub(super) fn write(head: &Head, state: &[&[f32]; 4], out: &mut [u8]) -> Option<usize> {
    let (prefix, body) = out.split_at_mut_checked(PREFIX_LEN)?;
    let head_len = postcard::to_slice(head, body).ok()?.len();
    let floats: usize = state.iter().map(|part| part.len()).sum();
    let length = head_len.checked_add(floats.checked_mul(4)?)?;
    let (payload, rest) = body.split_at_mut_checked(length)?;
    if rest.len() < CHECKSUM_LEN {
        return None;
    }
    let words = payload.get_mut(head_len..)?.chunks_exact_mut(4);
    for (word, x) in words.zip(state.iter().flat_map(|part| part.iter())) {
        word.copy_from_slice(&x.to_le_bytes());
    }
    let (magic, rest) = prefix.split_at_mut_checked(MAGIC.len())?;
    let (version, declared) = rest.split_at_mut_checked(2)?;
    magic.copy_from_slice(&MAGIC);
    version.copy_from_slice(&VERSION.to_le_bytes());
    declared.copy_from_slice(&u32::try_from(length).ok()?.to_le_bytes());
    let end = PREFIX_LEN + length;
    let (framed, rest) = out.split_at_mut_checked(end)?;
    let crc = checksum(framed);
    rest.get_mut(..CHECKSUM_LEN)?
        .copy_from_slice(&crc.to_le_bytes());
    Some(end + CHECKSUM_LEN)
}
