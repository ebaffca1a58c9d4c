//! The certified dense optimum of the max error under single participation: the factorization
//! norm `γ₂(A)`, computed with a primal point and a dual certificate at every iteration.
//!
//! # The problem and its dual
//!
//! For `A = B C` with `X = CᵀC`, single participation, the max error in units of `σ·ζ` is
//! `sens(C)·max_i ‖B[i,:]‖ = √(max_j X_jj · max_i (A X⁻¹ Aᵀ)_ii)`: scale-invariant, so the
//! problem is `min max_i (A X⁻¹ Aᵀ)_ii` over `X ≻ 0`, `diag X ≤ 1`, convex in `X` as the total
//! loss is (003 Eq. 4 with the sum over rows replaced by a maximum). Its optimum is the
//! factorization norm `γ₂(A) = min_{A = BC} ‖B‖_{2→∞} ‖C‖_{1→2}` (Linial, Mendelson, Schechtman,
//! Shraibman 2007; for prefix sums the object of Fichtenberger, Henzinger, Upadhyay, ICML 2023,
//! and Henzinger, Upadhyay, Upadhyay, SODA 2023). (A lower-triangular streaming `C` loses
//! nothing: the streaming factorization of the same `X`, [`crate::optimize::factorize`], has the same
//! column norms and the same row norms of `B = A C⁻¹`.)
//!
//! **The dual used.** The Lagrangian dual over a distribution `w` on the rows is the weighted
//! total loss `min_X tr(diag(w) A X⁻¹ Aᵀ)`, whose own dual (003 Eq. 8, Thm 3.2) is a maximum over
//! `v ≥ 0` of `2 tr((V^{1/2} AᵀWA V^{1/2})^{1/2}) − Σ v`; maximizing over the scale of `v`
//! (`v = t·u`, `u` a distribution on the columns) leaves
//!
//! ```text
//! γ₂(A) = max_{w, u distributions} ‖W^{1/2} A U^{1/2}‖_*      (W = diag w, U = diag u)
//! ```
//!
//! (the dual characterization of Lee, Shraibman, Špalek 2008, Thm 9; Matoušek, Nikolov, Talwar
//! 2020). It is a lower bound at **every** `(w, u)`: for any `A = BC`,
//! `‖W^{1/2}AU^{1/2}‖_* ≤ ‖W^{1/2}B‖_F‖CU^{1/2}‖_F ≤ max_i‖B[i,:]‖·max_j‖C[:,j]‖` (Hölder, then
//! `Σ w_i = Σ u_j = 1`). The function `g(w, u) = ‖W^{1/2}AU^{1/2}‖_*` equals
//! `min_{A=BC} ½(Σ w_i‖B[i,:]‖² + Σ u_j‖C[:,j]‖²)`, a minimum of linear functions, so it is
//! jointly concave and has no spurious local maxima.
//!
//! # The iteration
//!
//! With the SVD `M = W^{1/2}AU^{1/2} = PΣQᵀ`, an iteration computes the dual value
//! `g = Σ_k σ_k`, the factorization `B = W^{-1/2}PΣ^{1/2}`, `C = Σ^{1/2}QᵀU^{-1/2}` with
//! `‖B[i,:]‖² = (PΣPᵀ)_ii/w_i` and `‖C[:,j]‖² = (QΣQᵀ)_jj/u_j` (`2∂g/∂w_i` and `2∂g/∂u_j`, by
//! Danskin), and the next point, the multiplicative (optimal-design) step
//! `w_i ← w_i‖B[i,:]‖²/g`, `u_j ← u_j‖C[:,j]‖²/g`, which keeps both on the simplex
//! (`Σ_i w_i‖B[i,:]‖² = tr Σ = g`) and whose fixed points are exactly the points where every row
//! of `B` and every column of `C` have the same norm, `g`: there primal and dual agree. It needs
//! only `PΣPᵀ = (MMᵀ)^{1/2}` and `QΣQᵀ = (MᵀM)^{1/2}`, from two symmetric eigendecompositions
//! (as [`crate::optimize::single`] computes `K(v)^{1/2}`), cheaper than one SVD; for a persymmetric
//! workload (`JAJ = Aᵀ`, the prefix sum) the iterate stays on `u = Jw`, where the optimum lies
//! (`g(w, u) = g(Ju, Jw)` and `g` is concave), and one does. As in [`crate::optimize::single`], the step
//! runs with Anderson acceleration on `(log w, log u)`; nothing relies on its convergence, since
//! every iterate carries its own bounds.
//!
//! **The primal point** of an iterate is `X̃ = diag(φ)^{-1/2} T diag(φ)^{-1/2}` with
//! `T = QΣQᵀ`, `φ = diag T` (unit diagonal, so `sens = 1`; the analogue of 003 Eq. 6
//! normalized), and its max error `√(max_i ‖L⁻¹A[i,:]ᵀ‖²)` with `X̃ = LLᵀ` is computed exactly
//! (one Cholesky factorization and one triangular solve), never taken from the iteration. It is
//! never worse than the product bound `√(max_i‖B[i,:]‖²·max_j‖C[:,j]‖²)` of the SVD's
//! factorization (normalizing the diagonal of `X = CᵀC` shrinks `X⁻¹` in the PSD order), which
//! costs `O(n²)` and decides when the exact primal is worth its `O(n³)`.
//!
//! The iteration stops when `(best primal − best dual)/best primal` is at most the requested gap
//! (in units of the max error, a standard deviation, not of its square).

