//! The FFT mechanisms (001 §4, App. K): 001 Table 1 rows under `(k, b) = (20, 100)`, the closed
//! form of Cor. J.1, and compile times up to the optimal FFT decoder at `n = 10⁴`.
//!
//! `cargo bench -p mfc-compiler --bench fft` prints every table; `-- table`, `-- closed`,
//! `-- time N…` (compile times for the given horizons, single participation), `-- replay M`
//! (device replay with blocks of `M` steps against the banded form) or `-- verify N…` (the
//! device's check of the recorded sensitivity, `mfc_runtime::verify`, at the given horizons,
//! single participation, one block) prints one.

use std::time::Instant;

use mfc_compiler::forms::fft::{FftKind, FftOptions, closed_form_loss, compile_fft};
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_formats::{
    BandedLowRank, Calibration, Decoder, ErrorSummary, F32Table, Header, Mechanism,
    Participation as StoredParticipation, Sensitivity, SensitivityMethod, Workload, encode_f32s,
};
use mfc_runtime::{ChaChaNoise, FftStream, Stream, verify};

fn table_one() {
    let participation = Participation::fixed_epoch_order(20, 100).expect("valid (k, b)");
    println!(
        "001 Table 1, prefix sums, (k, b) = (20, 100), n = 2000 (loss of the exact mechanism, encoder C_F)"
    );
    println!(
        "| mechanism | loss | paper | ratio | sensitivity method | shipped loss (f32) | seconds |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (stamps, kind, name, paper) in [
        (1, FftKind::Circulant, "FFT(n=2000)", 2.3e6),
        (2, FftKind::Circulant, "FFT(n=1000)×2", 1.8e6),
        (5, FftKind::Circulant, "FFT(n=400)×5", 1.6e6),
        (10, FftKind::Circulant, "FFT(n=200)×10", 1.9e6),
        (20, FftKind::Circulant, "FFT(n=100)×20", 2.5e6),
        (
            1,
            FftKind::OptimalDecoder,
            "FFT Optimal Decoder(n=2000)",
            2.2e6,
        ),
        (
            2,
            FftKind::OptimalDecoder,
            "FFT Optimal Decoder(n=1000)×2",
            1.5e6,
        ),
        (
            5,
            FftKind::OptimalDecoder,
            "FFT Optimal Decoder(n=400)×5",
            1.1e6,
        ),
        (
            10,
            FftKind::OptimalDecoder,
            "FFT Optimal Decoder(n=200)×10",
            1.2e6,
        ),
        (
            20,
            FftKind::OptimalDecoder,
            "FFT Optimal Decoder(n=100)×20",
            1.7e6,
        ),
    ] {
        let start = Instant::now();
        let compiled = compile_fft(&FftOptions {
            steps: 2000,
            stamps,
            kind,
            participation,
        })
        .expect("FFT mechanism compiles");
        println!(
            "| {name} | {:.4e} | {paper:.1e} | {:.3} | {:?} | {:.4e} | {:.1} |",
            compiled.paper_loss,
            compiled.paper_loss / paper,
            compiled.paper_sensitivity.1,
            compiled.loss(),
            start.elapsed().as_secs_f64()
        );
    }
}

fn closed_form() {
    println!(
        "001 Cor. J.1: closed form ‖v^DFT‖₁²/(4n) vs the compiled Mechanism 1 (single participation, f64)"
    );
    println!("| n | closed form | computed (paper convention) | rel. diff | shipped (f32, B̂†S) |");
    println!("|---|---|---|---|---|");
    for n in [16, 128, 1000, 2048, 10_000] {
        let compiled = compile_fft(&FftOptions {
            steps: n,
            stamps: 1,
            kind: FftKind::Circulant,
            participation: Participation::Single,
        })
        .expect("FFT mechanism compiles");
        let closed = closed_form_loss(n);
        println!(
            "| {n} | {closed:.8e} | {:.8e} | {:.1e} | {:.6e} |",
            compiled.paper_loss,
            (compiled.paper_loss - closed).abs() / closed,
            compiled.loss()
        );
    }
}

