//! Checkpoint and restore: a stream survives a reboot without losing its place, without reusing
//! noise and without releasing a step twice.
//!
//! A device that reboots mid-stream must continue the *same* stream: a fresh stream would restart
//! the running sums, and a fresh stream under the *old* key would replay noise rows that have
//! already been released. [`Stream::checkpoint`] writes the whole state — step, the ring of the
//! last `h` noise rows, `β`, the running sum and its compensation — into a caller buffer (to be written to flash), bound
//! to the blob, the noise scale, the dimension and shard, and the key's epoch;
//! [`Stream::restore`] loads it into a freshly built stream, whose releases from then on are
//! bit-for-bit those of the uninterrupted stream.
//!
//! # The rules
//!
//! Two values live in the device's **monotonic, durable storage** (a hardware monotonic counter,
//! RPMB, a secure element, or at least a wear-levelled flash record that is never rolled back):
//! the [`ReleaseCounter`], `(epoch, released)`.
//!
//! 1. **Keys.** The noise key of a stream is `stream_key(root, epoch)` ([`stream_key`],
//!    [`epoch_noise`]): a PRF of a device root secret (provisioned once, used for nothing else)
//!    and the epoch. A **cold start** — no usable checkpoint — first calls
//!    [`ReleaseCounter::cold_start`] (epoch + 1, released 0) and persists the counter, and only
//!    then derives the key. Epochs never repeat, so neither do keys: a cold start never reuses a
//!    previous stream's noise. Epoch 0 is never keyed ([`Error::EpochNotStarted`]), so a device
//!    that forgets the cold start fails instead of reusing the factory key.
//! 2. **Releases.** Each step runs *compute → checkpoint → count → emit*: [`Stream::step`] (nothing
//!    leaves the device yet), [`Stream::checkpoint`] written to storage,
//!    [`ReleaseCounter::record`] persisted, and only then the release is sent. Hence the counter
//!    is never behind what was emitted, and the newest checkpoint is never behind the counter.
//! 3. **Restore.** [`Stream::restore`] refuses, with the stream untouched, a checkpoint of another
//!    epoch ([`Error::CheckpointEpochMismatch`]) and a **stale** one, whose step is behind the
//!    counter's `released` ([`Error::StaleCheckpoint`]): restoring it would compute steps that
//!    may already have been released again — with the same noise and possibly other inputs
//!    (their difference reveals the inputs exactly) or, under a new key, with fresh noise (two
//!    independent releases of one step: double the privacy cost). A checkpoint *ahead* of the
//!    counter is accepted: the steps in between were computed but never emitted, and dropping
//!    an output is harmless. After a refusal the device cold-starts a new epoch; the old
//!    stream's running totals are lost, its privacy is not.
//!
//! Restore also checks that the checkpoint belongs to the stream it is loaded into: the blob's
//! fingerprint ([`BlobFingerprint`]: its verified CRC-32 and decoder tables), the noise scale `σ·ζ·sens`, the
//! dimension and shard, `(h, r)`, and the noise key itself — the newest ring row must equal the row
//! the stream's [`NoiseSource`] regenerates ([`Error::CheckpointKeyMismatch`]). Resuming under a
//! different decoder would release noise `B̂ z` of no analysed `B̂`.
//!
//! The same rules, wire format and methods hold for every form, and for [`Replay`](crate::Replay),
//! which dispatches to them; only the key check differs:
//!
//! - [`BandMfStream`] (decoder 3): the ring holds `w = C⁻¹z` rather than `z`; its newest row
//!   `w_{t−1}` is recomputed from the regenerated `z_{t−1}` and the `b̂ − 1` rows before it, with
//!   the step's own operations, and must match bit for bit.
//! - [`BltStream`] (decoder 2): the buffers mix every past row, so none can be read back; the
//!   checkpoint ends with the first `min(d, 8)` coordinates of `z_{t−1}` (kept by the stream),
//!   which must equal the key's regeneration.
//! - [`FftStream`] (decoder 1): the current block's noise `B̂_m z_block` is recomputed for the
//!   first two coordinates (one transform) and must match over all `m` rows, bit for bit.
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
//! A [`BandMfStream`]'s checkpoint has the same frame and head with `h = b̂`, `r = 0`, then
//! `b̂·d` f32 — ring slots `0..b̂`, slot `t mod b̂` holding `w_t` — and, for the prefix sum, the
//! running sum and its compensation (`2·d` f32): `14 + ≤ 50 + 4·(b̂ + 2)·d + 4` bytes.
//!
//! A [`BltStream`]'s has `h = m` (buffers), `r = 0`, then the `m·d` buffers (buffer `j` of
//! coordinate `c` at `j·d + c`), the running sum, its compensation, and the first `min(d, 8)`
//! coordinates of the last noise row `z_{t−1}` (zero at step 0): `14 + ≤ 50 + 4·((m + 2)·d +
//! min(d, 8)) + 4` bytes. An [`FftStream`]'s has `h = m` (the block), `r = 0`, then the current
//! block's noise (`m·d`, row-major), the carry, the running sum and its compensation: `14 + ≤
//! 50 + 4·(m + 3)·d + 4` bytes (the spectra come from the blob, the draws are scratch).
//!
//! The frame is checked (magic, version, length, checksum) before the payload is parsed; bytes
//! after the checksum are ignored, so a whole flash slot may be passed. Version 1 (before the
//! compensation) is refused with [`Error::UnsupportedCheckpointVersion`]: its sum alone would
//! resume a stream whose releases differ from the uninterrupted one's. A checkpoint holds the raw
//! running sum and the recent noise: it is as sensitive as the data, and the CRC detects
//! corruption, not forgery (see `SECURITY.md`).

use chacha20::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use mfc_formats::{Decoder, F32Table, Mechanism, Validated};

use crate::bandmf::{BandMfStream, forward_substitution};
use crate::blt::BltStream;
use crate::fft::FftStream;
use crate::noise::{ChaChaNoise, KEY_WORD, NoiseSource};
use crate::{Error, Stream};

/// The first eight bytes of every checkpoint.
pub const MAGIC: [u8; 8] = *b"MFCCKPT\0";
/// The checkpoint format version this runtime reads and writes (2: the running sum's
/// compensation follows the sum).
pub const VERSION: u16 = 2;
/// Bytes before the payload: magic, version, payload length.
const PREFIX_LEN: usize = 14;
/// The largest postcard encoding of [`Head`]: 5 + 4 + 5 + 10 + 1 + 5 + 5 + 10 + 5.
const MAX_HEAD_LEN: usize = 50;
/// Coordinates of the newest noise row compared with the key's regeneration on restore.
pub(crate) const KEY_CHECK: usize = 8;

