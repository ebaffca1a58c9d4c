//! The optimal factorization for single participation, by iterating the fixed point φ of
//! Denisov et al. 2022 (003, Eq. 5–8, Thm 3.2) and stopping on its duality gap.
//!
//! With `K(v) = V^{1/2} AᵀA V^{1/2}` (`V = diag(v)`) and its square root `T(v)`,
//!
//! - `φ(v) = diagpart(T(v))` (Eq. 5), computed from one symmetric eigendecomposition
//!   `K = U Λ Uᵀ` as `φ_i = Σ_k U_ik² √λ_k` (tiny negative `λ_k` from rounding are clamped to 0);
//! - the dual value `g(v) = tr(V(2X(v) − I)) = 2 Σ φ_i − Σ v_i` (Eq. 8) is a lower bound on the
//!   optimal loss for every `v > 0`;
//! - `X(v) = V^{-1/2} T V^{-1/2}` (Eq. 6) normalized to unit diagonal,
//!   `X̃ = diag(φ)^{-1/2} T diag(φ)^{-1/2}`, is feasible, and its loss `tr(AᵀA X̃⁻¹)
//!   = Σ_ij K_ij d_i d_j (T⁻¹)_ij` with `d_i = √(φ_i / v_i)` is an upper bound.
//!
//! Both bounds hold at *every* `v > 0`, so the iteration may move `v` however it likes: it runs
//! Anderson acceleration (type II, short history) on `log v`, which keeps every iterate positive
//! and cuts the iteration count several-fold against plain `v ← φ(v)`; the history is dropped
//! whenever the fixed-point residual grows. The iteration stops when
//! `(best primal − best dual)/best primal` is at most the requested gap: the returned `X̃` is then
//! certified to be that close to optimal. The size of the residual is only used to decide when
//! the primal value (one extra matrix product) is worth computing.

use std::collections::VecDeque;

use faer::{Mat, MatRef, Side};

use crate::{Error, Result};

/// Stopping rule and budget of the optimizer.
#[derive(Debug, Clone)]
pub struct OptimizeOptions {
    /// Stop when `(primal − dual)/primal ≤ relative_gap`.
    pub relative_gap: f64,
    /// Give up (with [`Error::NotConverged`]) after this many iterations.
    pub max_iterations: usize,
    /// Anderson history length on `log v`; `0` is the plain fixed-point iteration `v ← φ(v)`.
    pub anderson_history: usize,
}

impl Default for OptimizeOptions {
    fn default() -> Self {
        Self {
            relative_gap: 1e-6,
            max_iterations: 10_000,
            anderson_history: 5,
        }
    }
}

/// One iteration's bounds, for progress reporting.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Iterations done.
    pub iteration: usize,
    /// Best upper bound so far (loss of a feasible `X̃`), or infinity before one is computed.
    pub primal: f64,
    /// Best lower bound `g(v)` so far.
    pub dual: f64,
    /// `(primal − dual)/primal`.
    pub relative_gap: f64,
}

/// A certified optimum of `min tr(AᵀA X⁻¹)` over `X ≻ 0`, `diag X ≤ 1` (Denisov et al. Eq. 4).
#[derive(Debug, Clone)]
pub struct Optimum {
    /// `X̃ = CᵀC`, unit diagonal.
    pub x: Mat<f64>,
    /// The dual variables `v` from which `x` was built.
    pub v: Vec<f64>,
    /// `tr(AᵀA X̃⁻¹)`: the loss `L = sens²‖B‖_F²` of the factorization of `X̃` (sensitivity 1).
    pub loss: f64,
    /// The best dual lower bound seen: no factorization has a smaller loss.
    pub dual_bound: f64,
    /// `(loss − dual_bound)/loss`.
    pub relative_gap: f64,
    /// Evaluations of φ (one symmetric eigendecomposition each).
    pub iterations: usize,
}

/// The eigendecomposition of `K(v)` and what φ and the bounds need from it.
#[allow(non_snake_case)]
struct Evaluation {
    U: Mat<f64>,
    /// Eigenvalues of `K`, ascending, clamped at 0.
    lambda: Vec<f64>,
    phi: Vec<f64>,
}

