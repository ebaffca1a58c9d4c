//! The compile behind `mfc compile` and the Python package's `mfc.compile`: a typed
//! [`CompileRequest`] (`crate::request`) → the workload, the participation schema and the
//! calibration → the one dispatch over the forms ([`crate::forms`]: optimize, compress or fit,
//! round, record the sensitivity of what ships, encode) → the blob's bytes and the report (JSON
//! fields and text). Callers write the blob and print the report themselves; progress and
//! warnings reach them through a callback, so this module never prints.

use std::time::Instant;

use faer::Mat;
use mfc_formats::{Calibration, PrivacyTarget};

use crate::Error;
use crate::budget;
use crate::forms::banded::compress::CompressOptions;
use crate::forms::banded::{CompileOptions, compile_from_optimum};
use crate::forms::bandmf::{BandMfKind, BandMfOptions, Bands, CompiledBandMf, compile_bandmf};
use crate::forms::blt::{CompiledBlt, compile_blt, compile_blt_unbounded, horizon_errors};
use crate::forms::fft::{FftKind, FftOptions, compile_fft};
use crate::max_error::Objective;
use crate::max_error::banded_low_rank::{BandedMaxErrorOptions, compile_banded_max_error};
use crate::max_error::bandmf::{BandMfMaxErrorOptions, compile_bandmf_max_error};
use crate::max_error::blt::{BltHorizon, optimize_blt_max_error_family};
use crate::max_error::dense::MaxErrorOptions;
use crate::optimize::banded::general::{GeneralOptions, SECONDS_BUDGET, Stopped, iteration_cap};
use crate::optimize::blt::optimize_blt;
use crate::optimize::multi_epoch::MultiEpochOptions;
use crate::optimize::optimum::{OptimumOptions, choose_stamps, optimal_gram};
use crate::optimize::single::{OptimizeOptions, Progress};
use crate::privacy::accountant::PldOptions;
use crate::privacy::accountant::bandmf::{
    AmplifiedBandMf, BandTarget, choose_bands, default_band_candidates,
};
use crate::privacy::calibrate::noise_multiplier_for;
use crate::privacy::participation::Participation;
use crate::report::{CompileReport, PrivacyStatement, epsilon_for};
use crate::request::{
    CompileRequest, FormSpec, Horizon, Opt, OptionError, Privacy, Sampling, Stamps, WorkloadSpec,
};
use crate::ship::blob::{BlobOptions, Shipped, step_stddev};
use crate::workload::{self, Schedule, Workload};

/// The largest horizon a banded Toeplitz BandMF takes with a learning-rate schedule without
/// `force` (its loss is `O(n²)` per evaluation; BENCHMARKS.md has its cost).
const MAX_SCHEDULED_TOEPLITZ_STEPS: usize = 65_536;

/// What the pipeline tells its caller while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A progress line (the CLI shows it on a spinner or every few seconds).
    Progress(String),
    /// A line the caller should always show (the dense compile's estimated memory and time).
    Warning(String),
}

/// A compiled mechanism: the blob, the workload it was compiled for, and its report.
#[derive(Debug)]
pub struct Compiled {
    /// The `.mfc` blob.
    pub blob: Vec<u8>,
    /// The workload `A`.
    pub workload: Workload,
    /// n, the steps `A` has (a BLT blob's horizon may be longer).
    pub steps: usize,
    report: Report,
}

#[derive(Debug)]
enum Report {
    Banded(Box<CompileReport>),
    Fields {
        fields: serde_json::Value,
        text: String,
    },
}

impl Compiled {
    /// The report as `mfc compile --json` prints it, `out` the path the blob was written to.
    pub fn json(&self, out: Option<&str>) -> serde_json::Value {
        match &self.report {
            Report::Banded(report) => {
                let mut report = report.clone();
                report.out = out.map(str::to_string);
                serde_json::to_value(&report).unwrap_or_default()
            }
            Report::Fields { fields, .. } => {
                let mut fields = fields.clone();
                fields["out"] = serde_json::json!(out);
                fields
            }
        }
    }

    /// The report as `mfc compile` prints it, `out` the path the blob was written to.
    pub fn text(&self, out: Option<&str>) -> String {
        match &self.report {
            Report::Banded(report) => {
                let mut report = report.clone();
                report.out = out.map(str::to_string);
                report.to_string()
            }
            Report::Fields { text, .. } => {
                let to = out.map_or(String::new(), |o| format!(" -> {o}"));
                format!("{text}blob                {} bytes{to}\n", self.blob.len())
            }
        }
    }
}

/// The workload of `spec` and its number of steps `n` (`steps`, or the matrix's size, which
/// `steps` must then match).
pub fn workload(spec: &WorkloadSpec, steps: Option<usize>) -> Result<(Workload, usize), Error> {
    let required = || -> Result<usize, Error> {
        steps.ok_or_else(|| {
            OptionError::new(
                Opt::Steps,
                "",
                "is required (the horizon n) for this workload",
            )
            .into()
        })
    };
    let matrix = |label: String, matrix: Mat<f64>| -> Result<(Workload, usize), Error> {
        workload::validate(&matrix).map_err(|e| Error::InvalidWorkload(format!("{label}: {e}")))?;
        let n = matrix.nrows();
        if let Some(s) = steps.filter(|&s| s != n) {
            return Err(OptionError::new(
                Opt::Steps,
                s,
                format!("does not match the {n}×{n} matrix of {{workload}} {label}"),
            )
            .into());
        }
        Ok((Workload::Custom { label, matrix }, n))
    };
    match spec {
        WorkloadSpec::Prefix => Ok((Workload::PrefixSum, required()?)),
        WorkloadSpec::Momentum { beta, schedule } => Ok((
            Workload::Momentum {
                momentum: *beta,
                schedule: *schedule,
            },
            required()?,
        )),
        WorkloadSpec::Npy(path) => {
            let label = path.display().to_string();
            let a = workload::read_npy(&label)?;
            matrix(label, a)
        }
        WorkloadSpec::Matrix { label, matrix: a } => matrix(label.clone(), a.clone()),
    }
}

/// The calibration a blob records for `privacy`: `σ` for a target (rounded up), or the given
/// `σ` with the `ε` it gives at the given `δ`.
fn calibration(
    privacy: Privacy,
    sampling: Option<&AmplifiedBandMf>,
) -> Result<Option<Calibration>, Error> {
    Ok(match privacy {
        Privacy::Uncalibrated => None,
        Privacy::Target { epsilon, delta } => {
            let sigma = match sampling {
                Some(scheme) => scheme.noise_multiplier(epsilon, delta, &PldOptions::default())?,
                None => noise_multiplier_for(epsilon, delta).ok_or_else(|| {
                    OptionError::new(
                        Opt::Epsilon,
                        crate::request::number(epsilon),
                        format!(
                            "no noise multiplier in (0, 10^6] reaches it at {{delta}} {delta:e}"
                        ),
                    )
                })?,
            };
            Some(Calibration {
                noise_multiplier: sigma,
                target: Some(PrivacyTarget { epsilon, delta }),
            })
        }
        Privacy::NoiseMultiplier { sigma, delta } => Some(Calibration {
            noise_multiplier: sigma,
            target: match delta {
                Some(delta) => Some(PrivacyTarget {
                    epsilon: epsilon_for(sigma, delta, sampling)?,
                    delta,
                }),
                None => None,
            },
        }),
    })
}