/// The CRC-32 of checkpoints: the blob's (ISO-HDLC), but table-driven on every target, since a
/// device checkpoints every step while it checks its blob once (the formats crate computes it bit
/// by bit on bare metal). One 1 KiB table there, 16 on hosts, where checkpoints can be large.
#[cfg(target_os = "none")]
type CrcTables = crc::Table<1>;
#[cfg(not(target_os = "none"))]
type CrcTables = crc::Table<16>;

fn checksum(bytes: &[u8]) -> u32 {
    const CRC: crc::Crc<u32, CrcTables> = crc::Crc::<u32, CrcTables>::new(&crc::CRC_32_ISO_HDLC);
    CRC.checksum(bytes)
}

/// What the device persists in monotonic storage: the epoch of the current key and the number of
/// steps of that epoch's stream that may have been released. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReleaseCounter {
    epoch: u64,
    released: u32,
}

impl ReleaseCounter {
    /// The factory state: no epoch started, nothing released. Its epoch (0) is never keyed.
    pub const FACTORY: Self = Self {
        epoch: 0,
        released: 0,
    };

    /// The counter as read back from storage.
    pub const fn new(epoch: u64, released: u32) -> Self {
        Self { epoch, released }
    }

    /// The epoch of the current key.
    pub const fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Steps of the current epoch's stream that may have been released.
    pub const fn released(&self) -> u32 {
        self.released
    }

    /// The counter of a cold start: the next epoch, nothing released. Persist it **before**
    /// deriving the new key ([`epoch_noise`]) and releasing anything.
    pub fn cold_start(self) -> Result<Self, Error> {
        let epoch = self.epoch.checked_add(1).ok_or(Error::EpochExhausted)?;
        Ok(Self { epoch, released: 0 })
    }

    /// Records that `stream`'s latest step is about to be released: `released` becomes
    /// `stream.steps_released()`. Persist the counter after the checkpoint and before the
    /// release leaves the device. Refuses ([`Error::StaleCheckpoint`], counter untouched) a
    /// stream behind the counter: its steps were released already.
    pub fn record(&mut self, stream: &impl Resumable) -> Result<(), Error> {
        let step = stream.steps_released();
        if step < self.released {
            return Err(Error::StaleCheckpoint {
                step,
                released: self.released,
            });
        }
        self.released = step;
        Ok(())
    }

    /// The 12 bytes to persist: epoch (u64) then released (u32), little-endian.
    pub fn to_bytes(&self) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&self.epoch.to_le_bytes());
        out[8..].copy_from_slice(&self.released.to_le_bytes());
        out
    }

    /// The counter from the bytes of [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: [u8; 12]) -> Self {
        let mut epoch = [0u8; 8];
        epoch.copy_from_slice(&bytes[..8]);
        let mut released = [0u8; 4];
        released.copy_from_slice(&bytes[8..]);
        Self {
            epoch: u64::from_le_bytes(epoch),
            released: u32::from_le_bytes(released),
        }
    }
}

/// The noise key of epoch `epoch`: 32 bytes of ChaCha20 keyed by `root` with nonce `epoch`
/// (ChaCha20 as a PRF of the epoch), from word `2⁶⁷` of that stream on — the half of every
/// ChaCha stream that noise never reads ([`noise`](crate::noise), "Limits"). The key domain is
/// thus apart from the noise domain: a [`ChaChaNoise`] seeded with `root` itself never draws
/// these bytes for any row. `root` is a device secret used only for this derivation.
pub fn stream_key(root: &[u8; 32], epoch: u64) -> [u8; 32] {
    let mut prf = ChaCha20Rng::from_seed(*root);
    prf.set_stream(epoch);
    prf.set_word_pos(KEY_WORD);
    let mut key = [0u8; 32];
    prf.fill_bytes(&mut key);
    key
}

/// The noise source of the counter's epoch: [`ChaChaNoise`] keyed by
/// [`stream_key`]`(root, counter.epoch())`. Refuses the all-zero root ([`Error::WeakSeed`]) and
/// epoch 0 ([`Error::EpochNotStarted`]: call [`ReleaseCounter::cold_start`] first).
pub fn epoch_noise(root: &[u8; 32], counter: &ReleaseCounter) -> Result<ChaChaNoise, Error> {
    if *root == [0; 32] {
        return Err(Error::WeakSeed);
    }
    if counter.epoch == 0 {
        return Err(Error::EpochNotStarted);
    }
    ChaChaNoise::from_seed(stream_key(root, counter.epoch))
}

/// The identity of a blob for checkpoints: its CRC-32 (as `mfc inspect` prints it) and the
/// decoder tables the stream replays. [`BlobFingerprint::load`] parses the blob and takes the
/// checksum it has just verified, so binding checkpoints to the blob costs nothing at run time.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlobFingerprint<'m> {
    crc32: u32,
    decoder: Decoder<'m>,
    steps: u32,
    clip_norm: f32,
}

impl<'m> BlobFingerprint<'m> {
    /// Parses and validates a blob ([`Mechanism::from_bytes`]) and fingerprints it with the
    /// CRC-32 stored in it — which the parse has just verified, so this costs nothing more.
    /// Every decoder form has checkpoints.
    pub fn load(blob: &'m [u8]) -> Result<(Validated<'m>, Self), Error> {
        let mechanism = Mechanism::from_bytes(blob)?;
        let decoder = mechanism.decoder;
        let crc32 = blob
            .len()
            .checked_sub(mfc_formats::CHECKSUM_LEN)
            .and_then(|at| blob.get(at..))
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or(Error::InvalidBlob(mfc_formats::Error::Truncated))?;
        let fingerprint = Self {
            crc32,
            decoder,
            // The horizon the stream stops at (for a BLT valid for every horizon, u32::MAX).
            steps: match decoder {
                Decoder::Blt(_) => crate::blt::horizon(&mechanism),
                _ => mechanism.header.steps,
            },
            clip_norm: crate::stream::clip_norm(&mechanism)?,
        };
        Ok((mechanism, fingerprint))
    }

    /// The blob's CRC-32.
    pub fn crc32(&self) -> u32 {
        self.crc32
    }

