//! `BandMfStream` on encoders no optimizer would produce (random tables, `common`): shards
//! release exactly the unsharded stream's coordinates, bit for bit, across chunk boundaries;
//! and checkpoints follow the banded stream's rules — a restore continues the uninterrupted
//! stream bit for bit, and stale, other-epoch, other-key, other-blob, other-shard and forged
//! checkpoints are refused with the stream left fresh.
#![allow(clippy::needless_range_loop)] // index loops mirror the formulas
#![allow(clippy::single_range_in_vec_init)] // one range: the whole row, unsharded

mod common;

use common::{EncoderTable, Gen, bandmf, encoder_table};
use mfc_formats::{BandMfKind, Mechanism, Validated, Workload};
use mfc_runtime::forms::CHUNK;
use mfc_runtime::{
    BandMfStream, BlobFingerprint, ChaChaNoise, Error, ReleaseCounter, Stream, clip_factor,
    epoch_noise,
};

const SEED: [u8; 32] = *b"bandmf shards and checkpoints!!!";
const ROOT: [u8; 32] = [0x42; 32];

fn input(i: usize, dim: usize) -> Vec<f32> {
    let mut g = Gen(i as u64 * 11 + 3);
    let scale = if i % 3 == 0 { 0.01 } else { 3.0 };
    (0..dim).map(|_| scale * g.next()).collect()
}

fn bits(row: &[f32]) -> Vec<u32> {
    row.iter().map(|x| x.to_bits()).collect()
}

fn tables() -> Vec<EncoderTable> {
    vec![
        encoder_table(BandMfKind::Toeplitz, 12, 4, 1),
        encoder_table(BandMfKind::General, 12, 3, 2),
        encoder_table(BandMfKind::General, 12, 1, 3),
    ]
}

fn workloads() -> [Workload<'static>; 2] {
    [Workload::PrefixSum, Workload::Custom { label: "momentum" }]
}

/// Releases of `ranges` shards assembled into rows (one range: the whole row, by `step`).
fn run(m: Validated<'_>, dim: usize, ranges: &[std::ops::Range<usize>]) -> Vec<Vec<u32>> {
    let mut workspaces: Vec<Vec<f32>> = ranges
        .iter()
        .map(|r| vec![0.0; BandMfStream::<ChaChaNoise>::workspace_len(&m, r.len()).unwrap()])
        .collect();
    let noise = || ChaChaNoise::from_seed(SEED).unwrap();
    let mut shards: Vec<BandMfStream<'_, '_, ChaChaNoise>> = ranges
        .iter()
        .zip(workspaces.iter_mut())
        .map(|(r, w)| BandMfStream::shard(m, dim, r.clone(), w, noise()).unwrap())
        .collect();
    let mut out = vec![0.0f32; dim];
    (0..m.header.steps as usize)
        .map(|i| {
            let x = input(i, dim);
            if let [whole] = &mut shards[..] {
                whole.step(&x, &mut out).unwrap();
            } else {
                let clip = clip_factor(&x, 2.0);
                for (shard, r) in shards.iter_mut().zip(ranges) {
                    assert_eq!(
                        shard.step(&x[r.clone()], &mut out[r.clone()]),
                        Err(Error::ClipFactorRequired)
                    );
                    shard
                        .step_clipped(&x[r.clone()], clip, &mut out[r.clone()])
                        .unwrap();
                }
            }
            bits(&out)
        })
        .collect()
}

/// Shards equal the whole row for aligned and unaligned splits, and a row of more than one
/// chunk (chunked passes) equals the same row cut into shards smaller than a chunk.
#[test]
fn shards_release_the_unsharded_coordinates_bit_for_bit() {
    for t in tables() {
        for workload in workloads() {
            let m = bandmf(&t, workload, 2.0);
            let whole = run(m, 7, &[0..7]);
            assert_eq!(run(m, 7, &[0..3, 3..7]), whole);
            assert_eq!(run(m, 7, &[0..1, 1..2, 2..6, 6..7]), whole);
        }
    }
    let t = encoder_table(BandMfKind::General, 5, 3, 9);
    let m = bandmf(&t, Workload::PrefixSum, 2.0);
    let dim = CHUNK + 37;
    let whole = run(m, dim, &[0..dim]);
    let cut = CHUNK / 2 + 1;
    assert_eq!(
        run(m, dim, &[0..cut, cut..CHUNK + 3, CHUNK + 3..dim]),
        whole
    );
}

const D: usize = 5;

fn blob(t: &EncoderTable, workload: Workload<'_>) -> Vec<u8> {
    bandmf(t, workload, 2.0).to_vec().unwrap()
}

