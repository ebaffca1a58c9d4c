//! The BLT form end to end: optimize → round to f32 → blob → `BltStream`, checked against
//! references computed here from the blob's own parameters: the dense Toeplitz decoder
//! `B = S C⁻¹` over 10⁵ steps (at sampled steps, against every earlier noise row) and the
//! sensitivity as the largest column norm of the dense encoder `C = T(r)⁻¹` (small horizon).
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use mfc_compiler::forms::blt::compile_blt;
use mfc_compiler::optimize::blt::optimize_blt;
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_formats::{Calibration, Decoder, Mechanism};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{BltStream, ChaChaNoise, Error};

const SEED: [u8; 32] = *b"blt end-to-end test seed, 32 b!!";

/// Clip norm 2, noise multiplier 0.8.
fn options() -> BlobOptions {
    BlobOptions {
        clip_norm: 2.0,
        calibration: Some(Calibration {
            noise_multiplier: 0.8,
            target: None,
        }),
        ..BlobOptions::default()
    }
}

fn blob(n: usize, buffers: usize, horizon: usize) -> Vec<u8> {
    let single = Participation::Single;
    let blt = optimize_blt(n, buffers, &single).unwrap();
    let compiled = compile_blt(&blt, n, horizon, &single).unwrap();
    mfc_compiler::forms::blt::encode(&compiled, &options())
        .unwrap()
        .bytes
}

/// `r_0 = 1`, `r_k = Σ_j ω_j θ_j^{k−1}` from the blob's tables, in f64 by direct powers.
fn decoder_coefficients(m: &Mechanism<'_>, len: usize) -> Vec<f64> {
    let Decoder::Blt(d) = m.decoder else {
        panic!("not a BLT blob")
    };
    let (theta, omega): (Vec<f64>, Vec<f64>) = (
        d.theta.iter().map(f64::from).collect(),
        d.omega.iter().map(f64::from).collect(),
    );
    (0..len)
        .map(|k| {
            if k == 0 {
                1.0
            } else {
                theta
                    .iter()
                    .zip(&omega)
                    .map(|(t, w)| w * t.powi(k as i32 - 1))
                    .sum()
            }
        })
        .collect()
}

#[test]
fn recorded_sensitivity_is_the_dense_encoders_column_norm() {
    let horizon = 64;
    let bytes = blob(48, 3, horizon);
    let m = Mechanism::from_bytes(&bytes).unwrap();
    let r = decoder_coefficients(&m, horizon);
    // C = T(r)⁻¹ densely; its largest column norm.
    let t = faer::Mat::from_fn(horizon, horizon, |i, j| if j <= i { r[i - j] } else { 0.0 });
    let mut c = faer::Mat::<f64>::identity(horizon, horizon);
    t.solve_lower_triangular_in_place(c.as_mut());
    let sens = (0..horizon).map(|j| c.col(j).norm_l2()).fold(0.0, f64::max);
    let recorded = m.header.sensitivity.value;
    assert!(
        (recorded - sens).abs() <= 1e-12 * sens,
        "{recorded} vs {sens}"
    );
    assert_eq!(m.steps() as usize, horizon);
}

