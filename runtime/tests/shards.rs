//! Scale-out: shards of a stream (and `ParallelStream`) release exactly, bit for bit, the
//! coordinates an unsharded stream releases, for aligned and unaligned splits; a shard cannot clip
//! by itself; and the fused, chunked step equals the textbook order of Algorithm 3 bit for bit on
//! rows spanning several chunks.
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use std::ops::Range;

mod common;

use common::{Gen, mechanism, tables};
use mfc_formats::{F32Table, Validated, Workload};
use mfc_runtime::forms::CHUNK;
use mfc_runtime::{ChaChaNoise, Error, NoiseSource, Stream, clip_factor};

const SEED: [u8; 32] = *b"shards equal the unsharded row!!";

/// Inputs whose norm is sometimes above ζ = 2, sometimes below.
fn input(i: usize, dim: usize) -> Vec<f32> {
    let mut g = Gen(i as u64 * 7 + 1);
    let scale = if i % 3 == 0 { 0.001 } else { 1.0 };
    (0..dim).map(|_| scale * g.next()).collect()
}

fn bits(row: &[f32]) -> Vec<u32> {
    row.iter().map(|x| x.to_bits()).collect()
}

/// Releases of an unsharded stream, step by step (`step` for prefix sums, else `step_noise`).
fn unsharded<N: NoiseSource>(m: Validated<'_>, dim: usize, noise: N) -> Vec<Vec<u32>> {
    let mut workspace = vec![0.0f32; Stream::<N>::workspace_len(&m, dim).unwrap()];
    let mut stream = Stream::new(m, dim, &mut workspace, noise).unwrap();
    let prefix = matches!(m.header.workload, Workload::PrefixSum);
    let mut out = vec![0.0f32; dim];
    (0..m.header.steps as usize)
        .map(|i| {
            if prefix {
                stream.step(&input(i, dim), &mut out).unwrap();
            } else {
                stream.step_noise(&mut out).unwrap();
            }
            bits(&out)
        })
        .collect()
}

/// The same releases assembled from one shard per range, each with its own generator.
fn sharded<N: NoiseSource>(
    m: Validated<'_>,
    dim: usize,
    ranges: &[Range<usize>],
    noise: impl Fn() -> N,
) -> Vec<Vec<u32>> {
    let mut workspaces: Vec<Vec<f32>> = ranges
        .iter()
        .map(|r| vec![0.0f32; Stream::<N>::workspace_len(&m, r.len()).unwrap()])
        .collect();
    let mut shards: Vec<Stream<'_, '_, N>> = ranges
        .iter()
        .zip(workspaces.iter_mut())
        .map(|(r, w)| Stream::shard(m, dim, r.clone(), w, noise()).unwrap())
        .collect();
    let prefix = matches!(m.header.workload, Workload::PrefixSum);
    let mut out = vec![0.0f32; dim];
    (0..m.header.steps as usize)
        .map(|i| {
            let x = input(i, dim);
            let clip = clip_factor(&x, 2.0);
            for (shard, r) in shards.iter_mut().zip(ranges) {
                assert_eq!(shard.offset(), r.start as u64);
                if prefix {
                    shard
                        .step_clipped(&x[r.clone()], clip, &mut out[r.clone()])
                        .unwrap();
                } else {
                    shard.step_noise(&mut out[r.clone()]).unwrap();
                }
            }
            bits(&out)
        })
        .collect()
}

/// Splits of `0..dim`: aligned to the noise blocks and the stream's chunks, and not.
fn splits(dim: usize) -> Vec<Vec<Range<usize>>> {
    let mut all = vec![vec![0..dim]];
    let cuts = [
        vec![dim / 2],
        vec![1, 7, dim / 3, dim - 1],
        vec![1024.min(dim - 1), (1024 + 517).min(dim - 1)],
        vec![CHUNK.min(dim - 1) - 3, CHUNK.min(dim - 1)],
    ];
    for c in cuts {
        let mut bounds = vec![0];
        for x in c {
            if x > *bounds.last().unwrap() && x < dim {
                bounds.push(x);
            }
        }
        bounds.push(dim);
        all.push(bounds.windows(2).map(|w| w[0]..w[1]).collect());
    }
    all
}

