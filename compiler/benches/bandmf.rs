//! Release benchmark of BandMF (issue 17's acceptance tables): banded Toeplitz against general
//! banded encoders under `b`-min-separation, both against the certified optimum for fixed epoch
//! order (a floor for min-separation: its patterns are a subset of min-separation's, and its
//! optimizer's class, factorizations whose pattern columns are orthogonal, contains every BandMF
//! encoder with `b̂ ≤ b`) and against BLT. Losses are of the `f32` encoders as a blob stores them.
//!
//! Run: `cargo bench -p mfc-compiler --bench bandmf -- toeplitz-vs-general` (n = 2048, k = 8,
//! b = 256, b̂ = 16, 64 and the best b̂ ≤ 256), `-- min-sep` (n = 2000 with (20, 100); n = 2052
//! with (6, 342), momentum 0.95 and a cooldown of 513 steps to 0.05), `-- scale 100000 1000000`
//! (banded Toeplitz, k = 10, b = n/10: time in process; peak memory with `/usr/bin/time -v` on
//! `mfc compile`, see BENCHMARKS.md). Progress goes to stderr.

use std::time::Instant;

use mfc_compiler::forms::bandmf::{
    BandMfKind, BandMfOptions, Bands, CompiledBandMf, compile_bandmf,
};
use mfc_compiler::optimize::banded::toeplitz::ToeplitzProblem;
use mfc_compiler::optimize::blt::optimize_blt;
use mfc_compiler::optimize::optimum::{OptimumOptions, optimal_gram};
use mfc_compiler::optimize::toeplitz::toeplitz_sensitivity;
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::workload::{Schedule, Workload};

/// The certified optimum for fixed epoch order `(k, b)`: `(√L, √dual bound, relative gap,
/// seconds)`.
fn floor(workload: &Workload, n: usize, k: usize, b: usize) -> (f64, f64, f64, f64) {
    let started = Instant::now();
    let a = workload.matrix(n).expect("workload");
    let options = OptimumOptions {
        participation: Participation::fixed_epoch_order(k, b).expect("schema"),
        ..OptimumOptions::default()
    };
    let (optimum, _) = optimal_gram(a.as_ref(), &options, &mut |p| {
        if p.iteration % 50 == 0 {
            eprintln!(
                "  floor n = {n}: iteration {}, gap {:.2e}",
                p.iteration, p.relative_gap
            );
        }
    })
    .expect("certified optimum");
    (
        optimum.loss.sqrt(),
        optimum.dual_bound.max(0.0).sqrt(),
        optimum.relative_gap,
        started.elapsed().as_secs_f64(),
    )
}

/// A compiled BandMF encoder and the seconds it took.
fn bandmf(
    workload: &Workload,
    n: usize,
    participation: Participation,
    kind: BandMfKind,
    bands: Bands,
) -> (CompiledBandMf, f64) {
    let started = Instant::now();
    let mut last = Instant::now();
    let compiled = compile_bandmf(
        workload,
        n,
        &BandMfOptions {
            participation,
            kind,
            bands,
            ..BandMfOptions::default()
        },
        &mut |what, loss| {
            if last.elapsed().as_secs_f64() > 10.0 {
                eprintln!(
                    "  {:.0} s: {what}: {:.4}",
                    started.elapsed().as_secs_f64(),
                    loss.sqrt()
                );
                last = Instant::now();
            }
        },
    )
    .expect("BandMF");
    (compiled, started.elapsed().as_secs_f64())
}

/// `b̂` with the least banded Toeplitz loss among the powers of two below `b` and `b` itself.
fn best_bands(
    workload: &Workload,
    n: usize,
    participation: Participation,
) -> (usize, Vec<(usize, f64)>) {
    let most = participation.separation().unwrap_or(n).min(n);
    let (compiled, _) = bandmf(
        workload,
        n,
        participation,
        BandMfKind::Toeplitz,
        Bands::Auto { max: most },
    );
    let best = compiled
        .tried
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("tried")
        .0;
    (best, compiled.tried)
}

fn toeplitz_vs_general() {
    let (n, k, b) = (2048, 8, 256);
    let p = Participation::min_separation(k, b).expect("schema");
    let workload = Workload::PrefixSum;
    let (best, tried) = best_bands(&workload, n, p);
    eprintln!("banded Toeplitz √L by b̂: {tried:?}");
    let (floor_loss, floor_bound, gap, floor_seconds) = floor(&workload, n, k, b);
    println!(
        "prefix sum, n = {n}, min-separation (k, b) = ({k}, {b}); floor: fixed epoch order \
         ({k}, {b}) certified optimum √L = {floor_loss:.4} (dual bound {floor_bound:.4}, \
         relative gap {gap:.1e}, {floor_seconds:.0} s)"
    );
    println!();
    println!(
        "| b̂ | banded Toeplitz √L | general banded √L | Toeplitz / general | Toeplitz / floor | general / floor | Toeplitz s | general s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for bands in [16, 64, best] {
        let (toeplitz, toeplitz_seconds) =
            bandmf(&workload, n, p, BandMfKind::Toeplitz, Bands::Fixed(bands));
        let (general, general_seconds) =
            bandmf(&workload, n, p, BandMfKind::General, Bands::Fixed(bands));
        println!(
            "| {bands}{} | {:.4} | {:.4} | {:+.2}% | {:.4} | {:.4} | {toeplitz_seconds:.2} | {general_seconds:.0} |",
            if bands == best { " (best ≤ 256)" } else { "" },
            toeplitz.sqrt_loss,
            general.sqrt_loss,
            100.0 * (toeplitz.sqrt_loss / general.sqrt_loss - 1.0),
            toeplitz.sqrt_loss / floor_loss,
            general.sqrt_loss / floor_loss,
        );
    }
}

