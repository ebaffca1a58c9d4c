//! Mechanisms built in code, with arbitrary fields — any band, rank, horizon, block, table
//! lengths and values, sensitivities and noise multipliers — reach a stream only through
//! `Mechanism::validate`, and whatever passes it goes through every public constructor and step
//! function of every stream form without a panic: each call succeeds or returns a typed error.
//! A mechanism that skips validation cannot be passed at all: the `compile_fail` example in the
//! crate docs (`runtime/src/lib.rs`) checks that it does not compile. Every form is covered
//! (banded plus low rank, FFT, BLT, BandMF), with any sensitivity method (a BLT recording a bound
//! for every horizon runs to the `u32` step limit), through the per-form streams and through
//! [`Replay`]; and a refused call leaves the stream as it was: a twin stream that never saw the
//! refused calls releases the same bits.

use mfc_formats::{
    BandMf, BandMfKind, BandedLowRank, Blt, Calibration, Decoder, ErrorSummary, F32Table, Fft,
    FftKind, Header, Mechanism, Neighbouring, Participation, PrivacyTarget, Sensitivity,
    SensitivityMethod, Validated, Workload, encode_f32s,
};
use mfc_runtime::checkpoint::{BlobFingerprint, ReleaseCounter, epoch_noise};
use mfc_runtime::{
    BandMfStream, BltStream, ChaChaNoise, Error, FftStream, Replay, Stream, clip_factor,
};
use proptest::prelude::*;

/// The most workspace a case may ask for (larger ones are refused by the test, not the runtime).
const MAX_WORKSPACE: usize = 1 << 18;

/// A coefficient out of range now and then: zero, huge, tiny, infinite, NaN or any bits.
fn edge_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        Just(f32::MAX),
        Just(-f32::MAX),
        Just(f32::MIN_POSITIVE),
        Just(1e-42),
        Just(f32::INFINITY),
        Just(f32::NAN),
        any::<f32>(),
    ]
}

/// A table as a valid blob has it, or damaged: one value replaced by an edge value, or one
/// value more or fewer.
fn damaged(table: Vec<f32>) -> BoxedStrategy<Vec<f32>> {
    let len = table.len();
    prop_oneof![
        12 => Just(table.clone()),
        1 => (0..len.max(1), edge_f32()).prop_map({
            let table = table.clone();
            move |(at, x)| {
                let mut t = table.clone();
                if let Some(v) = t.get_mut(at) {
                    *v = x;
                }
                t
            }
        }),
        1 => Just({
            let mut t = table.clone();
            t.push(1.0);
            t
        }),
        1 => Just(table[..len.saturating_sub(1)].to_vec()),
    ]
    .boxed()
}

/// `f64` header fields: in range, or now and then zero, negative, non-finite or extreme.
fn field() -> impl Strategy<Value = f64> {
    prop_oneof![
        40 => 1e-3f64..1e3,
        1 => Just(0.0),
        1 => Just(-1.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(1e300),
        1 => Just(1e-300),
        1 => any::<f64>(),
    ]
}

/// A count in `lo ..= hi`, or now and then 0, one past `hi`, `u32::MAX` or any value.
fn count(lo: u32, hi: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        20 => lo..=hi,
        1 => Just(0),
        1 => Just(hi.saturating_add(1)),
        1 => Just(u32::MAX),
        1 => any::<u32>(),
    ]
}

/// An arbitrary header (workload, horizon, participation, sensitivity, clip norm, calibration,
/// error figures) and the decoder's shape and table floats.
#[derive(Debug, Clone)]
struct Case {
    steps: u32,
    custom: bool,
    participation: Participation,
    replace_one: bool,
    sensitivity: f64,
    method: SensitivityMethod,
    clip_norm: f64,
    calibration: Option<(f64, Option<(f64, f64)>)>,
    error: [f64; 3],
    decoder: Shape,
    dim: usize,
    sigma: f64,
}

