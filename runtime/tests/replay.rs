//! The stream against a dense f64 reference on random banded-plus-low-rank mechanisms, the
//! "errors change nothing" rule, and inputs that must never panic.
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

mod common;

use common::{Tables, mechanism, tables, workspace};
use mfc_formats::{F32Table, Workload};
use mfc_runtime::{ChaChaNoise, Error, NoiseSource, Stream};
use proptest::prelude::*;

const SEED: [u8; 32] = *b"runtime replay test seed, 32 by!";

/// A tiny deterministic generator for test coefficients (independent of the code under test).
fn dense(t: &Tables) -> Vec<Vec<f64>> {
    let f = |bytes: &[u8], i: usize| f64::from(F32Table::new(bytes).unwrap().get(i).unwrap());
    (0..t.n)
        .map(|i| {
            (0..t.n)
                .map(|j| match i.checked_sub(j) {
                    Some(k) if k < t.h => f(&t.diagonals, i * t.h + k),
                    Some(_) => (0..t.r)
                        .map(|q| f(&t.left, i * t.r + q) * f(&t.right, j * t.r + q))
                        .sum(),
                    None => 0.0,
                })
                .collect()
        })
        .collect()
}

fn input(i: usize, dim: usize) -> Vec<f32> {
    let big = if i % 4 == 1 { 25.0 } else { 0.2 };
    (0..dim)
        .map(|c| big * ((i * 5 + c * 11) % 13) as f32 / 13.0 - big / 3.0)
        .collect()
}

fn check_against_dense(n: usize, h: usize, r: usize, dim: usize, seed: u64) {
    let t = tables(n, h, r, seed);
    let m = mechanism(&t, Workload::PrefixSum, 2.0);
    let b = dense(&t);
    let scale = 0.7 * 2.0 * 1.3;
    let mut z = vec![vec![0.0f32; dim]; n];
    let mut reference = ChaChaNoise::from_seed(SEED).unwrap();
    for (i, row) in z.iter_mut().enumerate() {
        reference.fill_standard_normal(i as u64, 0, row);
    }
    let mut workspace = workspace(&m, dim);
    assert_eq!(workspace.len(), (h + r + 2) * dim);
    let noise = ChaChaNoise::from_seed(SEED).unwrap();
    let mut stream = Stream::new(m, dim, &mut workspace, noise).unwrap();
    let mut sum = vec![0.0f64; dim];
    let mut out = vec![0.0f32; dim];
    for i in 0..n {
        let x = input(i, dim);
        // The runtime's factor (proven and tested in tests/clip.rs), within 2⁻¹⁵ of the exact one.
        let norm = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
        let clip = f64::from(mfc_runtime::clip_factor(&x, 2.0));
        assert!(
            clip <= 1.0f64.min(2.0 / norm)
                && clip >= 1.0f64.min(2.0 / norm) * (1.0 - 1.0 / 32768.0)
        );
        stream.step(&x, &mut out).unwrap();
        for c in 0..dim {
            sum[c] += f64::from(x[c]) * clip;
            let noise: f64 = (0..=i).map(|j| b[i][j] * f64::from(z[j][c])).sum();
            let expected = sum[c] + scale * noise;
            assert!(
                (f64::from(out[c]) - expected).abs() <= 1e-5 * expected.abs().max(1.0),
                "n={n} h={h} r={r} d={dim} step {i} coord {c}: {} vs {expected}",
                out[c]
            );
        }
    }
    assert!(
        matches!(stream.step(&input(0, dim), &mut out), Err(Error::StreamFinished { steps }) if steps == n as u32)
    );
}

#[test]
fn replay_equals_dense_reference() {
    for dim in [1, 7, 64] {
        for (n, h, r) in [
            (40, 3, 2),
            (40, 1, 4),
            (40, 1, 0),
            (12, 12, 0),
            (10, 10, 3),
            (30, 5, 0),
            (25, 2, 25),
            (1, 1, 0),
            (1, 1, 1),
        ] {
            check_against_dense(n, h, r, dim, (n * 31 + h * 7 + r + dim) as u64);
        }
    }
}

