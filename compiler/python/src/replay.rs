//! One stream over the runtime's four forms — banded+low-rank ([`Stream`]), BLT
//! ([`BltStream`]), FFT ([`FftStream`]) and BandMF ([`BandMfStream`]) — chosen by the blob's
//! decoder. This is the only place the package matches on forms: when `mfc_runtime::Replay`
//! (issue 19) lands, it replaces this module.
//!
//! A [`Replay`] borrows its blob and workspace like the runtime's streams; [`OwnedReplay`]
//! owns both (a Python object cannot hold a borrow), freeing them after the stream.

use core::ops::Range;

use mfc_formats::{Decoder, Validated, Workload};
use mfc_runtime::{
    BandMfStream, BlobFingerprint, BltStream, ChaChaNoise, Error, FftStream, ReleaseCounter, Stream,
};

/// A stream of any form, over a borrowed blob and workspace.
pub enum Replay<'a> {
    /// Banded plus low rank.
    Banded(Stream<'a, 'a, ChaChaNoise>),
    /// Buffered linear Toeplitz.
    Blt(BltStream<'a, 'a, ChaChaNoise>),
    /// FFT blocks.
    Fft(FftStream<'a, 'a, ChaChaNoise>),
    /// BandMF.
    BandMf(BandMfStream<'a, 'a, ChaChaNoise>),
}

/// Which form `mechanism` has, as `mfc compile --form` names it.
pub fn form_name(mechanism: &Validated<'_>) -> &'static str {
    match mechanism.decoder {
        Decoder::BandedLowRank(_) => "banded",
        Decoder::Blt(_) => "blt",
        Decoder::Fft(_) => "fft",
        Decoder::BandMf(_) => "bandmf",
        _ => "unknown",
    }
}

/// Whether `mechanism`'s form can be sharded (banded and BandMF; BLT and FFT cannot).
pub fn shardable(mechanism: &Validated<'_>) -> bool {
    matches!(
        mechanism.decoder,
        Decoder::BandedLowRank(_) | Decoder::BandMf(_)
    )
}

/// Floats of workspace a stream of `dim` coordinates (a shard's: its own) needs.
pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
    match mechanism.decoder {
        Decoder::BandedLowRank(_) => Stream::<ChaChaNoise>::workspace_len(mechanism, dim),
        Decoder::Blt(_) => BltStream::<ChaChaNoise>::workspace_len(mechanism, dim),
        Decoder::Fft(_) => FftStream::<ChaChaNoise>::workspace_len(mechanism, dim),
        Decoder::BandMf(_) => BandMfStream::<ChaChaNoise>::workspace_len(mechanism, dim),
        _ => Err(Error::UnsupportedDecoder),
    }
}

impl<'a> Replay<'a> {
    /// Opens a stream of rows of `row_dim` coordinates, or only coordinates `shard` of them
    /// (banded and BandMF), with the blob's noise multiplier or `noise_multiplier`.
    pub fn open(
        mechanism: Validated<'a>,
        row_dim: usize,
        shard: Option<Range<usize>>,
        workspace: &'a mut [f32],
        noise: ChaChaNoise,
        noise_multiplier: Option<f64>,
    ) -> Result<Self, Error> {
        let recorded = mechanism.header.calibration.map(|c| c.noise_multiplier);
        let sigma = noise_multiplier.or(recorded).ok_or(Error::NotCalibrated)?;
        let range = shard.unwrap_or(0..row_dim);
        let (m, ws) = (mechanism, workspace);
        Ok(match mechanism.decoder {
            Decoder::BandedLowRank(_) => Replay::Banded(Stream::shard_with_noise_multiplier(
                m, row_dim, range, ws, noise, sigma,
            )?),
            Decoder::BandMf(_) => Replay::BandMf(BandMfStream::shard_with_noise_multiplier(
                m, row_dim, range, ws, noise, sigma,
            )?),
            _ if range != (0..row_dim) => return Err(Error::UnsupportedDecoder),
            Decoder::Blt(_) => Replay::Blt(BltStream::with_noise_multiplier(
                m, row_dim, ws, noise, sigma,
            )?),
            Decoder::Fft(_) => Replay::Fft(FftStream::with_noise_multiplier(
                m, row_dim, ws, noise, sigma,
            )?),
            _ => return Err(Error::UnsupportedDecoder),
        })
    }

