//! Banded Toeplitz encoders (McKenna 2025, "Scaling up the Banded Matrix Factorization
//! Mechanism"; jax_privacy's `toeplitz` strategies): `C = T(c)`, lower-triangular Toeplitz with
//! `b̂` coefficients `c_0 … c_{b̂−1}` and zeros beyond, optimized for a horizon `n`. For the
//! prefix sum an evaluation of the loss and its gradient takes `O(n·b̂)` time and `O(n + b̂)`
//! memory: no `n × n` matrix is formed, so horizons of `10⁶` steps compile.
//!
//! # Sensitivity
//!
//! Columns of `T(c)` more than `b̂ − 1` apart are orthogonal, so under `b`-min-separation or
//! fixed epoch order with `b̂ ≤ b` the sensitivity is `sens² = max_π Σ_{j∈π} ν_j` with
//! `ν_j = Σ_{t < min(b̂, n−j)} c_t²` (BandMF, Choquette-Choo et al. 2023b, Thm 2). `ν` does not
//! increase with `j`, and the `p`-th step of any pattern is at least `p·b`, so the earliest
//! pattern `{0, b, 2b, …}` (at most `k` steps below `n`) is the worst:
//!
//! ```text
//! sens² = Σ_t m_t c_t²,    m_t = #{p < k : p·b + t < n}
//! ```
//!
//! (single participation: `m_t = 1`, the first column). This is exact
//! ([`OrthogonalColumns`](SensitivityMethod::OrthogonalColumns), or
//! [`MaxColumnNorm`](SensitivityMethod::MaxColumnNorm) for one participation) and smooth in `c`.
//!
//! # Error
//!
//! For the workloads `A = S·D_η·T(γ)` — the prefix sum (`η = 1`, `γ = e_0`) and heavy-ball
//! momentum with learning rates `η` (`γ_k = β^k`, 003 Prop. 4.2, Eq. 9) — the decoder is
//! `B = A C⁻¹ = S D_η T(q)` with `q = γ * r` and `r = 1/c` as power series:
//!
//! ```text
//! r_k = (δ_{k0} − Σ_{l=1}^{min(k, b̂−1)} c_l r_{k−l}) / c_0,      q_k = r_k + β q_{k−1}.
//! ```
//!
//! With constant rates `B` is Toeplitz with coefficients `Q_k = Σ_{t≤k} q_t`, and
//! `‖B‖_F² = Σ_{k<n} (n − k) Q_k²` (`O(n)`); otherwise column `j` of `B` is the running sum of
//! `(η_l q_{l−j})_{l ≥ j}`, `O(n²)` in all with `O(n)` memory.
//!
//! # Gradient
//!
//! Reverse mode through the three steps: `g = ∂‖B‖²/∂q` (suffix sums of the columns), then
//! `h = T(γ)ᵀ g` (`h_j = g_j + β h_{j+1}`), then, since `r = T(c)⁻¹ e_0` gives
//! `dr = −T(c)⁻¹ T(dc) r`,
//!
//! ```text
//! ∂‖B‖²/∂c_l = −Σ_{k ≥ l} λ_k r_{k−l},   λ = T(c)⁻ᵀ h: λ_j = (h_j − Σ_{t ≥ 1} c_t λ_{j+t}) / c_0,
//! ```
//!
//! `O(n·b̂)` each. L-BFGS minimizes `log L = log ‖B‖_F² + log sens²` (invariant under scaling
//! `c`, so `c_0 = 1` is held fixed) and stops on a plateau of the loss.
//!
//! A custom workload `A` goes through the dense banded code ([`crate::optimize::banded`], `O(n²·b̂)`),
//! the gradient of `c_t` being the sum of the general gradient along diagonal `t`.

use faer::{Mat, MatRef};
use mfc_formats::SensitivityMethod;
use rayon::prelude::*;

