//! Participation schemas and the sensitivity of an encoder under them (Choquette-Choo et al.
//! 2023, "Multi-Epoch Matrix Factorization", 001 §2).
//!
//! Under `(k, b)` fixed-epoch-order participation a record contributes to at most `k` steps, any
//! two adjacent ones exactly `b` apart. Its sensitivity is `sup_u ‖C u‖` over `u` supported on a
//! participation pattern `π` with entries in `[−1, 1]` (Eq. 2; for vector contributions, rows of
//! norm ≤ 1). This module computes it three ways from the Gram matrix `X = CᵀC`:
//!
//! - **exact** when every pattern block `X[π,π]` is elementwise non-negative: the all-ones
//!   vector is then the worst case and `sens² = max_π 1ᵀX[π,π]1` (001 Eq. 3, O(b k²));
//! - the **absolute-Gram bound** `sens² ≤ max_π Σ_{i,j∈π} |X_ij|`, which holds for any `X` and
//!   any dimension (`Σ X_ij⟨u_i,u_j⟩ ≤ Σ |X_ij|` for `‖u_i‖ ≤ 1`) and equals the exact value in
//!   the non-negative case;
//! - the **spectral bound** `sens ≤ √k · max_π ‖C[:,π]‖₂` (001 Thm 2.1).
//!
//! [`sensitivity`] returns the exact value when it applies, else the smaller bound, with the
//! method that produced it; [`brute_force_sensitivity`] enumerates every sign pattern (the
//! reference the tests compare against; `|D| = b·2^k`, 001 §2).

use faer::{Mat, MatRef, Side};
use mfc_formats::SensitivityMethod;

use crate::{Error, Result};

/// Which sets of steps one record may contribute to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Participation {
    /// At most one step.
    Single,
    /// `(k, b)` fixed-epoch-order: at most `epochs` steps, adjacent ones exactly `separation`
    /// steps apart (001 §2).
    FixedEpochOrder {
        /// `k ≥ 1`.
        epochs: usize,
        /// `b ≥ 1`.
        separation: usize,
    },
}

impl Participation {
    /// `(k, b)` participation; `k = 1` is single participation.
    pub fn fixed_epoch_order(epochs: usize, separation: usize) -> Result<Self> {
        if epochs == 0 || separation == 0 {
            return Err(Error::InvalidOption(format!(
                "(k, b) participation needs k ≥ 1 and b ≥ 1, got ({epochs}, {separation})"
            )));
        }
        Ok(if epochs == 1 {
            Participation::Single
        } else {
            Participation::FixedEpochOrder { epochs, separation }
        })
    }

    /// `k`, the most steps one record contributes to.
    pub fn max_participations(&self) -> usize {
        match *self {
            Participation::Single => 1,
            Participation::FixedEpochOrder { epochs, .. } => epochs,
        }
    }

    /// The maximal participation patterns over `n` steps: every pattern is a subset of one of
    /// these, so (the sensitivity being a maximum of a convex function over patterns) they are
    /// the only ones to check. Pattern `{s, s+b, …}` (at most `k` steps below `n`) is maximal
    /// when it does not fit inside the one starting at `s − b`.
    pub fn patterns(&self, n: usize) -> Vec<Vec<usize>> {
        match *self {
            Participation::Single => (0..n).map(|i| vec![i]).collect(),
            Participation::FixedEpochOrder { epochs, separation } => (0..n)
                .filter(|&s| s < separation || s + (epochs - 1) * separation < n)
                .map(|s| (s..n).step_by(separation).take(epochs).collect())
                .collect(),
        }
    }

    /// The blob's record of this schema.
    pub fn to_format(&self) -> Result<mfc_formats::Participation> {
        Ok(match *self {
            Participation::Single => mfc_formats::Participation::Single,
            Participation::FixedEpochOrder { epochs, separation } => {
                let field = |x: usize| {
                    u32::try_from(x).map_err(|_| {
                        Error::InvalidOption(format!("participation parameter {x} is too large"))
                    })
                };
                mfc_formats::Participation::FixedEpochOrder {
                    max_participations: field(epochs)?,
                    min_separation: field(separation)?,
                }
            }
        })
    }
}

