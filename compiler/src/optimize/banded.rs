//! BandMF: banded lower-triangular encoders (Choquette-Choo, Ganesh, McKenna, McMahan, Rush,
//! Thakurta, Xu 2023, "(Amplified) Banded Matrix Factorizations").
//!
//! The encoder `C` is lower triangular with `b̂` bands (`C_ij = 0` unless `0 ≤ i − j < b̂`). Under
//! `b`-min-separation or fixed epoch order with `b̂ ≤ b`, two steps one record can take part in
//! are at least `b̂` apart, so their columns of `C` are orthogonal and the sensitivity is
//! `sens² = max_π Σ_{j∈π} ν_j` with `ν_j = ‖c_j‖²` (exact, a dynamic program:
//! [`Participation::max_pattern_sum`]). The device replays `B z = A C⁻¹ z` by forward
//! substitution, keeping the last `b̂ − 1` rows of `C⁻¹z`.
//!
//! # The optimization
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
//! ([`crate::optimize::banded_toeplitz`], `O(n·b̂)` per evaluation for the prefix sum): at n = 512, prefix
//! sum, min-separation (4, 128), `b̂ = 128` it reaches √L = 130.40 in 288 iterations (27 s here),
//! where the truncated square root and a stop on `|ΔF| ≤ 10⁻¹²·F` took 1 900 iterations (72 s)
//! for 130.38. No certificate: the certified optimum of fixed epoch order is a floor for every
//! min-separation mechanism (its patterns are a subset).

use faer::{Mat, MatRef};
use rayon::prelude::*;

use crate::optimize::lbfgs::{Plateau, Point, minimize};
use crate::optimize::single::{Optimum, Progress};
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// A lower-triangular banded encoder: `n` steps, `bands` diagonals.
#[derive(Debug, Clone, PartialEq)]
pub struct BandedEncoder {
    /// `n`.
    pub steps: usize,
    /// `b̂ ≥ 1`: diagonals kept, the main one included.
    pub bands: usize,
    /// Column-major band: `columns[j·b̂ + t] = C[j + t, j]`; zero where `j + t ≥ n`.
    pub columns: Vec<f64>,
}

impl BandedEncoder {
    /// The banded Toeplitz encoder `T(c)` over `steps` steps (`b̂ = c.len()`).
    pub fn toeplitz(c: &[f64], steps: usize) -> Self {
        let bands = c.len();
        let mut columns = vec![0.0; steps * bands];
        for j in 0..steps {
            for t in 0..bands.min(steps - j) {
                columns[j * bands + t] = c[t];
            }
        }
        Self {
            steps,
            bands,
            columns,
        }
    }

    /// `C[j + t, j]` (zero past the band or the matrix).
    #[inline]
    pub fn entry(&self, j: usize, t: usize) -> f64 {
        if t < self.bands && j + t < self.steps {
            self.columns[j * self.bands + t]
        } else {
            0.0
        }
    }

    /// The dense `n × n` encoder.
    pub fn to_dense(&self) -> Mat<f64> {
        Mat::from_fn(self.steps, self.steps, |i, j| {
            if i >= j { self.entry(j, i - j) } else { 0.0 }
        })
    }

    /// `ν_j = ‖c_j‖²` for every column.
    pub fn column_norms2(&self) -> Vec<f64> {
        (0..self.steps)
            .map(|j| (0..self.bands).map(|t| self.entry(j, t).powi(2)).sum())
            .collect()
    }

    /// The exact sensitivity under `participation`, which must keep the columns of one pattern
    /// orthogonal (`b̂ ≤ b`; any `b̂` for single participation).
    pub fn sensitivity(&self, participation: &Participation) -> Result<f64> {
        check_orthogonal(self.bands, participation)?;
        Ok(participation
            .max_pattern_sum(&self.column_norms2())
            .0
            .sqrt())
    }

