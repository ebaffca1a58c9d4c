//! `mfc compile`: optimize → compress → normalize → calibrate → write the blob, then report.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use mfc_compiler::Error;
use mfc_compiler::blob::{self, BlobOptions};
use mfc_compiler::calibrate::{epsilon_for_noise_multiplier, noise_multiplier_for};
use mfc_compiler::compress::CompressOptions;
use mfc_compiler::mechanism::compile_banded;
use mfc_compiler::optimize::{OptimizeOptions, Progress};
use mfc_compiler::report::CompileReport;
use mfc_compiler::workload::{self, Workload};
use mfc_formats::{Calibration, PrivacyTarget};

/// Compile a banded-plus-low-rank mechanism for a lower-triangular workload.
#[derive(clap::Args)]
pub struct Args {
    /// The workload A: `prefix` (prefix sums) or `npy:PATH` (a square lower-triangular float64 or
    /// float32 .npy matrix, as written by numpy.save).
    #[arg(long, default_value = "prefix")]
    workload: String,
    /// Number of steps n (the horizon); for an .npy workload it must match the matrix.
    #[arg(long)]
    steps: Option<usize>,
    /// h: diagonals of the decoder kept exactly (≥ 1).
    #[arg(long, default_value_t = 4)]
    band: usize,
    /// r: rank of the decoder's part below the band.
    #[arg(long, default_value_t = 4)]
    rank: usize,
    /// Stop optimizing when the relative duality gap is at most this.
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

fn parse_workload(spec: &str, steps: Option<usize>) -> Result<(Workload, usize), Error> {
    if spec == "prefix" {
        let n = steps.ok_or_else(|| Error::InvalidOption("--steps is required".into()))?;
        return Ok((Workload::PrefixSum, n));
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
        "unknown workload `{spec}` (expected `prefix` or `npy:PATH`)"
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
    let (workload, steps) = parse_workload(&args.workload, args.steps)?;
    let a = workload.matrix(steps)?;

    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
    let mut on_progress = |p: &Progress| {
        bar.set_message(format!(
            "optimizing n = {steps}: iteration {}, relative duality gap {:.2e} (target {:.0e})",
            p.iteration, p.relative_gap, args.gap
        ));
        bar.tick();
    };
    let options = OptimizeOptions {
        relative_gap: args.gap,
        ..OptimizeOptions::default()
    };
    let compiled = compile_banded(
        a.as_ref(),
        args.band,
        args.rank,
        &options,
        &CompressOptions::default(),
        &mut on_progress,
    )?;
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
