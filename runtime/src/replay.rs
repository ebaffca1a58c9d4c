//! One replay for every decoder form: [`Replay`] opens any validated blob — banded plus low rank
//! ([`Stream`]), BLT ([`BltStream`]), FFT ([`FftStream`]) or BandMF ([`BandMfStream`]) — whole or
//! as a shard of a wider row, and dispatches each call to the form's own stream, so callers (the
//! C library, `mfc simulate`, the Python package, the examples, the firmware) never match on the
//! decoder. [`Shape`] says which form a blob has and what memory it needs, as `const fn`s of the
//! form's parameters and `d`. This module and `verify/` are the runtime's only matches over the
//! forms; a stream type stays public for users who want one form only (a device's flash).
//!
//! **Forms of this build.** `Replay` holds the forms the crate's features select (`form-banded`,
//! `form-blt`, `form-bandmf`, `form-fft`; all by default, `all-forms`): a blob of a form left out
//! is refused at [`Replay::workspace_len`] and [`Replay::open`] with
//! [`Error::UnsupportedDecoder`] ([`Shape::replayed`] says which), and the form's replay code is
//! not linked. The C library's `form-*` features forward here and it links the same forms'
//! verifiers ([`crate::verify::verify_only`]), so a C firmware linked for one form pays for that
//! form only.
//!
//! ```
//! use mfc_runtime::{BlobFingerprint, Error, ReleaseCounter, Replay, Shape, epoch_noise};
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
//! let shape = Shape::of(&mechanism)?; // a BLT with m = 2 buffers
//! assert_eq!(shape, Shape::Blt { buffers: 2 });
//! let mut workspace = [0.0f32; 16];
//! assert_eq!(shape.workspace_len(4), Some(16)); // (m + 2)·d
//! let mut replay = Replay::open(mechanism, 4, &mut workspace, epoch_noise(&root, &counter)?)?;
//! let mut release = [0.0f32; 4];
//! replay.step(&[1.0, 0.0, 0.0, 0.0], &mut release)?;
//! let mut slot = [0u8; 256];
//! assert!(replay.checkpoint_capacity() <= slot.len());
//! assert_eq!(shape.checkpoint_len(4), Some(replay.checkpoint_capacity()));
//! replay.checkpoint(&blob, &counter, &mut slot)?;
//! # Ok::<(), Error>(())
//! ```
//!
//! # Guarantees (every form)
//!
//! - **Privacy.** Each release is the form's private output for the blob's recorded `(ε, δ)`:
//!   the unit of privacy and the neighbouring relation are the blob's (`mfc inspect` prints
//!   them); inputs are clipped to `ζ` inside ([`Replay::step`]: the whole row;
//!   [`Replay::step_examples`]: each example), the noise scale is `σ·ζ·sens` from the blob. A
//!   shard cannot see the whole row and takes its clip factor from the caller
//!   ([`Replay::step_clipped`]; for training, each whole example's factor,
//!   [`Replay::step_examples_clipped`]): there privacy rests on the caller.
//! - **Refusals change nothing.** Every fallible call checks everything first; on error the
//!   stream is exactly as it was (same step, same state, same later releases).
//! - **No panic, no allocation, `no_std`.** On any input, in every form; the workspace is the
//!   caller's ([`Replay::workspace_len`] floats, sized by the form's formula, [`Shape`]).
//! - **Horizon.** A stream stops at the blob's horizon ([`Error::StreamFinished`]); a BLT blob
//!   whose sensitivity holds for every horizon has none (its stream runs to the `u32` step
//!   counter's limit, [`BltStream`]).
//! - **Checkpoints.** [`Replay::checkpoint`] and [`Replay::restore`] follow the rules of
//!   [`checkpoint`](crate::checkpoint) in every form: stale checkpoints, checkpoints of another
//!   epoch, key, blob, dimension, shard or noise scale, and non-finite states are refused; a
//!   restored stream releases bit for bit what the uninterrupted one would have.

