//! The workload as the scaled optimizer sees it: the prefix sum and momentum with any
//! learning-rate schedule have a **banded inverse**, so `‖A C⁻¹‖_F = ‖(C A⁻¹)⁻¹‖_F` with
//! `C A⁻¹` banded again (`b̂ + a − 1` bands for an `a`-banded `A⁻¹`); any other `A` is kept dense.
//!
//! For `A = S D_η T(β)` (003 Prop. 4.2, Eq. 9: `S` the prefix sum, `D_η` the learning rates,
//! `T(β)[i, j] = β^{i−j}`), `A⁻¹ = (I − βZ) D_η⁻¹ (I − Z)` with `Z` the down-shift, three bands:
//!
//! ```text
//! A⁻¹[k, k] = 1/η_k,   A⁻¹[k, k−1] = −1/η_k − β/η_{k−1},   A⁻¹[k, k−2] = β/η_{k−1};
//! ```
//!
//! the prefix sum is `η = 1, β = 0`: `A⁻¹ = I − Z`, two bands.

use faer::{Mat, MatRef};

use crate::workload::Workload;
use crate::{Error, Result};

/// A lower-triangular banded matrix by rows: `rows[i·width + l] = M[i, i − l]` for
/// `l < width`, zero where `l > i`.
#[derive(Debug, Clone, PartialEq)]
pub struct BandRows {
    /// `n`.
    pub steps: usize,
    /// Diagonals kept, the main one included.
    pub width: usize,
    /// Row-major band.
    pub rows: Vec<f64>,
}

impl BandRows {
    /// The zero band.
    pub fn zeros(steps: usize, width: usize) -> Self {
        Self {
            steps,
            width,
            rows: vec![0.0; steps * width],
        }
    }

    /// `M[i, i − l]` (zero outside the band or the matrix).
    #[inline]
    pub fn get(&self, i: usize, l: usize) -> f64 {
        if l < self.width && l <= i && i < self.steps {
            self.rows[i * self.width + l]
        } else {
            0.0
        }
    }

    /// Row `i`: `M[i, i − l]` for `l < width`.
    #[inline]
    pub fn row(&self, i: usize) -> &[f64] {
        &self.rows[i * self.width..(i + 1) * self.width]
    }

    /// The banded Toeplitz matrix with first column `c` (`width = c.len()`).
    pub fn toeplitz(c: &[f64], steps: usize) -> Self {
        let width = c.len();
        let mut out = Self::zeros(steps, width);
        for i in 0..steps {
            for (l, x) in c.iter().enumerate().take(i + 1) {
                out.rows[i * width + l] = *x;
            }
        }
        out
    }

    /// The same matrix in [`BandedEncoder`](crate::optimize::banded::BandedEncoder)'s column layout.
    pub fn to_encoder(&self) -> crate::optimize::banded::BandedEncoder {
        let (n, h) = (self.steps, self.width);
        let mut columns = vec![0.0; n * h];
        for i in 0..n {
            for l in 0..h.min(i + 1) {
                columns[(i - l) * h + l] = self.rows[i * h + l];
            }
        }
        crate::optimize::banded::BandedEncoder {
            steps: n,
            bands: h,
            columns,
        }
    }

    /// The dense `n × n` matrix (tests and small references).
    pub fn to_dense(&self) -> Mat<f64> {
        Mat::from_fn(self.steps, self.steps, |i, j| {
            if i >= j { self.get(i, i - j) } else { 0.0 }
        })
    }
}

/// The most bands of `A⁻¹` [`Operator::from_matrix`] looks for (momentum has three).
pub const MAX_INVERSE_WIDTH: usize = 3;

/// How `‖A C⁻¹‖_F²` is computed for one workload over `n` steps.
#[derive(Debug, Clone)]
pub enum Operator {
    /// `A⁻¹`, banded (prefix sum, momentum with any schedule).
    BandedInverse(BandRows),
    /// Any lower-triangular `A`, `n × n`.
    Dense(Mat<f64>),
}