#[derive(Debug, Clone)]
enum Shape {
    Banded {
        band: u32,
        rank: u32,
        diagonals: Vec<f32>,
        left: Vec<f32>,
        right: Vec<f32>,
    },
    Fft {
        optimal: bool,
        block: u32,
        stamps: u32,
        kernel: Vec<f32>,
        generator: Vec<f32>,
    },
    Blt {
        theta: Vec<f32>,
        omega: Vec<f32>,
    },
    BandMf {
        toeplitz: bool,
        bands: u32,
        encoder: Vec<f32>,
    },
}

/// Every sensitivity method a blob can record.
fn method() -> impl Strategy<Value = SensitivityMethod> {
    use SensitivityMethod::*;
    prop_oneof![
        8 => Just(MaxColumnNorm),
        1 => Just(NonnegativeGram),
        1 => Just(SpectralBound),
        1 => Just(AbsoluteGramBound),
        1 => Just(GeneratorResidualBound),
        1 => Just(OrthogonalColumns),
        1 => Just(NonincreasingToeplitz),
        1 => Just(PatternSearchBound),
        1 => Just(ToeplitzMajorantBound),
        2 => Just(BltTailBound),
    ]
}

/// `n` finite coefficients in `[−2, 2]`.
fn finite(n: usize) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-2.0f32..2.0, n)
}

/// A decoder and the horizon its tables are for: valid shapes and values, then perhaps damaged
/// (a field out of range, a table one value off, a bad coefficient).
fn shape() -> BoxedStrategy<(Shape, u32)> {
    // h = 0 now and then, with tables for it: the `band: 0` of the issue.
    let band = prop_oneof![12 => 1usize..9, 1 => Just(0usize)];
    let banded = (1usize..40, band, 0usize..4)
        .prop_flat_map(|(n, h, r)| {
            let h = h.min(n);
            // B̂[i, i−k] for k < h: zero above the diagonal, a main diagonal away from zero.
            let diagonals =
                proptest::collection::vec((0.25f32..2.0, any::<bool>(), -2.0f32..2.0), n * h)
                    .prop_map(move |draws| {
                        draws
                            .into_iter()
                            .enumerate()
                            .map(|(idx, (main, negative, other))| match (idx / h, idx % h) {
                                (i, k) if k > i => 0.0,
                                (_, 0) if negative => -main,
                                (_, 0) => main,
                                _ => other,
                            })
                            .collect::<Vec<_>>()
                    })
                    .prop_flat_map(damaged);
            (
                count(1, n as u32)
                    .prop_map(move |band| if band <= n as u32 { h as u32 } else { band }),
                count(0, 3).prop_map(move |rank| if rank <= 3 { r as u32 } else { rank }),
                diagonals,
                finite(n * r).prop_flat_map(damaged),
                finite(n * r).prop_flat_map(damaged),
                Just(n as u32),
            )
                .prop_map(|(band, rank, diagonals, left, right, n)| {
                    (
                        Shape::Banded {
                            band,
                            rank,
                            diagonals,
                            left,
                            right,
                        },
                        n,
                    )
                })
        })
        .boxed();
    let fft = (any::<bool>(), 1usize..9, 1u32..5)
        .prop_flat_map(|(optimal, m, stamps)| {
            let generator = (0.1f32..2.0, finite(m.saturating_sub(1)))
                .prop_map(|(x0, rest)| [vec![x0], rest].concat())
                .prop_flat_map(damaged);
            (
                count(1, m as u32).prop_map(move |b| if b <= m as u32 { m as u32 } else { b }),
                count(1, stamps).prop_map(move |s| if s <= stamps { stamps } else { s }),
                finite(2 * m).prop_flat_map(damaged),
                if optimal {
                    generator.boxed()
                } else {
                    Just(Vec::new()).boxed()
                },
            )
                .prop_map(move |(block, s, kernel, generator)| {
                    (
                        Shape::Fft {
                            optimal,
                            block,
                            stamps: s,
                            kernel,
                            generator,
                        },
                        m as u32 * stamps,
                    )
                })
        })
        .boxed();
    let blt = (1usize..6, 1u32..200)
        .prop_flat_map(|(m, n)| {
            let theta = proptest::collection::vec(0.01f32..0.999, m).prop_flat_map(damaged);
            (theta, finite(m).prop_flat_map(damaged))
                .prop_map(move |(theta, omega)| (Shape::Blt { theta, omega }, n))
        })
        .boxed();
    // BandMF: `C[i, i−l]` for `l < b̂`, general (`n × b̂`, `+0.0` above the diagonal) or Toeplitz
    // (`b̂` values); a diagonal away from zero, or now and then tiny (subnormal: refused) or
    // merely small (accepted, and the recursion may overflow: a typed error or non-finite
    // releases, never a panic).
    let diagonal = prop_oneof![
        12 => 0.25f32..2.0,
        1 => Just(1e-42f32),
        1 => Just(f32::MIN_POSITIVE),
        1 => Just(1e-3f32),
    ];
    let bandmf = (1usize..40, 1usize..6, any::<bool>())
        .prop_flat_map(move |(n, b, toeplitz)| {
            let b = b.min(n);
            let rows = if toeplitz { 1 } else { n };
            let encoder = proptest::collection::vec((diagonal.clone(), -2.0f32..2.0), rows * b)
                .prop_map(move |draws| {
                    draws
                        .into_iter()
                        .enumerate()
                        .map(|(idx, (main, other))| match (idx / b, idx % b) {
                            (_, 0) => main,
                            (i, l) if !toeplitz && l > i => 0.0,
                            _ => other,
                        })
                        .collect::<Vec<_>>()
                })
                .prop_flat_map(damaged);
            (
                count(1, n as u32).prop_map(
                    move |bands| {
                        if bands <= n as u32 { b as u32 } else { bands }
                    },
                ),
                encoder,
            )
                .prop_map(move |(bands, encoder)| {
                    (
                        Shape::BandMf {
                            toeplitz,
                            bands,
                            encoder,
                        },
                        n as u32,
                    )
                })
        })
        .boxed();
    prop_oneof![banded, fft, blt, bandmf].boxed()
}

