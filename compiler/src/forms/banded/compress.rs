//! Banded-plus-low-rank compression of a lower-triangular decoder (Denisov et al. 2022, App. H).
//!
//! `B̂ = (L Rᵀ) ⊙ U⁽ʰ⁾ + D⁽ʰ⁾`: the `h` diagonals `0 ≤ i − j < h` of `B` are kept exactly, and
//! the entries with `i − j ≥ h` are approximated by a rank-`r` product, fitted by alternating
//! least squares on those entries only (a matrix-completion problem) with the paper's ridge
//! penalty `λ(‖L‖_F² + ‖R‖_F²)`, `λ = 1e-6`, from a truncated-SVD start (randomized subspace
//! iteration). A sweep costs `O(n²·r)` over contiguous columns, and its objective `O(n·r²)` from
//! the products the sweep already formed, so no step is `O(n³)`. The runtime replays `B̂ z` with
//! `(h + r)·d` work per step (Algorithm 3); [`BandedLowRank::solve_in_place`] is the same
//! recursion, which solves with `B̂` in `O(n·(h + r))` per column.

use faer::{Mat, MatRef};

use crate::optimize::linalg::cholesky_solve;
use crate::{Error, Result};

/// Options of the low-rank fit.
#[derive(Debug, Clone)]
pub struct CompressOptions {
    /// Ridge penalty on `‖L‖_F² + ‖R‖_F²`.
    pub ridge: f64,
    /// Maximum alternating sweeps. The refinement on the shipped loss follows, so the fit need
    /// not converge: at n = 1024, (5, 5), 100 sweeps then the refinement shipped √L = 94.948, 1000
    /// sweeps 94.935, for a tenth of the fit's time (measured before the rescaling step of
    /// [`crate::forms::banded::rescale()`] followed the refinement).
    pub max_sweeps: usize,
    /// Stop when a sweep lowers the objective by less than this fraction.
    pub tolerance: f64,
    /// L-BFGS iterations on the shipped loss after the fit
    /// ([`refine_for_shipped_loss`](crate::forms::banded::refine_for_shipped_loss), used by
    /// [`compile`](crate::forms::banded::compile) under every schema); `0` ships the plain ALS fit.
    pub refine_iterations: usize,
}

impl Default for CompressOptions {
    fn default() -> Self {
        Self {
            ridge: 1e-6,
            max_sweeps: 100,
            tolerance: 1e-10,
            refine_iterations: 50,
        }
    }
}

/// A banded-plus-low-rank decoder, in the layout of the blob's tables (row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct BandedLowRank {
    /// `n`.
    pub steps: usize,
    /// `h ≥ 1`.
    pub band: usize,
    /// `r`.
    pub rank: usize,
    /// `n × h`: `diagonals[i·h + k] = B̂[i, i−k]`, zero where `k > i`.
    pub diagonals: Vec<f64>,
    /// `L`, `n × r`.
    pub left: Vec<f64>,
    /// `R`, `n × r`.
    pub right: Vec<f64>,
}

impl BandedLowRank {
    /// `B̂` as a dense lower-triangular matrix.
    pub fn to_dense(&self) -> Mat<f64> {
        let (h, r) = (self.band, self.rank);
        Mat::from_fn(self.steps, self.steps, |i, j| match i.checked_sub(j) {
            Some(k) if k < h => self.diagonals[i * h + k],
            Some(_) => (0..r)
                .map(|q| self.left[i * r + q] * self.right[j * r + q])
                .sum(),
            None => 0.0,
        })
    }

    /// `factor · B̂` (scales `D` and `L`).
    pub fn scaled(&self, factor: f64) -> Self {
        Self {
            diagonals: self.diagonals.iter().map(|x| x * factor).collect(),
            left: self.left.iter().map(|x| x * factor).collect(),
            ..self.clone()
        }
    }

    /// Every coefficient rounded to the nearest `f32` (what the blob stores), kept as `f64`.
    pub fn rounded_to_f32(&self) -> Self {
        let round = |v: &[f64]| v.iter().map(|&x| f64::from(x as f32)).collect();
        Self {
            diagonals: round(&self.diagonals),
            left: round(&self.left),
            right: round(&self.right),
            ..self.clone()
        }
    }
}

