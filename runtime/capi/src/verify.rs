//! The verification of a blob's recorded sensitivity (`mfc_runtime::verify`) for C callers:
//! `mfc_verify` on its own, and the admission every `mfc_stream_open*` runs by default —
//! `mfc_runtime::policy::admit`, the device's policy, with the caller's options
//! ([`MfcOpenOptions`]): a blob whose recorded sensitivity is understated is refused, one that
//! cannot be verified is refused unless the caller opts in by name
//! ([`MFC_OPEN_ALLOW_UNVERIFIED`]), and the outcome stays visible on the stream
//! ([`MfcVerdict`], `mfc_stream_verdict`).

use mfc_formats::{Mechanism, Validated};
use mfc_runtime::policy::{Floor, Policy};
use mfc_runtime::verify::{self, Unverifiable, Verdict};
use mfc_runtime::{Error, Shape};

use crate::{MfcStatus, Span, bytes};

/// Admit a blob whose sensitivity could not be verified (its form or schema has no verification
/// here, the budget or the scratch is too small, or its residual too large to certify), as
/// `mfc_runtime::policy::Policy::refuse_unverifiable` set to false. The stream's
/// [`MfcVerdict`] says why. A blob whose recorded sensitivity is *below* the recomputed bound is
/// refused whatever the flags.
pub const MFC_OPEN_ALLOW_UNVERIFIED: u32 = 1;

/// With [`MFC_OPEN_ALLOW_UNVERIFIED`], also admit an unverified BLT bound for every horizon
/// (`mfc compile --horizon unbounded`), as `Policy::admit_unbounded_horizon`: such a stream
/// never stops, and one whose encoder does not decay releases with a sensitivity growing without
/// limit. A verified one needs no flag.
pub const MFC_OPEN_ALLOW_UNVERIFIED_UNBOUNDED_HORIZON: u32 = 2;

/// Do not verify at all (the verdict is `MFC_VERDICT_SKIPPED`): for a device that verified this
/// very blob once (`mfc_verify`, e.g. at provisioning, where time and scratch are plentiful) and
/// keeps it where it cannot change (write-protected flash, or a signature checked at boot). The
/// blob's CRC-32 is still checked; its sensitivity is the compiler's word.
pub const MFC_OPEN_SKIP_VERIFICATION: u32 = 4;

/// Every flag this library knows; any other bit is refused (`MFC_STATUS_INVALID_ARGUMENT`), so a
/// flag of a later header is never silently ignored.
const KNOWN_FLAGS: u32 = MFC_OPEN_ALLOW_UNVERIFIED
    | MFC_OPEN_ALLOW_UNVERIFIED_UNBOUNDED_HORIZON
    | MFC_OPEN_SKIP_VERIFICATION;

/// The operations (`mfc_runtime::verify::operations`) a verification may spend when the caller
/// gives 0: ten million, the budget of the README's device policy. Every blob of the CI and of
/// the README's device table needs under 10⁵; it covers a banded blob up to `n ≈ 1400` with
/// `h + 2r = 10` (`n²/2·(h + 2r)`), and bounds what a forged header can cost: well under a
/// second on a host, and minutes on a 64 MHz Cortex-M4F (2·10⁴–5·10⁴ operations a second in
/// soft-float `f64`), which should give its own boot budget.
pub const MFC_VERIFY_DEFAULT_OPERATIONS: u64 = 10_000_000;

