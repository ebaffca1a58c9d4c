//! Continual counting's own objective: the **max error**, the largest per-step standard
//! deviation of the released workload (`ℓ₂ → ∞`), optimized for every form (issue 32).
//!
//! For `A = B C` with sensitivity `sens(C)` under the participation schema, release `i` has
//! variance `sens²·‖B[i,:]‖²` (units of `σ²ζ²`); the total loss is `L = sens²‖B‖_F²` (what the
//! rest of the compiler minimizes), the **max error** `sens·max_i ‖B[i,:]‖` (what a telemetry
//! counter's users read, and how the continual-observation literature states its bounds:
//! Fichtenberger, Henzinger, Upadhyay, ICML 2023; Henzinger, Upadhyay, Upadhyay, SODA 2023;
//! Dvijotham et al. 2024 for BLTs). Both are invariant under `(B, C) → (B/t, tC)`.
//!
//! - [`dense`]: the certified optimum under single participation, `γ₂(A)`, with its dual
//!   `max_{w,u} ‖W^{1/2}AU^{1/2}‖_*` (every iterate a primal point and a lower bound).
//! - [`banded_low_rank`]: the `(h, r)` form: the max-error optimum compressed, then refined on a
//!   smooth maximum of the per-step variances with the sensitivity of what ships.
//! - [`blt`]: BLTs fitted for the max error over a finite horizon, or over the design horizon
//!   with the sensitivity of every horizon (`--horizon unbounded`), and the limit growth rate
//!   jax_privacy calls `limit_max_error`.
//! - [`bandmf`]: banded encoders, general and Toeplitz, for the max error.
//! - [`fft`]: why the FFT form has nothing to optimize (its decoder is already max-error
//!   optimal for its fixed encoder) and its max error from the stored kernel.
//!
//! [`measure_decoder`] is the dense reference every figure is checked against: from a decoder as
//! stored, the encoder `B̂⁻¹A`, its sensitivity and the per-step variances.

pub mod banded_low_rank;
pub mod bandmf;
pub mod blt;
pub mod dense;
pub mod fft;
#[cfg(test)]
mod reference;

use faer::MatRef;
use mfc_formats::SensitivityMethod;

use crate::privacy::participation::{Participation, device_verifiable_sensitivity};
use crate::privacy::sensitivity::{encoder_for_decoder, per_step_variance};
use crate::request::option::{Opt, OptionError};
use crate::{Error, Result};

/// What a mechanism is optimized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Objective {
    /// The total squared error `L = sens²‖B‖_F²` (the default).
    #[default]
    Total,
    /// The max error `sens·max_i ‖B[i,:]‖`.
    Max,
}

impl Objective {
    /// The name on the command line and in reports: `total` or `max`.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Total => "total",
            Objective::Max => "max",
        }
    }

    /// What reports print on their `objective` line.
    pub fn describe(self) -> &'static str {
        match self {
            Objective::Total => {
                "total squared error sqrt(L) (the default; `max` minimizes the largest per-step stddev)"
            }
            Objective::Max => "max error: the largest per-step stddev",
        }
    }

    /// Parses `total` or `max`; the refusal names the value and the choices.
    pub fn parse(name: &str) -> std::result::Result<Self, OptionError> {
        match name {
            "total" => Ok(Objective::Total),
            "max" => Ok(Objective::Max),
            other => Err(OptionError::new(
                Opt::Objective,
                other,
                "expected `total` (the total squared error) or `max` (the largest per-step error)",
            )),
        }
    }
}

/// `max_i √v_i`: the max error of a per-step variance profile `v_i = sens²‖B[i,:]‖²`.
pub fn max_step_stddev(per_step_variance: &[f64]) -> f64 {
    per_step_variance.iter().copied().fold(0.0, f64::max).sqrt()
}

/// A decoder measured densely from its stored coefficients.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The sensitivity of `B̂⁻¹A` under the schema (the value a prefix-sum blob records).
    pub sensitivity: f64,
    /// How it was computed.
    pub method: SensitivityMethod,
    /// `sens²·‖B̂[i,:]‖²` per step.
    pub per_step_variance: Vec<f64>,
    /// `sens·max_i ‖B̂[i,:]‖`.
    pub max_error: f64,
    /// `sens·‖B̂‖_F`.
    pub sqrt_loss: f64,
}

/// The dense reference: for a lower-triangular decoder `B̂` (as stored), the encoder
/// `Ĉ = B̂⁻¹A` by a dense triangular solve (000 App. H), its sensitivity under `participation`
/// as a device verifying the blob recomputes it
/// ([`device_verifiable_sensitivity`]), and the per-step variances.
pub fn measure_decoder(
    a: MatRef<'_, f64>,
    decoder: MatRef<'_, f64>,
    participation: &Participation,
) -> Result<Measured> {
    let encoder = encoder_for_decoder(a, decoder)?;
    let s = device_verifiable_sensitivity(encoder.as_ref(), participation)?;
    if !(s.value.is_finite() && s.value > 0.0) {
        return Err(Error::Numerical(format!(
            "the encoder B̂⁻¹A has sensitivity {}",
            s.value
        )));
    }
    let per_step_variance = per_step_variance(decoder, s.value);
    Ok(Measured {
        sensitivity: s.value,
        method: s.method,
        max_error: max_step_stddev(&per_step_variance),
        sqrt_loss: per_step_variance.iter().sum::<f64>().sqrt(),
        per_step_variance,
    })
}
