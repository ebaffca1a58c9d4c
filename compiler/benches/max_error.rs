//! The acceptance tables of issue 32 (max error), printed as markdown: every max error is
//! recomputed from what ships (the stored `f32` coefficients and the sensitivity of exactly
//! them), never taken from an optimizer's own value.
//!
//! - `dense [n[:h,r[,iterations]]...]`: prefix sums, single participation: the certified
//!   max-error optimum `γ₂` (primal, dual bound, relative gap), the square-root factorization's
//!   max error beside it, and the shipped `(h, r)` form's max error (measured densely from its
//!   stored coefficients by [`measure_decoder`](mfc_compiler::max_error::measure_decoder)).
//!   Default sizes 256, 1024, 4096 with `(h, r)` from [`default_band_rank`]; `n:h,r` picks the
//!   form (several `:h,r` for several rows from one optimum), `,iterations` the refine budget.
//!   Its `s` and `CPU s` columns read `optimum + form`: the optimum's seconds (shared by the
//!   rows of one `n`), then the `(h, r)` compile's from that optimum.
//! - `blt [n]`: BLTs with 1–5 buffers fitted for the max error, finite horizon and unbounded,
//!   default `n = 2048`, measured from the stored parameters
//!   ([`compile_max_error_blt`](mfc_compiler::max_error::blt::compile_max_error_blt)).
//! - `minsep`: min-separation `(k, b) = (4, 128)`, `n = 512`: BandMF (Toeplitz and general,
//!   128 bands) and BLT (1–5 buffers), each fitted for the max error and for the total loss,
//!   both metrics per row.
//!
//! Run: `cargo bench -p mfc-compiler --bench max_error -- dense 256 1024`.

use std::time::Instant;

use mfc_compiler::max_error::banded_low_rank::{
    BandedMaxErrorOptions, compile_banded_max_error_from,
};
use mfc_compiler::max_error::dense::{MaxErrorOptions, optimize_max_error};
use mfc_compiler::max_error::max_step_stddev;
use mfc_compiler::optimize::toeplitz::{square_root_coefficients, toeplitz_error};
use mfc_compiler::workload::Workload;

/// User plus system CPU seconds of this process so far (all threads), from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 1/100 s, Linux's `USER_HZ`); `NaN` elsewhere.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(f64::NAN)
}

/// Wall and CPU seconds since a start taken with [`start`].
fn since((wall, cpu): (Instant, f64)) -> (f64, f64) {
    (wall.elapsed().as_secs_f64(), cpu_seconds() - cpu)
}

fn start() -> (Instant, f64) {
    (Instant::now(), cpu_seconds())
}

/// The `(h, r)` shipped at `n` when the command line names none.
fn default_band_rank(n: usize) -> (usize, usize) {
    match n {
        0..=256 => (4, 4),
        257..=1024 => (5, 5),
        _ => (7, 5),
    }
}

/// One `dense` argument: `n`, or `n:h,r[,iterations]` (repeatable after `n`).
struct DenseSize {
    n: usize,
    forms: Vec<(usize, usize, usize)>,
}

fn parse_dense(arg: &str) -> Option<DenseSize> {
    let mut parts = arg.split(':');
    let n: usize = parts.next()?.parse().ok()?;
    let default_iterations = BandedMaxErrorOptions::default()
        .compression
        .refine_iterations;
    let mut forms = Vec::new();
    for part in parts {
        let v: Vec<usize> = part
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        match v[..] {
            [h, r] => forms.push((h, r, default_iterations)),
            [h, r, i] => forms.push((h, r, i)),
            _ => return None,
        }
    }
    if forms.is_empty() {
        let (h, r) = default_band_rank(n);
        forms.push((h, r, default_iterations));
    }
    Some(DenseSize { n, forms })
}

