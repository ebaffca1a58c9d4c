//! The main job, end to end: compile a prefix-sum mechanism for n = 512 steps, calibrated for
//! (ε, δ) = (2, 1e-6), into an .mfc blob; then load the blob with the no_std runtime and stream
//! d = 4 counters through it, comparing the released prefix sums with the true ones.
//!
//! The unit of privacy is one step's row of 4 counts (one record per step, single
//! participation), clipped to ζ = 1 by `Stream::step`; the (ε, δ) is for adding or removing it.
//! The compile report printed first states it.
//!
//! Run: `cargo run --release -p mfc-examples --example end_to_end`

use mfc_compiler::forms::banded::compile_banded;
use mfc_compiler::forms::banded::compress::CompressOptions;
use mfc_compiler::optimize::single::OptimizeOptions;
use mfc_compiler::privacy::calibrate::noise_multiplier_for;
use mfc_compiler::report::CompileReport;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::Workload;
use mfc_formats::{Calibration, Mechanism, PrivacyTarget};
use mfc_runtime::{ChaChaNoise, Stream};

const STEPS: usize = 512;
const DIM: usize = 4;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. Compile (what `mfc compile --workload prefix --steps 512 --band 5 --rank 4
    //    --epsilon 2 --delta 1e-6 --out ...` does).
    let started = std::time::Instant::now();
    let workload = Workload::PrefixSum;
    let a = workload.matrix(STEPS)?;
    let compiled = compile_banded(
        a.as_ref(),
        5,
        4,
        &OptimizeOptions::default(),
        &CompressOptions::default(),
        &mut |_| {},
    )?;
    let (epsilon, delta) = (2.0, 1e-6);
    let calibration = Calibration {
        noise_multiplier: noise_multiplier_for(epsilon, delta).ok_or("calibration failed")?,
        target: Some(PrivacyTarget { epsilon, delta }),
    };
    let options = BlobOptions {
        clip_norm: 1.0,
        calibration: Some(calibration),
        ..BlobOptions::default()
    };
    let bytes = mfc_compiler::forms::banded::encode(&compiled, &workload, &options)?.bytes;
    let path = std::env::temp_dir().join("mfc-end-to-end.mfc");
    std::fs::write(&path, &bytes)?;
    let mut report = CompileReport::new("prefix".into(), &compiled, &options, bytes.len())?;
    report.seconds = started.elapsed().as_secs_f64();
    print!("{report}");
    println!("wrote {}\n", path.display());

    // 2. Replay on the "device": the blob is read in place, the state lives in one buffer.
    let bytes = std::fs::read(&path)?;
    let mechanism = Mechanism::from_bytes(&bytes)?;
    let mut workspace = vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&mechanism, DIM)?];
    // A fixed seed keeps this example reproducible; real use seeds from the OS or a device TRNG.
    let noise = ChaChaNoise::from_seed(*b"mfc end-to-end example seed 32b!")?;
    let mut stream = Stream::new(mechanism, DIM, &mut workspace, noise)?;

    let mut truth = [0.0f64; DIM];
    let mut released = [0.0f32; DIM];
    let mut squared_error = 0.0f64;
    println!("step  true prefix sums (4 counters)       released (DP)");
    for i in 0..STEPS {
        // Synthetic telemetry: each counter sees 0 or 1 event per step (norm ≤ 2 = ζ·2: clipped).
        let events: [f32; DIM] = core::array::from_fn(|c| ((i * (c + 3)) % 7 < 2) as u8 as f32);
        let norm = events.iter().map(|x| x * x).sum::<f32>().sqrt();
        let scale = if norm > 1.0 { 1.0 / norm } else { 1.0 };
        stream.step(&events, &mut released)?;
        for c in 0..DIM {
            truth[c] += f64::from(events[c] * scale);
            squared_error += (f64::from(released[c]) - truth[c]).powi(2);
        }
        if i < 3 || i % 128 == 127 {
            println!(
                "{:>4}  {:>7.2} {:>7.2} {:>7.2} {:>7.2}    {:>7.2} {:>7.2} {:>7.2} {:>7.2}",
                i + 1,
                truth[0],
                truth[1],
                truth[2],
                truth[3],
                released[0],
                released[1],
                released[2],
                released[3]
            );
        }
    }
    let measured = (squared_error / (STEPS * DIM) as f64).sqrt();
    let predicted = calibration.noise_multiplier * compiled.sqrt_loss / (STEPS as f64).sqrt();
    println!(
        "\nRMSE per step and counter: measured {measured:.3}, predicted σ·ζ·sqrt(L/n) = {predicted:.3}"
    );
    Ok(())
}
