//! The checkpoint rules, checked on the banded stream: a restored stream continues the
//! uninterrupted one bit for bit, and every refusal leaves the stream fresh (the other forms:
//! `tests/tests/replay.rs` and each form's tests).

extern crate std;

use std::vec::Vec;

use proptest::prelude::*;

use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;

use super::wire::{PREFIX_LEN, checksum};
use super::*;
use crate::error::Error;
use crate::forms::Stream;
use crate::noise::{ChaChaNoise, KEY_WORD, NoiseSource};
use mfc_formats::{
    BandedLowRank, Calibration, Decoder, ErrorSummary, F32Table, Header, Mechanism, Neighbouring,
    Participation, Sensitivity, SensitivityMethod, Workload, encode_f32s,
};

const ROOT: [u8; 32] = [0x42; 32];
const N: u32 = 12;
const H: usize = 3;
const R: usize = 2;
const D: usize = 5;

/// The bytes of a valid blob with `n = 12, h = 3, r = 2`; `salt` varies the coefficients.
fn blob(salt: f32) -> Vec<u8> {
    let n = N as usize;
    let mut diagonals = Vec::new();
    for i in 0..n {
        for k in 0..H {
            diagonals.push(if k > i {
                0.0
            } else {
                1.0 / (1.0 + k as f32) + salt
            });
        }
    }
    let left: Vec<f32> = (0..n * R).map(|j| 0.1 + 0.01 * j as f32).collect();
    let right: Vec<f32> = (0..n * R).map(|j| 0.2 - 0.005 * j as f32).collect();
    let (d, l, r) = (
        encode_f32s(diagonals),
        encode_f32s(left),
        encode_f32s(right),
    );
    let mechanism = Mechanism {
        header: Header {
            workload: Workload::PrefixSum,
            steps: N,
            participation: Participation::Single,
            neighbouring: Neighbouring::AddOrRemove,
            sensitivity: Sensitivity {
                value: 1.3,
                method: SensitivityMethod::MaxColumnNorm,
            },
            clip_norm: 2.0,
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
            generator: "checkpoint test",
        },
        decoder: Decoder::BandedLowRank(BandedLowRank {
            band: H as u32,
            rank: R as u32,
            diagonals: F32Table::new(&d).unwrap(),
            left: F32Table::new(&l).unwrap(),
            right: F32Table::new(&r).unwrap(),
        }),
    };
    mechanism.to_vec().unwrap()
}

fn input(step: usize) -> [f32; D] {
    core::array::from_fn(|k| ((step * 7 + k * 3) % 5) as f32 - 1.5)
}

const WS: usize = (H + R + 2) * D;

/// Releases of the whole uninterrupted stream of epoch 1.
fn uninterrupted(bytes: &[u8]) -> Vec<[f32; D]> {
    let mechanism = Mechanism::from_bytes(bytes).unwrap();
    let counter = ReleaseCounter::FACTORY.cold_start().unwrap();
    let mut ws = [0.0f32; WS];
    let noise = epoch_noise(&ROOT, &counter).unwrap();
    let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
    (0..N as usize)
        .map(|i| {
            let mut out = [0.0; D];
            stream.step(&input(i), &mut out).unwrap();
            out
        })
        .collect()
}

