//! `mfc compare`: one table over the mechanism families for the prefix sum at equal privacy.

use indicatif::{ProgressBar, ProgressStyle};
use mfc_compiler::compare::{CompareOptions, compare};

use crate::schema::SchemaArgs;

/// Compare the optimum, banded+low-rank, BLT, banded Toeplitz, square root and tree mechanisms.
#[derive(clap::Args)]
pub struct Args {
    /// Number of steps n.
    #[arg(long)]
    steps: usize,
    #[command(flatten)]
    schema: SchemaArgs,
    /// h of the banded-plus-low-rank row.
    #[arg(long, default_value_t = 4)]
    band: usize,
    /// r of the banded-plus-low-rank row.
    #[arg(long, default_value_t = 4)]
    rank: usize,
    /// BLT rows for 1..=this many buffers.
    #[arg(long, default_value_t = 5)]
    max_buffers: usize,
    /// Coefficients of the banded Toeplitz row (at most b under (k, b)).
    #[arg(long, default_value_t = 16)]
    toeplitz_bands: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let participation = args.schema.participation()?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let rows = compare(
        &CompareOptions {
            steps: args.steps,
            participation,
            band: args.band,
            rank: args.rank,
            max_buffers: args.max_buffers,
            toeplitz_bands: args.toeplitz_bands,
        },
        &mut |what| bar.set_message(format!("n = {}: {what}", args.steps)),
    )?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "prefix sum, n = {}, {}; units of σ·ζ",
        args.steps,
        participation.describe()
    );
    println!();
    println!(
        "| mechanism | √L | max step stddev | sensitivity | RAM floats/coord | flops/step/coord | blob bytes |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {}{} | {:.4} | {:.4} | {} | {} | {} | {} |",
            r.mechanism,
            if r.streaming { "" } else { " ‡" },
            r.sqrt_loss,
            r.max_step_stddev,
            r.sensitivity_method,
            r.ram_floats,
            r.flops_per_step,
            r.blob_bytes.map_or("—".into(), |b| b.to_string()),
        );
    }
    println!();
    println!("‡ not streaming: release i uses later noise; a comparison point only.");
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