/// Every failed call leaves the stream exactly as it was: the releases that follow equal those of
/// a stream that never saw the failed calls.
#[test]
fn errors_leave_the_state_unchanged() {
    let t = tables(20, 3, 2, 9);
    let dim = 5;
    let run = |with_errors: bool| -> Vec<f32> {
        let m = mechanism(&t, Workload::PrefixSum, 1.0);
        let mut workspace = vec![0.0f32; 35];
        let mut stream = Stream::new(
            m,
            dim,
            &mut workspace,
            ChaChaNoise::from_seed(SEED).unwrap(),
        )
        .unwrap();
        let mut all = Vec::new();
        let mut out = vec![0.0f32; dim];
        for i in 0..20 {
            if with_errors {
                let mut bad = input(i, dim);
                bad[2] = f32::NAN;
                assert_eq!(
                    stream.step(&bad, &mut out),
                    Err(Error::NonFiniteInput { index: 2 })
                );
                bad[2] = f32::INFINITY;
                assert_eq!(
                    stream.step(&bad, &mut out),
                    Err(Error::NonFiniteInput { index: 2 })
                );
                assert_eq!(
                    stream.step(&input(i, dim + 1), &mut out),
                    Err(Error::DimensionMismatch {
                        expected: dim,
                        found: dim + 1
                    })
                );
                assert_eq!(
                    stream.step(&input(i, dim), &mut out[..dim - 1]),
                    Err(Error::DimensionMismatch {
                        expected: dim,
                        found: dim - 1
                    })
                );
                assert_eq!(stream.steps_released(), i as u32);
            }
            stream.step(&input(i, dim), &mut out).unwrap();
            all.extend_from_slice(&out);
        }
        all
    };
    assert_eq!(run(false), run(true));
}

#[test]
fn custom_workloads_release_noise_only() {
    let t = tables(16, 2, 1, 3);
    let m = mechanism(&t, Workload::Custom { label: "A.npy" }, 1.0);
    let b = dense(&t);
    let mut workspace = vec![0.0f32; 10];
    let mut stream =
        Stream::new(m, 2, &mut workspace, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    let mut out = [0.0f32; 2];
    assert_eq!(
        stream.step(&[0.0, 0.0], &mut out),
        Err(Error::WorkloadNotStreamable)
    );
    let mut reference = ChaChaNoise::from_seed(SEED).unwrap();
    let mut z = [[0.0f32; 2]; 16];
    for i in 0..16 {
        reference.fill_standard_normal(i as u64, 0, &mut z[i]);
        stream.step_noise(&mut out).unwrap();
        for c in 0..2 {
            let expected: f64 =
                0.7 * 1.3 * (0..=i).map(|j| b[i][j] * f64::from(z[j][c])).sum::<f64>();
            assert!((f64::from(out[c]) - expected).abs() <= 1e-5 * expected.abs().max(1.0));
        }
    }
    assert_eq!(
        stream.step_noise(&mut out),
        Err(Error::StreamFinished { steps: 16 })
    );
}

#[test]
fn configuration_errors() {
    let t = tables(8, 2, 1, 4);
    let m = mechanism(&t, Workload::PrefixSum, 1.0);
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let mut small = [0.0f32; 9];
    assert!(matches!(
        Stream::new(m, 2, &mut small, noise()),
        Err(Error::WorkspaceTooSmall {
            needed: 10,
            found: 9
        })
    ));
    let mut ws = [0.0f32; 10];
    assert!(matches!(
        Stream::new(m, 0, &mut ws, noise()),
        Err(Error::InvalidDimension)
    ));
    for sigma in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300] {
        assert!(matches!(
            Stream::with_noise_multiplier(m, 2, &mut ws, noise(), sigma),
            Err(Error::InvalidNoiseMultiplier)
        ));
    }
    let mut uncalibrated = m.into_inner();
    uncalibrated.header.calibration = None;
    let uncalibrated = uncalibrated.validate().unwrap();
    assert!(matches!(
        Stream::new(uncalibrated, 2, &mut ws, noise()),
        Err(Error::NotCalibrated)
    ));
    // A static workspace works as well as a slice.
    let mut fixed = mfc_runtime::Workspace::<10>::new();
    let mut s = Stream::new(m, 2, &mut fixed, noise()).unwrap();
    let mut out = [0.0f32; 2];
    s.step(&[3.0, 4.0], &mut out).unwrap();
}