/// The cyclic Poisson sampling scheme of `request` (amplified BandMF), if it has one, and the
/// bands chosen for it when `--bands auto` is given with a dataset and batch: the candidate
/// `b̂` minimizing `σ(b̂)·√L(b̂)` (McKenna 2025, §5; [`choose_bands`]), `√L(b̂)` that of the
/// banded Toeplitz optimum for `b̂` bands under single participation (for a general encoder, a
/// proxy: the general optimum is a few percent lower at every `b̂`).
fn amplified(
    request: &CompileRequest,
    workload: &Workload,
    steps: usize,
    on_event: &mut dyn FnMut(Event),
) -> Result<(Option<AmplifiedBandMf>, Option<usize>), Error> {
    let Some(sampling) = request.sampling else {
        return Ok((None, None));
    };
    let FormSpec::BandMf { bands, .. } = request.form else {
        return Err(Error::InvalidArgument(
            "amplification by sampling needs the bandmf form".into(),
        ));
    };
    match (sampling, bands) {
        (Sampling::Rate { sampling_prob }, Bands::Fixed(b)) => {
            Ok((Some(AmplifiedBandMf::new(steps, b, sampling_prob)?), None))
        }
        (Sampling::Rate { sampling_prob }, Bands::Auto { .. }) => Err(OptionError::new(
            Opt::SamplingProb,
            crate::request::number(sampling_prob),
            "needs {bands} B, a fixed number of bands",
        )
        .into()),
        (
            Sampling::Batch {
                dataset_size,
                batch_size,
            },
            Bands::Fixed(b),
        ) => Ok((
            Some(AmplifiedBandMf::for_batch(
                steps,
                b,
                dataset_size,
                batch_size,
            )?),
            None,
        )),
        (
            Sampling::Batch {
                dataset_size,
                batch_size,
            },
            Bands::Auto { max },
        ) => {
            let Privacy::Target { epsilon, delta } = request.privacy else {
                return Err(OptionError::new(
                    Opt::Bands,
                    "auto",
                    "with {dataset_size}, chooses the bands for a target: give {epsilon} and {delta}, or a fixed {bands} B",
                )
                .into());
            };
            let candidates: Vec<usize> = default_band_candidates(steps, dataset_size, batch_size)
                .into_iter()
                .filter(|&b| b <= max)
                .collect();
            let target = BandTarget {
                steps,
                dataset_size,
                batch_size,
                epsilon,
                delta,
            };
            let (best, all) = choose_bands(
                &target,
                Some(&candidates),
                |b| -> Result<f64, Error> {
                    let options = BandMfOptions {
                        participation: Participation::Single,
                        kind: BandMfKind::Toeplitz,
                        bands: Bands::Fixed(b),
                        ..BandMfOptions::default()
                    };
                    let loss = compile_bandmf(workload, steps, &options, &mut |_, _| {})?.sqrt_loss;
                    on_event(Event::Progress(format!(
                        "--bands auto: b̂ = {b}, banded Toeplitz sqrt(L) = {loss:.4}"
                    )));
                    Ok(loss)
                },
                &PldOptions::default(),
            )?;
            let tried: Vec<String> = all
                .iter()
                .map(|c| {
                    format!(
                        "{}: σ {:.4}, σ·√L {:.1}",
                        c.bands, c.noise_multiplier, c.error
                    )
                })
                .collect();
            on_event(Event::Progress(format!(
                "--bands auto chose b̂ = {} (q = {}) of {}",
                best.bands,
                best.sampling_prob,
                tried.join("; ")
            )));
            Ok((
                Some(AmplifiedBandMf::for_batch(
                    steps,
                    best.bands,
                    dataset_size,
                    batch_size,
                )?),
                Some(best.bands),
            ))
        }
    }
}

/// Compiles `request`: everything but writing the blob and printing. The checks that need the
/// horizon come first (a separation, a band, stamps at most `n`; the memory of the forms that
/// hold vectors of `n`), then the one dispatch over the forms.
pub fn compile(
    request: &CompileRequest,
    on_event: &mut dyn FnMut(Event),
) -> Result<Compiled, Error> {
    let started = Instant::now();
    let (workload, steps) = workload(&request.workload, request.steps)?;
    let (sampling, chosen_bands) = amplified(request, &workload, steps, on_event)?;
    let calibration = calibration(request.privacy, sampling.as_ref())?;
    // The steps the sensitivity covers: a BLT blob's horizon may exceed its design steps.
    let covered = match request.form {
        FormSpec::Blt {
            horizon: Some(Horizon::Steps(horizon)),
            ..
        } if horizon < steps => {
            return Err(OptionError::new(
                Opt::Horizon,
                horizon,
                format!("must be at least {{steps}} ({steps}), or `unbounded`"),
            )
            .into());
        }
        FormSpec::Blt {
            horizon: Some(Horizon::Steps(horizon)),
            ..
        } => horizon,
        _ => steps,
    };
    let participation = request.participation;
    crate::request::check_separation(&participation, covered)?;
    check_linear_memory(request, covered)?;
    match request.form {
        FormSpec::Banded {
            band, rank, stamps, ..
        } => {
            if band > steps {
                return Err(OptionError::new(
                    Opt::Band,
                    band,
                    format!("expected an integer in 1..={steps} (n = {steps})"),
                )
                .into());
            }
            if rank > steps {
                return Err(OptionError::new(
                    Opt::Rank,
                    rank,
                    format!("expected an integer in 0..={steps} (n = {steps})"),
                )
                .into());
            }
            if let Stamps::Count(s) = stamps {
                if s == 0 || steps % s != 0 {
                    return Err(OptionError::new(
                        Opt::Stamps,
                        s,
                        format!("expected a divisor of {{steps}} ({steps}), or `auto`"),
                    )
                    .into());
                }
            }
        }
        FormSpec::Fft { stamps, .. } if stamps == 0 || steps % stamps != 0 => {
            return Err(OptionError::new(
                Opt::Stamps,
                stamps,
                format!("expected a divisor of {{steps}} ({steps})"),
            )
            .into());
        }
        _ => {}
    }
    let blob_options = BlobOptions {
        clip_norm: request.clip_norm,
        calibration,
        neighbouring: request.neighbouring,
        sampling,
    };
    let job = Job {
        request,
        steps,
        participation,
        blob_options,
        started,
    };
    let (blob, report) = match &request.form {
        FormSpec::Banded { .. } => job.banded(&workload, on_event)?,
        FormSpec::BandMf { kind, bands } => {
            let bands = chosen_bands.map_or(*bands, Bands::Fixed);
            job.bandmf(&workload, *kind, bands, on_event)?
        }
        FormSpec::Blt { buffers, horizon } => job.blt(*buffers, *horizon)?,
        FormSpec::Fft { kind, stamps } => job.fft(*kind, *stamps)?,
    };
    Ok(Compiled {
        blob,
        workload,
        steps,
        report,
    })
}

