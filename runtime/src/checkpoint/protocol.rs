//! Writing a stream's state and loading it back, for any form: what a stream must expose
//! ([`Checkpointable`]), what a checkpoint is bound to, and every check restore runs — in order,
//! and all of them before the stream changes.

use mfc_formats::Decoder;

use super::counter::{ReleaseCounter, Resumable};
use super::fingerprint::BlobFingerprint;
use super::wire::{self, FrameError, Head};
use crate::error::Error;

/// What [`checkpoint`] and [`restore`] need of a stream: its identity (decoder, horizon, clip
/// norm, noise scale, dimension and shard, the head's shape), its state in wire order, and the
/// check that a checkpoint's newest noise is its key's. Each form implements it in
/// `checkpoint/forms.rs`.
pub(crate) trait Checkpointable: Resumable {
    /// Whether `decoder` is the one this stream replays (the same bytes in place, or equal
    /// tables).
    fn same_decoder(&self, decoder: &Decoder<'_>) -> bool;
    fn horizon(&self) -> u32;
    fn clip_norm(&self) -> f32;
    /// `σ·ζ·sens`, as the stream applies it (`f32`).
    fn noise_scale(&self) -> f32;
    fn dim(&self) -> usize;
    fn offset(&self) -> u64;
    fn whole_row(&self) -> bool;
    /// The head's `(band, rank)`: `(h, r)`, or `(b̂, 0)`, `(m, 0)` for the other forms.
    fn shape(&self) -> (u32, u32);
    /// The state in wire order (four parts, some possibly empty).
    fn state(&self) -> [&[f32]; 4];
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]);
    /// Whether the newest noise of a checkpoint at `step > 0`, whose state float `k` is
    /// `word(k)`, is the one this stream's key generates, bit for bit.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool;
}

/// Whether `stream` replays the blob of `blob`: same decoder, horizon and clip norm.
fn describes(blob: &BlobFingerprint<'_>, stream: &impl Checkpointable) -> bool {
    stream.same_decoder(&blob.decoder)
        && blob.steps == stream.horizon()
        && blob.clip_norm.to_bits() == stream.clip_norm().to_bits()
}

/// Floats of `stream`'s state.
fn state_len(stream: &impl Checkpointable) -> usize {
    stream.state().iter().map(|part| part.len()).sum()
}

/// Bytes [`checkpoint`] may need: at most `14 + 50 + 4·(floats of state) + 4`
/// ([`wire::frame_len`]).
pub(super) fn capacity(stream: &impl Checkpointable) -> usize {
    wire::frame_len(state_len(stream)).unwrap_or(usize::MAX)
}

/// The runtime's error for a frame `wire::read` refused.
fn refusal(e: FrameError) -> Error {
    match e {
        FrameError::Malformed => Error::MalformedCheckpoint,
        FrameError::Version(found) => Error::UnsupportedCheckpointVersion { found },
        FrameError::Checksum { stored, computed } => {
            Error::CheckpointChecksumMismatch { stored, computed }
        }
    }
}

/// `checkpoint` of every form (the `checkpoint_methods!` below).
pub(super) fn checkpoint(
    stream: &impl Checkpointable,
    blob: &BlobFingerprint<'_>,
    counter: &ReleaseCounter,
    out: &mut [u8],
) -> Result<usize, Error> {
    if !describes(blob, stream) {
        return Err(Error::CheckpointMismatch { field: "blob" });
    }
    let step = stream.steps_released();
    if step < counter.released() {
        return Err(Error::StaleCheckpoint {
            step,
            released: counter.released(),
        });
    }
    let (band, rank) = stream.shape();
    let head = Head {
        blob_crc32: blob.crc32,
        noise_scale: stream.noise_scale(),
        dim: u32::try_from(stream.dim()).map_err(|_| Error::InvalidDimension)?,
        offset: stream.offset(),
        whole_row: stream.whole_row(),
        band,
        rank,
        epoch: counter.epoch(),
        step,
    };
    let found = out.len();
    wire::write(&head, &stream.state(), out).ok_or_else(|| Error::CheckpointBufferTooSmall {
        needed: capacity(stream),
        found,
    })
}