/// A sensitivity and the method that produced it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sensitivity {
    /// `sens(C)` for contributions of norm at most 1 (an upper bound for the bound methods).
    pub value: f64,
    /// How `value` was obtained.
    pub method: SensitivityMethod,
}

/// The sensitivity of the encoder `c` under `participation`: exact when it can be (max column
/// norm for single participation; 001 Eq. 3 when every `X[π,π] ≥ 0`), otherwise the smaller of
/// the absolute-Gram and spectral (001 Thm 2.1) upper bounds. A NaN in `c` is an error, never a
/// small value.
pub fn sensitivity(c: MatRef<'_, f64>, participation: &Participation) -> Result<Sensitivity> {
    let n = c.ncols();
    if (0..n).any(|j| (0..c.nrows()).any(|i| !c[(i, j)].is_finite())) {
        return Err(Error::Numerical("the encoder is not finite".into()));
    }
    if let Participation::Single = participation {
        let value = (0..n).map(|j| c.col(j).norm_l2()).fold(0.0, f64::max);
        return Ok(Sensitivity {
            value,
            method: SensitivityMethod::MaxColumnNorm,
        });
    }
    let x = c.transpose() * c;
    let patterns = participation.patterns(n);
    let mut nonnegative = true;
    let mut absolute: f64 = 0.0;
    for pattern in &patterns {
        let mut total = 0.0;
        for &i in pattern {
            for &j in pattern {
                nonnegative &= x[(i, j)] >= 0.0;
                total += x[(i, j)].abs();
            }
        }
        absolute = absolute.max(total);
    }
    if nonnegative {
        return Ok(Sensitivity {
            value: absolute.sqrt(),
            method: SensitivityMethod::NonnegativeGram,
        });
    }
    let spectral = spectral_bound(x.as_ref(), &patterns, participation.max_participations())?;
    Ok(if spectral < absolute.sqrt() {
        Sensitivity {
            value: spectral,
            method: SensitivityMethod::SpectralBound,
        }
    } else {
        Sensitivity {
            value: absolute.sqrt(),
            method: SensitivityMethod::AbsoluteGramBound,
        }
    })
}

/// `√k · max_π ‖C[:,π]‖₂` from `X = CᵀC`: `‖C[:,π]‖₂² = λ_max(X[π,π])` (001 Thm 2.1).
fn spectral_bound(x: MatRef<'_, f64>, patterns: &[Vec<usize>], k: usize) -> Result<f64> {
    let mut lambda: f64 = 0.0;
    for pattern in patterns {
        let block = Mat::from_fn(pattern.len(), pattern.len(), |p, q| {
            x[(pattern[p], pattern[q])]
        });
        let eigenvalues = block
            .self_adjoint_eigenvalues(Side::Lower)
            .map_err(|e| Error::Numerical(format!("eigenvalues failed: {e:?}")))?;
        lambda = eigenvalues.iter().copied().fold(lambda, f64::max);
    }
    Ok((lambda * k as f64).sqrt())
}

