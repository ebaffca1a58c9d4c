//! Training steps on shards (`step_examples_clipped`): a shard given its coordinates of each of a
//! step's examples and each whole example's clip factor (`clip_factor` of the whole row) releases
//! exactly, bit for bit, its coordinates of the unsharded `step_examples` — banded prefix sums,
//! BandMF prefix sums and BandMF under another workload (momentum), for several splits, steps of
//! any number of examples (none included) and an all-zero example — through [`Replay`], which
//! also refuses it for the forms without shards. A whole-row stream given the computed factors
//! releases what `step_examples` releases. Refusals (factor count, range, and the checks of
//! `step_examples`) change nothing. The reference is the unsharded `step_examples`, whose
//! clipping `per_example.rs` checks against the definition.

use std::ops::Range;

mod common;

use common::{Gen, bandmf, encoder_table, mechanism, tables};
use mfc_formats::{
    BandMfKind, Blt, Decoder, F32Table, Fft, FftKind, Mechanism, Validated, Workload, encode_f32s,
};
use mfc_runtime::forms::CHUNK;
use mfc_runtime::{
    BandMfStream, BlobFingerprint, ChaChaNoise, Error, ReleaseCounter, Replay, Stream, clip_factor,
    epoch_noise,
};

const SEED: [u8; 32] = *b"shards of examples, bit for bit!";
const ZETA: f32 = 2.0;

fn bits(row: &[f32]) -> Vec<u32> {
    row.iter().map(|x| x.to_bits()).collect()
}

/// The examples of step `i`, rows of `dim`: a number in `0..6` (none at every fourth step), of
/// norms from well below `ζ` to well above it, and one all-zero example (factor 1) now and then.
fn examples(i: usize, dim: usize) -> Vec<f32> {
    let mut g = Gen(i as u64 * 31 + 5);
    let m = if i % 4 == 1 {
        0
    } else {
        ((g.next() + 0.5) * 6.0) as usize
    };
    let mut out = Vec::with_capacity(m * dim);
    for e in 0..m {
        let scale = match (i + e) % 4 {
            0 => 0.0,
            1 => 0.01,
            2 => 1.0,
            _ => 40.0,
        };
        out.extend((0..dim).map(|_| scale * g.next()));
    }
    out
}

/// The whole-row clip factors of `examples` (rows of `dim`).
fn factors(examples: &[f32], dim: usize) -> Vec<f32> {
    examples
        .chunks_exact(dim)
        .map(|row| clip_factor(row, ZETA))
        .collect()
}

/// Coordinates `range` of each example.
fn columns(examples: &[f32], dim: usize, range: &Range<usize>) -> Vec<f32> {
    examples
        .chunks_exact(dim)
        .flat_map(|row| row[range.clone()].iter().copied())
        .collect()
}