impl Operator {
    /// The operator of `workload` over `steps` steps: banded inverse for the prefix sum and
    /// momentum (no `n × n` matrix is formed), the matrix for a custom workload.
    pub fn new(workload: &Workload, steps: usize) -> Result<Self> {
        if steps == 0 {
            return Err(Error::InvalidWorkload(
                "the horizon must be at least one step".into(),
            ));
        }
        match workload {
            Workload::PrefixSum => Ok(Self::BandedInverse(momentum_inverse(
                &vec![1.0; steps],
                0.0,
            ))),
            Workload::Momentum { momentum, schedule } => {
                if !(0.0..1.0).contains(momentum) {
                    return Err(Error::InvalidWorkload(format!(
                        "momentum must be in [0, 1), got {momentum}"
                    )));
                }
                let rates = schedule.rates(steps)?;
                Ok(Self::BandedInverse(momentum_inverse(&rates, *momentum)))
            }
            Workload::Custom { .. } => Ok(Self::Dense(workload.matrix(steps)?)),
        }
    }

    /// The operator of a lower-triangular matrix `a`: its inverse when that is banded with at
    /// most [`MAX_INVERSE_WIDTH`] bands (the prefix sum, momentum with any schedule, whatever
    /// the caller's representation), the matrix otherwise. The band of the inverse is computed
    /// exactly row by row (`Σ_{j≤i≤k} A⁻¹[k, i]·A[i, j] = δ_kj` from `j = k` down), then the
    /// rest of `A⁻¹A = I` is checked entry by entry to a relative `10⁻¹²`, in `O(n²)`.
    pub fn from_matrix(a: MatRef<'_, f64>) -> Result<Self> {
        let n = a.nrows();
        if n == 0 || a.ncols() != n {
            return Err(Error::InvalidWorkload(format!(
                "the workload must be a non-empty square matrix, got {} × {}",
                a.nrows(),
                a.ncols()
            )));
        }
        // Only a finite lower-triangular matrix has its inverse looked for; anything else is
        // kept as it is (and refused where a workload is checked).
        let lower_and_finite = (0..n).all(|j| {
            (0..n).all(|i| {
                let v = a[(i, j)];
                v.is_finite() && (i >= j || v == 0.0)
            })
        });
        if !lower_and_finite {
            return Ok(Self::Dense(a.to_owned()));
        }
        let width = MAX_INVERSE_WIDTH.min(n);
        let mut inverse = BandRows::zeros(n, width);
        for k in 0..n {
            for t in 0..width.min(k + 1) {
                let j = k - t;
                let mut sum = if t == 0 { -1.0 } else { 0.0 };
                for u in 0..t {
                    sum += inverse.rows[k * width + u] * a[(k - u, j)];
                }
                let value = -sum / a[(j, j)];
                if !value.is_finite() {
                    return Ok(Self::Dense(a.to_owned()));
                }
                inverse.rows[k * width + t] = value;
            }
        }
        for k in 0..n {
            let row = &inverse.rows[k * width..(k + 1) * width];
            for j in 0..(k + 1).saturating_sub(width) {
                let (mut residual, mut magnitude) = (0.0f64, 0.0f64);
                for (t, &l) in row.iter().enumerate() {
                    let product = l * a[(k - t, j)];
                    residual += product;
                    magnitude += product.abs();
                }
                if residual.is_nan() || residual.abs() > 1e-12 * magnitude {
                    return Ok(Self::Dense(a.to_owned()));
                }
            }
        }
        // Drop trailing bands that are zero (the prefix sum's inverse has two).
        let used = (1..=width)
            .rev()
            .find(|&w| (0..n).any(|k| inverse.rows[k * width + w - 1] != 0.0))
            .unwrap_or(1);
        if used < width {
            let rows = (0..n)
                .flat_map(|k| inverse.rows[k * width..k * width + used].to_vec())
                .collect();
            inverse = BandRows {
                steps: n,
                width: used,
                rows,
            };
        }
        Ok(Self::BandedInverse(inverse))
    }

