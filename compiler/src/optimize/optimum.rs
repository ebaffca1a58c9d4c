//! The dense optimum of the total loss for a participation schema, the decoder every compressed
//! form approximates and the floor `mfc compare` prints: under single participation the fixed
//! point φ (003 §3, certified by its dual, [`super::single`]); under fixed epoch order the
//! multi-epoch optimizer (001 §3, certified for its class, [`super::multi_epoch`]); under
//! min-separation the banded optimizer (BandMF with `b` bands, [`super::banded::general`],
//! `O(n·b²)` per evaluation for the prefix sum and momentum, not certified) — each optimized on
//! a block of `n / s` steps and stamped (001 App. D.4), with the number of stamps chosen by
//! loss ([`choose_stamps`]).

use faer::{Mat, MatRef};

use std::ops::ControlFlow;

use crate::optimize::banded::general::{GeneralOptions, optimize_min_separation};
use crate::optimize::multi_epoch::{MultiEpochOptions, optimize_multi_epoch};
use crate::optimize::single::{OptimizeOptions, Optimum, Progress, optimize_single_participation};
use crate::optimize::stamp::{Evaluated, evaluate_gram, stamp};
use crate::privacy::participation::Participation;
use crate::{Error, Result};

/// The schema, the stamps and the optimizers of [`optimal_gram`].
#[derive(Debug, Clone)]
pub struct OptimumOptions {
    /// The participation schema the mechanism is optimized and certified for.
    pub participation: Participation,
    /// Repeat an encoder optimized for `n / stamps` steps `stamps` times (001 App. D.4); must
    /// divide `n`.
    pub stamps: usize,
    /// The single-participation optimizer.
    pub optimize: OptimizeOptions,
    /// The multi-epoch optimizer (fixed epoch order, when a block holds more than one
    /// participation).
    pub multi_epoch: MultiEpochOptions,
    /// The banded optimizer (min-separation, when a block holds more than one participation);
    /// by default within [`SECONDS_BUDGET`](crate::optimize::banded::general::SECONDS_BUDGET).
    pub banded: GeneralOptions,
}

impl Default for OptimumOptions {
    fn default() -> Self {
        Self {
            participation: Participation::Single,
            stamps: 1,
            optimize: OptimizeOptions::default(),
            multi_epoch: MultiEpochOptions::default(),
            banded: GeneralOptions {
                seconds_budget: Some(crate::optimize::banded::general::SECONDS_BUDGET),
                ..GeneralOptions::default()
            },
        }
    }
}

/// Whether the dual bound of [`optimal_gram`]'s optimum is a lower bound on the loss of every
/// factorization in the optimized class under `participation`: for single participation always
/// (003 Thm 3.2); for fixed epoch order always, for any `k` (the multi-epoch optimizer constrains
/// every window of `k` consecutive steps `b` apart, and its bound maximizes over the sets of
/// steps at least `k` apart in class positions: [`crate::optimize::multi_epoch`]); never for
/// min-separation (the banded optimizer has no dual).
pub fn certificate_holds(participation: &Participation) -> bool {
    match *participation {
        Participation::Single | Participation::FixedEpochOrder { .. } => true,
        Participation::MinSeparation { .. } => false,
    }
}