fn fresh<'w>(
    bytes: &'w [u8],
    ws: &'w mut Vec<f32>,
    counter: &ReleaseCounter,
) -> BandMfStream<'w, 'w, ChaChaNoise> {
    let m = Mechanism::from_bytes(bytes).unwrap();
    ws.resize(
        BandMfStream::<ChaChaNoise>::workspace_len(&m, D).unwrap(),
        f32::NAN,
    );
    BandMfStream::new(m, D, ws, epoch_noise(&ROOT, counter).unwrap()).unwrap()
}

/// The uninterrupted releases of epoch 1.
fn uninterrupted(bytes: &[u8]) -> Vec<Vec<u32>> {
    let mut ws = Vec::new();
    let mut stream = fresh(bytes, &mut ws, &ReleaseCounter::new(1, 0));
    let mut out = [0.0f32; D];
    (0..stream.horizon() as usize)
        .map(|i| {
            stream.step(&input(i, D), &mut out).unwrap();
            bits(&out)
        })
        .collect()
}

/// Epoch 1 for `steps` steps following the protocol: the checkpoint after each step (index 0:
/// before any) and the counter.
fn run_until(bytes: &[u8], steps: usize) -> (Vec<Vec<u8>>, ReleaseCounter) {
    let (_, fp) = BlobFingerprint::load(bytes).unwrap();
    let mut counter = ReleaseCounter::FACTORY.cold_start().unwrap();
    let mut ws = Vec::new();
    let mut stream = fresh(bytes, &mut ws, &counter);
    let mut slot = vec![0u8; stream.checkpoint_capacity()];
    let mut checkpoints = Vec::new();
    let len = stream.checkpoint(&fp, &counter, &mut slot).unwrap();
    checkpoints.push(slot[..len].to_vec());
    let mut out = [0.0f32; D];
    for i in 0..steps {
        stream.step(&input(i, D), &mut out).unwrap();
        let len = stream.checkpoint(&fp, &counter, &mut slot).unwrap();
        counter.record(&stream).unwrap();
        checkpoints.push(slot[..len].to_vec());
    }
    (checkpoints, counter)
}

/// A refused restore leaves the stream fresh: its first release is that of a stream built the
/// same way that never saw the checkpoint.
fn assert_fresh(stream: &mut BandMfStream<'_, '_, ChaChaNoise>, bytes: &[u8], c: &ReleaseCounter) {
    assert_eq!(stream.steps_released(), 0);
    let mut ws = Vec::new();
    let mut untouched = fresh(bytes, &mut ws, c);
    let (mut out, mut expected) = ([0.0f32; D], [0.0f32; D]);
    stream.step(&input(0, D), &mut out).unwrap();
    untouched.step(&input(0, D), &mut expected).unwrap();
    assert_eq!(
        bits(&out),
        bits(&expected),
        "a refused restore changed the stream"
    );
}

#[test]
fn a_restored_stream_continues_the_uninterrupted_one_bit_for_bit() {
    for t in tables() {
        for workload in workloads() {
            let bytes = blob(&t, workload);
            let reference = uninterrupted(&bytes);
            let (checkpoints, counter) = run_until(&bytes, t.n);
            let prefix = matches!(workload, Workload::PrefixSum);
            let floats = (t.bands + 2 * usize::from(prefix)) * D;
            for (cut, slot) in checkpoints.iter().enumerate() {
                assert!(slot.len() <= 68 + 4 * floats);
                let (_, fp) = BlobFingerprint::load(&bytes).unwrap();
                let mut ws = Vec::new();
                // Restoring with the counter as it stood after the cut.
                let at = ReleaseCounter::new(1, cut as u32);
                let mut stream = fresh(&bytes, &mut ws, &at);
                assert_eq!(stream.checkpoint_capacity(), 68 + 4 * floats);
                stream.restore(&fp, slot, &at).unwrap();
                assert_eq!(stream.steps_released(), cut as u32);
                let mut out = [0.0f32; D];
                for i in cut..t.n {
                    stream.step(&input(i, D), &mut out).unwrap();
                    assert_eq!(bits(&out), reference[i], "{:?} cut {cut} step {i}", t.kind);
                }
                assert_eq!(
                    stream.step(&input(0, D), &mut out),
                    Err(Error::StreamFinished { steps: t.n as u32 })
                );
            }
            assert_eq!(counter.released(), t.n as u32);
        }
    }
}