    /// Whether `stream` replays this blob: same decoder (the same bytes in place, or equal
    /// tables), horizon and clip norm.
    fn describes(&self, stream: &impl Checkpointable) -> bool {
        let same = |a: F32Table<'_>, b: F32Table<'_>| {
            core::ptr::eq(a.as_bytes(), b.as_bytes()) || a.as_bytes() == b.as_bytes()
        };
        let decoder = match (&self.decoder, &stream.decoder()) {
            (Decoder::BandedLowRank(ours), Decoder::BandedLowRank(theirs)) => {
                ours.band == theirs.band
                    && ours.rank == theirs.rank
                    && same(ours.diagonals, theirs.diagonals)
                    && same(ours.left, theirs.left)
                    && same(ours.right, theirs.right)
            }
            (Decoder::BandMf(ours), Decoder::BandMf(theirs)) => {
                ours.kind == theirs.kind
                    && ours.bands == theirs.bands
                    && same(ours.encoder, theirs.encoder)
            }
            (Decoder::Blt(ours), Decoder::Blt(theirs)) => {
                same(ours.theta, theirs.theta) && same(ours.omega, theirs.omega)
            }
            (Decoder::Fft(ours), Decoder::Fft(theirs)) => {
                ours.kind == theirs.kind
                    && ours.block == theirs.block
                    && ours.stamps == theirs.stamps
                    && same(ours.kernel, theirs.kernel)
                    && same(ours.generator, theirs.generator)
            }
            _ => false,
        };
        decoder
            && self.steps == stream.horizon()
            && self.clip_norm.to_bits() == stream.clip_norm().to_bits()
    }
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A stream with checkpoints: [`Stream`] (banded plus low rank), [`BltStream`], [`FftStream`],
/// [`BandMfStream`] and [`Replay`](crate::Replay). Sealed; what [`ReleaseCounter::record`]
/// reads.
pub trait Resumable: sealed::Sealed {
    /// Steps computed so far.
    fn steps_released(&self) -> u32;
}

/// What [`checkpoint`](Stream::checkpoint) and [`restore`](Stream::restore) need of a stream.
pub(crate) trait Checkpointable: Resumable {
    fn decoder(&self) -> Decoder<'_>;
    fn horizon(&self) -> u32;
    fn clip_norm(&self) -> f32;
    /// `σ·ζ·sens`, as the stream applies it (`f32`).
    fn noise_scale(&self) -> f32;
    fn dim(&self) -> usize;
    fn offset(&self) -> u64;
    fn whole_row(&self) -> bool;
    /// The head's `(band, rank)`: `(h, r)`, or `(b̂, 0)` for BandMF.
    fn shape(&self) -> (u32, u32);
    /// The state in wire order (four parts, some possibly empty).
    fn state(&self) -> [&[f32]; 4];
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]);
    /// Whether the newest noise row of a checkpoint at `step > 0`, whose state float `k` is
    /// `word(k)`, is the one this stream's key generates (its first [`KEY_CHECK`]
    /// coordinates, bit for bit).
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool;
}

impl<N: NoiseSource> sealed::Sealed for Stream<'_, '_, N> {}
impl<N: NoiseSource> sealed::Sealed for BandMfStream<'_, '_, N> {}
impl<N: NoiseSource> sealed::Sealed for BltStream<'_, '_, N> {}
impl<N: NoiseSource> sealed::Sealed for FftStream<'_, '_, N> {}

impl<N: NoiseSource> Resumable for Stream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        Stream::steps_released(self)
    }
}

impl<N: NoiseSource> Resumable for BandMfStream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        BandMfStream::steps_released(self)
    }
}

impl<N: NoiseSource> Resumable for BltStream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        BltStream::steps_released(self)
    }
}

impl<N: NoiseSource> Resumable for FftStream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        FftStream::steps_released(self)
    }
}

/// The first [`KEY_CHECK`] coordinates of noise row `step` of `noise` (fewer if `dim` is).
fn regenerate<N: NoiseSource>(
    noise: &mut N,
    step: usize,
    offset: u64,
    dim: usize,
) -> ([f32; KEY_CHECK], usize) {
    let mut row = [0.0f32; KEY_CHECK];
    let len = dim.min(KEY_CHECK);
    noise.fill_standard_normal(step as u64, offset, &mut row[..len]);
    (row, len)
}

impl<N: NoiseSource> Checkpointable for Stream<'_, '_, N> {
    fn decoder(&self) -> Decoder<'_> {
        Decoder::BandedLowRank(*Stream::decoder(self))
    }
    fn horizon(&self) -> u32 {
        Stream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        Stream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        Stream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        Stream::dim(self)
    }
    fn offset(&self) -> u64 {
        Stream::offset(self)
    }
    fn whole_row(&self) -> bool {
        Stream::whole_row(self)
    }
    fn shape(&self) -> (u32, u32) {
        let d = Stream::decoder(self);
        (d.band, d.rank)
    }
    fn state(&self) -> [&[f32]; 4] {
        Stream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        Stream::state_mut(self)
    }
    /// The newest ring row is `z_{step−1}` itself.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let (newest, dim, offset) = (step as usize - 1, Stream::dim(self), Stream::offset(self));
        let slot = newest % Stream::decoder(self).band as usize;
        let (row, len) = regenerate(self.noise_mut(), newest, offset, dim);
        (0..len).all(|k| row[k].to_bits() == word(slot * dim + k).to_bits())
    }
}

impl<N: NoiseSource> Checkpointable for BandMfStream<'_, '_, N> {
    fn decoder(&self) -> Decoder<'_> {
        Decoder::BandMf(*BandMfStream::decoder(self))
    }
    fn horizon(&self) -> u32 {
        BandMfStream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        BandMfStream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        BandMfStream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        BandMfStream::dim(self)
    }
    fn offset(&self) -> u64 {
        BandMfStream::offset(self)
    }
    fn whole_row(&self) -> bool {
        BandMfStream::whole_row(self)
    }
    fn shape(&self) -> (u32, u32) {
        (BandMfStream::decoder(self).bands, 0)
    }
    fn state(&self) -> [&[f32]; 4] {
        BandMfStream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        BandMfStream::state_mut(self)
    }
    /// The newest ring row is `w_{step−1}`: recomputed from the regenerated `z_{step−1}` and the
    /// ring's `b̂ − 1` rows before it, with the step's own operations.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let decoder = *BandMfStream::decoder(self);
        let (newest, dim, bands) = (step as usize - 1, BandMfStream::dim(self), decoder.bands());
        let offset = BandMfStream::offset(self);
        let (z, len) = regenerate(self.noise_mut(), newest, offset, dim);
        let Some(row) = decoder.row(newest) else {
            return false;
        };
        (0..len).all(|k| {
            let at = |t: usize| word((t % bands) * dim + k);
            let w = forward_substitution(z[k], row, newest, |l| at(newest - l));
            w.to_bits() == at(newest).to_bits()
        })
    }
}

