//! The compiler's one error type: bad workloads and options, numerical failures, I/O, and blobs
//! the format crate refuses.

use std::fmt;

use crate::request::option::OptionError;

/// Why compiling, reading or writing a mechanism failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The workload matrix is unusable (not square, not lower triangular, singular, non-finite…).
    InvalidWorkload(String),
    /// An option of a request is refused: which one, the value, what is allowed. Each front end
    /// renders it in its own words ([`OptionError::render`]).
    Option(OptionError),
    /// An argument of a library function is out of its range (a band above the horizon, a gap
    /// that is not positive…): a caller's mistake, which requests never reach (they are checked
    /// first, as [`Error::Option`]).
    InvalidArgument(String),
    /// The optimizer stopped before certifying the requested duality gap.
    NotConverged {
        /// Iterations run.
        iterations: usize,
        /// The relative duality gap reached.
        relative_gap: f64,
    },
    /// A factorization or solve failed numerically.
    Numerical(String),
    /// Reading or writing a file failed.
    Io(std::io::Error),
    /// A blob could not be encoded or decoded.
    Blob(mfc_formats::Error),
    /// A blob's stored privacy target claims a smaller `ε` than its noise multiplier gives at
    /// its `δ` (`report::derived_privacy`).
    OverstatedPrivacy {
        /// The `ε` the blob claims.
        claimed_epsilon: f64,
        /// The `ε` its `σ` gives at `delta` (infinite when above 10⁴).
        epsilon: f64,
        /// The claimed `δ`.
        delta: f64,
        /// The blob's `σ`.
        noise_multiplier: f64,
    },
    /// The compile was stopped by [`crate::interrupt::interrupt`] (Python's Ctrl-C).
    Interrupted,
    /// A blob file could not be read.
    BlobFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        error: mfc_formats::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidWorkload(why) => write!(f, "invalid workload: {why}"),
            Error::Option(e) => write!(f, "invalid option: {e}"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::NotConverged {
                iterations,
                relative_gap,
            } => write!(
                f,
                "optimizer did not certify the requested gap after {iterations} iterations (relative gap {relative_gap:.3e})"
            ),
            Error::Numerical(why) => write!(f, "numerical failure: {why}"),
            Error::Interrupted => write!(f, "interrupted"),
            Error::Io(e) => write!(f, "{e}"),
            Error::Blob(e) => write!(f, "{e}"),
            Error::OverstatedPrivacy {
                claimed_epsilon,
                epsilon,
                delta,
                noise_multiplier,
            } => write!(
                f,
                "the blob claims (ε, δ) = ({claimed_epsilon}, {delta:e}), but its noise multiplier σ = {noise_multiplier} gives ε = {} at that δ: its stored privacy target is false",
                if epsilon.is_finite() {
                    crate::request::option::epsilon_text(*epsilon)
                } else {
                    "more than 10⁴".to_string()
                }
            ),
            Error::BlobFile { path, error } => write!(f, "{path}: {error}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Io and Blob display their inner error themselves: its source is theirs (a chain
        // printed as `mfc: {err}: {source}…` would say it twice otherwise).
        match self {
            Error::Io(e) => e.source(),
            Error::Blob(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<OptionError> for Error {
    fn from(e: OptionError) -> Self {
        Error::Option(e)
    }
}

impl From<mfc_formats::Error> for Error {
    fn from(e: mfc_formats::Error) -> Self {
        Error::Blob(e)
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