// A build that leaves forms out (the `form-*` features) leaves their helpers unused.
#![cfg_attr(
    not(all(
        feature = "form-banded",
        feature = "form-blt",
        feature = "form-bandmf",
        feature = "form-fft"
    )),
    allow(unused, unreachable_code)
)]

use core::ops::Range;

use mfc_formats::{Decoder, FftKind, Mechanism, Validated, Workload};

use crate::checkpoint::{BlobFingerprint, ReleaseCounter, Resumable, frame_len, sealed};
use crate::error::Error;
#[cfg(feature = "form-bandmf")]
use crate::forms::BandMfStream;
#[cfg(feature = "form-blt")]
use crate::forms::BltStream;
#[cfg(feature = "form-fft")]
use crate::forms::FftStream;
#[cfg(feature = "form-banded")]
use crate::forms::Stream;
use crate::forms::{banded, bandmf, blt, fft, recorded_noise_multiplier};

#[cfg(not(any(
    feature = "form-banded",
    feature = "form-blt",
    feature = "form-bandmf",
    feature = "form-fft"
)))]
compile_error!(
    "mfc-runtime replays no form: enable `all-forms` or one of `form-banded`, `form-blt`, \
     `form-bandmf`, `form-fft`"
);
use crate::noise::{ChaChaNoise, NoiseSource};

/// A decoder form and the parameters its memory depends on: what [`Shape::of`] reads from a blob,
/// and what the `const fn`s below size a stream of `d` coordinates by. Each formula is the form's
/// own (`forms::banded::workspace_len`, …), written once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Shape {
    /// Banded plus low rank (decoder 0): band `h`, rank `r`.
    Banded {
        /// `h`, the diagonals stored exactly.
        band: u32,
        /// `r`, the rank below the band.
        rank: u32,
    },
    /// FFT (decoder 1): Mechanism 1 or 2, blocks of `m` steps.
    Fft {
        /// Which decoder the blocks use.
        kind: FftKind,
        /// `m`, steps per block.
        block: u32,
    },
    /// Buffered linear Toeplitz (decoder 2) with `m` buffers.
    Blt {
        /// `m`, buffers per coordinate.
        buffers: u32,
    },
    /// BandMF (decoder 3) with `b̂` bands, for the prefix sum or another workload.
    BandMf {
        /// `b̂`, the encoder's bands.
        bands: u32,
        /// Whether the workload is the prefix sum (the stream then keeps the running sum).
        prefix_sum: bool,
    },
}

impl Shape {
    /// The shape of `mechanism`'s decoder ([`Error::UnsupportedDecoder`] for a form a later
    /// format version adds).
    pub fn of(mechanism: &Mechanism<'_>) -> Result<Self, Error> {
        Ok(match mechanism.decoder {
            Decoder::BandedLowRank(d) => Shape::Banded {
                band: d.band,
                rank: d.rank,
            },
            Decoder::Fft(d) => Shape::Fft {
                kind: d.kind,
                block: d.block,
            },
            Decoder::Blt(d) => Shape::Blt {
                buffers: blt::buffers(&d)?,
            },
            Decoder::BandMf(d) => Shape::BandMf {
                bands: d.bands,
                prefix_sum: matches!(mechanism.header.workload, Workload::PrefixSum),
            },
            #[allow(unreachable_patterns)]
            _ => return Err(Error::UnsupportedDecoder),
        })
    }