    /// The decoder `B = A C⁻¹` (`n × n`, lower triangular when `A` is): row `i` solves
    /// `b C = a_i` by back substitution, `O(n²·b̂)` in all, rows in parallel.
    pub fn decoder(&self, a: MatRef<'_, f64>) -> Result<Mat<f64>> {
        let n = self.steps;
        if a.nrows() != n || a.ncols() != n {
            return Err(Error::InvalidWorkload(format!(
                "the workload is {}×{}, the encoder has {n} steps",
                a.nrows(),
                a.ncols()
            )));
        }
        if (0..n).any(|j| self.entry(j, 0) == 0.0) {
            return Err(Error::Numerical(
                "the banded encoder has a zero diagonal".into(),
            ));
        }
        let rows: Vec<Vec<f64>> = (0..n)
            .into_par_iter()
            .map(|i| {
                // Lower-triangular A: b_j = 0 for j > i.
                let last = (0..n)
                    .rev()
                    .find(|&j| a[(i, j)] != 0.0)
                    .map_or(0, |j| j + 1);
                let mut b = vec![0.0; n];
                for j in (0..last).rev() {
                    let mut total = a[(i, j)];
                    for t in 1..self.bands.min(n - j) {
                        total -= self.columns[j * self.bands + t] * b[j + t];
                    }
                    b[j] = total / self.columns[j * self.bands];
                }
                b
            })
            .collect();
        let b = Mat::from_fn(n, n, |i, j| rows[i][j]);
        if b.norm_max().is_finite() {
            Ok(b)
        } else {
            Err(Error::Numerical("the decoder A C⁻¹ is not finite".into()))
        }
    }
}

/// Refuses a schema under which one record's columns of a `bands`-banded encoder could overlap.
fn check_orthogonal(bands: usize, participation: &Participation) -> Result<()> {
    match participation.separation() {
        Some(b) if bands > b => Err(Error::InvalidOption(format!(
            "a banded encoder with {bands} bands needs a separation b ≥ {bands} (got b = {b}): the columns of one record's steps must not overlap"
        ))),
        _ => Ok(()),
    }
}

/// The loss `‖A C⁻¹‖_F²·sens(C)²` of a banded encoder (exact sensitivity).
pub fn loss(
    a: MatRef<'_, f64>,
    encoder: &BandedEncoder,
    participation: &Participation,
) -> Result<f64> {
    let s = encoder.sensitivity(participation)?;
    Ok(encoder.decoder(a)?.squared_norm_l2() * s * s)
}

/// `‖A C⁻¹‖_F²` and its gradient with respect to the band (layout of
/// [`BandedEncoder::columns`]).
pub(crate) fn frobenius_and_gradient(
    a: MatRef<'_, f64>,
    encoder: &BandedEncoder,
) -> Option<(f64, Vec<f64>)> {
    let n = encoder.steps;
    let h = encoder.bands;
    let b = encoder.decoder(a).ok()?;
    let value = b.squared_norm_l2();
    // E = B C⁻ᵀ: row i solves C eᵀ = bᵀ, e_j = (b_j − Σ_{t≥1} C[j, j−t] e_{j−t}) / C[j, j].
    let rows: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut e = vec![0.0; n];
            for j in 0..n {
                let mut total = b[(i, j)];
                for t in 1..h.min(j + 1) {
                    total -= encoder.columns[(j - t) * h + t] * e[j - t];
                }
                e[j] = total / encoder.columns[j * h];
            }
            e
        })
        .collect();
    // ∂/∂C[j + t, j] = −2 Σ_i B[i, j + t] E[i, j]; B[i, r] = 0 for r > i.
    let gradient: Vec<f64> = (0..n * h)
        .into_par_iter()
        .map(|q| {
            let (j, t) = (q / h, q % h);
            let r = j + t;
            if r >= n {
                return 0.0;
            }
            -2.0 * (r..n).map(|i| b[(i, r)] * rows[i][j]).sum::<f64>()
        })
        .collect();
    (value.is_finite() && gradient.iter().all(|g| g.is_finite())).then_some((value, gradient))
}

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
    BandedEncoder::toeplitz(&crate::forms::blt::square_root_coefficients(bands), steps)
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
/// banded Toeplitz optimum ([`crate::optimize::banded_toeplitz`]). Returned as an [`Optimum`] normalized
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
    let problem = crate::optimize::banded_toeplitz::ToeplitzProblem::for_matrix(a, participation)?;
    let toeplitz = crate::optimize::banded_toeplitz::optimize(
        &problem,
        bands,
        None,
        &crate::optimize::banded_toeplitz::ToeplitzOptions::default(),
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
