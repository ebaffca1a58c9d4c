//! The BandMF form, from the optimizer to what a blob stores (`formats/SPEC.md`, decoder 3):
//! a banded lower-triangular encoder `C` with `b̂` bands (Choquette-Choo et al. 2023b,
//! "(Amplified) Banded Matrix Factorizations"), either general (`n × b̂` coefficients,
//! [`crate::optimize::banded`]) or banded Toeplitz (`b̂` coefficients, McKenna 2025,
//! [`crate::optimize::banded::toeplitz`]).
//!
//! The device adds `w = C⁻¹z` to the clipped inputs by forward substitution and releases
//! `S(x + w)` for the prefix sum, or `x_t + w_t` for another workload, whose matrix `A` the
//! caller applies itself (a training loop's optimizer): the mechanism `A(x + C⁻¹z)` with decoder
//! `B = A C⁻¹` either way.
//!
//! The pipeline: the banded Toeplitz optimum (always: it is cheap, and it starts the general
//! optimizer); for the general form, [`optimize_general`] from it (no `n × n` matrix for the
//! prefix sum and momentum: `O(n·b̂²)` per evaluation); then the encoder is scaled to
//! sensitivity 1, rounded to `f32`, and its sensitivity computed again **from the stored
//! coefficients** — exactly, since with `b̂ ≤ b` one record's columns are orthogonal
//! ([`OrthogonalColumns`](SensitivityMethod::OrthogonalColumns); single participation:
//! [`MaxColumnNorm`](SensitivityMethod::MaxColumnNorm)).
//!
//! # Choosing `b̂`
//!
//! Under `b̂ ≤ b` more bands never raise the optimal loss (the encoders with fewer bands are
//! among those with more), but each band costs the device `d` floats and `d` multiply-adds per
//! step. [`Bands::Auto`] tries `b̂ = 1, 2, 4, …` and the largest allowed value
//! `min(b, n, max)`, each Toeplitz optimum started from the previous one, and keeps the fewest
//! bands whose `√L` is within [`AUTO_TOLERANCE`] of the best tried.

use faer::Mat;
use mfc_formats::SensitivityMethod;

use crate::optimize::banded::BandedEncoder;
use crate::optimize::banded::general::frobenius::{Workspace, frobenius};
use crate::optimize::banded::general::operator::{BandRows, Operator};
use crate::optimize::banded::general::{
    BandedProblem, GeneralOptions, GeneralProgress, Stopped, column_norms2, optimize_general,
};
use crate::optimize::banded::toeplitz::{ToeplitzOptions, ToeplitzProblem, optimize};
use crate::privacy::participation::Participation;
use crate::ship::blob::{
    BlobOptions, Shipped, Written, exact_f32, step_stddev, steps_u32, stored_workload, table, write,
};
use crate::workload::Workload;
use crate::{Error, Result};
use mfc_formats::Decoder;

/// General banded or banded Toeplitz.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandMfKind {
    /// `n × b̂` free coefficients (`O(n·b̂²)` per evaluation of the loss for the prefix sum and
    /// momentum, `O(n²·b̂)` for a custom workload).
    General,
    /// `b̂` coefficients shared by every column (`O(n·b̂)` per evaluation for the prefix sum).
    Toeplitz,
}

/// How many bands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bands {
    /// Exactly this many (`1 ≤ b̂ ≤ min(b, n)`).
    Fixed(usize),
    /// Chosen by loss (module docs), at most `max`.
    Auto {
        /// The most bands tried: the device keeps `(b̂ + 2)·d` floats (prefix sum).
        max: usize,
    },
}

/// `auto` keeps the fewest bands within this relative `√L` of the best tried.
pub const AUTO_TOLERANCE: f64 = 0.01;

/// What [`compile_bandmf`] builds.
#[derive(Debug, Clone)]
pub struct BandMfOptions {
    /// The participation schema the encoder is optimized and its sensitivity computed for.
    pub participation: Participation,
    /// General or Toeplitz.
    pub kind: BandMfKind,
    /// `b̂`, or how to choose it.
    pub bands: Bands,
    /// The banded Toeplitz optimizer.
    pub toeplitz: ToeplitzOptions,
    /// The general banded optimizer.
    pub general: GeneralOptions,
}

impl Default for BandMfOptions {
    fn default() -> Self {
        Self {
            participation: Participation::Single,
            kind: BandMfKind::Toeplitz,
            bands: Bands::Auto { max: 256 },
            toeplitz: ToeplitzOptions::default(),
            general: GeneralOptions::default(),
        }
    }
}

