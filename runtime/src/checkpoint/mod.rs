//! Checkpoint and restore: a stream survives a reboot without losing its place, without reusing
//! noise and without releasing a step twice.
//!
//! A device that reboots mid-stream must continue the *same* stream: a fresh stream would restart
//! the running sums, and a fresh stream under the *old* key would replay noise rows that have
//! already been released. [`Stream::checkpoint`](crate::Stream::checkpoint) writes the whole state
//! — step, the ring of the last `h` noise rows, `β`, the running sum and its compensation — into a
//! caller buffer (to be written to flash), bound to the blob, the noise scale, the dimension and
//! shard, and the key's epoch; [`Stream::restore`](crate::Stream::restore) loads it into a freshly
//! built stream, whose releases from then on are bit-for-bit those of the uninterrupted stream.
//!
//! # The rules
//!
//! Two values live in the device's **monotonic, durable storage** (a hardware monotonic counter,
//! RPMB, a secure element, or at least a wear-levelled flash record that is never rolled back):
//! the [`ReleaseCounter`], `(epoch, released)`.
//!
//! 1. **Keys.** The noise key of a stream is `stream_key(root, epoch)` ([`stream_key`],
//!    [`epoch_noise`]): a PRF of a device root secret (provisioned once, used for nothing else) and
//!    the epoch. A **cold start** — no usable checkpoint — first calls
//!    [`ReleaseCounter::cold_start`] (epoch + 1, released 0) and persists the counter, and only
//!    then derives the key. Epochs never repeat, so neither do keys: a cold start never reuses a
//!    previous stream's noise. Epoch 0 is never keyed
//!    ([`Error::EpochNotStarted`](crate::Error::EpochNotStarted)), so a device that forgets the
//!    cold start fails instead of reusing the factory key.
//! 2. **Releases.** Each step runs *compute → checkpoint → count → emit*:
//!    [`Stream::step`](crate::Stream::step) (nothing leaves the device yet),
//!    [`Stream::checkpoint`](crate::Stream::checkpoint) written to storage,
//!    [`ReleaseCounter::record`] persisted, and only then the release is sent. Hence the counter is
//!    never behind what was emitted, and the newest checkpoint is never behind the counter.
//! 3. **Restore.** [`Stream::restore`](crate::Stream::restore) refuses, with the stream untouched,
//!    a checkpoint of another epoch
//!    ([`Error::CheckpointEpochMismatch`](crate::Error::CheckpointEpochMismatch)) and a **stale**
//!    one, whose step is behind the counter's `released`
//!    ([`Error::StaleCheckpoint`](crate::Error::StaleCheckpoint)): restoring it would compute steps
//!    that may already have been released again — with the same noise and possibly other inputs
//!    (their difference reveals the inputs exactly) or, under a new key, with fresh noise (two
//!    independent releases of one step: double the privacy cost). A checkpoint *ahead* of the
//!    counter is accepted: the steps in between were computed but never emitted, and dropping an
//!    output is harmless. After a refusal the device cold-starts a new epoch; the old stream's
//!    running totals are lost, its privacy is not.
//!
//! Restore also checks that the checkpoint belongs to the stream it is loaded into: the blob's
//! fingerprint ([`BlobFingerprint`]: its verified CRC-32 and decoder tables), the noise scale
//! `σ·ζ·sens`, the dimension and shard, `(h, r)`, and the noise key itself — the newest ring row
//! must equal the row the stream's [`NoiseSource`](crate::NoiseSource) regenerates
//! ([`Error::CheckpointKeyMismatch`](crate::Error::CheckpointKeyMismatch)). Resuming under a
//! different decoder would release noise `B̂ z` of no analysed `B̂`.
//!
//! The same rules, wire format and methods hold for every form, and for [`Replay`](crate::Replay),
//! which dispatches to them; only the key check differs:
//!
//! - [`BandMfStream`](crate::BandMfStream) (decoder 3): the ring holds `w = C⁻¹z` rather than `z`;
//!   its newest row `w_{t−1}` is recomputed from the regenerated `z_{t−1}` and the `b̂ − 1` rows
//!   before it, with the step's own operations, and must match bit for bit.
//! - [`BltStream`](crate::BltStream) (decoder 2): the buffers mix every past row, so none can be
//!   read back; the checkpoint ends with the first `min(d, 8)` coordinates of `z_{t−1}` (kept by
//!   the stream), which must equal the key's regeneration.
//! - [`FftStream`](crate::FftStream) (decoder 1): the current block's noise `B̂_m z_block` is
//!   recomputed for the first two coordinates (one transform) and must match over all `m` rows, bit
//!   for bit.
//!
//! ```
//! use mfc_runtime::{BlobFingerprint, Error, ReleaseCounter, Stream, epoch_noise};
//! # use mfc_runtime::formats::*;
//! # let (d, l, r) = (encode_f32s([1.0, 0.0, 1.0, 0.5]), encode_f32s([0.0; 2]), encode_f32s([0.0; 2]));
//! # let t = |b| F32Table::new(b).unwrap();
//! # let example = Mechanism { header: Header { workload: Workload::PrefixSum, steps: 2,
//! #   participation: Participation::Single, neighbouring: Neighbouring::AddOrRemove,
//! #   sensitivity: Sensitivity { value: 1.2, method: SensitivityMethod::MaxColumnNorm },
//! #   clip_norm: 1.0, calibration: Some(Calibration { noise_multiplier: 1.0, target: None }),
//! #   error: ErrorSummary { sqrt_loss: 1.0, optimal_sqrt_loss: None, max_step_stddev: 1.0,
//! #   final_step_stddev: 1.0 }, generator: "doc" },
//! #   decoder: Decoder::BandedLowRank(BandedLowRank { band: 2, rank: 1, diagonals: t(&d),
//! #   left: t(&l), right: t(&r) }) };
//! # let blob_bytes = example.to_vec()?;
//! let root = [0x17; 32]; // the device's root secret (OTP / secure element)
//! let (mechanism, blob) = BlobFingerprint::load(&blob_bytes)?; // on a device: include_bytes!
//! // Cold start: a new epoch, persisted before the key exists.
//! let mut counter = ReleaseCounter::FACTORY.cold_start()?; // persist(counter)
//! let mut workspace = [0.0f32; 20]; // (h + r + 2)·d
//! let mut stream = Stream::new(mechanism, 4, &mut workspace, epoch_noise(&root, &counter)?)?;
//! let mut slot = [0u8; 160]; // a flash slot of at least `stream.checkpoint_capacity()` bytes
//! let mut release = [0.0f32; 4];
//! stream.step(&[1.0, 0.0, 0.0, 0.0], &mut release)?; // nothing leaves the device yet
//! stream.checkpoint(&blob, &counter, &mut slot)?; // persist(slot)
//! counter.record(&stream)?; // persist(counter), then emit `release`
//!
//! // After a reboot: the same blob, the persisted counter and slot.
//! let mut workspace = [0.0f32; 20]; // (h + r + 2)·d
//! let mut resumed = Stream::new(mechanism, 4, &mut workspace, epoch_noise(&root, &counter)?)?;
//! resumed.restore(&blob, &slot, &counter)?;
//! assert_eq!(resumed.steps_released(), 1);
//! # Ok::<(), Error>(())
//! ```
//!
//! # Wire format, version 2
//!
//! All integers of the frame are little-endian; the payload is [postcard].
//!
//! ```text
//! offset  size  field
//! 0       8     magic b"MFCCKPT\0"
//! 8       2     checkpoint format version, u16 (2)
//! 10      4     payload length P, u32
//! 14      P     payload: postcard of the head (below), then (h + r + 2)·d f32 (postcard's f32:
//!               4 bytes little-endian): ring slots 0..h (slot t mod h holds z_t), β rows 0..r,
//!               the running sum, its compensation (crate::sum)
//! 14+P    4     CRC-32 (ISO-HDLC, as the blob) of bytes 0..14+P
//! head: blob CRC-32 (varint u32), noise scale (f32), d (varint u32), shard offset (varint u64),
//!       whole row (bool), h, r (varint u32), epoch (varint u64), step (varint u32)
//! ```
//!
//! A [`BandMfStream`](crate::BandMfStream)'s checkpoint has the same frame and head with `h = b̂`,
//! `r = 0`, then `b̂·d` f32 — ring slots `0..b̂`, slot `t mod b̂` holding `w_t` — and, for the
//! prefix sum, the running sum and its compensation (`2·d` f32): `14 + ≤ 50 + 4·(b̂ + 2)·d + 4`
//! bytes.
//!
//! A [`BltStream`](crate::BltStream)'s has `h = m` (buffers), `r = 0`, then the `m·d` buffers
//! (buffer `j` of coordinate `c` at `j·d + c`), the running sum, its compensation, and the first
//! `min(d, 8)` coordinates of the last noise row `z_{t−1}` (zero at step 0):
//! `14 + ≤ 50 + 4·((m + 2)·d + min(d, 8)) + 4` bytes. An [`FftStream`](crate::FftStream)'s has
//! `h = m` (the block), `r = 0`, then the current block's noise (`m·d`, row-major), the carry, the
//! running sum and its compensation: `14 + ≤ 50 + 4·(m + 3)·d + 4` bytes (the spectra come from the
//! blob, the draws are scratch).
//!
//! The frame is checked (magic, version, length, checksum) before the payload is parsed; bytes
//! after the checksum are ignored, so a whole flash slot may be passed. Version 1 (before the
//! compensation) is refused with
//! [`Error::UnsupportedCheckpointVersion`](crate::Error::UnsupportedCheckpointVersion): its sum
//! alone would resume a stream whose releases differ from the uninterrupted one's. A checkpoint
//! holds the raw running sum and the recent noise: it is as sensitive as the data, and the CRC
//! detects corruption, not forgery (see `SECURITY.md`).
//!
//! # Layout
//!
//! The release counter and [`Resumable`] (`counter.rs`), epoch keys (`keys.rs`), the blob's
//! fingerprint (`fingerprint.rs`), the bytes above (`wire.rs`), what is written and every check
//! of restore, for any form (`protocol.rs`), and what each form's state is and how its key is
//! checked (`forms.rs`).

mod counter;
mod fingerprint;
mod forms;
mod keys;
mod protocol;
#[cfg(test)]
mod tests;
mod wire;

pub(crate) use counter::sealed;
pub use counter::{ReleaseCounter, Resumable};
pub use fingerprint::BlobFingerprint;
pub use keys::{epoch_noise, stream_key};
pub use wire::{MAGIC, VERSION, frame_len};
