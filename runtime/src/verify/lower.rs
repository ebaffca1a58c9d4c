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

use mfc_formats::{BandMfKind, Decoder, F32Table, Validated, Workload};

use super::{TWO_U, blt_residual, forms, larger, smaller};

/// `x` lowered by its rounding: `N` non-negative terms summed, or one correctly rounded
/// operation (`terms = 0`).
fn down(x: f64, terms: u64) -> f64 {
    x * (1.0 - (terms as f64 + 3.0) * TWO_U)
}

/// A lower bound on the sensitivity of `m`'s stored coefficients under any participation schema
/// and its neighbouring relation (module docs), spending at most `max_operations` operations and,
/// for a BLT, the first `2m` floats of `scratch` (which [`super::scratch_len`] always covers);
/// `None` when this form has none here or it could not be computed (too little scratch, a
/// non-finite value).
pub fn sensitivity_lower_bound(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Option<f64> {
    lower_bound_of::<{ forms::ALL }>(m, scratch, max_operations)
}

/// [`sensitivity_lower_bound`] for the forms of `FORMS` only ([`forms`], as
/// [`super::verify_only`]); `None` for the others.
pub(crate) fn lower_bound_of<const FORMS: u8>(
    m: &Validated<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Option<f64> {
    let factor = m.header.neighbouring.sensitivity_factor();
    let steps = m.header.steps as usize;
    let bound = match m.decoder {
        Decoder::BandMf(d) if FORMS & forms::BANDMF != 0 => {
            let bands = d.bands();
            let columns = match d.kind {
                // Every column of a Toeplitz encoder is a prefix of the first.
                BandMfKind::Toeplitz => 1,
                // min(n, ⌊max_operations / b̂⌋); at most n, so it fits.
                _ => affordable(steps as u64, bands as u64, max_operations) as usize,
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
                best = larger(best, down(sum, terms));
            }
            down(super::sqrt::sqrt(best), 0)
        }
        Decoder::Blt(d) if FORMS & (forms::BLT | forms::BLT_EVERY_HORIZON) != 0 => {
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
            let reach = affordable(
                horizon.min(BLT_STEPS),
                (buffers as u64).max(1),
                max_operations,
            );
            blt_lower(d.theta, d.omega, state, reach)
        }
        Decoder::BandedLowRank(d)
            if FORMS & forms::BANDED != 0 && matches!(m.header.workload, Workload::PrefixSum) =>
        {
            let mut smallest = f64::INFINITY;
            for j in 0..steps {
                let pivot = d
                    .diagonal_row(j)
                    .and_then(|row| row.get(0))
                    .map_or(f64::INFINITY, |x| f64::from(x).abs());
                smallest = smaller(smallest, pivot);
            }
            down(1.0 / smallest, 0)
        }
        _ => return None,
    };
    let bound = factor * bound;
    (bound.is_finite() && bound > 0.0).then_some(bound)
}

/// `min(limit, ⌊max_operations / cost⌋)` for `cost ≥ 1`, by bisection on the quotient: a 64-bit
/// division would link `__aeabi_uldivmod` (0.9 KB on a Cortex-M4F) for this one budget.
fn affordable(limit: u64, cost: u64, max_operations: u64) -> u64 {
    let within = |count: u64| {
        count
            .checked_mul(cost)
            .is_some_and(|ops| ops <= max_operations)
    };
    if within(limit) {
        return limit;
    }
    // lo·cost ≤ max_operations < hi·cost throughout.
    let (mut lo, mut hi) = (0u64, limit);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if within(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
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
    down(
        down(super::sqrt::sqrt(down(norm, terms)), 0) / (1.0 + residual),
        0,
    )
}

#[cfg(test)]
mod tests {
    use super::affordable;

    /// The bisection is the quotient it replaces, `min(limit, ⌊max / cost⌋)`.
    #[test]
    fn the_budget_in_steps_is_the_quotient() {
        let values = [
            0u64,
            1,
            2,
            3,
            7,
            8,
            9,
            63,
            64,
            65,
            1000,
            1 << 20,
            (1 << 20) + 1,
        ];
        let large = [u64::MAX, u64::MAX - 1, u64::MAX / 3, 1 << 40];
        for &limit in values.iter().chain(&large) {
            for &cost in values.iter().chain(&large).filter(|&&c| c >= 1) {
                for &max in values.iter().chain(&large) {
                    assert_eq!(
                        affordable(limit, cost, max),
                        limit.min(max / cost),
                        "limit {limit}, cost {cost}, max {max}"
                    );
                }
            }
        }
    }
}
