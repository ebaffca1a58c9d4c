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

use crate::banded::{BandedOptions, optimize_min_separation};
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
    /// The multi-epoch optimizer (fixed epoch order, when a block holds more than one
    /// participation).
    pub multi_epoch: MultiEpochOptions,
    /// The banded optimizer (min-separation, when a block holds more than one participation).
    pub banded: BandedOptions,
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
            banded: BandedOptions::default(),
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
    if let Some(separation) = options.participation.separation() {
        if separation > n {
            return Err(Error::InvalidOption(format!(
                "the separation b = {separation} exceeds the n = {n} steps"
            )));
        }
    }
    let block = n / stamps;
    let head = a.submatrix(0, 0, block, block).to_owned();
    // A block shorter than the separation holds one participation at most.
    let optimum = match options.participation {
        Participation::FixedEpochOrder { separation, .. } if separation < block => {
            optimize_multi_epoch(head.as_ref(), separation, &options.multi_epoch, progress)?
        }
        Participation::MinSeparation { min_separation, .. } if min_separation < block => {
            optimize_min_separation(
                head.as_ref(),
                &options.participation,
                &options.banded,
                progress,
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
    let compressed = refine_for_shipped_loss(
        a,
        &fitted,
        &participation,
        options.compression.refine_iterations,
    )?;
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

/// Exponent of the smooth maximum in [`refine_for_shipped_loss`] (the `p`-norm over `P`
/// patterns exceeds the maximum by at most a factor `P^{1/p}`; the iterate kept is the best by
/// the maximum itself). Sharper exponents, tried in stages, did not do better at n = 512.
const SMOOTH_MAX_EXPONENT: f64 = 256.0;

/// The smooth surrogate of the shipped loss over a set of participation patterns `P`:
/// `s_p²‖B̂‖_F²` with `s_p² = (Σ_{π∈P} q_π^p)^{1/p}`, `q_π = Σ_{i,j∈π} |X_ij|` and `X = ĈᵀĈ`,
/// `Ĉ = B̂⁻¹A` (for single participation, `q_j = ‖ĉ_j‖²`), together with `max_π q_π·‖B̂‖_F²` and
/// the surrogate's gradient with respect to the lower triangle of `B̂`:
/// `−2‖B̂‖_F² B̂^{-T} Ĉ W Ĉᵀ + 2 s_p² B̂` with `W = Σ_π (q_π/s_p²)^{p−1} sign(X[π,π])`
/// (from `dq_π = 2⟨Ĉ sign(X[π,π]), dĈ⟩` and `dĈ = −B̂⁻¹ dB̂ Ĉ`).
struct Surrogate {
    /// `max_{π∈P} q_π·‖B̂‖_F²`: the shipped loss when `P` holds every maximal pattern.
    pattern_loss: f64,
    /// `s_p²‖B̂‖_F²`.
    value: f64,
    gradient: Mat<f64>,
}

fn surrogate(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    patterns: &[Vec<usize>],
    p: f64,
) -> Result<Surrogate> {
    let b = decoder.to_dense();
    let c = encoder_for_decoder(a, b.as_ref())?;
    let n = b.nrows();
    let single = patterns.iter().all(|p| p.len() <= 1);
    let x = if single {
        None
    } else {
        Some(c.transpose() * &c)
    };
    let gram = |i: usize, j: usize| match &x {
        Some(x) => x[(i, j)],
        None => c.col(i).squared_norm_l2(),
    };
    let q: Vec<f64> = patterns
        .iter()
        .map(|p| {
            p.iter()
                .flat_map(|&i| p.iter().map(move |&j| (i, j)))
                .map(|(i, j)| gram(i, j).abs())
                .sum()
        })
        .collect();
    let top = q.iter().copied().fold(0.0, f64::max);
    let s2 = top
        * q.iter()
            .map(|x| (x / top).powf(p))
            .sum::<f64>()
            .powf(1.0 / p);
    let frob = b.squared_norm_l2();
    if !(top * frob).is_finite() || top <= 0.0 {
        return Err(Error::Numerical("the refined decoder is degenerate".into()));
    }
    let mut w = Mat::<f64>::zeros(n, n);
    for (pattern, qp) in patterns.iter().zip(&q) {
        let weight = (qp / s2).powf(p - 1.0);
        if weight < 1e-300 {
            continue;
        }
        for &i in pattern {
            for &j in pattern {
                w[(i, j)] += weight * gram(i, j).signum();
            }
        }
    }
    let mut y = &c * &w * c.transpose();
    b.transpose().solve_upper_triangular_in_place(y.as_mut());
    let gradient = Mat::from_fn(n, n, |i, j| {
        if j <= i {
            -2.0 * frob * y[(i, j)] + 2.0 * s2 * b[(i, j)]
        } else {
            0.0
        }
    });
    Ok(Surrogate {
        pattern_loss: top * frob,
        value: s2 * frob,
        gradient,
    })
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

impl BandedLowRank {
    /// The stored parameters `(D, L, R)` as one vector.
    fn parameters(&self) -> Vec<f64> {
        [&self.diagonals[..], &self.left, &self.right].concat()
    }

    /// The decoder of the same shape with parameters `x` (as [`BandedLowRank::parameters`]).
    fn with_parameters(&self, x: &[f64]) -> Self {
        let (d, rest) = x.split_at(self.diagonals.len());
        let (l, r) = rest.split_at(self.left.len());
        Self {
            diagonals: d.to_vec(),
            left: l.to_vec(),
            right: r.to_vec(),
            ..self.clone()
        }
    }
}

/// The surrogate at one parameter vector, for [`minimize`](crate::lbfgs::minimize).
struct Refinement {
    /// `max_π q_π·‖B̂‖_F²` (see [`Surrogate`]).
    pattern_loss: f64,
    value: f64,
    gradient: Vec<f64>,
}

impl crate::lbfgs::Point for Refinement {
    fn value(&self) -> f64 {
        self.value
    }
    fn gradient(&self) -> &[f64] {
        &self.gradient
    }
}

/// L-BFGS on the surrogate over `patterns` from `start`; returns the iterate with the smallest
/// pattern loss (the shipped loss when `patterns` are all the maximal ones), never worse than
/// `start` by that measure.
fn descend(
    a: MatRef<'_, f64>,
    start: &BandedLowRank,
    patterns: &[Vec<usize>],
    iterations: usize,
) -> Result<BandedLowRank> {
    let p = SMOOTH_MAX_EXPONENT;
    let evaluate = |x: &[f64]| {
        let decoder = start.with_parameters(x);
        let s = surrogate(a, &decoder, patterns, p).ok()?;
        let gradient = parameter_gradient(&decoder, &s.gradient).parameters();
        (s.value.is_finite() && gradient.iter().all(|g| g.is_finite())).then_some(Refinement {
            pattern_loss: s.pattern_loss,
            value: s.value,
            gradient,
        })
    };
    let x0 = start.parameters();
    let first = evaluate(&x0)
        .ok_or_else(|| Error::Numerical("the decoder to refine is degenerate".into()))?;
    let mut best = (first.pattern_loss, x0.clone());
    let (x, last, _) = crate::lbfgs::minimize(
        x0,
        first,
        10,
        iterations,
        &mut |x| evaluate(x),
        &mut |_, x, p| {
            if p.pattern_loss < best.0 {
                best = (p.pattern_loss, x.to_vec());
            }
            Ok(false)
        },
    )?;
    if last.pattern_loss < best.0 {
        best = (last.pattern_loss, x);
    }
    Ok(start.with_parameters(&best.1))
}

/// The same decoder with `L` and `R` in balanced form: `L' = U_L P Σ^{1/2}`, `R' = U_R Q Σ^{1/2}`
/// where `L = U_L S_L V_Lᵀ`, `R = U_R S_R V_Rᵀ` (thin SVDs) and `S_L V_Lᵀ V_R S_R = P Σ Qᵀ`, so
/// `L' R'ᵀ = L Rᵀ` and `‖L'‖_F² + ‖R'‖_F²` is the least any factorization of the product has.
/// The refinement moves `(L, R)` freely along the gauge `(L T, R T⁻ᵀ)`; unbalanced factors make
/// the device's `f32` arithmetic cancel (at n = 200 under min-separation, entries of 36 for
/// products below 0.7).
fn balanced(decoder: &BandedLowRank) -> Result<BandedLowRank> {
    let (n, r) = (decoder.steps, decoder.rank);
    if r == 0 {
        return Ok(decoder.clone());
    }
    let svd_of = |m: Mat<f64>| {
        m.thin_svd()
            .map_err(|e| Error::Numerical(format!("SVD failed: {e:?}")))
    };
    let l = svd_of(Mat::from_fn(n, r, |i, q| decoder.left[i * r + q]))?;
    let rr = svd_of(Mat::from_fn(n, r, |i, q| decoder.right[i * r + q]))?;
    let (sl, sr) = (l.S(), rr.S());
    let core = Mat::from_fn(r, r, |p, q| {
        (0..r)
            .map(|t| sl[p] * l.V()[(t, p)] * rr.V()[(t, q)] * sr[q])
            .sum::<f64>()
    });
    let k = svd_of(core)?;
    let left_factor = l.U() * k.U();
    let right_factor = rr.U() * k.V();
    let mut out = decoder.clone();
    for q in 0..r {
        let s = k.S()[q].sqrt();
        for i in 0..n {
            out.left[i * r + q] = left_factor[(i, q)] * s;
            out.right[i * r + q] = right_factor[(i, q)] * s;
        }
    }
    Ok(out)
}

/// Rounds of [`refine_for_shipped_loss`] under min-separation, each adding the worst pattern of
/// its result to the surrogate's patterns.
const ACTIVE_SET_ROUNDS: usize = 8;

/// Lowers the loss that ships, `sens(B̂⁻¹A)²‖B̂‖_F²` (003 Eq. 2 with the encoder of 000 App. H,
/// the sensitivity under `participation`), directly: gradient descent with backtracking on a
/// smooth maximum over participation patterns (`Surrogate`), starting from the ALS fit.
///
/// For single participation and fixed epoch order the surrogate covers every maximal pattern.
/// Min-separation has exponentially many, so the surrogate starts from the windows of gap `b`
/// and the worst pattern of the start (found by [`participation::search`]), and each round adds
/// the worst pattern of its result (an active set). Every round's result is measured with the
/// sensitivity that ships ([`participation::sensitivity`]) and the best is returned, so the
/// refinement never does worse than `start`. On the prefix sum this removes 30-40% of ALS's
/// excess over the optimum for single participation.
///
/// [`participation::search`]: crate::participation::search
/// [`participation::sensitivity`]: crate::participation::sensitivity
pub fn refine_for_shipped_loss(
    a: MatRef<'_, f64>,
    start: &BandedLowRank,
    participation: &Participation,
    iterations: usize,
) -> Result<BandedLowRank> {
    let n = start.steps;
    let shipped_loss = |d: &BandedLowRank| shipped(a, d, participation).map(|s| s.2);
    let mut best_loss = shipped_loss(start)?;
    let mut best = start.clone();
    let (mut patterns, rounds) = match *participation {
        Participation::MinSeparation {
            max_participations: k,
            min_separation: b,
        } => {
            let windows = Participation::fixed_epoch_order(k, b)?.maximal_patterns(n, usize::MAX);
            (windows.unwrap_or_default(), ACTIVE_SET_ROUNDS)
        }
        _ => (
            participation
                .maximal_patterns(n, usize::MAX)
                .unwrap_or_default(),
            1,
        ),
    };
    let mut current = start.clone();
    for round in 0..rounds {
        if let Some(worst) = worst_pattern(a, &current, participation)? {
            if patterns.contains(&worst) {
                // The surrogate already holds the worst pattern of its own result.
                if round > 0 {
                    break;
                }
            } else {
                patterns.push(worst);
            }
        }
        current = balanced(&descend(a, &current, &patterns, iterations)?)?;
        let loss = shipped_loss(&current)?;
        if loss < best_loss {
            best_loss = loss;
            best = current.clone();
        }
    }
    Ok(best)
}

/// The worst min-separation pattern of the encoder `B̂⁻¹A` (`None` for other schemas).
fn worst_pattern(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    participation: &Participation,
) -> Result<Option<Vec<usize>>> {
    let Participation::MinSeparation {
        max_participations: k,
        min_separation: b,
    } = *participation
    else {
        return Ok(None);
    };
    let dense = decoder.to_dense();
    let c = encoder_for_decoder(a, dense.as_ref())?;
    let x = c.transpose() * &c;
    let absolute = Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)].abs());
    let found = crate::participation::search::max_pattern_quadratic(
        absolute.as_ref(),
        k,
        b,
        crate::participation::search::DEFAULT_BUDGET,
    );
    Ok(Some(found.pattern))
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
