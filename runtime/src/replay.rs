//! One replay for every decoder form: [`Replay`] opens any validated blob — banded plus low rank
//! ([`Stream`]), BLT ([`BltStream`]), FFT ([`FftStream`]) or BandMF ([`BandMfStream`]) — and
//! dispatches each call to the form's own stream, so callers (the C library, `mfc simulate`, the
//! examples, the firmware, bindings) never match on the decoder. The per-form types stay public
//! for users who want a form's extra methods (shards, `step_clipped`).
//!
//! ```
//! use mfc_runtime::{BlobFingerprint, Error, ReleaseCounter, Replay, epoch_noise};
//! # use mfc_runtime::formats::*;
//! # let (theta, omega) = (encode_f32s([0.5f32, 0.25]), encode_f32s([-0.3f32, -0.1]));
//! # let example = Mechanism { header: Header { workload: Workload::PrefixSum, steps: 8,
//! #   participation: Participation::Single, neighbouring: Neighbouring::AddOrRemove,
//! #   sensitivity: Sensitivity { value: 1.2, method: SensitivityMethod::MaxColumnNorm },
//! #   clip_norm: 1.0, calibration: Some(Calibration { noise_multiplier: 1.0, target: None }),
//! #   error: ErrorSummary { sqrt_loss: 1.0, optimal_sqrt_loss: None, max_step_stddev: 1.0,
//! #   final_step_stddev: 1.0 }, generator: "doc" },
//! #   decoder: Decoder::Blt(Blt { theta: F32Table::new(&theta).unwrap(),
//! #   omega: F32Table::new(&omega).unwrap() }) };
//! # let blob_bytes = example.to_vec()?;
//! let root = [0x17; 32]; // the device's root secret
//! let (mechanism, blob) = BlobFingerprint::load(&blob_bytes)?; // any form
//! let counter = ReleaseCounter::FACTORY.cold_start()?; // persist(counter)
//! let mut workspace = [0.0f32; 16];
//! assert!(Replay::workspace_len(&mechanism, 4)? <= workspace.len()); // (m + 2)·d for a BLT
//! let mut replay = Replay::open(mechanism, 4, &mut workspace, epoch_noise(&root, &counter)?)?;
//! let mut release = [0.0f32; 4];
//! replay.step(&[1.0, 0.0, 0.0, 0.0], &mut release)?;
//! let mut slot = [0u8; 256];
//! assert!(replay.checkpoint_capacity() <= slot.len());
//! replay.checkpoint(&blob, &counter, &mut slot)?;
//! # Ok::<(), Error>(())
//! ```
//!
//! # Guarantees (every form)
//!
//! - **Privacy.** Each release is the form's private output for the blob's recorded `(ε, δ)`:
//!   the unit of privacy and the neighbouring relation are the blob's (`mfc inspect` prints
//!   them); inputs are clipped to `ζ` inside ([`Replay::step`]: the whole row;
//!   [`Replay::step_examples`]: each example), the noise scale is `σ·ζ·sens` from the blob.
//! - **Refusals change nothing.** Every fallible call checks everything first; on error the
//!   stream is exactly as it was (same step, same state, same later releases).
//! - **No panic, no allocation, `no_std`.** On any input, in every form; the workspace is the
//!   caller's ([`Replay::workspace_len`] floats, sized by the form's formula).
//! - **Horizon.** A stream stops at the blob's horizon ([`Error::StreamFinished`]); a BLT blob
//!   whose sensitivity holds for every horizon has none (its stream runs to the `u32` step
//!   counter's limit, [`BltStream`]).
//! - **Checkpoints.** [`Replay::checkpoint`] and [`Replay::restore`] follow the rules of
//!   [`checkpoint`](crate::checkpoint) in every form: stale checkpoints, checkpoints of another
//!   epoch, key, blob, dimension or noise scale, and non-finite states are refused; a restored
//!   stream releases bit for bit what the uninterrupted one would have.

use mfc_formats::{Decoder, Validated};

