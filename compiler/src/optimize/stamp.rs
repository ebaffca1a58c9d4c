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

/// The candidate stamp counts [`choose_stamps`] tries: those of this list that divide `n`
/// (001 App. D.5 sweeps `s ∈ {1, 2, 5, 10, 20}`).
pub const STAMP_CANDIDATES: [usize; 8] = [1, 2, 4, 5, 8, 10, 16, 20];

/// Chooses the number of stamps by loss (001 App. D.4, "Optimizing over s"): compiles the dense
/// optimum for every candidate dividing `n` and evaluates it under the participation schema of
/// `options`. Returns `(s, loss)` for every candidate tried, best first.
pub fn choose_stamps(
    a: MatRef<'_, f64>,
    options: &crate::forms::banded::CompileOptions,
) -> Result<Vec<(usize, f64)>> {
    let n = a.nrows();
    let mut tried = Vec::new();
    for s in STAMP_CANDIDATES.into_iter().filter(|s| n % s == 0) {
        let candidate = crate::forms::banded::CompileOptions {
            stamps: s,
            ..options.clone()
        };
        let (_, x) = crate::forms::banded::optimal_gram(a, &candidate, &mut |_| {})?;
        let evaluated = evaluate_gram(a, x.as_ref(), &options.participation)?;
        tried.push((s, evaluated.loss));
    }
    tried.sort_by(|p, q| p.1.total_cmp(&q.1));
    Ok(tried)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forms::banded::CompileOptions;
    use crate::workload::Workload;

    /// Stamping is block-diagonal in C (so in X), the stamped factorization reproduces A, and
    /// under many participations some s > 1 beats the unstamped single-epoch optimum (001 Table
    /// 1: MF(k=1, n=1000)×2 < MF(k=1, n=2000)).
    #[test]
    fn stamping_factorizes_and_is_chosen_by_loss() {
        let n = 40;
        let a = Workload::PrefixSum.matrix(n).unwrap();
        let x = Mat::from_fn(4, 4, |i, j| if i == j { 2.0 } else { 0.5 });
        let stamped = stamp(x.as_ref(), 3);
        assert_eq!(stamped.nrows(), 12);
        assert_eq!(stamped[(5, 6)], 0.5);
        assert_eq!(stamped[(3, 4)], 0.0);
        let options = CompileOptions {
            participation: Participation::fixed_epoch_order(8, 5).unwrap(),
            ..CompileOptions::default()
        };
        let single_epoch = CompileOptions {
            participation: Participation::Single,
            ..options.clone()
        };
        // Optimize for one participation (as the paper's MF(k=1) rows) but evaluate under (8, 5).
        let tried: Vec<(usize, f64)> = STAMP_CANDIDATES
            .into_iter()
            .filter(|s| n % s == 0)
            .map(|s| {
                let o = CompileOptions {
                    stamps: s,
                    ..single_epoch.clone()
                };
                let (_, x) =
                    crate::forms::banded::optimal_gram(a.as_ref(), &o, &mut |_| {}).unwrap();
                let e = evaluate_gram(a.as_ref(), x.as_ref(), &options.participation).unwrap();
                let product = &e.decoder * &e.encoder;
                assert!((&product - &a).norm_max() < 1e-9);
                (s, e.loss)
            })
            .collect();
        let unstamped = tried[0].1;
        assert!(
            tried.iter().any(|&(s, l)| s > 1 && l < unstamped),
            "{tried:?}"
        );
        let chosen = choose_stamps(a.as_ref(), &options).unwrap();
        assert!(chosen.windows(2).all(|w| w[0].1 <= w[1].1));
    }
}
