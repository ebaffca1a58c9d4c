//! The identity of a blob for checkpoints: what a checkpoint is bound to, so that it is never
//! restored into a stream of another blob.

use mfc_formats::{Decoder, Mechanism, Validated};

use crate::error::Error;
use crate::forms::{clip_norm, horizon};

/// The identity of a blob for checkpoints: its CRC-32 (as `mfc inspect` prints it) and the
/// decoder tables the stream replays. [`BlobFingerprint::load`] parses the blob and takes the
/// checksum it has just verified, so binding checkpoints to the blob costs nothing at run time.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlobFingerprint<'m> {
    pub(super) crc32: u32,
    pub(super) decoder: Decoder<'m>,
    /// The horizon the stream stops at (for a BLT valid for every horizon, `u32::MAX`).
    pub(super) steps: u32,
    /// The clip norm as a stream applies it (`f32`).
    pub(super) clip_norm: f32,
}

impl<'m> BlobFingerprint<'m> {
    /// Parses and validates a blob ([`Mechanism::from_bytes`]) and fingerprints it with the
    /// CRC-32 stored in it — which the parse has just verified, so this costs nothing more.
    /// Every decoder form has checkpoints.
    pub fn load(blob: &'m [u8]) -> Result<(Validated<'m>, Self), Error> {
        let mechanism = Mechanism::from_bytes(blob)?;
        let crc32 = blob
            .len()
            .checked_sub(mfc_formats::CHECKSUM_LEN)
            .and_then(|at| blob.get(at..))
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or(Error::InvalidBlob(mfc_formats::Error::Truncated))?;
        let fingerprint = Self {
            crc32,
            decoder: mechanism.decoder,
            steps: horizon(&mechanism),
            clip_norm: clip_norm(&mechanism)?,
        };
        Ok((mechanism, fingerprint))
    }

    /// The blob's CRC-32.
    pub fn crc32(&self) -> u32 {
        self.crc32
    }
}