#[test]
fn shards_equal_the_unsharded_stream_bit_for_bit() {
    for (n, h, r) in [(12, 3, 2), (14, 6, 6), (6, 1, 0), (9, 4, 9)] {
        let t = tables(n, h, r, 1);
        for workload in [Workload::PrefixSum, Workload::Custom { label: "A" }] {
            let m = mechanism(&t, workload, 2.0);
            for dim in [5, 3000, CHUNK + 1500] {
                let whole = unsharded(m, dim, ChaChaNoise::from_seed(SEED).unwrap());
                for ranges in splits(dim) {
                    let parts = sharded(m, dim, &ranges, || ChaChaNoise::from_seed(SEED).unwrap());
                    assert!(
                        whole == parts,
                        "(n, h, r) = ({n}, {h}, {r}), d = {dim}, shards {ranges:?}"
                    );
                }
            }
        }
    }
}

/// The control: shards with different seeds do not reproduce the row.
#[test]
fn shards_with_another_seed_differ() {
    let t = tables(5, 2, 1, 1);
    let m = mechanism(&t, Workload::PrefixSum, 2.0);
    let whole = unsharded(m, 100, ChaChaNoise::from_seed(SEED).unwrap());
    let parts = sharded(m, 100, &[0..40, 40..100], || {
        ChaChaNoise::from_seed([3; 32]).unwrap()
    });
    assert_ne!(whole, parts);
}

#[cfg(feature = "insecure-simulation")]
#[test]
fn simulation_noise_shards_equal_the_unsharded_stream() {
    use mfc_runtime::InsecureSimulationNoise;
    let t = tables(10, 4, 3, 1);
    let m = mechanism(&t, Workload::PrefixSum, 2.0);
    let dim = 5000;
    let whole = unsharded(m, dim, InsecureSimulationNoise::from_seed(SEED).unwrap());
    for ranges in splits(dim) {
        let parts = sharded(m, dim, &ranges, || {
            InsecureSimulationNoise::from_seed(SEED).unwrap()
        });
        assert!(whole == parts, "{ranges:?}");
    }
    // And it is another generator than ChaCha20.
    assert_ne!(
        whole,
        unsharded(m, dim, ChaChaNoise::from_seed(SEED).unwrap())
    );
}

/// The fused pass, chunk by chunk, against Algorithm 3 written as whole-row passes in the
/// order the runtime documents, bit for bit, on rows of several chunks.
#[test]
fn the_fused_step_equals_the_textbook_order_bit_for_bit() {
    for (n, h, r) in [(10, 3, 2), (9, 6, 6), (4, 1, 1)] {
        let t = tables(n, h, r, 1);
        let m = mechanism(&t, Workload::PrefixSum, 2.0);
        let dim = 2 * CHUNK + 77;
        let got = unsharded(m, dim, ChaChaNoise::from_seed(SEED).unwrap());
        let table = |bytes: &[u8], i: usize| F32Table::new(bytes).unwrap().get(i).unwrap();
        // σ·ζ·sens as the runtime documents it: factors rounded up to f32, products, 3 ulps up.
        let up = |x: f64| {
            let y = x as f32;
            if f64::from(y) < x { y.next_up() } else { y }
        };
        let scale = f32::from_bits((up(0.7) * up(2.0) * up(1.3)).to_bits() + 3);
        let mut noise = ChaChaNoise::from_seed(SEED).unwrap();
        let mut z = vec![vec![0.0f32; dim]; n];
        let mut beta = vec![vec![0.0f32; dim]; r];
        let (mut sum, mut compensation) = (vec![0.0f32; dim], vec![0.0f32; dim]);
        for i in 0..n {
            if i >= h {
                for q in 0..r {
                    let c = table(&t.right, (i - h) * r + q);
                    for j in 0..dim {
                        beta[q][j] += c * z[i - h][j];
                    }
                }
            }
            noise.fill_standard_normal(i as u64, 0, &mut z[i]);
            let main = table(&t.diagonals, i * h) * scale;
            let mut y: Vec<f32> = z[i].iter().map(|&v| main * v).collect();
            for k in 1..=i.min(h - 1) {
                let c = table(&t.diagonals, i * h + k) * scale;
                for j in 0..dim {
                    y[j] += c * z[i - k][j];
                }
            }
            for q in 0..r {
                let c = table(&t.left, i * r + q) * scale;
                for j in 0..dim {
                    y[j] += c * beta[q][j];
                }
            }
            let x = input(i, dim);
            let clip = clip_factor(&x, 2.0);
            // The compensated sum (Kahan, `runtime/src/sum.rs`), then the release.
            for j in 0..dim {
                let addend = clip * x[j] - compensation[j];
                let t = sum[j] + addend;
                compensation[j] = (t - sum[j]) - addend;
                sum[j] = t;
                y[j] += sum[j] - compensation[j];
            }
            assert!(got[i] == bits(&y), "(n, h, r) = ({n}, {h}, {r}), step {i}");
        }
    }
}

