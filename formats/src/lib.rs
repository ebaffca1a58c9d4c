//! The `.mfc` mechanism blob: a versioned, checksummed, postcard-encoded description of a
//! matrix-factorization mechanism, readable in place from a `&[u8]` (on a device, from flash).
//!
//! ```text
//! offset  size  field
//! 0       8     magic  b"MFCBLOB\0"
//! 8       2     format version, u16 little-endian (this crate: 1)
//! 10      2     flags, u16 little-endian (must be 0)
//! 12      4     payload length P, u32 little-endian
//! 16      P     payload: postcard encoding of [`Mechanism`]
//! 16+P    4     CRC-32 (ISO-HDLC, as zlib) of bytes 0..16+P, u32 little-endian
//! ```
//!
//! [`Mechanism::from_bytes`] checks the magic and the version before anything else, then the
//! length, the checksum, the payload structure (with minimal varints only: [`canonical`]) and
//! every field ([`Mechanism::validate`]), and returns a [`Validated`] mechanism, the only kind the
//! runtime replays; tables are not copied. `SPEC.md` in this crate
//! describes every byte and the compatibility policy; `tests/golden.rs` pins them.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The promise "no panic on any input" as lints: no unwrap, expect, panic or indexing in the
// library's code (tests may use them).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod canonical;
mod error;
mod mechanism;
pub mod signature;
mod table;

pub use error::Error;
use mechanism::Extension;
pub use mechanism::MAX_BLT_BUFFERS;
pub use mechanism::{
    BandMf, BandMfKind, BandedLowRank, Blt, Calibration, Decoder, ErrorSummary, Fft, FftKind,
    Header, Mechanism, Neighbouring, Participation, PrivacyTarget, Sensitivity, SensitivityMethod,
    Validated, Workload,
};
pub use table::F32Table;
#[cfg(feature = "alloc")]
pub use table::encode_f32s;

/// The first eight bytes of every blob.
pub const MAGIC: [u8; 8] = *b"MFCBLOB\0";
/// The format version this crate reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// Bytes before the payload: magic, version, flags, payload length.
pub const PREFIX_LEN: usize = 16;
/// Bytes after the payload: the checksum.
pub const CHECKSUM_LEN: usize = 4;

/// Bare-metal targets compute the CRC bit by bit (no 1 KiB table in flash; a blob is checked
/// once, at load); hosts, which also checksum large checkpoints, use 16 tables (16 KiB).
#[cfg(target_os = "none")]
type CrcTables = crc::NoTable;
#[cfg(not(target_os = "none"))]
type CrcTables = crc::Table<16>;

const CRC: crc::Crc<u32, CrcTables> = crc::Crc::<u32, CrcTables>::new(&crc::CRC_32_ISO_HDLC);

/// The CRC-32 (ISO-HDLC, as zlib) the blob format (and the runtime's checkpoints) use.
pub fn checksum(bytes: &[u8]) -> u32 {
    CRC.checksum(bytes)
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

/// Checks the framing of a blob (magic, version, flags, length, checksum) and returns the payload.
pub fn payload(bytes: &[u8]) -> Result<&[u8], Error> {
    let magic = bytes.get(..MAGIC.len()).ok_or(Error::Truncated)?;
    if magic != MAGIC {
        return Err(Error::BadMagic);
    }
    let version = u16_at(bytes, 8).ok_or(Error::Truncated)?;
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { found: version });
    }
    let flags = u16_at(bytes, 10).ok_or(Error::Truncated)?;
    if flags != 0 {
        return Err(Error::UnsupportedFlags { found: flags });
    }
    let declared = u32_at(bytes, 12).ok_or(Error::Truncated)? as usize;
    let end = PREFIX_LEN.checked_add(declared).ok_or(Error::Truncated)?;
    let total = end.checked_add(CHECKSUM_LEN).ok_or(Error::Truncated)?;
    if bytes.len() < total {
        return Err(Error::Truncated);
    }
    if bytes.len() > total {
        return Err(Error::TrailingBytes);
    }
    let stored = u32_at(bytes, end).ok_or(Error::Truncated)?;
    let framed = bytes.get(..end).ok_or(Error::Truncated)?;
    let computed = checksum(framed);
    if stored != computed {
        return Err(Error::ChecksumMismatch { stored, computed });
    }
    framed.get(PREFIX_LEN..).ok_or(Error::Truncated)
}