use crate::checkpoint::{BlobFingerprint, ReleaseCounter, Resumable, sealed};
use crate::noise::{ChaChaNoise, NoiseSource};
use crate::{BandMfStream, BltStream, Error, FftStream, Stream};

/// A stream of any decoder form, opened from a validated blob with the caller's workspace. See
/// the [module docs](self) for the guarantees every form shares.
pub enum Replay<'a, N: NoiseSource = ChaChaNoise> {
    /// Banded plus low rank (decoder 0).
    Banded(Stream<'a, 'a, N>),
    /// Buffered linear Toeplitz (decoder 2).
    Blt(BltStream<'a, 'a, N>),
    /// FFT (decoder 1).
    Fft(FftStream<'a, 'a, N>),
    /// BandMF (decoder 3).
    BandMf(BandMfStream<'a, 'a, N>),
}

/// Calls `$method` on the stream of whatever form `$replay` holds.
macro_rules! dispatch {
    ($replay:expr, $s:ident => $call:expr) => {
        match $replay {
            Replay::Banded($s) => $call,
            Replay::Blt($s) => $call,
            Replay::Fft($s) => $call,
            Replay::BandMf($s) => $call,
        }
    };
}

impl Replay<'_, ChaChaNoise> {
    /// Floats of workspace a stream of dimension `dim` needs for this blob: the form's own
    /// formula (`(h + r + 2)·d`, `(m + 2)·d`, `(m + 3)·d + 2m + 2N·k`, `(b̂ + 2)·d`), whatever
    /// the noise source (so `Replay::workspace_len` needs no type annotation).
    pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
        match mechanism.decoder {
            Decoder::BandedLowRank(_) => Stream::<ChaChaNoise>::workspace_len(mechanism, dim),
            Decoder::Blt(_) => BltStream::<ChaChaNoise>::workspace_len(mechanism, dim),
            Decoder::Fft(_) => FftStream::<ChaChaNoise>::workspace_len(mechanism, dim),
            Decoder::BandMf(_) => BandMfStream::<ChaChaNoise>::workspace_len(mechanism, dim),
            #[allow(unreachable_patterns)]
            _ => Err(Error::UnsupportedDecoder),
        }
    }
}

