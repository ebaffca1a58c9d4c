//! Sensitivity and loss of a factorization for single participation.
//!
//! With unit-norm contributions to one step, the L2 sensitivity of `x ↦ C x` is the largest
//! column norm of `C` (Denisov et al. 2022, Thm 3.1 and Eq. 2), and the loss, the total squared
//! error at a fixed privacy level, is `L(B, C) = sens(C)²·‖B‖_F²`.

use faer::{Mat, MatRef};

use crate::{Error, Result};

/// The encoder `Ĉ = B̂⁻¹ A` implied by a lower-triangular decoder (forward substitution).
pub fn encoder_for_decoder(a: MatRef<'_, f64>, decoder: MatRef<'_, f64>) -> Result<Mat<f64>> {
    let n = a.nrows();
    if (0..n).any(|i| decoder[(i, i)] == 0.0) {
        return Err(Error::Numerical(
            "the decoder has a zero diagonal entry".into(),
        ));
    }
    let mut c = a.to_owned();
    decoder.solve_lower_triangular_in_place(c.as_mut());
    if c.norm_max().is_finite() {
        Ok(c)
    } else {
        Err(Error::Numerical("the encoder B̂⁻¹A is not finite".into()))
    }
}

/// `max_j ‖C[:, j]‖₂`: the single-participation sensitivity.
pub fn max_column_norm(c: MatRef<'_, f64>) -> f64 {
    (0..c.ncols())
        .map(|j| c.col(j).norm_l2())
        .fold(0.0, f64::max)
}

/// `sens²·‖B[i,:]‖²` for every step `i`: the variance of release `i` for `σ = ζ = 1`.
pub fn per_step_variance(decoder: MatRef<'_, f64>, sensitivity: f64) -> Vec<f64> {
    (0..decoder.nrows())
        .map(|i| sensitivity * sensitivity * decoder.row(i).squared_norm_l2())
        .collect()
}

/// `L = sens²·‖B‖_F²`.
pub fn loss(decoder: MatRef<'_, f64>, sensitivity: f64) -> f64 {
    sensitivity * sensitivity * decoder.squared_norm_l2()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: the largest ‖C (x − x')‖_F over neighbours differing in one step by a vector
    /// of norm ≤ 1 (d = 2, a grid of directions and lengths) equals the largest column norm.
    #[test]
    fn max_column_norm_is_the_worst_neighbour() {
        let n = 7;
        let c = Mat::from_fn(n, n, |i, j| {
            if j <= i {
                ((i * 3 + j * 5) % 7) as f64 - 2.5
            } else {
                0.0
            }
        });
        let mut brute: f64 = 0.0;
        for j in 0..n {
            for k in 0..64 {
                let angle = k as f64 * std::f64::consts::PI / 32.0;
                for length in [0.25, 1.0] {
                    let u = [angle.cos() * length, angle.sin() * length];
                    let mut frob = 0.0;
                    for i in 0..n {
                        for ul in u {
                            frob += (c[(i, j)] * ul).powi(2);
                        }
                    }
                    brute = brute.max(frob.sqrt());
                }
            }
        }
        assert!((max_column_norm(c.as_ref()) - brute).abs() <= 1e-12 * brute);
    }

    #[test]
    fn loss_is_the_sum_of_step_variances() {
        let b = Mat::from_fn(4, 4, |i, j| if j <= i { 1.0 + (i + j) as f64 } else { 0.0 });
        let v = per_step_variance(b.as_ref(), 2.0);
        assert!((v.iter().sum::<f64>() - loss(b.as_ref(), 2.0)).abs() < 1e-9);
        assert_eq!(v[0], 4.0);
    }
}