/// Runs epoch 1 for `steps` steps following the protocol; returns the last checkpoint, the
/// checkpoint after `early` steps and the counter.
fn run_until(bytes: &[u8], steps: usize, early: usize) -> (Vec<u8>, Vec<u8>, ReleaseCounter) {
    let (mechanism, blob) = BlobFingerprint::load(bytes).unwrap();
    let mut counter = ReleaseCounter::FACTORY.cold_start().unwrap();
    let mut ws = [0.0f32; WS];
    let mut stream =
        Stream::new(mechanism, D, &mut ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap();
    let mut slot = std::vec![0u8; stream.checkpoint_capacity()];
    // The checkpoint of the fresh stream, before any step.
    let len = stream.checkpoint(&blob, &counter, &mut slot).unwrap();
    let mut old = slot[..len].to_vec();
    for i in 0..steps {
        let mut out = [0.0; D];
        stream.step(&input(i), &mut out).unwrap();
        let len = stream.checkpoint(&blob, &counter, &mut slot).unwrap();
        counter.record(&stream).unwrap();
        if i + 1 == early {
            old = slot[..len].to_vec();
        }
    }
    (slot, old, counter)
}

/// The checkpoint's CRC-32 (table-driven) is the blob's (bitwise on bare metal): both give the
/// standard check value of CRC-32/ISO-HDLC.
#[test]
fn checkpoint_and_blob_checksums_are_crc32_iso_hdlc() {
    assert_eq!(checksum(b"123456789"), 0xcbf4_3926);
    assert_eq!(mfc_formats::checksum(b"123456789"), 0xcbf4_3926);
}

#[test]
fn a_restored_stream_continues_the_uninterrupted_one_bit_for_bit() {
    let bytes = blob(0.0);
    let reference = uninterrupted(&bytes);
    for cut in [0, 1, 2, 3, 4, 7, 11, 12] {
        let (slot, _, counter) = run_until(&bytes, cut, 0);
        // Reboot: everything in RAM is gone; the counter and the slot survive.
        let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
        let mut ws = [f32::NAN; WS];
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        stream.restore(&fp, &slot, &counter).unwrap();
        assert_eq!(stream.steps_released(), cut as u32);
        for (i, expected) in reference.iter().enumerate().skip(cut) {
            let mut out = [0.0; D];
            stream.step(&input(i), &mut out).unwrap();
            assert_eq!(
                out.map(f32::to_bits),
                expected.map(f32::to_bits),
                "cut {cut} step {i}"
            );
        }
        let mut out = [0.0; D];
        assert!(matches!(
            stream.step(&input(0), &mut out),
            Err(Error::StreamFinished { .. })
        ));
    }
}

#[test]
fn the_fingerprint_is_the_verified_blob_checksum() {
    let mut bytes = blob(0.25);
    let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
    assert_eq!(mechanism, Mechanism::from_bytes(&bytes).unwrap());
    let stored = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    assert_eq!(fp.crc32(), stored);
    assert_eq!(fp.crc32(), mfc_formats::checksum(&bytes[..bytes.len() - 4]));
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    assert!(matches!(
        BlobFingerprint::load(&bytes),
        Err(Error::InvalidBlob(
            mfc_formats::Error::ChecksumMismatch { .. }
        ))
    ));
}

/// A fresh stream of epoch 1 and the counter as read back after `released` releases.
fn fresh<'w>(bytes: &'w [u8], ws: &'w mut [f32]) -> Stream<'w, 'w, ChaChaNoise> {
    let counter = ReleaseCounter::new(1, 0);
    let mechanism = Mechanism::from_bytes(bytes).unwrap();
    Stream::new(mechanism, D, ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap()
}

fn assert_fresh(stream: &mut Stream<'_, '_, ChaChaNoise>, reference: &[[f32; D]]) {
    assert_eq!(stream.steps_released(), 0);
    let mut out = [0.0; D];
    stream.step(&input(0), &mut out).unwrap();
    assert_eq!(out, reference[0], "a refused restore changed the stream");
}

#[test]
fn a_stale_checkpoint_is_refused_and_the_stream_is_untouched() {
    let bytes = blob(0.0);
    let reference = uninterrupted(&bytes);
    let (_, old, counter) = run_until(&bytes, 9, 5);
    assert_eq!(counter.released(), 9);
    let (_, fp) = BlobFingerprint::load(&bytes).unwrap();
    let mut ws = [0.0f32; WS];
    let mut stream = fresh(&bytes, &mut ws);
    assert_eq!(
        stream.restore(&fp, &old, &counter),
        Err(Error::StaleCheckpoint {
            step: 5,
            released: 9
        })
    );
    assert_fresh(&mut stream, &reference);
    // The same checkpoint is fine for a counter that has not moved past it.
    let mut ws = [0.0f32; WS];
    let mut stream = fresh(&bytes, &mut ws);
    stream
        .restore(&fp, &old, &ReleaseCounter::new(1, 5))
        .unwrap();
    // A checkpoint ahead of the counter (crash between checkpoint and count) is accepted.
    let mut ws = [0.0f32; WS];
    let mut stream = fresh(&bytes, &mut ws);
    stream
        .restore(&fp, &old, &ReleaseCounter::new(1, 4))
        .unwrap();
    assert_eq!(stream.steps_released(), 5);
    // A restored stream is not a fresh one.
    assert_eq!(
        stream.restore(&fp, &old, &ReleaseCounter::new(1, 4)),
        Err(Error::StreamAlreadyStarted)
    );
}

#[test]
fn the_counter_never_moves_back_and_a_stream_behind_it_cannot_checkpoint() {
    let bytes = blob(0.0);
    let (_, blob_id) = BlobFingerprint::load(&bytes).unwrap();
    let mut ws = [0.0f32; WS];
    let stream = fresh(&bytes, &mut ws);
    let mut counter = ReleaseCounter::new(1, 3);
    let mut slot = [0u8; 512];
    assert_eq!(
        stream.checkpoint(&blob_id, &counter, &mut slot),
        Err(Error::StaleCheckpoint {
            step: 0,
            released: 3
        })
    );
    assert_eq!(
        counter.record(&stream),
        Err(Error::StaleCheckpoint {
            step: 0,
            released: 3
        })
    );
    assert_eq!(counter, ReleaseCounter::new(1, 3));
    assert_eq!(ReleaseCounter::from_bytes(counter.to_bytes()), counter);
    assert_eq!(
        ReleaseCounter::new(u64::MAX, 0).cold_start(),
        Err(Error::EpochExhausted)
    );
}

#[test]
fn a_checkpoint_of_another_blob_dimension_or_noise_is_refused() {
    let bytes = blob(0.0);
    let other = blob(0.5);
    let (slot, _, counter) = run_until(&bytes, 6, 0);
    let reference = uninterrupted(&bytes);
    // Another blob of the same shape.
    let (mechanism, fp) = BlobFingerprint::load(&other).unwrap();
    let mut ws = [0.0f32; WS];
    let noise = epoch_noise(&ROOT, &counter).unwrap();
    let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
    assert_eq!(
        stream.restore(&fp, &slot, &counter),
        Err(Error::CheckpointMismatch { field: "blob" })
    );
    // The right blob passed to restore, but a stream built from another one.
    let (right, right_fp) = BlobFingerprint::load(&bytes).unwrap();
    assert_eq!(
        stream.restore(&right_fp, &slot, &counter),
        Err(Error::CheckpointMismatch { field: "blob" })
    );
    // Another dimension.
    let mut ws = [0.0f32; WS];
    let noise = epoch_noise(&ROOT, &counter).unwrap();
    let mut stream = Stream::new(right, D - 1, &mut ws, noise).unwrap();
    assert_eq!(
        stream.restore(&right_fp, &slot, &counter),
        Err(Error::CheckpointMismatch {
            field: "dimension or shard"
        })
    );
    // Another noise multiplier.
    let noise = epoch_noise(&ROOT, &counter).unwrap();
    let mut stream = Stream::with_noise_multiplier(right, D, &mut ws, noise, 0.71).unwrap();
    assert_eq!(
        stream.restore(&right_fp, &slot, &counter),
        Err(Error::CheckpointMismatch {
            field: "noise scale"
        })
    );
    // The checkpoint fingerprinted with another blob cannot be written.
    let mut ws = [0.0f32; WS];
    let stream = fresh(&bytes, &mut ws);
    let other_id = fp;
    let mut out = [0u8; 512];
    assert_eq!(
        stream.checkpoint(&other_id, &counter, &mut out),
        Err(Error::CheckpointMismatch { field: "blob" })
    );
    let mut ws = [0.0f32; WS];
    let mut stream = fresh(&bytes, &mut ws);
    assert_fresh(&mut stream, &reference);
}

#[test]
fn a_cold_start_never_reuses_a_key_and_old_epochs_cannot_be_restored() {
    let bytes = blob(0.0);
    let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
    // Keys of successive epochs, and of different roots, all differ.
    let mut counter = ReleaseCounter::FACTORY;
    let mut keys = Vec::new();
    for _ in 0..64 {
        counter = counter.cold_start().unwrap();
        keys.push(stream_key(&ROOT, counter.epoch()));
        keys.push(stream_key(&[0x43; 32], counter.epoch()));
    }
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len());
    assert!(!keys.contains(&ROOT));
    // Epoch 0 and the zero root are never keyed.
    assert!(matches!(
        epoch_noise(&ROOT, &ReleaseCounter::FACTORY),
        Err(Error::EpochNotStarted)
    ));
    assert!(matches!(
        epoch_noise(&[0; 32], &ReleaseCounter::new(1, 0)),
        Err(Error::WeakSeed)
    ));
    // The first releases after a cold start differ from the previous epoch's.
    let (slot, _, counter) = run_until(&bytes, 4, 0);
    let next = counter.cold_start().unwrap();
    let mut first = [[0.0f32; D]; 2];
    for (out, c) in first.iter_mut().zip([counter, next]) {
        let mut ws = [0.0f32; WS];
        let noise = epoch_noise(&ROOT, &c).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        stream.step(&input(0), out).unwrap();
    }
    assert!(first[0].iter().zip(&first[1]).all(|(a, b)| a != b));
    // After the cold start, the old epoch's checkpoint is refused ...
    let mut ws = [0.0f32; WS];
    let noise = epoch_noise(&ROOT, &next).unwrap();
    let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
    assert_eq!(
        stream.restore(&fp, &slot, &next),
        Err(Error::CheckpointEpochMismatch {
            checkpoint: 1,
            counter: 2
        })
    );
    // ... and so is restoring it under the new key with the old counter.
    assert_eq!(
        stream.restore(&fp, &slot, &counter),
        Err(Error::CheckpointKeyMismatch)
    );
    assert_eq!(stream.steps_released(), 0);
}

