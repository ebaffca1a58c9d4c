//! The compile pipeline, pure math: optimum → streaming factorization → compression →
//! normalization → rounding to the stored precision → the sensitivity of what ships.
//!
//! The privacy-critical number is [`CompiledMechanism::sensitivity`]: the sensitivity, under the
//! declared participation schema, of the encoder `Ĉ = B̂⁻¹A` implied by the decoder **after** it
//! was rounded to `f32`, i.e. of exactly the coefficients the blob stores and the runtime
//! multiplies by (Denisov et al. 2022, App. H: "an optimal `C_B̂` can be found … as `B̂⁻¹S`";
//! for `(k, b)` participation, [`participation::sensitivity`](crate::privacy::participation::sensitivity)).

pub mod compress;
pub(crate) mod refine;
pub mod rescale;

use faer::{Mat, MatRef};
use mfc_formats::SensitivityMethod;

use self::compress::{BandedLowRank, CompressOptions, compress};
use self::rescale::rescale;
use crate::optimize::optimum::{OptimumOptions, optimal_gram};
use crate::optimize::single::{OptimizeOptions, Optimum, Progress};
use crate::optimize::stamp::evaluate_gram;
use crate::privacy::participation::{Participation, device_verifiable_sensitivity, sensitivity};
use crate::privacy::sensitivity::{encoder_for_decoder, loss, per_step_variance};
use crate::ship::blob::{
    BlobOptions, Shipped, Written, exact_f32, step_stddev, steps_u32, stored_workload, table, write,
};
use crate::{Error, Result};
use mfc_formats::Decoder;

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
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// The dense optimum the decoder approximates: its schema, stamps and optimizers.
    pub optimum: OptimumOptions,
    /// The compression of the decoder.
    pub compression: CompressOptions,
}

/// Whether `a` is the prefix-sum workload `S` (ones on and below the diagonal).
fn is_prefix_sum(a: MatRef<'_, f64>) -> bool {
    a.nrows() == a.ncols()
        && (0..a.ncols()).all(|j| (0..a.nrows()).all(|i| a[(i, j)] == f64::from(u8::from(i >= j))))
}

/// The sensitivity under `participation` and the loss of a decoder as stored.
fn shipped(
    a: MatRef<'_, f64>,
    decoder: &BandedLowRank,
    participation: &Participation,
) -> Result<(f64, SensitivityMethod, f64, Vec<f64>)> {
    let dense = decoder.to_dense();
    let encoder = encoder_for_decoder(a, dense.as_ref())?;
    // A device verifies a prefix-sum blob by recomputing the absolute-Gram value
    // (`mfc_runtime::verify`): record that one, never a smaller spectral bound it would refuse.
    let s = if is_prefix_sum(a) {
        device_verifiable_sensitivity(encoder.as_ref(), participation)?
    } else {
        sensitivity(encoder.as_ref(), participation)?
    };
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
        optimum: OptimumOptions {
            optimize: optimize.clone(),
            ..OptimumOptions::default()
        },
        compression: compression.clone(),
    };
    compile(a, band, rank, &options, progress)
}

/// Compiles a mechanism for `a` under `options.participation` (optionally stamped), compressed
/// to `(band, rank)`, normalized and rounded, with the sensitivity of what ships.
///
/// The ALS fit is refined on the loss that ships under the schema
/// ([`refine_for_shipped_loss`]); the sensitivity recorded is then computed again from the
/// normalized, `f32`-rounded coefficients.
pub fn compile(
    a: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    options: &CompileOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<CompiledMechanism> {
    let n = a.nrows();
    if band == 0 || band > n {
        return Err(Error::InvalidArgument(format!(
            "the band h must be in 1..={n}, got {band}"
        )));
    }
    let (optimum, x) = optimal_gram(a, &options.optimum, progress)?;
    compile_from_optimum(a, band, rank, options, optimum, x)
}

/// [`compile`] from an optimum computed already (`optimal_gram(a, &options.optimum, …)`, whose
/// Gram matrix is `x`): `mfc compare` prints the optimum's row and compresses the same one.
pub fn compile_from_optimum(
    a: MatRef<'_, f64>,
    band: usize,
    rank: usize,
    options: &CompileOptions,
    optimum: Optimum,
    x: Mat<f64>,
) -> Result<CompiledMechanism> {
    let n = a.nrows();
    if band == 0 || band > n || x.nrows() != n {
        return Err(Error::InvalidArgument(format!(
            "the band h must be in 1..={n}, got {band}; the optimum has {} steps",
            x.nrows()
        )));
    }
    let participation = options.optimum.participation;
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
        stamps: options.optimum.stamps,
        compressed: stored,
        sensitivity,
        sensitivity_method,
        sqrt_loss: shipped_loss.sqrt(),
        per_step_variance,
    })
}