impl BandedLowRank {
    /// `B̂ y = m` by forward substitution in place on one column, in `O(n·(h + 2r))`: with
    /// `β_i = Σ_{t ≤ i−h} R_t y_t` kept as a running sum (the recursion the runtime replays,
    /// Denisov et al. 2022, App. H, Algorithm 3),
    /// `y_i = (m_i − Σ_{0<k<h} D[i,k] y_{i−k} − L_i·β_i) / D[i,0]`.
    /// `column[..first]` must be zero (it stays zero). A zero diagonal yields non-finite entries:
    /// callers check.
    pub fn solve_in_place(&self, column: &mut [f64], first: usize) {
        let (n, h, r) = (self.steps, self.band, self.rank);
        let mut beta = vec![0.0; r];
        for i in first..n {
            let mut s = column[i];
            let row = &self.diagonals[i * h..(i + 1) * h];
            for k in 1..h.min(i - first + 1) {
                s -= row[k] * column[i - k];
            }
            if r > 0 && i >= first + h {
                let t = i - h;
                let (rt, yt) = (&self.right[t * r..(t + 1) * r], column[t]);
                beta.iter_mut().zip(rt).for_each(|(b, x)| *b += x * yt);
                let li = &self.left[i * r..(i + 1) * r];
                s -= li.iter().zip(&beta).map(|(x, y)| x * y).sum::<f64>();
            }
            column[i] = s / row[0];
        }
    }

    /// `B̂ᵀ z = w` by back substitution in place on one column, in `O(n·(h + 2r))`: with
    /// `γ_i = Σ_{m ≥ i+h} L_m z_m`,
    /// `z_i = (w_i − Σ_{0<k<h} D[i+k,k] z_{i+k} − R_i·γ_i) / D[i,0]`.
    pub fn solve_transposed_in_place(&self, column: &mut [f64]) {
        let (n, h, r) = (self.steps, self.band, self.rank);
        let mut gamma = vec![0.0; r];
        for i in (0..n).rev() {
            let mut s = column[i];
            for k in 1..h.min(n - i) {
                s -= self.diagonals[(i + k) * h + k] * column[i + k];
            }
            if r > 0 && i + h < n {
                let m = i + h;
                let (lm, zm) = (&self.left[m * r..(m + 1) * r], column[m]);
                gamma.iter_mut().zip(lm).for_each(|(g, x)| *g += x * zm);
                let ri = &self.right[i * r..(i + 1) * r];
                s -= ri.iter().zip(&gamma).map(|(x, y)| x * y).sum::<f64>();
            }
            column[i] = s / self.diagonals[i * h];
        }
    }

    /// The encoder `Ĉ = B̂⁻¹A` (000 App. H) column by column with [`Self::solve_in_place`], in
    /// `O(n²·(h + 2r))` instead of the `O(n³)` of a dense triangular solve; columns in parallel.
    /// Column-major, `n × n`.
    pub fn encoder(&self, a: MatRef<'_, f64>) -> Result<Vec<f64>> {
        use rayon::prelude::*;
        let n = self.steps;
        if a.nrows() != n || a.ncols() != n {
            return Err(Error::InvalidWorkload(format!(
                "A is {}×{}, the decoder has {n} steps",
                a.nrows(),
                a.ncols()
            )));
        }
        let mut c = vec![0.0; n * n];
        c.par_chunks_mut(n).enumerate().for_each(|(j, column)| {
            for (i, x) in column.iter_mut().enumerate() {
                *x = a[(i, j)];
            }
            let first = column.iter().position(|&x| x != 0.0).unwrap_or(n);
            self.solve_in_place(column, first);
        });
        if c.iter().all(|x| x.is_finite()) {
            Ok(c)
        } else {
            Err(Error::Numerical("the encoder B̂⁻¹A is not finite".into()))
        }
    }

    /// `‖B̂‖_F²` in `O(n·(h + r²))`: the band, plus `Σ_i L_iᵀ (Σ_{j ≤ i−h} R_j R_jᵀ) L_i`.
    pub fn squared_frobenius(&self) -> f64 {
        let (n, h, r) = (self.steps, self.band, self.rank);
        let band: f64 = (0..n)
            .flat_map(|i| (0..h.min(i + 1)).map(move |k| (i, k)))
            .map(|(i, k)| self.diagonals[i * h + k].powi(2))
            .sum();
        let mut gram = vec![0.0; r * r];
        let mut low_rank = 0.0;
        for i in h..n {
            add_outer_product(&mut gram, &self.right[(i - h) * r..(i - h + 1) * r]);
            add_quadratic_form(&mut low_rank, &gram, &self.left[i * r..(i + 1) * r]);
        }
        band + low_rank
    }
}

