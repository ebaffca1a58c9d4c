//! The one error type of this crate: everything that can be wrong with a blob's bytes or with the
//! mechanism they describe, each variant naming the operation and the problem.

use core::fmt;

/// Why a blob could not be read or written.
///
/// Parsing checks, in this order: magic, format version, flags, declared length, checksum, payload
/// structure, then the meaning of every field. The first failure is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The bytes end before the blob does (fewer bytes than the fixed prefix or the declared
    /// length).
    Truncated,
    /// The first eight bytes are not [`MAGIC`](crate::MAGIC): this is not an `.mfc` blob.
    BadMagic,
    /// The blob was written in a format version this reader does not understand.
    UnsupportedVersion {
        /// The version stored in the blob.
        found: u16,
    },
    /// Reserved flag bits are set; a newer writer may need a newer reader.
    UnsupportedFlags {
        /// The flags stored in the blob.
        found: u16,
    },
    /// There are bytes after the checksum: the slice is longer than the blob it holds.
    TrailingBytes,
    /// The CRC-32 stored after the payload does not match the bytes before it.
    ChecksumMismatch {
        /// The checksum stored in the blob.
        stored: u32,
        /// The checksum of the bytes as read.
        computed: u32,
    },
    /// The payload is not a valid postcard encoding of a mechanism (or uses a variant this reader
    /// does not know), or its extensions are unknown, repeated or hold their default value.
    MalformedPayload,
    /// The payload decodes but leaves unread bytes behind. Readers before the extensions of
    /// `SPEC.md` report a blob that has one this way; this reader parses every trailing byte as
    /// an extension and reports what is not one as [`Error::MalformedPayload`].
    TrailingPayload,
    /// A field has a value outside its documented range (see `SPEC.md`).
    InvalidField {
        /// The field, as named in `SPEC.md`.
        field: &'static str,
    },
    /// A coefficient table has the wrong number of bytes for the declared shape.
    TableLength {
        /// The table, as named in `SPEC.md`.
        table: &'static str,
        /// The length in bytes the shape requires.
        expected: u32,
        /// The length in bytes found.
        found: u32,
    },
    /// A coefficient is NaN or infinite.
    NonFiniteCoefficient {
        /// The table, as named in `SPEC.md`.
        table: &'static str,
        /// The index of the coefficient in the table.
        index: u32,
    },
    /// The padding of a band table (entries left of column 0: decoder 0's diagonals, decoder
    /// 3's general encoder) is not zero.
    NonZeroPadding {
        /// The row whose padding is non-zero.
        step: u32,
    },
    /// The decoder's main diagonal has a zero: the decoder is not invertible, so no encoder exists.
    SingularDecoder {
        /// The row with a zero diagonal entry.
        step: u32,
    },
    /// The encoder of a BandMF form has a zero diagonal entry: it is not invertible.
    SingularEncoder {
        /// The row with a zero diagonal entry (0 for a Toeplitz encoder's `c_0`).
        step: u32,
    },
    /// Writing: the output buffer is too small, or the encoding failed.
    BufferTooSmall,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated => f.write_str("blob is truncated"),
            Error::BadMagic => f.write_str("not an .mfc blob (bad magic bytes)"),
            Error::UnsupportedVersion { found } => write!(
                f,
                "unsupported blob format version {found} (this reader understands {})",
                crate::FORMAT_VERSION
            ),
            Error::UnsupportedFlags { found } => {
                write!(f, "unsupported blob flags {found:#06x}")
            }
            Error::TrailingBytes => f.write_str("unexpected bytes after the blob's checksum"),
            Error::ChecksumMismatch { stored, computed } => write!(
                f,
                "blob checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the blob is corrupted"
            ),
            Error::MalformedPayload => f.write_str("blob payload is malformed"),
            Error::TrailingPayload => f.write_str("blob payload has unread trailing bytes"),
            Error::InvalidField { field } => write!(f, "blob field `{field}` is out of range"),
            Error::TableLength {
                table,
                expected,
                found,
            } => write!(
                f,
                "table `{table}` has {found} bytes, its shape requires {expected}"
            ),
            Error::NonFiniteCoefficient { table, index } => {
                write!(
                    f,
                    "table `{table}` has a non-finite coefficient at index {index}"
                )
            }
            Error::NonZeroPadding { step } => {
                write!(f, "diagonal table padding is not zero in row {step}")
            }
            Error::SingularDecoder { step } => {
                write!(f, "decoder has a zero diagonal entry at step {step}")
            }
            Error::SingularEncoder { step } => {
                write!(f, "encoder has a zero diagonal entry at step {step}")
            }
            Error::BufferTooSmall => f.write_str("output buffer too small for the blob"),
        }
    }
}

impl core::error::Error for Error {}