fn participation(steps: u32) -> impl Strategy<Value = Participation> {
    let hi = steps.clamp(1, 1000);
    prop_oneof![
        2 => Just(Participation::Single),
        1 => (count(1, 8), count(1, hi)).prop_map(|(k, b)| Participation::FixedEpochOrder {
            max_participations: k,
            separation: b
        }),
        1 => (count(1, 8), count(1, hi)).prop_map(|(k, b)| Participation::MinSeparation {
            max_participations: k,
            min_separation: b
        }),
    ]
}

fn case() -> BoxedStrategy<Case> {
    shape()
        .prop_flat_map(|(decoder, n)| {
            let steps =
                prop_oneof![20 => Just(n), 1 => Just(0u32), 1 => Just(n + 1), 1 => Just(u32::MAX)];
            (Just(decoder), steps)
        })
        .prop_flat_map(|(decoder, steps)| {
            let target = (field(), prop_oneof![10 => 1e-12f64..0.5, 1 => field()]);
            (
                (
                    Just(steps),
                    any::<bool>(),
                    participation(steps),
                    any::<bool>(),
                ),
                (field(), method(), field()),
                proptest::option::weighted(0.9, (field(), proptest::option::of(target))),
                [field(), field(), field()],
                Just(decoder),
                prop_oneof![8 => 1usize..5, 1 => Just(0usize), 1 => Just(usize::MAX)],
                field(),
            )
        })
        .prop_map(
            |(
                (steps, custom, participation, replace_one),
                (sensitivity, method, clip_norm),
                calibration,
                error,
                decoder,
                dim,
                sigma,
            )| Case {
                steps,
                custom,
                participation,
                replace_one,
                sensitivity,
                method,
                clip_norm,
                calibration,
                error,
                decoder,
                dim,
                sigma,
            },
        )
        .boxed()
}

