//! Release benchmark of multi-epoch factorizations: the rows of Choquette-Choo et al. 2023
//! (001), App. D.5, Table 1, for the prefix sum under `(k, b) = (20, 100)` participation.
//!
//! Run: `cargo bench -p mfc-compiler --bench multi_epoch` (all rows) or with `-- 500 1000` to
//! choose the block sizes `n/s` of the rows to run.

use std::time::Instant;

use mfc_compiler::multi_epoch::{MultiEpochOptions, optimize_multi_epoch};
use mfc_compiler::optimize::{OptimizeOptions, optimize_single_participation};
use mfc_compiler::participation::Participation;
use mfc_compiler::stamp::{evaluate_gram, stamp};
use mfc_compiler::workload::Workload;

const STEPS: usize = 2000;
const EPOCHS: usize = 20;
const SEPARATION: usize = 100;

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
        "| mechanism | loss under (20, 100) | paper | ratio | sensitivity method | dual bound (block) | rel. gap | iterations | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (block, epochs, paper) in ROWS {
        if !wanted.is_empty() && !wanted.contains(&block) {
            continue;
        }
        let head = a.submatrix(0, 0, block, block).to_owned();
        let start = Instant::now();
        let optimum = if epochs == 1 {
            optimize_single_participation(head.as_ref(), &OptimizeOptions::default(), &mut |_| {})
        } else {
            optimize_multi_epoch(
                head.as_ref(),
                epochs,
                SEPARATION,
                &MultiEpochOptions::default(),
                &mut |p| {
                    if p.iteration % 50 == 0 {
                        eprintln!(
                            "  iteration {}: loss {:.6e}, dual {:.6e}, gap {:.2e}",
                            p.iteration, p.primal, p.dual, p.relative_gap
                        );
                    }
                },
            )
        }
        .expect("optimum");
        let x = stamp(optimum.x.as_ref(), STEPS / block);
        let evaluated = evaluate_gram(a.as_ref(), x.as_ref(), &participation).expect("evaluate");
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "| MF(k={epochs}, n={block})×{} | {:.4e} | {paper:.2e} | {:.3} | {:?} | {:.4e} | {:.1e} | {} | {seconds:.1} |",
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
