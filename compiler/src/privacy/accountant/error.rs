//! The accountant's typed refusals: each names the option ([`Opt`]), the value and what is
//! allowed, and converts to the crate's [`OptionError`], which each front end spells in its own
//! words (`--sampling-prob 2` / `sampling_prob=2`).

use std::fmt;

use crate::request::option::{Opt, OptionError};

/// Why the accountant refused or failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AccountantError {
    /// A value outside its range.
    OutOfRange {
        /// The option.
        option: Opt,
        /// The value given, as text.
        value: String,
        /// What is allowed, e.g. `(0, 1]`.
        allowed: &'static str,
    },
    /// Replace-one neighbouring with Poisson sampling (`q < 1`): refused, see the module docs of
    /// [`crate::privacy::accountant`].
    ReplaceOneWithSampling {
        /// The sampling probability given.
        sampling_prob: f64,
    },
    /// More bands than steps.
    BandsAboveSteps {
        /// `b̂`.
        bands: usize,
        /// `n`.
        steps: usize,
    },
    /// `expected batch · bands / dataset size > 1`: no per-group sampling probability gives that
    /// expected batch.
    BatchTooLarge {
        /// The expected batch size.
        batch_size: f64,
        /// `b̂`.
        bands: usize,
        /// The number of examples.
        dataset_size: u64,
    },
    /// The composed privacy loss distribution needs more grid points than allowed.
    GridTooLarge {
        /// Points needed.
        points: usize,
        /// The limit ([`super::PldOptions::max_points`]).
        limit: usize,
        /// The grid interval used.
        discretization: f64,
    },
    /// No noise multiplier up to the search limit meets the target.
    TargetUnreachable {
        /// Target `ε`.
        epsilon: f64,
        /// Target `δ`.
        delta: f64,
        /// Why.
        why: String,
    },
}

impl AccountantError {
    /// The refusal as an [`OptionError`]: the option, the value, and what is allowed, naming
    /// other options by placeholder.
    pub fn option_error(&self) -> OptionError {
        match self {
            AccountantError::OutOfRange {
                option,
                value,
                allowed,
            } => OptionError::new(*option, value, format!("expected {allowed}")),
            AccountantError::ReplaceOneWithSampling { sampling_prob } => OptionError::new(
                Opt::Neighbouring,
                "replace-one",
                format!(
                    "with {{sampling_prob}} {sampling_prob}, the Poisson-sampled accountant supports add-remove (and zero-out) only; use {{neighbouring}} add-remove or {{sampling_prob}} 1"
                ),
            ),
            AccountantError::BandsAboveSteps { bands, steps } => OptionError::new(
                Opt::Bands,
                bands,
                format!("expected 1..={steps} (at most {{steps}} {steps})"),
            ),
            AccountantError::BatchTooLarge {
                batch_size,
                bands,
                dataset_size,
            } => OptionError::new(
                Opt::BatchSize,
                batch_size,
                format!(
                    "expected at most {{dataset_size}} / {{bands}} = {dataset_size} / {bands} (the sampling probability batch·bands/dataset must be in (0, 1])"
                ),
            ),
            AccountantError::GridTooLarge {
                points,
                limit,
                discretization,
            } => OptionError::new(
                Opt::Discretization,
                discretization,
                format!(
                    "the composed privacy loss needs {points} grid points, above the limit {limit} (ε would be very large; a coarser {{discretization}} is still an upper bound)"
                ),
            ),
            AccountantError::TargetUnreachable {
                epsilon,
                delta,
                why,
            } => OptionError::new(
                Opt::Epsilon,
                epsilon,
                format!("at {{delta}} {delta}: {why}"),
            ),
        }
    }
}

impl fmt::Display for AccountantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.option_error().fmt(f)
    }
}

impl std::error::Error for AccountantError {}

impl From<AccountantError> for crate::Error {
    fn from(e: AccountantError) -> Self {
        crate::Error::Option(e.option_error())
    }
}