/// Errors of `step_noise` and of a finished stream change nothing either.
#[test]
fn noise_errors_and_finished_streams_leave_the_state_unchanged() {
    let t = tables(9, 2, 3, 11);
    let dim = 3;
    let run = |with_errors: bool| -> Vec<f32> {
        let m = mechanism(&t, Workload::Custom { label: "A" }, 1.0);
        let mut workspace = vec![0.0f32; 7 * dim];
        let mut stream = Stream::new(
            m,
            dim,
            &mut workspace,
            ChaChaNoise::from_seed(SEED).unwrap(),
        )
        .unwrap();
        let mut all = Vec::new();
        let mut out = vec![0.0f32; dim + 1];
        for i in 0..9 {
            if with_errors {
                assert_eq!(
                    stream.step_noise(&mut out),
                    Err(Error::DimensionMismatch {
                        expected: dim,
                        found: dim + 1
                    })
                );
                assert_eq!(
                    stream.step(&[1.0; 3], &mut out[..dim]),
                    Err(Error::WorkloadNotStreamable)
                );
                assert_eq!(stream.steps_released(), i);
            }
            stream.step_noise(&mut out[..dim]).unwrap();
            all.extend_from_slice(&out[..dim]);
        }
        for _ in 0..3 {
            let before = out.clone();
            assert_eq!(
                stream.step_noise(&mut out[..dim]),
                Err(Error::StreamFinished { steps: 9 })
            );
            assert_eq!(out, before, "a refused call must not write its output");
            assert_eq!(stream.steps_released(), 9);
        }
        assert_eq!((stream.horizon(), stream.dim()), (9, dim));
        all
    };
    assert_eq!(run(false), run(true));
}

/// An uncalibrated blob streams with an explicit multiplier, and the noise scales with it.
#[test]
fn explicit_noise_multiplier() {
    let t = tables(6, 2, 1, 13);
    let mut m = mechanism(&t, Workload::Custom { label: "A" }, 2.0).into_inner();
    m.header.calibration = None;
    let m = m.validate().unwrap();
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let (mut w1, mut w2) = ([0.0f32; 10], [0.0f32; 10]);
    let mut one = Stream::with_noise_multiplier(m, 2, &mut w1, noise(), 1.0).unwrap();
    let mut three = Stream::with_noise_multiplier(m, 2, &mut w2, noise(), 3.0).unwrap();
    let (mut a, mut b) = ([0.0f32; 2], [0.0f32; 2]);
    for _ in 0..6 {
        one.step_noise(&mut a).unwrap();
        three.step_noise(&mut b).unwrap();
        for c in 0..2 {
            assert!((3.0 * a[c] - b[c]).abs() <= 1e-5 * b[c].abs().max(1.0));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    /// Random shapes (any `h ≤ n`, any `r ≤ n`) and coefficients against the dense reference.
    #[test]
    fn random_mechanisms_match_dense(
        (n, h, r) in (1usize..24).prop_flat_map(|n| (Just(n), 1..=n, 0..=n.min(6))),
        dim in prop_oneof![Just(1usize), Just(7), Just(64)],
        seed in any::<u64>(),
    ) {
        check_against_dense(n, h, r, dim, seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// No input — NaN, infinities, huge or tiny values, wrong lengths — panics the stream.
    #[test]
    fn no_input_panics(values in proptest::collection::vec(any::<f32>(), 0..12), out_len in 0usize..8, steps in 1usize..30) {
        let t = tables(6, 2, 2, 5);
        let m = mechanism(&t, Workload::PrefixSum, 1.0);
        let mut workspace = vec![0.0f32; 6 * 4];
        let mut stream = Stream::new(m, 4, &mut workspace, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
        let mut out = vec![0.0f32; out_len];
        for _ in 0..steps {
            let before = stream.steps_released();
            match stream.step(&values, &mut out) {
                Ok(()) => {
                    prop_assert_eq!(stream.steps_released(), before + 1);
                    prop_assert!(out.iter().all(|x| x.is_finite()));
                }
                Err(_) => prop_assert_eq!(stream.steps_released(), before),
            }
        }
    }
}

/// The stream reports the first entry that is not finite, wherever it sits.
#[test]
fn a_stream_names_the_first_non_finite_entry() {
    let t = tables(4, 2, 1, 3);
    let m = mechanism(&t, Workload::PrefixSum, 1.0);
    let dim = 300;
    let mut workspace = workspace(&m, dim);
    let noise = ChaChaNoise::from_seed(SEED).unwrap();
    let mut stream = Stream::new(m, dim, &mut workspace, noise).unwrap();
    let mut release = vec![0.0f32; dim];
    for first in [0, 7, 8, 150, 299] {
        let mut row = vec![0.25f32; dim];
        row[first] = f32::INFINITY;
        if first + 1 < dim {
            row[dim - 1] = f32::NAN;
        }
        assert_eq!(
            stream.step(&row, &mut release),
            Err(Error::NonFiniteInput { index: first })
        );
    }
    assert_eq!(stream.steps_released(), 0);
}