/// A compiled BandMF encoder, every coefficient an `f32`, with the error of exactly those
/// coefficients.
#[derive(Debug, Clone)]
pub struct CompiledBandMf {
    /// General or Toeplitz.
    pub kind: BandMfKind,
    /// The horizon `n`.
    pub steps: usize,
    /// `b̂`.
    pub bands: usize,
    /// What the blob stores: Toeplitz, `c_0 … c_{b̂−1}`; general, `n × b̂` row-major with entry
    /// `(i, l) = C[i, i−l]` (`+0.0` where `l > i`).
    pub coefficients: Vec<f64>,
    /// The participation schema.
    pub participation: Participation,
    /// `sens(C)` of the stored coefficients under `participation` (≈ 1 after scaling).
    pub sensitivity: f64,
    /// `MaxColumnNorm` or `OrthogonalColumns`, both exact.
    pub sensitivity_method: SensitivityMethod,
    /// `sqrt(L)` of what ships: `sens·‖A C⁻¹‖_F`.
    pub sqrt_loss: f64,
    /// `sens²·‖(A C⁻¹)[i,:]‖²` for every step.
    pub per_step_variance: Vec<f64>,
    /// `(b̂, √L)` of every banded Toeplitz optimum computed, in the order tried.
    pub tried: Vec<(usize, f64)>,
    /// `√L` of the banded Toeplitz encoder the general optimizer started from (general only).
    pub toeplitz_sqrt_loss: Option<f64>,
    /// How the general optimizer ended and its iterations (general, when its result shipped
    /// rather than the Toeplitz start).
    pub general_run: Option<(Stopped, usize)>,
}

impl CompiledBandMf {
    /// The dense encoder `C` as stored (`n × n`).
    pub fn encoder(&self) -> Mat<f64> {
        self.banded().to_dense()
    }

    /// The stored encoder as a [`BandedEncoder`] (column layout).
    pub fn banded(&self) -> BandedEncoder {
        let (n, h) = (self.steps, self.bands);
        match self.kind {
            BandMfKind::Toeplitz => BandedEncoder::toeplitz(&self.coefficients, n),
            BandMfKind::General => BandRows {
                steps: n,
                width: h,
                rows: self.coefficients.clone(),
            }
            .to_encoder(),
        }
    }
}

/// The band counts `auto` tries: powers of two below `most`, then `most`.
fn auto_candidates(most: usize) -> Vec<usize> {
    let mut out: Vec<usize> = std::iter::successors(Some(1usize), |b| b.checked_mul(2))
        .take_while(|&b| b < most)
        .collect();
    out.push(most);
    out
}

/// `x` rounded to `f32` (then exact in `f64`).
fn round(x: f64) -> f64 {
    f64::from(x as f32)
}

