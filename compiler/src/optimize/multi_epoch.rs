//! Optimal factorizations for fixed epoch order `(k, b)` (001's `(k, b)`-participation), with a
//! certified gap (Choquette-Choo et al. 2023, 001 §3).
//!
//! # The problem solved
//!
//! 001 Eq. (6) minimizes `tr(AᵀA X⁻¹)` over `X ≻ 0` under the sensitivity constraint; the paper
//! observes (Fig. 2) that the optimum makes the columns of `C` that one record can touch
//! *orthogonal*, and we solve over that class. Steps `i ≡ j (mod b)` form a *class*; in class
//! positions (`i = c + p·b`) a pattern holds at most `k` consecutive positions. With `X_ij = 0`
//! for every pair one pattern can hold (same class, `0 < |p − q| < k`), every pattern block
//! `X[π,π]` is diagonal and `sens² = max_π Σ_{i∈π} X_ii`: the largest sum of `X_ii` over a
//! *window* of `k` consecutive positions of a class (the whole class when it has at most `k`
//! members). So, for any `k` (`k < ⌈n/b⌉` included):
//!
//! ```text
//! min tr(GX⁻¹)  over X ≻ 0,  X_ij = 0 for the pairs a pattern holds,  Σ_{i∈w} X_ii ≤ 1 for every window w
//! ```
//!
//! with `G = AᵀA`; pairs `k·b` or more apart, and pairs of different classes, are free (001
//! App. D: only the pattern blocks matter).
//!
//! # The certificate (001 Thm 3.1, for these constraints)
//!
//! The Lagrangian is `tr(GX⁻¹) + tr(UX) − Σ_w μ_w` with `μ ≥ 0` and `U = diag(d) + M`,
//! `d_i = Σ_{w∋i} μ_w`, `M` supported on the constrained pairs. For `U ≻ 0` the minimizer over
//! `X` is `X(U) = R⁻ᵀ (RᵀGR)^{1/2} R⁻¹` for any `RRᵀ = U`, and the dual value is
//! `g(U) = 2 tr T − Σ_w μ_w`, `T = (RᵀGR)^{1/2}` (001 Thm 3.1). Two refinements make it a
//! lower bound for every `U`, not only at the optimum:
//!
//! - a feasible `X` has `Σ_i d_i X_ii ≤ H(d)`, the largest `Σ_{i∈S} d_i` over the sets `S` of
//!   positions of one class at least `k` apart, summed over the classes. The window constraints
//!   form an interval matrix, which is totally unimodular, so the largest `dᵀx` over
//!   `{x ≥ 0 : every window sums to ≤ 1}` is attained at a 0/1 point, and those are the sets
//!   `S` (a dynamic program finds the best); `H(d) ≤ Σ_w μ_w`;
//! - maximizing over the scale `αU` gives the bound `(tr T)² / H(d)`.
//!
//! With one window per class (`k ≥ ⌈n/b⌉`) `H(d)` is the sum over classes of `max_i d_i`; with
//! windows of one step (single participation) it is `Σ d_i`, and the bound is 003 Eq. (8)'s.
//!
//! # The method: Newton's method on the dual
//!
//! After permuting the steps by class, `U` is block diagonal, one block per class, and we
//! parameterize each block by `θ = (μ, z)`: `U_c = D_c^{1/2} L̂ L̂ᵀ D_c^{1/2}` with `D_c = diag(d)`
//! and `L̂` lower triangular, its row `q` the vector `(z_q, 1)` (`z_q` on the positions
//! `q − k < p < q`) scaled to unit norm. So `U_c ≻ 0` for every `z`, its diagonal is `d`, and its
//! off-diagonal entries sit on the constrained pairs (`L̂L̂ᵀ` is banded with `k − 1` bands), and
//! every such `U_c` is reached (its banded Cholesky factor). The dual `g` is concave in `U` (001
//! Thm 3.1); we maximize it by a Gauss–Newton method in `θ`: the step solves
//! `−Jᵀ∇²g J δθ = ∇_θ g` (`J` the Jacobian of `θ ↦ U`), which is Newton's step in `U` carried
//! to `θ`. With the eigendecomposition `RᵀGR = Q diag(τ²) Qᵀ` and `𝒜 = R⁻ᵀQ`,
//! `X = 𝒜 diag(τ) 𝒜ᵀ`, and the derivative of `X(U)` is (from `G = XUX`)
//!
//! ```text
//! δX = −𝒜 (Hτ ∘ (𝒜ᵀ δU 𝒜)) 𝒜ᵀ,   (Hτ)_ij = τ_i τ_j / (τ_i + τ_j),
//! ```
//!
//! two matrix products per Hessian-vector product. The system is solved by conjugate gradients,
//! preconditioned by its class-diagonal blocks, computed from a quadrature
//! `1/t ≈ Σ_k w_k e^{−s_k t}` that turns `Hτ` into a short sum of rank-one terms. A step
//! changes each `μ_w` by at most the factor `e^{±MAX_LOG_STEP}` (a clipped component is
//! prescribed and the others solved again), and is halved until `g` rises (Armijo). Near the
//! optimum the steps are full Newton steps and the gap falls quadratically: 5 iterations for the
//! prefix sum at n = 500, (5, 100), 7 at n = 2000, (20, 100), and about 10 for a momentum
//! workload with a cooldown, whose optimal multipliers span several orders of magnitude (where
//! the fixed-point iterations of 001 Cor. 3.1 stall).
//!
//! The **primal** bound comes from every iterate: `X(U) = 𝒜 diag(τ) 𝒜ᵀ` with the constrained
//! entries set to zero and each class scaled so its largest window sums to 1 is feasible
//! whenever it is positive definite (one Cholesky factorization tells), and its loss
//! `‖L⁻¹Aᵀ‖_F²` (`X = LLᵀ`) is the loss of the point returned. The iteration stops when
//! `(best primal − best dual)/best primal` is at most the requested gap.

use faer::{Mat, MatRef, Side};
use rayon::prelude::*;

use crate::optimize::single::{Optimum, Progress};
use crate::{Error, Result};

/// Stopping rule and budget of the multi-epoch optimizer.
#[derive(Debug, Clone)]
pub struct MultiEpochOptions {
    /// Stop when `(primal − dual)/primal ≤ relative_gap`.
    pub relative_gap: f64,
    /// Give up (with [`Error::NotConverged`]) after this many Newton iterations.
    pub max_iterations: usize,
}

impl Default for MultiEpochOptions {
    fn default() -> Self {
        Self {
            relative_gap: 1e-6,
            max_iterations: 100,
        }
    }
}

/// Relative rounding error of the dual value `g`, below which the line search cannot tell a
/// rise from noise.
const ROUNDING: f64 = 1e-11;

/// Largest move of a window multiplier in one step: by a factor `e^{±MAX_LOG_STEP}`.
const MAX_LOG_STEP: f64 = 2.0;

/// Largest class block (unknowns) of the preconditioner factored exactly; larger classes use
/// its diagonal.
const BLOCK_LIMIT: usize = 600;

/// Conjugate-gradient iterations per Newton step, at most.
const CG_ITERATIONS: usize = 200;

/// Node spacing of the preconditioner's quadrature (about 1e-3 relative error).
const QUADRATURE_SPACING: f64 = 1.5;

