//! The compile pipeline behind `mfc compile` and the Python package's `mfc.compile`: options as
//! the CLI names them → workload, participation schema and calibration → optimize, compress or
//! fit the chosen form → the blob's bytes and the report (JSON fields and the CLI's text).
//! Callers write the blob and print the report themselves; progress and warnings reach them
//! through a callback, so this module never prints.

use std::time::Instant;

use faer::Mat;
use mfc_formats::{Calibration, Neighbouring, PrivacyTarget};

use crate::Error;
use crate::budget;
use crate::forms::banded::compress::CompressOptions;
use crate::forms::banded::{CompileOptions, compile};
use crate::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use crate::forms::blt::{CompiledBlt, compile_blt, compile_blt_unbounded, horizon_errors};
use crate::forms::fft::{FftKind, FftOptions, compile_fft};
use crate::optimize::blt::optimize_blt;
use crate::optimize::multi_epoch::MultiEpochOptions;
use crate::optimize::optimum::{OptimumOptions, choose_stamps};
use crate::optimize::single::{OptimizeOptions, Progress};
use crate::privacy::calibrate::{epsilon_for_noise_multiplier, noise_multiplier_for};
use crate::privacy::participation::Participation;
use crate::report::{CompileReport, PrivacyStatement};
use crate::ship::blob::{BlobOptions, neighbouring_factor};
use crate::workload::{self, Schedule, Workload};

/// The largest horizon `--form bandmf --toeplitz` takes with a learning-rate schedule without
/// `--force` (its loss is `O(n²)` per evaluation: about 10 min of CPU here at this size).
const MAX_SCHEDULED_TOEPLITZ_STEPS: usize = 65_536;

/// Which steps one record may contribute to, and which datasets are neighbours: the options
/// `--epochs`, `--min-sep`, `--every` and `--neighbouring` of `mfc compile` and `mfc compare`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// k: each record takes part in at most this many steps (single participation when absent).
    pub epochs: Option<usize>,
    /// b-min-separation: any two participations of a record are at least b steps apart.
    pub min_sep: Option<usize>,
    /// Fixed epoch order: a record's participations are exactly b steps apart.
    pub every: Option<usize>,
    /// `add-remove` or `replace-one`.
    pub neighbouring: String,
}

impl Default for Schema {
    fn default() -> Self {
        Self {
            epochs: None,
            min_sep: None,
            every: None,
            neighbouring: "add-remove".into(),
        }
    }
}

impl Schema {
    /// The participation schema over `steps` steps; a refusal names the option, the value and
    /// what is allowed, before any work is done.
    pub fn participation(&self, steps: usize) -> Result<Participation, Error> {
        let refuse = |why: String| Err(Error::InvalidOption(why));
        let limit = u32::MAX as usize;
        if let Some(k) = self.epochs.filter(|&k| k > limit) {
            return refuse(format!("--epochs {k}: at most {limit}"));
        }
        for (option, b) in [("--min-sep", self.min_sep), ("--every", self.every)] {
            if let Some(b) = b.filter(|&b| b > steps) {
                return refuse(format!(
                    "{option} {b}: the separation must be at most the number of steps, {steps}"
                ));
            }
        }
        match (self.epochs, self.min_sep, self.every) {
            (None, None, None) => Ok(Participation::Single),
            (Some(0), ..) => refuse("--epochs 0: a record takes part in at least 1 step".into()),
            (_, Some(0), _) => refuse("--min-sep 0: the separation must be at least 1".into()),
            (.., Some(0)) => refuse("--every 0: the separation must be at least 1".into()),
            (Some(k), Some(b), None) => Participation::min_separation(k, b),
            (Some(k), None, Some(b)) => Participation::fixed_epoch_order(k, b),
            (Some(k), None, None) => refuse(format!(
                "--epochs {k} needs --min-sep B (participations at least B steps apart) or --every B (exactly B apart)"
            )),
            (None, Some(b), _) => refuse(format!(
                "--min-sep {b} needs --epochs K, the most steps one record takes part in"
            )),
            (None, None, Some(b)) => refuse(format!(
                "--every {b} needs --epochs K, the most steps one record takes part in"
            )),
            (Some(_), Some(_), Some(_)) => {
                refuse("--min-sep and --every exclude each other".into())
            }
        }
    }