/// The optimal Gram matrix `X = CᵀC` for `participation`, optimized on a block of `n / stamps`
/// steps (the leading block of `A`) and stamped to `n`: single participation by φ (003 §3),
/// several participations per block by the multi-epoch optimizer (001 §3) for fixed epoch order
/// and by the banded optimizer (BandMF with `b` bands, [`optimize_min_separation`]) for
/// min-separation. [`certificate_holds`] says whether the optimum's dual bound is a certificate.
pub fn optimal_gram(
    a: MatRef<'_, f64>,
    options: &OptimumOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Optimum, Mat<f64>)> {
    let n = a.nrows();
    let stamps = options.stamps;
    if stamps == 0 || n % stamps != 0 {
        return Err(Error::InvalidArgument(format!(
            "the number of stamps must divide n = {n}, got {stamps}"
        )));
    }
    if let Some(separation) = options.participation.separation() {
        if separation > n {
            return Err(Error::InvalidArgument(format!(
                "the separation b = {separation} exceeds the n = {n} steps"
            )));
        }
    }
    let block = n / stamps;
    let head = a.submatrix(0, 0, block, block).to_owned();
    // A block shorter than the separation holds one participation at most.
    let optimum = match options.participation {
        Participation::FixedEpochOrder { epochs, separation } if separation < block => {
            optimize_multi_epoch(
                head.as_ref(),
                epochs,
                separation,
                &options.multi_epoch,
                progress,
            )?
        }
        Participation::MinSeparation { min_separation, .. } if min_separation < block => {
            optimize_min_separation(
                head.as_ref(),
                &options.participation,
                &options.banded,
                &mut |p| {
                    progress(p);
                    ControlFlow::Continue(())
                },
            )?
        }
        _ => optimize_single_participation(head.as_ref(), &options.optimize, progress)?,
    };
    let x = if stamps == 1 {
        optimum.x.clone()
    } else {
        stamp(optimum.x.as_ref(), stamps)
    };
    Ok((optimum, x))
}

/// The candidate stamp counts [`choose_stamps`] tries: those of this list that divide `n`
/// (001 App. D.5 sweeps `s ∈ {1, 2, 5, 10, 20}`).
pub const STAMP_CANDIDATES: [usize; 8] = [1, 2, 4, 5, 8, 10, 16, 20];

/// Chooses the number of stamps by loss (001 App. D.4, "Optimizing over s"): compiles the dense
/// optimum for every candidate dividing `n` and evaluates it under the participation schema of
/// `options`. Returns `(s, loss)` for every candidate tried, best first.
pub fn choose_stamps(a: MatRef<'_, f64>, options: &OptimumOptions) -> Result<Vec<(usize, f64)>> {
    let mut tried = Vec::new();
    stamped_optima(a, options, &STAMP_CANDIDATES, &mut |s, evaluated| {
        tried.push((s, evaluated.loss));
    })?;
    tried.sort_by(|p, q| p.1.total_cmp(&q.1));
    Ok(tried)
}

/// For every stamp count `s` of `candidates` that divides `n`: the optimum of `n/s` steps
/// stamped `s` times under `options`, evaluated under its participation schema and handed to
/// `visit` (one at a time: the caller keeps what it needs).
pub fn stamped_optima(
    a: MatRef<'_, f64>,
    options: &OptimumOptions,
    candidates: &[usize],
    visit: &mut dyn FnMut(usize, Evaluated),
) -> Result<()> {
    let n = a.nrows();
    for &s in candidates.iter().filter(|&&s| s > 0 && n % s == 0) {
        let candidate = OptimumOptions {
            stamps: s,
            ..options.clone()
        };
        let (_, x) = optimal_gram(a, &candidate, &mut |_| {})?;
        visit(s, evaluate_gram(a, x.as_ref(), &options.participation)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::stamp::{evaluate_gram, stamp};
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
        let options = OptimumOptions {
            participation: Participation::fixed_epoch_order(8, 5).unwrap(),
            ..OptimumOptions::default()
        };
        let single_epoch = OptimumOptions {
            participation: Participation::Single,
            ..options.clone()
        };
        // Optimize for one participation (as the paper's MF(k=1) rows) but evaluate under (8, 5).
        let tried: Vec<(usize, f64)> = STAMP_CANDIDATES
            .into_iter()
            .filter(|s| n % s == 0)
            .map(|s| {
                let o = OptimumOptions {
                    stamps: s,
                    ..single_epoch.clone()
                };
                let (_, x) = optimal_gram(a.as_ref(), &o, &mut |_| {}).unwrap();
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