impl<'a, N: NoiseSource> Replay<'a, N> {
    /// Opens a stream of dimension `dim` over the blob, with the noise multiplier it records,
    /// in the first [`workspace_len`](Self::workspace_len) floats of `workspace`.
    pub fn open(
        mechanism: Validated<'a>,
        dim: usize,
        workspace: &'a mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        Ok(match mechanism.decoder {
            Decoder::BandedLowRank(_) => {
                Self::Banded(Stream::new(mechanism, dim, workspace, noise)?)
            }
            Decoder::Blt(_) => Self::Blt(BltStream::new(mechanism, dim, workspace, noise)?),
            Decoder::Fft(_) => Self::Fft(FftStream::new(mechanism, dim, workspace, noise)?),
            Decoder::BandMf(_) => {
                Self::BandMf(BandMfStream::new(mechanism, dim, workspace, noise)?)
            }
            #[allow(unreachable_patterns)]
            _ => return Err(Error::UnsupportedDecoder),
        })
    }

    /// [`open`](Self::open) with an explicit noise multiplier `σ`.
    pub fn open_with_noise_multiplier(
        mechanism: Validated<'a>,
        dim: usize,
        workspace: &'a mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        let sigma = noise_multiplier;
        Ok(match mechanism.decoder {
            Decoder::BandedLowRank(_) => Self::Banded(Stream::with_noise_multiplier(
                mechanism, dim, workspace, noise, sigma,
            )?),
            Decoder::Blt(_) => Self::Blt(BltStream::with_noise_multiplier(
                mechanism, dim, workspace, noise, sigma,
            )?),
            Decoder::Fft(_) => Self::Fft(FftStream::with_noise_multiplier(
                mechanism, dim, workspace, noise, sigma,
            )?),
            Decoder::BandMf(_) => Self::BandMf(BandMfStream::with_noise_multiplier(
                mechanism, dim, workspace, noise, sigma,
            )?),
            #[allow(unreachable_patterns)]
            _ => return Err(Error::UnsupportedDecoder),
        })
    }

    /// Consumes `input` (the whole row, clipped to `ζ` here) and writes this step's release into
    /// `release`: the private prefix sum (for BandMF with another workload, the noised input).
    /// Banded and FFT blobs of another workload refuse it ([`Error::WorkloadNotStreamable`]:
    /// use [`step_noise`](Self::step_noise)). On error nothing changes.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        dispatch!(self, s => s.step(input, release))
    }

    /// A training step: the step's examples (rows of `d`, one after the other), each clipped to
    /// `ζ` by itself; one example moves the releases by at most `ζ`
    /// ([`Stream::step_examples`]). On error nothing changes.
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        dispatch!(self, s => s.step_examples(examples, release))
    }

    /// Writes only this step's noise into `out`, for a banded or FFT blob of a workload other
    /// than the prefix sum (the caller adds its own clipped `A x`). BLT and BandMF streams add
    /// their noise to the inputs themselves and refuse it ([`Error::UnsupportedDecoder`]).
    pub fn step_noise(&mut self, out: &mut [f32]) -> Result<(), Error> {
        match self {
            Self::Banded(s) => s.step_noise(out),
            Self::Fft(s) => s.step_noise(out),
            Self::Blt(_) | Self::BandMf(_) => Err(Error::UnsupportedDecoder),
        }
    }

    /// Whether [`step`](Self::step) releases prefix sums (the blob's workload is the prefix sum).
    pub fn releases_prefix_sums(&self) -> bool {
        match self {
            Self::Banded(s) => s.releases_prefix_sums(),
            Self::Blt(_) => true,
            Self::Fft(s) => s.releases_prefix_sums(),
            Self::BandMf(s) => s.releases_prefix_sums(),
        }
    }

    /// Steps released so far.
    pub fn steps_released(&self) -> u32 {
        dispatch!(self, s => s.steps_released())
    }

    /// The horizon the blob's sensitivity covers.
    pub fn horizon(&self) -> u32 {
        dispatch!(self, s => s.horizon())
    }

    /// The dimension `d`.
    pub fn dim(&self) -> usize {
        dispatch!(self, s => s.dim())
    }

    /// The clip norm `ζ`, as the stream applies it (`f32`).
    pub fn clip_norm(&self) -> f32 {
        dispatch!(self, s => s.clip_norm())
    }

    /// Bytes [`checkpoint`](Self::checkpoint) may need: `14 + 50 + 4·f + 4` with `f` the floats
    /// of state — the form's workspace less its scratch, and for BLT `min(d, 8)` noise values
    /// to check the key on restore.
    pub fn checkpoint_capacity(&self) -> usize {
        dispatch!(self, s => s.checkpoint_capacity())
    }

    /// Writes the stream's state into `out` and returns the number of bytes written; as
    /// [`Stream::checkpoint`], whose rules and errors every form shares.
    pub fn checkpoint(
        &self,
        blob: &BlobFingerprint<'_>,
        counter: &ReleaseCounter,
        out: &mut [u8],
    ) -> Result<usize, Error> {
        dispatch!(self, s => s.checkpoint(blob, counter, out))
    }

    /// Loads a checkpoint into this freshly opened stream; as [`Stream::restore`], whose rules
    /// and errors every form shares. On error the stream is still fresh.
    pub fn restore(
        &mut self,
        blob: &BlobFingerprint<'_>,
        checkpoint: &[u8],
        counter: &ReleaseCounter,
    ) -> Result<(), Error> {
        dispatch!(self, s => s.restore(blob, checkpoint, counter))
    }
}

impl<N: NoiseSource> sealed::Sealed for Replay<'_, N> {}

impl<N: NoiseSource> Resumable for Replay<'_, N> {
    fn steps_released(&self) -> u32 {
        Replay::steps_released(self)
    }
}
