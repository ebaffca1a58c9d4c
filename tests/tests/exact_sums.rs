//! Exact sums at any horizon: a constant input of 0.3 (d = 1) streamed for 10⁶ steps through
//! every form with a horizon that long — a compiled BLT blob (4 buffers, optimized for 64 steps,
//! horizon 10⁶), a compiled BandMF blob (banded Toeplitz encoder, 4 bands, 10⁶ steps), a banded
//! blob of n = 10⁶ and an FFT blob of 1000 blocks of 1000 — releases, at every step, the exact
//! sum within 4 ulps. So do the three blobs the drift firmware streams under QEMU
//! (`examples/firmware/drift*.mfc`), with the firmware's key: the device releases the same bits
//! (`tests/tests/firmware.rs`), so its releases are exact too.
//!
//! "The exact sum" `R_t` is the sum, in exact arithmetic, of the values the stream adds: the
//! inputs (0.3 in `f32`, so `t` of them are `t·10 066 330·2⁻²⁵`) and the noise the stream
//! draws, taken as the `f32` values it computes (`σζ·sens·w_t`, with `w_t` of the BLT recursion
//! or of BandMF's forward substitution `w = C⁻¹z` replayed here in the runtime's `f32`
//! operations; the banded and FFT noise `σζ·sens·(B̂z)_t` from a second stream of the same blob
//! and seed stepped with `step_noise`). Sums of up to 10⁶ such terms are exact enough in `f64`
//! (an error below 10⁻⁴ ulps of `f32`). With `σ = 10⁻⁶` the noise is small and the bound is in
//! ulps, and the uncompensated `f32` sum the runtime had before (replayed here) drifts by
//! hundreds of ulps — the bias the issue measured (299 546.7 for 300 000). With a realistic
//! `σ = 1` the error is stated in units of the step's noise standard deviation: below 10⁻⁴ of
//! it, where the uncompensated sum is off by more than 10⁻⁴ of it at 10⁶ steps.

use std::path::PathBuf;

use mfc_compiler::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use mfc_compiler::forms::blt::compile_blt;
use mfc_compiler::optimize::blt::optimize_blt;
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::Workload as CompilerWorkload;
use mfc_formats::{
    BandedLowRank, Calibration, Decoder, ErrorSummary, F32Table, Fft, FftKind, Header, Mechanism,
    Neighbouring, Sensitivity, SensitivityMethod, Validated, Workload, encode_f32s,
};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{ChaChaNoise, ReleaseCounter, Replay, epoch_noise};

#[path = "../../examples/firmware/src/scenario.rs"]
#[allow(dead_code)]
mod scenario;

const STEPS: u32 = 1_000_000;
const INPUT: f32 = 0.3;
const SEED: [u8; 32] = *b"exact sums at any horizon, seed!";

/// The noise source of this test's own blobs.
fn seeded() -> ChaChaNoise {
    ChaChaNoise::from_seed(SEED).unwrap()
}

/// The drift firmware's noise source: epoch 1 of its root secret.
fn firmware_key() -> ChaChaNoise {
    let counter = ReleaseCounter::FACTORY.cold_start().unwrap();
    epoch_noise(&scenario::ROOT_SECRET, &counter).unwrap()
}