/// How `mfc_stream_open*` admit the blob. A null pointer, or all fields zero (`{0}`), is the
/// default: verify with [`MFC_VERIFY_DEFAULT_OPERATIONS`], the stream's own workspace as scratch,
/// and refuse what cannot be verified.
///
/// Verification needs `mfc_verify_scratch_len` doubles of scratch. With `scratch` null the
/// library uses the stream's workspace (its 8-aligned part), which the stream does not use until
/// it is built, after the verification: enough for most blobs under single participation; when
/// it is too short, open returns `MFC_STATUS_VERIFY_SCRATCH_TOO_SMALL` and the caller passes
/// scratch here (any memory free during the call, e.g. the checkpoint slot or the stack; not the
/// blob, workspace, storage or key), or opts out by name.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MfcOpenOptions {
    /// `MFC_OPEN_*` flags, or 0.
    pub flags: u32,
    /// The most operations the verification may spend; 0 for
    /// [`MFC_VERIFY_DEFAULT_OPERATIONS`], `UINT64_MAX` for no limit.
    pub max_operations: u64,
    /// `scratch_len` writable doubles for the verification, or null for the stream's workspace.
    pub scratch: *mut f64,
    /// Doubles at `scratch` (0 when it is null).
    pub scratch_len: usize,
}

impl MfcOpenOptions {
    /// The defaults (what a null options pointer means).
    pub(crate) const DEFAULT: Self = Self {
        flags: 0,
        max_operations: 0,
        scratch: core::ptr::null_mut(),
        scratch_len: 0,
    };

    /// The flags, if every one is known.
    pub(crate) fn flags(&self) -> Option<u32> {
        (self.flags & !KNOWN_FLAGS == 0).then_some(self.flags)
    }

    /// The budget, 0 read as the default.
    pub(crate) fn max_operations(&self) -> u64 {
        budget(self.max_operations)
    }
}

/// `max_operations`, 0 read as [`MFC_VERIFY_DEFAULT_OPERATIONS`].
fn budget(max_operations: u64) -> u64 {
    if max_operations == 0 {
        MFC_VERIFY_DEFAULT_OPERATIONS
    } else {
        max_operations
    }
}

/// What the verification at open concluded: `mfc_stream_verdict`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MfcVerdict {
    /// The recorded sensitivity is at least the bound recomputed from the stored coefficients.
    Verified = 0,
    /// Opened with `MFC_OPEN_SKIP_VERIFICATION`: not checked.
    Skipped = 1,
    /// Opened with `MFC_OPEN_ALLOW_UNVERIFIED`, not verified, for a reason this header does not
    /// name.
    Unverified = 2,
    /// Not verified: the decoder form has no verification.
    UnverifiedForm = 3,
    /// Not verified: the participation schema has no exact verification for this form (e.g.
    /// the FFT forms under min separation).
    UnverifiedSchema = 4,
    /// Not verified: the workload is custom and the blob does not store it.
    UnverifiedWorkloadNotStored = 5,
    /// Not verified: it needs more operations than `max_operations`.
    UnverifiedOverBudget = 6,
    /// Not verified: the scratch is shorter than `mfc_verify_scratch_len`.
    UnverifiedScratchTooSmall = 7,
    /// Not verified: the residual of the solved encoder is too large to certify, a bound is not
    /// finite, or a BLT bound for every horizon has no contracting power of its state matrix.
    UnverifiedIllConditioned = 8,
    /// Null, closed or never opened: no stream.
    NoStream = 9,
}

impl From<Unverifiable> for MfcVerdict {
    fn from(why: Unverifiable) -> Self {
        match why {
            Unverifiable::Form => MfcVerdict::UnverifiedForm,
            Unverifiable::Schema => MfcVerdict::UnverifiedSchema,
            Unverifiable::WorkloadNotStored => MfcVerdict::UnverifiedWorkloadNotStored,
            Unverifiable::OverBudget { .. } => MfcVerdict::UnverifiedOverBudget,
            Unverifiable::ScratchTooSmall { .. } => MfcVerdict::UnverifiedScratchTooSmall,
            Unverifiable::IllConditioned => MfcVerdict::UnverifiedIllConditioned,
            _ => MfcVerdict::Unverified,
        }
    }
}

/// The refusal of a blob that could not be verified: what the caller can fix (scratch, budget)
/// has its own status, the rest is `MFC_STATUS_UNVERIFIABLE`.
fn refusal(why: Unverifiable) -> MfcStatus {
    match why {
        Unverifiable::OverBudget { .. } => MfcStatus::VerifyOverBudget,
        Unverifiable::ScratchTooSmall { .. } => MfcStatus::VerifyScratchTooSmall,
        _ => MfcStatus::Unverifiable,
    }
}

