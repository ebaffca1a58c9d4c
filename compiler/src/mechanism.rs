//! The compile pipeline, pure math: optimum → streaming factorization → compression →
//! normalization → rounding to the stored precision → the sensitivity of what ships.
//!
//! The privacy-critical number is [`CompiledMechanism::sensitivity`]: the sensitivity, under the
//! declared participation schema, of the encoder `Ĉ = B̂⁻¹A` implied by the decoder **after** it
//! was rounded to `f32`, i.e. of exactly the coefficients the blob stores and the runtime
//! multiplies by (Denisov et al. 2022, App. H: "an optimal `C_B̂` can be found … as `B̂⁻¹S`";
//! for `(k, b)` participation, [`participation::sensitivity`](crate::participation::sensitivity)).

use faer::{Mat, MatRef};
use mfc_formats::SensitivityMethod;

use crate::compress::{BandedLowRank, CompressOptions, compress};
use crate::multi_epoch::{MultiEpochOptions, optimize_multi_epoch};
use crate::optimize::{OptimizeOptions, Optimum, Progress, optimize_single_participation};
use crate::participation::{Participation, sensitivity};
use crate::sensitivity::{encoder_for_decoder, loss, per_step_variance};
use crate::stamp::{evaluate_gram, stamp};
use crate::{Error, Result};

/// A compiled banded-plus-low-rank mechanism, ready to be written as a blob.
#[derive(Debug, Clone)]
pub struct CompiledMechanism {
    /// The certified optimum the decoder approximates (of one stamp's block when stamped).
    pub optimum: Optimum,
    /// The participation schema the sensitivity is computed for.
    pub participation: Participation,
    /// How many times the block encoder is repeated (1: not stamped).
    pub stamps: usize,
    /// What ships: normalized so the encoder has sensitivity ≈ 1, every coefficient an `f32`.
    pub compressed: BandedLowRank,
    /// `sens(B̂⁻¹A)` under `participation`, computed from the stored (rounded) coefficients.
    pub sensitivity: f64,
    /// How `sensitivity` was computed (exact or an upper bound).
    pub sensitivity_method: SensitivityMethod,
    /// `sqrt(L)` of what ships: `sens·‖B̂‖_F`.
    pub sqrt_loss: f64,
    /// `sqrt(L)` of the uncompressed (dense) mechanism under `participation`.
    pub optimal_sqrt_loss: f64,
    /// `sens²·‖B̂[i,:]‖²` for every step: the variance profile (001 Fig. 4).
    pub per_step_variance: Vec<f64>,
}

/// Everything [`compile`] needs besides the workload and the compressed form.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// The participation schema the mechanism is optimized and certified for.
    pub participation: Participation,
    /// Repeat an encoder optimized for `n / stamps` steps `stamps` times (001 D.4); must divide
    /// `n`.
    pub stamps: usize,
    /// The single-participation optimizer.
    pub optimize: OptimizeOptions,
    /// The multi-epoch optimizer (used when a block holds more than one participation).
    pub multi_epoch: MultiEpochOptions,
    /// The compression of the decoder.
    pub compression: CompressOptions,
}

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            participation: Participation::Single,
            stamps: 1,
            optimize: OptimizeOptions::default(),
            multi_epoch: MultiEpochOptions::default(),
            compression: CompressOptions::default(),
        }
    }
}

/// The sensitivity under `participation` and the loss of a decoder as stored.
fn shipped(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    participation: &Participation,
) -> Result<(f64, SensitivityMethod, f64, Vec<f64>)> {
    let dense = decoder.to_dense();
    let encoder = encoder_for_decoder(a, dense.as_ref())?;
    let s = sensitivity(encoder.as_ref(), participation)?;
    if !(s.value.is_finite() && s.value > 0.0) {
        return Err(Error::Numerical(format!(
            "the shipped encoder has sensitivity {}",
            s.value
        )));
    }
    Ok((
        s.value,
        s.method,
        loss(dense.as_ref(), s.value),
        per_step_variance(dense.as_ref(), s.value),
    ))
}

