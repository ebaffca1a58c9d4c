//! Lower-triangular Toeplitz encoders as power series: a lower-triangular Toeplitz matrix is
//! its first column `c_0, c_1, …`, i.e. the power series `c(x)`; products and inverses are those
//! of power series. For single participation the sensitivity is the norm of the first column,
//! `sens² = Σ_{k<n} c_k²`, and `‖B‖_F² = Σ_k (n − k) b_k²` with `b(x) = r(x)/(1 − x)`, `r = 1/c`
//! for the prefix sum `S = B C`. The square root `C = B = S^{1/2}` has `c(x) = (1 − x)^{−1/2}`,
//! `c_k = binom(2k, k)/4^k`. Used by the BLT ([`super::blt`]), the banded Toeplitz encoders
//! ([`super::banded::toeplitz`]) and the comparisons.

use mfc_formats::SensitivityMethod;

use crate::privacy::participation::{Participation, Sensitivity};
/// The error of a Toeplitz factorization of the prefix sum over `n` steps (single
/// participation).
#[derive(Debug, Clone)]
pub struct ToeplitzError {
    /// `sens = sqrt(Σ_{k<n} c_k²)`.
    pub sensitivity: f64,
    /// `L = sens²·‖B‖_F²`.
    pub loss: f64,
    /// `sens²·‖B[i,:]‖²` per step.
    pub per_step_variance: Vec<f64>,
}

/// `1/c` as a power series, to `n` terms (`c_0 ≠ 0`), in `O(n·len(c))`.
pub fn inverse_series(c: &[f64], n: usize) -> Vec<f64> {
    let mut r = vec![0.0; n];
    for k in 0..n {
        let mut total = if k == 0 { 1.0 } else { 0.0 };
        for l in 1..=k.min(c.len().saturating_sub(1)) {
            total -= c[l] * r[k - l];
        }
        r[k] = total / c[0];
    }
    r
}

