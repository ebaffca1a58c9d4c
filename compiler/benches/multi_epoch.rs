//! Release benchmark of multi-epoch factorizations: the rows of Choquette-Choo et al. 2023
//! (001), App. D.5, Table 1, for the prefix sum under `(k, b) = (20, 100)` participation.
//!
//! Run: `cargo bench -p mfc-compiler --bench multi_epoch` (all rows) or with `-- 500 1000` to
//! choose the block sizes `n/s` of the rows to run. The multi-epoch rows stop at a relative
//! duality gap of 1e-4; "CPU s" is the process's user and system time over the row (from
//! `/proc/self/stat`, Linux), next to the wall clock, which other jobs on a loaded machine
//! stretch.

use std::time::Instant;

use mfc_compiler::optimize::multi_epoch::{MultiEpochOptions, optimize_multi_epoch};
use mfc_compiler::optimize::single::{OptimizeOptions, optimize_single_participation};
use mfc_compiler::optimize::stamp::{evaluate_gram, stamp};
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::workload::Workload;

const STEPS: usize = 2000;
const EPOCHS: usize = 20;
const SEPARATION: usize = 100;

/// The relative duality gap the multi-epoch rows stop at (issue 18's target).
const GAP: f64 = 1e-4;

/// User plus system CPU seconds of this process so far (all threads), from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 1/100 s, Linux's `USER_HZ`); `NaN` elsewhere.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            // The fields after the command name, which is in parentheses.
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(f64::NAN)
}

/// (block size n/s, epochs the block is optimized for, the paper's loss).
const ROWS: [(usize, usize, f64); 5] = [
    (2000, 1, 1.6e6),
    (1000, 1, 1.37e6),
    (500, 5, 1.2e6),
    (1000, 10, 8.8e5),
    (2000, 20, 6.5e5),
];

fn main() {
    let wanted: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let a = Workload::PrefixSum.matrix(STEPS).expect("prefix workload");
    let participation = Participation::fixed_epoch_order(EPOCHS, SEPARATION).expect("(k, b)");
    println!(
        "| mechanism | loss under (20, 100) | paper | ratio | sensitivity method | dual bound (block) | rel. gap | iterations | seconds | CPU s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (block, epochs, paper) in ROWS {
        if !wanted.is_empty() && !wanted.contains(&block) {
            continue;
        }
        let head = a.submatrix(0, 0, block, block).to_owned();
        let start = Instant::now();
        let cpu = cpu_seconds();
        let optimum = if epochs == 1 {
            optimize_single_participation(head.as_ref(), &OptimizeOptions::default(), &mut |_| {})
        } else {
            optimize_multi_epoch(
                head.as_ref(),
                epochs,
                SEPARATION,
                &MultiEpochOptions {
                    relative_gap: GAP,
                    ..MultiEpochOptions::default()
                },
                &mut |p| {
                    eprintln!(
                        "  iteration {}: loss {:.6e}, dual {:.6e}, gap {:.2e}",
                        p.iteration, p.primal, p.dual, p.relative_gap
                    );
                },
            )
        }
        .expect("optimum");
        let x = stamp(optimum.x.as_ref(), STEPS / block);
        let evaluated = evaluate_gram(a.as_ref(), x.as_ref(), &participation).expect("evaluate");
        let seconds = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        println!(
            "| MF(k={epochs}, n={block})×{} | {:.4e} | {paper:.2e} | {:.3} | {:?} | {:.4e} | {:.1e} | {} | {seconds:.1} | {cpu:.1} |",
            STEPS / block,
            evaluated.loss,
            evaluated.loss / paper,
            evaluated.sensitivity.method,
            optimum.dual_bound,
            optimum.relative_gap,
            optimum.iterations,
        );
    }
}
