//! The BandMF form end to end: optimize → round to f32 → blob → `BandMfStream`, checked against
//! references computed here from the blob's own coefficients: the dense encoder `C`, its
//! sensitivity by brute force over every pattern and sign vector, and the release in `f64`
//! from a dense solve — `A x + B̂ Z` with `B̂ = S C⁻¹` for the prefix sum, `x + C⁻¹ Z` (the
//! noised input the caller's `A` post-processes) for a momentum workload.
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use faer::Mat;
use mfc_compiler::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use mfc_compiler::privacy::participation::{Participation, brute_force_sensitivity};
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::{Schedule, Workload};
use mfc_formats::{Calibration, Decoder, Mechanism, SensitivityMethod};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{BandMfStream, ChaChaNoise, Error, Stream};

const SEED: [u8; 32] = *b"bandmf end-to-end test seed 32b!";

fn blob(
    workload: &Workload,
    n: usize,
    p: Participation,
    kind: BandMfKind,
    bands: usize,
) -> Vec<u8> {
    let options = BandMfOptions {
        participation: p,
        kind,
        bands: Bands::Fixed(bands),
        ..BandMfOptions::default()
    };
    let compiled = compile_bandmf(workload, n, &options, &mut |_, _| {}).unwrap();
    let blob_options = BlobOptions {
        clip_norm: 1.5,
        calibration: Some(Calibration {
            noise_multiplier: 0.75,
            target: None,
        }),
        ..BlobOptions::default()
    };
    mfc_compiler::forms::bandmf::encode(&compiled, workload, &blob_options)
        .unwrap()
        .bytes
}

/// The dense encoder `C` rebuilt from the blob's table alone.
fn dense_encoder(m: &Mechanism<'_>) -> Mat<f64> {
    let Decoder::BandMf(d) = m.decoder else {
        panic!("BandMF blob expected")
    };
    let (n, h) = (m.steps() as usize, d.bands());
    Mat::from_fn(n, n, |i, j| {
        if j > i || i - j >= h {
            return 0.0;
        }
        let l = i - j;
        let index = match d.kind {
            mfc_formats::BandMfKind::General => i * h + l,
            _ => l,
        };
        f64::from(d.encoder.get(index).unwrap())
    })
}

fn input(t: usize, dim: usize) -> Vec<f32> {
    let big = if t.is_multiple_of(5) { 4.0 } else { 0.3 };
    (0..dim)
        .map(|c| big * ((t * 3 + c * 7) % 9) as f32 / 9.0 - 0.1)
        .collect()
}