/// The sensitivity of the lower-triangular Toeplitz encoder `C = T(c)` over `horizon` steps
/// (`c` its first column, zero past `c.len()`), in `O(horizon·k)`:
///
/// - single participation: the first column's norm (the longest column);
/// - `c` with at most `b` entries (a banded encoder with `≤ b` bands): columns a pattern can hold
///   are orthogonal and the column norms do not increase, so `{0, b, 2b, …}` is the worst
///   pattern ([`OrthogonalColumns`](SensitivityMethod::OrthogonalColumns), exact);
/// - fixed epoch order: `‖|C| u‖²` for `u` the indicator of `{0, b, …}`: `|X_ij| ≤ (|C|ᵀ|C|)_ij`,
///   and for the non-negative `|C|` shifting a pattern later only truncates non-negative sums,
///   so the first window is the worst (exact, [`NonnegativeGram`], when `c ≥ 0`);
/// - `b`-min-separation: the same with `|c|` replaced by its smallest non-increasing majorant
///   `ĉ_t = max_{t' ≥ t} |c_{t'}|`. The Gram entries of `T(ĉ)`, `Σ_s ĉ_s ĉ_{s+δ}` truncated at the
///   horizon, do not increase with the gap `δ` nor with the later step, and moving the `p`-th
///   step of any pattern to `p·b` shrinks every gap and every index, so `{0, b, …}` is the worst
///   pattern. Exact ([`NonincreasingToeplitz`]) when `c` is itself non-negative and
///   non-increasing, else an upper bound ([`ToeplitzMajorantBound`]).
///
/// [`NonnegativeGram`]: SensitivityMethod::NonnegativeGram
/// [`NonincreasingToeplitz`]: SensitivityMethod::NonincreasingToeplitz
/// [`ToeplitzMajorantBound`]: SensitivityMethod::ToeplitzMajorantBound
pub fn toeplitz_sensitivity(
    c: &[f64],
    horizon: usize,
    participation: &Participation,
) -> Sensitivity {
    let c = &c[..c.len().min(horizon)];
    let square = |x: f64| x * x;
    let (k, b) = match *participation {
        Participation::Single => {
            return Sensitivity {
                value: c.iter().copied().map(square).sum::<f64>().sqrt(),
                method: SensitivityMethod::MaxColumnNorm,
            };
        }
        Participation::FixedEpochOrder { epochs, separation } => (epochs, separation),
        Participation::MinSeparation {
            max_participations,
            min_separation,
        } => (max_participations, min_separation),
    };
    let b = b.max(1);
    let starts = || (0..horizon).step_by(b).take(k);
    if c.len() <= b {
        // Column j has norm² Σ_{t < horizon − j} c_t².
        let mut tail = vec![0.0; c.len() + 1];
        for t in (0..c.len()).rev() {
            tail[t] = tail[t + 1] + square(c[t]);
        }
        let value: f64 = starts()
            .map(|s| tail[0] - tail[c.len().min(horizon - s)])
            .sum();
        return Sensitivity {
            value: value.sqrt(),
            method: SensitivityMethod::OrthogonalColumns,
        };
    }
    let (column, method): (Vec<f64>, _) = match participation {
        Participation::MinSeparation { .. } => {
            let mut majorant: Vec<f64> = c.iter().map(|x| x.abs()).collect();
            for t in (0..majorant.len().saturating_sub(1)).rev() {
                majorant[t] = majorant[t].max(majorant[t + 1]);
            }
            let exact = majorant.iter().zip(c).all(|(m, x)| m == x);
            (
                majorant,
                if exact {
                    SensitivityMethod::NonincreasingToeplitz
                } else {
                    SensitivityMethod::ToeplitzMajorantBound
                },
            )
        }
        _ => (
            c.iter().map(|x| x.abs()).collect(),
            if c.iter().all(|&x| x >= 0.0) {
                SensitivityMethod::NonnegativeGram
            } else {
                SensitivityMethod::AbsoluteGramBound
            },
        ),
    };
    // Σ_t (Σ_{s ∈ first pattern} column_{t−s})² over t below the horizon.
    let span = (starts().next_back().unwrap_or(0) + column.len()).min(horizon);
    let mut sum = vec![0.0; span];
    for s in starts() {
        for (t, &x) in column.iter().enumerate() {
            if let Some(v) = sum.get_mut(s + t) {
                *v += x;
            }
        }
    }
    Sensitivity {
        value: sum.into_iter().map(square).sum::<f64>().sqrt(),
        method,
    }
}

/// The loss of the encoder `C = T(c)` (first `n` coefficients of `c`, missing ones zero) with
/// decoder `B = S C⁻¹`, from the decoder's coefficients `r = 1/c` (both given).
pub(crate) fn prefix_error(
    c: &[f64],
    r: &[f64],
    n: usize,
    participation: &Participation,
) -> ToeplitzError {
    let sens2 = toeplitz_sensitivity(c, n, participation).value.powi(2);
    let mut b = 0.0;
    let mut row = 0.0;
    let mut per_step_variance = Vec::with_capacity(n);
    for &rk in r.iter().take(n) {
        b += rk;
        row += b * b;
        per_step_variance.push(sens2 * row);
    }
    ToeplitzError {
        sensitivity: sens2.sqrt(),
        loss: per_step_variance.iter().sum(),
        per_step_variance,
    }
}

/// The error of a Toeplitz encoder given by its coefficients (`c_0 ≠ 0`) over `n` steps, single
/// participation.
pub fn toeplitz_error(c: &[f64], n: usize) -> ToeplitzError {
    prefix_error(c, &inverse_series(c, n), n, &Participation::Single)
}

/// `c_k = binom(2k, k)/4^k`, the coefficients of `(1 − x)^{−1/2}` (`C = S^{1/2}`).
pub fn square_root_coefficients(n: usize) -> Vec<f64> {
    let mut c = Vec::with_capacity(n);
    let mut x = 1.0;
    for k in 0..n {
        if k > 0 {
            x *= (2 * k - 1) as f64 / (2 * k) as f64;
        }
        c.push(x);
    }
    c
}