/// The forms whose compile holds a few vectors of `n` floats (BLT, BandMF Toeplitz for the prefix
/// sum or momentum): a horizon whose vectors exceed this machine's available memory is refused
/// up front (it would abort on allocation otherwise), naming the largest horizon that fits.
fn check_linear_memory(request: &CompileRequest, steps: usize) -> Result<(), Error> {
    // Measured peaks (GNU time, maximum resident set): about 8 bytes per step for BLT and 24
    // for BandMF Toeplitz at n = 10^8; a factor of 4 above them for the later stages.
    let (option, bytes_per_step) = match request.form {
        FormSpec::Blt { horizon, .. } => (
            if horizon.is_some() {
                Opt::Horizon
            } else {
                Opt::Steps
            },
            32.0,
        ),
        FormSpec::BandMf {
            kind: BandMfKind::Toeplitz,
            ..
        } => (Opt::Steps, 96.0),
        _ => return Ok(()),
    };
    match budget::available_memory() {
        Some(available) if steps as f64 * bytes_per_step > available && !request.force => {
            Err(OptionError::new(
                option,
                steps,
                format!(
                    "the {} compile holds about {bytes_per_step} bytes per step, {:.1} GB; this \
                     machine has {:.1} GB available, enough for {{{}}} up to {} ({{force}} tries \
                     anyway)",
                    request.form.kind().name(),
                    steps as f64 * bytes_per_step / 1e9,
                    available / 1e9,
                    option.name(),
                    (available / bytes_per_step) as u64
                ),
            )
            .into())
        }
        _ => Ok(()),
    }
}

/// One compile's settled options.
struct Job<'r> {
    request: &'r CompileRequest,
    steps: usize,
    participation: Participation,
    blob_options: BlobOptions,
    started: Instant,
}

