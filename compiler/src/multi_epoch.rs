//! Near-optimal factorizations for `(k, b)` multi-epoch participation, with a certified gap
//! (Choquette-Choo et al. 2023, 001 §3).
//!
//! # The problem solved
//!
//! 001 Eq. (6) minimizes `tr(AᵀA X⁻¹)` over `X ≻ 0` under the sensitivity constraint; the paper
//! adds `X ≥ 0` so that the constraint becomes `1ᵀX[π,π]1 ≤ 1` (Eq. 3), and observes (Fig. 2)
//! that the optimum then makes the columns of `C` that one record can touch *orthogonal*:
//! `X_ij = 0` whenever `i ≠ j` lie in one participation pattern. We solve that problem directly:
//!
//! ```text
//! min tr(AᵀA X⁻¹)   over X ≻ 0,   X_ij = 0 for i ≠ j, i ≡ j (mod b),   Σ_{i∈c} X_ii ≤ 1 for every class c
//! ```
//!
//! with the classes `c` the residues mod `b`. Every pattern block `X[π,π]` is then diagonal and
//! non-negative, so the exact formula of 001 Eq. 3 applies and the sensitivity is 1 for any
//! `k ≥ ⌈n/b⌉`; for smaller `k` (`n > k·b`) the constraint is stronger than needed, so the result
//! is feasible but possibly not optimal for that `k`. Entries between different classes are free
//! (they may be negative: 001 App. D notes only the pattern blocks matter).
//!
//! # The method (primal, certified by a dual point)
//!
//! The constraint is removed by scale invariance: with `s_c = Σ_{i∈c} X_ii` and
//! `D = diag(s_{c(i)}^{-1/2})`, `X̃ = D X D` is feasible with every class sum 1, and
//! `f(X) = tr(AᵀA X̃⁻¹)` is a smooth function of the free entries of `X` (the lower triangle
//! outside the zero pattern). L-BFGS minimizes it; each evaluation is one Cholesky factorization
//! and two triangular solves (`O(n³)`, no eigendecomposition):
//!
//! ```text
//! A' = A D⁻¹,  Z = A' X⁻¹,  f = ‖A' L⁻ᵀ‖_F²,  ∂f/∂X = −ZᵀZ + diag(q_{c(i)}/s_{c(i)}),  q_c = Σ_{i∈c} (A'ᵀZ)_ii
//! ```
//!
//! **Certificate.** The Lagrangian of the problem is `tr(AᵀA X⁻¹) + tr(U X) − Σ_c λ_c` with
//! `U = diag(λ_{c(i)}) + M`, `M` supported on the zero pattern (one multiplier per constrained
//! entry) and `λ ≥ 0`. For every such `U ≻ 0` its dual value is
//! `g(U) = 2 tr((U^{1/2}AᵀAU^{1/2})^{1/2}) − Σ_c λ_c` (001 Thm 3.1, with our constraint set), and
//! maximizing over the scale `αU` gives the lower bound `T²/Σ_c λ_c` with
//! `T = ‖A R‖_*` (nuclear norm) for any `R Rᵀ = U`. At the optimum the stationarity condition
//! reads `U = X̃⁻¹AᵀAX̃⁻¹` on the pattern, so the candidate is that matrix restricted to the
//! pattern, its diagonal averaged per class, and its off-pattern part shrunk until `U ≻ 0`
//! (`U` is `b` blocks of `k × k` after permutation: cheap to factor). The lower bound holds for
//! every candidate, so the reported gap is a certificate whatever the candidate's quality.

use faer::{Mat, MatRef, Side};

use crate::lbfgs::{Point, minimize};
use crate::optimize::{Optimum, Progress};
use crate::{Error, Result};