    /// `n`.
    pub fn steps(&self) -> usize {
        match self {
            Self::BandedInverse(inverse) => inverse.steps,
            Self::Dense(a) => a.nrows(),
        }
    }

    /// Bytes of this operator (the dense matrix, or the band of `A⁻¹`).
    pub fn bytes(&self) -> f64 {
        match self {
            Self::BandedInverse(inverse) => 8.0 * inverse.rows.len() as f64,
            Self::Dense(a) => 8.0 * (a.nrows() * a.ncols()) as f64,
        }
    }
}

/// `A⁻¹` of `A = S D_η T(β)` (module docs): two bands for `β = 0`, three otherwise.
fn momentum_inverse(rates: &[f64], momentum: f64) -> BandRows {
    let n = rates.len();
    let width = if momentum == 0.0 { 2 } else { 3 };
    let mut inverse = BandRows::zeros(n, width);
    for k in 0..n {
        let row = &mut inverse.rows[k * width..(k + 1) * width];
        row[0] = 1.0 / rates[k];
        if k >= 1 {
            row[1] = -1.0 / rates[k] - momentum / rates[k - 1];
        }
        if k >= 2 && width == 3 {
            row[2] = momentum / rates[k - 1];
        }
    }
    inverse
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Schedule;

    /// The banded inverse times the dense workload is the identity.
    #[test]
    fn banded_inverses_invert_the_workloads() {
        let n = 17;
        for workload in [
            Workload::PrefixSum,
            Workload::Momentum {
                momentum: 0.9,
                schedule: Schedule::Constant,
            },
            Workload::Momentum {
                momentum: 0.95,
                schedule: Schedule::Cooldown {
                    steps: 6,
                    final_rate: 0.05,
                },
            },
        ] {
            let Operator::BandedInverse(inverse) = Operator::new(&workload, n).unwrap() else {
                panic!("{} has a banded inverse", workload.label());
            };
            let a = workload.matrix(n).unwrap();
            let product = &a * inverse.to_dense();
            let error = (&product - Mat::<f64>::identity(n, n)).norm_max();
            assert!(error < 1e-12, "{}: {error}", workload.label());
        }
    }

    /// `from_matrix` finds the banded inverse of the prefix sum and of momentum with a
    /// schedule, equal to the one built from the workload, and keeps a matrix whose inverse is
    /// not banded (a custom workload with a long memory) dense.
    #[test]
    fn from_matrix_finds_banded_inverses_and_only_those() {
        // n = 2052 with momentum 0.95 and a cooldown over 513 steps: the StackOverflow setting.
        for (n, workload) in [
            (19, Workload::PrefixSum),
            (
                19,
                Workload::Momentum {
                    momentum: 0.9,
                    schedule: Schedule::Cooldown {
                        steps: 7,
                        final_rate: 0.05,
                    },
                },
            ),
            (
                2052,
                Workload::Momentum {
                    momentum: 0.95,
                    schedule: Schedule::Cooldown {
                        steps: 513,
                        final_rate: 0.05,
                    },
                },
            ),
        ] {
            let a = workload.matrix(n).unwrap();
            let (Operator::BandedInverse(found), Operator::BandedInverse(built)) = (
                Operator::from_matrix(a.as_ref()).unwrap(),
                Operator::new(&workload, n).unwrap(),
            ) else {
                panic!("{}: no banded inverse", workload.label());
            };
            assert_eq!(found.width, built.width, "{}", workload.label());
            for (x, y) in found.rows.iter().zip(&built.rows) {
                assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{x} vs {y}");
            }
        }
        // A[i, j] = 0.5^(i−j) + 1: its inverse has no band of width 3.
        let n = 19;
        let a = Mat::from_fn(n, n, |i, j| {
            if i >= j {
                0.5f64.powi((i - j) as i32) + 1.0
            } else {
                0.0
            }
        });
        assert!(matches!(
            Operator::from_matrix(a.as_ref()).unwrap(),
            Operator::Dense(_)
        ));
    }
}
