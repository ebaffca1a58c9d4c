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
    /// All `n` steps of the stream have been released.
    StreamFinished {
        /// The horizon `n`.
        steps: u32,
    },
    /// The caller's workspace is shorter than [`Stream::workspace_len`](crate::Stream::workspace_len).
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
        }
    }
}

impl core::error::Error for Error {}

impl From<mfc_formats::Error> for Error {
    fn from(e: mfc_formats::Error) -> Self {
        Error::InvalidBlob(e)
    }
}