/// `φ(v)` of 003 Eq. (5) from one eigendecomposition of `K(v) = V^{1/2} AᵀA V^{1/2}`.
#[allow(non_snake_case)]
fn evaluate(gram: MatRef<'_, f64>, v: &[f64]) -> Result<Evaluation> {
    let n = v.len();
    let s: Vec<f64> = v.iter().map(|x| x.sqrt()).collect();
    let K = Mat::from_fn(n, n, |i, j| s[i] * gram[(i, j)] * s[j]);
    let eig = K
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Numerical(format!("eigendecomposition failed: {e:?}")))?;
    let U = eig.U().to_owned();
    let lambda: Vec<f64> = (0..n).map(|k| eig.S()[k].max(0.0)).collect();
    if lambda.iter().any(|l| !l.is_finite()) || lambda[n - 1] <= 0.0 {
        return Err(Error::Numerical(format!(
            "K(v) has eigenvalues in [{:e}, {:e}]",
            lambda[0],
            lambda[n - 1]
        )));
    }
    let roots: Vec<f64> = lambda.iter().map(|l| l.sqrt()).collect();
    let phi: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|k| U[(i, k)] * U[(i, k)] * roots[k]).sum())
        .collect();
    if phi.iter().any(|p| !(p.is_finite() && *p > 0.0)) {
        return Err(Error::Numerical("φ(v) is not positive".into()));
    }
    Ok(Evaluation { U, lambda, phi })
}

impl Evaluation {
    /// The dual bound `g(v) = 2 Σ φ_i − Σ v_i` (003 Eq. 8, Thm 3.2).
    fn dual(&self, v: &[f64]) -> f64 {
        2.0 * self.phi.iter().sum::<f64>() - v.iter().sum::<f64>()
    }

    /// The primal bound: the loss `tr(AᵀA X̃⁻¹) = ‖L⁻¹Aᵀ‖_F²` (`X̃ = L Lᵀ`) of the feasible point
    /// `X̃` that [`Evaluation::normalized_x`] returns, or infinity when `X̃` is numerically not
    /// positive definite. Computed from `X̃` itself, whose condition is that of `K^{1/2}`, rather
    /// than through `T⁻¹ = K^{-1/2}` (which needs `K`'s smallest eigenvalues accurately and was
    /// never computable for a momentum workload with a cooldown to 0.05, n = 64).
    fn primal(&self, a: MatRef<'_, f64>) -> (f64, Mat<f64>) {
        let x = self.normalized_x();
        let Ok(llt) = x.llt(Side::Lower) else {
            return (f64::INFINITY, x);
        };
        let mut y = a.transpose().to_owned();
        llt.L().solve_lower_triangular_in_place(y.as_mut());
        let total = y.squared_norm_l2();
        (
            if total.is_finite() && total > 0.0 {
                total
            } else {
                f64::INFINITY
            },
            x,
        )
    }

    /// `X̃ = diag(φ)^{-1/2} T diag(φ)^{-1/2}` with `T = U Λ^{1/2} Uᵀ` (003 Eq. 6, normalized).
    fn normalized_x(&self) -> Mat<f64> {
        let n = self.phi.len();
        let scaled = Mat::from_fn(n, n, |i, k| self.U[(i, k)] * self.lambda[k].sqrt());
        let t = &scaled * self.U.transpose();
        let s: Vec<f64> = self.phi.iter().map(|p| 1.0 / p.sqrt()).collect();
        Mat::from_fn(n, n, |i, j| {
            if i == j {
                1.0
            } else {
                0.5 * (t[(i, j)] + t[(j, i)]) * s[i] * s[j]
            }
        })
    }
}

/// Anderson acceleration (type II) of a fixed-point map `x ↦ G(x)` with a short history.
pub(crate) struct Anderson {
    depth: usize,
    /// Differences of consecutive residuals `f = G(x) − x` and of consecutive `G(x)`.
    history: VecDeque<(Vec<f64>, Vec<f64>)>,
    previous: Option<(Vec<f64>, Vec<f64>)>,
}

/// Largest move of an accelerated step away from the plain step, in `log v`.
const MAX_EXTRAPOLATION: f64 = 2.0;

