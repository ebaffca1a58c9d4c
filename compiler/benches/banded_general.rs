//! Release benchmark of the general banded optimizer (`mfc_compiler::optimize::banded::general`,
//! issue 31) and of the BLT fit under min-separation: the acceptance table of BENCHMARKS,
//! "General BandMF at training scale", and the single measurements it is made of.
//!
//! `cargo bench -p mfc-compiler --bench banded_general -- table [REPS] [--jax PYTHON] [--slow]` prints
//! the table: each setting compiled as `mfc compile --form bandmf` (general) or `--form blt`
//! compiles it (`compile_bandmf`, `optimize_blt` with the rounding and loss of what ships), and
//! jax_privacy on the same setting (`tools/jax_privacy_bandmf_bench.py` run by `PYTHON`,
//! default `/work/venv-bandmf/bin/python`; skipped with `--jax none`; at n = 2000 and 2048 only
//! with `--slow`, where it takes minutes), interleaved: repetition
//! after repetition every implementation runs once per setting, and the table holds medians.
//! Wall clock beside CPU seconds (the process's user + system time, all threads;
//! jax_privacy's own `time.process_time`); the load average is printed before every
//! repetition. The scale rows (n = 10⁴, 10⁵, `--bands auto`) run once each in a child process
//! (`compile`, below) whose peak resident set (`VmHWM`) is its memory.
//!
//! Single measurements (stderr shows progress):
//!
//! - `eval N BANDS [REPS]`: one evaluation of `‖S C⁻¹‖²` and its gradient, seconds;
//! - `compile N K B [BANDS|auto]`: the general BandMF compile under min-separation `(K, B)`,
//!   prefix sum (prints `VmHWM`);
//! - `blt N K B M`: a BLT fit under min-separation.

use std::process::Command;
use std::time::Instant;

use mfc_compiler::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use mfc_compiler::optimize::banded::general::frobenius::{Workspace, frobenius};
use mfc_compiler::optimize::banded::general::operator::{BandRows, Operator};
use mfc_compiler::optimize::banded::general::{GeneralOptions, SECONDS_BUDGET};
use mfc_compiler::optimize::blt::optimize_blt;
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::workload::Workload;

/// User plus system CPU seconds of this process so far (all threads), from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 1/100 s); `NaN` elsewhere.
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

/// This process's peak resident set, MB (`VmHWM` of `/proc/self/status`).
fn peak_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One timed run: `√L`, wall and CPU seconds, and a note.
#[derive(Debug, Clone)]
struct Measure {
    sqrt_loss: f64,
    wall: f64,
    cpu: f64,
    note: String,
}

fn timed(f: impl FnOnce() -> (f64, String)) -> Measure {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let (sqrt_loss, note) = f();
    Measure {
        sqrt_loss,
        wall: wall.elapsed().as_secs_f64(),
        cpu: cpu_seconds() - cpu,
        note,
    }
}

fn min_separation(k: usize, b: usize) -> Participation {
    Participation::min_separation(k, b).expect("schema")
}

/// The general BandMF compile (prefix sum, min-separation `(k, b)`), as `mfc compile --form
/// bandmf --bands …` runs it (with its iteration budget).
fn general(n: usize, k: usize, b: usize, bands: Bands) -> Measure {
    timed(|| {
        let mut last = Instant::now();
        let out = compile_bandmf(
            &Workload::PrefixSum,
            n,
            &BandMfOptions {
                participation: min_separation(k, b),
                kind: BandMfKind::General,
                bands,
                // The iteration budget `mfc compile` gives it.
                general: GeneralOptions {
                    seconds_budget: Some(SECONDS_BUDGET),
                    ..GeneralOptions::default()
                },
                ..BandMfOptions::default()
            },
            &mut |what, loss| {
                if last.elapsed().as_secs_f64() >= 10.0 {
                    eprintln!("    {what}: √F {:.4}", loss.sqrt());
                    last = Instant::now();
                }
            },
        )
        .expect("general banded");
        let toeplitz = out.toeplitz_sqrt_loss.unwrap_or(f64::NAN);
        (
            out.sqrt_loss,
            format!(
                "b̂ {}; banded Toeplitz {toeplitz:.4} ({:+.2}%)",
                out.bands,
                100.0 * (out.sqrt_loss / toeplitz - 1.0)
            ),
        )
    })
}