#[test]
fn replay_equals_dense_toeplitz_for_100k_steps_with_fixed_ram() {
    let (n, buffers, horizon, dim) = (256, 4, 100_000, 4);
    let bytes = blob(n, buffers, horizon);
    let m = Mechanism::from_bytes(&bytes).unwrap();
    let needed = BltStream::<ChaChaNoise>::workspace_len(&m, dim).unwrap();
    assert_eq!(
        needed,
        (buffers + 2) * dim,
        "RAM does not depend on the horizon"
    );
    let scale = m.noise_stddev().unwrap();
    let zeta = m.header.clip_norm;
    // b = prefix sums of r: row t of B = S C⁻¹ is b_t, …, b_0.
    let r = decoder_coefficients(&m, horizon);
    let b: Vec<f64> = r
        .iter()
        .scan(0.0, |acc, x| {
            *acc += x;
            Some(*acc)
        })
        .collect();
    let mut z = vec![[0.0f32; 4]; horizon];
    let mut reference_noise = ChaChaNoise::from_seed(SEED).unwrap();
    for (t, row) in z.iter_mut().enumerate() {
        reference_noise.fill_standard_normal(t as u64, 0, row);
    }
    let mut workspace = vec![0.0f32; needed];
    let mut stream = BltStream::new(
        m,
        dim,
        &mut workspace,
        ChaChaNoise::from_seed(SEED).unwrap(),
    )
    .unwrap();
    let mut sums = [0.0f64; 4];
    let mut out = [0.0f32; 4];
    let mut row_variance = 0.0;
    let mut worst: f64 = 0.0;
    for t in 0..horizon {
        let big = if t % 5 == 0 { 30.0 } else { 0.4 };
        let x: [f32; 4] = core::array::from_fn(|c| big * ((t * 3 + c * 7) % 9) as f32 / 9.0 - 0.1);
        let clip = mfc_tests::runtime_clip_factor(&x, zeta);
        stream.step(&x, &mut out).unwrap();
        row_variance += b[t] * b[t];
        for c in 0..dim {
            sums[c] += f64::from(x[c]) * clip;
        }
        let sampled = t < 200 || t % 4999 == 0 || t + 3 >= horizon;
        if !sampled {
            continue;
        }
        let stddev = scale * row_variance.sqrt();
        for c in 0..dim {
            let noise: f64 = (0..=t).map(|u| b[t - u] * f64::from(z[u][c])).sum();
            let expected = sums[c] + scale * noise;
            let error = (f64::from(out[c]) - expected).abs() / (expected.abs() + stddev);
            worst = worst.max(error);
            assert!(
                error <= 1e-4,
                "step {t} coord {c}: {} vs {expected}",
                out[c]
            );
        }
    }
    eprintln!("BLT({buffers}) over {horizon} steps, d = {dim}: worst relative error {worst:.2e}");
    // Past the horizon the stream stops, and a refused step changes nothing.
    assert_eq!(
        stream.step(&[0.0; 4], &mut out),
        Err(Error::StreamFinished {
            steps: horizon as u32
        })
    );
}

#[test]
fn bad_input_is_refused_without_changing_state() {
    let bytes = blob(32, 2, 40);
    let m = Mechanism::from_bytes(&bytes).unwrap();
    let mut ws = vec![0.0f32; 12];
    let mut a = BltStream::new(m, 3, &mut ws, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    let mut ws2 = vec![0.0f32; 12];
    let mut b = BltStream::new(m, 3, &mut ws2, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    let (mut out_a, mut out_b) = ([0.0f32; 3], [0.0f32; 3]);
    a.step(&[1.0, 2.0, 3.0], &mut out_a).unwrap();
    b.step(&[1.0, 2.0, 3.0], &mut out_b).unwrap();
    assert_eq!(
        a.step(&[f32::NAN, 0.0, 0.0], &mut out_a),
        Err(Error::NonFiniteInput { index: 0 })
    );
    assert!(matches!(
        a.step(&[0.0; 2], &mut out_a),
        Err(Error::DimensionMismatch { .. })
    ));
    a.step(&[0.5, 0.5, 0.5], &mut out_a).unwrap();
    b.step(&[0.5, 0.5, 0.5], &mut out_b).unwrap();
    assert_eq!(out_a, out_b);
    let mut small = vec![0.0f32; 11];
    assert!(matches!(
        BltStream::new(m, 3, &mut small, ChaChaNoise::from_seed(SEED).unwrap()),
        Err(Error::WorkspaceTooSmall {
            needed: 12,
            found: 11
        })
    ));
}

/// Issue 15: a BLT fitted and compiled for min-separation records, from its stored `f32`
/// parameters, a sensitivity at least the brute force over every min-separation pattern and
/// sign vector of the dense encoder `C = T(r)⁻¹` (equal to it when the method is exact), and
/// fitting with one more buffer never does worse.
#[test]
fn min_separation_blob_sensitivity_is_at_least_brute_force() {
    let (n, k, b) = (40, 3, 8);
    let schema = Participation::min_separation(k, b).unwrap();
    let family =
        mfc_compiler::optimize::blt::optimize_blt_family(n, 3, &schema, &mut |_| {}).unwrap();
    let mut previous = f64::INFINITY;
    for blt in &family {
        let compiled = compile_blt(blt, n, n, &schema).unwrap();
        assert!(
            compiled.sqrt_loss <= previous * (1.0 + 1e-9),
            "{} > {previous}",
            compiled.sqrt_loss
        );
        previous = compiled.sqrt_loss;
        let bytes = mfc_compiler::forms::blt::encode(&compiled, &BlobOptions::default())
            .unwrap()
            .bytes;
        let m = Mechanism::from_bytes(&bytes).unwrap();
        let r = decoder_coefficients(&m, n);
        let t = faer::Mat::from_fn(n, n, |i, j| if j <= i { r[i - j] } else { 0.0 });
        let mut c = faer::Mat::<f64>::identity(n, n);
        t.solve_lower_triangular_in_place(c.as_mut());
        let rows: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| c[(i, j)]).collect())
            .collect();
        let truth = mfc_tests::brute_force_min_separation(&rows, k, b);
        let s = m.header.sensitivity;
        eprintln!(
            "{} buffers: recorded {} ({:?}), brute force {truth}",
            blt.buffers(),
            s.value,
            s.method
        );
        assert!(s.value >= truth * (1.0 - 1e-12), "{} < {truth}", s.value);
        if s.method.is_exact() {
            assert!(
                (s.value - truth).abs() <= 1e-9 * truth,
                "{} vs {truth}",
                s.value
            );
        }
    }
}