use faer::{Mat, MatRef, Side};

use crate::optimize::single::Anderson;
use crate::{Error, Result};

/// How often (iterations) the exact primal is computed even when the product bound is far from
/// the dual: one Cholesky factorization and one triangular solve, a few percent of the ten
/// iterations' eigendecompositions.
const EXACT_PRIMAL_EVERY: usize = 10;

/// Stopping rule and budget of [`optimize_max_error`].
#[derive(Debug, Clone)]
pub struct MaxErrorOptions {
    /// Stop when `(primal − dual)/primal ≤ relative_gap` (max error, not squared).
    pub relative_gap: f64,
    /// Stop after this many iterations: with [`Error::NotConverged`], or with the best point
    /// found when `best_at_budget`.
    pub max_iterations: usize,
    /// At the iteration budget, return the best primal point and the best dual bound found
    /// (their gap in [`MaxErrorOptimum::relative_gap`], above the target) instead of an error:
    /// the multiplicative iteration converges slowly on some workloads (momentum), and its best
    /// point is still a factorization with a certified distance to the optimum.
    pub best_at_budget: bool,
    /// Anderson history on `(log w, log u)`; `0` is the plain multiplicative iteration.
    pub anderson_history: usize,
    /// A starting point `(w, u)` (positive, any scale; e.g. the optimum for a shorter horizon,
    /// interpolated): `None` starts from uniform weights.
    pub start: Option<(Vec<f64>, Vec<f64>)>,
}

impl Default for MaxErrorOptions {
    fn default() -> Self {
        Self {
            relative_gap: 1e-6,
            max_iterations: 500,
            best_at_budget: false,
            anderson_history: 5,
            start: None,
        }
    }
}

/// One iteration's bounds, for progress reporting.
#[derive(Debug, Clone, Copy)]
pub struct MaxErrorProgress {
    /// Iterations done.
    pub iteration: usize,
    /// Best max error of a feasible factorization measured exactly so far (infinite before
    /// the first).
    pub primal: f64,
    /// Best product bound so far: the max error of a feasible factorization, computed in
    /// `O(n²)` (module docs); the exact primal is never above it.
    pub product_bound: f64,
    /// Best lower bound `‖W^{1/2}AU^{1/2}‖_*` so far.
    pub dual: f64,
    /// `(primal − dual)/primal`.
    pub relative_gap: f64,
}

