//! The optimal factorization for single participation, by iterating the fixed point φ of
//! Denisov et al. 2022 (Thm 3.2) and stopping on its duality gap.
//!
//! With `K(v) = V^{1/2} AᵀA V^{1/2}` (`V = diag(v)`) and its square root `T(v)`,
//!
//! - `φ(v) = diagpart(T(v))` (Eq. 5), computed from one symmetric eigendecomposition
//!   `K = U Λ Uᵀ` as `φ_i = Σ_k U_ik² √λ_k`;
//! - the dual value `g(v) = tr(V(2X(v) − I)) = 2 Σ φ_i − Σ v_i` (Eq. 8) is a lower bound on the
//!   optimal loss for every `v > 0`;
//! - `X(v) = V^{-1/2} T V^{-1/2}` (Eq. 6) normalized to unit diagonal,
//!   `X̃ = diag(φ)^{-1/2} T diag(φ)^{-1/2}`, is feasible, and its loss `tr(AᵀA X̃⁻¹)
//!   = Σ_ij K_ij d_i d_j (T⁻¹)_ij` with `d_i = √(φ_i / v_i)` is an upper bound.
//!
//! The iteration stops when `(primal − dual)/primal` is at most the requested gap: the returned
//! `X̃` is then certified to be that close to optimal. The change of `v` is only used to decide
//! when the (more expensive) primal value is worth computing.

use faer::{Mat, MatRef, Side};

use crate::{Error, Result};

/// Stopping rule and budget of the optimizer.
#[derive(Debug, Clone)]
pub struct OptimizeOptions {
    /// Stop when `(primal − dual)/primal ≤ relative_gap`.
    pub relative_gap: f64,
    /// Give up (with [`Error::NotConverged`]) after this many iterations.
    pub max_iterations: usize,
}

impl Default for OptimizeOptions {
    fn default() -> Self {
        Self {
            relative_gap: 1e-6,
            max_iterations: 10_000,
        }
    }
}

/// One iteration's bounds, for progress reporting.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Iterations done.
    pub iteration: usize,
    /// Upper bound (loss of the current feasible `X̃`), or infinity before it is computed.
    pub primal: f64,
    /// Lower bound `g(v)`.
    pub dual: f64,
    /// `(primal − dual)/primal`.
    pub relative_gap: f64,
}

/// A certified optimum of `min tr(AᵀA X⁻¹)` over `X ≻ 0`, `diag X ≤ 1` (Denisov et al. Eq. 4).
#[derive(Debug, Clone)]
pub struct Optimum {
    /// `X̃ = CᵀC`, unit diagonal.
    pub x: Mat<f64>,
    /// The dual variables `v` at which the bounds were evaluated.
    pub v: Vec<f64>,
    /// `tr(AᵀA X̃⁻¹)`: the loss `L = sens²‖B‖_F²` of the factorization of `X̃` (sensitivity 1).
    pub loss: f64,
    /// The dual lower bound: no factorization has a smaller loss.
    pub dual_bound: f64,
    /// `(loss − dual_bound)/loss`.
    pub relative_gap: f64,
    /// Iterations of φ.
    pub iterations: usize,
}

/// The eigendecomposition of `K(v)` and what φ and the bounds need from it.
#[allow(non_snake_case)]
struct Evaluation {
    K: Mat<f64>,
    U: Mat<f64>,
    lambda: Vec<f64>,
    phi: Vec<f64>,
}

#[allow(non_snake_case)]
fn evaluate(gram: MatRef<'_, f64>, v: &[f64]) -> Result<Evaluation> {
    let n = v.len();
    let s: Vec<f64> = v.iter().map(|x| x.sqrt()).collect();
    let K = Mat::from_fn(n, n, |i, j| s[i] * gram[(i, j)] * s[j]);
    let eig = K
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Numerical(format!("eigendecomposition failed: {e:?}")))?;
    let U = eig.U().to_owned();
    let lambda: Vec<f64> = (0..n).map(|k| eig.S()[k]).collect();
    if lambda.iter().any(|l| !l.is_finite()) || lambda[0] <= 0.0 {
        return Err(Error::Numerical(format!(
            "K(v) is not positive definite (smallest eigenvalue {:e})",
            lambda[0]
        )));
    }
    let roots: Vec<f64> = lambda.iter().map(|l| l.sqrt()).collect();
    let phi = (0..n)
        .map(|i| (0..n).map(|k| U[(i, k)] * U[(i, k)] * roots[k]).sum())
        .collect();
    Ok(Evaluation { K, U, lambda, phi })
}

