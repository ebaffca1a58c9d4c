//! A certified **lower** bound on a blob's sensitivity, for the blobs whose upper bound cannot be
//! certified ([`super::Unverifiable`]): a recorded sensitivity below it is understated whatever
//! the rest of the encoder holds, and [`super::verify`] refuses it
//! ([`crate::Error::SensitivityUnderstated`]) instead of leaving the decision to the caller's
//! policy. It catches gross understatement (a forged blob that halved its sensitivity and made
//! itself unverifiable, a tiny pivot, a BLT encoder that does not decay) on devices and hosts
//! that admit unverifiable blobs by choice.
//!
//! **Why a single column suffices.** Every participation schema lets a record take part in one
//! step only, so the sensitivity under any schema is at least that under single participation,
//! `max_j ‖Ĉ e_j‖` (003 Eq. 2; 001 Eq. 3 with a pattern of one step), and at
//! least any one column's norm, which is at least any one of its entries. For the neighbouring
//! relation replace-one the bound doubles, as the recorded value does.
//!
//! | form | lower bound (before the relation's factor) | operations |
//! |---|---|---|
//! | BandMF | `max_j ‖Ĉ e_j‖` over the columns the budget reaches (the stored coefficients) | `b̂` per column |
//! | BLT | `‖ĉ_{<T}‖₂ / (1 + ‖ρ_{<T}‖₁)`, the encoder `c = 1/r` over its first `T` steps, `ρ` its residual | `m` per step |
//! | banded + low rank, prefix sum | `max_j 1/\|B̂[j, j]\|`: `Ĉ = B̂⁻¹S` is lower triangular with `Ĉ[j, j] = 1/B̂[j, j]` | `n` |
//! | FFT, banded for a custom workload | none (`None`) | — |
//!
//! **Rounding, always downward.** A sum of `N` non-negative `f64` terms is at least
//! `(1 − (N + 2)·2u)` times the computed one (`u = 2⁻⁵³`, Higham 2002, §4.2), a correctly rounded
//! square root or reciprocal at least `(1 − 2u)` times the computed one. For the BLT, truncating
//! the convolution `c − ĉ = c * ρ` to its first `T` terms involves only those terms, so
//! `‖(c − ĉ)_{<T}‖ ≤ ‖ρ_{<T}‖₁‖c_{<T}‖` and `‖c_{<T}‖ ≥ ‖ĉ_{<T}‖ − ‖ρ_{<T}‖₁‖c_{<T}‖`: the bound
//! holds for any residual, large or small (`ρ` computed with running error bounds, as in
//! [`super`]).

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

use mfc_formats::{BandMfKind, Decoder, F32Table, Validated, Workload};

use super::{TWO_U, blt_residual};

/// `x` lowered by its rounding: `N` non-negative terms summed, or one correctly rounded
/// operation (`terms = 0`).
fn down(x: f64, terms: u64) -> f64 {
    x * (1.0 - (terms as f64 + 3.0) * TWO_U)
}

/// A lower bound on the sensitivity of `m`'s stored coefficients under any participation schema
/// and its neighbouring relation (module docs), spending at most `max_operations` operations and,
/// for a BLT, the first `2m` floats of `scratch` (which [`super::scratch_len`] always covers);
/// `None` when this form has none here (or this build leaves it out) or it could not be computed (too little scratch, a
/// non-finite value).
pub fn sensitivity_lower_bound(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Option<f64> {
    let factor = m.header.neighbouring.sensitivity_factor();
    let steps = m.header.steps as usize;
    let bound: f64 = match m.decoder {
        #[cfg(feature = "form-bandmf")]
        Decoder::BandMf(d) => {
            let bands = d.bands();
            let columns = match d.kind {
                // Every column of a Toeplitz encoder is a prefix of the first.
                BandMfKind::Toeplitz => 1,
                _ => {
                    steps.min(usize::try_from(max_operations / bands as u64).unwrap_or(usize::MAX))
                }
            };
            let mut best = 0.0f64;
            for j in 0..columns {
                let mut sum = 0.0f64;
                let mut terms = 0;
                for l in 0..bands.min(steps - j) {
                    let x = match d.kind {
                        BandMfKind::Toeplitz => d.encoder.get(l),
                        _ => d.encoder.get((j + l) * bands + l),
                    };
                    // The product of two f32 is exact in f64.
                    let x = f64::from(x.unwrap_or(0.0));
                    sum += x * x;
                    terms += 1;
                }
                best = best.max(down(sum, terms));
            }
            down(libm::sqrt(best), 0)
        }
        #[cfg(feature = "form-blt")]
        Decoder::Blt(d) => {
            let buffers = d.buffers();
            let state = scratch.get_mut(..2 * buffers)?;
            state.fill(0.0);
            let horizon = if m.header.sensitivity.method.covers_every_horizon() {
                u64::MAX
            } else {
                steps as u64
            };
            // A lower bound may stop anywhere: the first `BLT_STEPS` steps bound an unbounded
            // horizon, or a budget of `u64::MAX`, in bounded time (a marginal forged encoder,
            // spectral radius 1, would otherwise be followed for 2^64 steps).
            let reach = horizon
                .min(max_operations / (buffers as u64).max(1))
                .min(BLT_STEPS);
            blt_lower(d.theta, d.omega, state, reach)
        }
        #[cfg(feature = "form-banded")]
        Decoder::BandedLowRank(d) if matches!(m.header.workload, Workload::PrefixSum) => {
            let mut smallest = f64::INFINITY;
            for j in 0..steps {
                let pivot = d
                    .diagonal_row(j)
                    .and_then(|row| row.get(0))
                    .map_or(f64::INFINITY, |x| f64::from(x).abs());
                smallest = smallest.min(pivot);
            }
            down(1.0 / smallest, 0)
        }
        _ => return None,
    };
    let bound = factor * bound;
    (bound.is_finite() && bound > 0.0).then_some(bound)
}

/// The most steps of a BLT's encoder column the lower bound follows, whatever the horizon and
/// the budget: `2^20`, where an honest encoder (`θ < 1`) has long converged.
pub const BLT_STEPS: u64 = 1 << 20;

/// `‖ĉ_{<T}‖₂ / (1 + ‖ρ_{<T}‖₁)` rounded down, `T = reach` (module docs); stops early, with the
/// bound so far, when a value stops being finite.
fn blt_lower(theta: F32Table<'_>, omega: F32Table<'_>, state: &mut [f64], reach: u64) -> f64 {
    let (mut norm, mut residual, mut terms) = (0.0f64, 0.0f64, 0u64);
    for t in 0..reach {
        let (c, r) = blt_residual(theta, omega, state, if t == 0 { 1.0 } else { 0.0 });
        let (next_norm, next_residual) = (norm + c * c, residual + r);
        if !(next_norm.is_finite() && next_residual.is_finite()) {
            break;
        }
        (norm, residual, terms) = (next_norm, next_residual, terms + 1);
    }
    // ‖ρ‖₁ rounded up, ‖ĉ‖₂ rounded down.
    let residual = residual * (1.0 + (terms as f64 + 3.0) * TWO_U);
    down(down(libm::sqrt(down(norm, terms)), 0) / (1.0 + residual), 0)
}
