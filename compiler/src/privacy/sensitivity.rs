//! Sensitivity and loss of a factorization for single participation.
//!
//! With unit-norm contributions to one step, the L2 sensitivity of `x ↦ C x` is the largest
//! column norm of `C` (Denisov et al. 2022, Thm 3.1 and Eq. 2; computed, with the other schemas,
//! by [`participation::sensitivity`](crate::privacy::participation::sensitivity), which the tests here
//! check against a brute force), and the loss, the total squared error at a fixed privacy level,
//! is `L(B, C) = sens(C)²·‖B‖_F²`.

use faer::{Mat, MatRef};

use crate::{Error, Result};

/// The encoder `Ĉ = B̂⁻¹ A` implied by a lower-triangular decoder (forward substitution; only the
/// lower triangle of `decoder` is read). Denisov et al. 2022, App. H: the optimal encoder for a
/// fixed decoder `B̂` of the prefix-sum workload is `B̂⁻¹S`.
pub fn encoder_for_decoder(a: MatRef<'_, f64>, decoder: MatRef<'_, f64>) -> Result<Mat<f64>> {
    let n = a.nrows();
    if a.ncols() != n || decoder.nrows() != n || decoder.ncols() != n {
        return Err(Error::InvalidWorkload(format!(
            "A ({}×{}) and B̂ ({}×{}) must be square of the same size",
            a.nrows(),
            a.ncols(),
            decoder.nrows(),
            decoder.ncols()
        )));
    }
    if (0..n).any(|i| decoder[(i, i)] == 0.0) {
        return Err(Error::Numerical(
            "the decoder has a zero diagonal entry".into(),
        ));
    }
    let mut c = a.to_owned();
    decoder.solve_lower_triangular_in_place(c.as_mut());
    if (0..n).all(|j| (0..n).all(|i| c[(i, j)].is_finite())) {
        Ok(c)
    } else {
        Err(Error::Numerical("the encoder B̂⁻¹A is not finite".into()))
    }
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
    use crate::privacy::participation::{Participation, sensitivity};
    use mfc_formats::SensitivityMethod;

    /// A seeded uniform generator on `[-0.5, 0.5)`.
    fn uniform(seed: u64) -> impl FnMut() -> f64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        }
    }

    /// Brute force over neighbouring single-participation datasets `x − x' = e_j uᵀ` with
    /// `‖u‖ ≤ 1` (003 Thm 3.1 / Eq. 2): `‖C (x − x')‖_F` is formed explicitly as a dense product
    /// for every step `j`, for `d = 1` on a grid of `t ∈ [−1, 1]` and for `d = 3` on random unit
    /// and shorter vectors; its maximum is the sensitivity the compile path records for single
    /// participation (`participation::sensitivity`, method `MaxColumnNorm`).
    #[test]
    fn the_shipped_single_participation_sensitivity_is_the_worst_neighbour() {
        let mut rand = uniform(7);
        for n in 1..=8 {
            let c = Mat::from_fn(n, n, |i, j| if j <= i { 4.0 * rand() } else { 0.0 });
            let shipped = sensitivity(c.as_ref(), &Participation::Single).unwrap();
            assert_eq!(shipped.method, SensitivityMethod::MaxColumnNorm);
            let expected = shipped.value;
            let mut scalar: f64 = 0.0;
            let mut vector: f64 = 0.0;
            for j in 0..n {
                for k in 0..=40 {
                    let t = -1.0 + k as f64 / 20.0;
                    let delta = Mat::from_fn(n, 1, |i, _| if i == j { t } else { 0.0 });
                    scalar = scalar.max((&c * &delta).norm_l2());
                }
                for trial in 0..50 {
                    let mut u = [rand(), rand(), rand()];
                    let norm = u.iter().map(|x| x * x).sum::<f64>().sqrt();
                    let length = if trial % 2 == 0 { 1.0 } else { 0.5 + rand() };
                    u.iter_mut().for_each(|x| *x *= length / norm);
                    let delta = Mat::from_fn(n, 3, |i, l| if i == j { u[l] } else { 0.0 });
                    vector = vector.max((&c * &delta).norm_l2());
                }
            }
            let tolerance = 8.0 * f64::EPSILON * n as f64 * expected.max(1.0);
            assert!(
                (scalar - expected).abs() <= tolerance,
                "n = {n}: {scalar} vs {expected}"
            );
            assert!(
                (vector - expected).abs() <= tolerance,
                "n = {n}: {vector} vs {expected}"
            );
        }
    }

    /// `B̂⁻¹A` by forward substitution against the dense check `B̂ Ĉ = A`.
    #[test]
    fn encoder_solves_the_decoder() {
        let mut rand = uniform(11);
        for n in [1, 5, 17] {
            let b = Mat::from_fn(n, n, |i, j| match i.cmp(&j) {
                std::cmp::Ordering::Equal => 1.0 + rand().abs(),
                std::cmp::Ordering::Greater => rand(),
                std::cmp::Ordering::Less => 0.0,
            });
            let a = Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 });
            let c = encoder_for_decoder(a.as_ref(), b.as_ref()).unwrap();
            let tolerance = 64.0 * f64::EPSILON * n as f64 * c.norm_max().max(1.0);
            assert!((&b * &c - &a).norm_max() <= tolerance);
        }
        let singular = Mat::<f64>::zeros(2, 2);
        assert!(
            encoder_for_decoder(Mat::<f64>::identity(2, 2).as_ref(), singular.as_ref()).is_err()
        );
    }

    #[test]
    fn nan_is_never_hidden() {
        let mut c = Mat::<f64>::identity(3, 3);
        c[(2, 1)] = f64::NAN;
        assert!(sensitivity(c.as_ref(), &Participation::Single).is_err());
        let mut b = Mat::<f64>::identity(3, 3);
        b[(1, 0)] = f64::NAN;
        assert!(encoder_for_decoder(Mat::<f64>::identity(3, 3).as_ref(), b.as_ref()).is_err());
    }

    #[test]
    fn loss_is_the_sum_of_step_variances() {
        let b = Mat::from_fn(4, 4, |i, j| if j <= i { 1.0 + (i + j) as f64 } else { 0.0 });
        let v = per_step_variance(b.as_ref(), 2.0);
        assert!((v.iter().sum::<f64>() - loss(b.as_ref(), 2.0)).abs() < 1e-9);
        assert_eq!(v[0], 4.0);
    }
}