/// Exponent of the smooth maximum in [`refine_for_shipped_loss`] (the `p`-norm over `P`
/// patterns exceeds the maximum by at most a factor `P^{1/p}`; the iterate kept is the best by
/// the maximum itself). Sharper exponents, tried in stages, did not do better at n = 512; nor
/// did multiplicative weights on the patterns around L-BFGS on a fixed convex combination
/// (worse at n = 1024, (5, 5): 95.17 against 94.95 after 50 iterations).
const SMOOTH_MAX_EXPONENT: f64 = 256.0;

/// [`descend`] stops early when the surrogate has not dropped by a fraction `STALL_TOLERANCE` in
/// `STALL_ITERATIONS` iterations (at n = 1024, (5, 5), single participation, the best is reached
/// after about 25 of the 50 default iterations). The surrogate, not the maximum it smooths: under
/// several participations the maximum stays flat for stretches while the descent keeps lowering
/// it (at n = 512, fixed epoch order (4, 128), (4, 11): a stall rule on the maximum stopped at
/// √L 132.02, 3000 iterations reach 130.39).
const STALL_ITERATIONS: usize = 10;
const STALL_TOLERANCE: f64 = 1e-6;

/// L-BFGS on the surrogate over `patterns` from `start` (structured evaluations,
/// [`refine`](crate::forms::banded::refine), `O(n²·(h + r))` each); returns the iterate with the smallest
/// pattern loss (the shipped loss when `patterns` are all the maximal ones), never worse than
/// `start` by that measure.
fn descend(
    a: MatRef<'_, f64>,
    start: &BandedLowRank,
    patterns: &[Vec<usize>],
    iterations: usize,
) -> Result<BandedLowRank> {
    let p = SMOOTH_MAX_EXPONENT;
    let pairs = refine::PatternPairs::new(start.steps, patterns);
    let evaluate = |x: &[f64]| {
        refine::evaluate(a, &refine::with_parameters(start, x), &pairs, p)
            .ok()
            .filter(|e| e.value.is_finite())
    };
    let x0 = refine::parameters(start);
    let first = evaluate(&x0)
        .ok_or_else(|| Error::Numerical("the decoder to refine is degenerate".into()))?;
    let mut best = (first.pattern_loss, x0.clone());
    // The iteration at which the surrogate last dropped by more than STALL_TOLERANCE.
    let mut improved = (0, first.value);
    let (x, last, _) = crate::optimize::lbfgs::minimize(
        x0,
        first,
        10,
        iterations,
        &mut |x| evaluate(x),
        &mut |iteration, x, p| {
            if p.pattern_loss < best.0 {
                best = (p.pattern_loss, x.to_vec());
            }
            if p.value < improved.1 * (1.0 - STALL_TOLERANCE) {
                improved = (iteration, p.value);
            }
            Ok(iteration >= improved.0 + STALL_ITERATIONS)
        },
    )?;
    if last.pattern_loss < best.0 {
        best = (last.pattern_loss, x);
    }
    Ok(refine::with_parameters(start, &best.1))
}