/// The classes of fixed epoch order `(k, b)` over `n` steps: members, windows and constrained
/// pairs (in class positions), and where each class's parameters sit in `θ`.
struct Structure {
    n: usize,
    epochs: usize,
    members: Vec<Vec<usize>>,
    /// `(class, position)` of every step.
    slot: Vec<(usize, usize)>,
    /// Per class: the windows, as position ranges `first..end`.
    windows: Vec<Vec<(usize, usize)>>,
    /// Per class: the pairs `(p, q)`, `p < q < p + k`, that one pattern can hold.
    pairs: Vec<Vec<(usize, usize)>>,
    /// Per class: the offset of its parameters `(μ_w…, z_pq…)`.
    offsets: Vec<usize>,
    len: usize,
    /// At each window's slot of `θ`: whether the window is the only one covering some
    /// position (its multiplier stays positive at the optimum, where `d > 0`).
    needed: Vec<bool>,
}

impl Structure {
    fn new(n: usize, epochs: usize, separation: usize) -> Self {
        let members: Vec<Vec<usize>> = (0..separation.min(n))
            .map(|c| (c..n).step_by(separation).collect())
            .collect();
        let slot = (0..n).map(|i| (i % separation, i / separation)).collect();
        let windows: Vec<Vec<(usize, usize)>> = members
            .iter()
            .map(|m| {
                let m = m.len();
                if m <= epochs {
                    vec![(0, m)]
                } else {
                    (0..=m - epochs).map(|s| (s, s + epochs)).collect()
                }
            })
            .collect();
        let pairs: Vec<Vec<(usize, usize)>> = members
            .iter()
            .map(|m| {
                let m = m.len();
                (0..m)
                    .flat_map(|p| (p + 1..m.min(p + epochs)).map(move |q| (p, q)))
                    .collect()
            })
            .collect();
        let mut offsets = Vec::with_capacity(members.len());
        let mut len = 0;
        for (w, p) in windows.iter().zip(&pairs) {
            offsets.push(len);
            len += w.len() + p.len();
        }
        let mut needed = vec![false; len];
        for (c, windows) in windows.iter().enumerate() {
            let mut cover = vec![0; members[c].len()];
            for &(first, end) in windows {
                cover[first..end].iter_mut().for_each(|x| *x += 1);
            }
            for (w, &(first, end)) in windows.iter().enumerate() {
                needed[offsets[c] + w] = cover[first..end].contains(&1);
            }
        }
        Self {
            n,
            epochs,
            members,
            slot,
            windows,
            pairs,
            offsets,
            len,
            needed,
        }
    }

    fn classes(&self) -> usize {
        self.members.len()
    }

    /// `(μ, z)` of class `c` in `θ`.
    fn split<'a>(&self, c: usize, theta: &'a [f64]) -> (&'a [f64], &'a [f64]) {
        let at = self.offsets[c];
        let windows = self.windows[c].len();
        theta[at..at + windows + self.pairs[c].len()].split_at(windows)
    }

    /// Whether slot `j` of `θ` holds a window multiplier (not a pair).
    fn is_window(&self, j: usize) -> bool {
        let c = self.offsets.partition_point(|&o| o <= j) - 1;
        j - self.offsets[c] < self.windows[c].len()
    }

    /// `d_p = Σ_{w∋p} μ_w` of class `c`.
    fn diagonal(&self, c: usize, mu: &[f64]) -> Vec<f64> {
        let mut d = vec![0.0; self.members[c].len()];
        for (&(first, end), &m) in self.windows[c].iter().zip(mu) {
            d[first..end].iter_mut().for_each(|x| *x += m);
        }
        d
    }

    /// `h_c(d)`: the largest `Σ_{p∈S} d_p` over position sets `S` at least `k` apart (module
    /// docs), by dynamic programming over the positions.
    fn packing(&self, d: &[f64]) -> f64 {
        let k = self.epochs;
        let mut best = vec![0.0; d.len() + 1];
        for j in 0..d.len() {
            let take = d[j] + best[(j + 1).saturating_sub(k)];
            best[j + 1] = best[j].max(take);
        }
        best[d.len()]
    }
}

/// Cholesky factor of a small symmetric matrix (row-major `m × m`), lower triangular; `None` if
/// not positive definite.
fn cholesky(m: usize, a: &[f64]) -> Option<Vec<f64>> {
    let mut l = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..=i {
            let mut s = a[i * m + j];
            for t in 0..j {
                s -= l[i * m + t] * l[j * m + t];
            }
            if i == j {
                if !(s.is_finite() && s > 1e-13 * a[i * m + i].abs()) {
                    return None;
                }
                l[i * m + i] = s.sqrt();
            } else {
                l[i * m + j] = s / l[j * m + j];
            }
        }
    }
    Some(l)
}

/// `L Lᵀ y = b` for a lower-triangular `m × m` `L` (row-major), in place.
fn cholesky_solve(m: usize, l: &[f64], y: &mut [f64]) {
    for i in 0..m {
        let s: f64 = (0..i).map(|t| l[i * m + t] * y[t]).sum();
        y[i] = (y[i] - s) / l[i * m + i];
    }
    for i in (0..m).rev() {
        let s: f64 = (i + 1..m).map(|t| l[t * m + i] * y[t]).sum();
        y[i] = (y[i] - s) / l[i * m + i];
    }
}

/// The inverse of a lower-triangular `m × m` matrix (row-major), lower triangular.
fn lower_inverse(m: usize, l: &[f64]) -> Vec<f64> {
    let mut inv = vec![0.0; m * m];
    for j in 0..m {
        inv[j * m + j] = 1.0 / l[j * m + j];
        for i in j + 1..m {
            let s: f64 = (j..i).map(|t| l[i * m + t] * inv[t * m + j]).sum();
            inv[i * m + j] = -s / l[i * m + i];
        }
    }
    inv
}

/// `y ↦ Bᵀ y` and `Y ↦ Y B` for a block-diagonal (by class) lower-triangular `B`, one
/// row-major `m × m` block per class, on column-major `n × n` matrices, in `O(n²m)`.
struct Blocks<'a> {
    structure: &'a Structure,
    blocks: &'a [Vec<f64>],
}

impl Blocks<'_> {
    /// `Y B`: column `(c, p)` is `Σ_{q≥p} Y[:, (c, q)] B_c[q, p]`.
    fn right(&self, y: &[f64]) -> Vec<f64> {
        let s = self.structure;
        let n = s.n;
        let mut out = vec![0.0; n * n];
        out.par_chunks_mut(n).enumerate().for_each(|(j, column)| {
            let (c, p) = s.slot[j];
            let (members, block) = (&s.members[c], &self.blocks[c]);
            let m = members.len();
            for q in p..m {
                let w = block[q * m + p];
                let source = &y[members[q] * n..(members[q] + 1) * n];
                column.iter_mut().zip(source).for_each(|(o, x)| *o += w * x);
            }
        });
        out
    }

    /// `Bᵀ Z`, column by column.
    fn left_transposed(&self, z: &[f64]) -> Vec<f64> {
        let s = self.structure;
        let n = s.n;
        let mut out = vec![0.0; n * n];
        out.par_chunks_mut(n)
            .zip(z.par_chunks(n))
            .for_each(|(column, source)| {
                for (members, block) in s.members.iter().zip(self.blocks) {
                    let m = members.len();
                    for p in 0..m {
                        column[members[p]] =
                            (p..m).map(|q| block[q * m + p] * source[members[q]]).sum();
                    }
                }
            });
        out
    }
}