/// Whether this library replays (and verifies) the blob's form: its `form-*` feature is on.
fn replayed(m: &Mechanism<'_>) -> bool {
    Shape::of(m).is_ok_and(Shape::replayed)
}

/// The verifiers this library links (`mfc_runtime::verify::forms`): those of the forms its
/// `form-*` features select, under every participation schema. `verify::verify_only` leaves the
/// others out of the library; [`replayed`] refuses their blobs first.
const FORMS: u8 = {
    use verify::forms;
    let mut set = forms::SINGLE | forms::FIXED_EPOCH_ORDER | forms::MIN_SEPARATION;
    if cfg!(feature = "form-banded") {
        set |= forms::BANDED;
    }
    if cfg!(feature = "form-blt") {
        set |= forms::BLT | forms::BLT_EVERY_HORIZON;
    }
    if cfg!(feature = "form-bandmf") {
        set |= forms::BANDMF;
    }
    if cfg!(feature = "form-fft") {
        set |= forms::FFT;
    }
    set
};

/// The device's policy (`mfc_runtime::policy`: the verification, then `Policy::decide`) under
/// `flags`, with `scratch` and the budget `max_operations`, before any stream is built: the
/// verdict the stream keeps, or the refusal, which says what the caller can change (scratch,
/// budget) when that is why the blob could not be verified. No floor on `σ` (the blob's own,
/// which the stream uses; an uncalibrated blob is refused before, `MFC_STATUS_NOT_CALIBRATED`),
/// so the floor's analytic-Gaussian code is not linked.
pub(crate) fn admit(
    m: &Validated<'_>,
    flags: u32,
    scratch: &mut [f64],
    max_operations: u64,
) -> Result<MfcVerdict, MfcStatus> {
    if flags & MFC_OPEN_SKIP_VERIFICATION != 0 {
        return Ok(MfcVerdict::Skipped);
    }
    let policy = Policy {
        floor: Floor::NoiseMultiplier { min: 0.0 },
        max_operations,
        refuse_unverifiable: flags & MFC_OPEN_ALLOW_UNVERIFIED == 0,
        admit_unbounded_horizon: flags & MFC_OPEN_ALLOW_UNVERIFIED_UNBOUNDED_HORIZON != 0,
    };
    let verdict = verify::verify_only::<FORMS>(m, scratch, max_operations);
    let why = match verdict {
        Ok(Verdict::Unverifiable(why)) => Some(why),
        _ => None,
    };
    match policy.decide(m, verdict) {
        Ok(Verdict::Verified { .. }) => Ok(MfcVerdict::Verified),
        Ok(Verdict::Unverifiable(why)) => Ok(why.into()),
        Err(Error::SensitivityUnverified) => Err(why.map_or(MfcStatus::Unverifiable, refusal)),
        Err(e) => Err(e.into()),
    }
}

/// The `double`s of scratch `mfc_verify` (and the verification of `mfc_stream_open*`) needs for
/// this blob, written to `*out`; `MFC_STATUS_UNSUPPORTED_DECODER` for a form this library leaves
/// out (built without its `form-*` feature).
///
/// # Safety
/// `blob` must point to `blob_len` readable bytes and `out` to a writable `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mfc_verify_scratch_len(
    blob: *const u8,
    blob_len: usize,
    out: *mut usize,
) -> MfcStatus {
    // SAFETY: the caller's contract above.
    let Some(blob) = (unsafe { bytes(blob, blob_len) }) else {
        return MfcStatus::InvalidArgument;
    };
    let Some(out_span) = Span::of(out.cast_const(), 1).filter(|_| !out.is_null()) else {
        return MfcStatus::InvalidArgument;
    };
    if out_span.overlaps(Span::of_bytes(blob)) {
        return MfcStatus::Overlap;
    }
    match Mechanism::from_bytes(blob) {
        Ok(m) if !replayed(&m) => MfcStatus::UnsupportedDecoder,
        Ok(m) => {
            // SAFETY: non-null, aligned (`Span::of`), writable by the caller's contract, and not
            // in the blob (checked), which is no longer read.
            unsafe { out.write(verify::scratch_len(&m)) };
            MfcStatus::Ok
        }
        Err(e) => Error::from(e).into(),
    }
}

