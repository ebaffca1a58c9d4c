//! The general banded encoder optimizer: every band entry of `C` free (`n·b̂` parameters), for any
//! lower-triangular workload and schema with `b̂ ≤ b` ([`super`] for the encoder and its
//! sensitivity).
//!
//!
//! The loss of `C` with its optimal decoder `B = A C⁻¹` is `L(C) = ‖A C⁻¹‖_F² · sens(C)²`,
//! invariant under scaling `C`. We minimize over the `n·b̂` band entries (the BandMF paper fixes
//! every column norm to 1; letting them differ can only do better)
//!
//! ```text
//! F(C) = ‖A C⁻¹‖_F² · s̃(ν),    s̃(ν) = κ·s_τ(ν/κ),  κ = mean(ν),
//! ```
//!
//! where `s_τ` is the smoothed maximum over patterns of [`Participation::soft_max_pattern_sum`]
//! (`s ≤ s_τ`, so `F` bounds the loss from above), with `τ` decreased over three rounds. Each
//! evaluation costs `O(n²·b̂)`, no `n × n` factorization: `B` by back substitution row by row
//! (`B C = A`), `E = B C⁻ᵀ` by forward substitution, and
//!
//! ```text
//! ∂‖AC⁻¹‖_F²/∂C = −2 Bᵀ E   (from dB = −B dC C⁻¹),     ∂s̃/∂C_ij = 2 C_ij ∂s̃/∂ν_j,
//! ```
//!
//! restricted to the band. L-BFGS (`lbfgs.rs`) minimizes `F`, each round until `F` has
//! improved by less than a relative `10⁻⁴` over 20 iterations; the result's loss is then measured
//! with the exact maximum. The pipelines start it from the banded Toeplitz optimum
//! ([`crate::optimize::banded::toeplitz`], `O(n·b̂)` per evaluation for the prefix sum): at n = 512, prefix
//! sum, min-separation (4, 128), `b̂ = 128` it reaches √L = 130.40 in 288 iterations (27 s here),
//! where the truncated square root and a stop on `|ΔF| ≤ 10⁻¹²·F` took 1 900 iterations (72 s)
//! for 130.38. No certificate: the certified optimum of fixed epoch order is a floor for every
//! min-separation mechanism (its patterns are a subset).

use faer::{Mat, MatRef};

use super::{BandedEncoder, check_orthogonal, frobenius_and_gradient, loss};
use crate::optimize::lbfgs::{Plateau, Point, minimize};
use crate::optimize::single::{Optimum, Progress};
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// One evaluation of `F` (module docs).
struct Evaluation {
    value: f64,
    gradient: Vec<f64>,
}