use crate::optimize::banded::{BandedEncoder, frobenius_and_gradient};
use crate::optimize::lbfgs::{Plateau, Point, minimize};
use crate::optimize::toeplitz::{ToeplitzError, square_root_coefficients};
use crate::privacy::participation::{Participation, Sensitivity};
use crate::workload::Workload;
use crate::{Error, Result};

/// How the error of a Toeplitz encoder is computed for the workload.
#[derive(Debug, Clone)]
enum Structure {
    /// `A = S·D_η·T(γ)`, `γ_k = momentum^k`: `None` rates are all 1 (prefix sum, or momentum at a
    /// constant rate).
    Series {
        rates: Option<Vec<f64>>,
        momentum: f64,
    },
    /// Any lower-triangular `A`.
    Dense(Mat<f64>),
}

/// The loss of banded Toeplitz encoders for one workload, horizon and participation schema.
#[derive(Debug, Clone)]
pub struct ToeplitzProblem {
    steps: usize,
    participation: Participation,
    structure: Structure,
}

/// `Σ a_i b_i` with four accumulators (vectorizes; the order differs from a plain sum by
/// rounding only).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let (mut s0, mut s1, mut s2, mut s3) = (0.0, 0.0, 0.0, 0.0);
    let chunks = a.len().min(b.len()) / 4;
    for (x, y) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
        s0 += x[0] * y[0];
        s1 += x[1] * y[1];
        s2 += x[2] * y[2];
        s3 += x[3] * y[3];
    }
    let tail: f64 = a[4 * chunks..]
        .iter()
        .zip(&b[4 * chunks..])
        .map(|(x, y)| x * y)
        .sum();
    (s0 + s1) + (s2 + s3) + tail
}

/// `r = 1/c` to `n` terms, in `O(n·len(c))`; `None` if it is not finite.
fn inverse(c: &[f64], n: usize) -> Option<Vec<f64>> {
    let p = c.len();
    // c_1 … c_{p−1} reversed: Σ_{l=1}^{m} c_l r_{k−l} is a forward dot product.
    let reversed: Vec<f64> = c[1..].iter().rev().copied().collect();
    let mut r = vec![0.0; n];
    let inverse_c0 = 1.0 / c[0];
    for k in 0..n {
        let m = k.min(p - 1);
        let total = dot(&reversed[p - 1 - m..], &r[k - m..k]);
        r[k] = if k == 0 {
            inverse_c0
        } else {
            -total * inverse_c0
        };
    }
    r.iter().all(|x| x.is_finite()).then_some(r)
}

impl ToeplitzProblem {
    /// The problem for `workload` over `steps` steps under `participation`. The prefix sum and
    /// momentum workloads take the series path (no matrix); a custom workload its matrix.
    pub fn new(workload: &Workload, steps: usize, participation: &Participation) -> Result<Self> {
        if steps == 0 {
            return Err(Error::InvalidWorkload(
                "the horizon must be at least one step".into(),
            ));
        }
        let structure = match workload {
            Workload::PrefixSum => Structure::Series {
                rates: None,
                momentum: 0.0,
            },
            Workload::Momentum { momentum, schedule } => {
                if !(0.0..1.0).contains(momentum) {
                    return Err(Error::InvalidWorkload(format!(
                        "momentum must be in [0, 1), got {momentum}"
                    )));
                }
                let rates = schedule.rates(steps)?;
                Structure::Series {
                    rates: rates.iter().any(|&x| x != 1.0).then_some(rates),
                    momentum: *momentum,
                }
            }
            Workload::Custom { .. } => Structure::Dense(workload.matrix(steps)?),
        };
        Ok(Self {
            steps,
            participation: *participation,
            structure,
        })
    }