/// Recomputes the blob's sensitivity from its stored coefficients, with at most
/// `max_operations` operations (0: `MFC_VERIFY_DEFAULT_OPERATIONS`, `UINT64_MAX`: no limit) and
/// `scratch` (`scratch_len` doubles, see `mfc_verify_scratch_len`). Returns `MFC_STATUS_OK` and
/// writes the bound to `*bound` when the recorded sensitivity is at least the bound,
/// `MFC_STATUS_SENSITIVITY_UNDERSTATED` when it is below (refuse the blob), and when the bound
/// could not be computed (the caller's policy decides): `MFC_STATUS_VERIFY_SCRATCH_TOO_SMALL`,
/// `MFC_STATUS_VERIFY_OVER_BUDGET`, or `MFC_STATUS_UNVERIFIABLE` (the form, schema or
/// conditioning of the blob); `MFC_STATUS_UNSUPPORTED_DECODER` for a form this library leaves
/// out (built without its `form-*` feature). `bound` may be null. `scratch`, `bound` and the
/// blob must not share memory (`MFC_STATUS_OVERLAP`); `scratch` and `bound` must be aligned for
/// `double` (`MFC_STATUS_INVALID_ARGUMENT`).
///
/// # Safety
/// `blob` must point to `blob_len` readable bytes, `scratch` to `scratch_len` writable doubles
/// (or be null with `scratch_len` 0), and `bound` be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mfc_verify(
    blob: *const u8,
    blob_len: usize,
    scratch: *mut f64,
    scratch_len: usize,
    max_operations: u64,
    bound: *mut f64,
) -> MfcStatus {
    // SAFETY: the caller's contract above.
    let Some(blob) = (unsafe { bytes(blob, blob_len) }) else {
        return MfcStatus::InvalidArgument;
    };
    let blob_span = Span::of_bytes(blob);
    let Some(scratch_span) = Span::of(scratch.cast_const(), scratch_len) else {
        return MfcStatus::InvalidArgument;
    };
    if scratch.is_null() && scratch_len != 0 {
        return MfcStatus::InvalidArgument;
    }
    let bound_span = if bound.is_null() {
        None
    } else {
        let Some(span) = Span::of(bound.cast_const(), 1) else {
            return MfcStatus::InvalidArgument;
        };
        Some(span)
    };
    if scratch_span.overlaps(blob_span)
        || bound_span.is_some_and(|b| b.overlaps(blob_span) || b.overlaps(scratch_span))
    {
        return MfcStatus::Overlap;
    }
    let scratch: &mut [f64] = if scratch_len == 0 {
        &mut []
    } else {
        // SAFETY: non-null, aligned and of a size that fits `isize` (`Span::of`), valid for
        // `scratch_len` doubles by the caller's contract, and disjoint from the blob (checked).
        unsafe { core::slice::from_raw_parts_mut(scratch, scratch_len) }
    };
    let m = match Mechanism::from_bytes(blob) {
        Ok(m) => m,
        Err(e) => return Error::from(e).into(),
    };
    if !replayed(&m) {
        return MfcStatus::UnsupportedDecoder;
    }
    match verify::verify_only::<FORMS>(&m, scratch, budget(max_operations)) {
        Ok(Verdict::Verified { bound: b, .. }) => {
            if !bound.is_null() {
                // SAFETY: non-null, aligned, writable by the caller's contract, and disjoint from
                // the blob and the scratch (checked).
                unsafe { bound.write(b) };
            }
            MfcStatus::Ok
        }
        Ok(Verdict::Unverifiable(why)) => refusal(why),
        Err(e) => e.into(),
    }
}