/// `--horizon unbounded` (issue 19): the bound for every horizon is at least the sensitivity
/// computed directly over 10⁶ steps from the same stored parameters, and within 0.1% of it; the
/// blob it makes records it with `BltTailBound`, and its stream does not stop at the design
/// steps: it runs past them, checkpoints and restores.
#[test]
fn an_unbounded_horizon_bound_covers_a_million_steps_within_a_thousandth() {
    use mfc_compiler::forms::blt::{compile_blt_unbounded, unbounded_sensitivity};
    use mfc_formats::SensitivityMethod;
    use mfc_runtime::{BlobFingerprint, ReleaseCounter, epoch_noise};
    let single = Participation::Single;
    for (n, buffers) in [(48, 4), (256, 6), (1024, 3)] {
        let blt = optimize_blt(n, buffers, &single).unwrap();
        let unbounded = compile_blt_unbounded(&blt, n, &single).unwrap();
        let direct = compile_blt(&blt, n, 1_000_000, &single).unwrap();
        let bound = unbounded_sensitivity(&unbounded.blt).unwrap();
        eprintln!(
            "n = {n}, m = {buffers}: bound {:.12} (head over T = {}, tail {:.3e}, ‖A^{}‖ ≤ {:.3}), direct at 10⁶ {:.12}",
            unbounded.sensitivity,
            bound.head_steps,
            bound.tail,
            bound.power,
            bound.contraction,
            direct.sensitivity
        );
        assert_eq!(unbounded.sensitivity, bound.value);
        assert!(unbounded.sensitivity >= direct.sensitivity);
        assert!(unbounded.sensitivity <= 1.001 * direct.sensitivity);
        assert!(unbounded.every_horizon);
        assert_eq!(
            unbounded.sensitivity_method,
            SensitivityMethod::BltTailBound
        );
        // The blob: no horizon for the runtime, steps past the design steps, a restore there.
        let options = options();
        let bytes = mfc_compiler::forms::blt::encode(&unbounded, &options)
            .unwrap()
            .bytes;
        let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
        assert_eq!(mechanism.header.steps as usize, n);
        // The device recomputes the bound for every horizon, bit for bit the recorded one, and
        // refuses the blob with it lowered by 1%; a device's policy admits it without opting in.
        let mut scratch = vec![0.0; mfc_runtime::verify::scratch_len(&mechanism)];
        assert_eq!(
            mfc_runtime::verify::verify(&mechanism, &mut scratch, u64::MAX),
            Ok(mfc_runtime::verify::Verdict::Verified {
                recorded: bound.value,
                bound: bound.value
            })
        );
        assert!(matches!(
            mfc_runtime::verify::verify(&lowered(&bytes, 0.99), &mut scratch, u64::MAX),
            Err(Error::SensitivityUnderstated { shortfall_ppb }) if shortfall_ppb >= 10_000_000
        ));
        use mfc_runtime::policy::{Floor, Policy, admit};
        let mut policy = Policy {
            floor: Floor::NoiseMultiplier { min: 0.5 },
            max_operations: u64::MAX,
            refuse_unverifiable: true,
            admit_unbounded_horizon: false,
        };
        assert!(matches!(
            admit(&mechanism, None, &policy, &mut scratch),
            Ok(mfc_runtime::verify::Verdict::Verified { .. })
        ));
        // Over the device's budget it is unverifiable, and refused unless the device opts in,
        // even by a policy that admits other unverifiable blobs.
        policy.max_operations = bound.operations - 1;
        policy.refuse_unverifiable = false;
        assert_eq!(
            admit(&mechanism, None, &policy, &mut scratch),
            Err(mfc_runtime::Error::SensitivityUnverified)
        );
        policy.admit_unbounded_horizon = true;
        assert!(matches!(
            admit(&mechanism, None, &policy, &mut scratch),
            Ok(mfc_runtime::verify::Verdict::Unverifiable(
                mfc_runtime::verify::Unverifiable::OverBudget { .. }
            ))
        ));
        let counter = ReleaseCounter::new(1, 0);
        let len = BltStream::<ChaChaNoise>::workspace_len(&mechanism, 2).unwrap();
        let mut ws = vec![0.0f32; len];
        let noise = epoch_noise(&[7; 32], &counter).unwrap();
        let mut stream = BltStream::new(mechanism, 2, &mut ws, noise).unwrap();
        assert_eq!(stream.horizon(), u32::MAX);
        let mut out = [0.0f32; 2];
        let mut releases = Vec::new();
        for t in 0..3 * n {
            stream.step(&[1.0, (t % 3) as f32], &mut out).unwrap();
            releases.push(out);
        }
        let mut slot = vec![0u8; stream.checkpoint_capacity()];
        stream.checkpoint(&fp, &counter, &mut slot).unwrap();
        let mut resumed_ws = vec![0.0f32; len];
        let noise = epoch_noise(&[7; 32], &counter).unwrap();
        let mut resumed = BltStream::new(mechanism, 2, &mut resumed_ws, noise).unwrap();
        resumed.restore(&fp, &slot, &counter).unwrap();
        assert_eq!(resumed.steps_released() as usize, 3 * n);
        for t in 3 * n..3 * n + 8 {
            stream.step(&[1.0, (t % 3) as f32], &mut out).unwrap();
            let mut again = [0.0f32; 2];
            resumed.step(&[1.0, (t % 3) as f32], &mut again).unwrap();
            assert_eq!(out, again);
        }
    }
    // The bound is proven for single participation only.
    let blt = optimize_blt(48, 4, &single).unwrap();
    let min_sep = Participation::min_separation(4, 12).unwrap();
    assert!(compile_blt_unbounded(&blt, 48, &min_sep).is_err());
}