#[test]
fn a_shard_needs_the_whole_rows_clip_factor() {
    let t = tables(6, 2, 1, 1);
    let m = mechanism(&t, Workload::PrefixSum, 2.0);
    let mut workspace = vec![0.0f32; 5 * 10];
    let mut shard = Stream::shard(
        m,
        30,
        10..20,
        &mut workspace,
        ChaChaNoise::from_seed(SEED).unwrap(),
    )
    .unwrap();
    let (x, mut out) = (vec![0.5f32; 10], vec![0.0f32; 10]);
    assert_eq!(shard.step(&x, &mut out), Err(Error::ClipFactorRequired));
    for bad in [f32::NAN, -0.1, 1.5, f32::INFINITY] {
        assert_eq!(
            shard.step_clipped(&x, bad, &mut out),
            Err(Error::InvalidClipFactor)
        );
    }
    assert_eq!(
        shard.step_clipped(&x[..9], 1.0, &mut out),
        Err(Error::DimensionMismatch {
            expected: 10,
            found: 9
        })
    );
    assert_eq!(shard.steps_released(), 0, "refused calls change nothing");
    assert_eq!(out, vec![0.0; 10]);
    shard.step_clipped(&x, 0.25, &mut out).unwrap();
    assert_eq!(shard.steps_released(), 1);
    // A "shard" covering the whole row is an ordinary stream and clips by itself.
    let mut w2 = vec![0.0f32; 5 * 10];
    let mut whole =
        Stream::shard(m, 10, 0..10, &mut w2, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
    whole.step(&x, &mut out).unwrap();
}

#[test]
fn invalid_shards_are_refused() {
    let t = tables(4, 1, 0, 1);
    let m = mechanism(&t, Workload::PrefixSum, 2.0);
    let mut workspace = vec![0.0f32; 64];
    for (row, range) in [(10, 3..3), (10, 5..11), (10, 12..20), (0, 0..0)] {
        #[allow(clippy::reversed_empty_ranges)]
        let result = Stream::shard(
            m,
            row,
            range.clone(),
            &mut workspace,
            ChaChaNoise::from_seed(SEED).unwrap(),
        );
        assert!(
            matches!(result, Err(Error::InvalidShard { start, end, row: rr })
                if start == range.start && end == range.end && rr == row),
            "{row} {range:?}"
        );
    }
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = Stream::shard(
        m,
        10,
        6..4,
        &mut workspace,
        ChaChaNoise::from_seed(SEED).unwrap(),
    );
    assert!(matches!(reversed, Err(Error::InvalidShard { .. })));
    let mut small = vec![0.0f32; 5];
    assert!(matches!(
        Stream::shard(
            m,
            10,
            2..8,
            &mut small,
            ChaChaNoise::from_seed(SEED).unwrap()
        ),
        Err(Error::WorkspaceTooSmall {
            needed: 18,
            found: 5
        })
    ));
}

#[cfg(feature = "parallel")]
mod parallel {
    use super::*;
    use mfc_runtime::noise::BLOCK;
    use mfc_runtime::parallel::{ParallelStream, shard_ranges};

    #[test]
    fn shard_ranges_cover_the_row_in_block_multiples() {
        for dim in [1, 5, 1024, 1025, 3000, 10_000, 100_000] {
            for shards in [0, 1, 2, 3, 7, 64] {
                let ranges = shard_ranges(dim, shards);
                assert!(!ranges.is_empty() && ranges.len() <= shards.max(1));
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges.last().unwrap().end, dim);
                for w in ranges.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                    assert_eq!(w[0].end % BLOCK as usize, 0, "{dim} {shards} {ranges:?}");
                }
                assert!(ranges.iter().all(|r| !r.is_empty()));
            }
        }
        assert!(shard_ranges(0, 4).is_empty());
        assert_eq!(shard_ranges(3000, 2), vec![0..2048, 2048..3000]);
    }

    #[test]
    fn parallel_streams_equal_the_unsharded_stream_bit_for_bit() {
        let t = tables(12, 4, 3, 1);
        for workload in [Workload::PrefixSum, Workload::Custom { label: "A" }] {
            let m = mechanism(&t, workload, 2.0);
            for dim in [1, 3000, 5000] {
                let whole = unsharded(m, dim, ChaChaNoise::from_seed(SEED).unwrap());
                for shards in [1, 2, 3, 5] {
                    let mut workspace =
                        vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&m, dim).unwrap()];
                    let mut s = ParallelStream::new(m, dim, shards, &mut workspace, || {
                        ChaChaNoise::from_seed(SEED)
                    })
                    .unwrap();
                    let mut out = vec![0.0f32; dim];
                    let got: Vec<Vec<u32>> = (0..12)
                        .map(|i| {
                            if matches!(workload, Workload::PrefixSum) {
                                s.step(&input(i, dim), &mut out).unwrap();
                            } else {
                                s.step_noise(&mut out).unwrap();
                            }
                            bits(&out)
                        })
                        .collect();
                    assert!(whole == got, "d = {dim}, {shards} shards");
                    assert_eq!(s.steps_released(), 12);
                    assert_eq!(
                        s.step_noise(&mut out),
                        Err(Error::StreamFinished { steps: 12 })
                    );
                }
            }
        }
    }

    #[test]
    fn parallel_errors_leave_every_shard_unchanged() {
        let t = tables(6, 2, 2, 1);
        let m = mechanism(&t, Workload::PrefixSum, 2.0);
        let dim = 3000;
        let whole = unsharded(m, dim, ChaChaNoise::from_seed(SEED).unwrap());
        let mut workspace = vec![0.0f32; 6 * dim];
        let mut s = ParallelStream::new(m, dim, 2, &mut workspace, || ChaChaNoise::from_seed(SEED))
            .unwrap();
        assert_eq!(s.shard_ranges(), &[0..2048, 2048..3000]);
        let mut out = vec![0.0f32; dim];
        for i in 0..6 {
            let mut bad = input(i, dim);
            bad[2500] = f32::NAN;
            assert_eq!(
                s.step(&bad, &mut out),
                Err(Error::NonFiniteInput { index: 2500 })
            );
            assert_eq!(
                s.step(&input(i, dim - 1), &mut out),
                Err(Error::DimensionMismatch {
                    expected: dim,
                    found: dim - 1
                })
            );
            assert_eq!(
                s.step_noise(&mut out[1..]),
                Err(Error::DimensionMismatch {
                    expected: dim,
                    found: dim - 1
                })
            );
            assert_eq!(s.steps_released(), i as u32);
            s.step(&input(i, dim), &mut out).unwrap();
            assert!(bits(&out) == whole[i], "step {i}");
        }
        let mut small = vec![0.0f32; 5 * dim - 1];
        assert!(matches!(
            ParallelStream::new(m, dim, 2, &mut small, || ChaChaNoise::from_seed(SEED)),
            Err(Error::WorkspaceTooSmall { .. })
        ));
        assert!(matches!(
            ParallelStream::new(m, dim, 2, &mut workspace, || ChaChaNoise::from_seed(
                [0; 32]
            )),
            Err(Error::WeakSeed)
        ));
    }
}

