//! Per-example clipping (`step_examples`): the runtime clips each of a step's examples to `ζ`
//! and adds them, so that one example — the unit of privacy of training — moves every release by
//! at most `ζ`, whatever the other examples are; in every stream form, refusing malformed
//! examples without changing anything.

mod common;

use common::{Gen, mechanism, tables, workspace};
use mfc_formats::{
    Blt, Calibration, Decoder, ErrorSummary, F32Table, Fft, FftKind, Header, Mechanism,
    Neighbouring, Participation, Sensitivity, SensitivityMethod, Validated, Workload, encode_f32s,
};
use mfc_runtime::{
    BandMfStream, BltStream, ChaChaNoise, Error, FftStream, Replay, Stream, clip_factor,
};

const SEED: [u8; 32] = *b"per-example clipping test seed!!";
const D: usize = 5;
const EXAMPLES: usize = 32;
const ZETA: f32 = 2.0;

/// `count` examples of `D` coordinates, each of L2 norm `3ζ` in a random direction.
fn examples(g: &mut Gen, count: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(count * D);
    for _ in 0..count {
        let row: Vec<f32> = (0..D).map(|_| g.next()).collect();
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        out.extend(row.iter().map(|x| x / norm * 3.0 * ZETA));
    }
    out
}

/// One ulp at `x`: the gap from `|x|` to the next `f32` (`x` finite).
fn ulp(x: f32) -> f64 {
    let above = f32::from_bits(x.abs().to_bits() + 1);
    f64::from(above) - f64::from(x.abs())
}

/// ‖a − b‖₂ in `f64`, and the rounding allowance of the two releases: 4 ulps of each
/// coordinate (each release is within 2 ulps of its exact value: the compensated sum, then the
/// addition of the noise).
fn distance(a: &[f32], b: &[f32]) -> (f64, f64) {
    let d2: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    let allowance: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| 2.0 * (ulp(x) + ulp(y)))
        .map(|u| u * u)
        .sum::<f64>()
        .sqrt();
    (d2.sqrt(), allowance)
}

/// The acceptance test: 32 examples per step, each of norm 3ζ; with one example removed at step
/// `t₀` (and everything else equal, including the noise seed), every release from `t₀` on moves
/// by at most ζ — and by almost exactly ζ, the removed example's clipped norm.
#[test]
fn removing_one_example_moves_every_release_by_at_most_zeta() {
    let t = tables(24, 3, 2, 17);
    let m = mechanism(&t, Workload::PrefixSum, f64::from(ZETA));
    for removed_at in [0usize, 5, 23] {
        for removed in [0usize, 13, EXAMPLES - 1] {
            let mut g = Gen(99);
            let (mut wa, mut wb) = (workspace(&m, D), workspace(&m, D));
            let noise = || ChaChaNoise::from_seed(SEED).unwrap();
            let mut with = Stream::new(m, D, &mut wa, noise()).unwrap();
            let mut without = Stream::new(m, D, &mut wb, noise()).unwrap();
            let (mut ra, mut rb) = ([0.0f32; D], [0.0f32; D]);
            for step in 0..24 {
                let batch = examples(&mut g, EXAMPLES);
                with.step_examples(&batch, &mut ra).unwrap();
                let mut neighbour = batch.clone();
                if step == removed_at {
                    neighbour.drain(removed * D..(removed + 1) * D);
                }
                without.step_examples(&neighbour, &mut rb).unwrap();
                let (moved, allowance) = distance(&ra, &rb);
                if step < removed_at {
                    assert_eq!(ra, rb, "step {step}: nothing removed yet");
                } else {
                    assert!(
                        moved <= f64::from(ZETA) + allowance,
                        "step {step}: moved {moved} > ζ = {ZETA} (+{allowance:e})"
                    );
                    assert!(moved >= f64::from(ZETA) * (1.0 - 1e-4) - allowance);
                }
            }
        }
    }
}