    /// The problem for the workload matrix `a` (`n × n`): the series path when `a` is the
    /// prefix sum, the dense one otherwise.
    pub fn for_matrix(a: MatRef<'_, f64>, participation: &Participation) -> Result<Self> {
        let n = a.nrows();
        let prefix = a.ncols() == n
            && (0..n).all(|j| (0..n).all(|i| a[(i, j)] == if i >= j { 1.0 } else { 0.0 }));
        let workload = if prefix {
            Workload::PrefixSum
        } else {
            Workload::Custom {
                label: "matrix".into(),
                matrix: a.to_owned(),
            }
        };
        Self::new(&workload, n, participation)
    }

    /// The horizon `n`.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The participation schema.
    pub fn participation(&self) -> &Participation {
        &self.participation
    }

    /// Refuses `bands` outside `1 ..= min(n, b)`: past `b` the columns of one record's steps
    /// overlap and the sensitivity is no longer that of orthogonal columns.
    pub fn check_bands(&self, bands: usize) -> Result<()> {
        let most = self
            .participation
            .separation()
            .unwrap_or(self.steps)
            .min(self.steps);
        if bands == 0 || bands > most {
            let why = match self.participation.separation() {
                Some(b) if b < self.steps => format!(
                    " (at most the separation b = {b}, so that one record's columns do not overlap)"
                ),
                _ => String::new(),
            };
            return Err(Error::InvalidArgument(format!(
                "the number of bands b̂ must be in 1..={most}{why}, got {bands}"
            )));
        }
        Ok(())
    }

    /// `m_t` of the module docs for `t < bands`: how many steps of the worst pattern column `t`
    /// of the band reaches below the horizon.
    fn multiplicity(&self, bands: usize) -> Vec<f64> {
        let n = self.steps;
        let (k, b) = match self.participation.separation() {
            Some(b) => (self.participation.max_participations(), b),
            None => (1, n),
        };
        let starts: Vec<usize> = (0..n).step_by(b).take(k).collect();
        (0..bands)
            .map(|t| starts.iter().filter(|&&s| s + t < n).count() as f64)
            .collect()
    }

    /// The exact sensitivity of `T(c)` (module docs): `MaxColumnNorm` for single
    /// participation, `OrthogonalColumns` otherwise. Refuses more coefficients than
    /// [`check_bands`](Self::check_bands) allows.
    pub fn sensitivity(&self, c: &[f64]) -> Result<Sensitivity> {
        self.check_bands(c.len())?;
        let value: f64 = self
            .multiplicity(c.len())
            .iter()
            .zip(c)
            .map(|(m, x)| m * x * x)
            .sum();
        Ok(Sensitivity {
            value: value.sqrt(),
            method: match self.participation {
                Participation::Single => SensitivityMethod::MaxColumnNorm,
                _ => SensitivityMethod::OrthogonalColumns,
            },
        })
    }

    /// The error of `T(c)`: its sensitivity, `L = sens²·‖A T(c)⁻¹‖_F²` and the variance of each
    /// step, `sens²·‖B[i,:]‖²`.
    pub fn error(&self, c: &[f64]) -> Result<ToeplitzError> {
        let sens = self.sensitivity(c)?.value;
        let rows = self
            .row_norms(c)
            .ok_or_else(|| Error::Numerical("the banded Toeplitz decoder is not finite".into()))?;
        let s2 = sens * sens;
        let per_step_variance: Vec<f64> = rows.iter().map(|r| s2 * r).collect();
        Ok(ToeplitzError {
            sensitivity: sens,
            loss: per_step_variance.iter().sum(),
            per_step_variance,
        })
    }

    /// `q = T(γ) r` with `r = 1/c`: the coefficients of `D_η⁻¹ S⁻¹ B` (series workloads).
    fn series(c: &[f64], n: usize, momentum: f64) -> Option<(Vec<f64>, Vec<f64>)> {
        let r = inverse(c, n)?;
        let mut q = r.clone();
        if momentum != 0.0 {
            for k in 1..n {
                q[k] += momentum * q[k - 1];
            }
        }
        q.iter().all(|x| x.is_finite()).then_some((r, q))
    }