    /// The neighbouring relation.
    pub fn neighbouring(&self) -> Result<Neighbouring, Error> {
        match self.neighbouring.as_str() {
            "add-remove" => Ok(Neighbouring::AddOrRemove),
            "replace-one" => Ok(Neighbouring::ReplaceOne),
            other => Err(Error::InvalidOption(format!(
                "--neighbouring {other}: expected `add-remove` or `replace-one`"
            ))),
        }
    }
}

/// The options of `mfc compile`, named as the CLI names them (`--min-sep` is `schema.min_sep`);
/// see `mfc compile --help` for each. [`Default`] holds the CLI's defaults.
#[derive(Debug, Clone)]
pub struct CompileRequest {
    /// `prefix`, `momentum:BETA` or `npy:PATH`; with `matrix`, that matrix's label.
    pub workload: String,
    /// The workload `A` itself (`n × n`, lower triangular; the Python package's numpy array),
    /// instead of a file named by `npy:PATH`.
    pub matrix: Option<Mat<f64>>,
    /// The momentum workload's cooldown, `STEPS:FINAL`.
    pub cooldown: Option<String>,
    /// The participation schema and the neighbouring relation.
    pub schema: Schema,
    /// A number of stamps, or `auto`.
    pub stamps: String,
    /// n, the horizon (required except for an `.npy` workload).
    pub steps: Option<usize>,
    /// `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`.
    pub form: String,
    /// BandMF: a number of bands b̂, or `auto` (also when absent).
    pub bands: Option<String>,
    /// BandMF with `auto`: the most bands tried.
    pub max_bands: usize,
    /// BandMF: a banded Toeplitz encoder.
    pub toeplitz: bool,
    /// BLT: buffers per coordinate.
    pub buffers: usize,
    /// BLT: the horizon the sensitivity covers (default: `steps`).
    pub horizon: Option<Horizon>,
    /// h: diagonals of the decoder kept exactly.
    pub band: usize,
    /// r: rank of the decoder's part below the band.
    pub rank: usize,
    /// L-BFGS iterations of the refinement of the shipped loss.
    pub refine: usize,
    /// The relative duality gap to certify.
    pub gap: f64,
    /// ζ, the clip norm.
    pub clip_norm: f64,
    /// Calibrate σ for this ε (with `delta`).
    pub epsilon: Option<f64>,
    /// δ of the privacy target.
    pub delta: Option<f64>,
    /// Record this σ instead of calibrating one.
    pub noise_multiplier: Option<f64>,
    /// Run a dense compile even when its estimated memory exceeds what is available.
    pub force: bool,
}

impl Default for CompileRequest {
    fn default() -> Self {
        Self {
            workload: "prefix".into(),
            matrix: None,
            cooldown: None,
            schema: Schema::default(),
            stamps: "1".into(),
            steps: None,
            form: "banded".into(),
            bands: None,
            max_bands: 256,
            toeplitz: false,
            buffers: 4,
            horizon: None,
            band: 4,
            rank: 4,
            refine: 50,
            gap: 1e-6,
            clip_norm: 1.0,
            epsilon: None,
            delta: None,
            noise_multiplier: None,
            force: false,
        }
    }
}

/// The horizon a BLT blob covers (`--horizon`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Horizon {
    /// The sensitivity covers this many steps; the runtime stops there.
    Steps(usize),
    /// The sensitivity bound holds for every horizon (single participation; `formats/SPEC.md`,
    /// "Unbounded horizon"): the runtime never stops on its own account.
    Unbounded,
}