/// The mechanism of `kind` for `n` steps in one block, single participation.
fn single_block(n: usize, kind: FftKind) -> mfc_compiler::forms::fft::FftMechanism {
    compile_fft(&FftOptions {
        steps: n,
        stamps: 1,
        kind,
        participation: Participation::Single,
    })
    .expect("FFT mechanism compiles")
}

fn times(horizons: &[usize]) {
    println!("compile time, single participation (2 cores); sqrt(L) of what ships");
    println!(
        "| n | mechanism | seconds | sqrt(L) shipped | sqrt(L) exact | ‖M̂T̂ − I‖₁ | blob tables (bytes) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &n in horizons {
        for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
            let start = Instant::now();
            let compiled = single_block(n, kind);
            println!(
                "| {n} | {kind:?} | {:.2} | {:.4} | {:.4} | {:.1e} | {} |",
                start.elapsed().as_secs_f64(),
                compiled.sqrt_loss,
                compiled.paper_loss.sqrt(),
                compiled.generator_residual,
                4 * (compiled.kernel.len() + compiled.generator.len())
            );
        }
    }
}

/// A banded-plus-low-rank blob with `(h, r)` and arbitrary coefficients (replay cost does not
/// depend on their values).
fn banded_blob(n: usize, h: usize, r: usize) -> Vec<u8> {
    let diagonals = encode_f32s((0..n * h).map(|q| {
        let (i, k) = (q / h, q % h);
        if k > i {
            0.0
        } else if k == 0 {
            1.0
        } else {
            0.1
        }
    }));
    let left = encode_f32s((0..n * r).map(|q| 0.01 * (q % 7) as f32));
    let right = encode_f32s((0..n * r).map(|q| 0.01 * (q % 5) as f32));
    let mechanism = Mechanism {
        header: Header {
            workload: Workload::PrefixSum,
            steps: n as u32,
            participation: StoredParticipation::Single,
            neighbouring: mfc_formats::Neighbouring::AddOrRemove,
            sensitivity: Sensitivity {
                value: 1.0,
                method: SensitivityMethod::MaxColumnNorm,
            },
            clip_norm: 1.0,
            calibration: Some(Calibration {
                noise_multiplier: 1.0,
                target: None,
            }),
            error: ErrorSummary {
                sqrt_loss: 1.0,
                optimal_sqrt_loss: None,
                max_step_stddev: 1.0,
                final_step_stddev: 1.0,
            },
            generator: "bench",
        },
        decoder: Decoder::BandedLowRank(BandedLowRank {
            band: h as u32,
            rank: r as u32,
            diagonals: F32Table::new(&diagonals).expect("words"),
            left: F32Table::new(&left).expect("words"),
            right: F32Table::new(&right).expect("words"),
        }),
    };
    mechanism.to_vec().expect("valid blob")
}