/// The key of epoch `t` is not what a noise source seeded with the root draws for row `t`
/// (the bytes `stream_key` once returned: stream `t` from word 0), nor any 32 bytes of the
/// words block 0 of that row reads; it is the keys' own half of the stream, which no noise
/// block of an addressable coordinate reaches.
#[test]
fn keys_and_noise_have_separate_domains() {
    for epoch in [1u64, 2, 7, 1 << 40] {
        let key = stream_key(&ROOT, epoch);
        let mut rng = ChaCha20Rng::from_seed(ROOT);
        rng.set_stream(epoch);
        let mut noise_words = [0u8; 4 * 2048];
        rand_core::Rng::fill_bytes(&mut rng, &mut noise_words);
        assert!(
            noise_words.windows(32).all(|w| w != key),
            "epoch {epoch}: the key is in the noise of row {epoch}"
        );
        let mut keys = ChaCha20Rng::from_seed(ROOT);
        keys.set_stream(epoch);
        keys.set_word_pos(1 << 67);
        let mut expected = [0u8; 32];
        rand_core::Rng::fill_bytes(&mut keys, &mut expected);
        assert_eq!(key, expected);
    }
    // The last noise block of the last addressable coordinate starts below the keys' words.
    let last_block = (crate::noise::MAX_COORDINATES - 1) / crate::noise::BLOCK;
    assert!(u128::from(last_block) << 26 < KEY_WORD);
    assert_eq!((u128::from(last_block) + 1) << 26, KEY_WORD);
    // The noise of row `epoch` seeded with the root is not keyed by the epoch's key.
    let mut from_root = ChaChaNoise::from_seed(ROOT).unwrap();
    let mut from_key = ChaChaNoise::from_seed(stream_key(&ROOT, 3)).unwrap();
    let (mut a, mut b) = ([0.0f32; 8], [0.0f32; 8]);
    from_root.fill_standard_normal(3, 0, &mut a);
    from_key.fill_standard_normal(0, 0, &mut b);
    assert_ne!(a, b);
}