impl<N: NoiseSource> Checkpointable for BltStream<'_, '_, N> {
    fn decoder(&self) -> Decoder<'_> {
        Decoder::Blt(*BltStream::decoder(self))
    }
    fn horizon(&self) -> u32 {
        BltStream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        BltStream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        BltStream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        BltStream::dim(self)
    }
    fn offset(&self) -> u64 {
        0
    }
    fn whole_row(&self) -> bool {
        true
    }
    fn shape(&self) -> (u32, u32) {
        (BltStream::decoder(self).buffers() as u32, 0)
    }
    fn state(&self) -> [&[f32]; 4] {
        BltStream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        BltStream::state_mut(self)
    }
    /// The buffers mix every past row, so the state ends with the first coordinates of
    /// `z_{step−1}` itself (after `(m + 2)·d` floats), regenerated here.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let dim = BltStream::dim(self);
        let Some(at) = (BltStream::decoder(self).buffers() + 2).checked_mul(dim) else {
            return false;
        };
        let (row, len) = regenerate(self.noise_mut(), step as usize - 1, 0, dim);
        (0..len).all(|k| row[k].to_bits() == word(at + k).to_bits())
    }
}

impl<N: NoiseSource> Checkpointable for FftStream<'_, '_, N> {
    fn decoder(&self) -> Decoder<'_> {
        Decoder::Fft(*FftStream::decoder(self))
    }
    fn horizon(&self) -> u32 {
        FftStream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        FftStream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        FftStream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        FftStream::dim(self)
    }
    fn offset(&self) -> u64 {
        0
    }
    fn whole_row(&self) -> bool {
        true
    }
    fn shape(&self) -> (u32, u32) {
        (FftStream::decoder(self).block, 0)
    }
    fn state(&self) -> [&[f32]; 4] {
        FftStream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        FftStream::state_mut(self)
    }
    /// The block noise is `B̂_m` of the block's draws: the first two coordinates of the block of
    /// `step − 1` are recomputed and compared.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        FftStream::key_matches(self, step, word)
    }
}

/// The fixed-size part of a checkpoint's payload (field order is wire order).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Head {
    blob_crc32: u32,
    noise_scale: f32,
    dim: u32,
    offset: u64,
    whole_row: bool,
    band: u32,
    rank: u32,
    epoch: u64,
    step: u32,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Checks a checkpoint's frame (magic, version, length, checksum) and returns its payload.
fn payload(bytes: &[u8]) -> Result<&[u8], Error> {
    if bytes.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(Error::MalformedCheckpoint);
    }
    let version = bytes
        .get(8..10)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or(Error::MalformedCheckpoint)?;
    if version != VERSION {
        return Err(Error::UnsupportedCheckpointVersion { found: version });
    }
    let length = u32_at(bytes, 10).ok_or(Error::MalformedCheckpoint)? as usize;
    let end = PREFIX_LEN
        .checked_add(length)
        .ok_or(Error::MalformedCheckpoint)?;
    let stored = u32_at(bytes, end).ok_or(Error::MalformedCheckpoint)?;
    let computed = checksum(&bytes[..end]);
    if stored != computed {
        return Err(Error::CheckpointChecksumMismatch { stored, computed });
    }
    Ok(&bytes[PREFIX_LEN..end])
}

/// Bytes [`checkpoint`] may need: at most `14 + 50 + 4·(floats of state) + 4`.
fn capacity(stream: &impl Checkpointable) -> usize {
    let floats: usize = stream.state().iter().map(|part| part.len()).sum();
    PREFIX_LEN + MAX_HEAD_LEN + 4 * floats + 4
}

/// [`Stream::checkpoint`] for any stream with checkpoints.
fn checkpoint(
    stream: &impl Checkpointable,
    blob: &BlobFingerprint<'_>,
    counter: &ReleaseCounter,
    out: &mut [u8],
) -> Result<usize, Error> {
    if !blob.describes(stream) {
        return Err(Error::CheckpointMismatch { field: "blob" });
    }
    let step = stream.steps_released();
    if step < counter.released {
        return Err(Error::StaleCheckpoint {
            step,
            released: counter.released,
        });
    }
    let state = stream.state();
    let (band, rank) = stream.shape();
    let head = Head {
        blob_crc32: blob.crc32,
        noise_scale: stream.noise_scale(),
        dim: u32::try_from(stream.dim()).map_err(|_| Error::InvalidDimension)?,
        offset: stream.offset(),
        whole_row: stream.whole_row(),
        band,
        rank,
        epoch: counter.epoch,
        step,
    };
    let too_small = Error::CheckpointBufferTooSmall {
        needed: capacity(stream),
        found: out.len(),
    };
    let body = out.get_mut(PREFIX_LEN..).ok_or(too_small)?;
    let head_len = postcard::to_slice(&head, body)
        .map_err(|_| too_small)?
        .len();
    let floats: usize = state.iter().map(|part| part.len()).sum();
    let length = head_len + 4 * floats;
    let end = PREFIX_LEN + length;
    if out.len() < end + 4 {
        return Err(too_small);
    }
    for (word, x) in out[PREFIX_LEN + head_len..end]
        .chunks_exact_mut(4)
        .zip(state.iter().flat_map(|part| part.iter()))
    {
        word.copy_from_slice(&x.to_le_bytes());
    }
    out[..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_le_bytes());
    let declared = u32::try_from(length).map_err(|_| too_small)?;
    out[10..14].copy_from_slice(&declared.to_le_bytes());
    let crc = checksum(&out[..end]);
    out[end..end + 4].copy_from_slice(&crc.to_le_bytes());
    Ok(end + 4)
}

