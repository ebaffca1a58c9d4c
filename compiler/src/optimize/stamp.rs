//! Stamping (Choquette-Choo et al. 2023, 001 App. D.4) and the evaluation of a factorization
//! given by its Gram matrix under a participation schema.
//!
//! Stamping repeats an encoder `C` (for `m` steps) `s` times block-diagonally, `C ⊗ I`-style,
//! for `n = s·m` steps; with the optimal decoder `B = A (C_s)⁻¹` it factorizes any workload `A`.
//! In Gram form the stamped `X = C_sᵀC_s` is `X` repeated along the diagonal.

use faer::{Mat, MatRef};

use crate::optimize::factorize::{Factorization, streaming_factorization};

use crate::privacy::participation::{Participation, Sensitivity, sensitivity};
use crate::{Error, Result};

/// The Gram matrix of the stamped encoder: `x` repeated `copies` times along the diagonal.
pub fn stamp(x: MatRef<'_, f64>, copies: usize) -> Mat<f64> {
    let m = x.nrows();
    Mat::from_fn(m * copies, m * copies, |i, j| {
        if i / m == j / m {
            x[(i % m, j % m)]
        } else {
            0.0
        }
    })
}

/// A factorization evaluated under a participation schema.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// The encoder `C` (lower triangular, `CᵀC = X`).
    pub encoder: Mat<f64>,
    /// The optimal decoder for it, `B = A C⁻¹`.
    pub decoder: Mat<f64>,
    /// `sens(C)` under the schema and how it was computed.
    pub sensitivity: Sensitivity,
    /// `L = sens²·‖B‖_F²` (001 Eq. 4).
    pub loss: f64,
    /// `sens²·‖B[i,:]‖²` per step: the variance profile (001 Fig. 4).
    pub per_step_variance: Vec<f64>,
}

/// Factorizes `A = B C` with the streaming (lower-triangular) encoder of the Gram matrix `x`
/// (`CᵀC = X`) and the optimal decoder `B = A C⁻¹`, and evaluates its loss under
/// `participation`.
pub fn evaluate_gram(
    a: MatRef<'_, f64>,
    x: MatRef<'_, f64>,
    participation: &Participation,
) -> Result<Evaluated> {
    let n = a.nrows();
    if x.nrows() != n || x.ncols() != n {
        return Err(Error::InvalidWorkload(format!(
            "the Gram matrix is {}×{}, the workload has {n} steps",
            x.nrows(),
            x.ncols()
        )));
    }
    let Factorization { decoder, encoder } = streaming_factorization(a, x)?;
    let sensitivity = sensitivity(encoder.as_ref(), participation)?;
    let s2 = sensitivity.value * sensitivity.value;
    let per_step_variance: Vec<f64> = (0..n)
        .map(|i| s2 * decoder.row(i).squared_norm_l2())
        .collect();
    Ok(Evaluated {
        loss: per_step_variance.iter().sum(),
        encoder,
        decoder,
        sensitivity,
        per_step_variance,
    })
}