/// The case's tables as bytes (they must outlive the mechanism).
struct Bytes(Vec<Vec<u8>>);

impl Case {
    fn bytes(&self) -> Bytes {
        Bytes(match &self.decoder {
            Shape::Banded {
                diagonals,
                left,
                right,
                ..
            } => [diagonals, left, right]
                .map(|t| encode_f32s(t.iter().copied()))
                .to_vec(),
            Shape::Fft {
                kernel, generator, ..
            } => [kernel, generator]
                .map(|t| encode_f32s(t.iter().copied()))
                .to_vec(),
            Shape::Blt { theta, omega } => [theta, omega]
                .map(|t| encode_f32s(t.iter().copied()))
                .to_vec(),
            Shape::BandMf { encoder, .. } => vec![encode_f32s(encoder.iter().copied())],
        })
    }

    fn mechanism<'a>(&self, bytes: &'a Bytes) -> Mechanism<'a> {
        let t = |i: usize| F32Table::new(&bytes.0[i]).expect("whole f32 words");
        let decoder = match &self.decoder {
            Shape::Banded { band, rank, .. } => Decoder::BandedLowRank(BandedLowRank {
                band: *band,
                rank: *rank,
                diagonals: t(0),
                left: t(1),
                right: t(2),
            }),
            Shape::Fft {
                optimal,
                block,
                stamps,
                ..
            } => Decoder::Fft(Fft {
                kind: if *optimal {
                    FftKind::OptimalDecoder
                } else {
                    FftKind::Circulant
                },
                block: *block,
                stamps: *stamps,
                kernel: t(0),
                generator: t(1),
            }),
            Shape::Blt { .. } => Decoder::Blt(Blt {
                theta: t(0),
                omega: t(1),
            }),
            Shape::BandMf {
                toeplitz, bands, ..
            } => Decoder::BandMf(BandMf {
                kind: if *toeplitz {
                    BandMfKind::Toeplitz
                } else {
                    BandMfKind::General
                },
                bands: *bands,
                encoder: t(0),
            }),
        };
        Mechanism {
            header: Header {
                workload: if self.custom {
                    Workload::Custom { label: "arbitrary" }
                } else {
                    Workload::PrefixSum
                },
                steps: self.steps,
                participation: self.participation,
                neighbouring: if self.replace_one {
                    Neighbouring::ReplaceOne
                } else {
                    Neighbouring::AddOrRemove
                },
                sensitivity: Sensitivity {
                    value: self.sensitivity,
                    method: self.method,
                },
                clip_norm: self.clip_norm,
                calibration: self.calibration.map(|(sigma, target)| Calibration {
                    noise_multiplier: sigma,
                    target: target.map(|(epsilon, delta)| PrivacyTarget { epsilon, delta }),
                }),
                error: ErrorSummary {
                    sqrt_loss: self.error[0],
                    optimal_sqrt_loss: None,
                    max_step_stddev: self.error[1],
                    final_step_stddev: self.error[2],
                },
                generator: "arbitrary",
            },
            decoder,
        }
    }
}

const SEED: [u8; 32] = [0x3c; 32];

fn noise() -> ChaChaNoise {
    ChaChaNoise::from_seed(SEED).expect("a non-zero seed")
}

/// Rows for step `i`: ordinary, huge and tiny coordinates, and a non-finite one every fifth
/// step (which every stream must refuse without a panic).
fn row(i: u32, dim: usize) -> Vec<f32> {
    (0..dim)
        .map(|c| match (i as usize + c) % 5 {
            0 => 0.25 * i as f32,
            1 => f32::MAX,
            2 => -1e-30,
            3 if i % 5 == 4 => f32::NAN,
            _ => -3.0,
        })
        .collect()
}

