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

/// `C = P Lᵀ P` with `P X P = L Lᵀ` (Cholesky, `P` the reversal), and `B = A C⁻¹`.
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
    Ok(Factorization {
        decoder: Bt.transpose().to_owned(),
        encoder: C,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::{OptimizeOptions, optimize_single_participation};
    use crate::workload::Workload;

    #[test]
    fn factors_are_lower_triangular_and_exact() {
        for n in [1, 5, 33] {
            let a = Workload::PrefixSum.matrix(n).unwrap();
            let o =
                optimize_single_participation(a.as_ref(), &OptimizeOptions::default(), &mut |_| {})
                    .unwrap();
            let f = streaming_factorization(a.as_ref(), o.x.as_ref()).unwrap();
            let tolerance = 1e-12 * n as f64 * 10.0;
            for i in 0..n {
                assert!(f.encoder[(i, i)] > 0.0);
                for j in i + 1..n {
                    assert_eq!(f.encoder[(i, j)], 0.0);
                    assert!(f.decoder[(i, j)].abs() <= tolerance);
                }
            }
            let ctc = f.encoder.transpose() * &f.encoder;
            assert!((&ctc - &o.x).norm_max() <= tolerance);
            let bc = &f.decoder * &f.encoder;
            assert!((&bc - &a).norm_max() <= tolerance * 10.0);
        }
    }
}
