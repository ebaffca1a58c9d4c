//! `mfc compile`: optimize → compress → normalize → calibrate → write the blob, then report.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use mfc_compiler::Error;
use mfc_compiler::blob::{self, BlobOptions};
use mfc_compiler::calibrate::{epsilon_for_noise_multiplier, noise_multiplier_for};
use mfc_compiler::mechanism::{CompileOptions, compile};
use mfc_compiler::multi_epoch::MultiEpochOptions;
use mfc_compiler::optimize::{OptimizeOptions, Progress};
use mfc_compiler::participation::Participation;
use mfc_compiler::report::CompileReport;
use mfc_compiler::stamp::choose_stamps;
use mfc_compiler::workload::{self, Schedule, Workload};
use mfc_formats::{Calibration, PrivacyTarget};

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
    /// k: each record participates in at most this many steps (single participation when absent).
    #[arg(long, requires = "min_sep")]
    epochs: Option<usize>,
    /// b: adjacent participations of a record are exactly this many steps apart.
    #[arg(long, requires = "epochs")]
    min_sep: Option<usize>,
    /// Repeat an encoder optimized for n/S steps S times (S must divide n), or `auto`: choose S
    /// among 1, 2, 4, 5, 8, 10, 16, 20 by the loss under the participation schema.
    #[arg(long, default_value = "1")]
    stamps: String,
    /// Number of steps n (the horizon); for an .npy workload it must match the matrix.
    #[arg(long)]
    steps: Option<usize>,
    /// h: diagonals of the decoder kept exactly (≥ 1).
    #[arg(long, default_value_t = 4)]
    band: usize,
    /// r: rank of the decoder's part below the band.
    #[arg(long, default_value_t = 4)]
    rank: usize,
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
}

fn parse_number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, Error> {
    text.parse()
        .map_err(|_| Error::InvalidOption(format!("{what}: cannot parse `{text}`")))
}

fn parse_workload(
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
    let calibration = calibration(&args)?;
    let (workload, steps) = parse_workload(&args.workload, args.steps, args.cooldown.as_deref())?;
    let a = workload.matrix(steps)?;
    let participation = match (args.epochs, args.min_sep) {
        (Some(k), Some(b)) => Participation::fixed_epoch_order(k, b)?,
        _ => Participation::Single,
    };

    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
    let mut on_progress = |p: &Progress| {
        bar.set_message(format!(
            "optimizing n = {steps}: iteration {}, relative duality gap {:.2e} (target {:.0e})",
            p.iteration, p.relative_gap, args.gap
        ));
        bar.tick();
    };
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
        ..CompileOptions::default()
    };
    options.stamps = if args.stamps == "auto" {
        bar.set_message("choosing the number of stamps by loss");
        let tried = choose_stamps(a.as_ref(), &options)?;
        tried.first().map_or(1, |&(s, _)| s)
    } else {
        parse_number(&args.stamps, "--stamps")?
    };
    let compiled = compile(a.as_ref(), args.band, args.rank, &options, &mut on_progress)?;
    bar.finish_and_clear();

    let blob = blob::encode(
        &compiled,
        &workload,
        &BlobOptions {
            clip_norm: args.clip_norm,
            calibration,
        },
    )?;
    std::fs::write(&args.out, &blob).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", args.out.display()),
        ))
    })?;

    let mut report = CompileReport::new(
        args.workload.clone(),
        &compiled,
        args.clip_norm,
        calibration,
        blob.len(),
    );
    report.out = Some(args.out.display().to_string());
    report.seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