/// A certified optimum of the max error `min_{A=BC} sens(C)·max_i‖B[i,:]‖` under single
/// participation (module docs), in units of `σ·ζ`.
#[derive(Debug, Clone)]
pub struct MaxErrorOptimum {
    /// `X̃ = CᵀC`, unit diagonal (so `sens = 1`): factor it with
    /// [`streaming_factorization`](crate::optimize::factorize::streaming_factorization).
    pub x: Mat<f64>,
    /// `max_i ‖B[i,:]‖` of `X̃`'s factorization, `√max_i (A X̃⁻¹ Aᵀ)_ii`: its max error.
    pub max_error: f64,
    /// The best dual value `‖W^{1/2}AU^{1/2}‖_*`: no factorization has a smaller max error.
    pub dual_bound: f64,
    /// `(max_error − dual_bound)/max_error`.
    pub relative_gap: f64,
    /// The row distribution `w` of the best dual value.
    pub row_weights: Vec<f64>,
    /// The column distribution `u` of the best dual value.
    pub column_weights: Vec<f64>,
    /// Iterations run.
    pub iterations: usize,
}

/// What one iteration computes (module docs).
struct Evaluation {
    /// `g = Σ σ_k`.
    dual: f64,
    /// `√(max_i ‖B[i,:]‖² · max_j ‖C[:,j]‖²)` of the iterate's factorization.
    product_bound: f64,
    /// The next point of the multiplicative iteration, `(log w', log u')`.
    next: Vec<f64>,
    /// The eigenvectors `Q` of `MᵀM` and the singular values `σ = √λ`: `T = QΣQᵀ`.
    q: Mat<f64>,
    sigma: Vec<f64>,
}

/// Normalizes `exp(x)` (one block of the iterate) to a distribution, stably.
fn distribution(x: &[f64]) -> Vec<f64> {
    let top = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - top).exp()).collect();
    let total: f64 = e.iter().sum();
    e.into_iter().map(|v| v / total).collect()
}

/// The eigendecomposition of the symmetric `K = FᵀF` as `(Q, σ)` with `σ_k = √λ_k` (tiny
/// negative `λ` from rounding clamped to 0), and `diag(QΣQᵀ) = diag((FᵀF)^{1/2})`.
#[allow(non_snake_case)]
fn square_root_diagonal(F: MatRef<'_, f64>) -> Result<(Mat<f64>, Vec<f64>, Vec<f64>)> {
    let n = F.ncols();
    let K = F.transpose() * F;
    let eig = K
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Numerical(format!("eigendecomposition failed: {e:?}")))?;
    let sigma: Vec<f64> = (0..n).map(|k| eig.S()[k].max(0.0).sqrt()).collect();
    let q = eig.U().to_owned();
    let diagonal = (0..n)
        .map(|j| (0..n).map(|k| q[(j, k)] * q[(j, k)] * sigma[k]).sum())
        .collect();
    Ok((q, sigma, diagonal))
}

/// Whether `J A J = Aᵀ` (`J` the reversal), exactly: the prefix sum is.
fn persymmetric(a: MatRef<'_, f64>) -> bool {
    let n = a.nrows();
    (0..n).all(|i| (0..n).all(|j| a[(i, j)] == a[(n - 1 - j, n - 1 - i)]))
}

