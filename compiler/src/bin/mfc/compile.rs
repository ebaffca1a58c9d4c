//! `mfc compile`: optimize → compress → normalize → calibrate → write the blob, then report.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use mfc_compiler::Error;
use mfc_compiler::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use mfc_compiler::blob::{self, BlobOptions, neighbouring_factor};
use mfc_compiler::budget;
use mfc_compiler::calibrate::{epsilon_for_noise_multiplier, noise_multiplier_for};
use mfc_compiler::compress::CompressOptions;
use mfc_compiler::fft::{FftKind, FftOptions, compile_fft};
use mfc_compiler::mechanism::{CompileOptions, compile};
use mfc_compiler::multi_epoch::MultiEpochOptions;
use mfc_compiler::optimize::{OptimizeOptions, Progress};
use mfc_compiler::participation::Participation;
use mfc_compiler::report::{CompileReport, PrivacyStatement};
use mfc_compiler::stamp::choose_stamps;
use mfc_compiler::toeplitz::{
    CompiledBlt, compile_blt, compile_blt_unbounded, horizon_error, optimize_blt,
};
use mfc_compiler::workload::{self, Schedule, Workload};
use mfc_formats::{Calibration, PrivacyTarget};

use crate::schema::SchemaArgs;

/// Compile a banded-plus-low-rank mechanism for a lower-triangular workload.
#[derive(clap::Args)]
pub struct Args {
    /// The workload A: `prefix` (prefix sums), `momentum:BETA` (heavy-ball momentum SGD iterates,
    /// learning rates from --cooldown), or `npy:PATH` (a square lower-triangular float64 or
    /// float32 .npy matrix, as written by numpy.save).
    #[arg(long, default_value = "prefix")]
    workload: String,
    /// Learning-rate cooldown of the momentum workload: `STEPS:FINAL` falls linearly from 1 to
    /// FINAL over the last STEPS steps (constant rate when absent).
    #[arg(long)]
    cooldown: Option<String>,
    #[command(flatten)]
    schema: SchemaArgs,
    /// Repeat an encoder optimized for n/S steps S times (S must divide n), or `auto`: choose S
    /// among 1, 2, 4, 5, 8, 10, 16, 20 by the loss under the participation schema.
    #[arg(long, default_value = "1")]
    stamps: String,
    /// Number of steps n (the horizon); for an .npy workload it must match the matrix.
    #[arg(long)]
    steps: Option<usize>,
    /// The decoder form: `banded` (banded plus low rank, any workload); `blt` (buffered linear
    /// Toeplitz, prefix sums: `--buffers` buffers per coordinate, no dependence on the horizon);
    /// `fft` or `fft-optimal` (the FFT mechanism or its optimal decoder, prefix sums, blocks of
    /// n/--stamps steps; no optimization); `bandmf` (BandMF: a banded encoder with --bands
    /// bands, general or --toeplitz; the prefix sum or momentum, whose noised inputs the
    /// optimizer post-processes).
    #[arg(long, default_value = "banded")]
    form: String,
    /// BandMF: b̂, the bands of the encoder (1 ≤ b̂ ≤ min(b, n) under --min-sep/--every b), or
    /// `auto`: the fewest bands among 1, 2, 4, … and the most allowed (at most --max-bands) whose
    /// sqrt(L) is within 1% of the best of them.
    #[arg(long, value_name = "N|auto")]
    bands: Option<String>,
    /// BandMF with --bands auto: the most bands tried (the device keeps (b̂ + 2)·d floats for
    /// the prefix sum).
    #[arg(long, default_value_t = 256)]
    max_bands: usize,
    /// BandMF: a banded Toeplitz encoder (b̂ coefficients, optimized in O(n·b̂) per step for the
    /// prefix sum, any horizon) instead of a general one (n × b̂ coefficients, O(n²·b̂)).
    #[arg(long)]
    toeplitz: bool,
    /// BLT: buffers per coordinate.
    #[arg(long, default_value_t = 4)]
    buffers: usize,
    /// BLT: the horizon the sensitivity covers and the runtime stops at (default: --steps, the
    /// horizon the parameters are optimized for), or `unbounded`: a sensitivity bound valid for
    /// every horizon (single participation; the runtime never stops on its own account).
    #[arg(long, value_name = "N|unbounded")]
    horizon: Option<String>,
    /// h: diagonals of the decoder kept exactly (≥ 1).
    #[arg(long, default_value_t = 4)]
    band: usize,
    /// r: rank of the decoder's part below the band.
    #[arg(long, default_value_t = 4)]
    rank: usize,
    /// L-BFGS iterations of the refinement that lowers the shipped loss of the (h, r) decoder
    /// directly after the fit (0: ship the fit). Under several participations a few thousand
    /// iterations keep improving it (minutes at n = 512).
    #[arg(long, default_value_t = 50)]
    refine: usize,
    /// Stop optimizing when the relative duality gap is at most this (at least 1e-4 for the
    /// multi-epoch optimizer, whose first-order method converges linearly).
    #[arg(long, default_value_t = 1e-6)]
    gap: f64,
    /// ζ: the L2 norm the runtime clips every input row to.
    #[arg(long, default_value_t = 1.0)]
    clip_norm: f64,
    /// Calibrate σ for this ε (with --delta).
    #[arg(long, requires = "delta", conflicts_with = "noise_multiplier")]
    epsilon: Option<f64>,
    /// δ of the privacy target.
    #[arg(long)]
    delta: Option<f64>,
    /// Record this noise multiplier σ instead of calibrating one (with --delta, ε is reported).
    #[arg(long)]
    noise_multiplier: Option<f64>,
    /// Where to write the blob.
    #[arg(long)]
    out: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Run the dense (banded) compile, or a BandMF one with n × n matrices (general, or for a
    /// custom workload), even when its estimated memory exceeds what this machine has
    /// available.
    #[arg(long)]
    force: bool,
}

fn parse_number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, Error> {
    text.parse()
        .map_err(|_| Error::InvalidOption(format!("{what}: cannot parse `{text}`")))
}

pub(crate) fn parse_workload(
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

fn calibration(args: &Args) -> Result<Option<Calibration>, Error> {
    let bad = |what: String| Error::InvalidOption(what);
    Ok(match (args.epsilon, args.delta, args.noise_multiplier) {
        (Some(epsilon), Some(delta), None) => {
            let sigma = noise_multiplier_for(epsilon, delta)
                .ok_or_else(|| bad(format!("cannot calibrate ε = {epsilon}, δ = {delta}")))?;
            Some(Calibration {
                noise_multiplier: sigma,
                target: Some(PrivacyTarget { epsilon, delta }),
            })
        }
        (None, delta, Some(sigma)) => {
            let target = match delta {
                Some(delta) => Some(PrivacyTarget {
                    epsilon: epsilon_for_noise_multiplier(sigma, delta)
                        .ok_or_else(|| bad(format!("no ε for σ = {sigma}, δ = {delta}")))?,
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
        _ => {
            return Err(bad(
                "give --epsilon with --delta, or --noise-multiplier".into()
            ));
        }
    })
}

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    if !(args.clip_norm.is_finite() && args.clip_norm > 0.0) {
        return Err(Error::InvalidOption(format!(
            "--clip-norm {}: must be a positive finite number",
            args.clip_norm
        ))
        .into());
    }
    let calibration = calibration(&args)?;
    let (workload, steps) = parse_workload(&args.workload, args.steps, args.cooldown.as_deref())?;
    // The steps the sensitivity covers: a BLT blob's horizon may exceed its design steps.
    let covered = match horizon(&args, steps)? {
        Horizon::Steps(horizon) => horizon,
        Horizon::Unbounded => steps,
    };
    let participation = args.schema.participation(covered)?;
    let blob_options = BlobOptions {
        clip_norm: args.clip_norm,
        calibration,
        neighbouring: args.schema.neighbouring()?,
    };
    if args.form != "bandmf" && (args.bands.is_some() || args.toeplitz) {
        return Err(Error::InvalidOption(format!(
            "--bands and --toeplitz apply to --form bandmf only (the form is `{}`; the banded+low-rank form takes --band and --rank)",
            args.form
        ))
        .into());
    }
    match args.form.as_str() {
        "banded" => {}
        "bandmf" => {
            return run_bandmf(
                &args,
                &workload,
                steps,
                participation,
                &blob_options,
                started,
            );
        }
        form @ ("blt" | "fft" | "fft-optimal") if !matches!(workload, Workload::PrefixSum) => {
            return Err(
                Error::InvalidOption(format!("the {form} form releases prefix sums only")).into(),
            );
        }
        "blt" => return run_blt(&args, steps, participation, &blob_options, started),
        "fft" | "fft-optimal" => {
            return run_fft(&args, steps, participation, &blob_options, started);
        }
        other => {
            return Err(Error::InvalidOption(format!(
                "unknown form `{other}` (expected `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`)"
            ))
            .into());
        }
    }
    check_budget(&args, steps, &participation)?;
    let a = workload.matrix(steps)?;
    let mut options = CompileOptions {
        participation,
        optimize: OptimizeOptions {
            relative_gap: args.gap,
            ..OptimizeOptions::default()
        },
        multi_epoch: MultiEpochOptions {
            relative_gap: args.gap.max(1e-4),
            ..MultiEpochOptions::default()
        },
        compression: CompressOptions {
            refine_iterations: args.refine,
            ..CompressOptions::default()
        },
        ..CompileOptions::default()
    };
    let mut status = Status::new(started)?;
    options.stamps = if args.stamps == "auto" {
        status.say("choosing the number of stamps by loss");
        let tried = choose_stamps(a.as_ref(), &options)?;
        tried.first().map_or(1, |&(s, _)| s)
    } else {
        parse_number(&args.stamps, "--stamps")?
    };
    let mut on_progress = |p: &Progress| {
        status.say(&format!(
            "optimizing n = {steps}: iteration {}, relative duality gap {:.2e} (target {:.0e})",
            p.iteration, p.relative_gap, args.gap
        ));
    };
    let compiled = compile(a.as_ref(), args.band, args.rank, &options, &mut on_progress)?;
    status.finish();

    let blob = blob::encode(&compiled, &workload, &blob_options)?;
    write_blob(&args.out, &blob)?;

    let mut report =
        CompileReport::new(args.workload.clone(), &compiled, &blob_options, blob.len())?;
    report.out = Some(args.out.display().to_string());
    report.seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

/// Progress on stderr: a spinner on a terminal, otherwise (logs of CI or cluster jobs) a line
/// every [`PROGRESS_EVERY`], the first as soon as there is something to say.
struct Status {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Option<Instant>,
}

/// How often a non-terminal stderr gets a progress line.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl Status {
    fn new(started: Instant) -> Result<Self, Box<dyn std::error::Error>> {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
            Some(bar)
        } else {
            None
        };
        Ok(Self {
            bar,
            started,
            last_line: None,
        })
    }

    fn say(&mut self, message: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_message(message.to_string());
                bar.tick();
            }
            None => {
                if self.last_line.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                    eprintln!(
                        "mfc compile: {:.0} s: {message}",
                        self.started.elapsed().as_secs_f64()
                    );
                    self.last_line = Some(Instant::now());
                }
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Before any `O(n³)` work: the estimated memory and time of the dense compile on stderr, and a
/// refusal (naming the forms that scale) when the memory exceeds what this machine has
/// available, unless `--force`.
fn check_budget(args: &Args, steps: usize, participation: &Participation) -> Result<(), Error> {
    let stamps = args.stamps.parse::<usize>().unwrap_or(1).max(1);
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
        if estimate.bytes > available && !args.force {
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
        eprintln!(
            "mfc: n = {steps}: the dense compile needs about {:.1} GB of memory{} and {} on a \
             2-core machine",
            gb(estimate.bytes),
            available.map_or(String::new(), |a| format!(" ({:.1} GB available)", gb(a))),
            time(estimate.seconds)
        );
    }
    Ok(())
}

fn write_blob(path: &std::path::Path, blob: &[u8]) -> Result<(), Error> {
    std::fs::write(path, blob).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    })
}

/// What the BLT and FFT forms share after encoding: the blob written to `--out`, then the report
/// — `fields` plus the noise multiplier, the blob's size and path and the time taken — as JSON
/// with `--json`, else `text` and a line for the blob.
fn write_and_report(
    args: &Args,
    blob: &[u8],
    blob_options: &BlobOptions,
    started: Instant,
    mut fields: serde_json::Value,
    text: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    write_blob(&args.out, blob)?;
    fields["noise_multiplier"] =
        serde_json::json!(blob_options.calibration.map(|c| c.noise_multiplier));
    fields["blob_bytes"] = serde_json::json!(blob.len());
    fields["out"] = serde_json::json!(args.out.display().to_string());
    fields["seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&fields)?);
    } else {
        print!("{text}");
        println!(
            "blob                {} bytes -> {}",
            blob.len(),
            args.out.display()
        );
    }
    Ok(())
}

/// `fields` with the statement's keys added (the same keys as the banded form's report).
fn with_statement(
    mut fields: serde_json::Value,
    statement: &PrivacyStatement,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    if let (Some(map), serde_json::Value::Object(extra)) =
        (fields.as_object_mut(), serde_json::to_value(statement)?)
    {
        map.extend(extra);
    }
    Ok(fields)
}

/// The horizon a BLT blob covers (`--horizon`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Horizon {
    /// The sensitivity covers this many steps; the runtime stops there.
    Steps(usize),
    /// The sensitivity holds for every horizon.
    Unbounded,
}

/// Parses `--horizon` (default `--steps`): a number of steps at least `--steps`, or `unbounded`,
/// for the blt form only.
fn horizon(args: &Args, steps: usize) -> Result<Horizon, Error> {
    let Some(text) = args.horizon.as_deref() else {
        return Ok(Horizon::Steps(steps));
    };
    if args.form != "blt" {
        return Err(Error::InvalidOption(format!(
            "--horizon {text}: only the blt form has a horizon beyond --steps (the form is `{}`)",
            args.form
        )));
    }
    if text == "unbounded" {
        return Ok(Horizon::Unbounded);
    }
    match text.parse::<usize>() {
        Ok(horizon) if horizon >= steps => Ok(Horizon::Steps(horizon)),
        Ok(horizon) => Err(Error::InvalidOption(format!(
            "--horizon {horizon}: must be at least --steps ({steps}), or `unbounded`"
        ))),
        Err(_) => Err(Error::InvalidOption(format!(
            "--horizon {text}: expected a number of steps ≥ --steps ({steps}) or `unbounded`"
        ))),
    }
}

/// `mfc compile --form blt`: optimize the BLT for `--steps`, round it, compute the sensitivity
/// over `--horizon` (or bound it for every horizon), write the blob and report.
fn run_blt(
    args: &Args,
    steps: usize,
    participation: Participation,
    blob_options: &BlobOptions,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    let blt = optimize_blt(steps, args.buffers, &participation)?;
    let compiled = match horizon(args, steps)? {
        Horizon::Steps(horizon) => compile_blt(&blt, steps, horizon, &participation)?,
        Horizon::Unbounded => compile_blt_unbounded(&blt, steps, &participation)?,
    };
    if compiled.every_horizon {
        return report_unbounded_blt(args, steps, &compiled, blob_options, started);
    }
    let blob = blob::encode_blt(&compiled, blob_options)?;
    let factor = neighbouring_factor(blob_options.neighbouring)?;
    let statement = PrivacyStatement::new(
        blob_options,
        &participation,
        compiled.sensitivity,
        compiled.sensitivity_method,
        &compiled.per_step_variance,
    )?;
    let fields = serde_json::json!({
        "workload": args.workload,
        "form": "blt",
        "buffers": args.buffers,
        "steps": steps,
        "horizon": compiled.horizon,
        "theta": compiled.blt.theta,
        "omega": compiled.blt.omega,
        "horizon_sqrt_loss": factor * compiled.horizon_error.sqrt_loss,
        "horizon_max_step_stddev": factor * compiled.horizon_error.max_step_stddev,
        "horizon_final_step_stddev": factor * compiled.horizon_error.final_step_stddev,
        "runtime_floats_per_coordinate": args.buffers + 2,
    });
    let e = &compiled.horizon_error;
    let text = format!(
        "workload            prefix sum, BLT with {} buffers optimized for n = {steps}; the sensitivity covers {} steps\n\
         participation       {}\n\
         shipped             sqrt(L) = {:.4} over the {steps} design steps\n\
         over all {} steps   sqrt(L) = {:.4}, max step stddev {:.4}, last {:.4}  (units of σ·ζ; the blob's error figures)\n\
         {statement}\
         runtime memory      (m + 2)·d = {}·d floats, for any number of steps\n",
        args.buffers,
        compiled.horizon,
        statement.participation,
        statement.sqrt_loss,
        compiled.horizon,
        factor * e.sqrt_loss,
        factor * e.max_step_stddev,
        factor * e.final_step_stddev,
        args.buffers + 2
    );
    write_and_report(
        args,
        &blob,
        blob_options,
        started,
        with_statement(fields, &statement)?,
        &text,
    )
}

/// The horizons of the error-growth table of an unbounded BLT: the design steps, then powers of
/// ten from 10³ to 10⁹ above them.
fn growth_horizons(steps: usize) -> Vec<usize> {
    let mut out = vec![steps];
    out.extend((3..=9).map(|k| 10usize.pow(k)).filter(|&t| t > steps));
    out
}

/// The report of `mfc compile --form blt --horizon unbounded`: the statement with the bound for
/// every horizon, and how the per-step error grows with the step `t`.
fn report_unbounded_blt(
    args: &Args,
    steps: usize,
    compiled: &CompiledBlt,
    blob_options: &BlobOptions,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    let blob = blob::encode_blt(compiled, blob_options)?;
    let factor = neighbouring_factor(blob_options.neighbouring)?;
    let statement = PrivacyStatement::new(
        blob_options,
        &compiled.participation,
        compiled.sensitivity,
        compiled.sensitivity_method,
        &compiled.per_step_variance,
    )?;
    let sigma = blob_options.calibration.map_or(1.0, |c| c.noise_multiplier);
    // The standard deviation of the release of step t (in units of ζ): σ·sens·‖B[t−1,:]‖.
    let growth: Vec<(usize, f64)> = growth_horizons(steps)
        .into_iter()
        .map(|t| {
            let e = horizon_error(&compiled.blt, t, compiled.sensitivity);
            (t, factor * sigma * e.final_step_stddev)
        })
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
        "workload": args.workload,
        "form": "blt",
        "buffers": args.buffers,
        "steps": steps,
        "horizon": "unbounded",
        "theta": compiled.blt.theta,
        "omega": compiled.blt.omega,
        "runtime_floats_per_coordinate": args.buffers + 2,
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
        args.buffers,
        statement.participation,
        statement.sqrt_loss,
        args.buffers + 2
    );
    write_and_report(
        args,
        &blob,
        blob_options,
        started,
        with_statement(fields, &statement)?,
        &text,
    )
}

/// `mfc compile --form fft|fft-optimal`: the FFT mechanism (001 §4, App. K), stamped.
fn run_fft(
    args: &Args,
    steps: usize,
    participation: Participation,
    blob_options: &BlobOptions,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    let kind = if args.form == "fft" {
        FftKind::Circulant
    } else {
        FftKind::OptimalDecoder
    };
    let compiled = compile_fft(&FftOptions {
        steps,
        stamps: parse_number(&args.stamps, "--stamps (a number for the FFT form)")?,
        kind,
        participation,
    })?;
    let blob = blob::encode_fft(&compiled, blob_options)?;
    let statement = PrivacyStatement::new(
        blob_options,
        &participation,
        compiled.sensitivity,
        compiled.sensitivity_method,
        &compiled.per_step_variance,
    )?;
    let fields = serde_json::json!({
        "workload": args.workload,
        "form": args.form,
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
    write_and_report(
        args,
        &blob,
        blob_options,
        started,
        with_statement(fields, &statement)?,
        &text,
    )
}

/// `mfc compile --form bandmf`: the BandMF encoder (general or `--toeplitz`, `--bands N|auto`)
/// for the prefix sum or a momentum workload, rounded, its sensitivity from the stored
/// coefficients, written and reported.
fn run_bandmf(
    args: &Args,
    workload: &Workload,
    steps: usize,
    participation: Participation,
    blob_options: &BlobOptions,
    started: Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    let bands = match args.bands.as_deref() {
        None | Some("auto") => {
            if args.max_bands == 0 {
                return Err(Error::InvalidOption(
                    "--max-bands 0: auto needs at least 1 band to try".into(),
                )
                .into());
            }
            Bands::Auto {
                max: args.max_bands,
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
            ))
            .into());
        }
    }
    let kind = if args.toeplitz {
        BandMfKind::Toeplitz
    } else {
        BandMfKind::General
    };
    // The general optimizer holds the workload, the decoder and its adjoint as n × n matrices.
    let general_bytes = 3.0 * 8.0 * (steps as f64).powi(2);
    let available = mfc_compiler::budget::available_memory();
    if kind == BandMfKind::General && available.is_some_and(|a| general_bytes > a) && !args.force {
        return Err(Error::InvalidOption(format!(
            "--steps {steps}: the general BandMF encoder needs about {:.1} GB of memory (three \
             n × n matrices); this machine has {:.1} GB available. --toeplitz optimizes a banded \
             Toeplitz encoder in O(n) memory; --force runs the general one anyway",
            general_bytes / 1e9,
            available.unwrap_or(0.0) / 1e9
        ))
        .into());
    }
    if kind == BandMfKind::Toeplitz
        && !matches!(workload, Workload::PrefixSum | Workload::Momentum { .. })
    {
        // A custom workload's Toeplitz loss goes through its n × n matrix as well.
        if available.is_some_and(|a| general_bytes > a) && !args.force {
            return Err(Error::InvalidOption(format!(
                "--steps {steps}: a BandMF encoder for a custom workload needs about {:.1} GB of \
                 memory (three n × n matrices); --force runs it anyway",
                general_bytes / 1e9
            ))
            .into());
        }
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
    let options = BandMfOptions {
        participation,
        kind,
        bands,
        ..BandMfOptions::default()
    };
    let compiled = compile_bandmf(workload, steps, &options, &mut |what, loss| {
        bar.set_message(format!("n = {steps}: {what}, sqrt(L) = {:.4}", loss.sqrt()));
        bar.tick();
    })?;
    bar.finish_and_clear();
    let blob = blob::encode_bandmf(&compiled, workload, blob_options)?;
    let factor = neighbouring_factor(blob_options.neighbouring)?;
    let prefix = matches!(workload, Workload::PrefixSum);
    let floats = compiled.bands + 2 * usize::from(prefix);
    let kind_name = match kind {
        BandMfKind::General => "general banded",
        BandMfKind::Toeplitz => "banded Toeplitz",
    };
    let statement = PrivacyStatement::new(
        blob_options,
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
        "workload": args.workload,
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
    write_and_report(
        args,
        &blob,
        blob_options,
        started,
        with_statement(fields, &statement)?,
        &text,
    )
}
