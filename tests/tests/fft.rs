//! FFT mechanisms end to end (issue 4): `compile_fft` → `.mfc` blob → `FftStream` replay equals
//! `S x + σζ·sens·B̂ Z` computed here in `f64` from the dense decoder of the blob's own `f32`
//! tables and the same noise draws, for `d = 1` and `d = 16`, across block boundaries; and the
//! stream refuses bad input with a typed error, leaving its state as it was.
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use mfc_compiler::forms::fft::{FftKind, FftMechanism, FftOptions, compile_fft, dense_decoder};
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_formats::{Calibration, Decoder, Mechanism};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{ChaChaNoise, Error, FftStream, Stream};

const SEED: [u8; 32] = *b"fft end-to-end test seed 32 byte";

fn build(steps: usize, stamps: usize, kind: FftKind) -> (FftMechanism, Vec<u8>) {
    let compiled = compile_fft(&FftOptions {
        steps,
        stamps,
        kind,
        participation: Participation::Single,
    })
    .unwrap();
    let options = BlobOptions {
        clip_norm: 1.5,
        calibration: Some(Calibration {
            noise_multiplier: 0.75,
            target: None,
        }),
        ..BlobOptions::default()
    };
    let bytes = mfc_compiler::forms::fft::encode(&compiled, &options)
        .unwrap()
        .bytes;
    (compiled, bytes)
}

/// An input row that sometimes exceeds the clip norm.
fn input(t: usize, c: usize) -> f32 {
    (((t * 31 + c * 17) % 23) as f32 - 11.0) / 8.0
}

/// Replays `steps` steps of the blob in dimension `d` and returns the largest deviation from the
/// f64 reference relative to the largest reference noise value.
fn replay_error(compiled: &FftMechanism, bytes: &[u8], d: usize) -> f64 {
    let mechanism = Mechanism::from_bytes(bytes).unwrap();
    let Decoder::Fft(form) = mechanism.decoder else {
        panic!("an FFT blob")
    };
    let (m, s) = (form.block as usize, form.stamps as usize);
    let n = m * s;
    let b = dense_decoder(compiled);
    assert_eq!((b.nrows(), b.ncols()), (n, 2 * n));
    // Z: column j of block i, coordinate c, is coordinate c·2m + j of noise row i.
    let mut draws = ChaChaNoise::from_seed(SEED).unwrap();
    let mut z = vec![vec![0.0f64; d]; 2 * n];
    let mut run = vec![0.0f32; 2 * m];
    for i in 0..s {
        for c in 0..d {
            draws.fill_standard_normal(i as u64, (c * 2 * m) as u64, &mut run);
            for (j, v) in run.iter().enumerate() {
                z[i * 2 * m + j][c] = f64::from(*v);
            }
        }
    }
    let h = mechanism.header;
    let scale = 0.75 * h.clip_norm * h.sensitivity.value;
    let len = FftStream::<ChaChaNoise>::workspace_len(&mechanism, d).unwrap();
    let mut workspace = vec![0.0f32; len];
    let mut stream = FftStream::new(
        mechanism,
        d,
        &mut workspace,
        ChaChaNoise::from_seed(SEED).unwrap(),
    )
    .unwrap();
    let mut sum = vec![0.0f64; d];
    let (mut worst, mut largest) = (0.0f64, 0.0f64);
    let mut release = vec![0.0f32; d];
    for t in 0..n {
        let x: Vec<f32> = (0..d).map(|c| input(t, c)).collect();
        stream.step(&x, &mut release).unwrap();
        let clip = mfc_tests::runtime_clip_factor(&x, h.clip_norm);
        for c in 0..d {
            sum[c] += clip * f64::from(x[c]);
            let noise: f64 = (0..2 * n).map(|j| b[(t, j)] * z[j][c]).sum::<f64>() * scale;
            worst = worst.max((f64::from(release[c]) - sum[c] - noise).abs());
            largest = largest.max(noise.abs());
        }
    }
    assert_eq!(
        stream.step(&vec![0.0; d], &mut release),
        Err(Error::StreamFinished { steps: n as u32 })
    );
    worst / largest
}

#[test]
fn runtime_replay_equals_dense_decoder_across_blocks() {
    for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
        for (steps, stamps, d) in [
            (150, 3, 1),
            (150, 3, 16),
            (800, 2, 1),
            (64, 4, 16),
            (90, 3, 3),
        ] {
            let (compiled, bytes) = build(steps, stamps, kind);
            let error = replay_error(&compiled, &bytes, d);
            eprintln!("{kind:?} n = {steps} ×{stamps} d = {d}: relative error {error:.2e}");
            assert!(
                error < 1e-4,
                "{kind:?} n = {steps} ×{stamps} d = {d}: relative error {error:e}"
            );
        }
    }
}

#[test]
fn fft_stream_refuses_bad_input_and_leaves_state_untouched() {
    let (_, bytes) = build(12, 3, FftKind::OptimalDecoder);
    let mechanism = Mechanism::from_bytes(&bytes).unwrap();
    let d = 3;
    let len = FftStream::<ChaChaNoise>::workspace_len(&mechanism, d).unwrap();
    assert_eq!(
        FftStream::new(
            mechanism,
            d,
            &mut vec![0.0; len - 1],
            ChaChaNoise::from_seed(SEED).unwrap()
        )
        .err(),
        Some(Error::WorkspaceTooSmall {
            needed: len,
            found: len - 1
        })
    );
    assert_eq!(
        FftStream::<ChaChaNoise>::workspace_len(&mechanism, 0),
        Err(Error::InvalidDimension)
    );
    // The banded stream refuses the FFT form rather than misreading it.
    assert_eq!(
        Stream::new(
            mechanism,
            d,
            &mut [0.0; 64],
            ChaChaNoise::from_seed(SEED).unwrap()
        )
        .err(),
        Some(Error::UnsupportedDecoder)
    );
    let (mut w1, mut w2) = (vec![0.0; len], vec![0.0; len]);
    let mut a =
        FftStream::new(mechanism, d, &mut w1, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    let mut b =
        FftStream::new(mechanism, d, &mut w2, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    let mut out = [0.0f32; 3];
    let x = [0.5f32, -0.25, 1.0];
    a.step(&x, &mut out).unwrap();
    assert_eq!(
        a.step(&[0.0, f32::NAN, 0.0], &mut out),
        Err(Error::NonFiniteInput { index: 1 })
    );
    assert_eq!(
        a.step(&[0.0; 2], &mut out),
        Err(Error::DimensionMismatch {
            expected: 3,
            found: 2
        })
    );
    assert_eq!(
        a.step(&x, &mut [0.0; 4]),
        Err(Error::DimensionMismatch {
            expected: 3,
            found: 4
        })
    );
    assert_eq!(a.steps_released(), 1);
    let mut expected = [0.0f32; 3];
    b.step(&x, &mut expected).unwrap();
    for _ in 1..12 {
        a.step(&x, &mut out).unwrap();
        b.step(&x, &mut expected).unwrap();
        assert_eq!(out, expected);
    }
    assert_eq!(
        a.step_noise(&mut out),
        Err(Error::StreamFinished { steps: 12 })
    );
}