/// [`Stream::restore`] for any stream with checkpoints.
fn restore(
    stream: &mut impl Checkpointable,
    blob: &BlobFingerprint<'_>,
    checkpoint: &[u8],
    counter: &ReleaseCounter,
) -> Result<(), Error> {
    if stream.steps_released() != 0 {
        return Err(Error::StreamAlreadyStarted);
    }
    let payload = payload(checkpoint)?;
    let (head, floats): (Head, _) =
        mfc_formats::canonical::take_from_bytes(payload).map_err(|_| Error::MalformedCheckpoint)?;
    let total: usize = stream.state().iter().map(|part| part.len()).sum();
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
    if floats.len() != 4 * total {
        return Err(Error::MalformedCheckpoint);
    }
    if head.step > stream.horizon() {
        return mismatch("step");
    }
    if head.noise_scale.to_bits() != stream.noise_scale().to_bits() {
        return mismatch("noise scale");
    }
    if !blob.describes(stream) || blob.crc32 != head.blob_crc32 {
        return mismatch("blob");
    }
    if head.epoch != counter.epoch {
        return Err(Error::CheckpointEpochMismatch {
            checkpoint: head.epoch,
            counter: counter.epoch,
        });
    }
    if head.step < counter.released {
        return Err(Error::StaleCheckpoint {
            step: head.step,
            released: counter.released,
        });
    }
    let word = |index: usize| {
        let w = floats.get(4 * index..4 * index + 4).unwrap_or(&[0; 4]);
        f32::from_le_bytes([w[0], w[1], w[2], w[3]])
    };
    // A stream's state is finite (noise below 10.09σ, sums of clipped inputs); a NaN or an
    // infinity would poison every later release, and with the CRC only a forged checkpoint
    // carries one.
    if (0..total).any(|k| !word(k).is_finite()) {
        return Err(Error::MalformedCheckpoint);
    }
    // The newest noise row must be the one this stream's key generates.
    if head.step > 0 && !stream.key_matches(head.step, &word) {
        return Err(Error::CheckpointKeyMismatch);
    }
    let (step, parts) = stream.state_mut();
    for (k, x) in parts
        .into_iter()
        .flat_map(|part| part.iter_mut())
        .enumerate()
    {
        *x = word(k);
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
                capacity(self)
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
                checkpoint(self, blob, counter, out)
            }

            /// Loads a checkpoint into this stream, which must be freshly built (no step taken)
            /// from the same blob (`blob`, from [`BlobFingerprint::load`]), dimension or shard,
            /// noise multiplier and epoch key ([`epoch_noise`]) as the stream that wrote it. From
            /// then on the stream releases exactly what the uninterrupted stream would have.
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
                restore(self, blob, checkpoint, counter)
            }
        }
    };
}

checkpoint_methods!(Stream, "(h + r + 2)·d");
checkpoint_methods!(BandMfStream, "(b̂ + 2)·d");
checkpoint_methods!(BltStream, "((m + 2)·d + min(d, 8))");
checkpoint_methods!(FftStream, "(m + 3)·d");

#[cfg(test)]
mod tests {
    extern crate std;

    use std::vec::Vec;

    use proptest::prelude::*;

    use super::*;
    use mfc_formats::{
        BandedLowRank, Calibration, ErrorSummary, F32Table, Header, Neighbouring, Participation,
        Sensitivity, SensitivityMethod, Workload, encode_f32s,
    };

    const ROOT: [u8; 32] = [0x42; 32];
    const N: u32 = 12;
    const H: usize = 3;
    const R: usize = 2;
    const D: usize = 5;

    /// The bytes of a valid blob with `n = 12, h = 3, r = 2`; `salt` varies the coefficients.
    fn blob(salt: f32) -> Vec<u8> {
        let n = N as usize;
        let mut diagonals = Vec::new();
        for i in 0..n {
            for k in 0..H {
                diagonals.push(if k > i {
                    0.0
                } else {
                    1.0 / (1.0 + k as f32) + salt
                });
            }
        }
        let left: Vec<f32> = (0..n * R).map(|j| 0.1 + 0.01 * j as f32).collect();
        let right: Vec<f32> = (0..n * R).map(|j| 0.2 - 0.005 * j as f32).collect();
        let (d, l, r) = (
            encode_f32s(diagonals),
            encode_f32s(left),
            encode_f32s(right),
        );
        let mechanism = Mechanism {
            header: Header {
                workload: Workload::PrefixSum,
                steps: N,
                participation: Participation::Single,
                neighbouring: Neighbouring::AddOrRemove,
                sensitivity: Sensitivity {
                    value: 1.3,
                    method: SensitivityMethod::MaxColumnNorm,
                },
                clip_norm: 2.0,
                calibration: Some(Calibration {
                    noise_multiplier: 0.7,
                    target: None,
                }),
                error: ErrorSummary {
                    sqrt_loss: 1.0,
                    optimal_sqrt_loss: None,
                    max_step_stddev: 1.0,
                    final_step_stddev: 1.0,
                },
                generator: "checkpoint test",
            },
            decoder: Decoder::BandedLowRank(BandedLowRank {
                band: H as u32,
                rank: R as u32,
                diagonals: F32Table::new(&d).unwrap(),
                left: F32Table::new(&l).unwrap(),
                right: F32Table::new(&r).unwrap(),
            }),
        };
        mechanism.to_vec().unwrap()
    }

    fn input(step: usize) -> [f32; D] {
        core::array::from_fn(|k| ((step * 7 + k * 3) % 5) as f32 - 1.5)
    }

    const WS: usize = (H + R + 2) * D;

    /// Releases of the whole uninterrupted stream of epoch 1.
    fn uninterrupted(bytes: &[u8]) -> Vec<[f32; D]> {
        let mechanism = Mechanism::from_bytes(bytes).unwrap();
        let counter = ReleaseCounter::FACTORY.cold_start().unwrap();
        let mut ws = [0.0f32; WS];
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        (0..N as usize)
            .map(|i| {
                let mut out = [0.0; D];
                stream.step(&input(i), &mut out).unwrap();
                out
            })
            .collect()
    }