impl<'a> Mechanism<'a> {
    /// Parses and validates a blob without copying its tables.
    ///
    /// Never panics: any byte string yields either a [`Validated`] mechanism, whose every field is
    /// in range, or an [`Error`].
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Validated<'a>, Error> {
        let payload = payload(bytes)?;
        let (mut mechanism, mut rest): (Mechanism<'a>, _) =
            canonical::take_from_bytes(payload).map_err(|_| Error::MalformedPayload)?;
        // The trailing extensions (SPEC.md): at most one of each, none holding its default
        // (`Extension::apply` refuses a repeat and a default value).
        while !rest.is_empty() {
            let extension: Extension;
            (extension, rest) =
                canonical::take_from_bytes(rest).map_err(|_| Error::MalformedPayload)?;
            extension.apply(&mut mechanism.header)?;
        }
        mechanism.validate()
    }

    /// Writes the blob into `buf` and returns the written prefix of it.
    pub fn write_to<'b>(&self, buf: &'b mut [u8]) -> Result<&'b mut [u8], Error> {
        self.check()?;
        let body = buf.get_mut(PREFIX_LEN..).ok_or(Error::BufferTooSmall)?;
        let mut written = postcard::to_slice(self, body)
            .map_err(|_| Error::BufferTooSmall)?
            .len();
        if let Some(extension) = Extension::of(&self.header) {
            let tail = body.get_mut(written..).ok_or(Error::BufferTooSmall)?;
            written += postcard::to_slice(&extension, tail)
                .map_err(|_| Error::BufferTooSmall)?
                .len();
        }
        let declared = u32::try_from(written).map_err(|_| Error::BufferTooSmall)?;
        let end = PREFIX_LEN + written;
        let blob = buf
            .get_mut(..end + CHECKSUM_LEN)
            .ok_or(Error::BufferTooSmall)?;
        let (framed, crc) = blob
            .split_at_mut_checked(end)
            .ok_or(Error::BufferTooSmall)?;
        // The prefix: magic, version, flags (none), payload length.
        let (version, flags, length) = (
            FORMAT_VERSION.to_le_bytes(),
            0u16.to_le_bytes(),
            declared.to_le_bytes(),
        );
        let prefix = MAGIC.iter().chain(&version).chain(&flags).chain(&length);
        for (byte, &field) in framed.iter_mut().zip(prefix) {
            *byte = field;
        }
        crc.copy_from_slice(&checksum(framed).to_le_bytes());
        Ok(blob)
    }

    /// Encodes the blob into a new vector.
    #[cfg(feature = "alloc")]
    pub fn to_vec(&self) -> Result<alloc::vec::Vec<u8>, Error> {
        self.check()?;
        let mut payload = postcard::to_allocvec(self).map_err(|_| Error::BufferTooSmall)?;
        if let Some(extension) = Extension::of(&self.header) {
            payload =
                postcard::to_extend(&extension, payload).map_err(|_| Error::BufferTooSmall)?;
        }
        let declared = u32::try_from(payload.len()).map_err(|_| Error::BufferTooSmall)?;
        let mut blob = alloc::vec::Vec::with_capacity(PREFIX_LEN + payload.len() + CHECKSUM_LEN);
        blob.extend_from_slice(&MAGIC);
        blob.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        blob.extend_from_slice(&0u16.to_le_bytes());
        blob.extend_from_slice(&declared.to_le_bytes());
        blob.extend_from_slice(&payload);
        let crc = checksum(&blob);
        blob.extend_from_slice(&crc.to_le_bytes());
        Ok(blob)
    }
}