    /// One step on a whole row: the private release (prefix sum; BandMF under another workload:
    /// the noised input).
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        match self {
            Replay::Banded(s) => s.step(input, release),
            Replay::Blt(s) => s.step(input, release),
            Replay::Fft(s) => s.step(input, release),
            Replay::BandMf(s) => s.step(input, release),
        }
    }

    /// One step with the whole row's clip factor `clip` given (shards).
    pub fn step_clipped(
        &mut self,
        input: &[f32],
        clip: f32,
        release: &mut [f32],
    ) -> Result<(), Error> {
        match self {
            Replay::Banded(s) => s.step_clipped(input, clip, release),
            Replay::BandMf(s) => s.step_clipped(input, clip, release),
            Replay::Blt(_) | Replay::Fft(_) => Err(Error::UnsupportedDecoder),
        }
    }

    /// One training step: `examples` (rows of `d`), each clipped by itself, summed.
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        match self {
            Replay::Banded(s) => s.step_examples(examples, release),
            Replay::Blt(s) => s.step_examples(examples, release),
            Replay::Fft(s) => s.step_examples(examples, release),
            Replay::BandMf(s) => s.step_examples(examples, release),
        }
    }

    /// One step releasing the noise only (banded and FFT blobs).
    pub fn step_noise(&mut self, noise_out: &mut [f32]) -> Result<(), Error> {
        match self {
            Replay::Banded(s) => s.step_noise(noise_out),
            Replay::Fft(s) => s.step_noise(noise_out),
            Replay::Blt(_) | Replay::BandMf(_) => Err(Error::UnsupportedDecoder),
        }
    }

    /// Steps released so far.
    pub fn steps_released(&self) -> u32 {
        match self {
            Replay::Banded(s) => s.steps_released(),
            Replay::Blt(s) => s.steps_released(),
            Replay::Fft(s) => s.steps_released(),
            Replay::BandMf(s) => s.steps_released(),
        }
    }

    /// The horizon `n`.
    pub fn horizon(&self) -> u32 {
        match self {
            Replay::Banded(s) => s.horizon(),
            Replay::Blt(s) => s.horizon(),
            Replay::Fft(s) => s.horizon(),
            Replay::BandMf(s) => s.horizon(),
        }
    }

    /// The coordinates this stream owns (a shard's: its own).
    pub fn dim(&self) -> usize {
        match self {
            Replay::Banded(s) => s.dim(),
            Replay::Blt(s) => s.dim(),
            Replay::Fft(s) => s.dim(),
            Replay::BandMf(s) => s.dim(),
        }
    }

    /// Writes a checkpoint into `out` (every form, `runtime/src/checkpoint.rs`); returns its
    /// length.
    pub fn checkpoint(
        &self,
        blob: &BlobFingerprint<'_>,
        counter: &ReleaseCounter,
        out: &mut [u8],
    ) -> Result<usize, Error> {
        match self {
            Replay::Banded(s) => s.checkpoint(blob, counter, out),
            Replay::Blt(s) => s.checkpoint(blob, counter, out),
            Replay::Fft(s) => s.checkpoint(blob, counter, out),
            Replay::BandMf(s) => s.checkpoint(blob, counter, out),
        }
    }

    /// Bytes a checkpoint may need.
    pub fn checkpoint_capacity(&self) -> usize {
        match self {
            Replay::Banded(s) => s.checkpoint_capacity(),
            Replay::Blt(s) => s.checkpoint_capacity(),
            Replay::Fft(s) => s.checkpoint_capacity(),
            Replay::BandMf(s) => s.checkpoint_capacity(),
        }
    }

    /// Loads a checkpoint into this fresh stream.
    pub fn restore(
        &mut self,
        blob: &BlobFingerprint<'_>,
        checkpoint: &[u8],
        counter: &ReleaseCounter,
    ) -> Result<(), Error> {
        match self {
            Replay::Banded(s) => s.restore(blob, checkpoint, counter),
            Replay::Blt(s) => s.restore(blob, checkpoint, counter),
            Replay::Fft(s) => s.restore(blob, checkpoint, counter),
            Replay::BandMf(s) => s.restore(blob, checkpoint, counter),
        }
    }
}

/// Whether a blob's releases are prefix sums (or, for BandMF, noised inputs): `false` for a
/// banded blob of another workload, which releases its noise only.
pub fn takes_inputs(mechanism: &Validated<'_>) -> bool {
    matches!(mechanism.header.workload, Workload::PrefixSum)
        || matches!(mechanism.decoder, Decoder::BandMf(_))
}