    /// The form as `mfc compile --form` names it: `banded`, `fft`, `blt` or `bandmf`.
    pub const fn name(self) -> &'static str {
        match self {
            Shape::Banded { .. } => "banded",
            Shape::Fft { .. } => "fft",
            Shape::Blt { .. } => "blt",
            Shape::BandMf { .. } => "bandmf",
        }
    }

    /// Whether this build replays the form: its feature (`form-banded`,
    /// `form-blt`, `form-bandmf`, `form-fft`) is enabled. A blob of a form it does not replay is
    /// refused with [`Error::UnsupportedDecoder`].
    pub const fn replayed(self) -> bool {
        match self {
            Shape::Banded { .. } => cfg!(feature = "form-banded"),
            Shape::Fft { .. } => cfg!(feature = "form-fft"),
            Shape::Blt { .. } => cfg!(feature = "form-blt"),
            Shape::BandMf { .. } => cfg!(feature = "form-bandmf"),
        }
    }

    /// Whether a stream of this form can be a shard of a wider row ([`Replay::shard`]): the
    /// banded and BandMF forms, whose every coordinate is independent of the others; the FFT
    /// form draws each block's noise across the row, and the BLT form has no shards.
    pub const fn shardable(self) -> bool {
        matches!(self, Shape::Banded { .. } | Shape::BandMf { .. })
    }

    /// Floats of workspace a stream of `dim` coordinates needs (a shard's: its own):
    /// `(h + r + 2)·d`, `(m + 3)·d + 2m + 2N·k`, `(m + 2)·d`, `(b̂ + 2)·d` (`b̂·d` for another
    /// workload). `None` when `dim` is 0 or beyond what a noise row addresses, when an FFT block is
    /// longer than this build replays, or on overflow.
    pub const fn workspace_len(self, dim: usize) -> Option<usize> {
        match self {
            Shape::Banded { band, rank } => banded::workspace_len(band, rank, dim),
            Shape::Fft { kind, block } => fft::workspace_len(kind, block, dim),
            Shape::Blt { buffers } => blt::workspace_len(buffers, dim),
            Shape::BandMf { bands, prefix_sum } => bandmf::workspace_len(bands, prefix_sum, dim),
        }
    }

    /// Floats of state a checkpoint carries: the workspace for the banded and BandMF forms, the
    /// workspace and `min(d, 8)` noise values for BLT, `(m + 3)·d` for FFT (its spectra come from
    /// the blob, its draws are scratch). `None` as for [`workspace_len`](Self::workspace_len).
    pub const fn state_len(self, dim: usize) -> Option<usize> {
        match self {
            Shape::Banded { band, rank } => banded::workspace_len(band, rank, dim),
            Shape::Fft { kind, block } => match fft::workspace_len(kind, block, dim) {
                Some(_) => fft::state_len(block, dim),
                None => None,
            },
            Shape::Blt { buffers } => blt::state_len(buffers, dim),
            Shape::BandMf { bands, prefix_sum } => bandmf::workspace_len(bands, prefix_sum, dim),
        }
    }

    /// Bytes a checkpoint of a stream of `dim` coordinates may need
    /// ([`Replay::checkpoint_capacity`]): `14 + 50 + 4·f + 4` with `f` the floats of
    /// [`state_len`](Self::state_len) ([`checkpoint`](crate::checkpoint), "Wire format").
    pub const fn checkpoint_len(self, dim: usize) -> Option<usize> {
        match self.state_len(dim) {
            Some(floats) => frame_len(floats),
            None => None,
        }
    }
}

/// A stream of any decoder form this build replays (module docs, "Forms of this build"), opened
/// from a validated blob with the caller's workspace. See the [module docs](self) for the
/// guarantees every form shares.
pub enum Replay<'a, N: NoiseSource = ChaChaNoise> {
    /// Banded plus low rank (decoder 0).
    #[cfg(feature = "form-banded")]
    Banded(Stream<'a, 'a, N>),
    /// Buffered linear Toeplitz (decoder 2).
    #[cfg(feature = "form-blt")]
    Blt(BltStream<'a, 'a, N>),
    /// FFT (decoder 1).
    #[cfg(feature = "form-fft")]
    Fft(FftStream<'a, 'a, N>),
    /// BandMF (decoder 3).
    #[cfg(feature = "form-bandmf")]
    BandMf(BandMfStream<'a, 'a, N>),
}