    /// `‖B[i,:]‖²` for every step.
    fn row_norms(&self, c: &[f64]) -> Option<Vec<f64>> {
        match &self.structure {
            Structure::Series { .. } => self.decoder_row_norms(&inverse(c, self.steps)?),
            Structure::Dense(a) => {
                let b = BandedEncoder::toeplitz(c, self.steps)
                    .decoder(a.as_ref())
                    .ok()?;
                Some(
                    (0..self.steps)
                        .map(|i| b.row(i).squared_norm_l2())
                        .collect(),
                )
            }
        }
    }

    /// `‖(A T(r))[i,:]‖²` for every step, for any Toeplitz `C⁻¹ = T(r)` (`r` its first `n`
    /// coefficients; a BLT's, for example) and a series workload; `None` for a custom workload
    /// or a non-finite result.
    pub fn decoder_row_norms(&self, r: &[f64]) -> Option<Vec<f64>> {
        let n = self.steps;
        match &self.structure {
            Structure::Series { rates, momentum } => {
                let mut q = r.get(..n)?.to_vec();
                if *momentum != 0.0 {
                    for k in 1..n {
                        q[k] += momentum * q[k - 1];
                    }
                }
                match rates {
                    None => {
                        // Row i of S T(q) is Q_i, …, Q_0.
                        let (mut cumulative, mut row) = (0.0, 0.0);
                        Some(
                            q.iter()
                                .map(|x| {
                                    cumulative += x;
                                    row += cumulative * cumulative;
                                    row
                                })
                                .collect(),
                        )
                    }
                    Some(eta) => {
                        let rows = columns_in_order(
                            n,
                            || vec![0.0; n],
                            |rows, j| {
                                let mut w = 0.0;
                                for l in j..n {
                                    w += eta[l] * q[l - j];
                                    rows[l] += w * w;
                                }
                            },
                        );
                        rows.iter().all(|x| x.is_finite()).then_some(rows)
                    }
                }
            }
            Structure::Dense(_) => None,
        }
    }

    /// `‖A T(c)⁻¹‖_F²` and its gradient with respect to `c` (module docs).
    fn frobenius_and_gradient(&self, c: &[f64]) -> Option<(f64, Vec<f64>)> {
        let n = self.steps;
        let p = c.len();
        let (rates, momentum) = match &self.structure {
            Structure::Series { rates, momentum } => (rates, *momentum),
            Structure::Dense(a) => return dense_frobenius_and_gradient(a.as_ref(), c),
        };
        let (r, q) = Self::series(c, n, momentum)?;
        // value and g = ∂‖B‖²/∂q.
        let (value, mut g) = match rates {
            None => {
                let mut cumulative = 0.0;
                let mut value = 0.0;
                let mut weighted: Vec<f64> = q
                    .iter()
                    .enumerate()
                    .map(|(k, x)| {
                        cumulative += x;
                        let w = (n - k) as f64;
                        value += w * cumulative * cumulative;
                        2.0 * w * cumulative
                    })
                    .collect();
                for k in (0..n.saturating_sub(1)).rev() {
                    weighted[k] += weighted[k + 1];
                }
                (value, weighted)
            }
            Some(eta) => {
                // Per block: g (n), then ‖B‖² (1), then column j as scratch (n, not a sum).
                let mut sums = columns_in_order(
                    n,
                    || vec![0.0; 2 * n + 1],
                    |g, j| {
                        // Column j: w_l = Σ_{l' = j}^{l} η_{l'} q_{l'−j}.
                        let (g, rest) = g.split_at_mut(n);
                        let (value, column) = rest.split_at_mut(1);
                        let mut w = 0.0;
                        for l in j..n {
                            w += eta[l] * q[l - j];
                            column[l] = w;
                            value[0] += w * w;
                        }
                        let mut suffix = 0.0;
                        for l in (j..n).rev() {
                            suffix += column[l];
                            g[l - j] += 2.0 * eta[l] * suffix;
                        }
                    },
                );
                sums.truncate(n + 1);
                let value = sums.pop().unwrap_or(0.0);
                let g = sums;
                (value, g)
            }
        };
        // h = T(γ)ᵀ g.
        if momentum != 0.0 {
            for j in (0..n.saturating_sub(1)).rev() {
                g[j] += momentum * g[j + 1];
            }
        }
        // λ = T(c)⁻ᵀ h, in place.
        let inverse_c0 = 1.0 / c[0];
        let mut lambda = g;
        for j in (0..n).rev() {
            let m = (p - 1).min(n - 1 - j);
            let total = dot(&c[1..=m], &lambda[j + 1..=j + m]);
            lambda[j] = (lambda[j] - total) * inverse_c0;
        }
        let gradient: Vec<f64> = (0..p)
            .into_par_iter()
            .map(|l| {
                if l >= n {
                    0.0
                } else {
                    -dot(&lambda[l..], &r[..n - l])
                }
            })
            .collect();
        (value.is_finite() && gradient.iter().all(|x| x.is_finite())).then_some((value, gradient))
    }