/// `G += v vᵀ` for an `r × r` row-major `G` and `v` of length `r`.
pub(crate) fn add_outer_product(gram: &mut [f64], v: &[f64]) {
    let r = v.len();
    for (p, row) in gram.chunks_mut(r.max(1)).enumerate() {
        row.iter_mut().zip(v).for_each(|(g, vq)| *g += v[p] * vq);
    }
}

/// `total += vᵀ G v` for an `r × r` row-major `G`, term by term (`total += v_p G_pq v_q` in row
/// order, so callers that accumulate over many `v` keep their rounding).
pub(crate) fn add_quadratic_form(total: &mut f64, gram: &[f64], v: &[f64]) {
    let r = v.len();
    for (row, vp) in gram.chunks(r.max(1)).zip(v) {
        for (g, vq) in row.iter().zip(v) {
            *total += vp * g * vq;
        }
    }
}

/// Solves `(G + ridge·I) x = b` for a small positive-semidefinite `G`. Early rows of `L` and late
/// rows of `R` see fewer than `r` entries, so with no ridge `G` can be singular: then a ridge of
/// `1e-12·tr G` is added, and a zero row is the last resort.
fn solve_small(g: &[f64], b: &[f64], ridge: f64) -> Vec<f64> {
    let r = b.len();
    let trace: f64 = (0..r).map(|i| g[i * r + i]).sum();
    cholesky_solve(g, b, ridge)
        .or_else(|| cholesky_solve(g, b, ridge + 1e-12 * trace + f64::MIN_POSITIVE))
        .unwrap_or_else(|| vec![0.0; r])
}

/// The entries of `B` below the band (`i ≥ j + h`), column-major, zero elsewhere, with the
/// products the fit needs. `L` and `R` are kept column by column (`factor[q·n + i]`) so that
/// every inner loop runs over contiguous memory.
struct Masked {
    n: usize,
    h: usize,
    r: usize,
    entries: Vec<f64>,
    /// `Σ_{i ≥ j+h} B_ij²`.
    squared_norm: f64,
}

impl Masked {
    fn column(&self, j: usize) -> &[f64] {
        &self.entries[j * self.n..(j + 1) * self.n]
    }

    /// `rhs_q[i] = Σ_{j ≤ i−h} B_ij R_jq`: `B R` (the right-hand sides of the rows of `L`).
    fn times(&self, right: &[f64]) -> Vec<f64> {
        let (n, h, r) = (self.n, self.h, self.r);
        let mut rhs = vec![0.0; n * r];
        for j in 0..n.saturating_sub(h) {
            let column = &self.column(j)[j + h..];
            for q in 0..r {
                let x = right[q * n + j];
                if x != 0.0 {
                    let out = &mut rhs[q * n + j + h..(q + 1) * n];
                    out.iter_mut().zip(column).for_each(|(o, b)| *o += x * b);
                }
            }
        }
        rhs
    }

    /// `rhs_q[j] = Σ_{i ≥ j+h} B_ij L_iq`: `Bᵀ L` (the right-hand sides of the rows of `R`).
    fn transpose_times(&self, left: &[f64]) -> Vec<f64> {
        let (n, h, r) = (self.n, self.h, self.r);
        let mut rhs = vec![0.0; n * r];
        for j in 0..n.saturating_sub(h) {
            let column = &self.column(j)[j + h..];
            for q in 0..r {
                let l = &left[q * n + j + h..(q + 1) * n];
                rhs[q * n + j] = column.iter().zip(l).map(|(b, l)| b * l).sum();
            }
        }
        rhs
    }