#[test]
fn a_shard_resumes_as_the_same_shard_only() {
    let bytes = blob(0.0);
    let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
    let counter = ReleaseCounter::new(1, 0);
    let noise = || epoch_noise(&ROOT, &counter).unwrap();
    let run = |stream: &mut Stream<'_, '_, ChaChaNoise>, steps: core::ops::Range<usize>| {
        steps
            .map(|i| {
                let row = input(i);
                let clip = crate::clip_factor(&row, 2.0);
                let mut out = [0.0; 3];
                stream.step_clipped(&row[1..4], clip, &mut out).unwrap();
                out
            })
            .collect::<Vec<_>>()
    };
    let mut ws = [0.0f32; WS];
    let mut whole = Stream::shard(mechanism, D, 1..4, &mut ws, noise()).unwrap();
    let reference = run(&mut whole, 0..N as usize);
    let mut ws = [0.0f32; WS];
    let mut first = Stream::shard(mechanism, D, 1..4, &mut ws, noise()).unwrap();
    run(&mut first, 0..5);
    let mut slot = [0u8; 256];
    let len = first.checkpoint(&fp, &counter, &mut slot).unwrap();
    let slot = &slot[..len];
    let mut ws = [0.0f32; WS];
    let mut resumed = Stream::shard(mechanism, D, 1..4, &mut ws, noise()).unwrap();
    resumed.restore(&fp, slot, &counter).unwrap();
    assert_eq!(run(&mut resumed, 5..N as usize), reference[5..]);
    // Another shard of the same width, or an unsharded stream of 3 coordinates, is refused.
    for range in [0..3, 2..5] {
        let mut ws = [0.0f32; WS];
        let mut other = Stream::shard(mechanism, D, range, &mut ws, noise()).unwrap();
        assert_eq!(
            other.restore(&fp, slot, &counter),
            Err(Error::CheckpointMismatch {
                field: "dimension or shard"
            })
        );
    }
    let mut ws = [0.0f32; WS];
    let mut unsharded = Stream::new(mechanism, 3, &mut ws, noise()).unwrap();
    assert_eq!(
        unsharded.restore(&fp, slot, &counter),
        Err(Error::CheckpointMismatch {
            field: "dimension or shard"
        })
    );
}