/// Stopping rule and budget of the multi-epoch optimizer.
#[derive(Debug, Clone)]
pub struct MultiEpochOptions {
    /// Stop when `(primal − dual)/primal ≤ relative_gap`.
    pub relative_gap: f64,
    /// Give up (with [`Error::NotConverged`]) after this many L-BFGS iterations.
    pub max_iterations: usize,
    /// L-BFGS memory (pairs of vectors kept).
    pub history: usize,
    /// Compute the dual certificate every this many iterations (one SVD of an `n × n` matrix).
    pub certificate_every: usize,
}

impl Default for MultiEpochOptions {
    fn default() -> Self {
        Self {
            relative_gap: 1e-3,
            max_iterations: 5_000,
            history: 10,
            certificate_every: 50,
        }
    }
}

/// The free entries of `X` (lower triangle, diagonal included, outside the zero pattern), as
/// `(i, j)` pairs, and the class of every step.
struct Pattern {
    n: usize,
    separation: usize,
    free: Vec<(usize, usize)>,
}

impl Pattern {
    fn new(n: usize, separation: usize) -> Self {
        let mut free = Vec::new();
        for j in 0..n {
            for i in j..n {
                if i == j || (i - j) % separation != 0 {
                    free.push((i, j));
                }
            }
        }
        Self {
            n,
            separation,
            free,
        }
    }

    fn class(&self, i: usize) -> usize {
        i % self.separation
    }

    fn classes(&self) -> usize {
        self.separation.min(self.n)
    }

    fn matrix(&self, theta: &[f64]) -> Mat<f64> {
        let mut x = Mat::zeros(self.n, self.n);
        for (&(i, j), &t) in self.free.iter().zip(theta) {
            x[(i, j)] = t;
            x[(j, i)] = t;
        }
        x
    }

    fn parameters(&self, x: MatRef<'_, f64>) -> Vec<f64> {
        self.free.iter().map(|&(i, j)| x[(i, j)]).collect()
    }

    /// `d_i = sqrt(s_{c(i)})`, or `None` if a class sum is not positive.
    fn class_scales(&self, x: MatRef<'_, f64>) -> Option<Vec<f64>> {
        let mut sums = vec![0.0; self.classes()];
        for i in 0..self.n {
            sums[self.class(i)] += x[(i, i)];
        }
        if sums.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return None;
        }
        Some((0..self.n).map(|i| sums[self.class(i)].sqrt()).collect())
    }
}

/// One evaluation of `f` at `X`: the value, the gradient with respect to the free entries, and
/// what the certificate needs.
struct Evaluation {
    value: f64,
    gradient: Vec<f64>,
    /// `ZᵀZ = X⁻¹ A'ᵀA' X⁻¹`.
    ztz: Mat<f64>,
    /// `d_i = sqrt(s_{c(i)})`.
    scales: Vec<f64>,
}

/// `f` and its gradient (see the module docs); `None` if `X` is not positive definite.
fn evaluate(a: MatRef<'_, f64>, pattern: &Pattern, theta: &[f64]) -> Option<Evaluation> {
    let n = pattern.n;
    let x = pattern.matrix(theta);
    let scales = pattern.class_scales(x.as_ref())?;
    let llt = x.llt(Side::Lower).ok()?;
    let l = llt.L();
    // Yᵀ = L⁻¹ A'ᵀ, then Zᵀ = L⁻ᵀ Yᵀ = X⁻¹ A'ᵀ.
    let scaled = Mat::from_fn(n, n, |i, j| a[(i, j)] * scales[j]);
    let mut zt = scaled.transpose().to_owned();
    l.solve_lower_triangular_in_place(zt.as_mut());
    let value = zt.squared_norm_l2();
    if !value.is_finite() {
        return None;
    }
    l.transpose().solve_upper_triangular_in_place(zt.as_mut());
    let ztz = &zt * zt.transpose();
    let mut class_terms = vec![0.0; pattern.classes()];
    for i in 0..n {
        let q: f64 = (0..n).map(|r| scaled[(r, i)] * zt[(i, r)]).sum();
        class_terms[pattern.class(i)] += q;
    }
    let gradient = pattern
        .free
        .iter()
        .map(|&(i, j)| {
            if i == j {
                -ztz[(i, i)] + class_terms[pattern.class(i)] / (scales[i] * scales[i])
            } else {
                -2.0 * ztz[(i, j)]
            }
        })
        .collect();
    Some(Evaluation {
        value,
        gradient,
        ztz,
        scales,
    })
}

