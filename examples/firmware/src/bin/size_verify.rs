//! The program whose code size the verification table reports (`budget.sh`, "Verification
//! code size per form"): it parses the embedded blob (`MFC_FIRMWARE_BLOB`) and verifies its
//! recorded sensitivity (`mfc_runtime::verify`), linking only the verifier of the blob's form
//! and schema (`verify::verify_only`, with the bits `build.rs` reads from the blob,
//! `verify::forms::of`). With `size-verify-all` it links every form's verifier
//! (`verify::verify`, what a firmware that dispatches over every form pays). With
//! `size-baseline` the same program only parses the blob; the verification's size is the
//! difference of `.text + .rodata`, so startup code, the blob, the parser and the exit path are
//! not counted.
//!
//! Exit codes (semihosting): 0 verified (or, for the baseline, parsed), 1 unverifiable, 2 an
//! error (a refusal, an invalid blob), 101 a panic, 3 a hard fault. Its panic handler only
//! exits: the verifier's panic paths are counted by their code, not by a formatter.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m as _;
use cortex_m_rt::{ExceptionFrame, entry, exception};
use mfc_runtime::formats::Validated;

#[allow(dead_code)]
mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}

static BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob.mfc"));

#[entry]
fn main() -> ! {
    let code = match mfc_runtime::Mechanism::from_bytes(black_box(BLOB)) {
        Ok(m) => check(&m),
        Err(e) => {
            black_box(&e);
            2
        }
    };
    semihosting::process::exit(code)
}

/// The baseline: the blob parsed, nothing verified.
#[cfg(feature = "size-baseline")]
fn check(m: &Validated<'_>) -> i32 {
    black_box(m);
    0
}

/// The blob's sensitivity verified.
#[cfg(not(feature = "size-baseline"))]
fn check(m: &Validated<'_>) -> i32 {
    use mfc_runtime::verify::{self, Verdict};
    /// Scratch for the verification (the most the verify firmware's blobs need).
    const SCRATCH: usize = 4200;
    let mut scratch = [0.0f64; SCRATCH];
    #[cfg(feature = "size-verify-all")]
    let verdict = verify::verify(m, &mut scratch, black_box(u64::MAX));
    #[cfg(not(feature = "size-verify-all"))]
    let verdict =
        verify::verify_only::<{ config::VERIFY_FORMS }>(m, &mut scratch, black_box(u64::MAX));
    match verdict {
        Ok(Verdict::Verified { .. }) => 0,
        Ok(Verdict::Unverifiable(why)) => {
            black_box(&why);
            1
        }
        Err(e) => {
            black_box(&e);
            2
        }
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::process::exit(101)
}

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    semihosting::process::exit(3)
}