/// The same decoder with `L` and `R` in balanced form: `L' = U_L P Σ^{1/2}`, `R' = U_R Q Σ^{1/2}`
/// where `L = U_L S_L V_Lᵀ`, `R = U_R S_R V_Rᵀ` (thin SVDs) and `S_L V_Lᵀ V_R S_R = P Σ Qᵀ`, so
/// `L' R'ᵀ = L Rᵀ` and `‖L'‖_F² + ‖R'‖_F²` is the least any factorization of the product has.
/// The refinement moves `(L, R)` freely along the gauge `(L T, R T⁻ᵀ)`; unbalanced factors make
/// the device's `f32` arithmetic cancel (at n = 200 under min-separation, entries of 36 for
/// products below 0.7).
pub(crate) fn balanced(decoder: &BandedLowRank) -> Result<BandedLowRank> {
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

/// Work budget of the pattern searches of [`refine_for_shipped_loss`] under min-separation (its
/// worst patterns and the losses that choose between candidates): a twentieth of the search's
/// default. An exhausted search still returns an upper bound and the best pattern found, so the
/// candidates are compared by an upper bound on their loss; what ships is measured again with
/// the default budget. At n = 2000 under (20, 100) every search exhausts its budget, and the
/// default one made the refinement take 4 minutes (`mfc compile --steps 2000 --epochs 20
/// --min-sep 100 --band 4 --rank 4`: 290 s before, BENCHMARKS "General BandMF at training
/// scale" for after).
pub(crate) const REFINE_SEARCH_BUDGET: usize =
    crate::privacy::participation::search::DEFAULT_BUDGET / 20;

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
/// Under single participation and fixed epoch order the best result is then rescaled
/// ([`rescale()`]: the optimal diagonal change of basis `(B̂S⁻¹, SĈ)`, which keeps the class), and
/// that candidate is kept when the shipped loss says so. On the prefix sum under single
/// participation it removes 30-45% of the excess that is left (`mfc compile --steps 1024
/// --band 5 --rank 5`: +0.39% → +0.22% over the optimum; n = 4096, (7, 5): +1.38% → +0.98%).
/// With `iterations = 0` the start ships unchanged.
///
/// [`participation::search`]: crate::privacy::participation::search
/// [`participation::sensitivity`]: crate::privacy::participation::sensitivity
pub fn refine_for_shipped_loss(
    a: MatRef<'_, f64>,
    start: &BandedLowRank,
    participation: &Participation,
    iterations: usize,
) -> Result<BandedLowRank> {
    let n = start.steps;
    // Each candidate is measured once: its loss, and under min-separation the worst pattern the
    // same search found, which the next round adds.
    let measured = refine::measure(a, start, participation)?;
    let mut best_loss = measured.loss;
    let mut best = start.clone();
    let mut worst = measured.worst;
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
        if let Some(worst) = worst.take() {
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
        let measured = refine::measure(a, &current, participation)?;
        if measured.loss < best_loss {
            best_loss = measured.loss;
            best = current.clone();
        }
        worst = measured.worst;
    }
    // The smooth maximum leaves the patterns' terms unequal; the optimal diagonal rescaling
    // equalizes them ([`rescale`], certified by its dual under single participation). A
    // candidate like the rounds' results: kept when the sensitivity that ships says it is
    // better. Not under min-separation, whose maximum the active set does not hold.
    let schema_allows = !matches!(participation, Participation::MinSeparation { .. });
    if schema_allows && iterations > 0 {
        let rescaled = rescale(a, &best, &patterns, RESCALE_TOLERANCE, RESCALE_ITERATIONS)
            .and_then(|r| balanced(&r.decoder));
        if let Ok(candidate) = rescaled {
            if refine::measure(a, &candidate, participation).is_ok_and(|m| m.loss < best_loss) {
                best = candidate;
            }
        }
    }
    Ok(best)
}

/// The relative dual gap at which [`rescale`] stops, and its iteration cap (each iteration two
/// `O(n·|patterns|)` products, about 10 ms at n = 4096 under single participation). On the
/// prefix sum the gap falls below 1e-6 after about 230 iterations at n = 4096 (2 s); on
/// workloads where it converges slowly (momentum with a cooldown) the cap bounds the cost, and
/// the best point so far is the candidate.
const RESCALE_TOLERANCE: f64 = 1e-6;
const RESCALE_ITERATIONS: usize = 500;

/// Encodes `compiled` (for `workload`, under its participation schema) as a blob
/// ([`crate::ship::blob::write`]): the tables are the `f32` values the sensitivity was computed
/// from. Workloads other than the prefix sum are stored as `Custom` with their label.
pub fn encode(
    compiled: &CompiledMechanism,
    workload: &crate::workload::Workload,
    options: &BlobOptions,
) -> Result<Written> {
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.sqrt_loss,
        optimal_sqrt_loss: Some(compiled.optimal_sqrt_loss),
        step_stddev: step_stddev(&compiled.per_step_variance),
    };
    encode_decoder(&compiled.compressed, shipped, workload, options)
}

