//! The runtime's one error type. Every error is reported before any state changes.

use core::fmt;

/// Why the runtime refused a blob, a configuration or a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The blob is malformed, corrupted, of another version, or out of range.
    InvalidBlob(mfc_formats::Error),
    /// The blob's decoder form is not one this runtime can replay.
    UnsupportedDecoder,
    /// An input or output row does not have the stream's dimension.
    DimensionMismatch {
        /// The stream's dimension `d`.
        expected: usize,
        /// The length given.
        found: usize,
    },
    /// An input coordinate is NaN or infinite.
    NonFiniteInput {
        /// The first offending coordinate.
        index: usize,
    },
    /// An input coordinate's magnitude exceeds `2⁹⁶·ζ`, beyond the range clipping handles
    /// exactly (`clip`): refused rather than zeroed without a word.
    InputTooLarge {
        /// The first offending coordinate.
        index: usize,
    },
    /// A coordinate of one of the step's examples is not finite (`step_examples`).
    NonFiniteExample {
        /// The example (0-based row of the step's examples).
        example: usize,
        /// The first offending coordinate of that example.
        index: usize,
    },
    /// A coordinate of one of the step's examples exceeds `2⁹⁶·ζ` in magnitude
    /// (`step_examples`; as [`Error::InputTooLarge`]).
    ExampleTooLarge {
        /// The example (0-based row of the step's examples).
        example: usize,
        /// The first offending coordinate of that example.
        index: usize,
    },
    /// The step's noise is not finite: the blob's encoder has an inverse that grows without
    /// bound (a BandMF encoder whose forward substitution is unstable, e.g. `c = (1, −2)`). The
    /// step is refused with the state unchanged, and so will every later one be: the blob is
    /// unusable.
    NonFiniteRelease {
        /// The step (0-based) whose release would not be finite.
        step: u32,
        /// The first offending coordinate.
        index: usize,
    },
    /// A step's examples are not whole rows of the stream's dimension (`Stream::step_examples`).
    ExamplesShape {
        /// The stream's dimension `d`.
        dim: usize,
        /// The length of the examples given, not a multiple of `d`.
        len: usize,
    },
    /// All `n` steps of the stream have been released.
    StreamFinished {
        /// The horizon `n`.
        steps: u32,
    },
    /// The caller's workspace is shorter than
    /// [`Stream::workspace_len`](crate::Stream::workspace_len).
    WorkspaceTooSmall {
        /// Floats needed.
        needed: usize,
        /// Floats given.
        found: usize,
    },
    /// The blob records no noise multiplier and none was given.
    NotCalibrated,
    /// The noise multiplier is not a positive finite number, or the noise scale overflows `f32`.
    InvalidNoiseMultiplier,
    /// The workload is not a prefix sum: the runtime can only release its noise (`step_noise`).
    WorkloadNotStreamable,
    /// The dimension is zero or the workspace size overflows.
    InvalidDimension,
    /// The seed is all zeros (or otherwise refused).
    WeakSeed,
    /// The operating system's random source failed (`ChaChaNoise::from_os_entropy`).
    EntropyUnavailable,
    /// A shard's coordinate range is empty or does not lie inside its row.
    InvalidShard {
        /// First coordinate of the shard.
        start: usize,
        /// One past its last coordinate.
        end: usize,
        /// Coordinates in the whole row.
        row: usize,
    },
    /// A shard sees only part of each input row, so it cannot clip the row itself: use
    /// `Stream::step_clipped` with the factor of the whole row (`Stream::step_examples_clipped`
    /// with the factor of each whole example).
    ClipFactorRequired,
    /// A clip factor given to `Stream::step_clipped` or `Stream::step_examples_clipped` is not
    /// in `[0, 1]`.
    InvalidClipFactor,
    /// `Stream::step_examples_clipped` was given another number of clip factors than examples
    /// (one factor per example).
    ClipFactorsShape {
        /// The examples given (whole rows of the stream's dimension).
        examples: usize,
        /// The clip factors given.
        factors: usize,
    },
    /// The blob's clip norm `ζ`, rounded to `f32`, is outside `[2⁻⁶⁴, 2⁶⁴]`, where clipping is
    /// proven exact (`clip::clip_factor`).
    UnsupportedClipNorm,
    /// A checkpoint is truncated, lacks its magic, or its payload is malformed.
    MalformedCheckpoint,
    /// A checkpoint was written in a checkpoint format version this runtime does not read.
    UnsupportedCheckpointVersion {
        /// The version stored in the checkpoint.
        found: u16,
    },
    /// A checkpoint's CRC-32 does not match its bytes: it is corrupted.
    CheckpointChecksumMismatch {
        /// The checksum stored in the checkpoint.
        stored: u32,
        /// The checksum of the bytes as read.
        computed: u32,
    },
    /// A checkpoint belongs to another stream (blob, noise scale, dimension, shard, shape).
    CheckpointMismatch {
        /// What differs.
        field: &'static str,
    },
    /// A checkpoint's noise rows are not those of the stream's key.
    CheckpointKeyMismatch,
    /// A checkpoint belongs to another epoch than the device's release counter.
    CheckpointEpochMismatch {
        /// The epoch recorded in the checkpoint.
        checkpoint: u64,
        /// The epoch of the release counter.
        counter: u64,
    },
    /// A checkpoint (or stream) is behind the release counter: its later steps may have been
    /// released already, and computing them again would release them twice.
    StaleCheckpoint {
        /// Steps the checkpoint (or stream) has computed.
        step: u32,
        /// Steps the release counter says may have been released.
        released: u32,
    },
    /// A checkpoint can only be restored into a stream that has not taken a step.
    StreamAlreadyStarted,
    /// The buffer given to `Stream::checkpoint` is too short.
    CheckpointBufferTooSmall {
        /// Bytes that suffice (`Stream::checkpoint_capacity`).
        needed: usize,
        /// Bytes given.
        found: usize,
    },
    /// The release counter is at epoch 0: cold-start (`ReleaseCounter::cold_start`) before
    /// deriving a key.
    EpochNotStarted,
    /// The release counter's epoch cannot be incremented any more.
    EpochExhausted,
    /// An FFT-form blob's block is longer than this build's FFT sizes allow (see
    /// `fft::MAX_BLOCK`; the `fft-32768` feature raises it).
    FftBlockTooLarge {
        /// The blob's block length `m`.
        block: u32,
        /// The longest block this build replays.
        max: u32,
    },
    /// The blob records a sensitivity below the upper bound the device computed from its stored
    /// coefficients (`verify`): its noise is too small for the `(ε, δ)` it claims.
    SensitivityUnderstated {
        /// How far below the bound, in billionths of it (rounded up, at least 1).
        shortfall_ppb: u32,
    },
    /// The blob's noise multiplier (or the one given) is below the device's privacy floor
    /// (`policy`): a larger `ε` than the device accepts.
    BelowPrivacyFloor,
    /// The device's policy requires a verified sensitivity and this blob's could not be verified
    /// within its budget and scratch (`verify::Unverifiable`).
    SensitivityUnverified,
    /// The program verifies blobs of some forms only (`verify::verify_only`) and this blob's
    /// form (or its BLT bound over every horizon) is not one of them: refused, never admitted
    /// unverified.
    VerifierNotLinked,
    /// The blob has no signature trailer, and the caller requires one (`signature`).
    NotSigned,
    /// The blob's Ed25519 signature does not verify under the device's public key (another
    /// key, or any byte of the blob or the signature changed), or the public key is invalid.
    BadSignature,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::InvalidBlob(e) => write!(f, "invalid blob: {e}"),
            Error::UnsupportedDecoder => {
                f.write_str("the blob's decoder form is not supported by this runtime")
            }
            Error::DimensionMismatch { expected, found } => {
                write!(f, "row has {found} coordinates, the stream has {expected}")
            }
            Error::NonFiniteInput { index } => write!(f, "input coordinate {index} is not finite"),
            Error::InputTooLarge { index } => write!(
                f,
                "input coordinate {index} exceeds 2^96·ζ in magnitude, beyond the range the runtime clips exactly"
            ),
            Error::NonFiniteExample { example, index } => {
                write!(f, "example {example}, coordinate {index} is not finite")
            }
            Error::ExampleTooLarge { example, index } => write!(
                f,
                "example {example}, coordinate {index} exceeds 2^96·ζ in magnitude, beyond the range the runtime clips exactly"
            ),
            Error::NonFiniteRelease { step, index } => write!(
                f,
                "step {step}: the noise of coordinate {index} is not finite: the blob's encoder has an inverse that grows without bound (an unstable BandMF encoder), so no release is possible"
            ),
            Error::ExamplesShape { dim, len } => write!(
                f,
                "{len} floats of examples are not whole rows of the stream's {dim} coordinates"
            ),
            Error::StreamFinished { steps } => write!(f, "all {steps} steps have been released"),
            Error::WorkspaceTooSmall { needed, found } => {
                write!(f, "workspace has {found} floats, the stream needs {needed}")
            }
            Error::NotCalibrated => {
                f.write_str("the blob has no noise multiplier and none was given")
            }
            Error::InvalidNoiseMultiplier => {
                f.write_str("the noise multiplier is not a positive finite number")
            }
            Error::WorkloadNotStreamable => f.write_str(
                "the workload is not a prefix sum: only its noise can be released (step_noise)",
            ),
            Error::InvalidDimension => f.write_str("the dimension is zero or too large"),
            Error::WeakSeed => f.write_str("the seed is all zeros"),
            Error::EntropyUnavailable => {
                f.write_str("the operating system's random source is unavailable")
            }
            Error::InvalidShard { start, end, row } => {
                write!(
                    f,
                    "shard {start}..{end} is empty or outside a row of {row} coordinates"
                )
            }
            Error::ClipFactorRequired => f.write_str(
                "a shard cannot clip a row it sees only part of: give the whole row's clip factor",
            ),
            Error::InvalidClipFactor => f.write_str("the clip factor is not in [0, 1]"),
            Error::ClipFactorsShape { examples, factors } => write!(
                f,
                "{factors} clip factors for {examples} examples: give one whole-row factor per example"
            ),
            Error::UnsupportedClipNorm => {
                f.write_str("the clip norm is outside [2^-64, 2^64], where clipping is exact")
            }
            Error::MalformedCheckpoint => f.write_str("checkpoint is truncated or malformed"),
            Error::UnsupportedCheckpointVersion { found } => write!(
                f,
                "unsupported checkpoint format version {found} (this runtime reads {})",
                crate::checkpoint::VERSION
            ),
            Error::CheckpointChecksumMismatch { stored, computed } => write!(
                f,
                "checkpoint checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the checkpoint is corrupted"
            ),
            Error::CheckpointMismatch { field } => {
                write!(f, "checkpoint belongs to another stream ({field} differs)")
            }
            Error::CheckpointKeyMismatch => {
                f.write_str("checkpoint noise was not drawn with this stream's key")
            }
            Error::CheckpointEpochMismatch {
                checkpoint,
                counter,
            } => write!(
                f,
                "checkpoint is of epoch {checkpoint}, the release counter of epoch {counter}"
            ),
            Error::StaleCheckpoint { step, released } => write!(
                f,
                "stale: at step {step}, but {released} steps may have been released; resuming would release steps twice"
            ),
            Error::StreamAlreadyStarted => {
                f.write_str("a checkpoint can only be restored into a fresh stream")
            }
            Error::CheckpointBufferTooSmall { needed, found } => {
                write!(f, "checkpoint buffer has {found} bytes, {needed} suffice")
            }
            Error::EpochNotStarted => {
                f.write_str("the release counter is at epoch 0: cold-start a new epoch first")
            }
            Error::EpochExhausted => f.write_str("the release counter's epoch is exhausted"),
            Error::SensitivityUnderstated { shortfall_ppb: 1 } => f.write_str(
                "the blob's recorded sensitivity is below the bound computed from its coefficients by at most 1e-9 of it, the rounding of a blob compiled before device-side verification (recompile it): its noise is not proven to give the privacy it claims",
            ),
            Error::SensitivityUnderstated { shortfall_ppb } => write!(
                f,
                "the blob's recorded sensitivity is {:.4}% below the bound computed from its coefficients: its noise would not give the privacy it claims",
                f64::from(shortfall_ppb) / 1e7
            ),
            Error::BelowPrivacyFloor => f.write_str(
                "the blob's noise multiplier is below the device's privacy floor (minimum σ, or maximum ε at its δ)",
            ),
            Error::SensitivityUnverified => f.write_str(
                "the device's policy requires a verified sensitivity, and this blob's could not be verified within its budget",
            ),
            Error::NotSigned => f.write_str("the blob is not signed, and a signature is required"),
            Error::VerifierNotLinked => f.write_str(
                "the blob's form has no sensitivity verifier in this program (verify::verify_only): refused",
            ),
            Error::BadSignature => f.write_str(
                "the blob's signature does not verify under the device's public key (another key, or the blob was changed)",
            ),
            Error::FftBlockTooLarge { block, max } => write!(
                f,
                "FFT block of {block} steps is longer than this runtime's {max} (feature fft-32768)"
            ),
        }
    }
}

impl core::error::Error for Error {}

impl From<mfc_formats::Error> for Error {
    fn from(e: mfc_formats::Error) -> Self {
        Error::InvalidBlob(e)
    }
}
