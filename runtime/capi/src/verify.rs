//! `mfc_verify`: the runtime's verification of a blob's recorded sensitivity
//! (`mfc_runtime::verify`) for C callers, before `mfc_stream_new`.

use mfc_formats::Mechanism;
use mfc_runtime::Error;
use mfc_runtime::verify::{self, Verdict};

use crate::{MfcStatus, bytes};

/// The `double`s of scratch `mfc_verify` needs for this blob, written to `*out`.
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
    let (Some(blob), false) = (unsafe { bytes(blob, blob_len) }, out.is_null()) else {
        return MfcStatus::InvalidArgument;
    };
    match Mechanism::from_bytes(blob) {
        Ok(m) => {
            // SAFETY: `out` is non-null and writable by the caller's contract.
            unsafe { out.write(verify::scratch_len(&m)) };
            MfcStatus::Ok
        }
        Err(e) => Error::from(e).into(),
    }
}

/// Recomputes the blob's sensitivity from its stored coefficients, with at most
/// `max_operations` operations and `scratch` (`scratch_len` doubles, see
/// `mfc_verify_scratch_len`). Returns `MFC_STATUS_OK` and writes the bound to `*bound` when the
/// recorded sensitivity is at least the bound, `MFC_STATUS_SENSITIVITY_UNDERSTATED` when it is
/// below (refuse the blob), and `MFC_STATUS_UNVERIFIABLE` when the bound could not be computed
/// (the caller's policy decides). `bound` may be null.
///
/// # Safety
/// `blob` must point to `blob_len` readable bytes, `scratch` to `scratch_len` writable doubles
/// (or be null with `scratch_len` 0) not overlapping the blob, and `bound` be null or writable.
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
    let scratch: &mut [f64] = if scratch_len == 0 {
        &mut []
    } else if scratch.is_null() || !scratch.is_aligned() || scratch_len > isize::MAX as usize / 8 {
        return MfcStatus::InvalidArgument;
    } else {
        // SAFETY: non-null, aligned and valid for `scratch_len` doubles by the caller's contract.
        unsafe { core::slice::from_raw_parts_mut(scratch, scratch_len) }
    };
    let m = match Mechanism::from_bytes(blob) {
        Ok(m) => m,
        Err(e) => return Error::from(e).into(),
    };
    match verify::verify(&m, scratch, max_operations) {
        Ok(Verdict::Verified { bound: b, .. }) => {
            if !bound.is_null() {
                // SAFETY: non-null and writable by the caller's contract.
                unsafe { bound.write(b) };
            }
            MfcStatus::Ok
        }
        Ok(Verdict::Unverifiable(_)) => MfcStatus::Unverifiable,
        Err(e) => e.into(),
    }
}