/// A blob checked in beside the firmware.
fn firmware_blob(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/firmware")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The distance between `x` and the next `f32` away from zero: one ulp at `x`.
fn ulp(x: f64) -> f64 {
    let y = (x.abs() as f32).max(f32::MIN_POSITIVE);
    f64::from(y.next_up()) - f64::from(y)
}

/// `t` inputs of 0.3f32, exactly: `0.3f32 = 10 066 330·2⁻²⁵`.
fn input_sum(t: u64) -> f64 {
    assert_eq!(f64::from(INPUT), 10_066_330.0 / 33_554_432.0);
    (t * 10_066_330) as f64 / 33_554_432.0
}

/// The largest error over the run, in ulps of the exact sum, and the step where it occurred.
struct Worst {
    ulps: f64,
    step: u32,
}

impl Worst {
    fn new() -> Self {
        Self { ulps: 0.0, step: 0 }
    }

    fn record(&mut self, step: u32, released: f32, exact: f64) {
        let ulps = (f64::from(released) - exact).abs() / ulp(exact);
        if ulps > self.ulps {
            (self.ulps, self.step) = (ulps, step);
        }
    }

    fn check(&self, what: &str) {
        eprintln!("{what}: worst {:.3} ulps at step {}", self.ulps, self.step);
        assert!(
            self.ulps <= 4.0,
            "{what}: {:.3} ulps at step {}",
            self.ulps,
            self.step
        );
    }
}

fn calibration(sigma: f64) -> BlobOptions {
    BlobOptions {
        clip_norm: 1.0,
        calibration: Some(Calibration {
            noise_multiplier: sigma,
            target: None,
        }),
        ..BlobOptions::default()
    }
}

/// A BLT blob of 4 buffers optimized for 64 steps, with its sensitivity over 10⁶ steps (the
/// drift firmware's `drift.mfc` with `σ = 10⁻⁶`).
fn blt_blob(sigma: f64) -> Vec<u8> {
    let single = Participation::Single;
    let blt = optimize_blt(64, 4, &single).unwrap();
    let compiled = compile_blt(&blt, 64, STEPS as usize, &single).unwrap();
    mfc_compiler::forms::blt::encode(&compiled, &calibration(sigma))
        .unwrap()
        .bytes
}

/// A BandMF blob: a banded Toeplitz encoder of 4 bands optimized for the prefix sum over 10⁶
/// steps (`drift-bandmf.mfc` with `σ = 10⁻⁶`).
fn bandmf_blob(sigma: f64) -> Vec<u8> {
    let options = BandMfOptions {
        kind: BandMfKind::Toeplitz,
        bands: Bands::Fixed(4),
        ..BandMfOptions::default()
    };
    let workload = CompilerWorkload::PrefixSum;
    let compiled = compile_bandmf(&workload, STEPS as usize, &options, &mut |_, _| {}).unwrap();
    mfc_compiler::forms::bandmf::encode(&compiled, &workload, &calibration(sigma))
        .unwrap()
        .bytes
}

/// `σ·ζ·sens` as the runtime applies it: each factor rounded up to `f32`, the product, 3 ulps
/// up (`runtime/src/stream.rs`, `noise_scale`).
fn noise_scale(m: &Mechanism<'_>) -> f32 {
    let up = |x: f64| {
        let y = x as f32;
        if f64::from(y) < x { y.next_up() } else { y }
    };
    let h = m.header;
    let sigma = h.calibration.unwrap().noise_multiplier;
    let product = up(sigma) * up(h.clip_norm) * up(h.sensitivity.value);
    f32::from_bits(product.to_bits() + 3)
}

/// The noise `w_t` a BLT or BandMF stream adds to its running sum at step `t` (steps taken in
/// order), replayed from the blob's coefficients and the standard normals `z_t` of `draws` in
/// the runtime's `f32` operations — not by the runtime's stream.
fn replayed_noise<'m>(
    m: &Mechanism<'m>,
    mut draws: ChaChaNoise,
) -> Box<dyn FnMut(u32) -> f32 + 'm> {
    match m.decoder {
        // w_t = z_t + Σ ω_i s_i;  s_i ← θ_i s_i + z_t.
        Decoder::Blt(d) => {
            let (theta, omega): (Vec<f32>, Vec<f32>) =
                (d.theta.iter().collect(), d.omega.iter().collect());
            let mut buffers = vec![0.0f32; theta.len()];
            Box::new(move |t| {
                let mut z = [0.0f32];
                draws.fill_standard_normal(u64::from(t), 0, &mut z);
                let mut w = z[0];
                for ((s, &th), &om) in buffers.iter_mut().zip(&theta).zip(&omega) {
                    w += om * *s;
                    *s = th * *s + z[0];
                }
                w
            })
        }
        // w_t = (z_t − Σ_{l=1}^{min(t, b̂−1)} C[t, t−l] w_{t−l}) / C[t, t].
        Decoder::BandMf(d) => {
            let mut past: Vec<f32> = Vec::new();
            Box::new(move |t| {
                let row: Vec<f32> = d.row(t as usize).unwrap().iter().collect();
                let mut z = [0.0f32];
                draws.fill_standard_normal(u64::from(t), 0, &mut z);
                let mut w = z[0];
                for (l, &c) in row.iter().enumerate().skip(1) {
                    if l <= t as usize {
                        w -= c * past[t as usize - l];
                    }
                }
                w /= row[0];
                past.push(w);
                w
            })
        }
        _ => panic!("a BLT or BandMF blob"),
    }
}