fn restore_result(bytes: &[u8], checkpoint: &[u8]) -> Result<u32, Error> {
    let (mechanism, fp) = BlobFingerprint::load(bytes).unwrap();
    let mut ws = [0.0f32; WS];
    let counter = ReleaseCounter::new(1, 0);
    let noise = epoch_noise(&ROOT, &counter).unwrap();
    let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
    match stream.restore(&fp, checkpoint, &counter) {
        Ok(()) => Ok(stream.steps_released()),
        Err(e) => {
            assert_eq!(stream.steps_released(), 0);
            Err(e)
        }
    }
}

#[test]
fn trailing_bytes_after_a_checkpoint_are_ignored_and_a_short_buffer_is_refused() {
    let bytes = blob(0.0);
    let (slot, _, _) = run_until(&bytes, 6, 0);
    let mut padded = slot.clone();
    padded.extend_from_slice(&[0xff; 40]);
    assert_eq!(restore_result(&bytes, &padded), Ok(6));
    let (_, blob_id) = BlobFingerprint::load(&bytes).unwrap();
    let mut ws = [0.0f32; WS];
    let stream = fresh(&bytes, &mut ws);
    let needed = stream.checkpoint_capacity();
    for len in [0, 10, 20, 100] {
        let mut out = std::vec![0u8; len];
        assert_eq!(
            stream.checkpoint(&blob_id, &ReleaseCounter::new(1, 0), &mut out),
            Err(Error::CheckpointBufferTooSmall { needed, found: len })
        );
    }
}

/// A checkpoint whose state holds a NaN or an infinity, framed with a valid CRC (forged), is
/// refused and the stream stays fresh; the same bytes with a finite value restore.
#[test]
fn a_checkpoint_with_a_non_finite_state_is_refused() {
    let bytes = blob(0.0);
    let reference = uninterrupted(&bytes);
    let (slot, _, _) = run_until(&bytes, 5, 0);
    let end = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
    let reframe = |value: f32, at: usize| {
        let mut forged = slot[..end].to_vec();
        forged[at..at + 4].copy_from_slice(&value.to_le_bytes());
        let crc = checksum(&forged);
        forged.extend_from_slice(&crc.to_le_bytes());
        forged
    };
    // The last float of the payload is the running sum's last coordinate.
    let last = end - 4;
    assert_eq!(restore_result(&bytes, &reframe(1.5, last)), Ok(5));
    for value in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        assert_eq!(
            restore_result(&bytes, &reframe(value, last)),
            Err(Error::MalformedCheckpoint),
            "{value}"
        );
        let (mechanism, fp) = BlobFingerprint::load(&bytes).unwrap();
        let mut ws = [0.0f32; WS];
        let counter = ReleaseCounter::new(1, 0);
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut stream = Stream::new(mechanism, D, &mut ws, noise).unwrap();
        assert!(
            stream
                .restore(&fp, &reframe(value, last), &counter)
                .is_err()
        );
        assert_fresh(&mut stream, &reference);
    }
}