impl Anderson {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            depth,
            history: VecDeque::with_capacity(depth + 1),
            previous: None,
        }
    }

    /// The next iterate from `x`, `g = G(x)`; falls back to `g` (the plain step) whenever the
    /// residual grew, the least-squares problem is degenerate, or the step is not finite.
    pub(crate) fn next(&mut self, x: &[f64], g: Vec<f64>) -> Vec<f64> {
        if self.depth == 0 {
            return g;
        }
        let f: Vec<f64> = g.iter().zip(x).map(|(g, x)| g - x).collect();
        if let Some((f_old, g_old)) = self.previous.take() {
            if norm(&f) > norm(&f_old) {
                self.history.clear();
            } else {
                let df = f.iter().zip(&f_old).map(|(a, b)| a - b).collect();
                let dg = g.iter().zip(&g_old).map(|(a, b)| a - b).collect();
                self.history.push_back((df, dg));
                if self.history.len() > self.depth {
                    self.history.pop_front();
                }
            }
        }
        self.previous = Some((f.clone(), g.clone()));
        let m = self.history.len();
        if m == 0 {
            return g;
        }
        // γ = argmin ‖f − ΔF γ‖ by the (regularized) normal equations: m ≤ 5 columns.
        let mut gram = vec![0.0; m * m];
        let mut rhs = vec![0.0; m];
        for p in 0..m {
            for q in 0..=p {
                let dot = dot(&self.history[p].0, &self.history[q].0);
                gram[p * m + q] = dot;
                gram[q * m + p] = dot;
            }
            rhs[p] = dot(&self.history[p].0, &f);
        }
        let trace: f64 = (0..m).map(|p| gram[p * m + p]).sum();
        let Some(gamma) = crate::optimize::linalg::cholesky_solve(&gram, &rhs, 1e-10 * trace)
        else {
            self.history.clear();
            return g;
        };
        let mut next = g.clone();
        for (p, (_, dg)) in self.history.iter().enumerate() {
            for (y, d) in next.iter_mut().zip(dg) {
                *y -= gamma[p] * d;
            }
        }
        let shift = next
            .iter()
            .zip(&g)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        if !shift.is_finite() {
            self.history.clear();
            return g;
        }
        if shift > MAX_EXTRAPOLATION {
            let t = MAX_EXTRAPOLATION / shift;
            for (y, b) in next.iter_mut().zip(&g) {
                *y = b + t * (*y - b);
            }
        }
        next
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// Compute the primal bound once `φ(v)` is within this relative distance of `v` (sum norm).
const PRIMAL_THRESHOLD: f64 = 1e-2;

/// Minimizes `tr(AᵀA X⁻¹)` over `X ≻ 0` with unit diagonal (003 Eq. 4) by iterating φ
/// (Eq. 5) from `v = 1`, Anderson-accelerated on `log v`, until the duality gap (primal bound
/// of the normalized Eq. 6 point against the dual bound of Eq. 8) certifies
/// `options.relative_gap`. `progress` is called once per iteration.
pub fn optimize_single_participation(
    a: MatRef<'_, f64>,
    options: &OptimizeOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Optimum> {
    let n = a.nrows();
    if n == 0 || a.ncols() != n {
        return Err(Error::InvalidWorkload(
            "the workload must be square and non-empty".into(),
        ));
    }
    if (0..n).any(|j| (0..n).any(|i| !a[(i, j)].is_finite())) {
        return Err(Error::InvalidWorkload(
            "the workload has non-finite entries".into(),
        ));
    }
    if options.relative_gap.is_nan() || options.relative_gap <= 0.0 {
        return Err(Error::InvalidArgument(
            "the duality-gap target must be positive".into(),
        ));
    }
    let gram = a.transpose() * a;
    let mut log_v: Vec<f64> = vec![0.0; n];
    let mut anderson = Anderson::new(options.anderson_history);
    let mut best_dual = f64::NEG_INFINITY;
    // (primal, X̃, v) of the best feasible point so far.
    let mut best: Option<(f64, Mat<f64>, Vec<f64>)> = None;
    let mut gap = f64::INFINITY;
    for iteration in 1..=options.max_iterations {
        crate::interrupt::check()?;
        let v: Vec<f64> = log_v.iter().map(|x| x.exp()).collect();
        let e = evaluate(gram.as_ref(), &v)?;
        best_dual = best_dual.max(e.dual(&v));
        let change = e
            .phi
            .iter()
            .zip(&v)
            .map(|(p, x)| (p - x).abs())
            .sum::<f64>()
            / v.iter().sum::<f64>();
        let g: Vec<f64> = e.phi.iter().map(|p| p.ln()).collect();
        if change < PRIMAL_THRESHOLD {
            let (primal, x) = e.primal(a);
            if best.as_ref().is_none_or(|(p, _, _)| primal < *p) {
                best = Some((primal, x, v));
            }
        }
        let primal = best.as_ref().map_or(f64::INFINITY, |(p, _, _)| *p);
        gap = if primal.is_finite() {
            (primal - best_dual) / primal
        } else {
            f64::INFINITY
        };
        progress(&Progress {
            iteration,
            primal,
            dual: best_dual,
            relative_gap: gap,
        });
        if gap <= options.relative_gap {
            let (loss, x, v) = best.expect("a finite gap needs a primal point");
            return Ok(Optimum {
                x,
                v,
                loss,
                dual_bound: best_dual,
                relative_gap: gap,
                iterations: iteration,
            });
        }
        log_v = anderson.next(&log_v, g);
    }
    Err(Error::NotConverged {
        iterations: options.max_iterations,
        relative_gap: gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;
    use faer::linalg::solvers::DenseSolveCore;

    fn optimum(n: usize, options: &OptimizeOptions) -> Optimum {
        let a = Workload::PrefixSum.matrix(n).unwrap();
        optimize_single_participation(a.as_ref(), options, &mut |_| {}).unwrap()
    }

    fn check(n: usize, expected_sqrt_loss: f64) {
        let start = std::time::Instant::now();
        let o = optimum(n, &OptimizeOptions::default());
        eprintln!(
            "prefix sum n = {n}: sqrt(L) = {:.6}, sqrt(dual) = {:.6}, gap {:.2e}, {} iterations, {:.2} s",
            o.loss.sqrt(),
            o.dual_bound.sqrt(),
            o.relative_gap,
            o.iterations,
            start.elapsed().as_secs_f64()
        );
        assert!(o.dual_bound <= o.loss);
        assert!(
            (o.loss - o.dual_bound) / o.loss <= 1e-6,
            "gap {}",
            o.relative_gap
        );
        let got = o.loss.sqrt();
        assert!(
            (got - expected_sqrt_loss).abs() <= 1e-4 * expected_sqrt_loss,
            "n = {n}: sqrt(L) = {got}, expected {expected_sqrt_loss}"
        );
    }

    /// Denisov et al. 2022, App. H Table 2 (converged values, see ../shared/guides/numerics.md).
    #[test]
    fn prefix_sum_optimum_n256() {
        check(256, 40.391);
    }

    #[test]
    fn prefix_sum_optimum_n512() {
        check(512, 61.985);
    }

    #[test]
    #[ignore = "slow: run by `cargo test --release -- --ignored` or the compile benchmark"]
    fn prefix_sum_optimum_n1024() {
        check(1024, 94.574);
    }

    #[test]
    #[ignore = "slow: run by `cargo test --release -- --ignored` or the compile benchmark"]
    fn prefix_sum_optimum_n2048() {
        check(2048, 143.563);
    }

    /// Anderson acceleration and the plain iteration `v ← φ(v)` certify the same optimum, the
    /// accelerated one in fewer iterations.
    #[test]
    fn anderson_reaches_the_plain_optimum() {
        let tight = |history| OptimizeOptions {
            relative_gap: 1e-10,
            anderson_history: history,
            ..Default::default()
        };
        let plain = optimum(128, &tight(0));
        let accelerated = optimum(128, &tight(5));
        eprintln!(
            "n = 128, gap 1e-10: plain {} iterations, Anderson {} iterations",
            plain.iterations, accelerated.iterations
        );
        assert!((plain.loss - accelerated.loss).abs() <= 2e-10 * plain.loss);
        assert!(plain.dual_bound <= accelerated.loss && accelerated.dual_bound <= plain.loss);
        assert!((&plain.x - &accelerated.x).norm_max() <= 1e-4);
        assert!(
            2 * accelerated.iterations < plain.iterations,
            "{} vs {}",
            accelerated.iterations,
            plain.iterations
        );
    }

    /// A momentum workload whose `K(v)` becomes numerically singular on the way (β = 0.95, the
    /// learning rate cooled down to 0.05 over the last 16 of 64 steps): the primal bound is the
    /// loss of the point returned, so the gap is certified, and the optimum is jax_privacy
    /// 2.0.0's `dense.optimize(64, A=A)`, 138.1808 (`tools/jax_privacy_reference.py
    /// momentum-check`). It once failed with "relative gap inf" after 10 000 iterations.
    #[test]
    fn ill_conditioned_momentum_workload_is_certified() {
        let a = Workload::Momentum {
            momentum: 0.95,
            schedule: crate::workload::Schedule::Cooldown {
                steps: 16,
                final_rate: 0.05,
            },
        }
        .matrix(64)
        .unwrap();
        let o = optimize_single_participation(a.as_ref(), &OptimizeOptions::default(), &mut |_| {})
            .unwrap();
        assert!(o.relative_gap <= 1e-6, "{o:?}");
        assert!((o.loss.sqrt() - 138.1808).abs() < 2e-4, "{}", o.loss.sqrt());
        // The loss reported is that of the x returned.
        let llt = o.x.llt(Side::Lower).unwrap();
        let mut y = a.transpose().to_owned();
        llt.L().solve_lower_triangular_in_place(y.as_mut());
        assert!((y.squared_norm_l2() - o.loss).abs() <= 1e-9 * o.loss);
    }

    #[test]
    fn reports_progress_and_gives_up() {
        let a = Workload::PrefixSum.matrix(64).unwrap();
        let options = OptimizeOptions {
            max_iterations: 3,
            ..Default::default()
        };
        let mut calls = 0;
        let result = optimize_single_participation(a.as_ref(), &options, &mut |p| {
            calls += 1;
            assert!(p.dual <= p.primal);
        });
        assert!(matches!(
            result,
            Err(Error::NotConverged { iterations: 3, .. })
        ));
        assert_eq!(calls, 3);
        let bad = OptimizeOptions {
            relative_gap: 0.0,
            ..Default::default()
        };
        assert!(optimize_single_participation(a.as_ref(), &bad, &mut |_| {}).is_err());
    }

    /// On random lower-triangular workloads: unit diagonal, the reported loss is the dense
    /// `tr(AᵀA X̃⁻¹)`, Eq. (7) `AᵀA = X diag(v) X` holds at the fixed point, and no random
    /// feasible `X` does better.
    #[test]
    #[allow(non_snake_case)]
    fn optimum_beats_random_feasible_points() {
        let mut state = 12345u64;
        let mut rand = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for n in 6..=12 {
            let A = Mat::from_fn(n, n, |i, j| {
                if j < i {
                    rand()
                } else if j == i {
                    1.0 + rand().abs()
                } else {
                    0.0
                }
            });
            let options = OptimizeOptions {
                relative_gap: 1e-12,
                ..Default::default()
            };
            let o = optimize_single_participation(A.as_ref(), &options, &mut |_| {}).unwrap();
            assert!(o.dual_bound <= o.loss * (1.0 + 1e-14));
            for i in 0..n {
                assert_eq!(o.x[(i, i)], 1.0);
            }
            let gram = A.transpose() * &A;
            // X(v) = D^{1/2} X̃ D^{1/2} with D = φ/v → 1 at convergence, so X̃ diag(v) X̃ ≈ AᵀA.
            let xv = Mat::from_fn(n, n, |i, j| o.x[(i, j)] * o.v[j]);
            let rhs = &xv * &o.x;
            let scale = gram.norm_l2();
            assert!(
                (&rhs - &gram).norm_l2() <= 1e-5 * scale,
                "Eq. 7 residual {:e}",
                (&rhs - &gram).norm_l2() / scale
            );
            let loss = |x: &Mat<f64>| -> f64 {
                let inv = x.llt(Side::Lower).unwrap().inverse();
                (&gram * &inv).diagonal().column_vector().iter().sum()
            };
            assert!((loss(&o.x) - o.loss).abs() <= 1e-10 * o.loss);
            for _ in 0..50 {
                let g = Mat::from_fn(n, n, |_, _| rand());
                let mut x = &g * g.transpose() + Mat::<f64>::identity(n, n) * 0.1;
                let d: Vec<f64> = (0..n).map(|i| x[(i, i)].sqrt()).collect();
                x = Mat::from_fn(n, n, |i, j| x[(i, j)] / (d[i] * d[j]));
                assert!(loss(&x) >= o.loss * (1.0 - 1e-12));
            }
        }
    }
}
