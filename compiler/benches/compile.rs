//! Release benchmark of the compiler: the certified prefix-sum optimum and the shipped (h, r)
//! mechanism for the sizes of Denisov et al. 2022, App. H, Table 2. Prints a table.
//!
//! Run: `cargo bench -p mfc-compiler --bench compile` (n = 256 … 2048) or with `-- 256 4096` to
//! choose (n = 4096, (7, 5), runs only when named); `-- --optimize-only 2048 4096` times the
//! certified optimum alone. Each row is one whole `compile_banded` (optimum, factorization, fit,
//! refinement, rounding, sensitivity); "optimize s" is when the optimizer reported its last
//! iteration, "after s" the rest.

use std::time::Instant;

use mfc_compiler::forms::banded::compile_banded;
use mfc_compiler::forms::banded::compress::CompressOptions;
use mfc_compiler::optimize::single::{OptimizeOptions, optimize_single_participation};
use mfc_compiler::workload::Workload;

/// (n, h, r, the paper's √L of the optimum and of the compressed mechanism; NaN: not in the
/// paper).
const CASES: [(usize, usize, usize, f64, f64); 5] = [
    (256, 4, 4, 40.4, 40.4),
    (512, 5, 4, 62.0, 62.2),
    (1024, 5, 5, 94.6, 95.5),
    (2048, 6, 5, 143.6, 145.8),
    (4096, 7, 5, f64::NAN, f64::NAN),
];

/// The optimum alone, with the time of every iteration on stderr.
fn optimize_only(sizes: &[usize]) {
    println!("| n | optimum √L | dual bound √L | rel. gap | iterations | optimize s |");
    println!("|---|---|---|---|---|---|");
    for &n in sizes {
        let a = Workload::PrefixSum.matrix(n).expect("prefix workload");
        let start = Instant::now();
        let optimum =
            optimize_single_participation(a.as_ref(), &OptimizeOptions::default(), &mut |p| {
                eprintln!(
                    "  n = {n}, iteration {}: gap {:.2e} at {:.2} s",
                    p.iteration,
                    p.relative_gap,
                    start.elapsed().as_secs_f64()
                )
            })
            .expect("optimum");
        println!(
            "| {n} | {:.4} | {:.4} | {:.1e} | {} | {:.2} |",
            optimum.loss.sqrt(),
            optimum.dual_bound.sqrt(),
            optimum.relative_gap,
            optimum.iterations,
            start.elapsed().as_secs_f64()
        );
    }
}

fn main() {
    let wanted: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if std::env::args().any(|a| a == "--optimize-only") {
        optimize_only(&wanted);
        return;
    }
    println!(
        "| n | optimum √L | dual bound √L | rel. gap | iterations | (h, r) | shipped √L | paper (opt / shipped) | optimize s | after s | total compile s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (n, h, r, paper_opt, paper_shipped) in CASES {
        let chosen = if wanted.is_empty() {
            n <= 2048
        } else {
            wanted.contains(&n)
        };
        if !chosen {
            continue;
        }
        let a = Workload::PrefixSum.matrix(n).expect("prefix workload");
        let start = Instant::now();
        let mut optimized = 0.0;
        let compiled = compile_banded(
            a.as_ref(),
            h,
            r,
            &OptimizeOptions::default(),
            &CompressOptions::default(),
            &mut |_| optimized = start.elapsed().as_secs_f64(),
        )
        .expect("compile");
        let total_s = start.elapsed().as_secs_f64();
        let paper = |x: f64| {
            if x.is_nan() {
                "—".to_string()
            } else {
                x.to_string()
            }
        };
        let optimum = &compiled.optimum;
        println!(
            "| {n} | {:.4} | {:.4} | {:.1e} | {} | ({h}, {r}) | {:.3} | {} / {} | {optimized:.2} | {:.2} | {total_s:.2} |",
            optimum.loss.sqrt(),
            optimum.dual_bound.sqrt(),
            optimum.relative_gap,
            optimum.iterations,
            compiled.sqrt_loss,
            paper(paper_opt),
            paper(paper_shipped),
            total_s - optimized,
        );
    }
}