    /// Refits every row of `L` given `R` (`left_side`), or of `R` given `L`, from the
    /// right-hand sides `rhs` (of [`Self::times`] or [`Self::transpose_times`]). Row `i` of `L`
    /// sees the rows `j ≤ i − h` of `R`, so its Gram matrix is a running sum; rows that see
    /// nothing are zero.
    fn refit(&self, fixed: &[f64], rhs: &[f64], ridge: f64, target: &mut [f64], left_side: bool) {
        let (n, h, r) = (self.n, self.h, self.r);
        let mut gram = vec![0.0; r * r];
        let rows: Box<dyn Iterator<Item = usize>> = if left_side {
            Box::new(0..n)
        } else {
            Box::new((0..n).rev())
        };
        for t in rows {
            let source = if left_side {
                t.checked_sub(h)
            } else {
                Some(t + h).filter(|&s| s < n)
            };
            let Some(s) = source else {
                (0..r).for_each(|q| target[q * n + t] = 0.0);
                continue;
            };
            for p in 0..r {
                for q in 0..r {
                    gram[p * r + q] += fixed[p * n + s] * fixed[q * n + s];
                }
            }
            let b: Vec<f64> = (0..r).map(|q| rhs[q * n + t]).collect();
            let x = solve_small(&gram, &b, ridge);
            (0..r).for_each(|q| target[q * n + t] = x[q]);
        }
    }

    /// The fit's objective `‖P_Ω(B − L Rᵀ)‖² + ridge(‖L‖² + ‖R‖²)` from `rhs = Bᵀ L` (of this
    /// `L`), in `O(n·r²)`: `‖B‖² − 2 Σ_j R_j·rhs_j + Σ_j R_jᵀ (Σ_{i ≥ j+h} L_i L_iᵀ) R_j`. That
    /// difference cancels when the fit is nearly exact: below `1e-8‖B‖²` the residual is summed
    /// entry by entry instead (`O(n²·r)`).
    fn objective(&self, left: &[f64], right: &[f64], rhs: &[f64], ridge: f64) -> f64 {
        let (n, h, r) = (self.n, self.h, self.r);
        let penalty = ridge
            * (left.iter().map(|x| x * x).sum::<f64>() + right.iter().map(|x| x * x).sum::<f64>());
        let mut gram = vec![0.0; r * r];
        let mut total = self.squared_norm;
        for j in (0..n.saturating_sub(h)).rev() {
            let i = j + h;
            for p in 0..r {
                for q in 0..r {
                    gram[p * r + q] += left[p * n + i] * left[q * n + i];
                }
            }
            for p in 0..r {
                let rp = right[p * n + j];
                total -= 2.0 * rp * rhs[p * n + j];
                for q in 0..r {
                    total += rp * gram[p * r + q] * right[q * n + j];
                }
            }
        }
        if total < 1e-8 * self.squared_norm {
            total = 0.0;
            let mut fit = vec![0.0; n];
            for j in 0..n.saturating_sub(h) {
                let fit = &mut fit[j + h..];
                fit.fill(0.0);
                for q in 0..r {
                    let x = right[q * n + j];
                    let l = &left[q * n + j + h..(q + 1) * n];
                    fit.iter_mut().zip(l).for_each(|(f, l)| *f += x * l);
                }
                total += fit
                    .iter()
                    .zip(&self.column(j)[j + h..])
                    .map(|(f, b)| (b - f) * (b - f))
                    .sum::<f64>();
            }
        }
        total + penalty
    }

    /// The rank-`r` truncated SVD of the masked matrix, split as `L = U√Σ`, `R = V√Σ`
    /// (column by column), by randomized subspace iteration (Halko, Martinsson & Tropp 2011,
    /// Alg. 4.4: `r + 8` columns, four power iterations, a fixed seed) in `O(n²·r)`
    /// instead of the `O(n³)` of a full SVD.
    fn svd_start(&self) -> Result<(Vec<f64>, Vec<f64>)> {
        let (n, r) = (self.n, self.r);
        let width = (r + 8).min(n);
        let b = MatRef::from_column_major_slice(&self.entries, n, n);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut y = Mat::from_fn(n, width, |_, _| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        });
        y = b * &y;
        for _ in 0..4 {
            let q = y.qr().compute_thin_Q();
            let z = b.transpose() * &q;
            let q = z.qr().compute_thin_Q();
            y = b * &q;
        }
        let q = y.qr().compute_thin_Q();
        let small = q.transpose() * b;
        let svd = small
            .thin_svd()
            .map_err(|e| Error::Numerical(format!("SVD failed: {e:?}")))?;
        let u = &q * svd.U();
        let mut left = vec![0.0; n * r];
        let mut right = vec![0.0; n * r];
        for k in 0..r.min(width) {
            let s = svd.S()[k].sqrt();
            for i in 0..n {
                left[k * n + i] = u[(i, k)] * s;
                right[k * n + i] = svd.V()[(i, k)] * s;
            }
        }
        Ok((left, right))
    }
}