    /// `log L` and its gradient with respect to `c_1 … c_{b̂−1}` at `c = (1, x)`.
    fn log_loss(&self, x: &[f64], multiplicity: &[f64]) -> Option<Evaluation> {
        let mut c = Vec::with_capacity(x.len() + 1);
        c.push(1.0);
        c.extend_from_slice(x);
        let (frobenius, gradient) = self.frobenius_and_gradient(&c)?;
        let s2: f64 = multiplicity.iter().zip(&c).map(|(m, x)| m * x * x).sum();
        if !(frobenius > 0.0 && s2 > 0.0) {
            return None;
        }
        let gradient = (1..c.len())
            .map(|l| gradient[l] / frobenius + 2.0 * multiplicity[l] * c[l] / s2)
            .collect();
        Some(Evaluation {
            value: frobenius.ln() + s2.ln(),
            gradient,
        })
    }
}

/// `Σ_j f(j)` over the columns `j < n`, each `f` adding into a vector made by `zero`: blocks of
/// columns in parallel, their sums added in block order, so the result does not depend on the
/// threads' schedule (the compiler's blobs are reproducible bit for bit). The blocks run a
/// group at a time, so at most `GROUP` partial sums are alive: `O(GROUP·len)` memory whatever
/// `n` (all `n/64` at once made a momentum workload at n = 64 000 take 520 MB).
fn columns_in_order(
    n: usize,
    zero: impl Fn() -> Vec<f64> + Sync,
    f: impl Fn(&mut Vec<f64>, usize) + Sync,
) -> Vec<f64> {
    const BLOCK: usize = 64;
    let group = 4 * rayon::current_num_threads().max(1);
    let blocks = n.div_ceil(BLOCK);
    let mut total = zero();
    for first in (0..blocks).step_by(group) {
        let sums: Vec<Vec<f64>> = (first..blocks.min(first + group))
            .into_par_iter()
            .map(|block| {
                let mut sum = zero();
                for j in block * BLOCK..n.min((block + 1) * BLOCK) {
                    f(&mut sum, j);
                }
                sum
            })
            .collect();
        for sum in sums {
            total.iter_mut().zip(sum).for_each(|(a, b)| *a += b);
        }
    }
    total
}

/// `‖A T(c)⁻¹‖_F²` and its gradient for a dense `A`: the general banded gradient, summed along
/// each diagonal.
fn dense_frobenius_and_gradient(a: MatRef<'_, f64>, c: &[f64]) -> Option<(f64, Vec<f64>)> {
    let n = a.nrows();
    let p = c.len();
    let encoder = BandedEncoder::toeplitz(c, n);
    let (value, full) = frobenius_and_gradient(a, &encoder)?;
    let mut gradient = vec![0.0; p];
    for (q, g) in full.iter().enumerate() {
        gradient[q % p] += g;
    }
    Some((value, gradient))
}

/// One evaluation of `log L`.
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