/// The releases of the unsharded `step_examples`, step by step.
fn unsharded(m: Validated<'_>, dim: usize) -> Vec<Vec<u32>> {
    let mut ws = vec![0.0f32; Replay::workspace_len(&m, dim).unwrap()];
    let mut stream = Replay::open(m, dim, &mut ws, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    let mut out = vec![0.0f32; dim];
    (0..m.header.steps as usize)
        .map(|i| {
            stream.step_examples(&examples(i, dim), &mut out).unwrap();
            bits(&out)
        })
        .collect()
}

/// The same releases assembled from one shard per range (`Replay::shard`), each stepped with its
/// columns of the examples and the whole examples' factors, `factors_of` giving the factors of
/// a step's examples.
fn sharded(
    m: Validated<'_>,
    dim: usize,
    ranges: &[Range<usize>],
    factors_of: impl Fn(&[f32]) -> Vec<f32>,
) -> Vec<Vec<u32>> {
    let mut workspaces: Vec<Vec<f32>> = ranges
        .iter()
        .map(|r| vec![0.0f32; Replay::workspace_len(&m, r.len()).unwrap()])
        .collect();
    let mut shards: Vec<Replay<'_, ChaChaNoise>> = ranges
        .iter()
        .zip(workspaces.iter_mut())
        .map(|(r, w)| {
            Replay::shard(m, dim, r.clone(), w, ChaChaNoise::from_seed(SEED).unwrap()).unwrap()
        })
        .collect();
    let mut out = vec![0.0f32; dim];
    (0..m.header.steps as usize)
        .map(|i| {
            let batch = examples(i, dim);
            let clips = factors_of(&batch);
            for (shard, r) in shards.iter_mut().zip(ranges) {
                let part = columns(&batch, dim, r);
                if r.len() < dim {
                    assert_eq!(
                        shard.step_examples(&part, &mut out[r.clone()]),
                        Err(Error::ClipFactorRequired)
                    );
                }
                shard
                    .step_examples_clipped(&part, &clips, &mut out[r.clone()])
                    .unwrap();
            }
            bits(&out)
        })
        .collect()
}

/// Splits of `0..dim` into 1 (the whole row), 2, 3 and 4 shards, aligned and not.
fn splits(dim: usize) -> Vec<Vec<Range<usize>>> {
    let cuts = [
        vec![],
        vec![dim / 2],
        vec![1, dim - 1],
        vec![dim / 3, 2 * dim / 3],
        vec![1, dim / 2, dim / 2 + 1],
    ];
    cuts.iter()
        .map(|c| {
            let bounds: Vec<usize> = [0].iter().chain(c).chain([dim].iter()).copied().collect();
            bounds.windows(2).map(|w| w[0]..w[1]).collect()
        })
        .collect()
}

/// The blobs of the sharded forms: banded prefix sums, BandMF prefix sums (general and Toeplitz)
/// and BandMF momentum (another workload: the stream releases the noised sum).
fn each_blob(steps: usize, check: impl Fn(Validated<'_>)) {
    let t = tables(steps, 3, 2, 1);
    check(mechanism(&t, Workload::PrefixSum, f64::from(ZETA)));
    for (kind, bands, seed) in [(BandMfKind::General, 3, 2), (BandMfKind::Toeplitz, 4, 3)] {
        let e = encoder_table(kind, steps, bands, seed);
        for workload in [Workload::PrefixSum, Workload::Custom { label: "momentum" }] {
            check(bandmf(&e, workload, f64::from(ZETA)));
        }
    }
}

#[test]
fn shards_of_examples_equal_the_unsharded_step_bit_for_bit() {
    const DIM: usize = 11;
    each_blob(16, |m| {
        let whole = unsharded(m, DIM);
        for ranges in splits(DIM) {
            let got = sharded(m, DIM, &ranges, |batch| factors(batch, DIM));
            assert_eq!(got, whole, "{:?}, {ranges:?}", m.decoder);
        }
    });
}

/// Rows longer than a step's chunk ([`CHUNK`]): shards smaller than a chunk, and one that crosses
/// the chunk boundary of the unsharded row, see the same operations.
#[test]
fn shards_of_examples_across_chunks_equal_the_unsharded_step() {
    let dim = CHUNK + 37;
    each_blob(5, |m| {
        let whole = unsharded(m, dim);
        let cut = CHUNK / 2 + 1;
        let ranges = [0..cut, cut..CHUNK + 3, CHUNK + 3..dim];
        assert_eq!(sharded(m, dim, &ranges, |b| factors(b, dim)), whole);
    });
}

/// The factors matter and are each example's own: swapping two examples' factors (two shards
/// handing each other's factors amount to it), or a shard clipping its own columns instead of
/// the whole example, changes the releases.
#[test]
fn wrong_factors_change_the_releases() {
    const DIM: usize = 11;
    each_blob(16, |m| {
        let whole = unsharded(m, DIM);
        let ranges = [0..4, 4..DIM];
        let swapped = sharded(m, DIM, &ranges, |batch| {
            let mut f = factors(batch, DIM);
            if let Some(last) = f.len().checked_sub(1) {
                f.swap(0, last);
            }
            f
        });
        assert_ne!(swapped, whole);
        let own = |batch: &[f32]| {
            // Each shard's own columns clipped by themselves: not the whole examples' factors.
            columns(batch, DIM, &(0..4))
                .chunks_exact(4)
                .map(|row| clip_factor(row, ZETA))
                .collect::<Vec<_>>()
        };
        assert_ne!(sharded(m, DIM, &ranges, own), whole);
    });
}

/// A whole-row stream takes the caller's factors too: with those of `clip_factor` it releases
/// what `step_examples` releases; with others (here all 1: no clipping) something else.
#[test]
fn a_whole_row_stream_given_the_factors_releases_step_examples() {
    const DIM: usize = 6;
    each_blob(12, |m| {
        let whole = unsharded(m, DIM);
        let mut ws = vec![0.0f32; Replay::workspace_len(&m, DIM).unwrap()];
        let noise = ChaChaNoise::from_seed(SEED).unwrap();
        let mut s = Replay::open(m, DIM, &mut ws, noise).unwrap();
        let mut out = [0.0f32; DIM];
        let given: Vec<Vec<u32>> = (0..m.header.steps as usize)
            .map(|i| {
                let batch = examples(i, DIM);
                s.step_examples_clipped(&batch, &factors(&batch, DIM), &mut out)
                    .unwrap();
                bits(&out)
            })
            .collect();
        assert_eq!(given, whole);
        let whole_row = std::slice::from_ref(&(0..DIM));
        let unclipped = sharded(m, DIM, whole_row, |batch| vec![1.0; batch.len() / DIM]);
        assert_ne!(unclipped, whole);
    });
}

/// Refusals of a shard's training step — the factor count, a factor outside `[0, 1]`, and the
/// checks `step_examples` makes — change nothing: the shard that saw them releases the same
/// bits as one that did not. A finished stream refuses the next step; the forms without shards
/// refuse the call as they refuse `step_clipped`.
#[test]
fn refused_shard_steps_change_nothing() {
    const DIM: usize = 9;
    let range = 2..7;
    let w = range.len();
    each_blob(8, |m| {
        let run = |with_errors: bool| {
            let mut ws = vec![0.0f32; Replay::workspace_len(&m, w).unwrap()];
            let noise = ChaChaNoise::from_seed(SEED).unwrap();
            let mut s = Replay::shard(m, DIM, range.clone(), &mut ws, noise).unwrap();
            let mut out = vec![0.0f32; w];
            let mut all = Vec::new();
            for i in 0..8 {
                // At least two examples, so that each refusal below has something to refuse.
                let mut batch = examples(i, DIM);
                batch.extend(examples(i + 100, DIM));
                batch.extend((0..2 * DIM).map(|k| k as f32 - 8.0));
                let clips = factors(&batch, DIM);
                let part = columns(&batch, DIM, &range);
                let count = clips.len();
                if with_errors {
                    for wrong in [0, count - 1] {
                        assert_eq!(
                            s.step_examples_clipped(&part, &clips[..wrong], &mut out),
                            Err(Error::ClipFactorsShape {
                                examples: count,
                                factors: wrong,
                            })
                        );
                    }
                    let mut more = clips.clone();
                    more.push(1.0);
                    assert_eq!(
                        s.step_examples_clipped(&part, &more, &mut out),
                        Err(Error::ClipFactorsShape {
                            examples: count,
                            factors: count + 1
                        })
                    );
                    for bad in [-0.0001, 1.0001, f32::NAN, f32::INFINITY, -1.0] {
                        let mut wrong = clips.clone();
                        wrong[count - 1] = bad;
                        assert_eq!(
                            s.step_examples_clipped(&part, &wrong, &mut out),
                            Err(Error::InvalidClipFactor),
                            "{bad}"
                        );
                    }
                    assert_eq!(
                        s.step_examples_clipped(&part[..w + 2], &clips[..1], &mut out),
                        Err(Error::ExamplesShape { dim: w, len: w + 2 })
                    );
                    let mut bad = part.clone();
                    bad[w + 3] = f32::NAN;
                    assert_eq!(
                        s.step_examples_clipped(&bad, &clips, &mut out),
                        Err(Error::NonFiniteExample {
                            example: 1,
                            index: 3
                        })
                    );
                    let mut huge = part.clone();
                    huge[w + 2] = -ZETA * 1e30;
                    assert_eq!(
                        s.step_examples_clipped(&huge, &clips, &mut out),
                        Err(Error::ExampleTooLarge {
                            example: 1,
                            index: 2
                        })
                    );
                    assert!(matches!(
                        s.step_examples_clipped(&part, &clips, &mut out[..w - 1]),
                        Err(Error::DimensionMismatch { .. })
                    ));
                    assert_eq!(s.steps_released(), i as u32);
                }
                s.step_examples_clipped(&part, &clips, &mut out).unwrap();
                all.push(bits(&out));
            }
            assert_eq!(
                s.step_examples_clipped(&[], &[], &mut out),
                Err(Error::StreamFinished { steps: 8 })
            );
            all
        };
        assert_eq!(run(true), run(false), "{:?}", m.decoder);
    });
}

/// A banded blob of another workload has no running sum: its shards refuse training steps as
/// its whole rows do.
#[test]
fn a_banded_custom_workload_refuses_examples() {
    let t = tables(4, 2, 1, 1);
    let m = mechanism(&t, Workload::Custom { label: "A" }, 1.0);
    let mut ws = vec![0.0f32; 64];
    let noise = ChaChaNoise::from_seed(SEED).unwrap();
    let mut shard = Stream::shard(m, 10, 2..6, &mut ws, noise).unwrap();
    assert_eq!(
        shard.step_examples_clipped(&[0.5; 8], &[1.0, 1.0], &mut [0.0; 4]),
        Err(Error::WorkloadNotStreamable)
    );
    assert_eq!(shard.steps_released(), 0);
}

/// Caller's factors are trusted for privacy but not for the arithmetic: on a BandMF stream, wrong
/// factors (1 for examples far beyond `ζ`) whose sum would overflow `f32` are refused before
/// anything changes (`NonFiniteRelease`), where the bound `m·ζ` of whole-row factors would have
/// let an infinite release out.
#[test]
fn wrong_factors_cannot_overflow_a_bandmf_release() {
    let zeta = 2f64.powi(60);
    let e = encoder_table(BandMfKind::General, 4, 2, 7);
    for workload in [Workload::PrefixSum, Workload::Custom { label: "momentum" }] {
        let m = bandmf(&e, workload, zeta);
        let len = BandMfStream::<ChaChaNoise>::workspace_len(&m, 2).unwrap();
        let mut ws = vec![0.0f32; len];
        let noise = ChaChaNoise::from_seed(SEED).unwrap();
        let mut s = BandMfStream::shard(m, 4, 0..2, &mut ws, noise).unwrap();
        let big = f32::MAX / 1.5;
        let part = [big, 0.0, big, 0.0];
        let mut out = [0.0f32; 2];
        assert!(matches!(
            s.step_examples_clipped(&part, &[1.0, 1.0], &mut out),
            Err(Error::NonFiniteRelease { step: 0, index: 0 })
        ));
        assert_eq!(s.steps_released(), 0);
        // The whole examples' factors are tiny here, and the step goes through.
        let whole = [big, 0.0, 0.0, 0.0];
        let f = clip_factor(&whole, zeta as f32);
        s.step_examples_clipped(&part, &[f, f], &mut out).unwrap();
        assert!(out.iter().all(|x| x.is_finite()));
    }
}

/// The forms without shards refuse `step_examples_clipped` as they refuse `step_clipped`
/// (`UnsupportedDecoder`), even as a whole row, and change nothing.
#[test]
fn blt_and_fft_refuse_given_factors() {
    let t = tables(8, 2, 1, 1);
    let header = mechanism(&t, Workload::PrefixSum, f64::from(ZETA)).header;
    let (theta, omega) = (encode_f32s([0.9f32, 0.5]), encode_f32s([-0.3f32, -0.1]));
    let (kernel, generator) = (encode_f32s([1.0f32, 0.5, 0.25, 0.1]), encode_f32s([]));
    let decoders = [
        Decoder::Blt(Blt {
            theta: F32Table::new(&theta).unwrap(),
            omega: F32Table::new(&omega).unwrap(),
        }),
        Decoder::Fft(Fft {
            kind: FftKind::Circulant,
            block: 2,
            stamps: 4,
            kernel: F32Table::new(&kernel).unwrap(),
            generator: F32Table::new(&generator).unwrap(),
        }),
    ];
    for decoder in decoders {
        let m = Mechanism { header, decoder }.validate().unwrap();
        let mut ws = vec![0.0f32; Replay::workspace_len(&m, 3).unwrap()];
        let noise = ChaChaNoise::from_seed(SEED).unwrap();
        let mut s = Replay::open(m, 3, &mut ws, noise).unwrap();
        let mut out = [0.0f32; 3];
        let x = [0.5f32, -0.25, 4.0];
        assert_eq!(
            s.step_clipped(&x, 1.0, &mut out),
            Err(Error::UnsupportedDecoder)
        );
        assert_eq!(
            s.step_examples_clipped(&x, &[1.0], &mut out),
            Err(Error::UnsupportedDecoder)
        );
        assert_eq!(s.steps_released(), 0);
        s.step_examples(&x, &mut out).unwrap();
    }
}

/// A checkpoint of a shard restores into the same shard only: another range (of the same width
/// or not) is refused; the same range of a row of another width is accepted — its noise
/// coordinates are the same, and the restored stream continues the original bit for bit.
#[test]
fn a_shard_checkpoint_restores_into_the_same_coordinates_only() {
    const DIM: usize = 9;
    let e = encoder_table(BandMfKind::General, 10, 3, 11);
    let t = tables(10, 3, 2, 4);
    let blobs = [
        bandmf(&e, Workload::PrefixSum, f64::from(ZETA))
            .to_vec()
            .unwrap(),
        mechanism(&t, Workload::PrefixSum, f64::from(ZETA))
            .to_vec()
            .unwrap(),
    ];
    for bytes in &blobs {
        let (m, fp) = BlobFingerprint::load(bytes).unwrap();
        let counter = ReleaseCounter::new(1, 0);
        let noise = || epoch_noise(&[7; 32], &counter).unwrap();
        let range = 3..6;
        let steps = |s: &mut Replay<'_, ChaChaNoise>, from: usize, to: usize| {
            let mut out = vec![0.0f32; 3];
            (from..to)
                .map(|i| {
                    let batch = examples(i, DIM);
                    let part = columns(&batch, DIM, &range);
                    s.step_examples_clipped(&part, &factors(&batch, DIM), &mut out)
                        .unwrap();
                    bits(&out)
                })
                .collect::<Vec<_>>()
        };
        let len = Replay::workspace_len(&m, 3).unwrap();
        let mut ws = vec![0.0f32; len];
        let mut reference = Replay::shard(m, DIM, range.clone(), &mut ws, noise()).unwrap();
        let all = steps(&mut reference, 0, 10);
        let mut ws = vec![0.0f32; len];
        let mut first = Replay::shard(m, DIM, range.clone(), &mut ws, noise()).unwrap();
        steps(&mut first, 0, 4);
        let mut slot = vec![0u8; first.checkpoint_capacity()];
        let n = first
            .checkpoint(&fp, &ReleaseCounter::new(1, 4), &mut slot)
            .unwrap();
        let slot = &slot[..n];
        let released = ReleaseCounter::new(1, 4);
        for (row, other) in [
            (DIM, 0..3),
            (DIM, 6..9),
            (DIM, 2..6),
            (DIM, 3..7),
            (3, 0..3),
        ] {
            let mut ws = vec![0.0f32; Replay::workspace_len(&m, other.len()).unwrap()];
            let mut s = Replay::shard(m, row, other.clone(), &mut ws, noise()).unwrap();
            assert_eq!(
                s.restore(&fp, slot, &released),
                Err(Error::CheckpointMismatch {
                    field: "dimension or shard"
                }),
                "{other:?} of {row}"
            );
            assert_eq!(s.steps_released(), 0);
        }
        // The checkpoint records the shard's first coordinate and width, not the row's width.
        let mut ws = vec![0.0f32; len];
        let mut wider = Replay::shard(m, 2 * DIM, range.clone(), &mut ws, noise()).unwrap();
        wider.restore(&fp, slot, &released).unwrap();
        assert_eq!(steps(&mut wider, 4, 10), all[4..]);
    }
}