impl Job<'_> {
    /// The banded+low-rank form.
    fn banded(
        &self,
        workload: &Workload,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps) = (self.request, self.steps);
        let FormSpec::Banded {
            band,
            rank,
            stamps,
            refine,
            gap,
        } = request.form
        else {
            return Err(Error::InvalidArgument(
                "the banded form's job got another form".into(),
            ));
        };
        if request.objective == Objective::Max {
            check_budget(
                request,
                workload,
                Stamps::Count(1),
                steps,
                &self.participation,
                on_event,
            )?;
            return self.banded_max_error(workload, (band, rank), refine, gap, on_event);
        }
        check_budget(
            request,
            workload,
            stamps,
            steps,
            &self.participation,
            on_event,
        )?;
        let a = workload.matrix(steps)?;
        let mut options = CompileOptions {
            optimum: OptimumOptions {
                participation: self.participation,
                optimize: OptimizeOptions {
                    relative_gap: gap,
                    ..OptimizeOptions::default()
                },
                multi_epoch: MultiEpochOptions {
                    // Newton on the dual converges quadratically: the gap asked for is reached.
                    relative_gap: gap,
                    ..MultiEpochOptions::default()
                },
                ..OptimumOptions::default()
            },
            compression: CompressOptions {
                refine_iterations: refine,
                ..CompressOptions::default()
            },
        };
        options.optimum.stamps = match stamps {
            Stamps::Auto => {
                on_event(Event::Progress(
                    "choosing the number of stamps by loss".into(),
                ));
                let tried = choose_stamps(a.as_ref(), &options.optimum)?;
                tried.first().map_or(1, |&(s, _)| s)
            }
            Stamps::Count(s) => s,
        };
        let min_separation = matches!(self.participation, Participation::MinSeparation { .. });
        let mut on_progress = |p: &Progress| {
            // The min-separation optimizer has no dual bound: it reports its loss, never a gap
            // (NaN) or a target it does not aim at. The others report their gap once a dual
            // point bounds it.
            let line = if min_separation {
                format!(
                    "optimizing n = {steps} under min-separation: iteration {}, loss {:.6e} (no dual bound under min-separation: no duality gap)",
                    p.iteration, p.primal
                )
            } else if p.relative_gap.is_finite() {
                format!(
                    "optimizing n = {steps}: iteration {}, relative duality gap {:.2e} (target {:.0e})",
                    p.iteration, p.relative_gap, gap
                )
            } else {
                format!(
                    "optimizing n = {steps}: iteration {}, relative duality gap not bounded yet (target {:.0e})",
                    p.iteration, gap
                )
            };
            on_event(Event::Progress(line));
        };
        let (optimum, x) = optimal_gram(a.as_ref(), &options.optimum, &mut on_progress)?;
        // The fit and its refinement report no progress of their own: a phase line, which a
        // log repeats while it runs.
        on_event(Event::Progress(format!(
            "n = {steps}: fitting (h, r) = ({band}, {rank}) to the optimum{}",
            match (refine, min_separation) {
                (0, _) => "",
                (_, false) => ", then refining the loss that ships",
                (_, true) =>
                    ", then refining the loss that ships against the worst patterns \
                              a search finds (the longest phase under min-separation)",
            }
        )));
        let mut compiled = compile_from_optimum(a.as_ref(), band, rank, &options, optimum, x)?;
        let written = crate::forms::banded::encode(&compiled, workload, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let mut report = CompileReport::new(
            request.workload.spec(),
            &compiled,
            &self.blob_options,
            blob.len(),
        )?;
        report.seconds = self.started.elapsed().as_secs_f64();
        Ok((blob, Report::Banded(Box::new(report))))
    }

    /// The banded form under `--objective max` (single participation, one stamp; the request
    /// checked both): the certified max-error optimum `γ₂` with its dual bound, compressed to
    /// `(h, r)`, refined and rescaled on the max error of what ships
    /// ([`crate::max_error::banded_low_rank`]), measured densely from the stored coefficients.
    fn banded_max_error(
        &self,
        workload: &Workload,
        (band, rank): (usize, usize),
        refine: usize,
        gap: f64,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps) = (self.request, self.steps);
        let a = workload.matrix(steps)?;
        let options = BandedMaxErrorOptions {
            optimize: MaxErrorOptions {
                relative_gap: gap,
                // A slow certificate (momentum) ships its best point, with its gap reported.
                best_at_budget: true,
                ..MaxErrorOptions::default()
            },
            compression: CompressOptions {
                refine_iterations: refine,
                ..CompressOptions::default()
            },
            ..BandedMaxErrorOptions::default()
        };
        let mut announced = false;
        let compiled = compile_banded_max_error(a.as_ref(), band, rank, &options, &mut |p| {
            let line = if p.relative_gap.is_finite() {
                format!(
                    "optimizing the max error, n = {steps}: iteration {}, relative duality gap {:.2e} (target {gap:.0e})",
                    p.iteration, p.relative_gap
                )
            } else {
                format!(
                    "optimizing the max error, n = {steps}: iteration {}, relative duality gap not bounded yet (target {gap:.0e})",
                    p.iteration
                )
            };
            on_event(Event::Progress(line));
            if p.relative_gap <= gap && !announced {
                announced = true;
                on_event(Event::Progress(format!(
                    "n = {steps}: fitting (h, r) = ({band}, {rank}) to the max-error optimum{}",
                    if refine > 0 {
                        ", then refining and rescaling the max error that ships"
                    } else {
                        ""
                    }
                )));
            }
        })?;
        let optimum = &compiled.optimum;
        if optimum.relative_gap > gap {
            on_event(Event::Warning(format!(
                "the max-error optimum is certified to a relative gap of {:.1e} only, after {} \
                 iterations (target {gap:.0e}, the `gap` option): the blob ships the best point found, \
                 its distance to the optimum bounded by that gap",
                optimum.relative_gap, optimum.iterations
            )));
        }
        let measured = &compiled.measured;
        let shipped = Shipped {
            participation: &self.participation,
            sensitivity: measured.sensitivity,
            method: measured.method,
            sqrt_loss: measured.sqrt_loss,
            optimal_sqrt_loss: None,
            step_stddev: step_stddev(&measured.per_step_variance),
        };
        let written = crate::forms::banded::encode_decoder(
            &compiled.compressed,
            shipped,
            workload,
            &self.blob_options,
        )?;
        let blob = written.bytes;
        let statement = PrivacyStatement::new(
            &self.blob_options,
            &self.participation,
            written.sensitivity,
            measured.method,
            &measured.per_step_variance,
        )?;
        let factor = self.blob_options.neighbouring.sensitivity_factor();
        let fields = serde_json::json!({
            "workload": request.workload.spec(),
            "form": "banded",
            "steps": steps,
            "band": band,
            "rank": rank,
            "optimal_max_error": factor * optimum.max_error,
            "max_error_dual_bound": factor * optimum.dual_bound,
            "duality_gap": optimum.relative_gap,
            "iterations": optimum.iterations,
            "runtime_floats_per_coordinate": band + rank + 2,
        });
        let text = format!(
            "workload            {} (n = {steps})\n\
             participation       {}\n\
             optimum             max error {:.4}, certified: no factorization is below {:.4} (relative gap {:.1e}, {} iterations)\n\
             shipped (h, r)      ({band}, {rank})  max error {:.4} ({:+.2}% above the optimum), sqrt(L) = {:.4}\n\
             {statement}\
             runtime memory      (h + r + 2)·d = {}·d floats\n",
            workload.label(),
            statement.participation,
            factor * optimum.max_error,
            factor * optimum.dual_bound,
            optimum.relative_gap,
            optimum.iterations,
            statement.max_step_stddev,
            100.0 * (statement.max_step_stddev / (factor * optimum.max_error) - 1.0),
            statement.sqrt_loss,
            band + rank + 2,
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }

    /// The report of the BLT, FFT and BandMF forms: `fields` and `statement`'s keys, the noise
    /// multiplier, the blob's size and the time taken; `text` for the CLI.
    fn report(
        &self,
        blob: &[u8],
        mut fields: serde_json::Value,
        statement: &PrivacyStatement,
        text: String,
    ) -> Report {
        if let (Some(map), Ok(serde_json::Value::Object(extra))) =
            (fields.as_object_mut(), serde_json::to_value(statement))
        {
            map.extend(extra);
        }
        fields["noise_multiplier"] =
            serde_json::json!(self.blob_options.calibration.map(|c| c.noise_multiplier));
        fields["blob_bytes"] = serde_json::json!(blob.len());
        fields["seconds"] = serde_json::json!(self.started.elapsed().as_secs_f64());
        // The FFT forms have nothing to optimize: both objectives ship the same blob.
        let (name, describe) = match self.request.form {
            FormSpec::Fft { .. } => (
                "none",
                "none: the FFT form has no free parameter (both objectives ship the same blob)",
            ),
            _ => (
                self.request.objective.name(),
                self.request.objective.describe(),
            ),
        };
        fields["objective"] = serde_json::json!(name);
        // The objective's line follows the workload's.
        let text = match text.split_once('\n') {
            Some((first, rest)) => format!("{first}\nobjective           {describe}\n{rest}"),
            None => text,
        };
        Report::Fields { fields, text }
    }

    /// `--form blt`: optimize the BLT for `--steps`, round it, compute the sensitivity over
    /// `--horizon` (or bound it for every horizon).
    fn blt(&self, buffers: usize, horizon: Option<Horizon>) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps, participation) = (self.request, self.steps, &self.participation);
        let blt = match request.objective {
            Objective::Total => optimize_blt(steps, buffers, participation)?,
            // The fit for `buffers` buffers starts from the one with one fewer: the family.
            Objective::Max => optimize_blt_max_error_family(
                steps,
                buffers,
                participation,
                match horizon {
                    Some(Horizon::Unbounded) => BltHorizon::Unbounded,
                    _ => BltHorizon::Finite,
                },
                &mut |_| {},
            )?
            .pop()
            .ok_or_else(|| Error::Numerical("the max-error BLT family is empty".into()))?,
        };
        let mut compiled = match horizon {
            Some(Horizon::Steps(horizon)) => compile_blt(&blt, steps, horizon, participation)?,
            None => compile_blt(&blt, steps, steps, participation)?,
            Some(Horizon::Unbounded) => compile_blt_unbounded(&blt, steps, participation)?,
        };
        if compiled.every_horizon {
            return self.unbounded_blt(&mut compiled, buffers);
        }
        let written = crate::forms::blt::encode(&compiled, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let factor = self.blob_options.neighbouring.sensitivity_factor();
        let e = &compiled.horizon_error;
        let design = PrivacyStatement::new(
            &self.blob_options,
            participation,
            compiled.sensitivity,
            compiled.sensitivity_method,
            &compiled.per_step_variance,
        )?;
        let design_sqrt_loss = design.sqrt_loss;
        // The blob runs `horizon` steps: its error figures (and the RMSE of its calibration) are
        // over all of them, not over the steps it was optimized for.
        let statement = if compiled.horizon > steps {
            design.over_horizon(
                compiled.horizon as u64,
                factor * e.sqrt_loss,
                factor * e.max_step_stddev,
                factor * e.final_step_stddev,
            )
        } else {
            design
        };
        let fields = serde_json::json!({
            "workload": request.workload.spec(),
            "form": "blt",
            "buffers": buffers,
            "steps": steps,
            "horizon": compiled.horizon,
            "theta": compiled.blt.theta,
            "omega": compiled.blt.omega,
            "horizon_sqrt_loss": factor * compiled.horizon_error.sqrt_loss,
            "horizon_max_step_stddev": factor * compiled.horizon_error.max_step_stddev,
            "horizon_final_step_stddev": factor * compiled.horizon_error.final_step_stddev,
            "runtime_floats_per_coordinate": buffers + 2,
        });
        let text = format!(
            "workload            prefix sum, BLT with {} buffers optimized for n = {steps}; the sensitivity covers {} steps\n\
             participation       {}\n\
             shipped             sqrt(L) = {:.4} over the {steps} design steps\n\
             over all {} steps   sqrt(L) = {:.4}, max step stddev {:.4}, last {:.4}  (units of σ·ζ; the blob's error figures)\n\
             {statement}\
             runtime memory      (m + 2)·d = {}·d floats, for any number of steps\n",
            buffers,
            compiled.horizon,
            statement.participation,
            design_sqrt_loss,
            compiled.horizon,
            factor * e.sqrt_loss,
            factor * e.max_step_stddev,
            factor * e.final_step_stddev,
            buffers + 2
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }

    /// The report of `--form blt --horizon unbounded`: the statement with the bound for every
    /// horizon, and how the per-step error grows with the step `t`.
    fn unbounded_blt(
        &self,
        compiled: &mut CompiledBlt,
        buffers: usize,
    ) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps) = (self.request, self.steps);
        let written = crate::forms::blt::encode(compiled, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let factor = self.blob_options.neighbouring.sensitivity_factor();
        let statement = PrivacyStatement::new(
            &self.blob_options,
            &compiled.participation,
            compiled.sensitivity,
            compiled.sensitivity_method,
            &compiled.per_step_variance,
        )?
        .design_steps_only();
        let sigma = self
            .blob_options
            .calibration
            .map_or(1.0, |c| c.noise_multiplier);
        // The standard deviation of the release of step t (in units of ζ): σ·sens·‖B[t−1,:]‖.
        let horizons = growth_horizons(steps);
        let growth: Vec<(usize, f64)> =
            horizon_errors(&compiled.blt, &horizons, compiled.sensitivity)
                .into_iter()
                .zip(&horizons)
                .map(|(e, &t)| (t, factor * sigma * e.final_step_stddev))
                .collect();
        let mut table = String::from(if self.blob_options.calibration.is_some() {
            "per-step error      step t        stddev of release t (units of ζ)   / sqrt(t)\n"
        } else {
            "per-step error      step t        stddev of release t (units of σ·ζ) / sqrt(t)\n"
        });
        for (t, stddev) in &growth {
            table.push_str(&format!(
                "                    {t:<13} {stddev:<34.4} {:.4}\n",
                stddev / (*t as f64).sqrt()
            ));
        }
        let fields = serde_json::json!({
            "workload": request.workload.spec(),
            "form": "blt",
            "buffers": buffers,
            "steps": steps,
            "horizon": "unbounded",
            "theta": compiled.blt.theta,
            "omega": compiled.blt.omega,
            "runtime_floats_per_coordinate": buffers + 2,
            "step_stddev_growth": growth
                .iter()
                .map(|(t, s)| serde_json::json!({ "step": t, "stddev": s }))
                .collect::<Vec<_>>(),
        });
        let text = format!(
            "workload            prefix sum, BLT with {} buffers optimized for n = {steps}; the sensitivity bound holds for every horizon\n\
             participation       {}\n\
             shipped             sqrt(L) = {:.4} over the {steps} design steps\n\
             {statement}\
             {table}\
             runtime memory      (m + 2)·d = {}·d floats, for any number of steps; the stream never stops on its own account\n",
            buffers,
            statement.participation,
            statement.sqrt_loss,
            buffers + 2
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }

    /// `--form fft|fft-optimal`: the FFT mechanism (001 §4, App. K), stamped.
    fn fft(&self, kind: FftKind, stamps: usize) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps) = (self.request, self.steps);
        let mut compiled = compile_fft(&FftOptions {
            steps,
            stamps,
            kind,
            participation: self.participation,
        })?;
        let written = crate::forms::fft::encode(&compiled, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let statement = PrivacyStatement::new(
            &self.blob_options,
            &self.participation,
            compiled.sensitivity,
            compiled.sensitivity_method,
            &compiled.per_step_variance,
        )?;
        let fields = serde_json::json!({
            "workload": request.workload.spec(),
            "form": request.form.kind().name(),
            "steps": steps,
            "block": compiled.block,
            "stamps": compiled.stamps,
            "generator_residual": compiled.generator_residual,
        });
        let text = format!(
            "workload            prefix sum, FFT {:?}, n = {steps} as {} block(s) of {}\n\
             participation       {}\n\
             shipped             sqrt(L) = {:.4}\n\
             {statement}",
            kind, compiled.stamps, compiled.block, statement.participation, statement.sqrt_loss,
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }

    /// The BandMF form: the encoder (general or banded Toeplitz, `b̂` fixed or `auto`) for the
    /// prefix sum or a momentum workload, rounded, its sensitivity from the stored coefficients.
    fn bandmf(
        &self,
        workload: &Workload,
        kind: BandMfKind,
        bands: Bands,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps, participation) = (self.request, self.steps, self.participation);
        if let Bands::Fixed(b) = bands {
            let most = participation.separation().unwrap_or(steps).min(steps);
            if b == 0 || b > most {
                return Err(OptionError::new(
                    Opt::Bands,
                    b,
                    format!(
                        "b̂ must be in 1..={most} ({})",
                        match participation.separation() {
                            Some(sep) if sep < steps => format!(
                                "at most the separation b = {sep}, so that one record's columns of the encoder do not overlap"
                            ),
                            _ => format!("at most the n = {steps} steps"),
                        }
                    ),
                )
                .into());
            }
        }
        let available = budget::available_memory();
        if request.objective == Objective::Max {
            // The max-error BandMF optimizer forms the workload and the decoder A C⁻¹ densely,
            // n × n matrices (the banded Toeplitz fit for the prefix sum is O(n·b̂) per
            // evaluation, its final measurement dense), and the general one costs O(n²·b̂) per
            // evaluation.
            let bytes = 3.0 * 8.0 * (steps as f64).powi(2);
            if available.is_some_and(|a| bytes > a) && !request.force {
                return Err(OptionError::new(
                    Opt::Steps,
                    steps,
                    format!(
                        "the BandMF max-error optimizer holds three n × n matrices, about {:.1} \
                         GB; this machine has {:.1} GB available ({{force}} runs it anyway)",
                        bytes / 1e9,
                        available.unwrap_or(0.0) / 1e9
                    ),
                )
                .into());
            }
            if steps >= 256
                && (kind == BandMfKind::General || !matches!(workload, Workload::PrefixSum))
            {
                on_event(Event::Warning(format!(
                    "n = {steps}: the BandMF max-error optimizer costs O(n²·b̂) per evaluation, \
                     up to a few thousand evaluations: 231 s of CPU at n = 512 with 128 bands \
                     (BENCHMARKS.md, \"Max error\"), growing as n²·b̂{}",
                    if matches!(workload, Workload::PrefixSum) {
                        "; --toeplitz fits a banded Toeplitz encoder for the prefix sum in seconds"
                    } else {
                        ""
                    }
                )));
            }
        }
        if kind == BandMfKind::General && request.objective == Objective::Total {
            // Known before any work: the optimizer's memory (linear in n for the prefix sum and
            // momentum, n² for a custom workload) and its time per evaluation.
            let most = participation.separation().unwrap_or(steps).min(steps);
            let b = match bands {
                Bands::Fixed(b) => b,
                Bands::Auto { max } => max.min(most),
            };
            let (bytes, seconds) = crate::optimize::banded::general::estimate(
                workload,
                steps,
                b,
                &crate::optimize::banded::general::GeneralOptions::default(),
            );
            if available.is_some_and(|a| bytes > a) && !request.force {
                return Err(OptionError::new(
                    Opt::Steps,
                    steps,
                    format!(
                        "the general BandMF optimizer needs about {:.1} GB of memory with {b} \
                         bands; this machine has {:.1} GB available. {}{{force}} runs the \
                         general one anyway",
                        bytes / 1e9,
                        available.unwrap_or(0.0) / 1e9,
                        if matches!(workload, Workload::Custom { .. }) {
                            "A custom workload is held as its n × n matrix; "
                        } else {
                            "{toeplitz} optimizes a banded Toeplitz encoder in O(n) memory; "
                        }
                    ),
                )
                .into());
            }
            // The cap the optimizer runs with (all rounds): it stops earlier when it converges.
            let iterations = iteration_cap(
                &GeneralOptions {
                    seconds_budget: Some(SECONDS_BUDGET),
                    ..GeneralOptions::default()
                },
                &participation,
                steps,
                seconds,
            ) as f64;
            if seconds * iterations >= 10.0 {
                let total = seconds * iterations;
                let time = if total < 120.0 {
                    format!("{total:.0} s")
                } else {
                    format!("{:.1} min", total / 60.0)
                };
                on_event(Event::Warning(format!(
                    "n = {steps}, {}{b} bands: the general BandMF optimizer takes up to about \
                     {time} on a 2-core machine (at most {iterations:.0} iterations of about \
                     {seconds:.2} s; fewer when it converges) and {:.0} MB of memory; \
                     --toeplitz optimizes a banded Toeplitz encoder in seconds",
                    if matches!(bands, Bands::Auto { .. }) {
                        "at most "
                    } else {
                        ""
                    },
                    bytes / 1e6
                )));
            }
        }
        let general_bytes = 3.0 * 8.0 * (steps as f64).powi(2);
        if kind == BandMfKind::Toeplitz
            && !matches!(workload, Workload::PrefixSum | Workload::Momentum { .. })
            && available.is_some_and(|a| general_bytes > a)
            && !request.force
        {
            // A custom workload's Toeplitz loss goes through its n × n matrix as well.
            return Err(OptionError::new(
                Opt::Steps,
                steps,
                format!(
                    "a BandMF encoder for a custom workload needs about {:.1} GB of memory (three \
                     n × n matrices); {{force}} runs it anyway",
                    general_bytes / 1e9
                ),
            )
            .into());
        }
        // A learning-rate schedule makes the banded Toeplitz loss O(n²) per evaluation (no
        // series shortcut; BENCHMARKS.md has its cost).
        if kind == BandMfKind::Toeplitz
            && matches!(
                workload,
                Workload::Momentum {
                    schedule: Schedule::Cooldown { .. },
                    ..
                }
            )
            && steps > MAX_SCHEDULED_TOEPLITZ_STEPS
            && !request.force
        {
            return Err(OptionError::new(
                Opt::Steps,
                steps,
                format!(
                    "a banded Toeplitz encoder for a workload with a learning-rate schedule \
                     ({{cooldown}}) costs O(n²) per evaluation; allowed up to \
                     {MAX_SCHEDULED_TOEPLITZ_STEPS} steps. Without {{cooldown}} the loss is \
                     O(n·b̂); {{force}} runs it anyway"
                ),
            )
            .into());
        }
        let options = BandMfOptions {
            participation,
            kind,
            bands,
            general: GeneralOptions {
                seconds_budget: Some(SECONDS_BUDGET),
                ..GeneralOptions::default()
            },
            ..BandMfOptions::default()
        };
        let mut compiled = match request.objective {
            Objective::Total => compile_bandmf(workload, steps, &options, &mut |what, loss| {
                // The general optimizer reports its objective F, an upper bound on L.
                let value = if what.starts_with("general") {
                    "bound sqrt(F)"
                } else {
                    "sqrt(L)"
                };
                on_event(Event::Progress(format!(
                    "n = {steps}: {what}, {value} = {:.4}",
                    loss.sqrt()
                )));
            })?,
            // `tried` holds the banded Toeplitz optima's max errors, by which `auto` chose.
            Objective::Max => {
                let fitted = compile_bandmf_max_error(
                    workload,
                    steps,
                    &BandMfMaxErrorOptions {
                        participation,
                        kind,
                        bands,
                        ..BandMfMaxErrorOptions::default()
                    },
                )?;
                CompiledBandMf {
                    tried: fitted.tried,
                    ..fitted.compiled
                }
            }
        };
        let written = crate::forms::bandmf::encode(&compiled, workload, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let factor = self.blob_options.neighbouring.sensitivity_factor();
        let prefix = matches!(workload, Workload::PrefixSum);
        let floats = compiled.bands + 2 * usize::from(prefix);
        let kind_name = match kind {
            BandMfKind::General => "general banded",
            BandMfKind::Toeplitz => "banded Toeplitz",
        };
        let statement = PrivacyStatement::new(
            &self.blob_options,
            &participation,
            compiled.sensitivity,
            compiled.sensitivity_method,
            &compiled.per_step_variance,
        )?;
        let releases = if prefix {
            "prefix sums S(x + C⁻¹z)"
        } else {
            "noised inputs x_t + (C⁻¹z)_t; the optimizer applies the workload A itself"
        };
        let fields = serde_json::json!({
            "workload": request.workload.spec(),
            "form": "bandmf",
            "kind": kind_name,
            "steps": steps,
            "bands": compiled.bands,
            "tried": compiled.tried,
            "toeplitz_sqrt_loss": compiled.toeplitz_sqrt_loss.map(|l| factor * l),
            "general_iterations": compiled.general_run.map(|r| r.1),
            "general_stopped_at_budget": compiled
                .general_run
                .map(|r| r.0 == Stopped::IterationBudget),
            "releases": releases,
            "runtime_floats_per_coordinate": floats,
        });
        let tried = if matches!(bands, Bands::Auto { .. }) {
            let tried: Vec<String> = compiled
                .tried
                .iter()
                .map(|(b, l)| format!("{b}: {:.4}", factor * l))
                .collect();
            format!(
                " (auto; banded Toeplitz {} by b̂: {})",
                match request.objective {
                    Objective::Total => "sqrt(L)",
                    Objective::Max => "max error",
                },
                tried.join(", ")
            )
        } else {
            String::new()
        };
        let start = match compiled.toeplitz_sqrt_loss {
            Some(t) => format!(
                "  ({:+.2}% against the banded Toeplitz optimum it started from, {:.4}{})",
                100.0 * (compiled.sqrt_loss / t - 1.0),
                factor * t,
                match compiled.general_run {
                    Some((Stopped::IterationBudget, iterations)) => format!(
                        "; the optimizer stopped at its budget of {iterations} iterations \
                         ({SECONDS_BUDGET:.0} s of estimated time on a 2-core machine)"
                    ),
                    // One band under single participation: the start is optimal (bandmf.rs).
                    Some((Stopped::Converged, 0)) => {
                        "; the start is optimal, the optimizer did not run".to_string()
                    }
                    Some((Stopped::Converged, iterations)) => {
                        format!("; the optimizer converged after {iterations} iterations")
                    }
                    Some((Stopped::Interrupted, iterations)) => {
                        format!("; the optimizer was interrupted after {iterations} iterations")
                    }
                    None if kind == BandMfKind::General => {
                        "; the Toeplitz start shipped: the optimizer found nothing better".into()
                    }
                    None => String::new(),
                }
            ),
            None => String::new(),
        };
        let text = format!(
            "workload            {} (n = {steps})\n\
             participation       {}\n\
             encoder             BandMF, {kind_name}, b̂ = {}{tried}\n\
             shipped             sqrt(L) = {:.4}{start}\n\
             {statement}\
             releases            {releases}\n\
             runtime memory      {} = {floats}·d floats, for any number of steps\n",
            workload.label(),
            statement.participation,
            match compiled.bands {
                1 => "1 band".to_string(),
                b => format!("{b} bands"),
            },
            statement.sqrt_loss,
            if prefix { "(b̂ + 2)·d" } else { "b̂·d" },
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }
}

/// Before any `O(n³)` work: the estimated memory and time of the dense compile as a warning, and
/// a refusal (naming the forms that scale) when the memory exceeds what this machine has
/// available, unless `force`.
fn check_budget(
    request: &CompileRequest,
    workload: &Workload,
    stamps: Stamps,
    steps: usize,
    participation: &Participation,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), Error> {
    let stamps = match stamps {
        Stamps::Count(s) => s.max(1),
        Stamps::Auto => 1,
    };
    let refine = matches!(request.form, FormSpec::Banded { refine, .. } if refine > 0);
    let estimate = budget::estimate(steps, steps / stamps, participation, workload, refine);
    let gb = |bytes: f64| bytes / 1e9;
    let time = |seconds: f64| {
        if seconds < 120.0 {
            format!("{seconds:.0} s")
        } else if seconds < 7200.0 {
            format!("{:.0} min", seconds / 60.0)
        } else {
            format!("{:.0} h", seconds / 3600.0)
        }
    };
    let available = budget::available_memory();
    if let Some(available) = available {
        if estimate.bytes > available && !request.force {
            return Err(OptionError::new(
                Opt::Steps,
                steps,
                format!(
                    "the dense compile of the banded form needs about {:.1} GB of memory and {} \
                     on a 2-core machine; this machine has {:.1} GB available, enough for \
                     {{steps}} up to {}. Forms that scale to any n: {{form}} blt (buffered linear \
                     Toeplitz: fitted in seconds, any horizon), {{form}} fft or fft-optimal (no \
                     optimization, O(n log n) per block), and {{form}} bandmf {{toeplitz}} (a \
                     banded Toeplitz encoder, O(n·b̂) per evaluation); {{force}} runs the dense \
                     compile anyway",
                    gb(estimate.bytes),
                    time(estimate.seconds),
                    gb(available),
                    budget::largest_steps_within(available)
                ),
            )
            .into());
        }
    }
    if estimate.seconds >= 10.0 || estimate.bytes >= 1e9 {
        let block = steps / stamps;
        let how = match *participation {
            Participation::MinSeparation { min_separation, .. } if min_separation < block => {
                let b = min_separation;
                // The device keeps b̂ rows, and for the prefix sum its running sum and
                // compensation (as the compile report's "runtime memory").
                let prefix = matches!(workload, Workload::PrefixSum);
                let floats = b + 2 * usize::from(prefix);
                format!(
                    " (under min-separation: the optimum over banded encoders, then the (h, r) \
                     fit refined against the worst patterns a search finds). Faster: --form \
                     bandmf ships that optimum itself (less error; {b} bands, {floats} floats of \
                     device state per coordinate, fewer with --bands){}",
                    if prefix {
                        ", --form blt is fitted in seconds (buffers + 2 floats)"
                    } else {
                        ""
                    }
                )
            }
            _ => String::new(),
        };
        on_event(Event::Warning(format!(
            "n = {steps}: the {} compile needs about {:.1} GB of memory{} and {} on a 2-core \
             machine{how}",
            if how.is_empty() { "dense" } else { "(h, r)" },
            gb(estimate.bytes),
            available.map_or(String::new(), |a| format!(" ({:.1} GB available)", gb(a))),
            time(estimate.seconds)
        )));
    }
    Ok(())
}

/// The horizons of the error-growth table of an unbounded BLT: the design steps, then powers of
/// ten from 10³ to 10⁹ above them.
fn growth_horizons(steps: usize) -> Vec<usize> {
    let mut out = vec![steps];
    out.extend((3..=9).map(|k| 10usize.pow(k)).filter(|&t| t > steps));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{BandsChoice, FormKind, Options};

    fn request(form: FormKind) -> CompileRequest {
        let (band, rank) = (form == FormKind::Banded).then_some((2, 2)).unzip();
        Options {
            steps: Some(16),
            form: Some(form),
            band,
            rank,
            stamps: matches!(form, FormKind::Fft | FormKind::FftOptimal)
                .then_some(Stamps::Count(2)),
            bands: (form == FormKind::BandMf).then_some(BandsChoice::Fixed(2)),
            buffers: (form == FormKind::Blt).then_some(2),
            epsilon: Some(2.0),
            delta: Some(1e-6),
            ..Options::default()
        }
        .request()
        .unwrap()
    }

    /// Every form compiles to a blob that parses, whose report states the unit of privacy, the
    /// schema and the relation, and records the blob's size; the text names where it went.
    #[test]
    fn every_form_reports_its_privacy_statement() {
        for form in [
            FormKind::Banded,
            FormKind::Blt,
            FormKind::Fft,
            FormKind::FftOptimal,
            FormKind::BandMf,
        ] {
            let compiled = compile(&request(form), &mut |_| {}).unwrap();
            let m = mfc_formats::Mechanism::from_bytes(&compiled.blob).unwrap();
            assert_eq!(m.header.steps, 16, "{form:?}");
            let json = compiled.json(Some("x.mfc"));
            for key in [
                "privacy_unit",
                "participation",
                "neighbouring",
                "sensitivity",
            ] {
                assert!(
                    json.get(key).is_some_and(|v| !v.is_null()),
                    "{form:?}: {key}"
                );
            }
            assert_eq!(json["blob_bytes"], compiled.blob.len(), "{form:?}");
            assert_eq!(json["out"], "x.mfc", "{form:?}");
            assert_eq!(
                json["sensitivity"].as_f64(),
                Some(m.header.sensitivity.value),
                "{form:?}"
            );
            let text = compiled.text(Some("x.mfc"));
            assert!(
                text.contains(&format!("{} bytes -> x.mfc", compiled.blob.len())),
                "{form:?}: {text}"
            );
        }
    }

    /// Under `--objective max` every form reports both metrics and what it was optimized for
    /// (FFT: `none`); a max-error certificate that converges slowly (momentum) ships its best
    /// point with a warning stating the gap it is certified to, a dual bound never above the
    /// max error of what ships (README, "The max error").
    #[test]
    fn the_max_objective_reports_what_it_optimized() {
        for form in [
            FormKind::Banded,
            FormKind::Blt,
            FormKind::Fft,
            FormKind::FftOptimal,
            FormKind::BandMf,
        ] {
            let mut max = request(form);
            max.objective = Objective::Max;
            let json = compile(&max, &mut |_| {}).unwrap().json(None);
            let expected = match form {
                FormKind::Fft | FormKind::FftOptimal => "none",
                _ => "max",
            };
            assert_eq!(json["objective"], expected, "{form:?}");
            assert!(json["max_step_stddev"].as_f64().unwrap() > 0.0, "{form:?}");
            assert!(json["sqrt_loss"].as_f64().unwrap() > 0.0, "{form:?}");
            let total = compile(&request(form), &mut |_| {}).unwrap().json(None);
            assert_eq!(
                total["objective"],
                if expected == "none" { "none" } else { "total" }
            );
        }
        let momentum = Options {
            workload: Some(WorkloadSpec::parse("momentum:0.9", None).unwrap()),
            steps: Some(64),
            band: Some(2),
            rank: Some(2),
            objective: Some(Objective::Max),
            ..Options::default()
        }
        .request()
        .unwrap();
        let mut warnings = Vec::new();
        let compiled = compile(&momentum, &mut |event| {
            if let Event::Warning(line) = event {
                warnings.push(line);
            }
        })
        .unwrap();
        let json = compiled.json(None);
        let gap = json["duality_gap"].as_f64().unwrap();
        assert!(gap > 1e-6, "{gap}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("certified to a relative gap") && w.contains("`gap`")),
            "{warnings:?}"
        );
        let (dual, shipped) = (
            json["max_error_dual_bound"].as_f64().unwrap(),
            json["max_step_stddev"].as_f64().unwrap(),
        );
        assert!(dual <= json["optimal_max_error"].as_f64().unwrap() && dual <= shipped);
    }

    /// Refusals that need the horizon name the option, the value and what is allowed, before
    /// any work.
    #[test]
    fn refusals_name_the_option() {
        let refused = |r: CompileRequest| match compile(&r, &mut |_| {}) {
            Err(Error::Option(e)) => e.render(crate::request::Spelling::Cli),
            other => panic!("not refused: {:?}", other.map(|c| c.steps)),
        };
        let mut none = request(FormKind::Banded);
        none.steps = None;
        assert!(refused(none).contains("--steps: is required"));
        let mut r = request(FormKind::Banded);
        r.participation = Participation::min_separation(2, 17).unwrap();
        assert!(
            refused(r)
                .contains("--min-sep 17: the separation must be at most the number of steps, 16")
        );
        let mut r = request(FormKind::Banded);
        r.form = FormSpec::Banded {
            band: 17,
            rank: 1,
            stamps: Stamps::Count(1),
            refine: 0,
            gap: 1e-6,
        };
        assert!(refused(r).contains("--band 17: expected an integer in 1..=16"));
        let mut r = request(FormKind::Fft);
        r.form = FormSpec::Fft {
            kind: FftKind::Circulant,
            stamps: 3,
        };
        assert!(refused(r).contains("--stamps 3: expected a divisor of --steps (16)"));
    }

    /// Issue 31: under min-separation the banded form's optimizer has no dual bound; its
    /// progress states the loss, never a NaN gap or a target it cannot reach.
    #[test]
    fn min_separation_progress_shows_no_gap() {
        let request = Options {
            steps: Some(32),
            epochs: Some(2),
            min_sep: Some(16),
            form: Some(FormKind::Banded),
            band: Some(2),
            rank: Some(2),
            refine: Some(0),
            noise_multiplier: Some(1.0),
            ..Options::default()
        }
        .request()
        .unwrap();
        let mut lines = Vec::new();
        compile(&request, &mut |event| {
            if let Event::Progress(line) = event {
                lines.push(line);
            }
        })
        .unwrap();
        let optimizing: Vec<_> = lines.iter().filter(|l| l.contains("iteration")).collect();
        assert!(!optimizing.is_empty(), "{lines:?}");
        for line in optimizing {
            assert!(!line.contains("NaN") && !line.contains("target"), "{line}");
            assert!(line.contains("under min-separation"), "{line}");
        }
    }
}
