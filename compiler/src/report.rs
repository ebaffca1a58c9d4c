//! The compile report: what shipped, how close it is to the optimum, and how private it is.
//!
//! The same [`CompileReport`] is printed as text for people and as JSON (`mfc compile --json`)
//! for scripts; field names are stable.

use std::fmt;

use serde::Serialize;

use mfc_formats::{Neighbouring, SensitivityMethod};

use crate::Result;
use crate::forms::banded::CompiledMechanism;
use crate::max_error::Objective;
use crate::optimize::optimum::certificate_holds;
use crate::privacy::accountant::PldOptions;
use crate::privacy::accountant::bandmf::AmplifiedBandMf;
use crate::privacy::participation::Participation;
use crate::request::{Opt, OptionError, epsilon_text};
use crate::ship::blob::BlobOptions;

/// The privacy calibration recorded in a blob, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct PrivacyReport {
    /// `σ`, the noise multiplier.
    pub noise_multiplier: f64,
    /// `ε` that `σ` gives at `delta` ([`derived_privacy`]), if calibrated for a target.
    pub epsilon: Option<f64>,
    /// `δ` of the target, if calibrated for one.
    pub delta: Option<f64>,
    /// zCDP `ρ = 1/(2σ²)` of the one Gaussian release the mechanism is; `None` under cyclic
    /// Poisson sampling, whose composition of subsampled Gaussians has no such `ρ`.
    pub zcdp_rho: Option<f64>,
    /// Expected root-mean-square error per step and coordinate, `σ·ζ·sqrt(L/n)`.
    pub rmse_per_step: f64,
    /// The largest per-step standard deviation per coordinate, `σ·ζ·max_i sens‖B̂[i,:]‖`.
    pub max_stddev_per_step: f64,
}

/// The `(ε, δ)` a calibration gives: `ε` **derived** from `σ` at the calibration's `δ`, never
/// read from the stored target. A compiled mechanism is one Gaussian mechanism of sensitivity 1
/// and noise multiplier `σ` once its noise is scaled by the recorded sensitivity (Denisov et al.
/// 2022, Thm 2.1), so `σ` and `δ` determine `ε`: by the analytic Gaussian relation
/// (`mfc_runtime::privacy`, rounded up), or, under cyclic Poisson sampling (`sampling`, the
/// scheme the blob records), by the accountant's composition of `⌈n/b̂⌉` subsampled Gaussians
/// (pessimistic: an upper bound). A stored target whose `ε` is below that claims more privacy
/// than the blob gives, and is refused ([`crate::Error::OverstatedPrivacy`]). `None` for a
/// calibration without a target (`--noise-multiplier`: no `δ` to derive `ε` at).
pub fn derived_privacy(
    calibration: &mfc_formats::Calibration,
    sampling: Option<&AmplifiedBandMf>,
) -> Result<Option<(f64, f64)>, crate::Error> {
    let Some(target) = calibration.target else {
        return Ok(None);
    };
    let sigma = calibration.noise_multiplier;
    let overstated = |epsilon| crate::Error::OverstatedPrivacy {
        claimed_epsilon: target.epsilon,
        epsilon,
        delta: target.delta,
        noise_multiplier: sigma,
    };
    let epsilon = match epsilon_for(sigma, target.delta, sampling) {
        Ok(epsilon) => epsilon,
        Err(_) if sampling.is_none() => return Err(overstated(f64::INFINITY)),
        // The accountant's refusal (a loss too large for its grid…) says why in its words.
        Err(e) => return Err(e),
    };
    // The compiler rounds σ up for its target, so an honest target's ε is at least the derived
    // one, but for the bisections' 1e-12.
    if target.epsilon < epsilon * (1.0 - 1e-9) {
        return Err(overstated(epsilon));
    }
    Ok(Some((epsilon, target.delta)))
}

/// `ε` of noise multiplier `σ` at `δ`: by the analytic Gaussian relation (rounded up), or,
/// under cyclic Poisson sampling (`sampling`), by the accountant (an upper bound). Refused when
/// out of their range (an analytic `ε` above 10⁴, a privacy loss too large for the grid).
pub fn epsilon_for(
    sigma: f64,
    delta: f64,
    sampling: Option<&AmplifiedBandMf>,
) -> Result<f64, crate::Error> {
    match sampling {
        None => mfc_runtime::privacy::epsilon_for_noise_multiplier(sigma, delta).ok_or_else(|| {
            OptionError::new(
                Opt::NoiseMultiplier,
                crate::request::number(sigma),
                format!("gives no finite ε at {{delta}} {delta:e} (ε above 10^4)"),
            )
            .into()
        }),
        Some(scheme) => Ok(scheme.epsilon(sigma, delta, &PldOptions::default())?),
    }
}