/// One iteration at `(w, u)`: `M = W^{1/2}AU^{1/2}`, `diag(QΣQᵀ)` from the eigendecomposition
/// of `MᵀM` and `diag(PΣPᵀ)` from that of `MMᵀ` (`(MMᵀ)^{1/2} = PΣPᵀ`); two symmetric
/// eigendecompositions cost less than one SVD (at n = 2048 here, 3.2 s each against 13.7 s). For
/// a persymmetric `A` and `u = Jw`, `JMJ = Mᵀ`, so `diag(PΣPᵀ)` is `diag(QΣQᵀ)` reversed and one
/// eigendecomposition does.
#[allow(non_snake_case)]
fn evaluate(a: MatRef<'_, f64>, w: &[f64], u: &[f64], symmetric: bool) -> Result<Evaluation> {
    let n = a.nrows();
    let (sw, su): (Vec<f64>, Vec<f64>) = (
        w.iter().map(|x| x.sqrt()).collect(),
        u.iter().map(|x| x.sqrt()).collect(),
    );
    let M = Mat::from_fn(n, n, |i, j| sw[i] * a[(i, j)] * su[j]);
    let (q, sigma, column_diagonal) = square_root_diagonal(M.as_ref())?;
    let row_diagonal = if symmetric {
        column_diagonal.iter().rev().copied().collect()
    } else {
        square_root_diagonal(M.transpose())?.2
    };
    let dual: f64 = sigma.iter().sum();
    if !(dual.is_finite() && dual > 0.0) {
        return Err(Error::Numerical(format!(
            "the nuclear norm of W^1/2 A U^1/2 is {dual}"
        )));
    }
    // ‖B[i,:]‖² = (PΣPᵀ)_ii / w_i and ‖C[:,j]‖² = (QΣQᵀ)_jj / u_j.
    let rows: Vec<f64> = row_diagonal.iter().zip(w).map(|(d, w)| d / w).collect();
    let columns: Vec<f64> = column_diagonal.iter().zip(u).map(|(d, u)| d / u).collect();
    let top = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let product_bound = (top(&rows) * top(&columns)).sqrt();
    let next: Vec<f64> = w
        .iter()
        .zip(&rows)
        .chain(u.iter().zip(&columns))
        .map(|(x, r)| (x * r / dual).ln())
        .collect();
    if next.iter().any(|x| !x.is_finite()) {
        return Err(Error::Numerical(
            "a row of B or a column of C vanished: the workload is not full rank".into(),
        ));
    }
    Ok(Evaluation {
        dual,
        product_bound,
        next,
        q,
        sigma,
    })
}

impl Evaluation {
    /// The unit-diagonal `X̃` of the module docs and its exact max error (infinite when `X̃` is
    /// numerically not positive definite).
    fn primal(&self, a: MatRef<'_, f64>) -> (f64, Mat<f64>) {
        let n = self.sigma.len();
        let scaled = Mat::from_fn(n, n, |i, k| self.q[(i, k)] * self.sigma[k]);
        let t = &scaled * self.q.transpose();
        let s: Vec<f64> = (0..n).map(|i| 1.0 / t[(i, i)].sqrt()).collect();
        let x = Mat::from_fn(n, n, |i, j| {
            if i == j {
                1.0
            } else {
                0.5 * (t[(i, j)] + t[(j, i)]) * s[i] * s[j]
            }
        });
        (unit_diagonal_max_error(a, x.as_ref()), x)
    }
}

/// `√max_i (A X⁻¹ Aᵀ)_ii` for a unit-diagonal `X = LLᵀ` (`‖L⁻¹A[i,:]ᵀ‖²` per row), infinite
/// when `X` is numerically not positive definite: the max error of `X`'s factorization, whose
/// sensitivity is 1.
pub fn unit_diagonal_max_error(a: MatRef<'_, f64>, x: MatRef<'_, f64>) -> f64 {
    let Ok(llt) = x.llt(Side::Lower) else {
        return f64::INFINITY;
    };
    let mut y = a.transpose().to_owned();
    llt.L().solve_lower_triangular_in_place(y.as_mut());
    let worst = (0..y.ncols())
        .map(|i| y.col(i).squared_norm_l2())
        .fold(0.0, f64::max);
    if worst.is_finite() && worst > 0.0 {
        worst.sqrt()
    } else {
        f64::INFINITY
    }
}

/// The weights `w` of a horizon `m = w.len()` carried to a horizon `n` for
/// [`MaxErrorOptions::start`]: `log w` interpolated linearly at the cell midpoints
/// `(i + ½)/m` and held constant past the first and last, then normalized to a distribution. For
/// a family of workloads whose optimal weights are a smooth profile in `i/n` (the prefix sum);
/// any positive start is valid, only the iteration count depends on it.
pub fn interpolate_weights(w: &[f64], n: usize) -> Vec<f64> {
    let m = w.len();
    if m == 0 || n == 0 {
        return vec![1.0 / n.max(1) as f64; n];
    }
    let logs: Vec<f64> = w.iter().map(|v| v.max(f64::MIN_POSITIVE).ln()).collect();
    let out: Vec<f64> = (0..n)
        .map(|i| {
            let t = ((i as f64 + 0.5) * m as f64 / n as f64 - 0.5).clamp(0.0, (m - 1) as f64);
            let lo = (t.floor() as usize).min(m - 1);
            let hi = (lo + 1).min(m - 1);
            let f = t - lo as f64;
            ((1.0 - f) * logs[lo] + f * logs[hi]).exp()
        })
        .collect();
    let total: f64 = out.iter().sum();
    out.into_iter().map(|v| v / total).collect()
}