/// Budget and stopping rule of [`optimize`].
#[derive(Debug, Clone)]
pub struct ToeplitzOptions {
    /// Most L-BFGS iterations.
    pub iterations: usize,
    /// Stop when `log L` improved by at most `tolerance` over this many iterations.
    pub window: usize,
    /// See `window`: an absolute change of `log L`, i.e. a relative change of `L`.
    pub tolerance: f64,
}

impl Default for ToeplitzOptions {
    fn default() -> Self {
        Self {
            iterations: 2000,
            window: 10,
            tolerance: 1e-7,
        }
    }
}

/// The start of [`optimize`]: `start` (e.g. the optimum for fewer bands) truncated or padded
/// with zeros to `bands` coefficients and scaled to `c_0 = 1`, or the truncated square root
/// `c_t = binom(2t, t)/4^t`.
fn starting_point(bands: usize, start: Option<&[f64]>) -> Result<Vec<f64>> {
    match start {
        Some(s) if !s.is_empty() => {
            if !(s[0].is_finite() && s[0] != 0.0) {
                return Err(Error::Numerical(
                    "the starting Toeplitz encoder has c_0 = 0".into(),
                ));
            }
            Ok((0..bands)
                .map(|t| s.get(t).map_or(0.0, |x| x / s[0]))
                .collect())
        }
        _ => Ok(square_root_coefficients(bands)),
    }
}