impl Evaluation {
    /// `tr(AᵀA X̃⁻¹) = Σ_ij K_ij d_i d_j (T⁻¹)_ij`, `d_i = √(φ_i/v_i)`.
    fn primal(&self, v: &[f64]) -> f64 {
        let n = v.len();
        let scaled = Mat::from_fn(n, n, |i, k| self.U[(i, k)] / self.lambda[k].sqrt());
        let t_inverse = &scaled * self.U.transpose();
        let d: Vec<f64> = (0..n).map(|i| (self.phi[i] / v[i]).sqrt()).collect();
        let mut total = 0.0;
        for j in 0..n {
            for i in 0..n {
                total += self.K[(i, j)] * d[i] * d[j] * t_inverse[(i, j)];
            }
        }
        total
    }

    /// `X̃ = diag(φ)^{-1/2} T diag(φ)^{-1/2}` with `T = U Λ^{1/2} Uᵀ`.
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

/// Iterates `v ← φ(v)` from `v = 1` until the duality gap certifies the requested precision.
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
    if options.relative_gap.is_nan() || options.relative_gap <= 0.0 {
        return Err(Error::InvalidOption(
            "the duality-gap target must be positive".into(),
        ));
    }
    let gram = a.transpose() * a;
    let mut v = vec![1.0; n];
    let mut gap = f64::INFINITY;
    for iteration in 1..=options.max_iterations {
        let e = evaluate(gram.as_ref(), &v)?;
        let dual = 2.0 * e.phi.iter().sum::<f64>() - v.iter().sum::<f64>();
        let change = e
            .phi
            .iter()
            .zip(&v)
            .map(|(p, x)| (p - x).abs())
            .sum::<f64>()
            / v.iter().sum::<f64>();
        let primal = if change < 1e-2 {
            e.primal(&v)
        } else {
            f64::INFINITY
        };
        gap = (primal - dual) / primal;
        progress(&Progress {
            iteration,
            primal,
            dual,
            relative_gap: gap,
        });
        if gap <= options.relative_gap {
            return Ok(Optimum {
                x: e.normalized_x(),
                v,
                loss: primal,
                dual_bound: dual,
                relative_gap: gap,
                iterations: iteration,
            });
        }
        v = e.phi;
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

    fn optimum(n: usize) -> Optimum {
        let a = Workload::PrefixSum.matrix(n).unwrap();
        optimize_single_participation(a.as_ref(), &OptimizeOptions::default(), &mut |_| {}).unwrap()
    }

    fn check(n: usize, expected_sqrt_loss: f64) {
        let o = optimum(n);
        assert!(o.dual_bound <= o.loss);
        assert!(o.relative_gap <= 1e-6, "gap {}", o.relative_gap);
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

    /// On a random lower-triangular workload: unit diagonal, Eq. (7) at the fixed point, and no
    /// random feasible X does better.
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
        for n in [6, 9, 12] {
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
            for i in 0..n {
                assert_eq!(o.x[(i, i)], 1.0);
            }
            let gram = A.transpose() * &A;
            // Eq. (7) AᵀA = X diag(v) X holds at the fixed point up to normalization of X:
            // with X(v) = D^{1/2} X̃ D^{1/2}, D = φ/v ≈ 1 at convergence.
            let xv = Mat::from_fn(n, n, |i, j| o.x[(i, j)] * o.v[j]);
            let rhs = &xv * &o.x;
            let scale = gram.norm_l2();
            assert!((&rhs - &gram).norm_l2() <= 1e-4 * scale, "Eq. 7 residual");
            let loss = |x: &Mat<f64>| -> f64 {
                use faer::linalg::solvers::DenseSolveCore;
                let inv = x.llt(Side::Lower).unwrap().inverse();
                (&gram * &inv).diagonal().column_vector().iter().sum()
            };
            assert!((loss(&o.x) - o.loss).abs() <= 1e-8 * o.loss);
            for _ in 0..20 {
                let g = Mat::from_fn(n, n, |_, _| rand());
                let mut x = &g * g.transpose() + Mat::<f64>::identity(n, n) * 0.1;
                let d: Vec<f64> = (0..n).map(|i| x[(i, i)].sqrt()).collect();
                x = Mat::from_fn(n, n, |i, j| x[(i, j)] / (d[i] * d[j]));
                assert!(loss(&x) >= o.dual_bound);
            }
        }
    }
}