/// The same rule with whole-row clipping ([`Stream::step`] on the step's summed examples, as a
/// caller without `step_examples` would do after clipping each example itself): one example then
/// moves the clipped row, and the release, by far less than its own norm once the row is
/// clipped — the utility the whole-row clip gives up (the sum is scaled down to ζ).
#[test]
fn whole_row_clipping_shrinks_the_examples_sum() {
    let t = tables(4, 1, 0, 1);
    let m = mechanism(&t, Workload::PrefixSum, f64::from(ZETA));
    let mut g = Gen(5);
    let batch = examples(&mut g, EXAMPLES);
    let mut summed = [0.0f32; D];
    for example in batch.chunks_exact(D) {
        let f = clip_factor(example, ZETA);
        for (s, &x) in summed.iter_mut().zip(example) {
            *s += f * x;
        }
    }
    let (mut wa, mut wb) = (workspace(&m, D), workspace(&m, D));
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let mut per_example = Stream::new(m, D, &mut wa, noise()).unwrap();
    let mut whole_row = Stream::new(m, D, &mut wb, noise()).unwrap();
    let (mut ra, mut rb) = ([0.0f32; D], [0.0f32; D]);
    per_example.step_examples(&batch, &mut ra).unwrap();
    whole_row.step(&summed, &mut rb).unwrap();
    let norm = |r: &[f32]| r.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let summed_norm = norm(&summed);
    // The per-example release differs from the whole-row one by the part of the sum beyond ζ.
    let (gap, allowance) = distance(&ra, &rb);
    let factor = f64::from(clip_factor(&summed, ZETA));
    assert!(summed_norm > 2.0 * f64::from(ZETA), "{summed_norm}");
    assert!((gap - (1.0 - factor) * summed_norm).abs() <= 1e-4 * summed_norm + allowance);
}

/// One example is a row: `step_examples` with one example releases what `step` releases, bit
/// for bit; no examples release the noise alone, as a zero row does.
#[test]
fn one_example_is_a_step_and_none_is_a_zero_row() {
    let t = tables(6, 2, 1, 3);
    let m = mechanism(&t, Workload::PrefixSum, f64::from(ZETA));
    let mut g = Gen(11);
    let (mut wa, mut wb) = (workspace(&m, D), workspace(&m, D));
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let mut a = Stream::new(m, D, &mut wa, noise()).unwrap();
    let mut b = Stream::new(m, D, &mut wb, noise()).unwrap();
    let (mut ra, mut rb) = ([0.0f32; D], [0.0f32; D]);
    for step in 0..6 {
        let row = if step % 2 == 0 {
            examples(&mut g, 1)
        } else {
            vec![0.1; D]
        };
        a.step_examples(&row, &mut ra).unwrap();
        b.step(&row, &mut rb).unwrap();
        assert_eq!(ra.map(f32::to_bits), rb.map(f32::to_bits), "step {step}");
    }
    let mut wc = workspace(&m, D);
    let mut wd = workspace(&m, D);
    let mut c = Stream::new(m, D, &mut wc, noise()).unwrap();
    let mut e = Stream::new(m, D, &mut wd, noise()).unwrap();
    c.step_examples(&[], &mut ra).unwrap();
    e.step(&[0.0; D], &mut rb).unwrap();
    assert_eq!(ra, rb);
}

/// Malformed examples (not whole rows, a non-finite entry, a short release row) are refused in
/// every form, through [`Replay`], and change nothing: the stream that saw the refusals releases
/// the same bits as one that did not. A finished stream refuses the next step.
#[test]
fn refused_examples_change_nothing() {
    let t = tables(8, 2, 2, 7);
    let banded = mechanism(&t, Workload::PrefixSum, f64::from(ZETA));
    let (blt, fft) = (blt_bytes(), fft_bytes());
    let encoder = common::encoder_table(mfc_formats::BandMfKind::General, 8, 3, 23);
    let forms = [
        banded,
        blt_mechanism(&blt, 8),
        fft_mechanism(&fft, 8),
        common::bandmf(&encoder, Workload::PrefixSum, f64::from(ZETA)),
    ];
    for m in forms {
        let run = |with_errors: bool| {
            let mut g = Gen(3);
            let mut ws = vec![0.0f32; Replay::workspace_len(&m, D).unwrap()];
            let noise = ChaChaNoise::from_seed(SEED).unwrap();
            let mut s = Replay::open(m, D, &mut ws, noise).unwrap();
            let mut out = [0.0f32; D];
            let mut all = Vec::new();
            for _ in 0..8 {
                let batch = examples(&mut g, 4);
                if with_errors {
                    assert_eq!(
                        s.step_examples(&batch[..D + 2], &mut out),
                        Err(Error::ExamplesShape { dim: D, len: D + 2 })
                    );
                    let mut bad = batch.clone();
                    bad[2 * D + 3] = f32::NAN;
                    assert_eq!(
                        s.step_examples(&bad, &mut out),
                        Err(Error::NonFiniteExample {
                            example: 2,
                            index: 3
                        })
                    );
                    // Beyond 2⁹⁶·ζ an example is refused, not zeroed without a word.
                    let mut huge = batch.clone();
                    huge[D + 2] = -ZETA * 1e30;
                    assert_eq!(
                        s.step_examples(&huge, &mut out),
                        Err(Error::ExampleTooLarge {
                            example: 1,
                            index: 2
                        })
                    );

                    assert!(matches!(
                        s.step_examples(&batch, &mut out[..D - 1]),
                        Err(Error::DimensionMismatch { .. })
                    ));
                }
                s.step_examples(&batch, &mut out).unwrap();
                all.push(out.map(f32::to_bits));
            }
            assert_eq!(
                s.step_examples(&[], &mut out),
                Err(Error::StreamFinished { steps: 8 })
            );
            all
        };
        assert_eq!(run(true), run(false), "{:?}", m.decoder);
    }
}