fn column_major(m: MatRef<'_, f64>) -> Vec<f64> {
    let n = m.nrows();
    let mut out = vec![0.0; n * m.ncols()];
    for j in 0..m.ncols() {
        for i in 0..n {
            out[j * n + i] = m[(i, j)];
        }
    }
    out
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The multipliers of one class at `θ`: `μ`, `d`, `N` and the factor of `U_c`.
struct ClassMultipliers {
    mu: Vec<f64>,
    d: Vec<f64>,
    /// `L̂` (row-major `m × m`): `U_c = D^{1/2} L̂ L̂ᵀ D^{1/2}`, rows of unit norm.
    lhat: Vec<f64>,
    /// The norms of the rows `(z_q, 1)` before normalizing.
    norms: Vec<f64>,
    /// `C_pq = (L̂L̂ᵀ)_pq` on the pairs.
    corr: Vec<f64>,
    /// `R_c⁻¹`, `U_c = R_c R_cᵀ` (lower triangular, row-major).
    inverse: Vec<f64>,
}

/// `θ` evaluated: the dual value and bound, its gradient, and what the Hessian needs.
struct Point {
    theta: Vec<f64>,
    classes: Vec<ClassMultipliers>,
    /// `g(U) = 2 tr T − Σ μ_w`.
    value: f64,
    /// `(tr T)² / H(d)`: a lower bound on the optimum.
    dual: f64,
    /// `∂g/∂θ`.
    gradient: Vec<f64>,
    /// `𝒜 = R⁻ᵀQ`, column-major `n × n`.
    a: Vec<f64>,
    /// The eigenvalues `τ` of `T`, ascending.
    tau: Vec<f64>,
}

/// Evaluates `θ`; `None` when some multiplier is negative, some `d_p` is not positive or the
/// factor is not finite.
fn evaluate(gram: &[f64], s: &Structure, theta: &[f64]) -> Result<Option<Point>> {
    let n = s.n;
    let mut classes = Vec::with_capacity(s.classes());
    let mut factors = Vec::with_capacity(s.classes());
    let mut packing = 0.0;
    let mut mu_total = 0.0;
    for c in 0..s.classes() {
        let m = s.members[c].len();
        let (mu, off) = s.split(c, theta);
        if mu.iter().any(|x| x.is_nan() || *x < 0.0) {
            return Ok(None);
        }
        let mu = mu.to_vec();
        mu_total += mu.iter().sum::<f64>();
        let d = s.diagonal(c, &mu);
        if d.iter().any(|x| x.is_nan() || *x <= 0.0) {
            return Ok(None);
        }
        packing += s.packing(&d);
        // L̂: row q is (z_q, 1) normalized, z_q on the columns p of its pairs (p, q).
        let mut lhat = vec![0.0; m * m];
        for p in 0..m {
            lhat[p * m + p] = 1.0;
        }
        for (&(p, q), &x) in s.pairs[c].iter().zip(off) {
            lhat[q * m + p] = x;
        }
        let norms: Vec<f64> = (0..m)
            .map(|q| {
                lhat[q * m..(q + 1) * m]
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>()
                    .sqrt()
            })
            .collect();
        for (q, norm) in norms.iter().enumerate() {
            lhat[q * m..(q + 1) * m].iter_mut().for_each(|x| *x /= norm);
        }
        if lhat.iter().any(|x| !x.is_finite()) {
            return Ok(None);
        }
        let corr: Vec<f64> = s.pairs[c]
            .iter()
            .map(|&(p, q)| dot(&lhat[p * m..(p + 1) * m], &lhat[q * m..(q + 1) * m]))
            .collect();
        let root: Vec<f64> = d.iter().map(|x| x.sqrt()).collect();
        // R_c = diag(√d) L̂, R_c⁻¹ = L̂⁻¹ diag(1/√d).
        factors.push(
            (0..m * m)
                .map(|e| root[e / m] * lhat[e])
                .collect::<Vec<f64>>(),
        );
        let l_inverse = lower_inverse(m, &lhat);
        classes.push(ClassMultipliers {
            inverse: (0..m * m).map(|e| l_inverse[e] / root[e % m]).collect(),
            mu,
            d,
            lhat,
            norms,
            corr,
        });
    }
    if !(packing.is_finite() && packing > 0.0) {
        return Ok(None);
    }
    let r = Blocks {
        structure: s,
        blocks: &factors,
    };
    // K = Rᵀ G R (G symmetric: Rᵀ(GR)).
    let k = r.left_transposed(&r.right(gram));
    let k = MatRef::from_column_major_slice(&k, n, n);
    let eig = k
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::Numerical(format!("eigendecomposition failed: {e:?}")))?;
    let tau: Vec<f64> = (0..n).map(|i| eig.S()[i].max(0.0).sqrt()).collect();
    if tau.iter().any(|x| !x.is_finite()) {
        return Err(Error::Numerical("RᵀGR has non-finite eigenvalues".into()));
    }
    let trace: f64 = tau.iter().sum();
    let inverses: Vec<Vec<f64>> = classes.iter().map(|c| c.inverse.clone()).collect();
    let a = Blocks {
        structure: s,
        blocks: &inverses,
    }
    .left_transposed(&column_major(eig.U()));
    let am = MatRef::from_column_major_slice(&a, n, n);
    // X_cc = 𝒜_c diag(τ) 𝒜_cᵀ per class (row-major m × m).
    let blocks: Vec<Vec<f64>> = s
        .members
        .par_iter()
        .map(|members| {
            let m = members.len();
            let rows = Mat::from_fn(m, n, |p, l| am[(members[p], l)]);
            let scaled = Mat::from_fn(m, n, |p, l| rows[(p, l)] * tau[l]);
            let x = &scaled * rows.transpose();
            (0..m * m).map(|e| x[(e / m, e % m)]).collect()
        })
        .collect();
    let mut gradient = vec![0.0; s.len];
    for (c, mult) in classes.iter().enumerate() {
        let m = s.members[c].len();
        let x = &blocks[c];
        // ⟨X, ∂U/∂θ⟩ − ∂Σμ/∂θ, through Jᵀ (the pairs counted twice: X_pq and X_qp).
        let mut y = vec![0.0; m + s.pairs[c].len()];
        for p in 0..m {
            y[p] = x[p * m + p];
        }
        for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
            y[m + e] = 2.0 * x[p * m + q];
        }
        let at = s.offsets[c];
        let out = &mut gradient[at..at + s.windows[c].len() + s.pairs[c].len()];
        transpose_jacobian(s, c, mult, &y, out);
        for o in out.iter_mut().take(s.windows[c].len()) {
            *o -= 1.0;
        }
    }
    Ok(Some(Point {
        theta: theta.to_vec(),
        classes,
        value: 2.0 * trace - mu_total,
        dual: trace * trace / packing,
        gradient,
        a,
        tau,
    }))
}