fn dense(sizes: &[DenseSize]) {
    println!(
        "| n | γ₂ primal | dual bound | rel. gap | square root | √ above γ₂ | (h, r), refine its. | shipped (h, r) | above γ₂ | s | CPU s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for size in sizes {
        let n = size.n;
        let a = Workload::PrefixSum.matrix(n).expect("the prefix sum");
        let t = start();
        let optimum = optimize_max_error(a.as_ref(), &MaxErrorOptions::default(), &mut |p| {
            eprintln!(
                "  n = {n}, iteration {}: primal {:.6} (product bound {:.6}), dual {:.6}, gap {:.2e} at {:.1} s",
                p.iteration,
                p.primal,
                p.product_bound,
                p.dual,
                p.relative_gap,
                t.0.elapsed().as_secs_f64()
            )
        })
        .expect("the dense optimum");
        let (optimum_wall, optimum_cpu) = since(t);
        eprintln!(
            "  n = {n}: optimum {:.6} in {optimum_wall:.1} s ({optimum_cpu:.1} CPU s)",
            optimum.max_error
        );
        let sqrt =
            max_step_stddev(&toeplitz_error(&square_root_coefficients(n), n).per_step_variance);
        for &(h, r, iterations) in &size.forms {
            let mut options = BandedMaxErrorOptions::default();
            options.compression.refine_iterations = iterations;
            let t = start();
            let c = compile_banded_max_error_from(a.as_ref(), optimum.clone(), h, r, &options)
                .expect("the (h, r) form");
            let (wall, cpu) = since(t);
            println!(
                "| {n} | {:.4} | {:.4} | {:.1e} | {sqrt:.4} | {:+.2}% | ({h}, {r}), {iterations} | {:.4} | {:+.2}% | {:.0} + {wall:.0} | {:.0} + {cpu:.0} |",
                optimum.max_error,
                optimum.dual_bound,
                optimum.relative_gap,
                100.0 * (sqrt / optimum.max_error - 1.0),
                c.measured.max_error,
                100.0 * (c.measured.max_error / optimum.max_error - 1.0),
                optimum_wall,
                optimum_cpu,
            );
            eprintln!(
                "  n = {n} ({h}, {r}): stages {:?}, shipped sensitivity {:.9} ({:?})",
                c.stages, c.measured.sensitivity, c.measured.method
            );
        }
    }
}

/// Wall and CPU seconds of each member of a family fitted one buffer count after the other,
/// from the `fitted(m)` callbacks.
struct Laps {
    last: (Instant, f64),
    laps: Vec<(f64, f64)>,
}

impl Laps {
    fn new() -> Self {
        Self {
            last: start(),
            laps: Vec::new(),
        }
    }

    fn lap(&mut self) {
        self.laps.push(since(self.last));
        self.last = start();
    }
}

/// `yes`, or the first buffer count whose max error exceeds the one before.
fn monotone(values: &[f64]) -> String {
    match values.windows(2).position(|w| w[1] > w[0]) {
        None => "yes".into(),
        Some(i) => format!(
            "no: m = {} has {:.6} > m = {}'s {:.6}",
            i + 2,
            values[i + 1],
            i + 1,
            values[i]
        ),
    }
}