impl Point for Evaluation {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

/// `F = ‖AC⁻¹‖²·s̃(ν)` and its gradient at the band `x` (module docs).
fn evaluate(
    a: MatRef<'_, f64>,
    shape: &BandedEncoder,
    participation: &Participation,
    tau: f64,
    x: &[f64],
) -> Option<Evaluation> {
    let encoder = BandedEncoder {
        columns: x.to_vec(),
        ..shape.clone()
    };
    let (frobenius, mut gradient) = frobenius_and_gradient(a, &encoder)?;
    let nu = encoder.column_norms2();
    let n = nu.len() as f64;
    let kappa = nu.iter().sum::<f64>() / n;
    if !(kappa.is_finite() && kappa > 0.0) {
        return None;
    }
    let u: Vec<f64> = nu.iter().map(|v| v / kappa).collect();
    let (soft, g) = participation.soft_max_pattern_sum(&u, tau);
    let s = kappa * soft;
    let drift = (soft - g.iter().zip(&u).map(|(g, u)| g * u).sum::<f64>()) / n;
    let h = encoder.bands;
    for (q, dq) in gradient.iter_mut().enumerate() {
        let j = q / h;
        let ds_dnu = g[j] + drift;
        *dq = s * *dq + frobenius * ds_dnu * 2.0 * x[q];
    }
    Some(Evaluation {
        value: frobenius * s,
        gradient,
    })
}

/// Stopping rule and budget of [`optimize_banded`].
#[derive(Debug, Clone)]
pub struct BandedOptions {
    /// Most L-BFGS iterations per smoothing round.
    pub iterations: usize,
    /// Temperatures of the smoothed maximum, one round each (on column norms scaled to mean 1).
    pub temperatures: Vec<f64>,
    /// A round stops when `F` improved by at most `tolerance` (relative) over this many
    /// iterations.
    pub window: usize,
    /// See `window`.
    pub tolerance: f64,
}

impl Default for BandedOptions {
    fn default() -> Self {
        Self {
            iterations: 1000,
            temperatures: vec![0.05, 0.005, 0.0005],
            window: 20,
            tolerance: 1e-4,
        }
    }
}

/// The truncated square root `C = S^{1/2}` (Toeplitz, `c_t = binom(2t, t)/4^t`) with `bands`
/// bands: the starting point.
pub fn truncated_square_root(steps: usize, bands: usize) -> BandedEncoder {
    BandedEncoder::toeplitz(
        &crate::optimize::toeplitz::square_root_coefficients(bands),
        steps,
    )
}

/// The banded encoder with `bands` bands minimizing `‖A C⁻¹‖_F²·sens(C)²` under
/// `participation` (module docs), from `start` (for example [`truncated_square_root`]); never
/// worse than `start` in the exact loss. `progress` gets `(round, iteration, F)`.
pub fn optimize_banded(
    a: MatRef<'_, f64>,
    start: BandedEncoder,
    participation: &Participation,
    options: &BandedOptions,
    progress: &mut dyn FnMut(usize, usize, f64),
) -> Result<BandedEncoder> {
    check_orthogonal(start.bands, participation)?;
    let mut x = start.columns.clone();
    for (round, &tau) in options.temperatures.iter().enumerate() {
        let first = evaluate(a, &start, participation, tau, &x)
            .ok_or_else(|| Error::Numerical("the starting banded encoder is degenerate".into()))?;
        let mut plateau = Plateau::new(options.window, options.tolerance);
        let (next, _, _) = minimize(
            x,
            first,
            10,
            options.iterations,
            &mut |x| evaluate(a, &start, participation, tau, x),
            &mut |iteration, _, p| {
                progress(round, iteration, p.value);
                Ok(plateau.done(p.value))
            },
        )?;
        x = next;
    }
    // The smoothed maximum only bounds the sensitivity: keep the start if the exact loss of the
    // result is not lower (a start with equal column norms, such as a Toeplitz one, is where the
    // smoothing is loosest).
    let result = BandedEncoder {
        columns: x,
        ..start.clone()
    };
    if loss(a, &result, participation)? < loss(a, &start, participation)? {
        Ok(result)
    } else {
        Ok(start)
    }
}

/// The optimum over banded encoders with `b̂ = min(b, n)` bands under `b`-min-separation: the
/// largest band whose columns stay orthogonal within every pattern (with `b̂ = b` this is the
/// min-separation recipe of jax_privacy's `dense.optimize(bands=min_sep)`), started from the
/// banded Toeplitz optimum ([`crate::optimize::banded::toeplitz`]). Returned as an [`Optimum`] normalized
/// to sensitivity 1, with no certificate (`dual_bound = 0`, `relative_gap = 1`): see the module
/// docs for the floor that holds instead.
pub fn optimize_min_separation(
    a: MatRef<'_, f64>,
    participation: &Participation,
    options: &BandedOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Optimum> {
    let n = a.nrows();
    let bands = participation.separation().unwrap_or(n).min(n);
    let problem = crate::optimize::banded::toeplitz::ToeplitzProblem::for_matrix(a, participation)?;
    let toeplitz = crate::optimize::banded::toeplitz::optimize(
        &problem,
        bands,
        None,
        &crate::optimize::banded::toeplitz::ToeplitzOptions::default(),
        &mut |_, _| {},
    )?;
    let mut iterations = 0;
    let encoder = optimize_banded(
        a,
        BandedEncoder::toeplitz(&toeplitz, n),
        participation,
        options,
        &mut |_, _, value| {
            iterations += 1;
            progress(&Progress {
                iteration: iterations,
                primal: value,
                dual: 0.0,
                relative_gap: f64::NAN,
            });
        },
    )?;
    let sens = encoder.sensitivity(participation)?;
    let c = encoder.to_dense();
    let c = Mat::from_fn(n, n, |i, j| c[(i, j)] / sens);
    let x = c.transpose() * &c;
    let loss = {
        let b = BandedEncoder {
            columns: encoder.columns.iter().map(|v| v / sens).collect(),
            ..encoder.clone()
        }
        .decoder(a)?;
        b.squared_norm_l2()
    };
    Ok(Optimum {
        v: (0..n).map(|i| x[(i, i)]).collect(),
        x,
        loss,
        dual_bound: 0.0,
        relative_gap: 1.0,
        iterations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    /// The decoder solves `B C = A`; the gradient of `F` matches central differences; the
    /// exact sensitivity equals brute force on the dense encoder.
    #[test]
    fn decoder_gradient_and_sensitivity_match_references() {
        let (n, h) = (9, 3);
        let a = Workload::PrefixSum.matrix(n).unwrap();
        let mut encoder = truncated_square_root(n, h);
        for (q, x) in encoder.columns.iter_mut().enumerate() {
            *x *= 1.0 + 0.1 * ((q * 7 % 5) as f64 - 2.0);
        }
        let dense = encoder.to_dense();
        let b = encoder.decoder(a.as_ref()).unwrap();
        assert!((&b * &dense - &a).norm_max() < 1e-12);
        for p in [
            Participation::Single,
            Participation::fixed_epoch_order(3, 3).unwrap(),
            Participation::min_separation(3, 3).unwrap(),
        ] {
            let exact = encoder.sensitivity(&p).unwrap();
            let brute =
                crate::privacy::participation::brute_force_sensitivity(dense.as_ref(), &p).unwrap();
            assert!((exact - brute).abs() < 1e-12, "{p:?}: {exact} vs {brute}");
            let tau = 0.1;
            let e = evaluate(a.as_ref(), &encoder, &p, tau, &encoder.columns).unwrap();
            for q in (0..n * h).filter(|q| q / h + q % h < n) {
                let step = 1e-6;
                let mut up = encoder.columns.clone();
                up[q] += step;
                let mut down = encoder.columns.clone();
                down[q] -= step;
                let fd = (evaluate(a.as_ref(), &encoder, &p, tau, &up).unwrap().value
                    - evaluate(a.as_ref(), &encoder, &p, tau, &down)
                        .unwrap()
                        .value)
                    / (2.0 * step);
                assert!(
                    (fd - e.gradient[q]).abs() <= 1e-5 * (1.0 + fd.abs()),
                    "{p:?} entry {q}: {fd} vs {}",
                    e.gradient[q]
                );
            }
        }
        assert!(
            encoder
                .sensitivity(&Participation::min_separation(2, 2).unwrap())
                .is_err()
        );
    }
}