/// `bytes` with its recorded sensitivity multiplied by `factor`, CRC recomputed.
fn lowered(bytes: &[u8], factor: f64) -> mfc_formats::Validated<'static> {
    let mut m = Mechanism::from_bytes(bytes).unwrap().into_inner();
    m.header.sensitivity.value *= factor;
    let leaked: &'static [u8] = Vec::leak(m.to_vec().unwrap());
    Mechanism::from_bytes(leaked).unwrap()
}

/// `bytes` with the BLT parameters replaced by `theta`, `omega`, its recorded sensitivity kept,
/// CRC recomputed.
fn forged(bytes: &[u8], theta: &[f32], omega: &[f32]) -> mfc_formats::Validated<'static> {
    let mut m = Mechanism::from_bytes(bytes).unwrap().into_inner();
    let table = |v: &[f32]| {
        let bytes: &'static [u8] = Vec::leak(v.iter().flat_map(|x| x.to_le_bytes()).collect());
        mfc_formats::F32Table::new(bytes).unwrap()
    };
    m.decoder = Decoder::Blt(mfc_formats::Blt {
        theta: table(theta),
        omega: table(omega),
    });
    let leaked: &'static [u8] = Vec::leak(m.to_vec().unwrap());
    Mechanism::from_bytes(leaked).unwrap()
}