fn blt(n: usize) {
    use mfc_compiler::forms::blt::compile_blt;
    use mfc_compiler::max_error::blt::{
        BltHorizon, compile_max_error_blt, optimize_blt_max_error_family,
    };
    use mfc_compiler::optimize::blt::optimize_blt_family;
    use mfc_compiler::privacy::participation::Participation;
    const BUFFERS: usize = 5;
    let p = Participation::Single;
    // The total-loss fits, for the max error mfc shipped before issue 32.
    let mut total_laps = Laps::new();
    let total = optimize_blt_family(n, BUFFERS, &p, &mut |_| total_laps.lap()).expect("total fit");
    let total_max: Vec<f64> = total
        .iter()
        .map(|b| {
            compile_blt(b, n, n, &p)
                .expect("the total-loss BLT")
                .horizon_error
                .max_step_stddev
        })
        .collect();
    let mut rows = Vec::new();
    for horizon in [BltHorizon::Finite, BltHorizon::Unbounded] {
        let mut laps = Laps::new();
        let family = optimize_blt_max_error_family(n, BUFFERS, &p, horizon, &mut |m| {
            laps.lap();
            eprintln!("  {horizon:?}: m = {m} fitted");
        })
        .expect("the max-error family");
        let compiled: Vec<_> = family
            .iter()
            .map(|b| compile_max_error_blt(b, n, &p, horizon).expect("the max-error BLT"))
            .collect();
        rows.push((horizon, compiled, laps.laps));
    }
    println!(
        "| m | finite: max error | √L | s | CPU s | unbounded: max error over n (sens_∞) | limit max error/√N | s | CPU s | total-loss fit's max error (finite) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let (finite, unbounded) = (&rows[0], &rows[1]);
    for (m, total_max) in total_max.iter().enumerate() {
        let (f, u) = (&finite.1[m], &unbounded.1[m]);
        println!(
            "| {} | {:.4} | {:.4} | {:.0} | {:.0} | {:.4} | {} | {:.0} | {:.0} | {:.4} |",
            m + 1,
            f.max_error,
            f.compiled.sqrt_loss,
            finite.2[m].0,
            finite.2[m].1,
            u.max_error,
            u.limit_growth_rate
                .map_or_else(|| "—".into(), |g| format!("{g:.4}")),
            unbounded.2[m].0,
            unbounded.2[m].1,
            total_max,
        );
    }
    for (horizon, compiled, _) in &rows {
        let values: Vec<f64> = compiled.iter().map(|c| c.max_error).collect();
        println!(
            "\n{horizon:?}, n = {n}: monotone in m: {}",
            monotone(&values)
        );
    }
}

/// One row of the `minsep` table.
struct MinSepRow {
    form: String,
    objective: &'static str,
    max_error: f64,
    sqrt_loss: f64,
    method: mfc_formats::SensitivityMethod,
    seconds: (f64, f64),
}

fn minsep() {
    use mfc_compiler::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
    use mfc_compiler::forms::blt::compile_blt;
    use mfc_compiler::max_error::bandmf::{BandMfMaxErrorOptions, compile_bandmf_max_error};
    use mfc_compiler::max_error::blt::{
        BltHorizon, compile_max_error_blt, optimize_blt_max_error_family,
    };
    use mfc_compiler::optimize::blt::optimize_blt_family;
    use mfc_compiler::privacy::participation::Participation;
    const N: usize = 512;
    const BANDS: usize = 128;
    const BUFFERS: usize = 5;
    let p = Participation::min_separation(4, 128).expect("(4, 128)");
    let mut rows = Vec::new();
    for kind in [BandMfKind::Toeplitz, BandMfKind::General] {
        let form = format!("BandMF {kind:?}, {BANDS} bands");
        let t = start();
        let max = compile_bandmf_max_error(
            &Workload::PrefixSum,
            N,
            &BandMfMaxErrorOptions {
                participation: p,
                kind,
                bands: Bands::Fixed(BANDS),
                ..Default::default()
            },
        )
        .expect("BandMF for the max error");
        rows.push(MinSepRow {
            form: form.clone(),
            objective: "max",
            max_error: max.max_error,
            sqrt_loss: max.compiled.sqrt_loss,
            method: max.compiled.sensitivity_method,
            seconds: since(t),
        });
        eprintln!("  {form}, max: done");
        let t = start();
        let total = compile_bandmf(
            &Workload::PrefixSum,
            N,
            &BandMfOptions {
                participation: p,
                kind,
                bands: Bands::Fixed(BANDS),
                ..Default::default()
            },
            &mut |_, _| {},
        )
        .expect("BandMF for the total loss");
        rows.push(MinSepRow {
            form,
            objective: "total",
            max_error: max_step_stddev(&total.per_step_variance),
            sqrt_loss: total.sqrt_loss,
            method: total.sensitivity_method,
            seconds: since(t),
        });
    }
    let mut laps = Laps::new();
    let family = optimize_blt_max_error_family(N, BUFFERS, &p, BltHorizon::Finite, &mut |m| {
        laps.lap();
        eprintln!("  BLT max: m = {m} fitted");
    })
    .expect("the max-error BLTs");
    let max_rows: Vec<MinSepRow> = family
        .iter()
        .zip(&laps.laps)
        .enumerate()
        .map(|(m, (b, &seconds))| {
            let c = compile_max_error_blt(b, N, &p, BltHorizon::Finite).expect("BLT");
            MinSepRow {
                form: format!("BLT, {} buffers", m + 1),
                objective: "max",
                max_error: c.max_error,
                sqrt_loss: c.compiled.sqrt_loss,
                method: c.compiled.sensitivity_method,
                seconds,
            }
        })
        .collect();
    let mut laps = Laps::new();
    let family = optimize_blt_family(N, BUFFERS, &p, &mut |_| laps.lap()).expect("total BLTs");
    let total_rows: Vec<MinSepRow> = family
        .iter()
        .zip(&laps.laps)
        .enumerate()
        .map(|(m, (b, &seconds))| {
            let c = compile_blt(b, N, N, &p).expect("BLT");
            MinSepRow {
                form: format!("BLT, {} buffers", m + 1),
                objective: "total",
                max_error: c.horizon_error.max_step_stddev,
                sqrt_loss: c.sqrt_loss,
                method: c.sensitivity_method,
                seconds,
            }
        })
        .collect();
    for (max, total) in max_rows.into_iter().zip(total_rows) {
        rows.push(max);
        rows.push(total);
    }
    println!("| form | optimized for | max error | √L | sensitivity | s | CPU s |");
    println!("|---|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {:.4} | {:.4} | {:?} | {:.1} | {:.1} |",
            row.form,
            row.objective,
            row.max_error,
            row.sqrt_loss,
            row.method,
            row.seconds.0,
            row.seconds.1
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let section = args.first().map(String::as_str).unwrap_or("dense");
    let rest = &args[args.len().min(1)..];
    match section {
        "dense" => {
            let mut sizes: Vec<DenseSize> = Vec::new();
            for arg in rest {
                match parse_dense(arg) {
                    Some(size) => sizes.push(size),
                    None => {
                        eprintln!("dense: expected n or n:h,r[,iterations], got {arg}");
                        std::process::exit(2);
                    }
                }
            }
            if sizes.is_empty() {
                sizes = [256, 1024, 4096]
                    .iter()
                    .filter_map(|n| parse_dense(&n.to_string()))
                    .collect();
            }
            dense(&sizes)
        }
        "blt" => blt(rest.first().and_then(|a| a.parse().ok()).unwrap_or(2048)),
        "minsep" => minsep(),
        other => {
            eprintln!("unknown section {other}: expected dense, blt or minsep");
            std::process::exit(2);
        }
    }
}