/// The exact scalar (`d = 1`) sensitivity by enumerating every sign pattern `u ∈ {−1, 1}^π` of
/// every maximal pattern (001 §2: `|D| = b·2^k`); exponential in `k`, for tests and audits.
/// Refuses `k > 24`.
pub fn brute_force_sensitivity(c: MatRef<'_, f64>, participation: &Participation) -> Result<f64> {
    let k = participation.max_participations();
    if k > 24 {
        return Err(Error::InvalidOption(format!(
            "brute force over 2^{k} sign patterns is too large"
        )));
    }
    let n = c.ncols();
    let mut worst: f64 = 0.0;
    let mut image = vec![0.0; c.nrows()];
    for pattern in participation.patterns(n) {
        // u and −u give the same norm: fix the sign of the first step.
        for signs in 0u32..(1 << (pattern.len() - 1)) {
            image.fill(0.0);
            for (p, &j) in pattern.iter().enumerate() {
                let sign = if p > 0 && signs >> (p - 1) & 1 == 1 {
                    -1.0
                } else {
                    1.0
                };
                for (y, i) in image.iter_mut().zip(0..) {
                    *y += sign * c[(i, j)];
                }
            }
            worst = worst.max(image.iter().map(|y| y * y).sum::<f64>());
        }
    }
    Ok(worst.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn patterns_are_the_maximal_windows() {
        let p = Participation::fixed_epoch_order(3, 2).unwrap();
        assert_eq!(p.patterns(6), vec![vec![0, 2, 4], vec![1, 3, 5]]);
        // n > k·b: windows slide; {4, 6} is inside {2, 4, 6} and is not listed.
        assert_eq!(
            p.patterns(7),
            vec![vec![0, 2, 4], vec![1, 3, 5], vec![2, 4, 6]]
        );
        // n < k·b: fewer participations than k.
        assert_eq!(p.patterns(3), vec![vec![0, 2], vec![1]]);
        assert_eq!(Participation::Single.patterns(2), vec![vec![0], vec![1]]);
        assert_eq!(
            Participation::fixed_epoch_order(1, 5).unwrap(),
            Participation::Single
        );
        assert!(Participation::fixed_epoch_order(0, 5).is_err());
    }

    fn matrix(n: usize, values: &[f64]) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| values[i * n + j])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any C: the exact method (when it claims exactness) equals brute force, and every
        /// bound is at least brute force.
        #[test]
        fn methods_agree_with_brute_force(
            n in 2usize..9,
            k in 1usize..5,
            b in 1usize..5,
            values in proptest::collection::vec(-1.0f64..1.0, 81),
            nonnegative in any::<bool>(),
        ) {
            let c = matrix(n, &values);
            // A non-negative C has a non-negative Gram matrix: the exact case.
            let c = if nonnegative { Mat::from_fn(n, n, |i, j| c[(i, j)].abs()) } else { c };
            let p = Participation::fixed_epoch_order(k, b.min(n)).unwrap();
            let truth = brute_force_sensitivity(c.as_ref(), &p).unwrap();
            let s = sensitivity(c.as_ref(), &p).unwrap();
            match s.method {
                SensitivityMethod::MaxColumnNorm | SensitivityMethod::NonnegativeGram => {
                    prop_assert!((s.value - truth).abs() <= 1e-12 * truth.max(1.0),
                        "{:?}: {} vs brute force {}", s.method, s.value, truth);
                }
                _ => prop_assert!(s.value >= truth * (1.0 - 1e-12), "{s:?} < {truth}"),
            }
            if nonnegative {
                prop_assert!(matches!(s.method,
                    SensitivityMethod::NonnegativeGram | SensitivityMethod::MaxColumnNorm));
            }
            let x = c.transpose() * &c;
            let spectral = spectral_bound(x.as_ref(), &p.patterns(n), p.max_participations())
                .unwrap();
            prop_assert!(spectral >= truth * (1.0 - 1e-12));
        }
    }

    /// A case where the Gram matrix has a negative entry inside a pattern: the exact formula
    /// would be wrong (too small) and is not used.
    #[test]
    fn a_negative_gram_entry_falls_back_to_a_bound() {
        // Columns 0 and 1 at an angle of 120°: 1ᵀX1 = 1 + 1 − 1 = 1, but u = (1, −1) gives 3.
        let h = 3f64.sqrt() / 2.0;
        let c = Mat::from_fn(2, 2, |i, j| [[1.0, -0.5], [0.0, h]][i][j]);
        let p = Participation::fixed_epoch_order(2, 1).unwrap();
        let truth = brute_force_sensitivity(c.as_ref(), &p).unwrap();
        assert!((truth - 3f64.sqrt()).abs() < 1e-12);
        let s = sensitivity(c.as_ref(), &p).unwrap();
        assert_ne!(s.method, SensitivityMethod::NonnegativeGram);
        assert!(s.value >= truth - 1e-12, "{s:?}");
        let nan = Mat::from_fn(2, 2, |i, j| if i == j { f64::NAN } else { 0.0 });
        assert!(sensitivity(nan.as_ref(), &p).is_err());
    }
}