/// `δU = J δθ` on class `c`'s entries (the diagonal, then the pairs):
/// `δd_p = Σ_{w∋p} μ_w δθ_w`, `δU_pq = √(d_p d_q)(δC_pq + C_pq (δd_p/d_p + δd_q/d_q)/2)` with
/// `δC_pq = δL̂_p·L̂_q + L̂_p·δL̂_q` and `δL̂_q = (δz_q − L̂_q (L̂_q·δz_q))/‖(z_q, 1)‖`.
fn apply_jacobian(s: &Structure, c: usize, mult: &ClassMultipliers, delta: &[f64]) -> Vec<f64> {
    let m = s.members[c].len();
    let windows = s.windows[c].len();
    let mut du = vec![0.0; m + s.pairs[c].len()];
    for (w, &(first, end)) in s.windows[c].iter().enumerate() {
        let step = delta[w];
        du[first..end].iter_mut().for_each(|x| *x += step);
    }
    let l = &mult.lhat;
    let mut dl = vec![0.0; m * m];
    for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
        dl[q * m + p] = delta[windows + e];
    }
    for q in 0..m {
        let row = &mut dl[q * m..(q + 1) * m];
        let along = dot(row, &l[q * m..(q + 1) * m]);
        for (x, lq) in row.iter_mut().zip(&l[q * m..(q + 1) * m]) {
            *x = (*x - along * lq) / mult.norms[q];
        }
    }
    let d = &mult.d;
    for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
        let dc = dot(&dl[p * m..(p + 1) * m], &l[q * m..(q + 1) * m])
            + dot(&l[p * m..(p + 1) * m], &dl[q * m..(q + 1) * m]);
        let root = (d[p] * d[q]).sqrt();
        du[m + e] = root * (dc + mult.corr[e] * 0.5 * (du[p] / d[p] + du[q] / d[q]));
    }
    du
}

/// `Jᵀ y` for `y` on class `c`'s entries (see [`apply_jacobian`]), into `out`.
fn transpose_jacobian(
    s: &Structure,
    c: usize,
    mult: &ClassMultipliers,
    y: &[f64],
    out: &mut [f64],
) {
    let m = s.members[c].len();
    let windows = s.windows[c].len();
    let d = &mult.d;
    let l = &mult.lhat;
    let mut z = y[..m].to_vec();
    let mut g = vec![0.0; m * m];
    for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
        let a = y[m + e] * (d[p] * d[q]).sqrt();
        let share = a * mult.corr[e] * 0.5;
        z[p] += share / d[p];
        z[q] += share / d[q];
        for j in 0..m {
            g[p * m + j] += a * l[q * m + j];
            g[q * m + j] += a * l[p * m + j];
        }
    }
    for q in 0..m {
        let along = dot(&g[q * m..(q + 1) * m], &l[q * m..(q + 1) * m]);
        for j in 0..m {
            g[q * m + j] = (g[q * m + j] - along * l[q * m + j]) / mult.norms[q];
        }
    }
    for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
        out[windows + e] = g[q * m + p];
    }
    for (w, &(first, end)) in s.windows[c].iter().enumerate() {
        out[w] = z[first..end].iter().sum::<f64>();
    }
}

/// The Hessian of `g` in `θ` (Gauss–Newton: `Jᵀ ∇²g J`, negated so it is positive definite)
/// applied to `δθ`, by the two products of the module docs.
fn hessian_product(s: &Structure, point: &Point, hadamard: &Mat<f64>, delta: &[f64]) -> Vec<f64> {
    let n = s.n;
    let a = MatRef::from_column_major_slice(&point.a, n, n);
    // δU (block diagonal by class) as dense class blocks.
    let du: Vec<Vec<f64>> = (0..s.classes())
        .map(|c| {
            let at = s.offsets[c];
            let len = s.windows[c].len() + s.pairs[c].len();
            let entries = apply_jacobian(s, c, &point.classes[c], &delta[at..at + len]);
            let m = s.members[c].len();
            let mut block = vec![0.0; m * m];
            for p in 0..m {
                block[p * m + p] = entries[p];
            }
            for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
                block[p * m + q] = entries[m + e];
                block[q * m + p] = entries[m + e];
            }
            block
        })
        .collect();
    // Z = δU 𝒜 (rows by class), then Ẽ = 𝒜ᵀ Z, W = Hτ ∘ Ẽ, V = 𝒜 W.
    let mut z = Mat::<f64>::zeros(n, n);
    z.par_row_chunks_mut(1)
        .enumerate()
        .for_each(|(i, mut row)| {
            let (c, p) = s.slot[i];
            let members = &s.members[c];
            let m = members.len();
            for q in 0..m {
                let w = du[c][p * m + q];
                if w != 0.0 {
                    for l in 0..n {
                        row[(0, l)] += w * a[(members[q], l)];
                    }
                }
            }
        });
    let e = a.transpose() * &z;
    let w = Mat::from_fn(n, n, |i, j| hadamard[(i, j)] * e[(i, j)]);
    let v = a * &w;
    let mut out = vec![0.0; s.len];
    let pieces: Vec<(usize, Vec<f64>)> = (0..s.classes())
        .into_par_iter()
        .map(|c| {
            let members = &s.members[c];
            let m = members.len();
            let rows_v = Mat::from_fn(m, n, |p, l| v[(members[p], l)]);
            let rows_a = Mat::from_fn(m, n, |p, l| a[(members[p], l)]);
            let dx = &rows_v * rows_a.transpose();
            // −∇²g δU = −δX = Hτ-weighted; weights 1 (diagonal) and 2 (pairs) for Jᵀ.
            let mut y = vec![0.0; m + s.pairs[c].len()];
            for p in 0..m {
                y[p] = dx[(p, p)];
            }
            for (e, &(p, q)) in s.pairs[c].iter().enumerate() {
                y[m + e] = dx[(p, q)] + dx[(q, p)];
            }
            let mut piece = vec![0.0; s.windows[c].len() + s.pairs[c].len()];
            transpose_jacobian(s, c, &point.classes[c], &y, &mut piece);
            (s.offsets[c], piece)
        })
        .collect();
    for (at, piece) in pieces {
        out[at..at + piece.len()].copy_from_slice(&piece);
    }
    out
}

/// Nodes `(s_k, w_k)` of `1/t ≈ Σ_k w_k e^{−s_k t}` for `t ∈ [lo, hi]`: the trapezoidal rule on
/// `1/t = ∫ e^{u − e^u t} du` (`s = e^u`), whose integrand is analytic in a strip, so the error
/// falls exponentially as the spacing shrinks (about 1e-3 relative at spacing 1.5).
fn reciprocal_nodes(lo: f64, hi: f64, spacing: f64) -> Vec<(f64, f64)> {
    let (first, last) = (-hi.ln() - 8.0, -lo.ln() + 3.0);
    let count = ((last - first) / spacing).ceil() as usize + 1;
    (0..count)
        .map(|k| {
            let u = first + k as f64 * spacing;
            (u.exp(), spacing * u.exp())
        })
        .collect()
}

/// The preconditioner: per class, the Cholesky factor of its block of the (negated)
/// Gauss–Newton Hessian, or that block's diagonal for classes with more than [`BLOCK_LIMIT`]
/// unknowns. The block in `U`'s entries is
/// `−∂X_o/∂U_i = Σ_k w_k (M_k[a,r] M_k[b,t] + M_k[a,t] M_k[b,r])` (`o = (a,b)`, `i = (r,t)`,
/// one term when `r = t`) with `M_k = 𝒜_c diag(τ ∘ e^{−s_k τ}) 𝒜_cᵀ`, from the quadrature of
/// `Hτ_ij = τ_iτ_j/(τ_i + τ_j)`.
enum Preconditioner {
    Block(Vec<f64>),
    Diagonal(Vec<f64>),
}

