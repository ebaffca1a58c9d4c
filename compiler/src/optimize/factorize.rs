//! The streaming (lower-triangular) factorization of an optimal `X = CᵀC` (McMahan, Rush,
//! Thakurta, §2.2, Thm 2.1: the map `ψ(X) = P chol(P X P)ᵀ P` of Eq. 8).
//!
//! `C` is the unique lower-triangular matrix with nonnegative diagonal and `CᵀC = X`; it has the
//! column norms of any other square root of `X`, so the same sensitivity, and `B = A C⁻¹` is lower
//! triangular whenever `A` is: output `i` depends on the first `i` noise rows only.

use faer::{Mat, MatRef, Side};

use crate::{Error, Result};

/// A factorization `A = B C` with both factors lower triangular.
#[derive(Debug, Clone)]
pub struct Factorization {
    /// The decoder `B = A C⁻¹`.
    pub decoder: Mat<f64>,
    /// The encoder `C`, `CᵀC = X`.
    pub encoder: Mat<f64>,
}

/// `C = P Lᵀ P` with `P X P = L Lᵀ` (Cholesky, `P` the reversal), and `B = A C⁻¹`
/// (McMahan, Rush, Thakurta, Thm 2.1 and Eq. 8): `C` is lower triangular with positive diagonal,
/// `CᵀC = X`, and `B` (lower triangular for lower-triangular `A`) is found by one triangular solve.
/// Only the lower triangle of `x` is read. Fails if `X` is not numerically positive definite.
#[allow(non_snake_case)]
pub fn streaming_factorization(a: MatRef<'_, f64>, x: MatRef<'_, f64>) -> Result<Factorization> {
    let n = x.nrows();
    if a.nrows() != n || a.ncols() != n || x.ncols() != n {
        return Err(Error::InvalidWorkload(
            "A and X must be square of the same size".into(),
        ));
    }
    let PXP = Mat::from_fn(n, n, |i, j| x[(n - 1 - i, n - 1 - j)]);
    let llt = PXP
        .llt(Side::Lower)
        .map_err(|e| Error::Numerical(format!("X is not positive definite: {e:?}")))?;
    let L = llt.L();
    let C = Mat::from_fn(n, n, |i, j| {
        if j <= i {
            L[(n - 1 - j, n - 1 - i)]
        } else {
            0.0
        }
    });
    // B C = A  ⇔  Cᵀ Bᵀ = Aᵀ, with Cᵀ upper triangular.
    let mut Bt = a.transpose().to_owned();
    C.transpose().solve_upper_triangular_in_place(Bt.as_mut());
    // Back substitution keeps the zeros of Aᵀ below the diagonal exactly; make the lower-triangular
    // structure of B explicit anyway, and refuse a non-finite result.
    let B = Mat::from_fn(n, n, |i, j| if j <= i { Bt[(j, i)] } else { 0.0 });
    if (0..n).any(|j| (j..n).any(|i| !B[(i, j)].is_finite())) {
        return Err(Error::Numerical("the decoder A C⁻¹ is not finite".into()));
    }
    Ok(Factorization {
        decoder: B,
        encoder: C,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::single::{OptimizeOptions, optimize_single_participation};
    use crate::workload::Workload;

    fn check(a: &Mat<f64>, x: &Mat<f64>) {
        let n = a.nrows();
        let f = streaming_factorization(a.as_ref(), x.as_ref()).unwrap();
        let (b, c) = (&f.decoder, &f.encoder);
        for i in 0..n {
            assert!(c[(i, i)] > 0.0);
            for j in i + 1..n {
                assert_eq!(c[(i, j)], 0.0);
                assert_eq!(b[(i, j)], 0.0);
            }
        }
        let eps = f64::EPSILON * n as f64;
        let ctc = c.transpose() * c;
        assert!((&ctc - x).norm_max() <= 16.0 * eps * x.norm_max());
        // Dense reference: B C = A.
        let bc = b * c;
        let scale = b.norm_max() * c.norm_max() * n as f64;
        assert!((&bc - a).norm_max() <= 16.0 * eps * scale.max(a.norm_max()));
    }

    #[test]
    fn factors_the_prefix_sum_optimum() {
        for n in [1, 5, 33] {
            let a = Workload::PrefixSum.matrix(n).unwrap();
            let o =
                optimize_single_participation(a.as_ref(), &OptimizeOptions::default(), &mut |_| {})
                    .unwrap();
            check(&a, &o.x);
        }
    }

    #[test]
    fn factors_random_positive_definite_matrices() {
        let mut state = 99u64;
        let mut rand = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for n in [2, 7, 20, 64] {
            let g = Mat::from_fn(n, n, |_, _| rand());
            let x = &g * g.transpose() + Mat::<f64>::identity(n, n) * 0.5;
            let a = Mat::from_fn(n, n, |i, j| {
                if j < i {
                    rand()
                } else if j == i {
                    1.0 + rand().abs()
                } else {
                    0.0
                }
            });
            check(&a, &x);
        }
        let indefinite = Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 2.0 });
        assert!(matches!(
            streaming_factorization(Mat::<f64>::identity(2, 2).as_ref(), indefinite.as_ref()),
            Err(Error::Numerical(_))
        ));
    }
}
