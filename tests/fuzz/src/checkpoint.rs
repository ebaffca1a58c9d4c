//! The checkpoint-restore property: arbitrary bytes restored as a checkpoint into a freshly built
//! stream never panic; a refused checkpoint leaves the stream exactly as it was (it then releases
//! bit-for-bit what an untouched stream releases); an accepted one yields a stream that runs to its
//! horizon, whose own checkpoint restores to a stream releasing the same values.
//!
//! Input layout: byte 0 selects one of the [`BLOBS`] (low bits) and, with its top bit
//! [`REFRAME`], whether the checkpoint's frame (magic, version, length, CRC) is rewritten before
//! restoring ([`reframe`]) so that mutations reach the payload instead of stopping at the
//! checksum; byte 1 is the counter's `released` (modulo `n + 2`, so stale checkpoints are
//! exercised); the rest is the checkpoint. The counter's epoch is [`EPOCH`] and the device root
//! [`ROOT`]. Seeds are valid checkpoints in this layout, in both modes ([`seeds`]).

use mfc_runtime::checkpoint::{BlobFingerprint, MAGIC, ReleaseCounter, VERSION, epoch_noise};
use mfc_runtime::formats::{Decoder, Workload};
use mfc_runtime::{BandMfStream, BltStream, ChaChaNoise, Error, FftStream, Stream, Validated};

use super::{DIM, Replay, advance, step_past_horizon};

/// The blobs checkpoints are restored against: a prefix sum with a low-rank part, one with a
/// wider band, a custom workload (noise only), two BandMF blobs (a banded Toeplitz prefix sum; a
/// general encoder for momentum, whose stream keeps no running sum), a BLT blob (whose checkpoint
/// ends with the key tag) and two FFT blobs (circulant, optimal decoder; whose checkpoints hold
/// the current block's noise).
pub const BLOBS: [&[u8]; 8] = [
    include_bytes!("../seeds/blob/prefix_n8_h2_r1.mfc"),
    include_bytes!("../seeds/blob/prefix_n16_h3_r2.mfc"),
    include_bytes!("../seeds/blob/custom_n6_h2_r1.mfc"),
    include_bytes!("../seeds/blob/bandmf_toeplitz_n12_b4.mfc"),
    include_bytes!("../seeds/blob/bandmf_general_momentum_n10_b3.mfc"),
    include_bytes!("../seeds/blob/blt_m3_n20.mfc"),
    include_bytes!("../seeds/blob/fft_circulant_m4_s3.mfc"),
    include_bytes!("../seeds/blob/fft_optimal_m4_s2.mfc"),
];

/// A stream with checkpoints, as the checks use it: [`Stream`], [`BandMfStream`], [`BltStream`]
/// or [`FftStream`].
pub trait Resume: Replay {
    /// `restore`.
    fn restore(
        &mut self,
        blob: &BlobFingerprint<'_>,
        checkpoint: &[u8],
        counter: &ReleaseCounter,
    ) -> Result<(), Error>;
    /// `checkpoint`.
    fn checkpoint(
        &self,
        blob: &BlobFingerprint<'_>,
        counter: &ReleaseCounter,
        out: &mut [u8],
    ) -> Result<usize, Error>;
    /// `checkpoint_capacity`.
    fn checkpoint_capacity(&self) -> usize;
    /// `horizon`.
    fn horizon(&self) -> u32;
}

macro_rules! impl_resume {
    ($($stream:ident),*) => {$(
        impl Resume for $stream<'_, '_, ChaChaNoise> {
            fn restore(
                &mut self,
                blob: &BlobFingerprint<'_>,
                checkpoint: &[u8],
                counter: &ReleaseCounter,
            ) -> Result<(), Error> {
                $stream::restore(self, blob, checkpoint, counter)
            }
            fn checkpoint(
                &self,
                blob: &BlobFingerprint<'_>,
                counter: &ReleaseCounter,
                out: &mut [u8],
            ) -> Result<usize, Error> {
                $stream::checkpoint(self, blob, counter, out)
            }
            fn checkpoint_capacity(&self) -> usize {
                $stream::checkpoint_capacity(self)
            }
            fn horizon(&self) -> u32 {
                $stream::horizon(self)
            }
        }
    )*};
}
impl_resume!(Stream, BandMfStream, BltStream, FftStream);