/// The BLT fit under min-separation, `√L` of what ships (`f32` parameters).
fn blt(n: usize, k: usize, b: usize, m: usize) -> Measure {
    timed(|| {
        let p = min_separation(k, b);
        let blt = optimize_blt(n, m, &p).expect("blt");
        (blt.rounded_to_f32().error(n, &p).loss.sqrt(), String::new())
    })
}

/// A jax_privacy run of `tools/jax_privacy_bandmf_bench.py` (its own timing).
fn jax(python: &str, args: &[String]) -> Measure {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tools/jax_privacy_bandmf_bench.py"
    );
    let out = Command::new(python).arg(script).args(args).output();
    let parsed = out.ok().and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        serde_json::from_str::<serde_json::Value>(text.lines().last()?).ok()
    });
    match parsed {
        Some(v) => Measure {
            sqrt_loss: v["sqrt_l"].as_f64().unwrap_or(f64::NAN),
            wall: v["wall"].as_f64().unwrap_or(f64::NAN),
            cpu: v["cpu"].as_f64().unwrap_or(f64::NAN),
            note: v["what"].as_str().unwrap_or("").to_string(),
        },
        None => Measure {
            sqrt_loss: f64::NAN,
            wall: f64::NAN,
            cpu: f64::NAN,
            note: "jax_privacy did not run".into(),
        },
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}

/// One implementation of a row: its name, how to run it, its measurements so far.
type Run = (String, Box<dyn Fn() -> Measure>, Vec<Measure>);

/// A row of the table: its label, the target, and the runs of each implementation.
struct Row {
    setting: String,
    target: String,
    runs: Vec<Run>,
}