/// The banded Toeplitz encoder with `bands` coefficients (`c_0 = 1`) minimizing the loss of
/// `problem`, from `start` (see `starting_point`). `progress` gets `(iteration, L)`.
pub fn optimize(
    problem: &ToeplitzProblem,
    bands: usize,
    start: Option<&[f64]>,
    options: &ToeplitzOptions,
    progress: &mut dyn FnMut(usize, f64),
) -> Result<Vec<f64>> {
    problem.check_bands(bands)?;
    let c = starting_point(bands, start)?;
    if bands == 1 {
        return Ok(c);
    }
    let multiplicity = problem.multiplicity(bands);
    let first = problem.log_loss(&c[1..], &multiplicity).ok_or_else(|| {
        Error::Numerical("the starting banded Toeplitz encoder has no finite loss".into())
    })?;
    let mut plateau = Plateau::new(options.window, options.tolerance);
    let (x, _, _) = minimize(
        c[1..].to_vec(),
        first,
        10,
        options.iterations,
        &mut |x| problem.log_loss(x, &multiplicity),
        &mut |iteration, _, e| {
            progress(iteration, e.value.exp());
            Ok(plateau.done(e.value))
        },
    )?;
    let mut c = vec![1.0];
    c.extend(x);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Schedule;

    fn dense_toeplitz(c: &[f64], n: usize) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| {
            if j <= i {
                c.get(i - j).copied().unwrap_or(0.0)
            } else {
                0.0
            }
        })
    }

    fn workloads() -> Vec<Workload> {
        vec![
            Workload::PrefixSum,
            Workload::Momentum {
                momentum: 0.9,
                schedule: Schedule::Constant,
            },
            Workload::Momentum {
                momentum: 0.8,
                schedule: Schedule::Cooldown {
                    steps: 5,
                    final_rate: 0.1,
                },
            },
        ]
    }

    /// Against the dense matrices: the error of every workload path equals `sens²‖A C⁻¹‖_F²`
    /// and the per-row norms with `C⁻¹` from a dense solve; the sensitivity equals a brute force
    /// over every pattern and sign vector; the gradient equals central differences of
    /// `log L`; and a custom workload holding the same matrix agrees with the series path.
    #[test]
    fn loss_sensitivity_and_gradient_match_dense_references() {
        let n = 13;
        let c = [1.0, -0.4, 0.3, 0.15];
        for workload in workloads() {
            let a = workload.matrix(n).unwrap();
            let custom = Workload::Custom {
                label: "same".into(),
                matrix: a.clone(),
            };
            let mut inverse = Mat::<f64>::identity(n, n);
            dense_toeplitz(&c, n).solve_lower_triangular_in_place(inverse.as_mut());
            let b = &a * &inverse;
            for p in [
                Participation::Single,
                Participation::fixed_epoch_order(3, 4).unwrap(),
                Participation::min_separation(3, 4).unwrap(),
                Participation::min_separation(2, 5).unwrap(),
            ] {
                let brute = crate::privacy::participation::brute_force_sensitivity(
                    dense_toeplitz(&c, n).as_ref(),
                    &p,
                )
                .unwrap();
                for w in [&workload, &custom] {
                    let problem = ToeplitzProblem::new(w, n, &p).unwrap();
                    let e = problem.error(&c).unwrap();
                    assert!((e.sensitivity - brute).abs() < 1e-12, "{p:?}");
                    for i in 0..n {
                        let expected = brute * brute * b.row(i).squared_norm_l2();
                        assert!(
                            (e.per_step_variance[i] - expected).abs() < 1e-10 * expected,
                            "{p:?} row {i}"
                        );
                    }
                    let multiplicity = problem.multiplicity(c.len());
                    let at = problem.log_loss(&c[1..], &multiplicity).unwrap();
                    assert!((at.value - e.loss.ln()).abs() < 1e-12);
                    for l in 0..c.len() - 1 {
                        let h = 1e-6;
                        let mut up = c[1..].to_vec();
                        up[l] += h;
                        let mut down = c[1..].to_vec();
                        down[l] -= h;
                        let fd = (problem.log_loss(&up, &multiplicity).unwrap().value
                            - problem.log_loss(&down, &multiplicity).unwrap().value)
                            / (2.0 * h);
                        assert!(
                            (fd - at.gradient[l]).abs() < 1e-7 * (1.0 + fd.abs()),
                            "{} {p:?} c_{}: {fd} vs {}",
                            w.label(),
                            l + 1,
                            at.gradient[l]
                        );
                    }
                }
            }
        }
    }

    /// More bands than the separation are refused, with the allowed range in the message.
    #[test]
    fn bands_beyond_the_separation_are_refused() {
        let p = Participation::min_separation(3, 4).unwrap();
        let problem = ToeplitzProblem::new(&Workload::PrefixSum, 20, &p).unwrap();
        let e = problem.sensitivity(&[1.0; 5]).unwrap_err().to_string();
        assert!(e.contains("1..=4") && e.contains("got 5"), "{e}");
        assert!(problem.check_bands(0).is_err());
        assert!(problem.check_bands(4).is_ok());
        let single =
            ToeplitzProblem::new(&Workload::PrefixSum, 20, &Participation::Single).unwrap();
        assert!(single.check_bands(20).is_ok() && single.check_bands(21).is_err());
    }

    /// The optimizer lowers the loss from the truncated square root, more bands never do worse
    /// (each run starts from the previous optimum), and its gradient vanishes at the end.
    #[test]
    fn optimizing_improves_on_the_square_root_and_more_bands_help() {
        let n = 300;
        let p = Participation::min_separation(3, 100).unwrap();
        let problem = ToeplitzProblem::new(&Workload::PrefixSum, n, &p).unwrap();
        let mut previous: Option<Vec<f64>> = None;
        let mut last = f64::INFINITY;
        for bands in [2, 4, 8, 16] {
            let start = problem
                .error(&square_root_coefficients(bands))
                .unwrap()
                .loss;
            let c = optimize(
                &problem,
                bands,
                previous.as_deref(),
                &ToeplitzOptions::default(),
                &mut |_, _| {},
            )
            .unwrap();
            let loss = problem.error(&c).unwrap().loss;
            assert!(loss < start, "{bands}: {loss} vs square root {start}");
            assert!(loss <= last * (1.0 + 1e-9), "{bands}: {loss} > {last}");
            last = loss;
            previous = Some(c);
        }
    }
}