/// Encodes the decoder `c` (every coefficient an `f32`) with the figures of `shipped`: the
/// part of [`encode`] shared with the max-error form ([`crate::max_error::banded_low_rank`]),
/// whose optimum is not a [`CompiledMechanism`]'s.
pub fn encode_decoder(
    c: &BandedLowRank,
    shipped: Shipped<'_>,
    workload: &crate::workload::Workload,
    options: &BlobOptions,
) -> Result<Written> {
    let diagonals = exact_f32(&c.diagonals)?;
    let left = exact_f32(&c.left)?;
    let right = exact_f32(&c.right)?;
    let label = workload.label();
    let decoder = Decoder::BandedLowRank(mfc_formats::BandedLowRank {
        band: c.band as u32,
        rank: c.rank as u32,
        diagonals: table(&diagonals)?,
        left: table(&left)?,
        right: table(&right)?,
    });
    write(
        stored_workload(workload, &label),
        steps_u32(c.steps, "the horizon")?,
        shipped,
        decoder,
        options,
    )
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
            // No diagonal rescaling of what ships does better, by the rescaling's dual bound
            // (up to the f32 rounding of the stored coefficients).
            let a = Workload::PrefixSum.matrix(n).unwrap();
            let singletons: Vec<Vec<usize>> = (0..n).map(|j| vec![j]).collect();
            let bound = rescale(a.as_ref(), &c.compressed, &singletons, 1e-9, 100_000)
                .unwrap()
                .dual_bound;
            assert!(
                bound.sqrt() >= c.sqrt_loss * (1.0 - 1e-5),
                "n = {n} ({h}, {r}): a rescaling could reach {} < {}",
                bound.sqrt(),
                c.sqrt_loss
            );
            // What the refinement returns is in balanced form: LᵀL = RᵀR (`balanced`).
            let (_, x) = optimal_gram(a.as_ref(), &OptimumOptions::default(), &mut |_| {}).unwrap();
            let dense = evaluate_gram(a.as_ref(), x.as_ref(), &Participation::Single).unwrap();
            let fitted =
                compress(dense.decoder.as_ref(), h, r, &CompressOptions::default()).unwrap();
            let refined =
                refine_for_shipped_loss(a.as_ref(), &fitted, &Participation::Single, 50).unwrap();
            let gram = |m: &[f64]| {
                let mut g = vec![0.0; r * r];
                m.chunks(r)
                    .for_each(|row| crate::forms::banded::compress::add_outer_product(&mut g, row));
                g
            };
            let (gl, gr) = (gram(&refined.left), gram(&refined.right));
            let scale = gl.iter().map(|x| x.abs()).fold(0.0, f64::max);
            assert!(
                gl.iter()
                    .zip(&gr)
                    .all(|(x, y)| (x - y).abs() <= 1e-8 * scale),
                "n = {n} ({h}, {r}): LᵀL = {gl:?}, RᵀR = {gr:?}"
            );
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

    /// The same options give the same stored coefficients, run after run: the parallel sums of
    /// the refinement and the rescaling are taken in a fixed order (`linalg::ordered_parallel_sum`),
    /// so a blob's bytes, and the CRC-32 the README quotes for it, are reproducible.
    #[test]
    fn compiling_twice_gives_the_same_coefficients() {
        let a = Workload::PrefixSum.matrix(64).unwrap();
        for participation in [
            Participation::Single,
            Participation::fixed_epoch_order(4, 16).unwrap(),
            Participation::min_separation(4, 16).unwrap(),
        ] {
            let options = CompileOptions {
                optimum: OptimumOptions {
                    participation,
                    ..OptimumOptions::default()
                },
                ..CompileOptions::default()
            };
            let first = compile(a.as_ref(), 4, 4, &options, &mut |_| {}).unwrap();
            for _ in 0..3 {
                let again = compile(a.as_ref(), 4, 4, &options, &mut |_| {}).unwrap();
                assert_eq!(again.compressed, first.compressed, "{participation:?}");
                assert_eq!(again.sensitivity.to_bits(), first.sensitivity.to_bits());
            }
        }
    }
}