impl Horizon {
    /// `--horizon N|unbounded`.
    pub fn parse(text: &str) -> Result<Self, Error> {
        if text == "unbounded" {
            return Ok(Horizon::Unbounded);
        }
        text.parse().map(Horizon::Steps).map_err(|_| {
            Error::InvalidOption(format!(
                "--horizon {text}: expected a number of steps ≥ --steps, or `unbounded`"
            ))
        })
    }
}

impl std::fmt::Display for Horizon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Horizon::Steps(n) => write!(f, "{n}"),
            Horizon::Unbounded => f.write_str("unbounded"),
        }
    }
}

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

fn parse_number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, Error> {
    text.parse()
        .map_err(|_| Error::InvalidOption(format!("{what}: cannot parse `{text}`")))
}

/// The workload named by `spec` (`prefix`, `momentum:BETA`, `npy:PATH`) and its number of steps.
pub fn parse_workload(
    spec: &str,
    steps: Option<usize>,
    cooldown: Option<&str>,
) -> Result<(Workload, usize), Error> {
    let required = || steps.ok_or_else(|| Error::InvalidOption("--steps is required".into()));
    if cooldown.is_some() && !spec.starts_with("momentum:") {
        return Err(Error::InvalidOption(
            "--cooldown applies to the momentum workload only".into(),
        ));
    }
    if spec == "prefix" {
        return Ok((Workload::PrefixSum, required()?));
    }
    if let Some(beta) = spec.strip_prefix("momentum:") {
        let momentum = parse_number(beta, "--workload momentum:BETA")?;
        let schedule = match cooldown {
            None => Schedule::Constant,
            Some(c) => {
                let (m, rate) = c.split_once(':').ok_or_else(|| {
                    Error::InvalidOption(format!("--cooldown expects STEPS:FINAL, got `{c}`"))
                })?;
                Schedule::Cooldown {
                    steps: parse_number(m, "--cooldown STEPS")?,
                    final_rate: parse_number(rate, "--cooldown FINAL")?,
                }
            }
        };
        return Ok((Workload::Momentum { momentum, schedule }, required()?));
    }
    if let Some(path) = spec.strip_prefix("npy:") {
        if path.is_empty() {
            return Err(Error::InvalidOption(
                "--workload npy:: the path is empty (expected npy:PATH to a square .npy matrix)"
                    .into(),
            ));
        }
        let matrix = workload::read_npy(path)?;
        let n = matrix.nrows();
        if steps.is_some_and(|s| s != n) {
            return Err(Error::InvalidOption(format!(
                "--steps does not match the {n}×{n} matrix in {path}"
            )));
        }
        return Ok((
            Workload::Custom {
                label: path.to_string(),
                matrix,
            },
            n,
        ));
    }
    Err(Error::InvalidOption(format!(
        "unknown workload `{spec}` (expected `prefix`, `momentum:BETA` or `npy:PATH`)"
    )))
}

/// The workload `A` given as a matrix, checked as an `.npy` workload is.
fn given_workload(request: &CompileRequest, matrix: &Mat<f64>) -> Result<(Workload, usize), Error> {
    let label = &request.workload;
    if request.cooldown.is_some() {
        return Err(Error::InvalidOption(
            "--cooldown applies to the momentum workload only".into(),
        ));
    }
    workload::validate(matrix).map_err(|e| Error::InvalidWorkload(format!("{label}: {e}")))?;
    let n = matrix.nrows();
    if request.steps.is_some_and(|s| s != n) {
        return Err(Error::InvalidOption(format!(
            "--steps does not match the {n}×{n} matrix {label}"
        )));
    }
    Ok((
        Workload::Custom {
            label: label.clone(),
            matrix: matrix.clone(),
        },
        n,
    ))
}