#[test]
fn stale_foreign_and_forged_checkpoints_are_refused_and_the_stream_stays_fresh() {
    let t = encoder_table(BandMfKind::Toeplitz, 12, 4, 5);
    let other = encoder_table(BandMfKind::Toeplitz, 12, 4, 6);
    let bytes = blob(&t, Workload::PrefixSum);
    let other_bytes = blob(&other, Workload::PrefixSum);
    let (checkpoints, counter) = run_until(&bytes, 9);
    let (_, fp) = BlobFingerprint::load(&bytes).unwrap();
    let (_, other_fp) = BlobFingerprint::load(&other_bytes).unwrap();
    let newest = &checkpoints[9];
    let refuse = |bytes: &[u8], fp: &BlobFingerprint<'_>, slot: &[u8], c: ReleaseCounter, e| {
        let mut ws = Vec::new();
        let mut stream = fresh(bytes, &mut ws, &c);
        assert_eq!(stream.restore(fp, slot, &c), Err(e));
        assert_fresh(&mut stream, bytes, &c);
    };
    // Stale: a checkpoint behind the counter.
    refuse(
        &bytes,
        &fp,
        &checkpoints[5],
        counter,
        Error::StaleCheckpoint {
            step: 5,
            released: 9,
        },
    );
    // Another epoch's counter, and this epoch's checkpoint under another epoch's key.
    let next = counter.cold_start().unwrap();
    refuse(
        &bytes,
        &fp,
        newest,
        next,
        Error::CheckpointEpochMismatch {
            checkpoint: 1,
            counter: 2,
        },
    );
    {
        let mut ws = Vec::new();
        let m = Mechanism::from_bytes(&bytes).unwrap();
        ws.resize(
            BandMfStream::<ChaChaNoise>::workspace_len(&m, D).unwrap(),
            0.0,
        );
        let mut stream =
            BandMfStream::new(m, D, &mut ws, epoch_noise(&[0x43; 32], &counter).unwrap()).unwrap();
        assert_eq!(
            stream.restore(&fp, newest, &counter),
            Err(Error::CheckpointKeyMismatch)
        );
        assert_eq!(stream.steps_released(), 0);
    }
    // Another blob of the same shape: its fingerprint, or a stream built from it.
    refuse(
        &bytes,
        &other_fp,
        newest,
        counter,
        Error::CheckpointMismatch { field: "blob" },
    );
    refuse(
        &other_bytes,
        &other_fp,
        newest,
        counter,
        Error::CheckpointMismatch { field: "blob" },
    );
    // Another dimension.
    {
        let m = Mechanism::from_bytes(&bytes).unwrap();
        let mut ws = vec![0.0; 64];
        let mut stream =
            BandMfStream::new(m, D - 1, &mut ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap();
        assert_eq!(
            stream.restore(&fp, newest, &counter),
            Err(Error::CheckpointMismatch {
                field: "dimension or shard"
            })
        );
    }
    // A banded stream's checkpoint is not a BandMF one, even with the head's shape of b̂ = 4
    // ((h, r) = (4, 0)): the fingerprint tells the forms apart.
    let banded = common::tables(12, 4, 0, 7);
    let banded_bytes = common::mechanism(&banded, Workload::PrefixSum, 2.0)
        .to_vec()
        .unwrap();
    let (m, banded_fp) = BlobFingerprint::load(&banded_bytes).unwrap();
    let mut ws = common::workspace(&m, D);
    let mut stream = Stream::new(m, D, &mut ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap();
    let mut out = [0.0f32; D];
    stream.step(&input(0, D), &mut out).unwrap();
    let mut slot = vec![0u8; stream.checkpoint_capacity()];
    let len = stream
        .checkpoint(&banded_fp, &ReleaseCounter::new(1, 1), &mut slot)
        .unwrap();
    refuse(
        &bytes,
        &fp,
        &slot[..len],
        ReleaseCounter::new(1, 1),
        Error::CheckpointMismatch { field: "blob" },
    );
    refuse(
        &bytes,
        &banded_fp,
        newest,
        counter,
        Error::CheckpointMismatch { field: "blob" },
    );
    // A forged checkpoint (valid CRC) with a non-finite state value.
    let end = 14 + u32::from_le_bytes(newest[10..14].try_into().unwrap()) as usize;
    for value in [f32::NAN, f32::INFINITY] {
        let mut forged = newest[..end].to_vec();
        forged[end - 4..end].copy_from_slice(&value.to_le_bytes());
        let crc = mfc_formats::checksum(&forged);
        forged.extend_from_slice(&crc.to_le_bytes());
        refuse(&bytes, &fp, &forged, counter, Error::MalformedCheckpoint);
    }
    // A forged checkpoint whose newest w row was changed in its last bit: the key check fails.
    let newest_slot = 8 % t.bands;
    let floats_at = end - 4 * (t.bands + 2) * D;
    let at = floats_at + 4 * newest_slot * D;
    let mut forged = newest[..end].to_vec();
    forged[at] ^= 1;
    let crc = mfc_formats::checksum(&forged);
    forged.extend_from_slice(&crc.to_le_bytes());
    refuse(&bytes, &fp, &forged, counter, Error::CheckpointKeyMismatch);
    // Every single-bit flip of the checkpoint is refused.
    for bit in 0..8 * newest.len() {
        let mut flipped = newest.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let mut ws = Vec::new();
        let mut stream = fresh(&bytes, &mut ws, &counter);
        assert!(
            stream.restore(&fp, &flipped, &counter).is_err(),
            "bit {bit}"
        );
        assert_eq!(stream.steps_released(), 0);
    }
}

/// A shard resumes as the same shard only.
#[test]
fn a_shard_resumes_as_the_same_shard_only() {
    let t = encoder_table(BandMfKind::General, 12, 3, 11);
    let bytes = blob(&t, Workload::PrefixSum);
    let (m, fp) = BlobFingerprint::load(&bytes).unwrap();
    let counter = ReleaseCounter::new(1, 0);
    let noise = || epoch_noise(&ROOT, &counter).unwrap();
    let run = |stream: &mut BandMfStream<'_, '_, ChaChaNoise>, steps: std::ops::Range<usize>| {
        steps
            .map(|i| {
                let row = input(i, D);
                let clip = clip_factor(&row, 2.0);
                let mut out = [0.0; 3];
                stream.step_clipped(&row[1..4], clip, &mut out).unwrap();
                bits(&out)
            })
            .collect::<Vec<_>>()
    };
    let len = BandMfStream::<ChaChaNoise>::workspace_len(&m, 3).unwrap();
    let mut ws = vec![0.0f32; len];
    let mut whole = BandMfStream::shard(m, D, 1..4, &mut ws, noise()).unwrap();
    let reference = run(&mut whole, 0..12);
    let mut ws = vec![0.0f32; len];
    let mut first = BandMfStream::shard(m, D, 1..4, &mut ws, noise()).unwrap();
    run(&mut first, 0..5);
    let mut slot = vec![0u8; first.checkpoint_capacity()];
    let n = first.checkpoint(&fp, &counter, &mut slot).unwrap();
    let slot = &slot[..n];
    let mut ws = vec![0.0f32; len];
    let mut resumed = BandMfStream::shard(m, D, 1..4, &mut ws, noise()).unwrap();
    resumed.restore(&fp, slot, &counter).unwrap();
    assert_eq!(run(&mut resumed, 5..12), reference[5..]);
    for range in [0..3, 2..5] {
        let mut ws = vec![0.0f32; len];
        let mut other = BandMfStream::shard(m, D, range, &mut ws, noise()).unwrap();
        assert_eq!(
            other.restore(&fp, slot, &counter),
            Err(Error::CheckpointMismatch {
                field: "dimension or shard"
            })
        );
    }
}

/// An unstable encoder (issue 27): `c = (1, −2)` gives `w_t = z_t + 2w_{t−1}`, which overflows
/// `f32` within about 130 steps. Every step before that releases finite values; the first step
/// whose noise is not finite is refused with `NonFiniteRelease`, leaving the stream as it was
/// (the same checkpoint bytes, the same step count), and so is every retry, through `step`,
/// `step_examples` and both workloads.
#[test]
fn an_unstable_encoder_is_refused_at_its_first_non_finite_step_with_the_state_unchanged() {
    let encoder = mfc_formats::encode_f32s([1.0f32, -2.0]);
    let t = EncoderTable {
        n: 400,
        bands: 2,
        kind: BandMfKind::Toeplitz,
        encoder,
    };
    for workload in workloads() {
        let bytes = blob(&t, workload);
        let (_, fp) = BlobFingerprint::load(&bytes).unwrap();
        let counter = ReleaseCounter::new(1, 0);
        let mut ws = Vec::new();
        let mut stream = fresh(&bytes, &mut ws, &counter);
        let mut out = [0.0f32; D];
        let mut slot = vec![0u8; stream.checkpoint_capacity()];
        let refused_at = loop {
            let step = stream.steps_released();
            match stream.step(&input(step as usize, D), &mut out) {
                Ok(()) => assert!(out.iter().all(|x| x.is_finite()), "step {step}: {out:?}"),
                Err(e) => {
                    assert!(
                        matches!(e, Error::NonFiniteRelease { step: s, .. } if s == step),
                        "{e:?}"
                    );
                    break step;
                }
            }
        };
        assert!((100..200).contains(&refused_at), "{refused_at}");
        let counter = ReleaseCounter::new(1, refused_at);
        let len = stream.checkpoint(&fp, &counter, &mut slot).unwrap();
        let before = slot[..len].to_vec();
        for _ in 0..3 {
            let x = input(refused_at as usize, D);
            assert!(matches!(
                stream.step(&x, &mut out),
                Err(Error::NonFiniteRelease { .. })
            ));
            assert!(matches!(
                stream.step_examples(&[x.clone(), x].concat(), &mut out),
                Err(Error::NonFiniteRelease { .. })
            ));
            assert_eq!(stream.steps_released(), refused_at);
            let len = stream.checkpoint(&fp, &counter, &mut slot).unwrap();
            assert_eq!(slot[..len], before[..], "a refused step changed the state");
        }
    }
}
