//! [`OwnedReplay`]: the runtime's [`Replay`] (any form, whole or a shard) owning its blob and
//! workspace, as a Python object must.
//!
//! The runtime's streams borrow both (`'m`, `'w`) so that a device can replay a blob from flash
//! with a static workspace and no allocator. Here both live on the heap, leaked into raw
//! pointers for the stream's lifetime and freed after it; this module holds the package's only
//! `unsafe` code, each block with its argument.

use core::mem::ManuallyDrop;
use core::ops::Range;
use core::ptr::NonNull;

use mfc_formats::{Mechanism, Validated};
use mfc_runtime::{BlobFingerprint, ChaChaNoise, Replay, Shape};

use crate::error::{Error, Result};
use crate::intake;

/// Which form `mechanism` has, as `mfc compile --form` names it ([`Shape::name`]).
pub(crate) fn form_name(mechanism: &Validated<'_>) -> &'static str {
    Shape::of(mechanism).map_or("unknown", Shape::name)
}

/// The heap buffers a stream borrows, freed when this is dropped.
struct Buffers {
    blob: NonNull<[u8]>,
    workspace: NonNull<[f32]>,
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // Safety: both pointers come from `Box::leak` in `OwnedReplay::open` and are freed only
        // here, once; every borrow of them (the stream, the fingerprint) has been dropped before
        // (`OwnedReplay::drop` drops the stream first, the fingerprint holds no drop glue, and on
        // a failed `open` nothing borrowing them survives).
        unsafe {
            drop(Box::from_raw(self.blob.as_ptr()));
            drop(Box::from_raw(self.workspace.as_ptr()));
        }
    }
}

/// A stream of any form with its own copy of the blob and its own workspace.
pub struct OwnedReplay {
    replay: ManuallyDrop<Replay<'static, ChaChaNoise>>,
    fingerprint: Option<BlobFingerprint<'static>>,
    #[allow(dead_code)] // held for its `Drop`: it frees what the stream borrows
    buffers: Buffers,
}

// Safety: the stream, the fingerprint and the buffers they borrow are owned by this value alone
// (nothing else holds the pointers), and the runtime's streams are plain data (`ChaChaNoise`,
// slices): moving the whole to another thread, or sharing `&OwnedReplay` (whose methods only
// read), is as safe as for the runtime's own `Send + Sync` streams over owned buffers.
unsafe impl Send for OwnedReplay {}
// Safety: see `Send`; `&self` methods only read.
unsafe impl Sync for OwnedReplay {}

impl OwnedReplay {
    /// Copies `blob`, parses it, allocates the workspace and opens the stream
    /// ([`Replay::shard_with_noise_multiplier`], the whole row unless `shard`). The workspace's size is checked before it is allocated, fallibly
    /// ([`intake::zeroed`], against `memory` bytes): `MemoryError`, not an abort.
    pub fn open(
        blob: &[u8],
        row_dim: usize,
        shard: Option<Range<usize>>,
        noise: ChaChaNoise,
        noise_multiplier: Option<f64>,
        memory: Option<u64>,
    ) -> Result<Self> {
        let dim = shard.as_ref().map_or(row_dim, Range::len);
        let mechanism = Mechanism::from_bytes(blob)?;
        let needed = Replay::workspace_len(&mechanism, dim).map_err(|e| match e {
            mfc_runtime::Error::InvalidDimension => Error::Value(format!(
                "dim: {dim} coordinates are more than a stream of this {} blob can address \
                 (its noise covers at most 2^51 coordinates per step)",
                form_name(&mechanism)
            )),
            e => Error::Runtime(e),
        })?;
        let workspace = intake::zeroed::<f32>(
            needed,
            &format!("Stream: the workspace of {needed} floats for dim = {dim}"),
            memory,
        )?;
        let buffers = Buffers {
            blob: NonNull::from(Box::leak(blob.to_vec().into_boxed_slice())),
            workspace: NonNull::from(Box::leak(workspace.into_boxed_slice())),
        };
        // Safety: the blob is never written and lives until `buffers` is dropped, after every
        // borrow made here (see `Drop for OwnedReplay`); `'static` is never handed out.
        let blob: &'static [u8] = unsafe { buffers.blob.as_ref() };
        // Safety: as for the blob; this is the only reference ever made to the workspace.
        let workspace: &'static mut [f32] = unsafe { &mut *buffers.workspace.as_ptr() };
        let mechanism = Mechanism::from_bytes(blob)?;
        let fingerprint = BlobFingerprint::load(blob).ok().map(|(_, f)| f);
        let recorded = mechanism.header.calibration.map(|c| c.noise_multiplier);
        let sigma = noise_multiplier
            .or(recorded)
            .ok_or(mfc_runtime::Error::NotCalibrated)?;
        let range = shard.unwrap_or(0..row_dim);
        let replay = Replay::shard_with_noise_multiplier(
            mechanism, row_dim, range, workspace, noise, sigma,
        )?;
        Ok(Self {
            replay: ManuallyDrop::new(replay),
            fingerprint,
            buffers,
        })
    }

    /// The stream, for the duration of `f`.
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Replay<'_>) -> R) -> R {
        f(&mut self.replay)
    }

    /// The stream and the blob's fingerprint (every form), for the duration of `f`.
    pub fn with_fingerprint<R>(
        &mut self,
        f: impl FnOnce(&mut Replay<'_>, Option<&BlobFingerprint<'_>>) -> R,
    ) -> R {
        f(&mut self.replay, self.fingerprint.as_ref())
    }

    /// The stream, read only.
    pub fn get(&self) -> &Replay<'_> {
        &self.replay
    }

    /// The blob's fingerprint for checkpoints (every form).
    pub fn fingerprint(&self) -> Option<&BlobFingerprint<'_>> {
        self.fingerprint.as_ref()
    }
}

impl Drop for OwnedReplay {
    fn drop(&mut self) {
        // Safety: dropped once, here; `buffers`, which it borrows, is dropped after this body.
        unsafe { ManuallyDrop::drop(&mut self.replay) }
    }
}