/// The participation schema a blob of `steps` steps records, in words, and the sampling scheme
/// its calibration is accounted under, if it records one (cyclic Poisson sampling).
pub fn stored_schema(
    stored: &mfc_formats::Participation,
    steps: u32,
) -> Result<(String, Option<AmplifiedBandMf>)> {
    match AmplifiedBandMf::from_format(stored, steps) {
        Some(scheme) => {
            let scheme = scheme?;
            Ok((scheme.schema(), Some(scheme)))
        }
        None => Ok((Participation::from_format(stored)?.describe(), None)),
    }
}

/// What every compile report states about what ships, whatever its form: the schema and the
/// relation in words, the sensitivity recorded in the blob (twice the encoder's for replace-one)
/// and how it was computed, and the error and calibration it implies.
#[derive(Debug, Clone, Serialize)]
pub struct PrivacyStatement {
    /// The participation schema in words ([`Participation::describe`]).
    pub participation: String,
    /// The neighbouring relation the privacy figures are for: `add-remove` or `replace-one`.
    pub neighbouring: &'static str,
    /// The unit of privacy in words ([`privacy_unit`]).
    pub privacy_unit: String,
    /// `sqrt(L)` of what ships, for `σ = ζ = 1` (units of `σ·ζ`, relation included).
    pub sqrt_loss: f64,
    /// The sensitivity recorded in the blob, computed from the stored coefficients.
    pub sensitivity: f64,
    /// How the sensitivity was computed.
    pub sensitivity_method: &'static str,
    /// Whether `sensitivity` is exact rather than an upper bound.
    pub sensitivity_exact: bool,
    /// `ζ`.
    pub clip_norm: f64,
    /// Per-step standard deviation for `σ = ζ = 1`, `sens·‖B̂[i,:]‖`, for every step of the
    /// mechanism as compiled (a BLT's design steps).
    pub step_stddev: Vec<f64>,
    /// The steps that `sqrt_loss`, the per-step maxima and the RMSE are over: `step_stddev`'s,
    /// or a BLT's horizon ([`PrivacyStatement::over_horizon`]).
    pub error_steps: u64,
    /// The largest per-step standard deviation over `error_steps` (units of `σ·ζ`).
    pub max_step_stddev: f64,
    /// The last step's standard deviation over `error_steps` (units of `σ·ζ`).
    pub last_step_stddev: f64,
    /// What the error figures cover, in words, when it is not simply the blob's steps (empty
    /// otherwise): a BLT's horizon, or an unbounded BLT's design steps only.
    pub error_scope: String,
    /// Calibration, if the blob is calibrated.
    pub privacy: Option<PrivacyReport>,
    /// The sampling scheme the calibration is accounted under, if the blob records one.
    pub sampling: Option<SamplingReport>,
}

/// A blob's cyclic Poisson sampling scheme (amplified BandMF), as reports print it: the keys a
/// training loop's sampler checks itself against (Python's `CyclicPoissonSampling.check`).
#[derive(Debug, Clone, Serialize)]
pub struct SamplingReport {
    /// `"cyclic Poisson"`.
    pub scheme: &'static str,
    /// `b̂`, the number of groups.
    pub cycle_length: usize,
    /// `q`, the rate within the active group.
    pub sampling_prob: f64,
    /// `n`, the steps the scheme is accounted over.
    pub iterations: usize,
    /// `⌈n/b̂⌉`, the most steps one record takes part in.
    pub participations: u64,
}

impl SamplingReport {
    /// The report of `scheme`.
    pub fn new(scheme: &AmplifiedBandMf) -> Self {
        Self {
            scheme: "cyclic Poisson",
            cycle_length: scheme.bands(),
            sampling_prob: scheme.sampling_prob(),
            iterations: scheme.steps(),
            participations: scheme.participations(),
        }
    }
}