/// `restore` of every form (the `checkpoint_methods!` below).
pub(super) fn restore(
    stream: &mut impl Checkpointable,
    blob: &BlobFingerprint<'_>,
    checkpoint: &[u8],
    counter: &ReleaseCounter,
) -> Result<(), Error> {
    if stream.steps_released() != 0 {
        return Err(Error::StreamAlreadyStarted);
    }
    let (head, floats) = wire::read(checkpoint).map_err(refusal)?;
    let total = state_len(stream);
    let mismatch = |field| Err(Error::CheckpointMismatch { field });
    if (head.band, head.rank) != stream.shape() {
        return mismatch("decoder shape");
    }
    if u64::from(head.dim) != stream.dim() as u64
        || head.offset != stream.offset()
        || head.whole_row != stream.whole_row()
    {
        return mismatch("dimension or shard");
    }
    if Some(floats.len()) != total.checked_mul(4) {
        return Err(Error::MalformedCheckpoint);
    }
    if head.step > stream.horizon() {
        return mismatch("step");
    }
    if head.noise_scale.to_bits() != stream.noise_scale().to_bits() {
        return mismatch("noise scale");
    }
    if !describes(blob, stream) || blob.crc32 != head.blob_crc32 {
        return mismatch("blob");
    }
    if head.epoch != counter.epoch() {
        return Err(Error::CheckpointEpochMismatch {
            checkpoint: head.epoch,
            counter: counter.epoch(),
        });
    }
    if head.step < counter.released() {
        return Err(Error::StaleCheckpoint {
            step: head.step,
            released: counter.released(),
        });
    }
    // The state's floats in order (`floats` holds exactly `total` of them), and float `index`.
    let values = || {
        floats
            .chunks_exact(4)
            .map(|w| <[u8; 4]>::try_from(w).map_or(0.0, f32::from_le_bytes))
    };
    let word = |index: usize| {
        let at = index.wrapping_mul(4);
        match floats.get(at..at.wrapping_add(4)) {
            Some(&[a, b, c, d]) => f32::from_le_bytes([a, b, c, d]),
            _ => 0.0,
        }
    };
    // A stream's state is finite (noise below 10.09σ, sums of clipped inputs); a NaN or an
    // infinity would poison every later release, and with the CRC only a forged checkpoint
    // carries one.
    if values().any(|x| !x.is_finite()) {
        return Err(Error::MalformedCheckpoint);
    }
    // The newest noise row must be the one this stream's key generates.
    if head.step > 0 && !stream.key_matches(head.step, &word) {
        return Err(Error::CheckpointKeyMismatch);
    }
    let (step, parts) = stream.state_mut();
    for (x, value) in parts
        .into_iter()
        .flat_map(|part| part.iter_mut())
        .zip(values())
    {
        *x = value;
    }
    *step = head.step;
    Ok(())
}

/// The inherent checkpoint methods of a stream type, documented once.
macro_rules! checkpoint_methods {
    ($stream:ident, $floats:literal) => {
        impl<N: NoiseSource> $stream<'_, '_, N> {
            #[doc = concat!("Bytes [`checkpoint`](Self::checkpoint) may need: at most `14 + 50 + 4·", $floats, " + 4`.")]
            pub fn checkpoint_capacity(&self) -> usize {
                protocol::capacity(self)
            }

            /// Writes the stream's state into `out` and returns the number of bytes written (a
            /// prefix of `out`). `blob` must be the fingerprint of the blob this stream replays,
            /// `counter` the device's counter (its epoch is recorded). Take the checkpoint after
            /// `step` and before the release leaves the device (see the
            /// [module docs](crate::checkpoint)).
            ///
            /// Nothing changes on error: [`Error::CheckpointMismatch`] if `blob` is not this
            /// stream's, [`Error::StaleCheckpoint`] if the counter says more steps were released
            /// than this stream has computed, [`Error::CheckpointBufferTooSmall`] if `out` is too
            /// short.
            pub fn checkpoint(
                &self,
                blob: &BlobFingerprint<'_>,
                counter: &ReleaseCounter,
                out: &mut [u8],
            ) -> Result<usize, Error> {
                protocol::checkpoint(self, blob, counter, out)
            }

            /// Loads a checkpoint into this stream, which must be freshly built (no step taken)
            /// from the same blob (`blob`, from [`BlobFingerprint::load`]), dimension or shard,
            /// noise multiplier and epoch key ([`epoch_noise`](crate::epoch_noise)) as the
            /// stream that wrote it. From then on the stream releases exactly what the
            /// uninterrupted stream would have.
            ///
            /// Every check runs before anything changes; on error the stream is still fresh.
            /// Errors: a damaged or forged checkpoint ([`Error::MalformedCheckpoint`] — also when
            /// a state value is not finite — [`Error::CheckpointChecksumMismatch`],
            /// [`Error::UnsupportedCheckpointVersion`]); one of another stream
            /// ([`Error::CheckpointMismatch`], [`Error::CheckpointKeyMismatch`]); one of another
            /// epoch ([`Error::CheckpointEpochMismatch`]); a stale one, behind
            /// `counter.released()` ([`Error::StaleCheckpoint`]); a stream already started
            /// ([`Error::StreamAlreadyStarted`]).
            pub fn restore(
                &mut self,
                blob: &BlobFingerprint<'_>,
                checkpoint: &[u8],
                counter: &ReleaseCounter,
            ) -> Result<(), Error> {
                protocol::restore(self, blob, checkpoint, counter)
            }
        }
    };
}
pub(super) use checkpoint_methods;