/// The device root secret of every fuzzed stream (epoch keys derive from it).
pub const ROOT: [u8; 32] = [0x42; 32];

/// The epoch of every fuzzed stream's counter.
pub const EPOCH: u64 = 1;

/// The bit of the selector byte that asks for [`reframe`].
pub const REFRAME: u8 = 0x80;

/// Bytes of a checkpoint's frame before the payload: magic, version, payload length.
const PREFIX_LEN: usize = 14;

/// The payload of `bytes` — what lies between the 14-byte prefix and a 4-byte checksum, or all of
/// `bytes` if they are shorter than a frame — in a valid checkpoint frame.
pub fn reframe(bytes: &[u8]) -> Vec<u8> {
    let payload = if bytes.len() >= PREFIX_LEN + 4 {
        &bytes[PREFIX_LEN..bytes.len() - 4]
    } else {
        bytes
    };
    let declared = u32::try_from(payload.len()).expect("fuzz inputs are far below 4 GiB");
    let mut framed = Vec::with_capacity(PREFIX_LEN + payload.len() + 4);
    framed.extend_from_slice(&MAGIC);
    framed.extend_from_slice(&VERSION.to_le_bytes());
    framed.extend_from_slice(&declared.to_le_bytes());
    framed.extend_from_slice(payload);
    let crc = mfc_runtime::formats::checksum(&framed);
    framed.extend_from_slice(&crc.to_le_bytes());
    framed
}

/// Blob `index` of [`BLOBS`], parsed, with its fingerprint.
fn load(index: usize) -> (Validated<'static>, BlobFingerprint<'static>) {
    BlobFingerprint::load(BLOBS[index]).expect("the checkpoint fuzz blobs are valid")
}

/// Floats of workspace of the blob's stream at [`DIM`].
fn workspace_len(mechanism: &Validated<'_>) -> usize {
    mfc_runtime::Replay::workspace_len(mechanism, DIM).expect("small dimension")
}

/// A fresh stream of epoch [`EPOCH`] of the blob's form.
fn fresh<'w>(mechanism: Validated<'static>, workspace: &'w mut [f32]) -> Box<dyn Resume + 'w> {
    let noise = epoch_noise(&ROOT, &ReleaseCounter::new(EPOCH, 0)).expect("epoch 1 is keyed");
    let opened = "the checkpoint fuzz blobs open";
    match mechanism.decoder {
        Decoder::BandMf(_) => {
            Box::new(BandMfStream::new(mechanism, DIM, workspace, noise).expect(opened))
        }
        Decoder::Blt(_) => {
            Box::new(BltStream::new(mechanism, DIM, workspace, noise).expect(opened))
        }
        Decoder::Fft(_) => {
            Box::new(FftStream::new(mechanism, DIM, workspace, noise).expect(opened))
        }
        _ => Box::new(Stream::new(mechanism, DIM, workspace, noise).expect(opened)),
    }
}

/// Steps `a` and `b` in lockstep to the horizon, asserting bit-identical releases, then checks
/// that both are finished.
fn assert_same_releases(a: &mut dyn Resume, b: &mut dyn Resume, prefix_sum: bool, what: &str) {
    assert_eq!(a.steps_released(), b.steps_released(), "{what}");
    while a.steps_released() < a.horizon() {
        let i = a.steps_released();
        let x = advance(a, prefix_sum).map(|r| r.map(f32::to_bits));
        let y = advance(b, prefix_sum).map(|r| r.map(f32::to_bits));
        assert_eq!(x, y, "{what}: step {i}");
        if x.is_none() {
            // An unstable encoder, refused the same way by both: no later step can succeed.
            return;
        }
    }
    assert!(matches!(
        step_past_horizon(a, prefix_sum),
        Err(Error::StreamFinished { .. })
    ));
    assert!(matches!(
        step_past_horizon(b, prefix_sum),
        Err(Error::StreamFinished { .. })
    ));
}

/// The bytes of a checkpoint's frame (prefix, payload, CRC), if its length field fits in `bytes`.
fn frame_len(bytes: &[u8]) -> Option<usize> {
    let declared = bytes.get(10..14)?;
    let declared = u32::from_le_bytes([declared[0], declared[1], declared[2], declared[3]]);
    (declared as usize).checked_add(PREFIX_LEN + 4)
}