/// BLT with `buffers` buffers optimized for the prefix sum under `participation`, evaluated on
/// `workload`: `(√L, sensitivity method)`.
fn blt(
    workload: &Workload,
    n: usize,
    participation: Participation,
    buffers: usize,
) -> (f64, String) {
    let blt = optimize_blt(n, buffers, &participation).expect("BLT");
    let c = blt.encoder_coefficients(n);
    let sens = toeplitz_sensitivity(&c, n, &participation);
    let problem = ToeplitzProblem::new(workload, n, &participation).expect("problem");
    let rows = problem
        .decoder_row_norms(&blt.decoder_coefficients(n))
        .expect("series workload");
    let loss: f64 = rows.iter().sum::<f64>() * sens.value * sens.value;
    (loss.sqrt(), format!("{:?}", sens.method))
}

fn min_sep() {
    let momentum = Workload::Momentum {
        momentum: 0.95,
        schedule: Schedule::Cooldown {
            steps: 513,
            final_rate: 0.05,
        },
    };
    println!(
        "| workload | n | (k, b) | floor √L (fixed epoch, certified; dual bound) | BandMF Toeplitz, best b̂ ≤ b | √L | / floor | BandMF general, same b̂ | / floor | BLT, 4 buffers √L (method) | / floor | seconds (floor, Toeplitz, general, BLT) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (workload, n, k, b) in [
        (Workload::PrefixSum, 2000, 20, 100),
        (momentum, 2052, 6, 342),
    ] {
        let p = Participation::min_separation(k, b).expect("schema");
        let (best, tried) = best_bands(&workload, n, p);
        eprintln!("{}: banded Toeplitz √L by b̂: {tried:?}", workload.label());
        let (floor_loss, floor_bound, _, floor_seconds) = floor(&workload, n, k, b);
        let (toeplitz, toeplitz_seconds) =
            bandmf(&workload, n, p, BandMfKind::Toeplitz, Bands::Fixed(best));
        let (general, general_seconds) =
            bandmf(&workload, n, p, BandMfKind::General, Bands::Fixed(best));
        let started = Instant::now();
        let (blt_loss, blt_method) = blt(&workload, n, p, 4);
        let blt_seconds = started.elapsed().as_secs_f64();
        println!(
            "| {} | {n} | ({k}, {b}) | {floor_loss:.2} ({floor_bound:.2}) | {best} | {:.2} | {:.4} | {:.2} | {:.4} | {blt_loss:.2} ({blt_method}) | {:.4} | {floor_seconds:.0}, {toeplitz_seconds:.2}, {general_seconds:.0}, {blt_seconds:.0} |",
            workload.label(),
            toeplitz.sqrt_loss,
            toeplitz.sqrt_loss / floor_loss,
            general.sqrt_loss,
            general.sqrt_loss / floor_loss,
            blt_loss / floor_loss,
        );
    }
}

fn scale(sizes: &[usize]) {
    println!("| n | (k, b) | b̂ (auto, ≤ 256) | √L | √L/√n | seconds |");
    println!("|---|---|---|---|---|---|");
    for &n in sizes {
        let (k, b) = (10, n / 10);
        let p = Participation::min_separation(k, b).expect("schema");
        let (compiled, seconds) = bandmf(
            &Workload::PrefixSum,
            n,
            p,
            BandMfKind::Toeplitz,
            Bands::Auto { max: 256 },
        );
        println!(
            "| {n} | ({k}, {b}) | {} | {:.1} | {:.3} | {seconds:.1} |",
            compiled.bands,
            compiled.sqrt_loss,
            compiled.sqrt_loss / (n as f64).sqrt()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let all = !args
        .iter()
        .any(|a| ["toeplitz-vs-general", "min-sep", "scale"].contains(&a.as_str()));
    let wants = |name: &str| all || args.iter().any(|a| a == name);
    if wants("toeplitz-vs-general") {
        toeplitz_vs_general();
        println!();
    }
    if wants("min-sep") {
        min_sep();
        println!();
    }
    if wants("scale") {
        scale(if sizes.is_empty() {
            &[100_000, 1_000_000]
        } else {
            &sizes
        });
    }
}