/// The optimal Gram matrix `X = CᵀC` for `participation`, optimized on a block of `n / stamps`
/// steps (the leading block of `A`) and stamped to `n`: single participation by φ (003 §3),
/// several participations per block by the multi-epoch optimizer (001 §3).
pub fn optimal_gram(
    a: MatRef<'_, f64>,
    options: &CompileOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Optimum, Mat<f64>)> {
    let n = a.nrows();
    let stamps = options.stamps;
    if stamps == 0 || n % stamps != 0 {
        return Err(Error::InvalidOption(format!(
            "the number of stamps must divide n = {n}, got {stamps}"
        )));
    }
    if let Participation::FixedEpochOrder { separation, .. } = options.participation {
        if separation > n {
            return Err(Error::InvalidOption(format!(
                "the separation b = {separation} exceeds the n = {n} steps"
            )));
        }
    }
    let block = n / stamps;
    let head = a.submatrix(0, 0, block, block).to_owned();
    let optimum = match options.participation {
        Participation::FixedEpochOrder { separation, .. } if separation < block => {
            optimize_multi_epoch(head.as_ref(), separation, &options.multi_epoch, progress)?
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

/// Compiles the optimal single-participation mechanism for `a`, compressed to `(band, rank)`.
pub fn compile_banded(
    a: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    optimize: &OptimizeOptions,
    compression: &CompressOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<CompiledMechanism> {
    let options = CompileOptions {
        optimize: optimize.clone(),
        compression: compression.clone(),
        ..CompileOptions::default()
    };
    compile(a, band, rank, &options, progress)
}

/// Compiles a mechanism for `a` under `options.participation` (optionally stamped), compressed
/// to `(band, rank)`, normalized and rounded, with the sensitivity of what ships.
///
/// Under multiple participation the loss refinement of [`refine_for_shipped_loss`] (whose
/// surrogate is the single-participation column norm) is skipped: the ALS fit ships.
pub fn compile(
    a: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    options: &CompileOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<CompiledMechanism> {
    let n = a.nrows();
    if band == 0 || band > n {
        return Err(Error::InvalidOption(format!(
            "the band h must be in 1..={n}, got {band}"
        )));
    }
    let participation = options.participation;
    let (optimum, x) = optimal_gram(a, options, progress)?;
    let dense = evaluate_gram(a, x.as_ref(), &participation)?;
    let fitted = compress(dense.decoder.as_ref(), band, rank, &options.compression)?;
    let compressed = match participation {
        Participation::Single => {
            refine_for_shipped_loss(a, &fitted, options.compression.refine_iterations)?
        }
        Participation::FixedEpochOrder { .. } => fitted,
    };
    // Normalize so that B̂⁻¹A has sensitivity 1, then round to what the blob stores, then
    // measure the sensitivity again from the rounded coefficients: that is the value recorded.
    let (approximate, ..) = shipped(a, &compressed, &participation)?;
    let stored = compressed.scaled(approximate).rounded_to_f32();
    let (sensitivity, sensitivity_method, shipped_loss, per_step_variance) =
        shipped(a, &stored, &participation)?;
    Ok(CompiledMechanism {
        optimal_sqrt_loss: dense.loss.sqrt(),
        optimum,
        participation,
        stamps: options.stamps,
        compressed: stored,
        sensitivity,
        sensitivity_method,
        sqrt_loss: shipped_loss.sqrt(),
        per_step_variance,
    })
}

/// Exponent of the smooth maximum in [`refine_for_shipped_loss`].
const SMOOTH_MAX_EXPONENT: f64 = 256.0;

/// The true loss `sens(B̂⁻¹A)²‖B̂‖_F²`, the smooth surrogate `s_p²‖B̂‖_F²` with
/// `s_p² = (Σ_j ‖ĉ_j‖^{2p})^{1/p}`, and the surrogate's gradient with respect to the lower
/// triangle of `B̂`: `−2‖B̂‖_F² B̂^{-T} Ĉ W Ĉᵀ + 2 s_p² B̂`, `W = diag((‖ĉ_j‖²/s_p²)^{p−1})`
/// (from `dĈ = −B̂⁻¹ dB̂ Ĉ`).
fn surrogate(a: MatRef<'_, f64>, decoder: &BandedLowRank) -> Result<(f64, f64, Mat<f64>)> {
    let b = decoder.to_dense();
    let c = encoder_for_decoder(a, b.as_ref())?;
    let n = b.nrows();
    let norms: Vec<f64> = (0..n).map(|j| c.col(j).squared_norm_l2()).collect();
    let top = norms.iter().copied().fold(0.0, f64::max);
    let p = SMOOTH_MAX_EXPONENT;
    let s2 = top
        * norms
            .iter()
            .map(|x| (x / top).powf(p))
            .sum::<f64>()
            .powf(1.0 / p);
    let frob = b.squared_norm_l2();
    if !(top * frob).is_finite() || top <= 0.0 {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    let weights: Vec<f64> = norms.iter().map(|x| (x / s2).powf(p - 1.0)).collect();
    let weighted = Mat::from_fn(n, n, |i, j| c[(i, j)] * weights[j]);
    let mut y = &weighted * c.transpose();
    b.transpose().solve_upper_triangular_in_place(y.as_mut());
    let gradient = Mat::from_fn(n, n, |i, j| {
        if j <= i {
            -2.0 * frob * y[(i, j)] + 2.0 * s2 * b[(i, j)]
        } else {
            0.0
        }
    });
    Ok((top * frob, s2 * frob, gradient))
}

/// The gradient with respect to the stored parameters (`D`, `L`, `R`) by the chain rule.
fn parameter_gradient(decoder: &BandedLowRank, g: &Mat<f64>) -> BandedLowRank {
    let (n, h, r) = (decoder.steps, decoder.band, decoder.rank);
    let mut out = BandedLowRank {
        diagonals: vec![0.0; n * h],
        left: vec![0.0; n * r],
        right: vec![0.0; n * r],
        ..decoder.clone()
    };
    for i in 0..n {
        for k in 0..h.min(i + 1) {
            out.diagonals[i * h + k] = g[(i, i - k)];
        }
    }
    for i in h..n {
        for j in 0..=i - h {
            let gij = g[(i, j)];
            for q in 0..r {
                out.left[i * r + q] += gij * decoder.right[j * r + q];
                out.right[j * r + q] += gij * decoder.left[i * r + q];
            }
        }
    }
    out
}

/// Lowers the loss that ships, `sens(B̂⁻¹A)²‖B̂‖_F²` (003 Eq. 2 with the encoder of 000 App. H),
/// directly: gradient descent with backtracking on a smooth-maximum surrogate, starting from the
/// ALS fit. Returns the iterate with the smallest *true* loss, so it never does worse than
/// `start`. On the prefix sum this removes 30-40% of ALS's excess over the optimum.
pub fn refine_for_shipped_loss(
    a: MatRef<'_, f64>,
    start: &BandedLowRank,
    iterations: usize,
) -> Result<BandedLowRank> {
    let (mut best_loss, mut value, mut gradient) = surrogate(a, start)?;
    let mut best = start.clone();
    let mut current = start.clone();
    let mut t = 1e-4 / value;
    for _ in 0..iterations {
        let direction = parameter_gradient(&current, &gradient);
        let norm2: f64 = direction
            .diagonals
            .iter()
            .chain(&direction.left)
            .chain(&direction.right)
            .map(|x| x * x)
            .sum();
        if !(norm2.is_finite() && norm2 > 0.0) {
            break;
        }
        let mut accepted = false;
        for _ in 0..40 {
            let axpy = |x: &[f64], d: &[f64]| x.iter().zip(d).map(|(x, d)| x - t * d).collect();
            let candidate = BandedLowRank {
                diagonals: axpy(&current.diagonals, &direction.diagonals),
                left: axpy(&current.left, &direction.left),
                right: axpy(&current.right, &direction.right),
                ..current.clone()
            };
            if let Ok((true_loss, v, g)) = surrogate(a, &candidate) {
                if v <= value - 1e-4 * t * norm2 {
                    if true_loss < best_loss {
                        best_loss = true_loss;
                        best = candidate.clone();
                    }
                    current = candidate;
                    value = v;
                    gradient = g;
                    accepted = true;
                    break;
                }
            }
            t *= 0.5;
        }
        if !accepted {
            break;
        }
        t *= 2.0;
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn compiled(n: usize, h: usize, r: usize) -> CompiledMechanism {
        compiled_with(n, h, r, &CompressOptions::default())
    }

    fn compiled_with(n: usize, h: usize, r: usize, options: &CompressOptions) -> CompiledMechanism {
        let a = Workload::PrefixSum.matrix(n).unwrap();
        compile_banded(
            a.as_ref(),
            h,
            r,
            &OptimizeOptions::default(),
            options,
            &mut |_| {},
        )
        .unwrap()
    }

    /// Denisov et al. 2022, App. H, Table 2: (4, 4) at n = 256 and (5, 4) at n = 512.
    #[test]
    fn compressed_mechanisms_match_the_paper() {
        for (n, h, r, bound) in [(256, 4, 4, 40.50), (512, 5, 4, 62.30)] {
            let start = std::time::Instant::now();
            let c = compiled(n, h, r);
            eprintln!(
                "n = {n} ({h}, {r}): shipped sqrt(L) = {:.4} (optimum {:.4}), sensitivity {:.8}, {:.2} s",
                c.sqrt_loss,
                c.optimal_sqrt_loss,
                c.sensitivity,
                start.elapsed().as_secs_f64()
            );
            assert!(
                c.sqrt_loss <= bound,
                "n = {n} ({h}, {r}): sqrt(L) = {}",
                c.sqrt_loss
            );
            assert!(c.sqrt_loss >= c.optimum.dual_bound.sqrt());
            assert!((c.sensitivity - 1.0).abs() < 1e-5, "{}", c.sensitivity);
            // The loss refinement never ships anything worse than the plain ALS fit.
            let als = compiled_with(
                n,
                h,
                r,
                &CompressOptions {
                    refine_iterations: 0,
                    ..Default::default()
                },
            );
            eprintln!(
                "n = {n} ({h}, {r}): plain ALS sqrt(L) = {:.4}",
                als.sqrt_loss
            );
            assert!(c.sqrt_loss <= als.sqrt_loss * (1.0 + 1e-6));
        }
    }

    #[test]
    fn shipped_coefficients_are_f32_and_loss_is_consistent() {
        let c = compiled(40, 3, 2);
        let d = &c.compressed;
        assert!(
            d.diagonals
                .iter()
                .chain(&d.left)
                .chain(&d.right)
                .all(|&x| f64::from(x as f32) == x)
        );
        let total: f64 = c.per_step_variance.iter().sum();
        assert!((total.sqrt() - c.sqrt_loss).abs() <= 1e-12 * c.sqrt_loss);
        // The full band is exact: (h, r) = (n, 0) ships the optimum itself (up to f32 rounding).
        let exact = compiled(24, 24, 0);
        assert!(
            (exact.sqrt_loss - exact.optimal_sqrt_loss).abs() <= 1e-5 * exact.optimal_sqrt_loss
        );
    }
}