/// Streams 0.3 for the horizon of `bytes` (a BLT or BandMF blob, whose streams add their noise
/// to the running sum) with noise source `noise()`; returns the worst error in ulps of the exact
/// sum and, per step `t` in `check_at`, `(released, exact, plain)` where `plain` is the
/// uncompensated `f32` sum of the same terms (what the runtime released before).
fn run_summed_noise(
    bytes: &[u8],
    noise: fn() -> ChaChaNoise,
    check_at: &[u32],
) -> (Worst, Vec<(f32, f64, f32)>) {
    let m = Mechanism::from_bytes(bytes).unwrap();
    let scale = noise_scale(&m);
    let mut w_of = replayed_noise(&m, noise());
    let mut workspace = vec![0.0f32; Replay::workspace_len(&m, 1).unwrap()];
    let mut stream = Replay::open(m, 1, &mut workspace, noise()).unwrap();
    let (mut noise_sum, mut plain) = (0.0f64, 0.0f32);
    let mut worst = Worst::new();
    let mut checked = Vec::new();
    let mut release = [0.0f32];
    for t in 0..stream.horizon() {
        stream.step(&[INPUT], &mut release).unwrap();
        let w = w_of(t);
        noise_sum += f64::from(scale) * f64::from(w);
        plain += INPUT + scale * w;
        let exact = input_sum(u64::from(t) + 1) + noise_sum;
        worst.record(t + 1, release[0], exact);
        if check_at.contains(&(t + 1)) {
            checked.push((release[0], exact, plain));
        }
    }
    (worst, checked)
}

/// At `σ = 10⁻⁶` every release is within 4 ulps of the exact sum, where the uncompensated sum
/// drifts by hundreds of ulps (the issue: 299 546.7 at 10⁶).
fn releases_the_exact_sum(what: &str, bytes: &[u8]) {
    let (worst, checked) = run_summed_noise(bytes, seeded, &[STEPS]);
    worst.check(&format!("{what}, σ = 1e-6"));
    let (released, exact, plain) = checked[0];
    eprintln!("step 10^6: released {released}, exact {exact:.4}, plain f32 sum {plain}");
    assert!((f64::from(plain) - exact).abs() > 100.0 * ulp(exact));
}

#[test]
fn blt_releases_the_exact_sum_within_4_ulps_for_a_million_steps() {
    releases_the_exact_sum("BLT", &blt_blob(1e-6));
}

#[test]
fn bandmf_releases_the_exact_sum_within_4_ulps_for_a_million_steps() {
    releases_the_exact_sum("BandMF (Toeplitz, 4 bands)", &bandmf_blob(1e-6));
}

