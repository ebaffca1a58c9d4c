//! `mfc compare`: one table over the mechanism families at equal privacy, every family optimized
//! for the participation schema it is evaluated under.

use mfc_compiler::compare::{CompareOptions, compare};
use mfc_compiler::forms::bandmf::Bands;
use mfc_compiler::max_error::Objective;

use mfc_compiler::compare::Row;
use mfc_compiler::report::{neighbouring_name, privacy_unit};

use crate::options;
use crate::schema::SchemaArgs;
use crate::status::Status;
use mfc_compiler::compile::workload;
use mfc_compiler::request::{BandsChoice, WorkloadSpec};

/// Compare the optimum, banded+low-rank, stamping, BandMF (banded Toeplitz and general), BLT,
/// FFT, square root and tree mechanisms (the last four for the prefix sum only), each optimized
/// for the schema.
#[derive(clap::Args)]
pub struct Args {
    /// Number of steps n.
    #[arg(long, allow_negative_numbers = true, value_parser = options::steps)]
    steps: usize,
    /// The workload A, as for `mfc compile`: `prefix`, `momentum:BETA` (with --cooldown) or
    /// `npy:PATH`.
    #[arg(long, default_value = "prefix")]
    workload: String,
    /// Learning-rate cooldown of the momentum workload: `STEPS:FINAL`.
    #[arg(long)]
    cooldown: Option<String>,
    #[command(flatten)]
    schema: SchemaArgs,
    /// h of the banded-plus-low-rank row.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = options::band)]
    band: usize,
    /// r of the banded-plus-low-rank row.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = options::rank)]
    rank: usize,
    /// BLT rows for 1..=this many buffers.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true, value_parser = options::buffers)]
    max_buffers: usize,
    /// b̂ of the BandMF rows (banded Toeplitz and general; at most b under --min-sep/--every b),
    /// or `auto`: the fewest bands among 1, 2, 4, … and the most allowed (at most --max-bands)
    /// whose banded Toeplitz sqrt(L) is within 1% of the best of them.
    #[arg(long, default_value = "auto", value_name = "N|auto", value_parser = options::bands)]
    bands: BandsChoice,
    /// With --bands auto: the most bands tried. The general row's optimizer costs O(n·b̂²) per
    /// evaluation for the prefix sum and momentum (O(n²·b̂) for a custom workload).
    #[arg(long, default_value_t = 32, allow_negative_numbers = true, value_parser = options::max_bands)]
    max_bands: usize,
    /// L-BFGS iterations of the (h, r) row's shipped-loss refinement.
    #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = options::refine)]
    refine: usize,
    /// Parts of the table computed at once (0: one per core; a part may use more than one core
    /// itself). The peak memory is that of the parts running together; with 1 the parts run one
    /// after another and each row's seconds are its own.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// `max` adds the rows optimized for the max error, the largest per-step stddev (the
    /// certified max-error optimum and its (h, r) compression under single participation,
    /// BLTs, BandMF banded Toeplitz and, up to n = 512, general); every row prints both metrics
    /// and the objective it was optimized for. The max-error BLTs take most of the time (88 s
    /// of 92 at n = 256 on a loaded 2-core machine) [default: total].
    #[arg(long, value_name = "total|max", value_parser = options::objective)]
    objective: Option<Objective>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let participation = args.schema.participation()?;
    let neighbouring = args.schema.neighbouring;
    let (workload, _) = workload(
        &WorkloadSpec::parse(&args.workload, args.cooldown.as_deref())?,
        Some(args.steps),
    )?;
    let label = workload.label();
    let mut status = Status::new("mfc compare", std::time::Instant::now(), false)?;
    let rows = compare(
        &CompareOptions {
            workload,
            steps: args.steps,
            participation,
            band: args.band,
            rank: args.rank,
            max_buffers: args.max_buffers,
            bands: match args.bands {
                BandsChoice::Auto => Bands::Auto {
                    max: args.max_bands,
                },
                BandsChoice::Fixed(b) => Bands::Fixed(b),
            },
            refine_iterations: args.refine,
            neighbouring,
            objective: args.objective.unwrap_or_default(),
            threads: args.threads,
        },
        &mut |what| status.line(what),
    )?;
    status.finish();
    if args.json {
        let report = serde_json::json!({
            "workload": label,
            "steps": args.steps,
            "participation": participation.describe(),
            "neighbouring": neighbouring_name(neighbouring),
            "privacy_unit": privacy_unit(&participation.describe(), neighbouring, 1.0),
            "units": "σ·ζ",
            "rows": rows,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{label}, n = {}, {}, {} neighbours; units of σ·ζ",
        args.steps,
        participation.describe(),
        neighbouring_name(neighbouring)
    );
    println!();
    println!(
        "| mechanism | optimized for | √L | max step stddev | sensitivity | RAM floats/coord | flops/step/coord | blob bytes | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        if r.lower_bound {
            println!(
                "| {} | {} | ≥ {:.4} | — | — | — | — | — | {:.1} |",
                r.mechanism, r.objective, r.sqrt_loss, r.seconds
            );
            continue;
        }
        println!(
            "| {}{} | {} | {:.4} | {:.4} | {} | {} | {} | {} | {:.1} |",
            r.mechanism,
            if r.streaming { "" } else { " ‡" },
            r.objective,
            r.sqrt_loss,
            r.max_step_stddev,
            r.sensitivity_method,
            r.ram_floats,
            r.flops_per_step,
            r.blob_bytes.map_or("—".into(), |b| b.to_string()),
            r.seconds,
        );
    }
    println!();
    println!("‡ not streaming: release i uses later noise; a comparison point only.");
    println!();
    println!("The front: the streaming mechanisms no other beats on both state and √L.");
    println!();
    println!("| RAM floats/coord | √L | mechanism |");
    println!("|---|---|---|");
    for r in front(&rows) {
        println!(
            "| {} | {:.4} | {} |",
            r.ram_floats, r.sqrt_loss, r.mechanism
        );
    }
    println!();
    println!("BLT past its horizon (same parameters; √L and sensitivity over N steps):");
    println!();
    println!("| mechanism | N | √L | √L/√N | sensitivity |");
    println!("|---|---|---|---|---|");
    for r in rows.iter().filter(|r| !r.beyond_horizon.is_empty()) {
        for &(steps, sqrt_loss, sens) in &r.beyond_horizon {
            println!(
                "| {} | {steps} | {sqrt_loss:.3} | {:.4} | {sens:.4} |",
                r.mechanism,
                sqrt_loss / (steps as f64).sqrt()
            );
        }
    }
    Ok(())
}

/// The streaming mechanisms on the front of state against loss: sorted by state, each with a
/// smaller `√L` than every row with less or equal state.
fn front(rows: &[Row]) -> Vec<&Row> {
    let mut candidates: Vec<&Row> = rows
        .iter()
        .filter(|r| r.streaming && !r.lower_bound)
        .collect();
    candidates.sort_by(|p, q| {
        p.ram_floats
            .cmp(&q.ram_floats)
            .then(p.sqrt_loss.total_cmp(&q.sqrt_loss))
    });
    let mut best = f64::INFINITY;
    candidates
        .into_iter()
        .filter(|r| {
            let keep = r.sqrt_loss < best;
            best = best.min(r.sqrt_loss);
            keep
        })
        .collect()
}