/// `PrefetchedNoise` draws one step ahead on another thread, yet a stream releases exactly what
/// it releases with the source itself; requests outside its range are drawn on the caller's
/// thread, and also equal the source's.
#[cfg(feature = "parallel")]
#[test]
fn prefetched_noise_releases_what_its_source_releases() {
    use mfc_runtime::prefetch::PrefetchedNoise;
    let chacha = || ChaChaNoise::from_seed(SEED).unwrap();
    let t = tables(10, 3, 2, 1);
    let m = mechanism(&t, Workload::PrefixSum, 2.0);
    let dim = 2 * CHUNK + 77;
    let prefetched = PrefetchedNoise::new(chacha, 0, dim);
    assert!(unsharded(m, dim, chacha()) == unsharded(m, dim, prefetched));

    let mut noise = PrefetchedNoise::new(chacha, 1000, 3000);
    let mut source = chacha();
    let requests = [
        (0, 1000, 3000), // the served range
        (0, 1500, 100),  // inside it
        (1, 1000, 3000), // the prefetched next row
        (5, 0, 50),      // outside: drawn here
        (1, 3900, 200),  // straddling its end: drawn here
        (7, 1000, 3000), // not prefetched: asked for now
        (0, 1000, 3000), // back to an old step
    ];
    for (step, offset, len) in requests {
        let (mut got, mut want) = (vec![0.0f32; len], vec![0.0f32; len]);
        noise.fill_standard_normal(step, offset, &mut got);
        source.fill_standard_normal(step, offset, &mut want);
        assert!(bits(&got) == bits(&want), "step {step}, {offset} + {len}");
    }
}