impl PrivacyStatement {
    /// The statement for a mechanism written with `options` under `participation`, whose encoder
    /// has sensitivity `sensitivity` (computed by `method`) and whose decoder gives
    /// `per_step_variance` for `σ = ζ = 1` and that sensitivity.
    pub fn new(
        options: &BlobOptions,
        participation: &Participation,
        sensitivity: f64,
        method: SensitivityMethod,
        per_step_variance: &[f64],
    ) -> Result<Self> {
        let factor = options.neighbouring.sensitivity_factor();
        let clip_norm = options.clip_norm;
        let step_stddev: Vec<f64> = per_step_variance
            .iter()
            .map(|v| factor * v.sqrt())
            .collect();
        let sqrt_loss = step_stddev.iter().map(|s| s * s).sum::<f64>().sqrt();
        let max_stddev = step_stddev.iter().copied().fold(0.0, f64::max);
        let steps = step_stddev.len().max(1) as f64;
        let schema = match &options.sampling {
            Some(scheme) => scheme.schema(),
            None => participation.describe(),
        };
        let privacy = match options.calibration {
            Some(cal) => {
                let derived = derived_privacy(&cal, options.sampling.as_ref())?;
                Some(PrivacyReport {
                    noise_multiplier: cal.noise_multiplier,
                    epsilon: derived.map(|(e, _)| e),
                    delta: derived.map(|(_, d)| d),
                    zcdp_rho: options
                        .sampling
                        .is_none()
                        .then(|| crate::privacy::calibrate::zcdp_rho(cal.noise_multiplier)),
                    rmse_per_step: cal.noise_multiplier * clip_norm * sqrt_loss / steps.sqrt(),
                    max_stddev_per_step: cal.noise_multiplier * clip_norm * max_stddev,
                })
            }
            None => None,
        };
        Ok(Self {
            error_steps: step_stddev.len() as u64,
            max_step_stddev: max_stddev,
            last_step_stddev: step_stddev.last().copied().unwrap_or(0.0),
            error_scope: String::new(),
            privacy_unit: privacy_unit(&schema, options.neighbouring, clip_norm),
            participation: schema,
            sampling: options.sampling.as_ref().map(SamplingReport::new),
            neighbouring: neighbouring_name(options.neighbouring),
            sqrt_loss,
            sensitivity: factor * sensitivity,
            sensitivity_method: match options.sampling {
                None => method_description(method),
                Some(_) => {
                    "exact: max column norm of the encoder, per participation (the participations are in the sampling scheme's accounting)"
                }
            },
            sensitivity_exact: method.is_exact(),
            clip_norm,
            step_stddev,
            privacy,
        })
    }

    /// The statement with its error figures over `steps` steps rather than the design steps
    /// `step_stddev` lists: a BLT that runs past the steps it was optimized for (`--horizon`),
    /// whose `sqrt(L)` and largest and last per-step stddev (`σ = ζ = 1`, relation applied) over
    /// all `steps` are `sqrt_loss`, `max` and `last` (`toeplitz::horizon_error`).
    pub fn over_horizon(mut self, steps: u64, sqrt_loss: f64, max: f64, last: f64) -> Self {
        self.error_steps = steps;
        self.sqrt_loss = sqrt_loss;
        self.max_step_stddev = max;
        self.last_step_stddev = last;
        self.error_scope = format!("over all {steps} steps");
        if let Some(p) = &mut self.privacy {
            let scale = p.noise_multiplier * self.clip_norm;
            p.rmse_per_step = scale * sqrt_loss / (steps.max(1) as f64).sqrt();
            p.max_stddev_per_step = scale * max;
        }
        self
    }

    /// The statement of a stream with no last step (an unbounded BLT): its error figures cover
    /// the design steps only, and say so.
    pub fn design_steps_only(mut self) -> Self {
        self.error_scope = format!("over the {} design steps only", self.error_steps);
        self
    }
}

impl fmt::Display for PrivacyStatement {
    /// The lines after the mechanism's own: sensitivity, error, calibration, unit of privacy.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sensitivity         {:.9}  ({}{})",
            self.sensitivity,
            self.sensitivity_method,
            if self.neighbouring == "replace-one" {
                "; doubled for replace-one"
            } else {
                ""
            }
        )?;
        let scope = if self.error_scope.is_empty() {
            String::new()
        } else {
            format!(", {}", self.error_scope)
        };
        writeln!(
            f,
            "per-step stddev     max {:.4}, last {:.4}  (units of σ·ζ{scope})",
            self.max_step_stddev, self.last_step_stddev
        )?;
        writeln!(f, "clip norm           {}", self.clip_norm)?;
        match &self.privacy {
            Some(p) => {
                write!(f, "privacy             σ = {:.6}", p.noise_multiplier)?;
                if let (Some(e), Some(d)) = (p.epsilon, p.delta) {
                    write!(
                        f,
                        "  for (ε, δ) = ({}, {d:e}), {} neighbours",
                        epsilon_text(e),
                        self.neighbouring
                    )?;
                }
                match p.zcdp_rho {
                    Some(rho) => write!(f, ", ρ-zCDP {rho:.4e}")?,
                    None => write!(f, " (privacy loss distributions: an upper bound on ε)")?,
                }
                writeln!(
                    f,
                    "; RMSE per step {:.4}, max stddev {:.4}",
                    p.rmse_per_step, p.max_stddev_per_step
                )?;
            }
            None => writeln!(
                f,
                "privacy             not calibrated (the caller supplies σ)"
            )?,
        }
        writeln!(f, "unit of privacy     {}", self.privacy_unit)
    }
}

