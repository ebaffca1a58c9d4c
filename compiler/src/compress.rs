//! Banded-plus-low-rank compression of a lower-triangular decoder (Denisov et al. 2022, App. H).
//!
//! `B̂ = (L Rᵀ) ⊙ U⁽ʰ⁾ + D⁽ʰ⁾`: the `h` diagonals `0 ≤ i − j < h` of `B` are kept exactly, and
//! the entries with `i − j ≥ h` are approximated by a rank-`r` product, fitted by alternating
//! least squares on those entries only (a matrix-completion problem) with the paper's ridge
//! penalty `λ(‖L‖_F² + ‖R‖_F²)`, `λ = 1e-6`, from a truncated-SVD start. The runtime replays
//! `B̂ z` with `(h + r)·d` work per step (Algorithm 3).

use faer::{Mat, MatRef};

use crate::linalg::cholesky_solve;
use crate::{Error, Result};

/// Options of the low-rank fit.
#[derive(Debug, Clone)]
pub struct CompressOptions {
    /// Ridge penalty on `‖L‖_F² + ‖R‖_F²`.
    pub ridge: f64,
    /// Maximum alternating sweeps.
    pub max_sweeps: usize,
    /// Stop when a sweep lowers the objective by less than this fraction.
    pub tolerance: f64,
    /// L-BFGS iterations on the shipped loss after the fit
    /// ([`refine_for_shipped_loss`](crate::mechanism::refine_for_shipped_loss), used by
    /// [`compile`](crate::mechanism::compile) under every schema); `0` ships the plain ALS fit.
    pub refine_iterations: usize,
}

impl Default for CompressOptions {
    fn default() -> Self {
        Self {
            ridge: 1e-6,
            max_sweeps: 1000,
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

/// One half-sweep: refits every row of `target` (`n × r`) given `fixed`, where row `t` of the
/// target sees the entries `pairs(t)` of `B` against the rows of `fixed` they pair with.
fn refit(
    b: MatRef<'_, f64>,
    h: usize,
    r: usize,
    ridge: f64,
    fixed: &[f64],
    target: &mut [f64],
    left_side: bool,
) {
    let n = b.nrows();
    let mut gram = vec![0.0; r * r];
    let add = |gram: &mut [f64], row: &[f64]| {
        for p in 0..r {
            for q in 0..r {
                gram[p * r + q] += row[p] * row[q];
            }
        }
    };
    if left_side {
        // Row i of L sees columns j ≤ i − h.
        for i in 0..n {
            if i < h {
                target[i * r..(i + 1) * r].fill(0.0);
                continue;
            }
            add(&mut gram, &fixed[(i - h) * r..(i - h + 1) * r]);
            let mut rhs = vec![0.0; r];
            for j in 0..=i - h {
                let bij = b[(i, j)];
                for q in 0..r {
                    rhs[q] += bij * fixed[j * r + q];
                }
            }
            target[i * r..(i + 1) * r].copy_from_slice(&solve_small(&gram, &rhs, ridge));
        }
    } else {
        // Row j of R sees rows i ≥ j + h.
        for j in (0..n).rev() {
            if j + h >= n {
                target[j * r..(j + 1) * r].fill(0.0);
                continue;
            }
            add(&mut gram, &fixed[(j + h) * r..(j + h + 1) * r]);
            let mut rhs = vec![0.0; r];
            for i in j + h..n {
                let bij = b[(i, j)];
                for q in 0..r {
                    rhs[q] += bij * fixed[i * r + q];
                }
            }
            target[j * r..(j + 1) * r].copy_from_slice(&solve_small(&gram, &rhs, ridge));
        }
    }
}

/// `new ← old + ω (new − old)`.
fn extrapolate(new: &mut [f64], old: &[f64], omega: f64) {
    for (x, &o) in new.iter_mut().zip(old) {
        *x = o + omega * (*x - o);
    }
}

fn objective(
    b: MatRef<'_, f64>,
    h: usize,
    r: usize,
    ridge: f64,
    left: &[f64],
    right: &[f64],
) -> f64 {
    let n = b.nrows();
    let mut total = ridge
        * (left.iter().map(|x| x * x).sum::<f64>() + right.iter().map(|x| x * x).sum::<f64>());
    for i in h..n {
        for j in 0..=i - h {
            let fit: f64 = (0..r).map(|q| left[i * r + q] * right[j * r + q]).sum();
            total += (b[(i, j)] - fit).powi(2);
        }
    }
    total
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
        return Err(Error::InvalidOption(format!(
            "the band h must be in 1..={n}, got {band}"
        )));
    }
    if rank > n {
        return Err(Error::InvalidOption(format!(
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
        let masked = Mat::from_fn(n, n, |i, j| if i >= j + h { decoder[(i, j)] } else { 0.0 });
        let svd = masked
            .thin_svd()
            .map_err(|e| Error::Numerical(format!("SVD failed: {e:?}")))?;
        for q in 0..r {
            let s = svd.S()[q].sqrt();
            for i in 0..n {
                left[i * r + q] = svd.U()[(i, q)] * s;
                right[i * r + q] = svd.V()[(i, q)] * s;
            }
        }
        // ALS converges slowly on this triangular mask; over-relaxed steps (SOR-style
        // extrapolation of each half-sweep, backed off whenever the objective rises) reach the
        // same fit in far fewer sweeps.
        let mut previous = objective(decoder, h, r, options.ridge, &left, &right);
        let mut omega: f64 = 1.0;
        for _ in 0..options.max_sweeps {
            let (old_left, old_right) = (left.clone(), right.clone());
            refit(decoder, h, r, options.ridge, &right, &mut left, true);
            extrapolate(&mut left, &old_left, omega);
            refit(decoder, h, r, options.ridge, &left, &mut right, false);
            extrapolate(&mut right, &old_right, omega);
            let current = objective(decoder, h, r, options.ridge, &left, &right);
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
        assert!((c.to_dense() - &b).norm_max() < 1e-8);
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
        use crate::factorize::streaming_factorization;
        use crate::optimize::{OptimizeOptions, optimize_single_participation};
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