/// A checkpoint of format version 1 (no compensation after the running sum) is refused
/// even when its frame is intact: resuming from the sum alone would not continue the
/// uninterrupted stream bit for bit.
#[test]
fn a_version_1_checkpoint_is_refused() {
    let bytes = blob(0.0);
    let (slot, _, _) = run_until(&bytes, 6, 0);
    let end = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
    let mut old = slot[..end].to_vec();
    old[8..10].copy_from_slice(&1u16.to_le_bytes());
    // Drop the compensation (the last d floats), as version 1 had none.
    old.truncate(end - 4 * D);
    let length = (old.len() - PREFIX_LEN) as u32;
    old[10..14].copy_from_slice(&length.to_le_bytes());
    let crc = checksum(&old);
    old.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(
        restore_result(&bytes, &old),
        Err(Error::UnsupportedCheckpointVersion { found: 1 })
    );
    assert_eq!(VERSION, 2);
}

/// The compensation is part of the state: after steps whose sums rounded, it is not zero, and
/// a checkpoint carries it (the restore test above would fail without it).
#[test]
fn checkpoints_carry_the_compensation() {
    let bytes = blob(0.0);
    let (slot, _, _) = run_until(&bytes, 7, 0);
    let end = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
    let compensation: Vec<f32> = slot[end - 4 * D..end]
        .chunks_exact(4)
        .map(|w| f32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert!(compensation.iter().any(|&c| c != 0.0), "{compensation:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any truncation is refused with a typed error.
    #[test]
    fn truncated_checkpoints_are_refused(cut in 0usize..1000) {
        let bytes = blob(0.0);
        let (slot, _, _) = run_until(&bytes, 7, 0);
        let len = {
            let payload_len = u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
            PREFIX_LEN + payload_len + 4
        };
        let cut = cut % len;
        let result = restore_result(&bytes, &slot[..cut]);
        let refused = matches!(
            result,
            Err(Error::MalformedCheckpoint | Error::CheckpointChecksumMismatch { .. })
        );
        prop_assert!(refused, "cut {}: {:?}", cut, result);
    }

    /// Any corruption (one flipped bit, or random bytes over a range) is refused with a
    /// typed error, never a panic.
    #[test]
    fn corrupted_checkpoints_are_refused(
        bit in 0usize..8 * 400,
        at in 0usize..400,
        junk in proptest::collection::vec(any::<u8>(), 1..16),
    ) {
        let bytes = blob(0.0);
        let (slot, _, _) = run_until(&bytes, 7, 0);
        let len = PREFIX_LEN + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize + 4;
        let mut flipped = slot[..len].to_vec();
        let bit = bit % (8 * len);
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(restore_result(&bytes, &flipped).is_err());
        let mut smeared = slot[..len].to_vec();
        let at = at % len;
        let end = (at + junk.len()).min(len);
        let changed = smeared[at..end] != junk[..end - at];
        smeared[at..end].copy_from_slice(&junk[..end - at]);
        let result = restore_result(&bytes, &smeared);
        prop_assert!(!changed || result.is_err(), "{result:?}");
    }

    /// Random bytes, with or without a valid frame around them, never panic.
    #[test]
    fn arbitrary_payloads_are_refused(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let bytes = blob(0.0);
        let mut framed = Vec::from(MAGIC);
        framed.extend_from_slice(&VERSION.to_le_bytes());
        framed.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        framed.extend_from_slice(&payload);
        let crc = checksum(&framed);
        framed.extend_from_slice(&crc.to_le_bytes());
        prop_assert!(restore_result(&bytes, &framed).is_err());
        prop_assert!(restore_result(&bytes, &payload).is_err());
    }
}