/// Steps a stream through its horizon (at most 80 steps) with every step function, and one
/// more call past the end.
macro_rules! exercise {
    ($stream:expr, $dim:expr, $horizon:expr, noise: $noise:tt) => {{
        let stream = &mut $stream;
        let dim = $dim;
        let mut out = vec![0.0f32; dim];
        let mut short = vec![0.0f32; dim.saturating_sub(1)];
        for i in 0..$horizon.min(80) + 1 {
            let x = row(i, dim);
            let _ = stream.step(&x, &mut out);
            let _ = stream.step(&x, &mut short);
            let _ = stream.step(&x[..dim.saturating_sub(1)], &mut out);
            let examples = [x.clone(), row(i + 1, dim)].concat();
            let _ = stream.step_examples(&examples, &mut out);
            let _ = stream.step_examples(&examples[1..], &mut out);
            exercise!(@noise $noise, stream, out, short);
        }
    }};
    (@noise yes, $stream:ident, $out:ident, $short:ident) => {
        let _ = $stream.step_noise(&mut $short);
        let _ = $stream.step_noise(&mut $out);
    };
    (@noise no, $stream:ident, $out:ident, $short:ident) => {};
}

/// Every constructor and step function of every form, for a validated mechanism.
fn exercise_all(m: Validated<'_>, dim: usize, sigma: f64, blob: &[u8]) {
    let horizon = m.steps();
    // Verification and the policy never panic: a verdict or a typed refusal, whatever the
    // scratch (sized, empty) and the budget.
    let mut scratch = vec![f64::NAN; mfc_runtime::verify::scratch_len(&m).min(1 << 16)];
    for budget in [0, 1 << 20] {
        let _ = mfc_runtime::verify::verify(&m, &mut scratch, budget);
        let _ = mfc_runtime::verify::verify(&m, &mut [], budget);
    }
    let policy = mfc_runtime::policy::Policy {
        floor: mfc_runtime::policy::Floor::Epsilon {
            max: 1.0,
            delta: 1e-6,
        },
        max_operations: 1 << 20,
        refuse_unverifiable: true,
        admit_unbounded_horizon: false,
    };
    let _ = mfc_runtime::policy::admit(&m, Some(sigma), &policy, &mut scratch);
    // A workspace of the length asked for (NaN-filled: streams must zero it), if it is small.
    let sized = |len: Result<usize, Error>| -> Option<Vec<f32>> {
        let len = len.ok().filter(|&l| l <= MAX_WORKSPACE)?;
        Some(vec![f32::NAN; len])
    };
    if let Some(mut workspace) = sized(Stream::<ChaChaNoise>::workspace_len(&m, dim)) {
        for explicit in [false, true] {
            let stream = if explicit {
                Stream::with_noise_multiplier(m, dim, &mut workspace, noise(), sigma)
            } else {
                Stream::new(m, dim, &mut workspace, noise())
            };
            if let Ok(mut s) = stream {
                exercise!(s, dim, horizon, noise: yes);
                let x = row(0, dim);
                let _ = s.step_clipped(&x, clip_factor(&x, s.clip_norm()), &mut vec![0.0; dim]);
            }
        }
        // Shards: the middle coordinates of a row one wider on each side.
        if let Some(row_dim) = dim.checked_add(2) {
            if let Ok(mut shard) = Stream::shard(m, row_dim, 1..dim + 1, &mut workspace, noise()) {
                let x = row(1, dim);
                for clip in [0.5, f32::NAN, 2.0] {
                    let _ = shard.step_clipped(&x, clip, &mut vec![0.0; dim]);
                }
                let _ = shard.step(&x, &mut vec![0.0; dim]);
                let _ = shard.step_examples(&x, &mut vec![0.0; dim]);
                let _ = shard.step_noise(&mut vec![0.0; dim]);
            }
            let _ = Stream::shard_with_noise_multiplier(
                m,
                row_dim,
                dim..1,
                &mut workspace,
                noise(),
                sigma,
            );
        }
        // Checkpoint and restore, through the blob's fingerprint.
        if let Ok((loaded, fingerprint)) = BlobFingerprint::load(blob) {
            let counter = ReleaseCounter::new(1, 0);
            let key = epoch_noise(&SEED, &counter).expect("epoch 1");
            if let Ok(mut s) = Stream::new(loaded, dim, &mut workspace, key) {
                let _ = s.step(&row(0, dim), &mut vec![0.0; dim]);
                let mut slot = vec![0u8; s.checkpoint_capacity()];
                let written = s.checkpoint(&fingerprint, &counter, &mut slot);
                let key = epoch_noise(&SEED, &counter).expect("epoch 1");
                let mut again = vec![0.0f32; workspace.len()];
                if let (Ok(len), Ok(mut fresh)) =
                    (written, Stream::new(loaded, dim, &mut again, key))
                {
                    let _ = fresh.restore(&fingerprint, &slot[..len], &counter);
                    let _ = fresh.restore(&fingerprint, &slot[..len / 2], &counter);
                    exercise!(fresh, dim, horizon, noise: yes);
                }
            }
        }
    }
    if let Some(mut workspace) = sized(BltStream::<ChaChaNoise>::workspace_len(&m, dim)) {
        if let Ok(mut s) = BltStream::new(m, dim, &mut workspace, noise()) {
            exercise!(s, dim, horizon, noise: no);
        }
        if let Ok(mut s) = BltStream::with_noise_multiplier(m, dim, &mut workspace, noise(), sigma)
        {
            exercise!(s, dim, horizon, noise: no);
        }
    }
    if let Some(mut workspace) = sized(FftStream::<ChaChaNoise>::workspace_len(&m, dim)) {
        if let Ok(mut s) = FftStream::new(m, dim, &mut workspace, noise()) {
            exercise!(s, dim, horizon, noise: yes);
        }
        if let Ok(mut s) = FftStream::with_noise_multiplier(m, dim, &mut workspace, noise(), sigma)
        {
            exercise!(s, dim, horizon, noise: yes);
        }
    }
    if let Some(mut workspace) = sized(BandMfStream::<ChaChaNoise>::workspace_len(&m, dim)) {
        if let Ok(mut s) = BandMfStream::new(m, dim, &mut workspace, noise()) {
            exercise!(s, dim, horizon, noise: no);
            let x = row(0, dim);
            let _ = s.step_clipped(&x, clip_factor(&x, s.clip_norm()), &mut vec![0.0; dim]);
        }
        if let Ok(mut s) =
            BandMfStream::with_noise_multiplier(m, dim, &mut workspace, noise(), sigma)
        {
            exercise!(s, dim, horizon, noise: no);
        }
        if let Some(row_dim) = dim.checked_add(2) {
            if let Ok(mut shard) =
                BandMfStream::shard(m, row_dim, 1..dim + 1, &mut workspace, noise())
            {
                let x = row(1, dim);
                for clip in [0.5, f32::NAN, 2.0] {
                    let _ = shard.step_clipped(&x, clip, &mut vec![0.0; dim]);
                }
                exercise!(shard, dim, horizon, noise: no);
            }
        }
    }
    if let Some(mut workspace) = sized(Replay::workspace_len(&m, dim)) {
        if let Ok(mut s) = Replay::open(m, dim, &mut workspace, noise()) {
            exercise!(s, dim, horizon, noise: yes);
        }
        if let Ok(mut s) =
            Replay::open_with_noise_multiplier(m, dim, &mut workspace, noise(), sigma)
        {
            exercise!(s, dim, horizon, noise: yes);
        }
    }
    refusals_change_nothing(m, dim);
}