impl Point for Evaluation {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

/// The normalized, feasible `X̃ = D X D` (every class sums to 1).
fn normalized(pattern: &Pattern, theta: &[f64], scales: &[f64]) -> Mat<f64> {
    let x = pattern.matrix(theta);
    Mat::from_fn(pattern.n, pattern.n, |i, j| {
        x[(i, j)] / (scales[i] * scales[j])
    })
}

/// The dual lower bound `T²/Σλ_c` of a candidate built from the stationarity condition (module
/// docs). Any candidate gives a valid bound; `None` if none could be made positive definite.
fn certificate(a: MatRef<'_, f64>, pattern: &Pattern, e: &Evaluation) -> Result<Option<f64>> {
    let n = pattern.n;
    // U₀ = X̃⁻¹AᵀAX̃⁻¹ = D⁻¹ ZᵀZ D⁻¹ (with D⁻¹ = diag(scales)).
    let u0 = |i: usize, j: usize| e.scales[i] * e.ztz[(i, j)] * e.scales[j];
    let mut r = Mat::<f64>::zeros(n, n);
    let mut lambda_total = 0.0;
    for c in 0..pattern.classes() {
        let members: Vec<usize> = (c..n).step_by(pattern.separation).collect();
        let m = members.len();
        let lambda = members.iter().map(|&i| u0(i, i)).sum::<f64>() / m as f64;
        if !(lambda.is_finite() && lambda > 0.0) {
            return Ok(None);
        }
        lambda_total += lambda;
        // Shrink the off-diagonal multipliers until the block is positive definite.
        let mut shrink = 1.0;
        let factor = loop {
            let block = Mat::from_fn(m, m, |p, q| {
                if p == q {
                    lambda
                } else {
                    shrink * u0(members[p], members[q])
                }
            });
            if let Ok(llt) = block.llt(Side::Lower) {
                break llt.L().to_owned();
            }
            shrink *= 0.5;
            if shrink < 1e-12 {
                shrink = 0.0;
            }
        };
        for (p, &i) in members.iter().enumerate() {
            for (q, &j) in members.iter().enumerate().take(p + 1) {
                r[(i, j)] = factor[(p, q)];
            }
        }
    }
    let ar = a * &r;
    let singular = ar
        .singular_values()
        .map_err(|e| Error::Numerical(format!("SVD failed: {e:?}")))?;
    let t: f64 = singular.iter().sum();
    let bound = t * t / lambda_total;
    Ok(bound.is_finite().then_some(bound))
}

/// The starting point, by stamping (001 D.4) a smaller solution, which keeps the zero pattern
/// and positive definiteness: for `n ≤ 4b`, the single-participation optimum of the first `b`
/// steps repeated along the diagonal; otherwise, for even `n`, the multi-epoch optimum of the
/// first `n/2` steps (solved loosely, recursively) repeated twice. Each halving costs an eighth
/// of a full iteration and saves many of them.
fn start(a: MatRef<'_, f64>, separation: usize, options: &MultiEpochOptions) -> Result<Mat<f64>> {
    let n = a.nrows();
    let (block, x) = if n > 4 * separation && n % 2 == 0 {
        let half = a.submatrix(0, 0, n / 2, n / 2).to_owned();
        let loose = MultiEpochOptions {
            relative_gap: options.relative_gap.max(START_GAP),
            ..options.clone()
        };
        let x = optimize_multi_epoch(half.as_ref(), separation, &loose, &mut |_| {})
            .map(|o| o.x)
            .or_else(|_| start(half.as_ref(), separation, options))?;
        (n / 2, x)
    } else {
        let b = separation.min(n);
        let head = a.submatrix(0, 0, b, b).to_owned();
        let single = crate::optimize::OptimizeOptions {
            relative_gap: 1e-4,
            ..Default::default()
        };
        let optimum =
            crate::optimize::optimize_single_participation(head.as_ref(), &single, &mut |_| {})?;
        (b, optimum.x)
    };
    Ok(Mat::from_fn(n, n, |i, j| {
        if i / block == j / block {
            x[(i % block, j % block)]
        } else {
            0.0
        }
    }))
}

/// The duality gap the sub-problems of [`start`] are solved to.
const START_GAP: f64 = 1e-2;

/// Minimizes `tr(AᵀA X⁻¹)` under `(k, b)` participation with orthogonal pattern columns (module
/// docs) by L-BFGS, until the certified relative gap is at most `options.relative_gap`.
/// `progress` is called once per iteration. The returned `x` has every class sum equal to 1, so
/// its sensitivity under `(k, b)` is exactly 1 for `k ≥ ⌈n/b⌉`.
pub fn optimize_multi_epoch(
    a: MatRef<'_, f64>,
    separation: usize,
    options: &MultiEpochOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Optimum> {
    let n = a.nrows();
    if n == 0 || a.ncols() != n {
        return Err(Error::InvalidWorkload(
            "the workload must be square and non-empty".into(),
        ));
    }
    if separation == 0 {
        return Err(Error::InvalidOption("the separation b must be ≥ 1".into()));
    }
    if options.relative_gap.is_nan() || options.relative_gap <= 0.0 {
        return Err(Error::InvalidOption(
            "the duality-gap target must be positive".into(),
        ));
    }
    let pattern = Pattern::new(n, separation);
    let theta = pattern.parameters(start(a, separation, options)?.as_ref());
    let first = evaluate(a, &pattern, &theta)
        .ok_or_else(|| Error::Numerical("the starting point is not positive definite".into()))?;
    let mut best_dual = f64::NEG_INFINITY;
    let every = options.certificate_every.max(1);
    let (theta, current, iterations) = minimize(
        theta,
        first,
        options.history,
        options.max_iterations,
        &mut |theta| evaluate(a, &pattern, theta),
        &mut |iteration, _, current| {
            let mut gap = f64::INFINITY;
            if iteration == 1 || iteration % every == 0 {
                if let Some(bound) = certificate(a, &pattern, current)? {
                    best_dual = best_dual.max(bound);
                }
                gap = (current.value - best_dual) / current.value;
            }
            progress(&Progress {
                iteration,
                primal: current.value,
                dual: best_dual,
                relative_gap: gap,
            });
            Ok(gap <= options.relative_gap)
        },
    )?;
    // Final certificate for the point returned.
    if let Some(bound) = certificate(a, &pattern, &current)? {
        best_dual = best_dual.max(bound);
    }
    let gap = (current.value - best_dual) / current.value;
    if gap > options.relative_gap {
        return Err(Error::NotConverged {
            iterations: options.max_iterations,
            relative_gap: gap,
        });
    }
    let x = normalized(&pattern, &theta, &current.scales);
    let v = (0..n)
        .map(|i| current.scales[i] * current.ztz[(i, i)] * current.scales[i])
        .collect();
    Ok(Optimum {
        x,
        v,
        loss: current.value,
        dual_bound: best_dual,
        relative_gap: gap,
        iterations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::participation::{Participation, brute_force_sensitivity, sensitivity};
    use crate::workload::Workload;

    /// The analytic gradient matches central finite differences, and `f` is invariant under
    /// scaling one class (the normalization the method relies on).
    #[test]
    fn gradient_matches_finite_differences() {
        let (n, b) = (9, 4);
        let a = Workload::PrefixSum.matrix(n).unwrap();
        let pattern = Pattern::new(n, b);
        let x0 = start(a.as_ref(), b, &MultiEpochOptions::default()).unwrap();
        // Perturb off the stamped start so cross-block entries are non-zero.
        let theta: Vec<f64> = pattern
            .parameters(x0.as_ref())
            .iter()
            .zip(&pattern.free)
            .map(|(t, &(i, j))| {
                if i == j {
                    *t
                } else {
                    t + 0.05 / (1 + i - j) as f64
                }
            })
            .collect();
        let e = evaluate(a.as_ref(), &pattern, &theta).unwrap();
        for (p, _) in pattern.free.iter().enumerate() {
            let h = 1e-6;
            let mut plus = theta.clone();
            plus[p] += h;
            let mut minus = theta.clone();
            minus[p] -= h;
            let fd = (evaluate(a.as_ref(), &pattern, &plus).unwrap().value
                - evaluate(a.as_ref(), &pattern, &minus).unwrap().value)
                / (2.0 * h);
            assert!(
                (fd - e.gradient[p]).abs() <= 1e-5 * (1.0 + fd.abs()),
                "entry {:?}: finite difference {fd}, gradient {}",
                pattern.free[p],
                e.gradient[p]
            );
        }
        let scaled: Vec<f64> = theta
            .iter()
            .zip(&pattern.free)
            .map(|(t, &(i, j))| {
                t * if i % b == 1 { 3.0 } else { 1.0 } * if j % b == 1 { 3.0 } else { 1.0 }
            })
            .collect();
        let f = evaluate(a.as_ref(), &pattern, &scaled).unwrap().value;
        assert!((f - e.value).abs() <= 1e-10 * e.value);
    }

    /// A small multi-epoch optimum: certified gap reached, the normalized X has the promised
    /// structure, and brute-force sensitivity of its Cholesky encoder is exactly 1.
    #[test]
    fn small_optimum_is_certified_and_has_unit_sensitivity() {
        let (n, k, b) = (24, 3, 8);
        let a = Workload::PrefixSum.matrix(n).unwrap();
        let o = optimize_multi_epoch(
            a.as_ref(),
            b,
            &MultiEpochOptions {
                relative_gap: 1e-4,
                certificate_every: 5,
                ..Default::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert!(o.relative_gap <= 1e-4 && o.dual_bound <= o.loss);
        // C with CᵀC = X̃: the upper Cholesky factor.
        let llt = o.x.llt(Side::Lower).unwrap();
        let c = llt.L().transpose().to_owned();
        let p = Participation::fixed_epoch_order(k, b).unwrap();
        let brute = brute_force_sensitivity(c.as_ref(), &p).unwrap();
        assert!((brute - 1.0).abs() < 1e-9, "{brute}");
        let s = sensitivity(c.as_ref(), &p).unwrap();
        assert!((s.value - 1.0).abs() < 1e-9, "{s:?}");
        // The loss of this factorization, computed independently: ‖A C⁻¹‖_F².
        let mut b_t = a.transpose().to_owned();
        c.transpose().solve_lower_triangular_in_place(b_t.as_mut());
        assert!((b_t.squared_norm_l2() - o.loss).abs() <= 1e-8 * o.loss);
        // It beats stamping the single-epoch optimum, and single participation's optimum scaled
        // to (k, b) is no better than a certified multi-epoch optimum.
        let stamped = start(a.as_ref(), b, &MultiEpochOptions::default()).unwrap();
        let stamped_c = stamped.llt(Side::Lower).unwrap().L().transpose().to_owned();
        let s_stamped = sensitivity(stamped_c.as_ref(), &p).unwrap().value;
        let mut bs = a.transpose().to_owned();
        stamped_c
            .transpose()
            .solve_lower_triangular_in_place(bs.as_mut());
        assert!(o.loss < s_stamped * s_stamped * bs.squared_norm_l2());
    }
}