fn preconditioner(s: &Structure, point: &Point) -> Vec<Preconditioner> {
    let n = s.n;
    let tau = &point.tau;
    let top = tau[n - 1];
    let nodes = reciprocal_nodes(
        2.0 * (top * 1e-8).max(tau[0]),
        2.0 * top,
        QUADRATURE_SPACING,
    );
    let f: Vec<Vec<f64>> = nodes
        .iter()
        .map(|&(sk, _)| tau.iter().map(|&t| t * (-sk * t).exp()).collect())
        .collect();
    let a = MatRef::from_column_major_slice(&point.a, n, n);
    (0..s.classes())
        .into_par_iter()
        .map(|c| {
            let members = &s.members[c];
            let m = members.len();
            let pairs = &s.pairs[c];
            let unknowns = s.windows[c].len() + pairs.len();
            let rows = Mat::from_fn(m, n, |p, l| a[(members[p], l)]);
            let mk: Vec<Mat<f64>> = f
                .iter()
                .map(|fk| {
                    let scaled = Mat::from_fn(m, n, |p, l| rows[(p, l)] * fk[l]);
                    &scaled * rows.transpose()
                })
                .collect();
            let entries: Vec<(usize, usize)> = (0..m)
                .map(|p| (p, p))
                .chain(pairs.iter().copied())
                .collect();
            let response = |(a, b): (usize, usize), (r, t): (usize, usize)| -> f64 {
                nodes
                    .iter()
                    .zip(&mk)
                    .map(|((_, w), mk)| {
                        w * if r == t {
                            mk[(a, r)] * mk[(b, r)]
                        } else {
                            mk[(a, r)] * mk[(b, t)] + mk[(a, t)] * mk[(b, r)]
                        }
                    })
                    .sum()
            };
            let weight = |o: usize| if o < m { 1.0 } else { 2.0 };
            let mult = &point.classes[c];
            // The columns of J (θ → entries), sparse.
            let columns: Vec<Vec<(usize, f64)>> = (0..unknowns)
                .map(|j| {
                    let mut unit = vec![0.0; unknowns];
                    unit[j] = 1.0;
                    apply_jacobian(s, c, mult, &unit)
                        .into_iter()
                        .enumerate()
                        .filter(|(_, v)| *v != 0.0)
                        .collect()
                })
                .collect();
            let entry = |i: usize, j: usize| -> f64 {
                let mut sum = 0.0;
                for &(o, jo) in &columns[i] {
                    for &(q, jq) in &columns[j] {
                        sum += jo * weight(o) * response(entries[o], entries[q]) * jq;
                    }
                }
                sum
            };
            if unknowns <= BLOCK_LIMIT {
                // Jᵀ W D J with D the entries' response matrix and J dense (e × unknowns).
                let e = entries.len();
                let d = Mat::from_fn(e, e, |o, q| weight(o) * response(entries[o], entries[q]));
                let mut jac = Mat::<f64>::zeros(e, unknowns);
                for (j, column) in columns.iter().enumerate() {
                    for &(o, v) in column {
                        jac[(o, j)] = v;
                    }
                }
                let product = jac.transpose() * (&d * &jac);
                let mut block: Vec<f64> = (0..unknowns * unknowns)
                    .map(|x| {
                        let (i, j) = (x / unknowns, x % unknowns);
                        0.5 * (product[(i, j)] + product[(j, i)])
                    })
                    .collect();
                // A tiny ridge keeps inactive windows (μ_w → 0, rows → 0) factorable.
                let trace: f64 = (0..unknowns).map(|i| block[i * unknowns + i]).sum();
                let ridge = 1e-12 * trace / unknowns as f64 + f64::MIN_POSITIVE;
                for i in 0..unknowns {
                    block[i * unknowns + i] += ridge;
                }
                if let Some(l) = cholesky(unknowns, &block) {
                    return Preconditioner::Block(l);
                }
            }
            Preconditioner::Diagonal(
                (0..unknowns)
                    .map(|i| entry(i, i).max(f64::MIN_POSITIVE))
                    .collect(),
            )
        })
        .collect()
}

fn precondition(s: &Structure, blocks: &[Preconditioner], r: &[f64]) -> Vec<f64> {
    let mut z = r.to_vec();
    for (c, block) in blocks.iter().enumerate() {
        let at = s.offsets[c];
        let len = s.windows[c].len() + s.pairs[c].len();
        let part = &mut z[at..at + len];
        match block {
            Preconditioner::Block(l) => cholesky_solve(len, l, part),
            Preconditioner::Diagonal(d) => part.iter_mut().zip(d).for_each(|(x, d)| *x /= d),
        }
    }
    z
}

/// The Newton direction: preconditioned conjugate gradients on `−Jᵀ∇²gJ δ = ∇_θ g` to a
/// relative residual `tolerance`, with the components in `fixed` prescribed (the others solve
/// the system with those moves given).
fn newton_direction(
    s: &Structure,
    point: &Point,
    hadamard: &Mat<f64>,
    blocks: &[Preconditioner],
    fixed: &[Option<f64>],
    tolerance: f64,
) -> Vec<f64> {
    let mask = |mut v: Vec<f64>| {
        v.iter_mut().zip(fixed).for_each(|(x, f)| {
            if f.is_some() {
                *x = 0.0;
            }
        });
        v
    };
    let mut x: Vec<f64> = fixed.iter().map(|f| f.unwrap_or(0.0)).collect();
    let mut r = point.gradient.clone();
    if fixed.iter().any(Option::is_some) {
        let hx = hessian_product(s, point, hadamard, &x);
        r.iter_mut().zip(&hx).for_each(|(r, h)| *r -= h);
    }
    let mut r = mask(r);
    let norm = dot(&r, &r).sqrt();
    let mut z = mask(precondition(s, blocks, &r));
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    for _ in 0..CG_ITERATIONS {
        if dot(&r, &r).sqrt() <= tolerance * norm {
            break;
        }
        let hp = mask(hessian_product(s, point, hadamard, &p));
        let curvature = dot(&p, &hp);
        if !(curvature.is_finite() && curvature > 0.0) {
            break;
        }
        let alpha = rz / curvature;
        x.iter_mut().zip(&p).for_each(|(x, p)| *x += alpha * p);
        r.iter_mut().zip(&hp).for_each(|(r, h)| *r -= alpha * h);
        z = mask(precondition(s, blocks, &r));
        let next = dot(&r, &z);
        let beta = next / rz;
        rz = next;
        p.iter_mut().zip(&z).for_each(|(p, z)| *p = z + beta * *p);
    }
    x
}