fn calibration(request: &CompileRequest) -> Result<Option<Calibration>, Error> {
    let bad = |what: String| Error::InvalidOption(what);
    Ok(
        match (request.epsilon, request.delta, request.noise_multiplier) {
            (Some(epsilon), Some(delta), None) => {
                let sigma = noise_multiplier_for(epsilon, delta)
                    .ok_or_else(|| bad(format!(
                        "--epsilon {epsilon:?} --delta {delta:?}: no noise multiplier in (0, 10^6] reaches it"
                    )))?;
                Some(Calibration {
                    noise_multiplier: sigma,
                    target: Some(PrivacyTarget { epsilon, delta }),
                })
            }
            (None, delta, Some(sigma)) => {
                let target = match delta {
                    Some(delta) => Some(PrivacyTarget {
                        epsilon: epsilon_for_noise_multiplier(sigma, delta)
                            .ok_or_else(|| bad(format!(
                                "--noise-multiplier {sigma:?} --delta {delta:?}: no finite ε (σ too small for δ)"
                            )))?,
                        delta,
                    }),
                    None => None,
                };
                Some(Calibration {
                    noise_multiplier: sigma,
                    target,
                })
            }
            (None, None, None) => None,
            (Some(_), None, None) => {
                return Err(bad("--epsilon needs --delta".into()));
            }
            _ => {
                return Err(bad(
                    "give --epsilon with --delta, or --noise-multiplier".into()
                ));
            }
        },
    )
}