/// Optimizes, scales, rounds and measures a BandMF encoder for `workload` over `steps` steps.
/// `progress` gets a description of the current optimization and its loss.
pub fn compile_bandmf(
    workload: &Workload,
    steps: usize,
    options: &BandMfOptions,
    progress: &mut dyn FnMut(&str, f64),
) -> Result<CompiledBandMf> {
    let participation = options.participation;
    let problem = ToeplitzProblem::new(workload, steps, &participation)?;
    let most = participation.separation().unwrap_or(steps).min(steps);
    let mut tried = Vec::new();
    let (bands, c) = match options.bands {
        Bands::Fixed(bands) => {
            problem.check_bands(bands)?;
            let c = optimize(&problem, bands, None, &options.toeplitz, &mut |_, l| {
                progress(&format!("banded Toeplitz, {bands} bands"), l)
            })?;
            let loss = problem.error(&c)?.loss;
            progress(&format!("banded Toeplitz, {bands} bands, optimized"), loss);
            tried.push((bands, loss.sqrt()));
            (bands, c)
        }
        Bands::Auto { max } => {
            if max == 0 {
                return Err(Error::InvalidArgument(
                    "the most bands auto may choose must be at least 1, got 0".into(),
                ));
            }
            let mut optima: Vec<Vec<f64>> = Vec::new();
            for bands in auto_candidates(most.min(max)) {
                let c = optimize(
                    &problem,
                    bands,
                    optima.last().map(Vec::as_slice),
                    &options.toeplitz,
                    &mut |_, l| progress(&format!("auto: banded Toeplitz, {bands} bands"), l),
                )?;
                let loss = problem.error(&c)?.loss;
                progress(
                    &format!("auto: banded Toeplitz, {bands} bands, optimized"),
                    loss,
                );
                tried.push((bands, loss.sqrt()));
                optima.push(c);
            }
            let best = tried.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
            let pick = tried
                .iter()
                .position(|t| t.1 <= best * (1.0 + AUTO_TOLERANCE))
                .unwrap_or(tried.len() - 1);
            (tried[pick].0, optima.swap_remove(pick))
        }
    };
    let toeplitz_sqrt_loss = tried.iter().find(|t| t.0 == bands).map(|t| t.1);
    match options.kind {
        BandMfKind::Toeplitz => {
            let scale = problem.sensitivity(&c)?.value;
            let stored: Vec<f64> = c.iter().map(|x| round(x / scale)).collect();
            if stored[0] == 0.0 {
                return Err(Error::Numerical(
                    "the Toeplitz encoder's c_0 rounds to zero".into(),
                ));
            }
            let sens = problem.sensitivity(&stored)?;
            let error = problem.error(&stored)?;
            Ok(CompiledBandMf {
                kind: BandMfKind::Toeplitz,
                steps,
                bands,
                coefficients: stored,
                participation,
                sensitivity: sens.value,
                sensitivity_method: sens.method,
                sqrt_loss: error.loss.sqrt(),
                per_step_variance: error.per_step_variance,
                tried,
                toeplitz_sqrt_loss: None,
                general_run: None,
            })
        }
        BandMfKind::General => {
            let problem =
                BandedProblem::new(Operator::new(workload, steps)?, participation, bands)?;
            let start = BandRows::toeplitz(&c, steps);
            // One band under single participation: the optimum is the identity (every diagonal
            // encoder has `‖A C⁻¹‖²_F·max c_j² ≥ ‖A‖²_F`), which is the Toeplitz start: DP-SGD.
            let (encoder, run) = if bands == 1 && participation == Participation::Single {
                (start.clone(), (Stopped::Converged, 0))
            } else {
                let optimized = optimize_general(
                    &problem,
                    start.clone(),
                    &options.general,
                    &mut |p: &GeneralProgress| {
                        progress(
                            &format!(
                                "general banded, {bands} bands: iteration {}, {} evaluations, {:.1} s",
                                p.iteration, p.evaluations, p.seconds
                            ),
                            p.objective,
                        );
                        std::ops::ControlFlow::Continue(())
                    },
                )?;
                (optimized.encoder, (optimized.stopped, optimized.iterations))
            };
            let compiled = ship_general(&problem, &encoder, tried.clone(), toeplitz_sqrt_loss)?;
            // Never ship worse than the banded Toeplitz encoder the optimizer started from (the
            // optimizer compares exact losses; rounding to `f32` could still reorder them).
            match toeplitz_sqrt_loss {
                Some(t) if compiled.sqrt_loss > t * (1.0 + 1e-9) => {
                    ship_general(&problem, &start, tried, toeplitz_sqrt_loss)
                }
                _ => Ok(CompiledBandMf {
                    general_run: Some(run),
                    ..compiled
                }),
            }
        }
    }
}

/// The general `encoder` scaled to sensitivity 1 and rounded to `f32`, with the sensitivity,
/// the loss and the per-step variance of exactly the stored coefficients: the sensitivity by
/// the dynamic programme over their column norms (exact: one record's columns are orthogonal),
/// the error by [`frobenius`]'s recurrence (no `n × n` matrix for the prefix sum and momentum).
fn ship_general(
    problem: &BandedProblem,
    encoder: &BandRows,
    tried: Vec<(usize, f64)>,
    toeplitz_sqrt_loss: Option<f64>,
) -> Result<CompiledBandMf> {
    let (n, h) = (problem.steps(), problem.bands());
    let participation = *problem.participation();
    let scale = problem.sensitivity_squared(encoder)?.sqrt();
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::Numerical(format!(
            "the banded encoder has sensitivity {scale}"
        )));
    }
    // Entries outside the matrix (`l > i`) are stored as `+0.0`, as the format requires.
    let stored = BandRows {
        rows: (0..n * h)
            .map(|q| {
                let (i, l) = (q / h, q % h);
                if l > i {
                    0.0
                } else {
                    round(encoder.rows[q] / scale)
                }
            })
            .collect(),
        ..encoder.clone()
    };
    if (0..n).any(|i| !stored.rows[i * h].is_normal()) {
        return Err(Error::Numerical(
            "a diagonal entry of the banded encoder rounds to zero or a subnormal".into(),
        ));
    }
    let sensitivity = participation
        .max_pattern_sum(&column_norms2(&stored))
        .0
        .sqrt();
    let mut rows = vec![0.0; n];
    frobenius(
        problem.operator(),
        &stored,
        &mut Workspace::default(),
        Some(&mut rows),
        None,
    )
    .ok_or_else(|| Error::Numerical("the decoder A C⁻¹ is not finite".into()))?;
    let s2 = sensitivity * sensitivity;
    let per_step_variance: Vec<f64> = rows.iter().map(|r| s2 * r).collect();
    Ok(CompiledBandMf {
        kind: BandMfKind::General,
        steps: n,
        bands: h,
        sqrt_loss: per_step_variance.iter().sum::<f64>().sqrt(),
        coefficients: stored.rows,
        participation,
        sensitivity,
        sensitivity_method: match participation {
            Participation::Single => SensitivityMethod::MaxColumnNorm,
            _ => SensitivityMethod::OrthogonalColumns,
        },
        per_step_variance,
        tried,
        toeplitz_sqrt_loss,
        general_run: None,
    })
}