/// `new ← old + ω (new − old)`.
fn extrapolate(new: &mut [f64], old: &[f64], omega: f64) {
    for (x, &o) in new.iter_mut().zip(old) {
        *x = o + omega * (*x - o);
    }
}

/// Compresses `decoder` into `h` exact diagonals plus a rank-`r` fit of the rest.
pub fn compress(
    decoder: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    options: &CompressOptions,
) -> Result<BandedLowRank> {
    let n = decoder.nrows();
    if decoder.ncols() != n || n == 0 {
        return Err(Error::InvalidWorkload(
            "the decoder must be square and non-empty".into(),
        ));
    }
    if band == 0 || band > n {
        return Err(Error::InvalidArgument(format!(
            "the band h must be in 1..={n}, got {band}"
        )));
    }
    if rank > n {
        return Err(Error::InvalidArgument(format!(
            "the rank r must be at most {n}, got {rank}"
        )));
    }
    let (h, r) = (band, rank);
    let diagonals = (0..n * h)
        .map(|idx| {
            let (i, k) = (idx / h, idx % h);
            if k <= i { decoder[(i, i - k)] } else { 0.0 }
        })
        .collect();
    let mut left = vec![0.0; n * r];
    let mut right = vec![0.0; n * r];
    if r > 0 && h < n {
        let mut entries = vec![0.0; n * n];
        for j in 0..n - h {
            for i in j + h..n {
                entries[j * n + i] = decoder[(i, j)];
            }
        }
        let masked = Masked {
            squared_norm: entries.iter().map(|x| x * x).sum(),
            n,
            h,
            r,
            entries,
        };
        let ridge = options.ridge;
        (left, right) = masked.svd_start()?;
        // ALS converges slowly on this triangular mask; over-relaxed steps (SOR-style
        // extrapolation of each half-sweep, backed off whenever the objective rises) reach the
        // same fit in far fewer sweeps.
        let rhs = masked.transpose_times(&left);
        let mut previous = masked.objective(&left, &right, &rhs, ridge);
        let mut omega: f64 = 1.0;
        for _ in 0..options.max_sweeps {
            crate::interrupt::check()?;
            let (old_left, old_right) = (left.clone(), right.clone());
            let rhs = masked.times(&right);
            masked.refit(&right, &rhs, ridge, &mut left, true);
            extrapolate(&mut left, &old_left, omega);
            let rhs = masked.transpose_times(&left);
            masked.refit(&left, &rhs, ridge, &mut right, false);
            extrapolate(&mut right, &old_right, omega);
            let current = masked.objective(&left, &right, &rhs, ridge);
            if current > previous {
                // Too aggressive: undo and fall back to plain ALS for a while.
                left = old_left;
                right = old_right;
                omega = 1.0;
                continue;
            }
            let done = previous - current <= options.tolerance * previous.max(f64::MIN_POSITIVE);
            previous = current;
            omega = (omega * 1.05).min(1.8);
            if done && omega == 1.0 {
                break;
            }
            if done {
                omega = 1.0;
            }
        }
        // Column by column to the blob's row-major layout.
        let row_major = |factor: &[f64]| -> Vec<f64> {
            (0..n * r)
                .map(|idx| factor[(idx % r) * n + idx / r])
                .collect()
        };
        left = row_major(&left);
        right = row_major(&right);
    }
    Ok(BandedLowRank {
        steps: n,
        band: h,
        rank: r,
        diagonals,
        left,
        right,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder that is exactly banded plus rank 2 below the band is recovered exactly.
    #[test]
    fn recovers_an_exact_banded_plus_low_rank_matrix() {
        let n = 30;
        let h = 3;
        let u = |i: usize| [1.0 + i as f64 * 0.1, (i as f64 * 0.7).sin()];
        let w = |j: usize| [0.5 / (1.0 + j as f64), (j as f64 * 0.3).cos()];
        let b = Mat::from_fn(n, n, |i, j| {
            if j > i {
                0.0
            } else if i - j < h {
                2.0 + (i + 2 * j) as f64 * 0.01
            } else {
                u(i)[0] * w(j)[0] + u(i)[1] * w(j)[1]
            }
        });
        let c = compress(
            b.as_ref(),
            h,
            2,
            &CompressOptions {
                ridge: 0.0,
                ..Default::default()
            },
        )
        .unwrap();
        let error = (c.to_dense() - &b).norm_max();
        assert!(error < 1e-8, "{error}");
        // A banded-only compression keeps the band and zeroes the rest.
        let c = compress(b.as_ref(), h, 0, &CompressOptions::default()).unwrap();
        let dense = c.to_dense();
        assert_eq!(dense[(5, 4)], b[(5, 4)]);
        assert_eq!(dense[(10, 2)], 0.0);
    }

    /// On a real decoder (prefix-sum optimum): the band is copied exactly, rows `i < h` of `L` and
    /// rows `j > n − 1 − h` of `R` are zero, and the fitted masked error is no worse than the
    /// truncated SVD of the masked matrix the fit starts from.
    #[test]
    fn fits_a_real_decoder_better_than_its_svd_start() {
        use crate::optimize::factorize::streaming_factorization;
        use crate::optimize::single::{OptimizeOptions, optimize_single_participation};
        let n = 64;
        let (h, r) = (3, 2);
        let a = Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 });
        let o = optimize_single_participation(a.as_ref(), &OptimizeOptions::default(), &mut |_| {})
            .unwrap();
        let b = streaming_factorization(a.as_ref(), o.x.as_ref())
            .unwrap()
            .decoder;
        let c = compress(b.as_ref(), h, r, &CompressOptions::default()).unwrap();
        let dense = c.to_dense();
        for i in 0..n {
            for j in 0..n {
                if j <= i && i - j < h {
                    assert_eq!(dense[(i, j)], b[(i, j)]);
                } else if j > i {
                    assert_eq!(dense[(i, j)], 0.0);
                }
            }
        }
        for i in 0..h {
            assert!(c.left[i * r..(i + 1) * r].iter().all(|&x| x == 0.0));
        }
        for j in n - h..n {
            assert!(c.right[j * r..(j + 1) * r].iter().all(|&x| x == 0.0));
        }
        let masked = Mat::from_fn(n, n, |i, j| if i >= j + h { b[(i, j)] } else { 0.0 });
        let svd = masked.thin_svd().unwrap();
        let truncated = Mat::from_fn(n, n, |i, j| {
            if i >= j + h {
                (0..r)
                    .map(|q| svd.U()[(i, q)] * svd.S()[q] * svd.V()[(j, q)])
                    .sum()
            } else {
                0.0
            }
        });
        let fitted = Mat::from_fn(n, n, |i, j| if i >= j + h { dense[(i, j)] } else { 0.0 });
        let (e_svd, e_fit) = (
            (&truncated - &masked).norm_l2(),
            (&fitted - &masked).norm_l2(),
        );
        assert!(e_fit <= e_svd * (1.0 + 1e-9), "ALS {e_fit} vs SVD {e_svd}");
    }

    #[test]
    fn rejects_bad_shapes() {
        let b = Mat::<f64>::identity(4, 4);
        assert!(compress(b.as_ref(), 0, 1, &CompressOptions::default()).is_err());
        assert!(compress(b.as_ref(), 5, 1, &CompressOptions::default()).is_err());
        assert!(compress(b.as_ref(), 4, 4, &CompressOptions::default()).is_ok());
    }

    #[test]
    fn scaling_and_rounding() {
        let b = Mat::from_fn(5, 5, |i, j| {
            if j <= i {
                0.1 + (i * j) as f64 / 3.0
            } else {
                0.0
            }
        });
        let c = compress(b.as_ref(), 2, 1, &CompressOptions::default()).unwrap();
        let s = c.scaled(2.0);
        assert!((s.to_dense() - c.to_dense() * 2.0).norm_max() < 1e-12);
        let rounded = c.rounded_to_f32();
        assert!(rounded.diagonals.iter().all(|&x| f64::from(x as f32) == x));
    }
}