fn table(args: &[String]) {
    let reps: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(3);
    let python = args
        .iter()
        .position(|a| a == "--jax")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| "/work/venv-bandmf/bin/python".into());
    let with_jax = python != "none";
    // jax_privacy's banded.optimize takes minutes at n = 2000 and 2048: only with --slow.
    let slow = args.iter().any(|a| a == "--slow");
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let settings: [(usize, usize, usize, usize, &str); 3] = [
        (512, 4, 128, 128, "√L ≤ 130.38 in ≤ 4 s"),
        (2000, 20, 100, 100, "√L ≤ 865.27 in ≤ 30 s"),
        (2048, 8, 256, 256, "√L ≤ 460.70 in ≤ 60 s"),
    ];
    let mut rows: Vec<Row> = Vec::new();
    for (n, k, b, bands, target) in settings {
        let mut runs: Vec<Run> = vec![(
            "mfc general BandMF".into(),
            Box::new(move || general(n, k, b, Bands::Fixed(bands))),
            vec![],
        )];
        if with_jax && (n == 512 || slow) {
            let (py, a) = (
                python.clone(),
                s(&[
                    "banded",
                    &n.to_string(),
                    &k.to_string(),
                    &b.to_string(),
                    &bands.to_string(),
                ]),
            );
            runs.push((
                "jax_privacy banded.optimize".into(),
                Box::new(move || jax(&py, &a)),
                vec![],
            ));
        }
        rows.push(Row {
            setting: format!("n = {n}, ({k}, {b}), b̂ = {bands}"),
            target: target.into(),
            runs,
        });
    }
    let mut runs: Vec<Run> = vec![("mfc BLT".into(), Box::new(|| blt(2000, 20, 100, 4)), vec![])];
    if with_jax {
        let py = python.clone();
        runs.push((
            "jax_privacy BLT".into(),
            Box::new(move || jax(&py, &s(&["blt", "2000", "20", "100", "4"]))),
            vec![],
        ));
    }
    rows.push(Row {
        setting: "BLT, n = 2000, (20, 100), 4 buffers".into(),
        target: "√L ≤ 950.75 in ≤ 3 s".into(),
        runs,
    });
    println!("banded_general table: {reps} interleaved repetitions");
    for rep in 0..reps {
        eprintln!("repetition {}: load average {}", rep + 1, load());
        println!("repetition {}: load average at start {}", rep + 1, load());
        for row in &mut rows {
            for (name, run, measures) in &mut row.runs {
                let m = run();
                eprintln!(
                    "  {} / {name}: √L {:.4}, {:.2} s wall, {:.2} s cpu {}",
                    row.setting, m.sqrt_loss, m.wall, m.cpu, m.note
                );
                measures.push(m);
            }
        }
    }
    println!("load average at end {}\n", load());
    println!("| setting | target | implementation | √L | wall s | CPU s | note |");
    println!("|---|---|---|---|---|---|---|");
    for row in &rows {
        for (name, _, measures) in &row.runs {
            let get = |f: fn(&Measure) -> f64| median(measures.iter().map(f).collect());
            println!(
                "| {} | {} | {name} | {:.4} | {:.2} | {:.2} | {} |",
                row.setting,
                row.target,
                get(|m| m.sqrt_loss),
                get(|m| m.wall),
                get(|m| m.cpu),
                measures.last().map_or("", |m| m.note.as_str())
            );
        }
    }
    let me = std::env::current_exe().expect("this binary");
    for n in [10_000usize, 100_000] {
        let (k, b) = (10, n / 10);
        let out = Command::new(&me)
            .args([
                "compile",
                &n.to_string(),
                &k.to_string(),
                &b.to_string(),
                "auto",
            ])
            .output()
            .expect("child");
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        println!(
            "| n = {n}, (10, {b}), bands auto | ≤ 5 min, ≤ 4 GB, below Toeplitz | mfc general BandMF | {line} |"
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    match args.first().map(String::as_str) {
        Some("table") => table(&args[1..]),
        Some("eval") => {
            let (n, h, reps) = (num(1, 512), num(2, 128), num(3, 5));
            let op = Operator::new(&Workload::PrefixSum, n).expect("operator");
            let c = BandRows::toeplitz(
                &mfc_compiler::optimize::toeplitz::square_root_coefficients(h),
                n,
            );
            let mut ws = Workspace::default();
            let mut g = vec![0.0; n * h];
            let (t, cpu) = (Instant::now(), cpu_seconds());
            let mut best = f64::INFINITY;
            let mut f = 0.0;
            for _ in 0..reps {
                let one = Instant::now();
                f = frobenius(&op, &c, &mut ws, None, Some(&mut g)).expect("finite");
                best = best.min(one.elapsed().as_secs_f64());
            }
            println!(
                "n {n} b̂ {h}: ‖S C⁻¹‖² = {f:.6e}; per evaluation {:.4} s wall, {:.4} s cpu, fastest {best:.4} s",
                t.elapsed().as_secs_f64() / reps as f64,
                (cpu_seconds() - cpu) / reps as f64
            );
        }
        Some("compile") => {
            let (n, k, b) = (num(1, 10_000), num(2, 10), num(3, 1000));
            let bands = match args.get(4).map(String::as_str) {
                Some("auto") | None => Bands::Auto { max: 256 },
                Some(x) => Bands::Fixed(x.parse().expect("bands")),
            };
            let m = general(n, k, b, bands);
            println!(
                "√L {:.4}, {}; {:.1} s wall, {:.1} s CPU, peak {:.0} MB; load {}",
                m.sqrt_loss,
                m.note,
                m.wall,
                m.cpu,
                peak_mb(),
                load()
            );
        }
        Some("blt") => {
            let (n, k, b, m) = (num(1, 2000), num(2, 20), num(3, 100), num(4, 4));
            let measure = blt(n, k, b, m);
            println!(
                "BLT n {n} ({k}, {b}) {m} buffers: √L {:.4}, {:.2} s wall, {:.2} s cpu",
                measure.sqrt_loss, measure.wall, measure.cpu
            );
        }
        _ => eprintln!(
            "usage: table [REPS] [--jax PYTHON|none] [--slow] | eval N BANDS [REPS] | compile N K B [BANDS|auto] | blt N K B M"
        ),
    }
}