/// Everything `mfc compile` reports.
#[derive(Debug, Clone, Serialize)]
pub struct CompileReport {
    /// The workload, as given.
    pub workload: String,
    /// `n`.
    pub steps: usize,
    /// `h`.
    pub band: usize,
    /// `r`.
    pub rank: usize,
    /// What the strategy was optimized for: `total` (the max-error banded form reports
    /// through the other forms' fields).
    pub objective: &'static str,
    /// What ships and how private it is: the schema, the relation, the sensitivity, the error.
    #[serde(flatten)]
    pub statement: PrivacyStatement,
    /// How many times the block encoder is repeated (1: not stamped).
    pub stamps: usize,
    /// `sqrt(L)` of the uncompressed mechanism under the participation schema.
    pub optimal_sqrt_loss: f64,
    /// `sqrt` of the dual lower bound of the optimized problem (absent when stamped, where the
    /// bound is only of one block's problem, and under min-separation, which has no
    /// certificate): no factorization in the optimized class does better. For fixed epoch order
    /// the class has orthogonal pattern columns (see `multi_epoch`).
    pub lower_bound_sqrt_loss: Option<f64>,
    /// The optimum is over banded encoders with this many bands (min-separation), not certified.
    pub banded_optimum: Option<usize>,
    /// Relative duality gap of the (block) optimum, `(primal − dual)/primal`.
    pub duality_gap: f64,
    /// Optimizer iterations run.
    pub iterations: usize,
    /// Size of the blob in bytes.
    pub blob_bytes: usize,
    /// RAM the runtime needs per input coordinate, in f32 words: `h + r + 2` (the last `h`
    /// noise rows, `β`, the running sum and its compensation).
    pub runtime_floats_per_coordinate: usize,
    /// Where the blob was written.
    pub out: Option<String>,
    /// Wall-clock seconds spent compiling.
    pub seconds: f64,
}

/// What a sensitivity method means, for reports and `mfc inspect`.
pub fn method_description(method: SensitivityMethod) -> &'static str {
    match method {
        SensitivityMethod::MaxColumnNorm => {
            "exact: max column norm of the encoder (single participation)"
        }
        SensitivityMethod::NonnegativeGram => {
            "exact: max over patterns of sqrt(1ᵀX[π,π]1), X = ĈᵀĈ ≥ 0 on every pattern (001 Eq. 3)"
        }
        SensitivityMethod::AbsoluteGramBound => {
            "upper bound: max over patterns of sqrt(Σ|X[π,π]|), X = ĈᵀĈ has negative entries"
        }
        SensitivityMethod::SpectralBound => {
            "upper bound: sqrt(k)·max over patterns of ‖Ĉ[:,π]‖₂ (001 Thm 2.1)"
        }
        SensitivityMethod::GeneratorResidualBound => {
            "upper bound: sens(ŶE)/(1 − ‖M̂T̂ − I‖₁) for the optimal FFT decoder"
        }
        SensitivityMethod::OrthogonalColumns => {
            "exact: columns a pattern can hold are orthogonal, max over patterns of sqrt(Σ‖ĉ_i‖²) by dynamic programming"
        }
        SensitivityMethod::NonincreasingToeplitz => {
            "exact: Toeplitz encoder with non-negative, non-increasing coefficients, worst pattern {0, b, 2b, …}"
        }
        SensitivityMethod::PatternSearchBound => {
            "upper bound: branch and bound over patterns of sqrt(Σ|X[π,π]|), stopped at its budget \
             (at its root for a banded blob a device verifies: the row-wise bound)"
        }
        SensitivityMethod::ToeplitzMajorantBound => {
            "upper bound: the {0, b, 2b, …} pattern of the non-increasing majorant of |c|"
        }
        SensitivityMethod::BltTailBound => {
            "upper bound for every horizon: the head of the BLT encoder's column checked by its residual plus a bound of its tail by a contracting power of its state matrix, rounding included (SPEC, Unbounded horizon; a device recomputes it)"
        }
        _ => "unknown method",
    }
}