/// The step of one iteration: the Newton direction with every `μ_w` moved by at most the
/// factor `e^{±MAX_LOG_STEP}`; a clipped component is then prescribed and the others solved again, so the
/// direction stays consistent (a window whose multiplier the optimum puts at 0 moves down by
/// `e^{MAX_LOG_STEP}` per iteration while the rest converges).
fn step_direction(
    s: &Structure,
    point: &Point,
    descending: &mut [bool],
    tolerance: f64,
) -> Vec<f64> {
    let n = s.n;
    let tau = &point.tau;
    let hadamard = Mat::from_fn(n, n, |i, j| {
        let sum = tau[i] + tau[j];
        if sum > 0.0 {
            tau[i] * tau[j] / sum
        } else {
            0.0
        }
    });
    let blocks = preconditioner(s, point);
    // Windows that went down by the largest ratio last time and still want to are prescribed
    // from the start.
    let (low, high) = ((-MAX_LOG_STEP).exp(), MAX_LOG_STEP.exp());
    let mut fixed: Vec<Option<f64>> = (0..s.len)
        .map(|j| {
            (descending[j] && !s.needed[j] && point.gradient[j] < 0.0)
                .then(|| point.theta[j] * (low - 1.0))
        })
        .collect();
    let mut direction = newton_direction(s, point, &hadamard, &blocks, &fixed, tolerance);
    for _ in 0..3 {
        let mut clipped = false;
        for c in 0..s.classes() {
            let at = s.offsets[c];
            for j in at..at + s.windows[c].len() {
                let mu = point.theta[j];
                let ratio = (mu + direction[j]) / mu;
                if fixed[j].is_none() && !(low..=high).contains(&ratio) {
                    fixed[j] = Some(mu * (ratio.clamp(low, high) - 1.0));
                    clipped = true;
                }
            }
        }
        if !clipped {
            break;
        }
        direction = newton_direction(s, point, &hadamard, &blocks, &fixed, tolerance);
    }
    for j in 0..s.len {
        if let Some(f) = fixed[j] {
            direction[j] = f;
        }
        let mu = point.theta[j];
        descending[j] = s.is_window(j) && (mu + direction[j]) <= mu * low * (1.0 + 1e-12);
    }
    for c in 0..s.classes() {
        let windows = s.offsets[c]..s.offsets[c] + s.windows[c].len();
        for (step, &mu) in direction[windows.clone()]
            .iter_mut()
            .zip(&point.theta[windows])
        {
            *step = step.clamp(mu * (low - 1.0), mu * (high - 1.0));
        }
    }
    if direction.iter().all(|v| v.is_finite()) && dot(&direction, &point.gradient) > 0.0 {
        direction
    } else {
        precondition(s, &blocks, &point.gradient)
    }
}

/// The feasible point of `point` (module docs) and its loss: `X(U)` with the constrained
/// entries `E` zeroed and every class scaled so its largest window sums to 1; `None` if it could
/// not be made positive definite.
///
/// Far from the optimum, zeroing `E` can leave an indefinite matrix. Then each class's diagonal
/// is lifted by `λ_c · diag(X_c)`, `λ_c` the largest eigenvalue of `D_c^{-1/2} E_c D_c^{-1/2}`
/// (`D_c` the diagonal of the class's block): `X(U) − E + Λ = X(U) + (Λ − E)` with `Λ − E ⪰ 0`
/// block by block, so the lifted point is positive definite, and it tends to the zeroed one as
/// `E → 0`.
fn primal(a_workload: MatRef<'_, f64>, s: &Structure, point: &Point) -> Option<(f64, Mat<f64>)> {
    let n = s.n;
    let a = MatRef::from_column_major_slice(&point.a, n, n);
    let half = Mat::from_fn(n, n, |i, l| a[(i, l)] * point.tau[l].sqrt());
    let mut x = &half * half.transpose();
    drop(half);
    let mut lift = vec![0.0; s.classes()];
    for (c, members) in s.members.iter().enumerate() {
        let m = members.len();
        if !s.pairs[c].is_empty() {
            let root: Vec<f64> = members.iter().map(|&i| x[(i, i)].sqrt()).collect();
            let mut e = Mat::<f64>::zeros(m, m);
            for &(p, q) in &s.pairs[c] {
                let v = 0.5 * (x[(members[p], members[q])] + x[(members[q], members[p])])
                    / (root[p] * root[q]);
                e[(p, q)] = v;
                e[(q, p)] = v;
            }
            let largest = e.self_adjoint_eigenvalues(Side::Lower).ok()?;
            lift[c] = largest.last().copied().unwrap_or(0.0).max(0.0);
        }
        for &(p, q) in &s.pairs[c] {
            x[(members[p], members[q])] = 0.0;
            x[(members[q], members[p])] = 0.0;
        }
    }
    let loss_of = |lifted: bool| -> Option<(f64, Mat<f64>)> {
        let mut scale = vec![0.0; n];
        let diagonal = |i: usize| {
            let (c, _) = s.slot[i];
            x[(i, i)] * if lifted { 1.0 + lift[c] } else { 1.0 }
        };
        for (c, members) in s.members.iter().enumerate() {
            let largest = s.windows[c]
                .iter()
                .map(|&(first, end)| (first..end).map(|p| diagonal(members[p])).sum::<f64>())
                .fold(0.0, f64::max);
            if !(largest.is_finite() && largest > 0.0) {
                return None;
            }
            for &i in members {
                scale[i] = 1.0 / largest.sqrt();
            }
        }
        let x = Mat::from_fn(n, n, |i, j| {
            let entry = if i == j {
                diagonal(i)
            } else {
                0.5 * (x[(i, j)] + x[(j, i)])
            };
            entry * scale[i] * scale[j]
        });
        let llt = x.llt(Side::Lower).ok()?;
        let mut y = a_workload.transpose().to_owned();
        llt.L().solve_lower_triangular_in_place(y.as_mut());
        let loss = y.squared_norm_l2();
        (loss.is_finite() && loss > 0.0).then_some((loss, x))
    };
    loss_of(false).or_else(|| loss_of(true))
}