/// Encodes a compiled BandMF encoder (`formats/SPEC.md`, decoder 3) for `workload`
/// ([`crate::ship::blob::write`]): the stored coefficients are the `f32` values the sensitivity
/// was computed from. Workloads other than the prefix sum are stored as `Custom` with their
/// label; the runtime then releases `x_t + w_t` and the caller applies `A`.
pub fn encode(
    compiled: &CompiledBandMf,
    workload: &Workload,
    options: &BlobOptions,
) -> Result<Written> {
    let encoder = exact_f32(&compiled.coefficients)?;
    let label = workload.label();
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.sqrt_loss,
        optimal_sqrt_loss: None,
        step_stddev: step_stddev(&compiled.per_step_variance),
    };
    let decoder = Decoder::BandMf(mfc_formats::BandMf {
        kind: match compiled.kind {
            BandMfKind::General => mfc_formats::BandMfKind::General,
            BandMfKind::Toeplitz => mfc_formats::BandMfKind::Toeplitz,
        },
        bands: steps_u32(compiled.bands, "the number of bands")?,
        encoder: table(&encoder)?,
    });
    write(
        stored_workload(workload, &label),
        steps_u32(compiled.steps, "the horizon")?,
        shipped,
        decoder,
        options,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ships is what was measured: every coefficient an `f32`, the recorded sensitivity a
    /// brute force over every pattern and sign vector of the stored dense encoder, the loss
    /// `sens²‖A C⁻¹‖_F²` from a dense solve; the general form is no worse than the Toeplitz
    /// optimum it starts from; `auto` picks the fewest bands within the tolerance.
    #[test]
    fn shipped_encoders_match_dense_references() {
        let n = 24;
        let momentum = Workload::Momentum {
            momentum: 0.9,
            schedule: crate::workload::Schedule::Cooldown {
                steps: 6,
                final_rate: 0.1,
            },
        };
        for workload in [Workload::PrefixSum, momentum] {
            let a = workload.matrix(n).unwrap();
            for participation in [
                Participation::Single,
                Participation::min_separation(3, 6).unwrap(),
                Participation::fixed_epoch_order(4, 6).unwrap(),
            ] {
                for kind in [BandMfKind::Toeplitz, BandMfKind::General] {
                    let options = BandMfOptions {
                        participation,
                        kind,
                        bands: Bands::Fixed(4),
                        ..BandMfOptions::default()
                    };
                    let compiled = compile_bandmf(&workload, n, &options, &mut |_, _| {}).unwrap();
                    assert!(compiled.coefficients.iter().all(|&x| round(x) == x));
                    let c = compiled.encoder();
                    let brute = crate::privacy::participation::brute_force_sensitivity(
                        c.as_ref(),
                        &participation,
                    )
                    .unwrap();
                    assert!(
                        (compiled.sensitivity - brute).abs() <= 1e-12 * brute,
                        "{kind:?} {participation:?}: {} vs {brute}",
                        compiled.sensitivity
                    );
                    assert!((compiled.sensitivity - 1.0).abs() < 1e-6);
                    let mut inverse = Mat::<f64>::identity(n, n);
                    c.solve_lower_triangular_in_place(inverse.as_mut());
                    let loss = brute * brute * (&a * &inverse).squared_norm_l2();
                    assert!(
                        (compiled.sqrt_loss.powi(2) - loss).abs() <= 1e-9 * loss,
                        "{kind:?} {participation:?}"
                    );
                    if kind == BandMfKind::General {
                        let toeplitz = compiled.toeplitz_sqrt_loss.unwrap();
                        assert!(compiled.sqrt_loss <= toeplitz * (1.0 + 1e-6));
                    }
                }
            }
        }
        let options = BandMfOptions {
            participation: Participation::min_separation(2, 16).unwrap(),
            bands: Bands::Auto { max: 12 },
            ..BandMfOptions::default()
        };
        let compiled = compile_bandmf(&Workload::PrefixSum, 40, &options, &mut |_, _| {}).unwrap();
        let tried: Vec<usize> = compiled.tried.iter().map(|t| t.0).collect();
        assert_eq!(tried, [1, 2, 4, 8, 12]);
        let best = compiled
            .tried
            .iter()
            .map(|t| t.1)
            .fold(f64::INFINITY, f64::min);
        let pick = compiled
            .tried
            .iter()
            .find(|t| t.1 <= best * (1.0 + AUTO_TOLERANCE))
            .unwrap();
        assert_eq!(compiled.bands, pick.0);
    }
}