/// Every release of the stream against `f64` from the dense encoder, for both kinds, the prefix
/// sum and momentum with a cooldown, single participation and min-separation; the recorded
/// sensitivity against brute force; the workspace against `(b̂ + 2)·d` (`b̂·d` without a sum).
#[test]
fn replay_equals_the_dense_mechanism() {
    let (n, dim, bands) = (48, 3, 4);
    let momentum = Workload::Momentum {
        momentum: 0.9,
        schedule: Schedule::Cooldown {
            steps: 12,
            final_rate: 0.1,
        },
    };
    for workload in [Workload::PrefixSum, momentum] {
        let prefix = matches!(workload, Workload::PrefixSum);
        for p in [
            Participation::Single,
            Participation::min_separation(3, 16).unwrap(),
        ] {
            for kind in [BandMfKind::Toeplitz, BandMfKind::General] {
                let bytes = blob(&workload, n, p, kind, bands);
                let m = Mechanism::from_bytes(&bytes).unwrap();
                let c = dense_encoder(&m);
                let brute = brute_force_sensitivity(c.as_ref(), &p).unwrap();
                let recorded = m.header.sensitivity;
                assert!((recorded.value - brute).abs() <= 1e-12 * brute);
                assert!(recorded.method.is_exact());
                assert_eq!(
                    recorded.method == SensitivityMethod::OrthogonalColumns,
                    p != Participation::Single
                );
                let needed = BandMfStream::<ChaChaNoise>::workspace_len(&m, dim).unwrap();
                assert_eq!(needed, (bands + 2 * usize::from(prefix)) * dim);
                let mut inverse = Mat::<f64>::identity(n, n);
                c.solve_lower_triangular_in_place(inverse.as_mut());
                // B̂ = S C⁻¹ for the prefix sum, C⁻¹ itself for the noised inputs.
                let b = if prefix {
                    Workload::PrefixSum.matrix(n).unwrap() * &inverse
                } else {
                    inverse
                };
                let mut z = vec![vec![0.0f32; dim]; n];
                let mut reference = ChaChaNoise::from_seed(SEED).unwrap();
                for (t, row) in z.iter_mut().enumerate() {
                    reference.fill_standard_normal(t as u64, 0, row);
                }
                let scale = m.noise_stddev().unwrap();
                let zeta = m.header.clip_norm;
                let mut workspace = vec![f32::NAN; needed];
                let mut stream = BandMfStream::new(
                    m,
                    dim,
                    &mut workspace,
                    ChaChaNoise::from_seed(SEED).unwrap(),
                )
                .unwrap();
                assert_eq!(stream.releases_prefix_sums(), prefix);
                let mut sums = vec![0.0f64; dim];
                let mut out = vec![0.0f32; dim];
                for t in 0..n {
                    let x = input(t, dim);
                    let clip = mfc_tests::runtime_clip_factor(&x, zeta);
                    stream.step(&x, &mut out).unwrap();
                    let stddev = scale * b.row(t).norm_l2();
                    for k in 0..dim {
                        let clipped = f64::from(x[k]) * clip;
                        sums[k] += clipped;
                        let signal = if prefix { sums[k] } else { clipped };
                        let noise: f64 = (0..=t).map(|u| b[(t, u)] * f64::from(z[u][k])).sum();
                        let expected = signal + scale * noise;
                        let error = (f64::from(out[k]) - expected).abs();
                        assert!(
                            error <= 1e-5 * (expected.abs() + stddev),
                            "{} {p:?} {kind:?} step {t} coordinate {k}: {} vs {expected}",
                            workload.label(),
                            out[k]
                        );
                    }
                }
                assert_eq!(
                    stream.step(&input(n, dim), &mut out),
                    Err(Error::StreamFinished { steps: n as u32 })
                );
            }
        }
    }
}

/// A banded Toeplitz blob over 20 000 steps: the releases at sampled steps equal the prefix sums
/// plus `(S C⁻¹ Z)_t` from the series `r = 1/c` in `f64`, with `(b̂ + 2)·d` floats of state.
#[test]
fn a_long_toeplitz_stream_matches_its_series() {
    let (n, dim, bands) = (20_000, 2, 8);
    let p = Participation::min_separation(4, 5000).unwrap();
    let bytes = blob(&Workload::PrefixSum, n, p, BandMfKind::Toeplitz, bands);
    let m = Mechanism::from_bytes(&bytes).unwrap();
    let Decoder::BandMf(d) = m.decoder else {
        panic!()
    };
    let c: Vec<f64> = d.encoder.iter().map(f64::from).collect();
    // r = 1/c, then its prefix sums: row t of S C⁻¹ is β_t, …, β_0.
    let mut r = vec![0.0; n];
    for k in 0..n {
        let mut total = if k == 0 { 1.0 } else { 0.0 };
        for l in 1..=k.min(bands - 1) {
            total -= c[l] * r[k - l];
        }
        r[k] = total / c[0];
    }
    let beta: Vec<f64> = r
        .iter()
        .scan(0.0, |s, x| {
            *s += x;
            Some(*s)
        })
        .collect();
    let mut z = vec![[0.0f32; 2]; n];
    let mut reference = ChaChaNoise::from_seed(SEED).unwrap();
    for (t, row) in z.iter_mut().enumerate() {
        reference.fill_standard_normal(t as u64, 0, row);
    }
    let needed = BandMfStream::<ChaChaNoise>::workspace_len(&m, dim).unwrap();
    assert_eq!(needed, (bands + 2) * dim);
    let mut workspace = vec![0.0f32; needed];
    let mut stream = BandMfStream::new(
        m,
        dim,
        &mut workspace,
        ChaChaNoise::from_seed(SEED).unwrap(),
    )
    .unwrap();
    let (scale, zeta) = (m.noise_stddev().unwrap(), m.header.clip_norm);
    let (mut sums, mut out, mut variance) = ([0.0f64; 2], [0.0f32; 2], 0.0);
    let mut worst: f64 = 0.0;
    for t in 0..n {
        let x = input(t, dim);
        let clip = mfc_tests::runtime_clip_factor(&x, zeta);
        stream.step(&x, &mut out).unwrap();
        variance += beta[t] * beta[t];
        for k in 0..dim {
            sums[k] += f64::from(x[k]) * clip;
        }
        if !(t < 100 || t.is_multiple_of(1999) || t + 2 >= n) {
            continue;
        }
        for k in 0..dim {
            let noise: f64 = (0..=t).map(|u| beta[t - u] * f64::from(z[u][k])).sum();
            let expected = sums[k] + scale * noise;
            let error =
                (f64::from(out[k]) - expected).abs() / (expected.abs() + scale * variance.sqrt());
            worst = worst.max(error);
            assert!(
                error <= 1e-4,
                "step {t} coordinate {k}: {} vs {expected}",
                out[k]
            );
        }
    }
    eprintln!(
        "banded Toeplitz ({bands} bands) over {n} steps, d = {dim}: worst relative error {worst:.2e}"
    );
}

