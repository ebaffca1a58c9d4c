//! `mfc compile`: optimize → compress → normalize → calibrate → write the blob, then report.
//! The pipeline is the library's ([`mfc_compiler::compile`]); this is its command line.

use std::path::PathBuf;
use std::time::Instant;

use mfc_compiler::Error;
use mfc_compiler::compile::{Event, compile};
use mfc_compiler::max_error::Objective;
use mfc_compiler::request::{BandsChoice, FormKind, Horizon, Options, Stamps, WorkloadSpec};

use crate::options;
use crate::schema::SchemaArgs;
use crate::status::Status;

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
    /// Banded and FFT forms: repeat an encoder optimized for n/S steps S times (S must divide
    /// n), or `auto` (banded form): choose S among 1, 2, 4, 5, 8, 10, 16, 20 by the loss under
    /// the participation schema [default: 1].
    #[arg(long, value_name = "S|auto", value_parser = options::stamps)]
    stamps: Option<Stamps>,
    /// Number of steps n (the horizon); for an .npy workload it must match the matrix.
    #[arg(long, allow_negative_numbers = true, value_parser = options::steps)]
    steps: Option<usize>,
    /// The decoder form: `banded` (banded plus low rank, any workload); `blt` (buffered linear
    /// Toeplitz, prefix sums: `--buffers` buffers per coordinate, no dependence on the horizon);
    /// `fft` or `fft-optimal` (the FFT mechanism or its optimal decoder, prefix sums, blocks of
    /// n/--stamps steps; no optimization); `bandmf` (BandMF: a banded encoder with --bands
    /// bands, general or --toeplitz; the prefix sum or momentum, whose noised inputs the
    /// optimizer post-processes). Options of another form are refused. [default: banded;
    /// bandmf with --sampling-prob]
    #[arg(long, value_parser = options::form)]
    form: Option<FormKind>,
    /// BandMF: b̂, the bands of the encoder (1 ≤ b̂ ≤ min(b, n) under --min-sep/--every b), or
    /// `auto`: the fewest bands among 1, 2, 4, … and the most allowed (at most --max-bands) whose
    /// sqrt(L) is within 1% of the best of them [default: auto].
    #[arg(long, value_name = "N|auto", value_parser = options::bands)]
    bands: Option<BandsChoice>,
    /// BandMF with --bands auto: the most bands tried (the device keeps (b̂ + 2)·d floats for
    /// the prefix sum) [default: 256].
    #[arg(long, allow_negative_numbers = true, value_parser = options::max_bands)]
    max_bands: Option<usize>,
    /// BandMF: a banded Toeplitz encoder (b̂ coefficients, optimized in O(n·b̂) per evaluation
    /// for the prefix sum, any horizon) instead of a general one (n × b̂ coefficients, O(n·b̂²)
    /// per evaluation for the prefix sum and momentum, O(n²·b̂) for a custom workload). Under
    /// --objective max both hold n × n matrices (the measurement of the max error is dense).
    #[arg(long)]
    toeplitz: bool,
    /// BLT: buffers per coordinate [default: 4].
    #[arg(long, allow_negative_numbers = true, value_parser = options::buffers)]
    buffers: Option<usize>,
    /// BLT: the horizon the sensitivity covers and the runtime stops at (default: --steps, the
    /// horizon the parameters are optimized for), or `unbounded`: a sensitivity bound valid for
    /// every horizon (single participation; the runtime never stops on its own account).
    #[arg(long, value_name = "N|unbounded", allow_negative_numbers = true, value_parser = options::horizon)]
    horizon: Option<Horizon>,
    /// Banded form: h, diagonals of the decoder kept exactly (≥ 1) [default: 4].
    #[arg(long, allow_negative_numbers = true, value_parser = options::band)]
    band: Option<usize>,
    /// Banded form: r, rank of the decoder's part below the band [default: 4].
    #[arg(long, allow_negative_numbers = true, value_parser = options::rank)]
    rank: Option<usize>,
    /// Banded form: L-BFGS iterations of the refinement that lowers the shipped loss of the
    /// (h, r) decoder directly after the fit, followed by its optimal diagonal rescaling (0: ship
    /// the fit). Under several participations a few thousand iterations keep improving it
    /// [default: 50].
    #[arg(long, allow_negative_numbers = true, value_parser = options::refine)]
    refine: Option<usize>,
    /// Banded form: stop optimizing when the relative duality gap is at most this (single
    /// participation and fixed epoch order, both certified by a dual point; the min-separation
    /// optimizer has no dual bound and ignores it); with --objective max, the gap certified for
    /// the max-error optimum (a slow certificate ships its best point with a warning) [default:
    /// 1e-6].
    #[arg(long, allow_negative_numbers = true, value_parser = options::gap)]
    gap: Option<f64>,
    /// What the strategy is optimized for: `total`, the total squared error sqrt(L) over the
    /// steps, or `max`, the largest per-step standard deviation of a release (continual
    /// counting's objective). Every form takes it: banded (single participation: the certified
    /// max-error optimum, compressed), blt (finite or unbounded horizon), bandmf (general or
    /// --toeplitz); fft and fft-optimal have nothing to choose (the report says so) [default:
    /// total].
    #[arg(long, value_name = "total|max", value_parser = options::objective)]
    objective: Option<Objective>,
    /// ζ: the L2 norm the runtime clips every input row to.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = options::clip_norm)]
    clip_norm: f64,
    /// Calibrate σ for this ε (with --delta).
    #[arg(long, requires = "delta", conflicts_with = "noise_multiplier", allow_negative_numbers = true, value_parser = options::epsilon)]
    epsilon: Option<f64>,
    /// δ of the privacy target.
    #[arg(long, allow_negative_numbers = true, value_parser = options::delta)]
    delta: Option<f64>,
    /// Record this noise multiplier σ instead of calibrating one (with --delta, ε is reported).
    #[arg(long, allow_negative_numbers = true, value_parser = options::noise_multiplier)]
    noise_multiplier: Option<f64>,
    /// Amplified BandMF (Choquette-Choo et al. 2023b): the records split into --bands b̂
    /// groups, step i Poisson-samples each record of group i mod b̂ with this probability q
    /// (cyclic Poisson sampling; --bands 1 is DP-SGD). σ is calibrated by the accountant for
    /// the ⌈n/b̂⌉ steps a record can take part in, and the blob records the scheme. Implies
    /// --form bandmf; needs --bands B; add-remove neighbours.
    #[arg(long, allow_negative_numbers = true, value_parser = options::sampling_prob)]
    sampling_prob: Option<f64>,
    /// Amplified BandMF, instead of --sampling-prob: the number of records N (with
    /// --batch-size B, q = B·b̂/N). With --bands auto and a target (--epsilon, --delta), b̂ is
    /// chosen among 1, 2, 4, … ≤ N/B to minimize σ(b̂)·sqrt(L(b̂)) (McKenna 2025).
    #[arg(long, requires = "batch_size", value_parser = clap::value_parser!(u64).range(1..))]
    dataset_size: Option<u64>,
    /// Amplified BandMF: the expected batch size B (with --dataset-size).
    #[arg(long, requires = "dataset_size", allow_negative_numbers = true, value_parser = options::batch_size)]
    batch_size: Option<f64>,
    /// Where to write the blob.
    #[arg(long, value_parser = options::out_path)]
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

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let request = Options {
        workload: Some(WorkloadSpec::parse(
            &args.workload,
            args.cooldown.as_deref(),
        )?),
        steps: args.steps,
        epochs: args.schema.epochs,
        min_sep: args.schema.min_sep,
        every: args.schema.every,
        neighbouring: Some(args.schema.neighbouring),
        form: args.form,
        stamps: args.stamps,
        bands: args.bands,
        max_bands: args.max_bands,
        toeplitz: args.toeplitz,
        buffers: args.buffers,
        horizon: args.horizon,
        band: args.band,
        rank: args.rank,
        refine: args.refine,
        gap: args.gap,
        objective: args.objective,
        clip_norm: Some(args.clip_norm),
        epsilon: args.epsilon,
        delta: args.delta,
        noise_multiplier: args.noise_multiplier,
        sampling_prob: args.sampling_prob,
        dataset_size: args.dataset_size,
        batch_size: args.batch_size,
        force: args.force,
    }
    .request()?;
    let mut status = Status::new("mfc compile", started, true)?;
    let compiled = compile(&request, &mut |event| match event {
        Event::Progress(line) => status.say(&line),
        Event::Warning(line) => status.warn(&line),
    })?;
    status.finish();
    write_blob(&args.out, &compiled.blob)?;
    let out = args.out.display().to_string();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&compiled.json(Some(&out)))?
        );
    } else {
        print!("{}", compiled.text(Some(&out)));
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
