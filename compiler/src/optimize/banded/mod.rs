//! BandMF: banded lower-triangular encoders (Choquette-Choo, Ganesh, McKenna, McMahan, Rush,
//! Thakurta, Xu 2023, "(Amplified) Banded Matrix Factorizations").
//!
//! The encoder `C` is lower triangular with `b̂` bands (`C_ij = 0` unless `0 ≤ i − j < b̂`). Under
//! `b`-min-separation or fixed epoch order with `b̂ ≤ b`, two steps one record can take part in
//! are at least `b̂` apart, so their columns of `C` are orthogonal and the sensitivity is
//! `sens² = max_π Σ_{j∈π} ν_j` with `ν_j = ‖c_j‖²` (exact, a dynamic program:
//! [`Participation::max_pattern_sum`](crate::privacy::participation::Participation::max_pattern_sum)).
//! The device replays `B z = A C⁻¹ z` by forward substitution, keeping the last `b̂ − 1` rows
//! of `C⁻¹z`.
//!
//!
//! This module holds the encoder and its loss; [`general`] optimizes every band entry, [`toeplitz`]
//! the banded Toeplitz encoders in `O(n·b̂)` (McKenna 2025).

pub mod general;
pub mod toeplitz;

use faer::{Mat, MatRef};
use rayon::prelude::*;

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