/// `add-remove` or `replace-one`, as the CLI spells the relation.
pub fn neighbouring_name(neighbouring: Neighbouring) -> &'static str {
    match neighbouring {
        Neighbouring::AddOrRemove => "add-remove",
        Neighbouring::ReplaceOne => "replace-one",
        _ => "unknown",
    }
}

/// The unit of privacy in words, as every report and `mfc inspect` print it next to `(ε, δ)`:
/// what one record contributes and which datasets are neighbours.
pub fn privacy_unit(schema: &str, neighbouring: Neighbouring, clip_norm: f64) -> String {
    let relation = match neighbouring {
        Neighbouring::ReplaceOne => "replacing one record by another (sensitivity doubled)",
        _ => "adding or removing one record",
    };
    format!(
        "one record: its input rows, each clipped to ζ = {clip_norm} (a whole step's row when a step holds one record), under {schema}; neighbouring datasets differ by {relation}"
    )
}

impl CompileReport {
    /// Assembles the report of a compiled mechanism written with `options`.
    pub fn new(
        workload: String,
        compiled: &CompiledMechanism,
        options: &BlobOptions,
        blob_bytes: usize,
    ) -> Result<Self> {
        let c = &compiled.compressed;
        let factor = options.neighbouring.sensitivity_factor();
        let banded_optimum = match compiled.participation {
            Participation::MinSeparation { min_separation, .. } => {
                Some(min_separation.min(c.steps / compiled.stamps))
            }
            _ => None,
        };
        let statement = PrivacyStatement::new(
            options,
            &compiled.participation,
            compiled.sensitivity,
            compiled.sensitivity_method,
            &compiled.per_step_variance,
        )?;
        Ok(Self {
            workload,
            steps: c.steps,
            band: c.band,
            rank: c.rank,
            objective: Objective::Total.name(),
            statement,
            stamps: compiled.stamps,
            optimal_sqrt_loss: factor * compiled.optimal_sqrt_loss,
            lower_bound_sqrt_loss: (compiled.stamps == 1
                && certificate_holds(&compiled.participation))
            .then(|| factor * compiled.optimum.dual_bound.max(0.0).sqrt()),
            banded_optimum,
            duality_gap: compiled.optimum.relative_gap,
            iterations: compiled.optimum.iterations,
            blob_bytes,
            runtime_floats_per_coordinate: c.band + c.rank + 2,
            out: None,
            seconds: 0.0,
        })
    }
}

impl fmt::Display for CompileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "workload            {} (n = {})",
            self.workload, self.steps
        )?;
        writeln!(f, "objective           {}", Objective::Total.describe())?;
        writeln!(
            f,
            "participation       {}{}",
            self.statement.participation,
            if self.stamps > 1 {
                format!(", encoder stamped ×{}", self.stamps)
            } else {
                String::new()
            }
        )?;
        match (self.lower_bound_sqrt_loss, self.banded_optimum) {
            (_, Some(bands)) => writeln!(
                f,
                "optimum (BandMF)    sqrt(L) = {:.4}  (over banded encoders with {bands} bands, {} iterations; not certified under min-separation: `mfc compare` prints the certified fixed-epoch floor)",
                self.optimal_sqrt_loss, self.iterations
            )?,
            (Some(bound), None) => writeln!(
                f,
                "optimum             sqrt(L) = {:.4}  (dual bound {bound:.4}, relative gap {:.2e}, {} iterations)",
                self.optimal_sqrt_loss, self.duality_gap, self.iterations
            )?,
            // No bound for the whole horizon: a stamped mechanism (each block is certified).
            (None, None) => writeln!(
                f,
                "dense mechanism     sqrt(L) = {:.4}  (each stamp's block certified to relative gap {:.2e}, {} iterations)",
                self.optimal_sqrt_loss, self.duality_gap, self.iterations
            )?,
        }
        writeln!(
            f,
            "shipped (h, r)      ({}, {})  sqrt(L) = {:.4}  ({:+.2}% over the {})",
            self.band,
            self.rank,
            self.statement.sqrt_loss,
            100.0 * (self.statement.sqrt_loss / self.optimal_sqrt_loss - 1.0),
            if self.lower_bound_sqrt_loss.is_some() {
                "optimum"
            } else {
                "dense mechanism"
            }
        )?;
        write!(f, "{}", self.statement)?;
        writeln!(
            f,
            "runtime memory      (h + r + 2)·d = {}·d floats",
            self.runtime_floats_per_coordinate
        )?;
        write!(f, "blob                {} bytes", self.blob_bytes)?;
        if let Some(out) = &self.out {
            write!(f, " -> {out}")?;
        }
        writeln!(f, "  ({:.2} s)", self.seconds)
    }
}