    /// Runs epoch 1 for `steps` steps following the protocol; returns the last checkpoint, the
    /// checkpoint after `early` steps and the counter.
    fn run_until(bytes: &[u8], steps: usize, early: usize) -> (Vec<u8>, Vec<u8>, ReleaseCounter) {
        let (mechanism, blob) = BlobFingerprint::load(bytes).unwrap();
        let mut counter = ReleaseCounter::FACTORY.cold_start().unwrap();
        let mut ws = [0.0f32; WS];
        let mut stream =
            Stream::new(mechanism, D, &mut ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap();
        let mut slot = std::vec![0u8; stream.checkpoint_capacity()];
        // The checkpoint of the fresh stream, before any step.
        let len = stream.checkpoint(&blob, &counter, &mut slot).unwrap();
        let mut old = slot[..len].to_vec();
        for i in 0..steps {
            let mut out = [0.0; D];
            stream.step(&input(i), &mut out).unwrap();
            let len = stream.checkpoint(&blob, &counter, &mut slot).unwrap();
            counter.record(&stream).unwrap();
            if i + 1 == early {
                old = slot[..len].to_vec();
            }
        }
        (slot, old, counter)
    }

    /// The checkpoint's CRC-32 (table-driven) is the blob's (bitwise on bare metal): both give the
    /// standard check value of CRC-32/ISO-HDLC.
    #[test]
    fn checkpoint_and_blob_checksums_are_crc32_iso_hdlc() {
        assert_eq!(checksum(b"123456789"), 0xcbf4_3926);
        assert_eq!(mfc_formats::checksum(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn a_restored_stream_continues_the_uninterrupted_one_bit_for_bit() {
        let bytes = blob(0.0);
        let reference = uninterrupted(&bytes);
        for cut in [0, 1, 2, 3, 4, 7, 11, 12] {
            let (slot, _, counter) = run_until(&bytes, cut, 0);
            // Reboot: everything in RAM is gone; the counter and the slot survive.
            let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
            let mut ws = [f32::NAN; WS];
            let noise = epoch_noise(&ROOT, &counter).unwrap();
            let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
            stream.restore(&fp, &slot, &counter).unwrap();
            assert_eq!(stream.steps_released(), cut as u32);
            for (i, expected) in reference.iter().enumerate().skip(cut) {
                let mut out = [0.0; D];
                stream.step(&input(i), &mut out).unwrap();
                assert_eq!(
                    out.map(f32::to_bits),
                    expected.map(f32::to_bits),
                    "cut {cut} step {i}"
                );
            }
            let mut out = [0.0; D];
            assert!(matches!(
                stream.step(&input(0), &mut out),
                Err(Error::StreamFinished { .. })
            ));
        }
    }

    #[test]
    fn the_fingerprint_is_the_verified_blob_checksum() {
        let mut bytes = blob(0.25);
        let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
        assert_eq!(mechanism, Mechanism::from_bytes(&bytes).unwrap());
        let stored = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
        assert_eq!(fp.crc32(), stored);
        assert_eq!(fp.crc32(), mfc_formats::checksum(&bytes[..bytes.len() - 4]));
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        assert!(matches!(
            BlobFingerprint::load(&bytes),
            Err(Error::InvalidBlob(
                mfc_formats::Error::ChecksumMismatch { .. }
            ))
        ));
    }

    /// A fresh stream of epoch 1 and the counter as read back after `released` releases.
    fn fresh<'w>(bytes: &'w [u8], ws: &'w mut [f32]) -> Stream<'w, 'w, ChaChaNoise> {
        let counter = ReleaseCounter::new(1, 0);
        let mechanism = Mechanism::from_bytes(bytes).unwrap();
        Stream::new(mechanism, D, ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap()
    }

    fn assert_fresh(stream: &mut Stream<'_, '_, ChaChaNoise>, reference: &[[f32; D]]) {
        assert_eq!(stream.steps_released(), 0);
        let mut out = [0.0; D];
        stream.step(&input(0), &mut out).unwrap();
        assert_eq!(out, reference[0], "a refused restore changed the stream");
    }

    #[test]
    fn a_stale_checkpoint_is_refused_and_the_stream_is_untouched() {
        let bytes = blob(0.0);
        let reference = uninterrupted(&bytes);
        let (_, old, counter) = run_until(&bytes, 9, 5);
        assert_eq!(counter.released(), 9);
        let (_, fp) = BlobFingerprint::load(&bytes).unwrap();
        let mut ws = [0.0f32; WS];
        let mut stream = fresh(&bytes, &mut ws);
        assert_eq!(
            stream.restore(&fp, &old, &counter),
            Err(Error::StaleCheckpoint {
                step: 5,
                released: 9
            })
        );
        assert_fresh(&mut stream, &reference);
        // The same checkpoint is fine for a counter that has not moved past it.
        let mut ws = [0.0f32; WS];
        let mut stream = fresh(&bytes, &mut ws);
        stream
            .restore(&fp, &old, &ReleaseCounter::new(1, 5))
            .unwrap();
        // A checkpoint ahead of the counter (crash between checkpoint and count) is accepted.
        let mut ws = [0.0f32; WS];
        let mut stream = fresh(&bytes, &mut ws);
        stream
            .restore(&fp, &old, &ReleaseCounter::new(1, 4))
            .unwrap();
        assert_eq!(stream.steps_released(), 5);
        // A restored stream is not a fresh one.
        assert_eq!(
            stream.restore(&fp, &old, &ReleaseCounter::new(1, 4)),
            Err(Error::StreamAlreadyStarted)
        );
    }

    #[test]
    fn the_counter_never_moves_back_and_a_stream_behind_it_cannot_checkpoint() {
        let bytes = blob(0.0);
        let (_, blob_id) = BlobFingerprint::load(&bytes).unwrap();
        let mut ws = [0.0f32; WS];
        let stream = fresh(&bytes, &mut ws);
        let mut counter = ReleaseCounter::new(1, 3);
        let mut slot = [0u8; 512];
        assert_eq!(
            stream.checkpoint(&blob_id, &counter, &mut slot),
            Err(Error::StaleCheckpoint {
                step: 0,
                released: 3
            })
        );
        assert_eq!(
            counter.record(&stream),
            Err(Error::StaleCheckpoint {
                step: 0,
                released: 3
            })
        );
        assert_eq!(counter, ReleaseCounter::new(1, 3));
        assert_eq!(ReleaseCounter::from_bytes(counter.to_bytes()), counter);
        assert_eq!(
            ReleaseCounter::new(u64::MAX, 0).cold_start(),
            Err(Error::EpochExhausted)
        );
    }

    #[test]
    fn a_checkpoint_of_another_blob_dimension_or_noise_is_refused() {
        let bytes = blob(0.0);
        let other = blob(0.5);
        let (slot, _, counter) = run_until(&bytes, 6, 0);
        let reference = uninterrupted(&bytes);
        // Another blob of the same shape.
        let (mechanism, fp) = BlobFingerprint::load(&other).unwrap();
        let mut ws = [0.0f32; WS];
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        assert_eq!(
            stream.restore(&fp, &slot, &counter),
            Err(Error::CheckpointMismatch { field: "blob" })
        );
        // The right blob passed to restore, but a stream built from another one.
        let (right, right_fp) = BlobFingerprint::load(&bytes).unwrap();
        assert_eq!(
            stream.restore(&right_fp, &slot, &counter),
            Err(Error::CheckpointMismatch { field: "blob" })
        );
        // Another dimension.
        let mut ws = [0.0f32; WS];
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::new(right, D - 1, &mut ws, noise).unwrap();
        assert_eq!(
            stream.restore(&right_fp, &slot, &counter),
            Err(Error::CheckpointMismatch {
                field: "dimension or shard"
            })
        );
        // Another noise multiplier.
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::with_noise_multiplier(right, D, &mut ws, noise, 0.71).unwrap();
        assert_eq!(
            stream.restore(&right_fp, &slot, &counter),
            Err(Error::CheckpointMismatch {
                field: "noise scale"
            })
        );
        // The checkpoint fingerprinted with another blob cannot be written.
        let mut ws = [0.0f32; WS];
        let stream = fresh(&bytes, &mut ws);
        let other_id = fp;
        let mut out = [0u8; 512];
        assert_eq!(
            stream.checkpoint(&other_id, &counter, &mut out),
            Err(Error::CheckpointMismatch { field: "blob" })
        );
        let mut ws = [0.0f32; WS];
        let mut stream = fresh(&bytes, &mut ws);
        assert_fresh(&mut stream, &reference);
    }

    #[test]
    fn a_cold_start_never_reuses_a_key_and_old_epochs_cannot_be_restored() {
        let bytes = blob(0.0);
        let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
        // Keys of successive epochs, and of different roots, all differ.
        let mut counter = ReleaseCounter::FACTORY;
        let mut keys = Vec::new();
        for _ in 0..64 {
            counter = counter.cold_start().unwrap();
            keys.push(stream_key(&ROOT, counter.epoch()));
            keys.push(stream_key(&[0x43; 32], counter.epoch()));
        }
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len());
        assert!(!keys.contains(&ROOT));
        // Epoch 0 and the zero root are never keyed.
        assert!(matches!(
            epoch_noise(&ROOT, &ReleaseCounter::FACTORY),
            Err(Error::EpochNotStarted)
        ));
        assert!(matches!(
            epoch_noise(&[0; 32], &ReleaseCounter::new(1, 0)),
            Err(Error::WeakSeed)
        ));
        // The first releases after a cold start differ from the previous epoch's.
        let (slot, _, counter) = run_until(&bytes, 4, 0);
        let next = counter.cold_start().unwrap();
        let mut first = [[0.0f32; D]; 2];
        for (out, c) in first.iter_mut().zip([counter, next]) {
            let mut ws = [0.0f32; WS];
            let noise = epoch_noise(&ROOT, &c).unwrap();
            let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
            stream.step(&input(0), out).unwrap();
        }
        assert!(first[0].iter().zip(&first[1]).all(|(a, b)| a != b));
        // After the cold start, the old epoch's checkpoint is refused ...
        let mut ws = [0.0f32; WS];
        let noise = epoch_noise(&ROOT, &next).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        assert_eq!(
            stream.restore(&fp, &slot, &next),
            Err(Error::CheckpointEpochMismatch {
                checkpoint: 1,
                counter: 2
            })
        );
        // ... and so is restoring it under the new key with the old counter.
        assert_eq!(
            stream.restore(&fp, &slot, &counter),
            Err(Error::CheckpointKeyMismatch)
        );
        assert_eq!(stream.steps_released(), 0);
    }

    /// The key of epoch `t` is not what a noise source seeded with the root draws for row `t`
    /// (the bytes `stream_key` once returned: stream `t` from word 0), nor any 32 bytes of the
    /// words block 0 of that row reads; it is the keys' own half of the stream, which no noise
    /// block of an addressable coordinate reaches.
    #[test]
    fn keys_and_noise_have_separate_domains() {
        for epoch in [1u64, 2, 7, 1 << 40] {
            let key = stream_key(&ROOT, epoch);
            let mut rng = ChaCha20Rng::from_seed(ROOT);
            rng.set_stream(epoch);
            let mut noise_words = [0u8; 4 * 2048];
            rand_core::Rng::fill_bytes(&mut rng, &mut noise_words);
            assert!(
                noise_words.windows(32).all(|w| w != key),
                "epoch {epoch}: the key is in the noise of row {epoch}"
            );
            let mut keys = ChaCha20Rng::from_seed(ROOT);
            keys.set_stream(epoch);
            keys.set_word_pos(1 << 67);
            let mut expected = [0u8; 32];
            rand_core::Rng::fill_bytes(&mut keys, &mut expected);
            assert_eq!(key, expected);
        }
        // The last noise block of the last addressable coordinate starts below the keys' words.
        let last_block = (crate::noise::MAX_COORDINATES - 1) / crate::noise::BLOCK;
        assert!(u128::from(last_block) << 26 < KEY_WORD);
        assert_eq!((u128::from(last_block) + 1) << 26, KEY_WORD);
        // The noise of row `epoch` seeded with the root is not keyed by the epoch's key.
        let mut from_root = ChaChaNoise::from_seed(ROOT).unwrap();
        let mut from_key = ChaChaNoise::from_seed(stream_key(&ROOT, 3)).unwrap();
        let (mut a, mut b) = ([0.0f32; 8], [0.0f32; 8]);
        from_root.fill_standard_normal(3, 0, &mut a);
        from_key.fill_standard_normal(0, 0, &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn a_shard_resumes_as_the_same_shard_only() {
        let bytes = blob(0.0);
        let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
        let counter = ReleaseCounter::new(1, 0);
        let noise = || epoch_noise(&ROOT, &counter).unwrap();
        let run = |stream: &mut Stream<'_, '_, ChaChaNoise>, steps: core::ops::Range<usize>| {
            steps
                .map(|i| {
                    let row = input(i);
                    let clip = crate::clip_factor(&row, 2.0);
                    let mut out = [0.0; 3];
                    stream.step_clipped(&row[1..4], clip, &mut out).unwrap();
                    out
                })
                .collect::<Vec<_>>()
        };
        let mut ws = [0.0f32; WS];
        let mut whole = Stream::shard(mechanism, D, 1..4, &mut ws, noise()).unwrap();
        let reference = run(&mut whole, 0..N as usize);
        let mut ws = [0.0f32; WS];
        let mut first = Stream::shard(mechanism, D, 1..4, &mut ws, noise()).unwrap();
        run(&mut first, 0..5);
        let mut slot = [0u8; 256];
        let len = first.checkpoint(&fp, &counter, &mut slot).unwrap();
        let slot = &slot[..len];
        let mut ws = [0.0f32; WS];
        let mut resumed = Stream::shard(mechanism, D, 1..4, &mut ws, noise()).unwrap();
        resumed.restore(&fp, slot, &counter).unwrap();
        assert_eq!(run(&mut resumed, 5..N as usize), reference[5..]);
        // Another shard of the same width, or an unsharded stream of 3 coordinates, is refused.
        for range in [0..3, 2..5] {
            let mut ws = [0.0f32; WS];
            let mut other = Stream::shard(mechanism, D, range, &mut ws, noise()).unwrap();
            assert_eq!(
                other.restore(&fp, slot, &counter),
                Err(Error::CheckpointMismatch {
                    field: "dimension or shard"
                })
            );
        }
        let mut ws = [0.0f32; WS];
        let mut unsharded = Stream::new(mechanism, 3, &mut ws, noise()).unwrap();
        assert_eq!(
            unsharded.restore(&fp, slot, &counter),
            Err(Error::CheckpointMismatch {
                field: "dimension or shard"
            })
        );
    }

    fn restore_result(bytes: &[u8], checkpoint: &[u8]) -> Result<u32, Error> {
        let (mechanism, fp) = BlobFingerprint::load(bytes).unwrap();
        let mut ws = [0.0f32; WS];
        let counter = ReleaseCounter::new(1, 0);
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        match stream.restore(&fp, checkpoint, &counter) {
            Ok(()) => Ok(stream.steps_released()),
            Err(e) => {
                assert_eq!(stream.steps_released(), 0);
                Err(e)
            }
        }
    }

    #[test]
    fn trailing_bytes_after_a_checkpoint_are_ignored_and_a_short_buffer_is_refused() {
        let bytes = blob(0.0);
        let (slot, _, _) = run_until(&bytes, 6, 0);
        let mut padded = slot.clone();
        padded.extend_from_slice(&[0xff; 40]);
        assert_eq!(restore_result(&bytes, &padded), Ok(6));
        let (_, blob_id) = BlobFingerprint::load(&bytes).unwrap();
        let mut ws = [0.0f32; WS];
        let stream = fresh(&bytes, &mut ws);
        let needed = stream.checkpoint_capacity();
        for len in [0, 10, 20, 100] {
            let mut out = std::vec![0u8; len];
            assert_eq!(
                stream.checkpoint(&blob_id, &ReleaseCounter::new(1, 0), &mut out),
                Err(Error::CheckpointBufferTooSmall { needed, found: len })
            );
        }
    }

    /// A checkpoint whose state holds a NaN or an infinity, framed with a valid CRC (forged), is
    /// refused and the stream stays fresh; the same bytes with a finite value restore.
    #[test]
    fn a_checkpoint_with_a_non_finite_state_is_refused() {
        let bytes = blob(0.0);
        let reference = uninterrupted(&bytes);
        let (slot, _, _) = run_until(&bytes, 5, 0);
        let end = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
        let reframe = |value: f32, at: usize| {
            let mut forged = slot[..end].to_vec();
            forged[at..at + 4].copy_from_slice(&value.to_le_bytes());
            let crc = checksum(&forged);
            forged.extend_from_slice(&crc.to_le_bytes());
            forged
        };
        // The last float of the payload is the running sum's last coordinate.
        let last = end - 4;
        assert_eq!(restore_result(&bytes, &reframe(1.5, last)), Ok(5));
        for value in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(
                restore_result(&bytes, &reframe(value, last)),
                Err(Error::MalformedCheckpoint),
                "{value}"
            );
            let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
            let mut ws = [0.0f32; WS];
            let counter = ReleaseCounter::new(1, 0);
            let noise = epoch_noise(&ROOT, &counter).unwrap();
            let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
            assert!(
                stream
                    .restore(&fp, &reframe(value, last), &counter)
                    .is_err()
            );
            assert_fresh(&mut stream, &reference);
        }
    }

    /// A checkpoint of format version 1 (no compensation after the running sum) is refused
    /// even when its frame is intact: resuming from the sum alone would not continue the
    /// uninterrupted stream bit for bit.
    #[test]
    fn a_version_1_checkpoint_is_refused() {
        let bytes = blob(0.0);
        let (slot, _, _) = run_until(&bytes, 6, 0);
        let end = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
        let mut old = slot[..end].to_vec();
        old[8..10].copy_from_slice(&1u16.to_le_bytes());
        // Drop the compensation (the last d floats), as version 1 had none.
        old.truncate(end - 4 * D);
        let length = (old.len() - PREFIX_LEN) as u32;
        old[10..14].copy_from_slice(&length.to_le_bytes());
        let crc = checksum(&old);
        old.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            restore_result(&bytes, &old),
            Err(Error::UnsupportedCheckpointVersion { found: 1 })
        );
        assert_eq!(VERSION, 2);
    }

    /// The compensation is part of the state: after steps whose sums rounded, it is not zero, and
    /// a checkpoint carries it (the restore test above would fail without it).
    #[test]
    fn checkpoints_carry_the_compensation() {
        let bytes = blob(0.0);
        let (slot, _, _) = run_until(&bytes, 7, 0);
        let end = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
        let compensation: Vec<f32> = slot[end - 4 * D..end]
            .chunks_exact(4)
            .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        assert!(compensation.iter().any(|&c| c != 0.0), "{compensation:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any truncation is refused with a typed error.
        #[test]
        fn truncated_checkpoints_are_refused(cut in 0usize..1000) {
            let bytes = blob(0.0);
            let (slot, _, _) = run_until(&bytes, 7, 0);
            let len = {
                let payload_len = u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
                PREFIX_LEN + payload_len + 4
            };
            let cut = cut % len;
            let result = restore_result(&bytes, &slot[..cut]);
            let refused = matches!(
                result,
                Err(Error::MalformedCheckpoint | Error::CheckpointChecksumMismatch { .. })
            );
            prop_assert!(refused, "cut {}: {:?}", cut, result);
        }

        /// Any corruption (one flipped bit, or random bytes over a range) is refused with a
        /// typed error, never a panic.
        #[test]
        fn corrupted_checkpoints_are_refused(
            bit in 0usize..8 * 400,
            at in 0usize..400,
            junk in proptest::collection::vec(any::<u8>(), 1..16),
        ) {
            let bytes = blob(0.0);
            let (slot, _, _) = run_until(&bytes, 7, 0);
            let len = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize + 4;
            let mut flipped = slot[..len].to_vec();
            let bit = bit % (8 * len);
            flipped[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(restore_result(&bytes, &flipped).is_err());
            let mut smeared = slot[..len].to_vec();
            let at = at % len;
            let end = (at + junk.len()).min(len);
            let changed = smeared[at..end] != junk[..end - at];
            smeared[at..end].copy_from_slice(&junk[..end - at]);
            let result = restore_result(&bytes, &smeared);
            prop_assert!(!changed || result.is_err(), "{result:?}");
        }

        /// Random bytes, with or without a valid frame around them, never panic.
        #[test]
        fn arbitrary_payloads_are_refused(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let bytes = blob(0.0);
            let mut framed = Vec::from(MAGIC);
            framed.extend_from_slice(&VERSION.to_le_bytes());
            framed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            framed.extend_from_slice(&payload);
            let crc = checksum(&framed);
            framed.extend_from_slice(&crc.to_le_bytes());
            prop_assert!(restore_result(&bytes, &framed).is_err());
            prop_assert!(restore_result(&bytes, &payload).is_err());
        }
    }
}