/// A refused call leaves the stream as it was: stream `a` is offered, before each step, a
/// release row too short, an input row too short, examples that are not whole rows, a row with
/// a NaN; each must be refused. Then `a` and a
/// twin `b` that never saw those calls take the same step and must release the same bits (or
/// refuse it alike), through [`Replay`], for every form.
fn refusals_change_nothing(m: Validated<'_>, dim: usize) {
    let Some(len) = Replay::workspace_len(&m, dim)
        .ok()
        .filter(|&l| l <= MAX_WORKSPACE && (1..=16).contains(&dim))
    else {
        return;
    };
    let (mut wa, mut wb) = (vec![f32::NAN; len], vec![f32::NAN; len]);
    let (Ok(mut a), Ok(mut b)) = (
        Replay::open(m, dim, &mut wa, noise()),
        Replay::open(m, dim, &mut wb, noise()),
    ) else {
        return;
    };
    let prefix = a.releases_prefix_sums();
    for i in 0..a.horizon().min(40) + 1 {
        let x: Vec<f32> = (0..dim).map(|c| (i as f32 - c as f32) * 0.37).collect();
        let mut bad = x.clone();
        bad[dim - 1] = f32::NAN;
        let (mut out, mut short) = (vec![0.0f32; dim], vec![0.0f32; dim - 1]);
        assert!(a.step(&x, &mut short).is_err());
        assert!(a.step(&x[..dim - 1], &mut out).is_err());
        assert!(a.step(&bad, &mut out).is_err());
        assert!(a.step_noise(&mut short).is_err());
        if dim > 1 {
            // Not whole rows (every length is whole rows of one coordinate).
            let two = [x.clone(), x.clone()].concat();
            assert!(a.step_examples(&two[1..], &mut out).is_err());
        }
        let (mut ra, mut rb) = (vec![0.0f32; dim], vec![0.0f32; dim]);
        let (got_a, got_b) = if prefix {
            let examples = [x.clone(), x.iter().map(|v| -v).collect()].concat();
            if i % 2 == 0 {
                (a.step(&x, &mut ra), b.step(&x, &mut rb))
            } else {
                (
                    a.step_examples(&examples, &mut ra),
                    b.step_examples(&examples, &mut rb),
                )
            }
        } else {
            (a.step_noise(&mut ra), b.step_noise(&mut rb))
        };
        assert_eq!(got_a, got_b, "step {i}");
        let bits = |r: &[f32]| r.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&ra),
            bits(&rb),
            "step {i}: a refused call changed the stream"
        );
        assert_eq!(a.steps_released(), b.steps_released());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Arbitrary mechanisms built in code: `validate` refuses them with a typed error or returns
    /// a `Validated` one, which every constructor and step function takes without a panic; the
    /// validated mechanism also round-trips through bytes.
    #[test]
    fn arbitrary_mechanisms_never_panic(case in case()) {
        let bytes = case.bytes();
        let m = case.mechanism(&bytes);
        let Ok(valid) = m.validate() else {
            prop_assert!(m.to_vec().is_err(), "an invalid mechanism was written");
            return Ok(());
        };
        // Bytes for the checkpoint's fingerprint; empty if encoding failed (asserted below).
        let blob = valid.to_vec().unwrap_or_default();
        exercise_all(valid, case.dim, case.sigma, &blob);
        prop_assert_eq!(Mechanism::from_bytes(&blob).expect("a validated mechanism round-trips"), valid);
    }
}

/// The case of the issue: a banded mechanism with `band: 0` built in code is refused by
/// `validate`, so it never reaches `Stream::step` (where `i mod h` would divide by zero).
#[test]
fn a_zero_band_is_refused_before_any_stream() {
    let case = Case {
        steps: 4,
        custom: false,
        participation: Participation::Single,
        replace_one: false,
        sensitivity: 1.0,
        method: SensitivityMethod::MaxColumnNorm,
        clip_norm: 1.0,
        calibration: Some((1.0, None)),
        error: [1.0; 3],
        decoder: Shape::Banded {
            band: 0,
            rank: 0,
            diagonals: Vec::new(),
            left: Vec::new(),
            right: Vec::new(),
        },
        dim: 1,
        sigma: 1.0,
    };
    let bytes = case.bytes();
    assert_eq!(
        case.mechanism(&bytes).validate(),
        Err(mfc_formats::Error::InvalidField {
            field: "decoder.band"
        })
    );
}