/// Minimizes `tr(AᵀA X⁻¹)` under fixed epoch order `(k, b)` = `(epochs, separation)` over
/// factorizations with orthogonal pattern columns (module docs) by Newton's method on the dual,
/// until the certified relative gap is at most `options.relative_gap`. `progress` is called
/// once per iteration. The returned `x` has sensitivity exactly 1 under `(k, b)` (its largest
/// window sums to 1), and `dual_bound` bounds the loss of every factorization of that class
/// under `(k, b)`, for any `k`.
pub fn optimize_multi_epoch(
    a: MatRef<'_, f64>,
    epochs: usize,
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
    if separation == 0 || epochs == 0 {
        return Err(Error::InvalidArgument(format!(
            "fixed epoch order needs k ≥ 1 and b ≥ 1, got k = {epochs}, b = {separation}"
        )));
    }
    if options.relative_gap.is_nan() || options.relative_gap <= 0.0 {
        return Err(Error::InvalidArgument(
            "the duality-gap target must be positive".into(),
        ));
    }
    if (0..n).any(|j| (0..n).any(|i| !a[(i, j)].is_finite())) {
        return Err(Error::InvalidWorkload(
            "the workload has non-finite entries".into(),
        ));
    }
    let gram = column_major((a.transpose() * a).as_ref());
    let s = Structure::new(n, epochs, separation);
    let start = |theta: &[f64]| {
        evaluate(&gram, &s, theta)?
            .ok_or_else(|| Error::Numerical("the starting multipliers are degenerate".into()))
    };
    // U = I, then the best scale αU (α = (tr T/Σμ)², exact: T(αU) = √α T(U)).
    let mut ones = vec![0.0; s.len];
    for c in 0..s.classes() {
        let at = s.offsets[c];
        ones[at..at + s.windows[c].len()].fill(1.0);
    }
    let mut point = start(&ones)?;
    let mu_total: f64 = point.classes.iter().map(|c| c.mu.iter().sum::<f64>()).sum();
    let scale = ((point.value + mu_total) / (2.0 * mu_total)).powi(2);
    let mut theta = vec![0.0; s.len];
    for c in 0..s.classes() {
        let at = s.offsets[c];
        theta[at..at + s.windows[c].len()].fill(scale);
    }
    point = start(&theta)?;
    let mut best_dual = f64::NEG_INFINITY;
    // The best feasible point: its loss, X and the diagonal `d` of the `U` it came from.
    let mut best: Option<(f64, Mat<f64>, Vec<f64>)> = None;
    let mut gap = f64::INFINITY;
    let mut descending = vec![false; s.len];
    for iteration in 1..=options.max_iterations {
        crate::interrupt::check()?;
        best_dual = best_dual.max(point.dual);
        if let Some((loss, x)) = primal(a, &s, &point) {
            if best.as_ref().is_none_or(|(l, _, _)| loss < *l) {
                let v = s.slot.iter().map(|&(c, p)| point.classes[c].d[p]).collect();
                best = Some((loss, x, v));
            }
        }
        let primal_value = best.as_ref().map_or(f64::INFINITY, |(l, _, _)| *l);
        gap = if primal_value.is_finite() {
            (primal_value - best_dual) / primal_value
        } else {
            f64::INFINITY
        };
        progress(&Progress {
            iteration,
            primal: primal_value,
            dual: best_dual,
            relative_gap: gap,
        });
        if gap <= options.relative_gap {
            if let Some((loss, x, v)) = best {
                return Ok(Optimum {
                    x,
                    v,
                    loss,
                    dual_bound: best_dual,
                    relative_gap: gap,
                    iterations: iteration,
                });
            }
        }
        let tolerance = if gap.is_finite() {
            gap.clamp(1e-3, 0.1)
        } else {
            0.1
        };
        let direction = step_direction(&s, &point, &mut descending, tolerance);
        let slope = dot(&direction, &point.gradient);
        let mut step = 1.0;
        // Armijo on g.
        let mut accepted = None;
        while step > 1e-10 {
            let trial: Vec<f64> = point
                .theta
                .iter()
                .zip(&direction)
                .map(|(t, d)| t + step * d)
                .collect();
            if let Some(next) = evaluate(&gram, &s, &trial)? {
                // Near the optimum the rise is below the rounding of g: accept a step that
                // does not lower g beyond it.
                let noise = ROUNDING * point.value.abs();
                let enough = if step * slope < noise {
                    next.value >= point.value - noise
                } else {
                    next.value >= point.value + 1e-4 * step * slope
                };
                if enough {
                    accepted = Some(next);
                    break;
                }
            }
            step *= 0.5;
        }
        match accepted {
            Some(next) => point = next,
            None => {
                return Err(Error::NotConverged {
                    iterations: iteration,
                    relative_gap: gap,
                });
            }
        }
    }
    Err(Error::NotConverged {
        iterations: options.max_iterations,
        relative_gap: gap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::single::{OptimizeOptions, optimize_single_participation};
    use crate::privacy::participation::{Participation, brute_force_sensitivity};
    use crate::workload::{Schedule, Workload};

    /// A small deterministic generator (xorshift64*), uniform in `[0, 1)`.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    fn momentum_with_cooldown(n: usize, cooldown: usize) -> Mat<f64> {
        Workload::Momentum {
            momentum: 0.95,
            schedule: Schedule::Cooldown {
                steps: cooldown,
                final_rate: 0.05,
            },
        }
        .matrix(n)
        .unwrap()
    }

    /// `‖A C⁻¹‖_F² · sens²` of `C` with `CᵀC = X`, the sensitivity by brute force over the
    /// patterns of `(k, b)`: the loss of `X` computed without the optimizer's structure.
    fn brute_force_loss(a: MatRef<'_, f64>, x: MatRef<'_, f64>, k: usize, b: usize) -> f64 {
        let c = x.llt(Side::Lower).unwrap().L().transpose().to_owned();
        let p = Participation::fixed_epoch_order(k, b).unwrap();
        let sens = brute_force_sensitivity(c.as_ref(), &p).unwrap();
        let mut y = a.transpose().to_owned();
        c.transpose().solve_lower_triangular_in_place(y.as_mut());
        y.squared_norm_l2() * sens * sens
    }

    /// The dynamic program of `H(d)` against every position set whose members are at least
    /// `k` apart.
    #[test]
    fn packing_is_the_best_set_at_least_k_apart() {
        let mut random = Random(7);
        for (n, k, b) in [
            (9, 1, 1),
            (9, 2, 1),
            (10, 3, 1),
            (11, 4, 1),
            (7, 7, 1),
            (8, 3, 2),
        ] {
            let s = Structure::new(n, k, b);
            for c in 0..s.classes() {
                let m = s.members[c].len();
                for _ in 0..20 {
                    let d: Vec<f64> = (0..m).map(|_| random.next()).collect();
                    let mut best: f64 = 0.0;
                    for set in 0u32..1 << m {
                        let chosen: Vec<usize> = (0..m).filter(|p| set >> p & 1 == 1).collect();
                        if chosen.windows(2).all(|w| w[1] - w[0] >= k) {
                            best = best.max(chosen.iter().map(|&p| d[p]).sum());
                        }
                    }
                    assert!((s.packing(&d) - best).abs() <= 1e-12, "n {n} k {k}: {d:?}");
                }
            }
        }
    }

    /// A random `θ` of `(k, b)` over `n` steps: multipliers in `[0.5, 1.5)`, factor entries in
    /// `[−0.3, 0.3)`.
    fn random_theta(s: &Structure, random: &mut Random) -> Vec<f64> {
        (0..s.len)
            .map(|j| {
                if s.is_window(j) {
                    0.5 + random.next()
                } else {
                    0.6 * random.next() - 0.3
                }
            })
            .collect()
    }

    /// `∇_θ g` against central differences of `g`, and [`transpose_jacobian`] is the adjoint of
    /// [`apply_jacobian`] (pairs weighted twice, as `U` holds them twice).
    #[test]
    fn gradient_and_jacobian_match_finite_differences() {
        let (n, k, b) = (14, 3, 4);
        let a = momentum_with_cooldown(n, 5);
        let gram = column_major((a.transpose() * &a).as_ref());
        let s = Structure::new(n, k, b);
        let mut random = Random(11);
        let theta = random_theta(&s, &mut random);
        let point = evaluate(&gram, &s, &theta).unwrap().unwrap();
        let value = |t: &[f64]| evaluate(&gram, &s, t).unwrap().unwrap().value;
        for j in 0..s.len {
            let h = 1e-6;
            let (mut plus, mut minus) = (theta.clone(), theta.clone());
            plus[j] += h;
            minus[j] -= h;
            let fd = (value(&plus) - value(&minus)) / (2.0 * h);
            assert!(
                (fd - point.gradient[j]).abs() <= 1e-5 * (1.0 + fd.abs()),
                "slot {j}: finite difference {fd}, gradient {}",
                point.gradient[j]
            );
        }
        for c in 0..s.classes() {
            let m = s.members[c].len();
            let unknowns = s.windows[c].len() + s.pairs[c].len();
            let delta: Vec<f64> = (0..unknowns).map(|_| random.next() - 0.5).collect();
            let y: Vec<f64> = (0..m + s.pairs[c].len())
                .map(|_| random.next() - 0.5)
                .collect();
            let du = apply_jacobian(&s, c, &point.classes[c], &delta);
            let mut back = vec![0.0; unknowns];
            transpose_jacobian(&s, c, &point.classes[c], &y, &mut back);
            let forward = dot(&du[..m], &y[..m]) + dot(&du[m..], &y[m..]);
            assert!((forward - dot(&delta, &back)).abs() <= 1e-12 * (1.0 + forward.abs()));
        }
    }

    /// The dual bound is a lower bound (a privacy-adjacent claim: reports call the gap
    /// certified): the returned point, points near it and random points of the class, each
    /// with its sensitivity by brute force over the patterns of `(k, b)`, all have a loss at
    /// least the bound — for `k < ⌈n/b⌉` too, where the optimum of `k = ⌈n/b⌉` is feasible but
    /// strictly worse.
    #[test]
    fn dual_bound_is_below_every_loss_the_class_can_reach() {
        let mut random = Random(3);
        for (n, k, b, momentum) in [
            (24, 3, 8, false),
            (24, 2, 6, false),
            (24, 2, 6, true),
            (30, 3, 5, true),
        ] {
            let a = if momentum {
                momentum_with_cooldown(n, n / 4)
            } else {
                Workload::PrefixSum.matrix(n).unwrap()
            };
            let options = MultiEpochOptions {
                relative_gap: 1e-8,
                ..Default::default()
            };
            let o = optimize_multi_epoch(a.as_ref(), k, b, &options, &mut |_| {}).unwrap();
            let case = format!("n {n} (k, b) = ({k}, {b}), momentum {momentum}");
            assert!(
                o.dual_bound <= o.loss && o.relative_gap <= 1e-8,
                "{case}: {o:?}"
            );
            let own = brute_force_loss(a.as_ref(), o.x.as_ref(), k, b);
            assert!(
                (own - o.loss).abs() <= 1e-9 * o.loss,
                "{case}: {own} vs {}",
                o.loss
            );
            // Points of the class: X's free entries moved, the constrained pairs kept at 0.
            let s = Structure::new(n, k, b);
            let constrained = |i: usize, j: usize| {
                let ((ci, pi), (cj, pj)) = (s.slot[i], s.slot[j]);
                i != j && ci == cj && pi.abs_diff(pj) < k
            };
            for size in [1e-4, 1e-3, 1e-2, 1e-1] {
                for _ in 0..10 {
                    let mut x = o.x.clone();
                    for j in 0..n {
                        for i in j..n {
                            if !constrained(i, j) {
                                let e =
                                    size * (random.next() - 0.5) * (x[(i, i)] * x[(j, j)]).sqrt();
                                x[(i, j)] += e;
                                if i != j {
                                    x[(j, i)] += e;
                                }
                            }
                        }
                    }
                    if x.llt(Side::Lower).is_ok() {
                        let loss = brute_force_loss(a.as_ref(), x.as_ref(), k, b);
                        assert!(
                            loss >= o.dual_bound,
                            "{case}: {loss} < bound {}",
                            o.dual_bound
                        );
                    }
                }
            }
            // Random points of the class: diagonally dominant.
            for _ in 0..20 {
                let mut x = Mat::<f64>::zeros(n, n);
                for j in 0..n {
                    for i in j + 1..n {
                        if !constrained(i, j) {
                            let e = random.next() - 0.5;
                            x[(i, j)] = e;
                            x[(j, i)] = e;
                        }
                    }
                }
                for i in 0..n {
                    x[(i, i)] = (0..n).map(|j| x[(i, j)].abs()).sum::<f64>() + random.next();
                }
                let loss = brute_force_loss(a.as_ref(), x.as_ref(), k, b);
                assert!(
                    loss >= o.dual_bound,
                    "{case}: {loss} < bound {}",
                    o.dual_bound
                );
            }
            // The optimum for a record in every member of its class is feasible for (k, b)
            // and no better than the bound; it is strictly worse when k < ⌈n/b⌉.
            let every = n.div_ceil(b);
            let all = optimize_multi_epoch(a.as_ref(), every, b, &options, &mut |_| {}).unwrap();
            let loss = brute_force_loss(a.as_ref(), all.x.as_ref(), k, b);
            assert!(
                loss >= o.dual_bound,
                "{case}: {loss} < bound {}",
                o.dual_bound
            );
            if k < every {
                assert!(o.loss < 0.99 * loss, "{case}: {} against {loss}", o.loss);
            }
        }
    }

    /// Every iterate, however far from the optimum, gives a feasible point (the constrained
    /// entries zero, the largest window summing to 1) whose loss, by brute force, is the one
    /// reported and at least the iterate's dual bound.
    #[test]
    fn every_iterate_gives_a_feasible_primal_point() {
        let mut random = Random(5);
        for (n, k, b) in [(24, 2, 6), (24, 3, 8), (20, 4, 5)] {
            let a = momentum_with_cooldown(n, n / 3);
            let gram = column_major((a.transpose() * &a).as_ref());
            let s = Structure::new(n, k, b);
            for _ in 0..5 {
                let theta: Vec<f64> = random_theta(&s, &mut random)
                    .iter()
                    .enumerate()
                    .map(|(j, t)| if s.is_window(j) { *t } else { 3.0 * t })
                    .collect();
                let point = evaluate(&gram, &s, &theta).unwrap().unwrap();
                let (loss, x) = primal(a.as_ref(), &s, &point).unwrap();
                for (c, members) in s.members.iter().enumerate() {
                    for &(p, q) in &s.pairs[c] {
                        assert_eq!(x[(members[p], members[q])], 0.0);
                    }
                }
                let own = brute_force_loss(a.as_ref(), x.as_ref(), k, b);
                assert!((own - loss).abs() <= 1e-9 * loss, "{own} against {loss}");
                assert!(loss >= point.dual, "{loss} < bound {}", point.dual);
            }
        }
    }

    /// With one participation (`k = 1`) the problem is single participation, solved by an
    /// independent method (003's fixed point): the two optima agree within their gaps.
    #[test]
    fn one_participation_agrees_with_the_single_participation_optimum() {
        for (n, b) in [(20, 5), (16, 16)] {
            let a = momentum_with_cooldown(n, 6);
            let me = optimize_multi_epoch(
                a.as_ref(),
                1,
                b,
                &MultiEpochOptions {
                    relative_gap: 1e-8,
                    ..Default::default()
                },
                &mut |_| {},
            )
            .unwrap();
            let single = optimize_single_participation(
                a.as_ref(),
                &OptimizeOptions {
                    relative_gap: 1e-8,
                    ..Default::default()
                },
                &mut |_| {},
            )
            .unwrap();
            let tolerance = 2e-8 * single.loss;
            assert!(
                (me.loss - single.loss).abs() <= tolerance,
                "n {n}, b {b}: {} against {}",
                me.loss,
                single.loss
            );
            assert!(me.dual_bound <= single.loss && single.dual_bound <= me.loss);
        }
    }

    /// The momentum workload with a cooldown, whose multipliers span orders of magnitude,
    /// converges in few Newton iterations (a fixed-point iteration stalled here).
    #[test]
    fn momentum_with_cooldown_converges_in_few_iterations() {
        let a = momentum_with_cooldown(64, 16);
        let o = optimize_multi_epoch(
            a.as_ref(),
            4,
            16,
            &MultiEpochOptions {
                relative_gap: 1e-6,
                max_iterations: 30,
            },
            &mut |_| {},
        )
        .unwrap();
        assert!(o.relative_gap <= 1e-6, "{o:?}");
    }

    /// Bad arguments are refused with the option and the value.
    #[test]
    fn refuses_bad_arguments() {
        let a = Workload::PrefixSum.matrix(8).unwrap();
        let options = MultiEpochOptions::default();
        for (k, b) in [(0, 4), (2, 0)] {
            let e = optimize_multi_epoch(a.as_ref(), k, b, &options, &mut |_| {}).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        let negative = MultiEpochOptions {
            relative_gap: -1.0,
            ..Default::default()
        };
        assert!(optimize_multi_epoch(a.as_ref(), 2, 4, &negative, &mut |_| {}).is_err());
    }
}