/// Runs `mfc compile`'s pipeline for `request`: everything but writing the blob and printing.
pub fn compile_request(
    request: &CompileRequest,
    on_event: &mut dyn FnMut(Event),
) -> Result<Compiled, Error> {
    let started = Instant::now();
    if !(request.clip_norm.is_finite() && request.clip_norm > 0.0) {
        return Err(Error::InvalidOption(format!(
            "--clip-norm {}: must be a positive finite number",
            request.clip_norm
        )));
    }
    let calibration = calibration(request)?;
    let (workload, steps) = match &request.matrix {
        None => parse_workload(
            &request.workload,
            request.steps,
            request.cooldown.as_deref(),
        )?,
        Some(matrix) => given_workload(request, matrix)?,
    };
    // The steps the sensitivity covers: a BLT blob's horizon may exceed its design steps.
    let covered = match request.horizon {
        Some(horizon) if request.form != "blt" => {
            return Err(Error::InvalidOption(format!(
                "--horizon {horizon}: only the blt form has a horizon beyond --steps (the form is `{}`)",
                request.form
            )));
        }
        Some(Horizon::Steps(horizon)) if horizon < steps => {
            return Err(Error::InvalidOption(format!(
                "--horizon {horizon}: must be at least --steps ({steps}), or `unbounded`"
            )));
        }
        Some(Horizon::Steps(horizon)) => horizon,
        Some(Horizon::Unbounded) | None => steps,
    };
    let participation = request.schema.participation(covered)?;
    check_linear_memory(request, covered)?;
    if request.stamps != "auto" {
        let divisors = "a divisor of --steps, or `auto`";
        match request.stamps.parse::<usize>() {
            Ok(s) if s >= 1 && steps % s == 0 => {}
            _ => {
                return Err(Error::InvalidOption(format!(
                    "--stamps {}: expected {divisors} (--steps {steps})",
                    request.stamps
                )));
            }
        }
    }
    if request.form == "banded" && (request.band > steps || request.rank > steps) {
        return Err(Error::InvalidOption(format!(
            "--band {} --rank {}: the band h must be in 1..={steps} and the rank r in 0..={steps} (n = {steps})",
            request.band, request.rank
        )));
    }
    let blob_options = BlobOptions {
        clip_norm: request.clip_norm,
        calibration,
        neighbouring: request.schema.neighbouring()?,
    };
    if request.form != "bandmf" && (request.bands.is_some() || request.toeplitz) {
        return Err(Error::InvalidOption(format!(
            "--bands and --toeplitz apply to --form bandmf only (the form is `{}`; the banded+low-rank form takes --band and --rank)",
            request.form
        )));
    }
    let job = Job {
        request,
        steps,
        participation,
        blob_options,
        started,
    };
    let (blob, report) = match request.form.as_str() {
        "banded" => job.banded(&workload, on_event)?,
        "bandmf" => job.bandmf(&workload, on_event)?,
        form @ ("blt" | "fft" | "fft-optimal") if !matches!(workload, Workload::PrefixSum) => {
            return Err(Error::InvalidOption(format!(
                "the {form} form releases prefix sums only"
            )));
        }
        "blt" => job.blt()?,
        "fft" | "fft-optimal" => job.fft()?,
        other => {
            return Err(Error::InvalidOption(format!(
                "unknown form `{other}` (expected `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`)"
            )));
        }
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
    let (option, bytes_per_step) = match request.form.as_str() {
        "blt" => (
            if request.horizon.is_some() {
                "--horizon"
            } else {
                "--steps"
            },
            32.0,
        ),
        "bandmf" if request.toeplitz => ("--steps", 96.0),
        _ => return Ok(()),
    };
    match budget::available_memory() {
        Some(available) if steps as f64 * bytes_per_step > available && !request.force => {
            Err(Error::InvalidOption(format!(
                "{option} {steps}: the {} compile holds about {bytes_per_step} bytes per step, \
                 {:.1} GB; this machine has {:.1} GB available, enough for {option} up to {} \
                 (--force tries anyway)",
                request.form,
                steps as f64 * bytes_per_step / 1e9,
                available / 1e9,
                (available / bytes_per_step) as u64
            )))
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
        check_budget(request, steps, &self.participation, on_event)?;
        let a = workload.matrix(steps)?;
        let mut options = CompileOptions {
            optimum: OptimumOptions {
                participation: self.participation,
                optimize: OptimizeOptions {
                    relative_gap: request.gap,
                    ..OptimizeOptions::default()
                },
                multi_epoch: MultiEpochOptions {
                    relative_gap: request.gap.max(1e-4),
                    ..MultiEpochOptions::default()
                },
                ..OptimumOptions::default()
            },
            compression: CompressOptions {
                refine_iterations: request.refine,
                ..CompressOptions::default()
            },
        };
        options.optimum.stamps = if request.stamps == "auto" {
            on_event(Event::Progress(
                "choosing the number of stamps by loss".into(),
            ));
            let tried = choose_stamps(a.as_ref(), &options.optimum)?;
            tried.first().map_or(1, |&(s, _)| s)
        } else {
            parse_number(&request.stamps, "--stamps")?
        };
        let mut on_progress = |p: &Progress| {
            on_event(Event::Progress(format!(
                "optimizing n = {steps}: iteration {}, relative duality gap {:.2e} (target {:.0e})",
                p.iteration, p.relative_gap, request.gap
            )));
        };
        let mut compiled = compile(
            a.as_ref(),
            request.band,
            request.rank,
            &options,
            &mut on_progress,
        )?;
        let written = crate::forms::banded::encode(&compiled, workload, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let mut report = CompileReport::new(
            request.workload.clone(),
            &compiled,
            &self.blob_options,
            blob.len(),
        )?;
        report.seconds = self.started.elapsed().as_secs_f64();
        Ok((blob, Report::Banded(Box::new(report))))
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
        Report::Fields { fields, text }
    }

    /// `--form blt`: optimize the BLT for `--steps`, round it, compute the sensitivity over
    /// `--horizon` (or bound it for every horizon).
    fn blt(&self) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps, participation) = (self.request, self.steps, &self.participation);
        let blt = optimize_blt(steps, request.buffers, participation)?;
        let mut compiled = match request.horizon {
            Some(Horizon::Steps(horizon)) => compile_blt(&blt, steps, horizon, participation)?,
            None => compile_blt(&blt, steps, steps, participation)?,
            Some(Horizon::Unbounded) => compile_blt_unbounded(&blt, steps, participation)?,
        };
        if compiled.every_horizon {
            return self.unbounded_blt(&mut compiled);
        }
        let written = crate::forms::blt::encode(&compiled, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let factor = neighbouring_factor(self.blob_options.neighbouring)?;
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
            "workload": request.workload,
            "form": "blt",
            "buffers": request.buffers,
            "steps": steps,
            "horizon": compiled.horizon,
            "theta": compiled.blt.theta,
            "omega": compiled.blt.omega,
            "horizon_sqrt_loss": factor * compiled.horizon_error.sqrt_loss,
            "horizon_max_step_stddev": factor * compiled.horizon_error.max_step_stddev,
            "horizon_final_step_stddev": factor * compiled.horizon_error.final_step_stddev,
            "runtime_floats_per_coordinate": request.buffers + 2,
        });
        let text = format!(
            "workload            prefix sum, BLT with {} buffers optimized for n = {steps}; the sensitivity covers {} steps\n\
             participation       {}\n\
             shipped             sqrt(L) = {:.4} over the {steps} design steps\n\
             over all {} steps   sqrt(L) = {:.4}, max step stddev {:.4}, last {:.4}  (units of σ·ζ; the blob's error figures)\n\
             {statement}\
             runtime memory      (m + 2)·d = {}·d floats, for any number of steps\n",
            request.buffers,
            compiled.horizon,
            statement.participation,
            design_sqrt_loss,
            compiled.horizon,
            factor * e.sqrt_loss,
            factor * e.max_step_stddev,
            factor * e.final_step_stddev,
            request.buffers + 2
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }

    /// The report of `--form blt --horizon unbounded`: the statement with the bound for every
    /// horizon, and how the per-step error grows with the step `t`.
    fn unbounded_blt(&self, compiled: &mut CompiledBlt) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps) = (self.request, self.steps);
        let written = crate::forms::blt::encode(compiled, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let factor = neighbouring_factor(self.blob_options.neighbouring)?;
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
        let mut table = String::from(
            "per-step error      step t        stddev of release t (units of ζ)   / sqrt(t)\n",
        );
        for (t, stddev) in &growth {
            table.push_str(&format!(
                "                    {t:<13} {stddev:<34.4} {:.4}\n",
                stddev / (*t as f64).sqrt()
            ));
        }
        let fields = serde_json::json!({
            "workload": request.workload,
            "form": "blt",
            "buffers": request.buffers,
            "steps": steps,
            "horizon": "unbounded",
            "theta": compiled.blt.theta,
            "omega": compiled.blt.omega,
            "runtime_floats_per_coordinate": request.buffers + 2,
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
            request.buffers,
            statement.participation,
            statement.sqrt_loss,
            request.buffers + 2
        );
        let report = self.report(&blob, fields, &statement, text);
        Ok((blob, report))
    }

    /// `--form fft|fft-optimal`: the FFT mechanism (001 §4, App. K), stamped.
    fn fft(&self) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps) = (self.request, self.steps);
        let kind = if request.form == "fft" {
            FftKind::Circulant
        } else {
            FftKind::OptimalDecoder
        };
        let mut compiled = compile_fft(&FftOptions {
            steps,
            stamps: parse_number(&request.stamps, "--stamps (a number for the FFT form)")?,
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
            "workload": request.workload,
            "form": request.form,
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

    /// `--form bandmf`: the BandMF encoder (general or `--toeplitz`, `--bands N|auto`) for the
    /// prefix sum or a momentum workload, rounded, its sensitivity from the stored coefficients.
    fn bandmf(
        &self,
        workload: &Workload,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(Vec<u8>, Report), Error> {
        let (request, steps, participation) = (self.request, self.steps, self.participation);
        let bands = match request.bands.as_deref() {
            None | Some("auto") => {
                if request.max_bands == 0 {
                    return Err(Error::InvalidOption(
                        "--max-bands 0: auto needs at least 1 band to try".into(),
                    ));
                }
                Bands::Auto {
                    max: request.max_bands,
                }
            }
            Some(text) => Bands::Fixed(text.parse().map_err(|_| {
                Error::InvalidOption(format!(
                    "--bands {text}: expected a number of bands b̂ ≥ 1 or `auto`"
                ))
            })?),
        };
        if let Bands::Fixed(b) = bands {
            let most = participation.separation().unwrap_or(steps).min(steps);
            if b == 0 || b > most {
                return Err(Error::InvalidOption(format!(
                    "--bands {b}: b̂ must be in 1..={most} ({})",
                    match participation.separation() {
                        Some(sep) if sep < steps => format!(
                            "at most the separation b = {sep}, so that one record's columns of the encoder do not overlap"
                        ),
                        _ => format!("at most the n = {steps} steps"),
                    }
                )));
            }
        }
        let kind = if request.toeplitz {
            BandMfKind::Toeplitz
        } else {
            BandMfKind::General
        };
        // The general optimizer holds the workload, the decoder and its adjoint as n × n matrices.
        let general_bytes = 3.0 * 8.0 * (steps as f64).powi(2);
        let available = budget::available_memory();
        if kind == BandMfKind::General
            && available.is_some_and(|a| general_bytes > a)
            && !request.force
        {
            return Err(Error::InvalidOption(format!(
                "--steps {steps}: the general BandMF encoder needs about {:.1} GB of memory (three \
                 n × n matrices); this machine has {:.1} GB available. --toeplitz optimizes a banded \
                 Toeplitz encoder in O(n) memory; --force runs the general one anyway",
                general_bytes / 1e9,
                available.unwrap_or(0.0) / 1e9
            )));
        }
        if kind == BandMfKind::Toeplitz
            && !matches!(workload, Workload::PrefixSum | Workload::Momentum { .. })
        {
            // A custom workload's Toeplitz loss goes through its n × n matrix as well.
            if available.is_some_and(|a| general_bytes > a) && !request.force {
                return Err(Error::InvalidOption(format!(
                    "--steps {steps}: a BandMF encoder for a custom workload needs about {:.1} GB of \
                     memory (three n × n matrices); --force runs it anyway",
                    general_bytes / 1e9
                )));
            }
        }
        // A learning-rate schedule makes the banded Toeplitz loss O(n²) per evaluation (no
        // series shortcut): about 35 s of CPU at n = 16 000 with 4 bands, hundreds of times that
        // at 10⁶.
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
            return Err(Error::InvalidOption(format!(
                "--steps {steps}: a banded Toeplitz encoder for a workload with a learning-rate \
                 schedule (--cooldown) costs O(n²) per evaluation (about 35 s of CPU in all at \
                 n = 16 000, growing with n²); allowed up to {MAX_SCHEDULED_TOEPLITZ_STEPS} \
                 steps. Without --cooldown the loss is O(n·b̂); --force runs it anyway"
            )));
        }
        let options = BandMfOptions {
            participation,
            kind,
            bands,
            ..BandMfOptions::default()
        };
        let mut compiled = compile_bandmf(workload, steps, &options, &mut |what, loss| {
            on_event(Event::Progress(format!(
                "n = {steps}: {what}, sqrt(L) = {:.4}",
                loss.sqrt()
            )));
        })?;
        let written = crate::forms::bandmf::encode(&compiled, workload, &self.blob_options)?;
        compiled.sensitivity = written.sensitivity;
        let blob = written.bytes;
        let factor = neighbouring_factor(self.blob_options.neighbouring)?;
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
            "workload": request.workload,
            "form": "bandmf",
            "kind": kind_name,
            "steps": steps,
            "bands": compiled.bands,
            "tried": compiled.tried,
            "toeplitz_sqrt_loss": compiled.toeplitz_sqrt_loss.map(|l| factor * l),
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
                " (auto; banded Toeplitz sqrt(L) by b̂: {})",
                tried.join(", ")
            )
        } else {
            String::new()
        };
        let start = match compiled.toeplitz_sqrt_loss {
            Some(t) => format!(
                "  ({:+.2}% against the banded Toeplitz optimum it started from, {:.4})",
                100.0 * (compiled.sqrt_loss / t - 1.0),
                factor * t
            ),
            None => String::new(),
        };
        let text = format!(
            "workload            {} (n = {steps})\n\
             participation       {}\n\
             encoder             BandMF, {kind_name}, b̂ = {} bands{tried}\n\
             shipped             sqrt(L) = {:.4}{start}\n\
             {statement}\
             releases            {releases}\n\
             runtime memory      {} = {floats}·d floats, for any number of steps\n",
            workload.label(),
            statement.participation,
            compiled.bands,
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
    steps: usize,
    participation: &Participation,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), Error> {
    let stamps = request.stamps.parse::<usize>().unwrap_or(1).max(1);
    let estimate = budget::estimate(steps, steps / stamps, participation);
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
            return Err(Error::InvalidOption(format!(
                "--steps {steps}: the dense compile of the banded form needs about {:.1} GB of memory \
                 and {} on a 2-core machine; this machine has {:.1} GB available, enough for \
                 --steps up to {}. Forms that scale to any n: --form blt (buffered linear \
                 Toeplitz: fitted in seconds, any horizon), --form fft or fft-optimal (no \
                 optimization, O(n log n) per block), and --form bandmf --toeplitz (a banded \
                 Toeplitz encoder, O(n·b̂) per evaluation); --force runs the dense compile anyway",
                gb(estimate.bytes),
                time(estimate.seconds),
                gb(available),
                budget::largest_steps_within(available)
            )));
        }
    }
    if estimate.seconds >= 10.0 || estimate.bytes >= 1e9 {
        on_event(Event::Warning(format!(
            "mfc: n = {steps}: the dense compile needs about {:.1} GB of memory{} and {} on a \
             2-core machine",
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

    fn request(form: &str) -> CompileRequest {
        CompileRequest {
            steps: Some(16),
            form: form.into(),
            band: 2,
            rank: 2,
            stamps: if form.starts_with("fft") { "2" } else { "1" }.into(),
            bands: (form == "bandmf").then(|| "2".into()),
            buffers: 2,
            epsilon: Some(2.0),
            delta: Some(1e-6),
            ..CompileRequest::default()
        }
    }

    /// Every form compiles to a blob that parses, whose report states the unit of privacy, the
    /// schema and the relation, and records the blob's size; the text names where it went.
    #[test]
    fn every_form_reports_its_privacy_statement() {
        for form in ["banded", "blt", "fft", "fft-optimal", "bandmf"] {
            let compiled = compile_request(&request(form), &mut |_| {}).unwrap();
            let m = mfc_formats::Mechanism::from_bytes(&compiled.blob).unwrap();
            assert_eq!(m.header.steps, 16, "{form}");
            let json = compiled.json(Some("x.mfc"));
            for key in [
                "privacy_unit",
                "participation",
                "neighbouring",
                "sensitivity",
            ] {
                assert!(json.get(key).is_some_and(|v| !v.is_null()), "{form}: {key}");
            }
            assert_eq!(json["blob_bytes"], compiled.blob.len(), "{form}");
            assert_eq!(json["out"], "x.mfc", "{form}");
            assert_eq!(
                json["sensitivity"].as_f64(),
                Some(m.header.sensitivity.value),
                "{form}"
            );
            let text = compiled.text(Some("x.mfc"));
            assert!(
                text.contains(&format!("{} bytes -> x.mfc", compiled.blob.len())),
                "{form}: {text}"
            );
        }
    }

    /// Refusals name the option, the value and what is allowed, before any work.
    #[test]
    fn refusals_name_the_option() {
        let refused = |r: CompileRequest| match compile_request(&r, &mut |_| {}) {
            Err(Error::InvalidOption(why)) => why,
            other => panic!("not refused: {:?}", other.map(|c| c.steps)),
        };
        let none = CompileRequest::default();
        assert!(refused(none).contains("--steps is required"));
        let mut r = request("banded");
        r.schema.epochs = Some(2);
        assert!(refused(r.clone()).contains("--epochs 2 needs --min-sep B"));
        r.schema.min_sep = Some(17);
        assert!(refused(r).contains("--min-sep 17: the separation must be at most"));
        let mut r = request("banded");
        r.epsilon = Some(1.0);
        r.delta = None;
        assert!(refused(r).contains("--epsilon needs --delta"));
        let mut r = request("blt");
        r.form = "dense".into();
        assert!(refused(r).contains("unknown form `dense`"));
    }
}