/// The noise standard deviation of the release at each step `t` in `steps`:
/// `σζ·sens·‖B̂[t,:]‖` with `‖B̂[t,:]‖² = Σ_{k ≤ t} b_k²`, `b_k = Σ_{j ≤ k} r_j` and `r` the
/// impulse response of the noise filter, in `f64` from the blob's coefficients. BLT:
/// `r_0 = 1`, `r_j = Σ ω θ^{j−1}`; BandMF: the first column of `C⁻¹`,
/// `r_j = −(Σ_{l=1}^{min(j, b̂−1)} c_l r_{j−l}) / c_0` (`r_0 = 1/c_0`).
fn noise_stddev_at(bytes: &[u8], steps: &[u32]) -> Vec<f64> {
    let m = Mechanism::from_bytes(bytes).unwrap();
    let mut response: Box<dyn FnMut(u32) -> f64> = match m.decoder {
        Decoder::Blt(d) => {
            let (theta, omega): (Vec<f64>, Vec<f64>) = (
                d.theta.iter().map(f64::from).collect(),
                d.omega.iter().map(f64::from).collect(),
            );
            let mut powers = vec![1.0f64; theta.len()];
            Box::new(move |k| {
                if k == 0 {
                    return 1.0;
                }
                let r = omega.iter().zip(&powers).map(|(w, p)| w * p).sum::<f64>();
                powers.iter_mut().zip(&theta).for_each(|(p, t)| *p *= t);
                r
            })
        }
        Decoder::BandMf(d) => {
            let c: Vec<f64> = d.row(0).unwrap().iter().map(f64::from).collect();
            let mut past: Vec<f64> = Vec::new();
            Box::new(move |k| {
                let k = k as usize;
                let mut r = if k == 0 { 1.0 } else { 0.0 };
                for (l, &c) in c.iter().enumerate().skip(1).take(k) {
                    r -= c * past[k - l];
                }
                r /= c[0];
                past.push(r);
                r
            })
        }
        _ => panic!("a BLT or BandMF blob"),
    };
    let (mut b, mut row) = (0.0f64, 0.0f64);
    let mut stddev = Vec::new();
    for k in 0..m.steps() {
        b += response(k);
        row += b * b;
        if steps.contains(&(k + 1)) {
            stddev.push(m.noise_stddev().unwrap() * row.sqrt());
        }
    }
    stddev
}

/// With `σ = 1`, the error of the releases is below 10⁻⁴ of the noise's standard deviation at
/// their step, where the uncompensated sum is off by more than 10⁻⁴ of it at 10⁶ steps and by a
/// hundred times the compensated error.
fn error_in_units_of_the_noise_stddev(what: &str, bytes: &[u8]) {
    let steps = [1_000, 10_000, 100_000, 1_000_000];
    let (_, checked) = run_summed_noise(bytes, seeded, &steps);
    let stddev = noise_stddev_at(bytes, &steps);
    for ((&t, &(released, exact, plain)), sd) in steps.iter().zip(&checked).zip(&stddev) {
        let error = (f64::from(released) - exact).abs() / sd;
        let drift = (f64::from(plain) - exact).abs() / sd;
        eprintln!(
            "{what}, step {t}: stddev {sd:.3}, error {error:.2e} σ_t, plain f32 sum {drift:.2e} σ_t"
        );
        assert!(
            error < 1e-4,
            "{what}, step {t}: {error} standard deviations"
        );
    }
    let (released, exact, plain) = checked[3];
    let drift = (f64::from(plain) - exact).abs();
    assert!(
        drift > 1e-4 * stddev[3] && drift > 100.0 * (f64::from(released) - exact).abs(),
        "{what}: the control must drift"
    );
}

#[test]
fn blt_error_in_units_of_the_noise_stddev() {
    error_in_units_of_the_noise_stddev("BLT", &blt_blob(1.0));
}

#[test]
fn bandmf_error_in_units_of_the_noise_stddev() {
    error_in_units_of_the_noise_stddev("BandMF", &bandmf_blob(1.0));
}

/// A banded decoder of `n = 10⁶` steps (`h = 2`, `r = 1`; coefficients of no optimizer: the
/// sum does not depend on them), built in code and validated.
fn banded_tables() -> [Vec<u8>; 3] {
    let n = STEPS as usize;
    let diagonals = encode_f32s((0..2 * n).map(|idx| match (idx / 2, idx % 2) {
        (0, 1) => 0.0,
        (_, 0) => 1.0,
        _ => 0.5,
    }));
    let left = encode_f32s((0..n).map(|i| 0.01 * (i % 7) as f32));
    let right = encode_f32s((0..n).map(|i| 0.02 - 0.001 * (i % 5) as f32));
    [diagonals, left, right]
}