/// A shard sees part of each example and cannot clip it; a custom workload has no sum.
#[test]
fn shards_and_custom_workloads_refuse_examples() {
    let t = tables(4, 2, 1, 1);
    let m = mechanism(&t, Workload::PrefixSum, 1.0);
    let mut ws = vec![0.0f32; 64];
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let mut shard = Stream::shard(m, 10, 2..6, &mut ws, noise()).unwrap();
    assert_eq!(
        shard.step_examples(&[0.5; 8], &mut [0.0; 4]),
        Err(Error::ClipFactorRequired)
    );
    let custom = mechanism(&t, Workload::Custom { label: "A" }, 1.0);
    let mut ws = vec![0.0f32; 64];
    let mut s = Stream::new(custom, 2, &mut ws, noise()).unwrap();
    assert_eq!(
        s.step_examples(&[0.5; 4], &mut [0.0; 2]),
        Err(Error::WorkloadNotStreamable)
    );
}

fn header(steps: u32) -> Header<'static> {
    Header {
        workload: Workload::PrefixSum,
        steps,
        participation: Participation::Single,
        neighbouring: Neighbouring::AddOrRemove,
        sensitivity: Sensitivity {
            value: 1.3,
            method: SensitivityMethod::MaxColumnNorm,
        },
        clip_norm: f64::from(ZETA),
        calibration: Some(Calibration {
            noise_multiplier: 0.7,
            target: None,
        }),
        error: ErrorSummary {
            sqrt_loss: 1.0,
            optimal_sqrt_loss: None,
            max_step_stddev: 1.0,
            final_step_stddev: 1.0,
        },
        generator: "per-example test",
    }
}

/// The tables of a two-buffer BLT: θ, then ω.
fn blt_bytes() -> [Vec<u8>; 2] {
    [encode_f32s([0.9f32, 0.5]), encode_f32s([-0.3f32, -0.1])]
}

fn blt_mechanism(tables: &[Vec<u8>; 2], steps: u32) -> Validated<'_> {
    Mechanism {
        header: header(steps),
        decoder: Decoder::Blt(Blt {
            theta: F32Table::new(&tables[0]).unwrap(),
            omega: F32Table::new(&tables[1]).unwrap(),
        }),
    }
    .validate()
    .unwrap()
}

/// The tables of a circulant FFT mechanism with blocks of 2 steps: the kernel, no generator.
fn fft_bytes() -> [Vec<u8>; 2] {
    [encode_f32s([1.0f32, 0.5, 0.25, 0.1]), encode_f32s([])]
}

fn fft_mechanism(tables: &[Vec<u8>; 2], steps: u32) -> Validated<'_> {
    Mechanism {
        header: header(steps),
        decoder: Decoder::Fft(Fft {
            kind: FftKind::Circulant,
            block: 2,
            stamps: steps / 2,
            kernel: F32Table::new(&tables[0]).unwrap(),
            generator: F32Table::new(&tables[1]).unwrap(),
        }),
    }
    .validate()
    .unwrap()
}