/// The property described in the [module docs](self).
pub fn checkpoint(input: &[u8]) {
    let [selector, released, ref raw @ ..] = *input else {
        return;
    };
    let reframed;
    let bytes = if selector & REFRAME != 0 {
        reframed = reframe(raw);
        &reframed[..]
    } else {
        raw
    };
    let index = usize::from(selector & !REFRAME) % BLOBS.len();
    let (mechanism, blob) = load(index);
    let prefix_sum = matches!(mechanism.header.workload, Workload::PrefixSum);
    let n = mechanism.steps();
    let counter = ReleaseCounter::new(EPOCH, u32::from(released) % (n + 2));
    let needed = workspace_len(&mechanism);

    // Workspaces start as NaN: a restore must overwrite or zero everything it uses.
    let mut workspace = vec![f32::NAN; needed];
    let mut stream = fresh(mechanism, &mut workspace);
    let mut untouched_workspace = vec![0.0f32; needed];
    let mut untouched = fresh(mechanism, &mut untouched_workspace);

    match stream.restore(&blob, bytes, &counter) {
        Err(_) => {
            assert_eq!(
                stream.steps_released(),
                0,
                "a refused restore moved the step"
            );
            assert_same_releases(
                &mut *stream,
                &mut *untouched,
                prefix_sum,
                "a refused restore changed the stream",
            );
        }
        Ok(()) => {
            let step = stream.steps_released();
            assert!(step <= n, "restored past the horizon");
            assert!(step >= counter.released(), "restored a stale checkpoint");
            assert_eq!(
                stream.restore(&blob, bytes, &counter),
                if step == 0 {
                    Ok(())
                } else {
                    Err(Error::StreamAlreadyStarted)
                },
                "a second restore"
            );
            // The restored stream's own checkpoint: the input's frame byte for byte (one accepted
            // encoding per state) and restoring to the same stream.
            let mut saved = vec![0u8; stream.checkpoint_capacity()];
            let len = stream
                .checkpoint(&blob, &counter, &mut saved)
                .expect("a restored stream checkpoints");
            let saved = &saved[..len];
            let frame = frame_len(bytes).expect("an accepted checkpoint has a length field");
            assert!(
                saved == bytes.get(..frame).unwrap_or(&[]),
                "re-checkpoint differs from the input"
            );
            let mut copy_workspace = vec![f32::NAN; needed];
            let mut copy = fresh(mechanism, &mut copy_workspace);
            copy.restore(&blob, saved, &counter)
                .expect("a re-checkpoint restores");
            assert_same_releases(
                &mut *stream,
                &mut *copy,
                prefix_sum,
                "a re-checkpoint restored differently",
            );
        }
    }
}

/// Valid checkpoints in the input layout of [`checkpoint`], in both modes: for every blob, after
/// `0, 1, 3, n/2` and `n` steps of the protocol (step, checkpoint, count), with the counter at the
/// checkpoint's step.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for index in 0..BLOBS.len() {
        let (mechanism, blob) = load(index);
        let prefix_sum = matches!(mechanism.header.workload, Workload::PrefixSum);
        let n = mechanism.steps();
        let mut workspace = vec![0.0f32; workspace_len(&mechanism)];
        let mut stream = fresh(mechanism, &mut workspace);
        let mut counter = ReleaseCounter::new(EPOCH, 0);
        let cuts = [0, 1, 3, n / 2, n];
        for taken in 0..=n {
            if cuts.contains(&taken) {
                let mut slot = vec![0u8; stream.checkpoint_capacity()];
                let len = stream
                    .checkpoint(&blob, &counter, &mut slot)
                    .expect("checkpoint");
                let released = u8::try_from(counter.released()).expect("small blobs");
                for (mode, selector) in [("raw", index as u8), ("reframed", index as u8 | REFRAME)]
                {
                    let mut seed = vec![selector, released];
                    seed.extend_from_slice(&slot[..len]);
                    out.push((format!("blob{index}_step{taken}_of{n}_{mode}.ckpt"), seed));
                }
            }
            if taken < n {
                if advance(&mut *stream, prefix_sum).is_none() {
                    break;
                }
                counter = ReleaseCounter::new(EPOCH, stream.steps_released());
            }
        }
    }
    out
}