fn header(sigma: f64) -> Header<'static> {
    Header {
        workload: Workload::PrefixSum,
        steps: STEPS,
        participation: mfc_formats::Participation::Single,
        neighbouring: Neighbouring::AddOrRemove,
        sensitivity: Sensitivity {
            value: 1.0,
            method: SensitivityMethod::MaxColumnNorm,
        },
        clip_norm: 1.0,
        calibration: Some(Calibration {
            noise_multiplier: sigma,
            target: None,
        }),
        error: ErrorSummary {
            sqrt_loss: 1.0,
            optimal_sqrt_loss: None,
            max_step_stddev: 1.0,
            final_step_stddev: 1.0,
        },
        generator: "exact sums test",
    }
}

/// Streams 0.3 for the horizon of `m` (a banded or FFT blob, whose streams add their noise to
/// the running sum of the inputs) with noise source `noise()`, in lockstep with a twin of the
/// same blob and key stepped with `step_noise`: the first releases the sum plus the noise the
/// second releases alone. Returns the worst error in ulps of the exact sum.
fn run_released_noise(m: Validated<'_>, noise: fn() -> ChaChaNoise) -> Worst {
    let len = Replay::workspace_len(&m, 1).unwrap();
    let (mut w1, mut w2) = (vec![0.0f32; len], vec![0.0f32; len]);
    let mut stream = Replay::open(m, 1, &mut w1, noise()).unwrap();
    let mut twin = Replay::open(m, 1, &mut w2, noise()).unwrap();
    let mut worst = Worst::new();
    let (mut release, mut noise) = ([0.0f32], [0.0f32]);
    for t in 0..stream.horizon() {
        stream.step(&[INPUT], &mut release).unwrap();
        twin.step_noise(&mut noise).unwrap();
        worst.record(
            t + 1,
            release[0],
            input_sum(u64::from(t) + 1) + f64::from(noise[0]),
        );
    }
    worst
}

#[test]
fn banded_releases_the_exact_sum_within_4_ulps_for_a_million_steps() {
    let tables = banded_tables();
    let t = |i: usize| F32Table::new(&tables[i]).unwrap();
    let m = Mechanism {
        header: header(1e-6),
        decoder: Decoder::BandedLowRank(BandedLowRank {
            band: 2,
            rank: 1,
            diagonals: t(0),
            left: t(1),
            right: t(2),
        }),
    }
    .validate()
    .unwrap();
    run_released_noise(m, seeded).check("banded n = 10^6, σ = 1e-6");
}

#[test]
fn fft_releases_the_exact_sum_within_4_ulps_for_a_million_steps() {
    let block = 1000u32;
    let kernel = encode_f32s((0..2 * block).map(|i| 1.0 / (1.0 + i as f32)));
    let empty = encode_f32s([]);
    let m = Mechanism {
        header: header(1e-6),
        decoder: Decoder::Fft(Fft {
            kind: FftKind::Circulant,
            block,
            stamps: STEPS / block,
            kernel: F32Table::new(&kernel).unwrap(),
            generator: F32Table::new(&empty).unwrap(),
        }),
    }
    .validate()
    .unwrap();
    run_released_noise(m, seeded).check("FFT 1000 × 1000, σ = 1e-6");
}

/// The blobs the drift firmware streams under QEMU (`examples/firmware/src/bin/drift.rs`), with
/// its key: every host release within 4 ulps of the exact sum. `tests/tests/firmware.rs`
/// requires the device's releases to be these, bit for bit.
#[test]
fn the_drift_firmware_blobs_release_the_exact_sum_within_4_ulps() {
    for name in ["drift.mfc", "drift-bandmf.mfc"] {
        let bytes = firmware_blob(name);
        assert_eq!(Mechanism::from_bytes(&bytes).unwrap().steps(), STEPS);
        let (worst, _) = run_summed_noise(&bytes, firmware_key, &[]);
        worst.check(name);
    }
    let bytes = firmware_blob("drift-fft.mfc");
    let m = Mechanism::from_bytes(&bytes).unwrap();
    assert!(matches!(m.decoder, Decoder::Fft(_)) && m.steps() == STEPS);
    run_released_noise(m, firmware_key).check("drift-fft.mfc");
}