/// Compute the exact primal (`O(n³)`, about a third of an iteration) once the product bound's
/// gap is within this factor of the target: the exact primal's gap is smaller than the product
/// bound's (about half of it on the prefix sum).
const PRIMAL_FACTOR: f64 = 4.0;

/// Minimizes the max error `sens(C)·max_i‖B[i,:]‖` over factorizations `A = BC` under single
/// participation (module docs), to the certified `options.relative_gap`. `progress` is called
/// once per iteration.
pub fn optimize_max_error(
    a: MatRef<'_, f64>,
    options: &MaxErrorOptions,
    progress: &mut dyn FnMut(&MaxErrorProgress),
) -> Result<MaxErrorOptimum> {
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
        return Err(Error::InvalidArgument(format!(
            "the duality-gap target must be positive, got {}",
            options.relative_gap
        )));
    }
    let mut x: Vec<f64> = match &options.start {
        None => vec![0.0; 2 * n],
        Some((w, u)) => {
            if w.len() != n || u.len() != n || w.iter().chain(u).any(|v| v.is_nan() || *v <= 0.0) {
                return Err(Error::InvalidArgument(format!(
                    "the starting weights must be {n} positive row and {n} positive column weights"
                )));
            }
            w.iter().chain(u).map(|v| v.ln()).collect()
        }
    };
    let symmetric = persymmetric(a);
    if symmetric {
        // Start on the subspace u = Jw, which the iteration keeps (module docs).
        let (head, tail) = x.split_at_mut(n);
        for (i, h) in head.iter_mut().enumerate() {
            *h = 0.5 * (*h + tail[n - 1 - i]);
        }
        for (j, t) in tail.iter_mut().enumerate() {
            *t = head[n - 1 - j];
        }
    }
    let mut anderson = Anderson::new(options.anderson_history);
    let mut best_dual: Option<(f64, Vec<f64>, Vec<f64>)> = None;
    let mut best: Option<(f64, Mat<f64>)> = None;
    let mut gap = f64::INFINITY;
    let mut product_bound = f64::INFINITY;
    for iteration in 1..=options.max_iterations {
        let (w, u) = (distribution(&x[..n]), distribution(&x[n..]));
        let e = evaluate(a, &w, &u, symmetric)?;
        if best_dual.as_ref().is_none_or(|(d, _, _)| e.dual > *d) {
            best_dual = Some((e.dual, w, u));
        }
        let dual = best_dual.as_ref().map_or(0.0, |b| b.0);
        product_bound = product_bound.min(e.product_bound);
        let target = PRIMAL_FACTOR * options.relative_gap;
        let last = iteration == options.max_iterations;
        // The exact primal also every `EXACT_PRIMAL_EVERY` iterations: where the product bound
        // converges slowly (a momentum workload), the exact value of the same iterate is much
        // closer to the dual, and the stopping rule and a refusal's gap are the best seen.
        if (e.product_bound - dual) <= target * e.product_bound
            || last
            || iteration % EXACT_PRIMAL_EVERY == 0
        {
            let (primal, xm) = e.primal(a);
            if best.as_ref().is_none_or(|(p, _)| primal < *p) {
                best = Some((primal, xm));
            }
        }
        let primal = best.as_ref().map_or(f64::INFINITY, |b| b.0);
        gap = if primal.is_finite() {
            (primal - dual) / primal
        } else {
            f64::INFINITY
        };
        progress(&MaxErrorProgress {
            iteration,
            primal,
            product_bound,
            dual,
            relative_gap: gap,
        });
        if gap <= options.relative_gap || (last && options.best_at_budget && best.is_some()) {
            let (max_error, x) = best.expect("a finite gap needs a primal point");
            let (dual_bound, row_weights, column_weights) =
                best_dual.expect("a dual point was evaluated");
            return Ok(MaxErrorOptimum {
                x,
                max_error,
                dual_bound,
                relative_gap: gap,
                row_weights,
                column_weights,
                iterations: iteration,
            });
        }
        x = anderson.next(&x, e.next);
    }
    Err(Error::NotConverged {
        iterations: options.max_iterations,
        relative_gap: gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::factorize::streaming_factorization;
    use crate::optimize::single::{OptimizeOptions, optimize_single_participation};
    use crate::workload::Workload;

    fn prefix(n: usize) -> Mat<f64> {
        Workload::PrefixSum.matrix(n).unwrap()
    }

    fn tight() -> MaxErrorOptions {
        MaxErrorOptions {
            relative_gap: 1e-9,
            ..Default::default()
        }
    }

    /// The reported max error is that of the `X` returned, measured through its streaming
    /// factorization with dense matrices: `sens(C)` the largest column norm, the largest row
    /// norm of `B = A C⁻¹`; and the dual bound is the nuclear norm at the returned weights.
    #[test]
    fn the_optimum_is_the_max_error_of_its_factorization() {
        for n in [1, 2, 7, 40] {
            let a = prefix(n);
            let o = optimize_max_error(a.as_ref(), &tight(), &mut |_| {}).unwrap();
            let f = streaming_factorization(a.as_ref(), o.x.as_ref()).unwrap();
            let sens = (0..n)
                .map(|j| f.encoder.col(j).norm_l2())
                .fold(0.0, f64::max);
            let rows = (0..n)
                .map(|i| f.decoder.row(i).norm_l2())
                .fold(0.0, f64::max);
            assert!((sens - 1.0).abs() < 1e-12, "n = {n}: sens {sens}");
            assert!(
                (sens * rows - o.max_error).abs() <= 1e-10 * o.max_error,
                "n = {n}: {} vs {}",
                sens * rows,
                o.max_error
            );
            let m = Mat::from_fn(n, n, |i, j| {
                o.row_weights[i].sqrt() * a[(i, j)] * o.column_weights[j].sqrt()
            });
            let nuclear: f64 = m.singular_values().unwrap().iter().sum();
            assert!((nuclear - o.dual_bound).abs() <= 1e-12 * nuclear);
            assert!((o.row_weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!((o.column_weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(o.dual_bound <= o.max_error && o.relative_gap <= 1e-9);
        }
    }

    /// The "hash" workload of `tools/max_error_reference.py`: `A[i,j] = 1 + ((7i + 3j) mod 5)/4`
    /// on and below the diagonal.
    fn hash(n: usize) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| {
            if j <= i {
                1.0 + ((7 * i + 3 * j) % 5) as f64 / 4.0
            } else {
                0.0
            }
        })
    }

    /// `γ₂` against an independent solver: the semidefinite programme
    /// `min t s.t. [[P, A], [Aᵀ, Q]] ⪰ 0, diag P ≤ t, diag Q ≤ t`, solved by Clarabel
    /// (`tools/max_error_reference.py gamma2`, to a gap of 1e-10), and the closed form `2/√3`
    /// at n = 2 (`X = [[1, ½], [½, 1]]` equalizes the two rows' `4/3`). On the "hash" workload
    /// some rows and columns are inactive at the optimum (their dual weights tend to 0, module
    /// docs, "Limits"): the dual bound still converges to `γ₂`, the primal stalls above it.
    #[test]
    fn gamma2_matches_the_semidefinite_programme() {
        let cases: [(Mat<f64>, f64); 5] = [
            (prefix(2), 1.154_700_538_4),
            (prefix(3), 1.253_197_264_8),
            (prefix(8), 1.510_483_561_2),
            (prefix(16), 1.704_480_244_2),
            (prefix(32), 1.905_445_713_0),
        ];
        for (a, reference) in cases {
            let o = optimize_max_error(a.as_ref(), &tight(), &mut |_| {}).unwrap();
            assert!(
                o.dual_bound <= reference * (1.0 + 1e-9)
                    && o.max_error >= reference * (1.0 - 1e-9)
                    && o.max_error <= reference * (1.0 + 2e-9),
                "n = {}: [{}, {}] against {reference}",
                a.nrows(),
                o.dual_bound,
                o.max_error
            );
        }
        let o = optimize_max_error(prefix(2).as_ref(), &tight(), &mut |_| {}).unwrap();
        let closed = 2.0 / 3f64.sqrt();
        assert!((o.max_error - closed).abs() <= 1e-8 * closed);
        assert!((o.x[(1, 0)] - 0.5).abs() < 1e-6, "{:?}", o.x);
        for (a, reference) in [(hash(5), 2.107_849_024_2), (hash(12), 2.624_610_797_8)] {
            let loose = MaxErrorOptions {
                relative_gap: 0.05,
                ..Default::default()
            };
            let o = optimize_max_error(a.as_ref(), &loose, &mut |_| {}).unwrap();
            assert!(o.max_error >= reference * (1.0 - 1e-9));
            let stalled = optimize_max_error(
                a.as_ref(),
                &MaxErrorOptions {
                    relative_gap: 1e-12,
                    max_iterations: 300,
                    ..Default::default()
                },
                &mut |p| {
                    assert!(p.dual <= reference * (1.0 + 1e-9));
                    if p.iteration == 300 {
                        assert!(
                            (p.dual - reference).abs() <= 1e-9 * reference,
                            "{} vs {reference}",
                            p.dual
                        );
                    }
                },
            );
            assert!(matches!(stalled, Err(Error::NotConverged { .. })));
        }
    }

    /// The Lagrangian dual by a different algorithm: for the optimal row weights `w`, the
    /// weighted total loss `min_X tr(diag(w) A X⁻¹ Aᵀ)` over unit-diagonal `X`, certified by the
    /// φ iteration of [`crate::optimize::single`] (003 Eq. 5–8, eigendecompositions of `K(v)`), lies
    /// between the squares of this module's dual and primal: `‖W^{1/2}AU^{1/2}‖_*² ≤` its
    /// optimum (the maximum over `u`) `≤ γ₂²` (weak duality).
    #[test]
    fn the_weighted_total_loss_brackets_the_optimum() {
        for a in [prefix(48), prefix(100)] {
            let n = a.nrows();
            let o =
                optimize_max_error(a.as_ref(), &MaxErrorOptions::default(), &mut |_| {}).unwrap();
            let weighted = Mat::from_fn(n, n, |i, j| o.row_weights[i].sqrt() * a[(i, j)]);
            let options = OptimizeOptions {
                relative_gap: 1e-10,
                ..Default::default()
            };
            let inner =
                optimize_single_participation(weighted.as_ref(), &options, &mut |_| {}).unwrap();
            let (low, high) = (o.dual_bound.powi(2), o.max_error.powi(2));
            assert!(
                inner.dual_bound <= high * (1.0 + 1e-12),
                "n = {n}: weighted dual {} above the primal² {high}",
                inner.dual_bound
            );
            assert!(
                inner.loss >= low * (1.0 - 1e-12),
                "n = {n}: weighted primal {} below the dual² {low}",
                inner.loss
            );
            assert!(o.relative_gap <= 1e-6);
        }
    }

    /// No random unit-diagonal `X` has a max error below the dual bound.
    #[test]
    #[allow(non_snake_case)]
    fn no_random_factorization_beats_the_dual_bound() {
        let mut state = 4242u64;
        let mut rand = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for n in 4..=9 {
            let A = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
                std::cmp::Ordering::Greater => rand(),
                std::cmp::Ordering::Equal => 1.0 + rand().abs(),
                std::cmp::Ordering::Less => 0.0,
            });
            let loose = MaxErrorOptions {
                relative_gap: 0.05,
                ..Default::default()
            };
            let o = optimize_max_error(A.as_ref(), &loose, &mut |_| {}).unwrap();
            for _ in 0..200 {
                let g = Mat::from_fn(n, n, |_, _| rand());
                let mut x = &g * g.transpose() + Mat::<f64>::identity(n, n) * 0.05;
                let d: Vec<f64> = (0..n).map(|i| x[(i, i)].sqrt()).collect();
                x = Mat::from_fn(n, n, |i, j| x[(i, j)] / (d[i] * d[j]));
                let value = unit_diagonal_max_error(A.as_ref(), x.as_ref());
                assert!(value >= o.dual_bound * (1.0 - 1e-12), "n = {n}: {value}");
            }
        }
    }

    /// The prefix sum at n = 256: the certified optimum and the square root's max error beside
    /// it (`toeplitz::square_root_coefficients`, `B = C = S^{1/2}`, so the max error is
    /// `Σ_{k<n} c_k²`), 11.8% above; the persymmetric shortcut (one eigendecomposition) gives
    /// the optimum the general path gives on the same matrix with one entry's rounding broken.
    #[test]
    fn prefix_sum_256_and_the_square_root() {
        let n = 256;
        let a = prefix(n);
        let o = optimize_max_error(a.as_ref(), &MaxErrorOptions::default(), &mut |_| {}).unwrap();
        assert!(persymmetric(a.as_ref()));
        assert!((o.max_error - 2.532_716).abs() < 5e-6, "{}", o.max_error);
        let square_root: f64 = crate::optimize::toeplitz::square_root_coefficients(n)
            .iter()
            .map(|c| c * c)
            .sum();
        assert!((square_root - 2.831_050).abs() < 1e-6, "{square_root}");
        assert!(square_root > o.max_error * 1.1);
        // At the prefix sum's optimum every row of B has the same norm (all constraints active).
        let f = streaming_factorization(a.as_ref(), o.x.as_ref()).unwrap();
        let low = (0..n)
            .map(|i| f.decoder.row(i).norm_l2())
            .fold(f64::INFINITY, f64::min);
        assert!(low >= o.max_error * (1.0 - 1e-5), "{low}");
        // Not persymmetric any more (one entry changed by 2⁻⁴⁰): the general path, two
        // eigendecompositions per iteration.
        let mut broken = a.clone();
        broken[(n - 1, 1)] += 2f64.powi(-40);
        assert!(!persymmetric(broken.as_ref()));
        let general =
            optimize_max_error(broken.as_ref(), &MaxErrorOptions::default(), &mut |_| {}).unwrap();
        assert!((general.max_error - o.max_error).abs() <= 2e-6 * o.max_error);
        assert!(
            general.dual_bound <= o.max_error && o.dual_bound <= general.max_error * (1.0 + 1e-9)
        );
    }

    #[test]
    fn refuses_bad_input_and_reports_progress() {
        let a = prefix(16);
        let mut calls = 0;
        let result = optimize_max_error(
            a.as_ref(),
            &MaxErrorOptions {
                max_iterations: 2,
                relative_gap: 1e-12,
                ..Default::default()
            },
            &mut |p| {
                calls += 1;
                assert!(p.dual <= p.product_bound);
            },
        );
        assert!(matches!(
            result,
            Err(Error::NotConverged { iterations: 2, .. })
        ));
        assert_eq!(calls, 2);
        for bad in [0.0, f64::NAN, -1.0] {
            let options = MaxErrorOptions {
                relative_gap: bad,
                ..Default::default()
            };
            assert!(optimize_max_error(a.as_ref(), &options, &mut |_| {}).is_err());
        }
        let start = MaxErrorOptions {
            start: Some((vec![1.0; 15], vec![1.0; 16])),
            ..Default::default()
        };
        assert!(optimize_max_error(a.as_ref(), &start, &mut |_| {}).is_err());
        assert!(
            optimize_max_error(Mat::<f64>::zeros(2, 3).as_ref(), &tight(), &mut |_| {}).is_err()
        );
        // A warm start from the optimum of a shorter horizon reaches the same optimum.
        let short = optimize_max_error(prefix(8).as_ref(), &tight(), &mut |_| {}).unwrap();
        let warm = MaxErrorOptions {
            start: Some((
                interpolate_weights(&short.row_weights, 16),
                interpolate_weights(&short.column_weights, 16),
            )),
            relative_gap: 1e-9,
            ..Default::default()
        };
        let cold = optimize_max_error(a.as_ref(), &tight(), &mut |_| {}).unwrap();
        let warmed = optimize_max_error(a.as_ref(), &warm, &mut |_| {}).unwrap();
        assert!((warmed.max_error - cold.max_error).abs() <= 2e-9 * cold.max_error);
    }
}