/// Refused calls leave the stream as it was: a twin that never saw them releases the same bits.
#[test]
fn refused_calls_change_nothing() {
    let bytes = blob(
        &Workload::PrefixSum,
        20,
        Participation::Single,
        BandMfKind::General,
        3,
    );
    let m = Mechanism::from_bytes(&bytes).unwrap();
    let dim = 3;
    let needed = BandMfStream::<ChaChaNoise>::workspace_len(&m, dim).unwrap();
    let (mut wa, mut wb) = (vec![0.0f32; needed], vec![0.0f32; needed]);
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let mut a = BandMfStream::new(m, dim, &mut wa, noise()).unwrap();
    let mut b = BandMfStream::new(m, dim, &mut wb, noise()).unwrap();
    let (mut oa, mut ob) = ([0.0f32; 3], [0.0f32; 3]);
    for t in 0..20 {
        let x = input(t, dim);
        assert_eq!(
            a.step(&[1.0, f32::INFINITY, 0.0], &mut oa),
            Err(Error::NonFiniteInput { index: 1 })
        );
        assert!(matches!(
            a.step(&x[..2], &mut oa),
            Err(Error::DimensionMismatch { .. })
        ));
        assert!(matches!(
            a.step(&x, &mut [0.0; 4]),
            Err(Error::DimensionMismatch { .. })
        ));
        assert_eq!(
            a.step_clipped(&x, 1.5, &mut oa),
            Err(Error::InvalidClipFactor)
        );
        assert_eq!(
            a.step_clipped(&x, f32::NAN, &mut oa),
            Err(Error::InvalidClipFactor)
        );
        assert_eq!(a.steps_released(), t as u32);
        a.step(&x, &mut oa).unwrap();
        b.step(&x, &mut ob).unwrap();
        assert_eq!(oa.map(f32::to_bits), ob.map(f32::to_bits), "step {t}");
    }
    let mut small = vec![0.0f32; needed - 1];
    assert!(matches!(
        BandMfStream::new(m, dim, &mut small, noise()),
        Err(Error::WorkspaceTooSmall { .. })
    ));
    // Another form's stream refuses the blob, and this one refuses another form's.
    let mut ws = vec![0.0f32; 64];
    assert!(matches!(
        Stream::new(m, dim, &mut ws, noise()),
        Err(Error::UnsupportedDecoder)
    ));
}