/// Calls `$method` on the stream of whatever form `$replay` holds.
macro_rules! dispatch {
    ($replay:expr, $s:ident => $call:expr) => {
        match $replay {
            #[cfg(feature = "form-banded")]
            Replay::Banded($s) => $call,
            #[cfg(feature = "form-blt")]
            Replay::Blt($s) => $call,
            #[cfg(feature = "form-fft")]
            Replay::Fft($s) => $call,
            #[cfg(feature = "form-bandmf")]
            Replay::BandMf($s) => $call,
        }
    };
}

/// The coordinates a stream owns: a whole row of `d`, or coordinates `range` of a row of `row`.
#[derive(Clone)]
enum Rows {
    Whole(usize),
    Shard { row: usize, range: Range<usize> },
}

impl Replay<'_, ChaChaNoise> {
    /// Floats of workspace a stream of dimension `dim` needs for this blob (a shard's: its own
    /// `dim`): the form's formula ([`Shape::workspace_len`]), whatever the noise source (so
    /// `Replay::workspace_len` needs no type annotation). Errors name why: the form
    /// ([`Error::UnsupportedDecoder`]), an FFT block this build cannot replay
    /// ([`Error::FftBlockTooLarge`]), or `dim` ([`Error::InvalidDimension`]). A form this build
    /// does not replay ([`Shape::replayed`]) is [`Error::UnsupportedDecoder`] too.
    pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
        match mechanism.decoder {
            #[cfg(feature = "form-banded")]
            Decoder::BandedLowRank(_) => Stream::<ChaChaNoise>::workspace_len(mechanism, dim),
            #[cfg(feature = "form-blt")]
            Decoder::Blt(_) => BltStream::<ChaChaNoise>::workspace_len(mechanism, dim),
            #[cfg(feature = "form-fft")]
            Decoder::Fft(_) => FftStream::<ChaChaNoise>::workspace_len(mechanism, dim),
            #[cfg(feature = "form-bandmf")]
            Decoder::BandMf(_) => BandMfStream::<ChaChaNoise>::workspace_len(mechanism, dim),
            #[allow(unreachable_patterns)]
            _ => Err(Error::UnsupportedDecoder),
        }
    }
}

impl<'a, N: NoiseSource> Replay<'a, N> {
    /// Opens a stream of dimension `dim` over the blob, with the noise multiplier it records,
    /// in the first [`workspace_len`](Self::workspace_len) floats of `workspace`; a blob of a
    /// form this build does not replay is refused ([`Error::UnsupportedDecoder`]).
    pub fn open(
        mechanism: Validated<'a>,
        dim: usize,
        workspace: &'a mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = recorded_noise_multiplier(&mechanism)?;
        Self::build(mechanism, Rows::Whole(dim), workspace, noise, sigma)
    }