/// Device-side replay (ChaCha20 noise, one thread): memory and time per step of the FFT forms
/// against the banded form, over `n = 2·block` steps.
fn replay(block: usize) {
    let n = 2 * block;
    let seed = [7u8; 32];
    println!("runtime replay, n = {n} (FFT: 2 blocks of m = {block}); ChaCha20 noise, 1 thread");
    println!(
        "| form | d | workspace floats | mean µs/step | first step of a block, ms | other steps, µs |"
    );
    println!("|---|---|---|---|---|---|");
    let options = BlobOptions {
        clip_norm: 1.0,
        calibration: Some(Calibration {
            noise_multiplier: 1.0,
            target: None,
        }),
        ..BlobOptions::default()
    };
    let mut blobs = vec![("banded (h, r) = (6, 5)".to_string(), banded_blob(n, 6, 5))];
    for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
        let compiled = compile_fft(&FftOptions {
            steps: n,
            stamps: 2,
            kind,
            participation: Participation::Single,
        })
        .expect("FFT mechanism compiles");
        blobs.push((
            format!("FFT {kind:?}"),
            mfc_compiler::forms::fft::encode(&compiled, &options)
                .expect("blob")
                .bytes,
        ));
    }
    for d in [1usize, 64, 1024] {
        for (name, bytes) in &blobs {
            let mechanism = Mechanism::from_bytes(bytes).expect("valid blob");
            let x = vec![0.01f32; d];
            let mut out = vec![0.0f32; d];
            let mut first = 0.0f64;
            let mut rest = 0.0f64;
            let floats;
            let total = Instant::now();
            if matches!(mechanism.decoder, Decoder::Fft(_)) {
                floats = FftStream::<ChaChaNoise>::workspace_len(&mechanism, d).expect("len");
                let mut workspace = vec![0.0f32; floats];
                let noise = ChaChaNoise::from_seed(seed).expect("seed");
                let mut stream =
                    FftStream::new(mechanism, d, &mut workspace, noise).expect("stream");
                for t in 0..n {
                    let start = Instant::now();
                    stream.step(&x, &mut out).expect("step");
                    let e = start.elapsed().as_secs_f64();
                    if t % block == 0 {
                        first += e
                    } else {
                        rest += e
                    }
                }
            } else {
                floats = Stream::<ChaChaNoise>::workspace_len(&mechanism, d).expect("len");
                let mut workspace = vec![0.0f32; floats];
                let noise = ChaChaNoise::from_seed(seed).expect("seed");
                let mut stream = Stream::new(mechanism, d, &mut workspace, noise).expect("stream");
                for t in 0..n {
                    let start = Instant::now();
                    stream.step(&x, &mut out).expect("step");
                    let e = start.elapsed().as_secs_f64();
                    if t % block == 0 {
                        first += e
                    } else {
                        rest += e
                    }
                }
            }
            let mean = total.elapsed().as_secs_f64() / n as f64;
            println!(
                "| {name} | {d} | {floats} | {:.2} | {:.3} | {:.2} |",
                mean * 1e6,
                first / 2.0 * 1e3,
                rest / (n - 2) as f64 * 1e6
            );
        }
    }
}

/// The device's check of every FFT blob at horizon `n` (one block): operations, scratch, host
/// time (median of 5), and how far the bound `U` is above the compiler's own value (before
/// `blob::certified` records `U`).
fn verify_times(horizons: &[usize]) {
    println!("Device verification (mfc_runtime::verify), single participation, s = 1");
    println!(
        "| kind | n | operations | scratch f64 | U / compiler − 1 | host seconds (median of 5) |"
    );
    println!("|---|---|---|---|---|---|");
    for &n in horizons {
        for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
            let compiled = single_block(n, kind);
            let bytes = mfc_compiler::forms::fft::encode(&compiled, &BlobOptions::default())
                .expect("blob")
                .bytes;
            let mechanism = Mechanism::from_bytes(&bytes).expect("valid blob");
            let mut scratch = vec![0.0; verify::scratch_len(&mechanism)];
            let mut seconds = Vec::new();
            let mut bound = f64::NAN;
            for _ in 0..5 {
                let start = Instant::now();
                bound = verify::sensitivity_bound(&mechanism, &mut scratch, u64::MAX)
                    .expect("the FFT blob verifies");
                seconds.push(start.elapsed().as_secs_f64());
            }
            seconds.sort_by(f64::total_cmp);
            println!(
                "| {kind:?} | {n} | {} | {} | {:.1e} | {:.3} |",
                verify::operations(&mechanism).unwrap_or(0),
                scratch.len(),
                bound / compiled.sensitivity - 1.0,
                seconds[2]
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("table") => table_one(),
        Some("closed") => closed_form(),
        Some("replay") => replay(args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000)),
        Some("verify") => {
            let horizons: Vec<usize> = args[1..].iter().filter_map(|a| a.parse().ok()).collect();
            verify_times(&horizons);
        }
        Some("time") => {
            let horizons: Vec<usize> = args[1..].iter().filter_map(|a| a.parse().ok()).collect();
            times(&horizons);
        }
        _ => {
            closed_form();
            table_one();
            times(&[512, 2048, 10_000]);
            replay(2000);
            verify_times(&[512, 2048, 10_000]);
        }
    }
}