/// The BLT and FFT forms keep the same rule: one example removed moves every later release by
/// at most ζ.
#[test]
fn blt_and_fft_streams_clip_each_example() {
    let (blt, fft) = (blt_bytes(), fft_bytes());
    let (blt, fft) = (blt_mechanism(&blt, 10), fft_mechanism(&fft, 10));
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let check = |step_a: &mut dyn FnMut(&[f32], &mut [f32]),
                 step_b: &mut dyn FnMut(&[f32], &mut [f32])| {
        let mut g = Gen(21);
        let (mut ra, mut rb) = ([0.0f32; D], [0.0f32; D]);
        for step in 0..10 {
            let batch = examples(&mut g, EXAMPLES);
            step_a(&batch, &mut ra);
            let cut = if step == 3 { D } else { 0 };
            step_b(&batch[cut..], &mut rb);
            let (moved, allowance) = distance(&ra, &rb);
            if step >= 3 {
                assert!(moved <= f64::from(ZETA) + allowance, "step {step}: {moved}");
                assert!(moved >= f64::from(ZETA) * (1.0 - 1e-4) - allowance);
            }
        }
    };
    let len = BltStream::<ChaChaNoise>::workspace_len(&blt, D).unwrap();
    let (mut wa, mut wb) = (vec![0.0f32; len], vec![0.0f32; len]);
    let mut a = BltStream::new(blt, D, &mut wa, noise()).unwrap();
    let mut b = BltStream::new(blt, D, &mut wb, noise()).unwrap();
    check(
        &mut |x, out| a.step_examples(x, out).unwrap(),
        &mut |x, out| b.step_examples(x, out).unwrap(),
    );
    let len = FftStream::<ChaChaNoise>::workspace_len(&fft, D).unwrap();
    let (mut wa, mut wb) = (vec![0.0f32; len], vec![0.0f32; len]);
    let mut a = FftStream::new(fft, D, &mut wa, noise()).unwrap();
    let mut b = FftStream::new(fft, D, &mut wb, noise()).unwrap();
    check(
        &mut |x, out| a.step_examples(x, out).unwrap(),
        &mut |x, out| b.step_examples(x, out).unwrap(),
    );
}

/// BandMF keeps the rule for both of its releases: for the prefix sum, one example removed
/// moves every later release by at most ζ (and by almost exactly ζ); for another workload,
/// whose releases are the noised sums of each step, it moves that step's release alone.
#[test]
fn bandmf_streams_clip_each_example() {
    let t = common::encoder_table(mfc_formats::BandMfKind::General, 10, 3, 23);
    for workload in [Workload::PrefixSum, Workload::Custom { label: "momentum" }] {
        let m = common::bandmf(&t, workload, f64::from(ZETA));
        let len = BandMfStream::<ChaChaNoise>::workspace_len(&m, D).unwrap();
        let noise = || ChaChaNoise::from_seed(SEED).unwrap();
        let (mut wa, mut wb) = (vec![0.0f32; len], vec![0.0f32; len]);
        let mut a = BandMfStream::new(m, D, &mut wa, noise()).unwrap();
        let mut b = BandMfStream::new(m, D, &mut wb, noise()).unwrap();
        let mut g = Gen(21);
        let (mut ra, mut rb) = ([0.0f32; D], [0.0f32; D]);
        for step in 0..10 {
            let batch = examples(&mut g, EXAMPLES);
            a.step_examples(&batch, &mut ra).unwrap();
            let cut = if step == 3 { D } else { 0 };
            b.step_examples(&batch[cut..], &mut rb).unwrap();
            let (moved, allowance) = distance(&ra, &rb);
            let touched = step == 3 || (step > 3 && matches!(workload, Workload::PrefixSum));
            if touched {
                assert!(moved <= f64::from(ZETA) + allowance, "step {step}: {moved}");
                assert!(moved >= f64::from(ZETA) * (1.0 - 1e-4) - allowance);
            } else {
                assert_eq!(ra.map(f32::to_bits), rb.map(f32::to_bits), "step {step}");
            }
        }
        // Malformed examples are refused and change nothing; a shard cannot clip them.
        let (mut wc, mut wd) = (vec![0.0f32; len], vec![0.0f32; len]);
        let mut c = BandMfStream::new(m, D, &mut wc, noise()).unwrap();
        let mut d = BandMfStream::new(m, D, &mut wd, noise()).unwrap();
        let mut bad = examples(&mut Gen(5), 2);
        bad[D + 1] = f32::NAN;
        assert_eq!(
            c.step_examples(&bad, &mut ra),
            Err(Error::NonFiniteExample {
                example: 1,
                index: 1
            })
        );
        assert_eq!(
            c.step_examples(&bad[..D - 1], &mut ra),
            Err(Error::ExamplesShape { dim: D, len: D - 1 })
        );
        let good = examples(&mut Gen(6), 3);
        c.step_examples(&good, &mut ra).unwrap();
        d.step_examples(&good, &mut rb).unwrap();
        assert_eq!(ra.map(f32::to_bits), rb.map(f32::to_bits));
        let shard_len = BandMfStream::<ChaChaNoise>::workspace_len(&m, 2).unwrap();
        let mut ws = vec![0.0f32; shard_len];
        let mut shard = BandMfStream::shard(m, D, 0..2, &mut ws, noise()).unwrap();
        assert_eq!(
            shard.step_examples(&good, &mut [0.0; 2]),
            Err(Error::ExamplesShape { dim: 2, len: 3 * D })
        );
        assert_eq!(
            shard.step_examples(&good[..4], &mut [0.0; 2]),
            Err(Error::ClipFactorRequired)
        );
    }
}