    /// [`open`](Self::open) with an explicit noise multiplier `σ`.
    pub fn open_with_noise_multiplier(
        mechanism: Validated<'a>,
        dim: usize,
        workspace: &'a mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        Self::build(
            mechanism,
            Rows::Whole(dim),
            workspace,
            noise,
            noise_multiplier,
        )
    }

    /// A shard: the stream of coordinates `range` of rows of `row_dim` coordinates, with the noise
    /// multiplier recorded in the blob, in
    /// [`workspace_len`](Self::workspace_len)`(mechanism, range.len())` floats. With the same seed
    /// its releases equal coordinates `range` of an unsharded stream's, bit for bit. Inputs and
    /// releases have `range.len()` coordinates; a shard that is not the whole row refuses
    /// [`step`](Self::step) and [`step_examples`](Self::step_examples)
    /// ([`Error::ClipFactorRequired`]): it takes the whole row's clip factor in
    /// [`step_clipped`](Self::step_clipped), and each whole example's in
    /// [`step_examples_clipped`](Self::step_examples_clipped).
    ///
    /// Errors: [`Error::InvalidShard`] for an empty range or one outside the row; for the FFT and
    /// BLT forms, which have no shards ([`Shape::shardable`]), [`Error::UnsupportedDecoder`]
    /// unless `range` is the whole row; then the errors of [`open`](Self::open).
    pub fn shard(
        mechanism: Validated<'a>,
        row_dim: usize,
        range: Range<usize>,
        workspace: &'a mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = recorded_noise_multiplier(&mechanism)?;
        Self::shard_with_noise_multiplier(mechanism, row_dim, range, workspace, noise, sigma)
    }

    /// A shard ([`shard`](Self::shard)) with an explicit noise multiplier `σ`.
    pub fn shard_with_noise_multiplier(
        mechanism: Validated<'a>,
        row_dim: usize,
        range: Range<usize>,
        workspace: &'a mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        let rows = Rows::Shard {
            row: row_dim,
            range,
        };
        Self::build(mechanism, rows, workspace, noise, noise_multiplier)
    }

    /// The stream of `mechanism`'s form over `rows`.
    fn build(
        mechanism: Validated<'a>,
        rows: Rows,
        workspace: &'a mut [f32],
        noise: N,
        sigma: f64,
    ) -> Result<Self, Error> {
        let (m, ws) = (mechanism, workspace);
        // A form without shards opens the whole row only.
        #[cfg(any(feature = "form-blt", feature = "form-fft"))]
        let whole = |rows: Rows| match rows {
            Rows::Whole(dim) => Ok(dim),
            Rows::Shard { row, range } => {
                if range.start >= range.end || range.end > row {
                    Err(Error::InvalidShard {
                        start: range.start,
                        end: range.end,
                        row,
                    })
                } else if range.start != 0 || range.end != row {
                    Err(Error::UnsupportedDecoder)
                } else {
                    Ok(row)
                }
            }
        };
        Ok(match (m.decoder, rows) {
            #[cfg(feature = "form-banded")]
            (Decoder::BandedLowRank(_), Rows::Whole(dim)) => {
                Self::Banded(Stream::with_noise_multiplier(m, dim, ws, noise, sigma)?)
            }
            #[cfg(feature = "form-banded")]
            (Decoder::BandedLowRank(_), Rows::Shard { row, range }) => Self::Banded(
                Stream::shard_with_noise_multiplier(m, row, range, ws, noise, sigma)?,
            ),
            #[cfg(feature = "form-bandmf")]
            (Decoder::BandMf(_), Rows::Whole(dim)) => Self::BandMf(
                BandMfStream::with_noise_multiplier(m, dim, ws, noise, sigma)?,
            ),
            #[cfg(feature = "form-bandmf")]
            (Decoder::BandMf(_), Rows::Shard { row, range }) => Self::BandMf(
                BandMfStream::shard_with_noise_multiplier(m, row, range, ws, noise, sigma)?,
            ),
            #[cfg(feature = "form-blt")]
            (Decoder::Blt(_), rows) => Self::Blt(BltStream::with_noise_multiplier(
                m,
                whole(rows)?,
                ws,
                noise,
                sigma,
            )?),
            #[cfg(feature = "form-fft")]
            (Decoder::Fft(_), rows) => Self::Fft(FftStream::with_noise_multiplier(
                m,
                whole(rows)?,
                ws,
                noise,
                sigma,
            )?),
            #[allow(unreachable_patterns)]
            _ => return Err(Error::UnsupportedDecoder),
        })
    }

    /// Consumes `input` (the whole row, clipped to `ζ` here) and writes this step's release into
    /// `release`: the private prefix sum (for BandMF with another workload, the noised input).
    /// Banded and FFT blobs of another workload refuse it ([`Error::WorkloadNotStreamable`]:
    /// use [`step_noise`](Self::step_noise)), and so does a shard ([`Error::ClipFactorRequired`]:
    /// use [`step_clipped`](Self::step_clipped)). On error nothing changes.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        dispatch!(self, s => s.step(input, release))
    }

    /// A training step: the step's examples (rows of `d`, one after the other), each clipped to
    /// `ζ` by itself; one example moves the releases by at most `ζ`
    /// ([`Stream::step_examples`]). On error nothing changes.
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        dispatch!(self, s => s.step_examples(examples, release))
    }

    /// [`step_examples`](Self::step_examples) with each example's clip factor given by the
    /// caller, for a shard (banded and BandMF blobs): `examples` holds this shard's coordinates
    /// of each of the step's `m` examples (`m` rows of [`dim`](Self::dim)), `clips` the `m`
    /// factors of the **whole** examples ([`clip_factor`](crate::clip_factor)`(x_e, ζ)`, `ζ`
    /// from [`clip_norm`](Self::clip_norm)); the release then equals this shard's coordinates
    /// of the unsharded `step_examples`, bit for bit ([`Stream::step_examples_clipped`]). The
    /// stream checks that each factor lies in `[0, 1]` ([`Error::InvalidClipFactor`]) and that
    /// there is one per example ([`Error::ClipFactorsShape`]) but cannot check that they are the
    /// whole examples': privacy rests on the caller here. BLT and FFT streams, never shards,
    /// refuse it ([`Error::UnsupportedDecoder`]). On error nothing changes.
    pub fn step_examples_clipped(
        &mut self,
        examples: &[f32],
        clips: &[f32],
        release: &mut [f32],
    ) -> Result<(), Error> {
        match self {
            #[cfg(feature = "form-banded")]
            Self::Banded(s) => s.step_examples_clipped(examples, clips, release),
            #[cfg(feature = "form-bandmf")]
            Self::BandMf(s) => s.step_examples_clipped(examples, clips, release),
            #[cfg(feature = "form-blt")]
            Self::Blt(_) => Err(Error::UnsupportedDecoder),
            #[cfg(feature = "form-fft")]
            Self::Fft(_) => Err(Error::UnsupportedDecoder),
        }
    }

    /// [`step`](Self::step) with the clip factor given by the caller, for a shard (banded and
    /// BandMF blobs): `clip` must be `min(1, ζ/‖x‖)` for the **whole** input row `x`
    /// ([`clip_factor`](crate::clip_factor)`(x, ζ)`, `ζ` from [`clip_norm`](Self::clip_norm)),
    /// of which `input` is this shard's part. The stream checks that `clip` lies in `[0, 1]`
    /// ([`Error::InvalidClipFactor`]) but cannot check that it is the whole row's: privacy rests
    /// on the caller here. BLT and FFT streams, never shards, refuse it
    /// ([`Error::UnsupportedDecoder`]). On error nothing changes.
    pub fn step_clipped(
        &mut self,
        input: &[f32],
        clip: f32,
        release: &mut [f32],
    ) -> Result<(), Error> {
        match self {
            #[cfg(feature = "form-banded")]
            Self::Banded(s) => s.step_clipped(input, clip, release),
            #[cfg(feature = "form-bandmf")]
            Self::BandMf(s) => s.step_clipped(input, clip, release),
            #[cfg(feature = "form-blt")]
            Self::Blt(_) => Err(Error::UnsupportedDecoder),
            #[cfg(feature = "form-fft")]
            Self::Fft(_) => Err(Error::UnsupportedDecoder),
        }
    }

    /// Writes only this step's noise into `out`, for a banded or FFT blob of a workload other
    /// than the prefix sum (the caller adds its own clipped `A x`). BLT and BandMF streams add
    /// their noise to the inputs themselves and refuse it ([`Error::UnsupportedDecoder`]).
    pub fn step_noise(&mut self, out: &mut [f32]) -> Result<(), Error> {
        match self {
            #[cfg(feature = "form-banded")]
            Self::Banded(s) => s.step_noise(out),
            #[cfg(feature = "form-fft")]
            Self::Fft(s) => s.step_noise(out),
            #[cfg(feature = "form-blt")]
            Self::Blt(_) => Err(Error::UnsupportedDecoder),
            #[cfg(feature = "form-bandmf")]
            Self::BandMf(_) => Err(Error::UnsupportedDecoder),
        }
    }

    /// Whether [`step`](Self::step) releases prefix sums (the blob's workload is the prefix sum).
    pub fn releases_prefix_sums(&self) -> bool {
        match self {
            #[cfg(feature = "form-banded")]
            Self::Banded(s) => s.releases_prefix_sums(),
            #[cfg(feature = "form-blt")]
            Self::Blt(_) => true,
            #[cfg(feature = "form-fft")]
            Self::Fft(s) => s.releases_prefix_sums(),
            #[cfg(feature = "form-bandmf")]
            Self::BandMf(s) => s.releases_prefix_sums(),
        }
    }

    /// Whether [`step`](Self::step) takes inputs: every form for the prefix sum, and BandMF for
    /// any workload (it then releases the noised input, to which the caller's optimizer applies
    /// `A`); a banded or FFT blob of another workload releases its noise only
    /// ([`step_noise`](Self::step_noise)).
    pub fn takes_inputs(&self) -> bool {
        matches!(self.shape(), Shape::BandMf { .. }) || self.releases_prefix_sums()
    }

    /// The blob's form and the parameters its memory depends on.
    pub fn shape(&self) -> Shape {
        match self {
            #[cfg(feature = "form-banded")]
            Self::Banded(s) => Shape::Banded {
                band: s.decoder().band,
                rank: s.decoder().rank,
            },
            #[cfg(feature = "form-blt")]
            Self::Blt(s) => Shape::Blt {
                buffers: s.buffers(),
            },
            #[cfg(feature = "form-fft")]
            Self::Fft(s) => Shape::Fft {
                kind: s.decoder().kind,
                block: s.decoder().block,
            },
            #[cfg(feature = "form-bandmf")]
            Self::BandMf(s) => Shape::BandMf {
                bands: s.decoder().bands,
                prefix_sum: s.releases_prefix_sums(),
            },
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

    /// The coordinates this stream owns: `d`, or a shard's `range.len()`.
    pub fn dim(&self) -> usize {
        dispatch!(self, s => s.dim())
    }

    /// The first coordinate of the row this stream owns: 0 unless it is a shard.
    pub fn offset(&self) -> u64 {
        match self {
            #[cfg(feature = "form-banded")]
            Self::Banded(s) => s.offset(),
            #[cfg(feature = "form-bandmf")]
            Self::BandMf(s) => s.offset(),
            #[cfg(feature = "form-blt")]
            Self::Blt(_) => 0,
            #[cfg(feature = "form-fft")]
            Self::Fft(_) => 0,
        }
    }

    /// The clip norm `ζ`, as the stream applies it (`f32`).
    pub fn clip_norm(&self) -> f32 {
        dispatch!(self, s => s.clip_norm())
    }

    /// The checks [`step`](Self::step) makes of an input row before it changes anything — its
    /// length ([`Error::DimensionMismatch`]), every coordinate finite
    /// ([`Error::NonFiniteInput`]) and within the range clipping handles exactly
    /// ([`Error::InputTooLarge`]) — without stepping. A caller releasing a batch of rows checks
    /// every row first, so that a refused batch releases none of them.
    pub fn check_input(&self, input: &[f32]) -> Result<(), Error> {
        crate::forms::check_input(self.dim(), input, self.clip_norm()).map(|_| ())
    }

    /// Bytes [`checkpoint`](Self::checkpoint) may need: `14 + 50 + 4·f + 4` with `f` the floats
    /// of state ([`Shape::checkpoint_len`]).
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

#[cfg(test)]
mod tests {
    use super::Shape;
    use crate::forms::fft::MAX_BLOCK;
    use crate::noise::MAX_COORDINATES;
    use mfc_formats::FftKind;

    /// Golden sizes, worked out by hand from each form's documented formula (so a formula
    /// changed in one place fails here): workspace, state and checkpoint bytes.
    #[test]
    fn each_form_sizes_its_memory_by_its_formula() {
        let cases = [
            // (h + r + 2)·d = (3 + 2 + 2)·5.
            (Shape::Banded { band: 3, rank: 2 }, 5, 35, 35),
            // (m + 2)·d + min(d, 8): (4 + 2)·3 + 3, and (4 + 2)·16 + 8.
            (Shape::Blt { buffers: 4 }, 3, 18, 21),
            (Shape::Blt { buffers: 4 }, 16, 96, 104),
            // (b̂ + 2)·d, b̂·d for another workload.
            (
                Shape::BandMf {
                    bands: 8,
                    prefix_sum: true,
                },
                4,
                40,
                40,
            ),
            (
                Shape::BandMf {
                    bands: 8,
                    prefix_sum: false,
                },
                4,
                32,
                32,
            ),
            // (m + 3)·d + 2m + 2N·k: m = 8, N = 32 (≥ 3·8 − 1), k = 2 or 5; state (m + 3)·d.
            (
                Shape::Fft {
                    kind: FftKind::Circulant,
                    block: 8,
                },
                3,
                33 + 16 + 128,
                33,
            ),
            (
                Shape::Fft {
                    kind: FftKind::OptimalDecoder,
                    block: 8,
                },
                3,
                33 + 16 + 320,
                33,
            ),
            // m = 1: N = 2 (the least power of two ≥ 2).
            (
                Shape::Fft {
                    kind: FftKind::Circulant,
                    block: 1,
                },
                2,
                8 + 2 + 8,
                8,
            ),
        ];
        for (shape, d, workspace, state) in cases {
            assert_eq!(
                shape.workspace_len(d),
                Some(workspace),
                "{shape:?}, d = {d}"
            );
            assert_eq!(shape.state_len(d), Some(state), "{shape:?}, d = {d}");
            // 14 bytes of prefix, at most 50 of head, 4 per float, 4 of CRC.
            assert_eq!(shape.checkpoint_len(d), Some(68 + 4 * state), "{shape:?}");
        }
        assert_eq!(Shape::Banded { band: 4, rank: 4 }.name(), "banded");
        assert!(
            Shape::BandMf {
                bands: 1,
                prefix_sum: false
            }
            .shardable()
        );
        assert!(!Shape::Blt { buffers: 1 }.shardable());
    }

    /// No size for an empty row, a row beyond what a noise row addresses, an FFT block this build
    /// cannot replay, or a size that overflows.
    #[test]
    fn sizes_out_of_range_are_none() {
        let banded = Shape::Banded { band: 1, rank: 0 };
        let fft = |block| Shape::Fft {
            kind: FftKind::Circulant,
            block,
        };
        assert_eq!(banded.workspace_len(0), None);
        let max = usize::try_from(MAX_COORDINATES).unwrap();
        assert_eq!(banded.workspace_len(max), Some(3 * max));
        assert_eq!(banded.workspace_len(max + 1), None);
        let wide = Shape::Banded {
            band: u32::MAX,
            rank: u32::MAX,
        };
        assert_eq!(wide.workspace_len(max), None);
        assert_eq!(wide.checkpoint_len(max), None);
        assert_eq!(fft(0).workspace_len(1), None);
        assert!(fft(MAX_BLOCK).workspace_len(1).is_some());
        assert_eq!(fft(MAX_BLOCK + 1).workspace_len(1), None);
        assert_eq!(fft(MAX_BLOCK + 1).state_len(1), None);
        // 2m·d draws per block must be addressable.
        assert_eq!(
            fft(2).workspace_len(max / 4),
            Some(5 * (max / 4) + 4 + 2 * 8 * 2)
        );
        assert_eq!(fft(2).workspace_len(max / 4 + 1), None);
    }
}