/// Issue 20: every `--horizon unbounded` blob the compiler writes (m = 1..6) verifies on the
/// device, its bound is at least the sensitivity computed directly over 2·10⁵ steps (an
/// independent reference, f64 recurrence), and it is refused lowered by 1%. A forged BLT whose
/// encoder grows (θ = (0.5, 0.5), ω = (−0.3, −0.3): spectral radius 1.1) claiming the honest
/// value, or one at spectral radius 1, is never verified, and a device's policy refuses it
/// unless it opts in.
#[test]
fn the_device_verifies_unbounded_horizon_blobs() {
    use mfc_compiler::forms::blt::compile_blt_unbounded;
    use mfc_runtime::policy::{Floor, Policy, admit};
    use mfc_runtime::verify::{Verdict, verify};
    let single = Participation::Single;
    let options = options();
    let policy = Policy {
        floor: Floor::NoiseMultiplier { min: 0.5 },
        max_operations: 10_000_000,
        refuse_unverifiable: false,
        admit_unbounded_horizon: false,
    };
    let mut last = Vec::new();
    for (n, buffers) in [(16, 1), (32, 2), (64, 3), (96, 4), (128, 5), (200, 6)] {
        let blt = optimize_blt(n, buffers, &single).unwrap();
        let unbounded = compile_blt_unbounded(&blt, n, &single).unwrap();
        let bytes = mfc_compiler::forms::blt::encode(&unbounded, &options)
            .unwrap()
            .bytes;
        let m = Mechanism::from_bytes(&bytes).unwrap();
        let Decoder::Blt(d) = m.decoder else {
            panic!("not a BLT blob")
        };
        let (theta, omega): (Vec<f32>, Vec<f32>) =
            (d.theta.iter().collect(), d.omega.iter().collect());
        // Σ c_t² by the plain recurrence over 2·10⁵ steps.
        let mut state = vec![0.0f64; buffers];
        let mut direct = 0.0f64;
        for t in 0..200_000 {
            let mut c = if t == 0 { 1.0 } else { 0.0 };
            for (s, w) in state.iter().zip(&omega) {
                c -= f64::from(*w) * s;
            }
            direct += c * c;
            for (s, th) in state.iter_mut().zip(&theta) {
                *s = f64::from(*th) * *s + c;
            }
        }
        let direct = direct.sqrt();
        let recorded = m.header.sensitivity.value;
        let mut scratch = vec![0.0; mfc_runtime::verify::scratch_len(&m)];
        let verdict = verify(&m, &mut scratch, u64::MAX);
        eprintln!(
            "n = {n}, m = {buffers}: recorded {recorded:.12}, direct {direct:.12}, {:?}",
            verdict
        );
        assert!(recorded >= direct && recorded <= direct * (1.0 + 1e-6));
        assert!(matches!(verdict, Ok(Verdict::Verified { bound, .. }) if bound <= recorded));
        assert!(matches!(
            admit(&m, None, &policy, &mut scratch),
            Ok(Verdict::Verified { .. })
        ));
        assert!(matches!(
            verify(&lowered(&bytes, 0.99), &mut scratch, u64::MAX),
            Err(Error::SensitivityUnderstated { .. })
        ));
        last = bytes;
    }
    // Forged parameters with the honest recorded value: a growing encoder, and one at spectral
    // radius exactly 1 (θ − ω = 1) whose column does not decay. Over an unbounded horizon both
    // have a column norm without bound, so the certified lower bound (`verify::lower`, over its
    // first `BLT_STEPS` steps whatever the budget, so even `u64::MAX` ends) exceeds the record:
    // refused as understated — the truth, and stronger than "unverifiable".
    for (theta, omega) in [
        (&[0.5f32, 0.5][..], &[-0.3f32, -0.3][..]),
        (&[0.5], &[-0.5]),
    ] {
        let m = forged(&last, theta, omega);
        let mut scratch = vec![0.0; mfc_runtime::verify::scratch_len(&m)];
        assert!(matches!(
            verify(&m, &mut scratch, u64::MAX),
            Err(Error::SensitivityUnderstated { .. })
        ));
        assert!(matches!(
            admit(&m, None, &policy, &mut scratch),
            Err(Error::SensitivityUnderstated { .. })
        ));
    }
}
