//! Issue 20: a signed blob verified on a Cortex-M4F under QEMU. `verify-banded.signed.mfc` is
//! `verify-banded.mfc` signed by `mfc sign` with the secret key of RFC 8032, §7.1, TEST 1 (a
//! published test key: never sign a real blob with it). The firmware checks the signature
//! against the public key it holds, then a copy with one bit flipped, the same blob under
//! another public key, the signature with `S + ℓ` and the key of small order 1 (all four must be
//! refused), and prints the instructions of one verification (SysTick under
//! `qemu -icount shift=6`, with its wraps counted, converted by the board's calibration loop) and
//! the stack it took.
//!
//! Built with feature `signature` it verifies with the runtime (`mfc_runtime::signature`: salty
//! under `verify_strict`'s rules); with feature `dalek` or `compact` (comparison only, issue 33)
//! with ed25519-dalek's `verify_strict` or ed25519-compact; with none it only parses the blob, the
//! baseline of the code-size comparison (`README.md`, "Signed blobs").
//!
//! Exit codes (semihosting): 0 verified and all four refused, 1 otherwise, 3 a hard fault, 101 a
//! panic.
#![no_std]
#![no_main]

use cortex_m as _;
use cortex_m_rt::{ExceptionFrame, entry, exception};
#[cfg(not(feature = "signature"))]
use mfc_runtime::formats::signature::split_signed;

#[allow(dead_code)]
#[path = "../systick.rs"]
mod systick;

/// What `systick` needs of the firmware's logging shim.
mod log {
    /// Ends the program with `code` as QEMU's exit status.
    pub fn exit(code: i32) -> ! {
        semihosting::process::exit(code)
    }
}

/// The signed blob (command in the module docs).
static SIGNED: &[u8] = include_bytes!("../../verify-banded.signed.mfc");

/// The public key of RFC 8032, TEST 1.
const PUBLIC: [u8; 32] = [
    0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
    0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
];

/// Another public key (RFC 8032, TEST 2).
const OTHER: [u8; 32] = [
    0x3d, 0x40, 0x17, 0xc3, 0xe8, 0x43, 0x89, 0x5a, 0x92, 0xb7, 0x0a, 0xa7, 0x4d, 0x1b, 0x7e, 0xbc,
    0x9c, 0x98, 0x2c, 0xcf, 0x2e, 0xc4, 0x96, 0x8c, 0xc0, 0xcd, 0x55, 0xf1, 0x2a, 0xf4, 0x66, 0x0c,
];

/// The order ℓ of the base point, little-endian: `S + ℓ` must be refused (non-canonical `S`).
const ORDER: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
];

/// `true` when `bytes` is a signed blob whose signature verifies under `key` (and whose blob
/// then parses).
#[cfg(feature = "signature")]
fn verify(bytes: &[u8], key: &[u8; 32]) -> bool {
    mfc_runtime::signature::from_signed_bytes(bytes, key).is_ok()
}

#[cfg(all(feature = "dalek", not(feature = "signature")))]
fn verify(bytes: &[u8], key: &[u8; 32]) -> bool {
    let Some(signed) = split_signed(bytes) else {
        return false;
    };
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(key) else {
        return false;
    };
    let signature = ed25519_dalek::Signature::from_bytes(signed.signature);
    key.verify_strict(signed.blob, &signature).is_ok()
        && mfc_runtime::Mechanism::from_bytes(signed.blob).is_ok()
}

#[cfg(all(
    feature = "compact",
    not(any(feature = "signature", feature = "dalek"))
))]
fn verify(bytes: &[u8], key: &[u8; 32]) -> bool {
    let Some(signed) = split_signed(bytes) else {
        return false;
    };
    let key = ed25519_compact::PublicKey::new(*key);
    let signature = ed25519_compact::Signature::new(*signed.signature);
    key.verify(signed.blob, &signature).is_ok()
        && mfc_runtime::Mechanism::from_bytes(signed.blob).is_ok()
}

/// The baseline: split and parse only (no signature check; measurement only).
#[cfg(not(any(feature = "signature", feature = "dalek", feature = "compact")))]
fn verify(bytes: &[u8], key: &[u8; 32]) -> bool {
    key == &PUBLIC
        && split_signed(bytes).is_some_and(|s| mfc_runtime::Mechanism::from_bytes(s.blob).is_ok())
}

#[entry]
fn main() -> ! {
    let timer = systick::Timer::start_counting_wraps();
    let loop_ticks = timer.loop_ticks();

    let stack = systick::StackProbe::paint();
    let start = timer.ticks();
    let good = verify(SIGNED, &PUBLIC);
    let elapsed = timer.ticks() - start;
    let stack_bytes = stack.used();
    let verifier = if cfg!(feature = "signature") {
        "salty (mfc_runtime::signature)"
    } else if cfg!(feature = "dalek") {
        "ed25519-dalek"
    } else if cfg!(feature = "compact") {
        "ed25519-compact"
    } else {
        "none (baseline: parse only)"
    };
    semihosting::println!(
        "{verifier}: signed blob of {} bytes {}; {} instructions, {stack_bytes} bytes of stack",
        SIGNED.len(),
        if good { "verified" } else { "NOT verified" },
        elapsed * systick::LOOP_INSTRUCTIONS / loop_ticks
    );
    let mut ok = good;
    if cfg!(any(
        feature = "signature",
        feature = "dalek",
        feature = "compact"
    )) {
        let mut copy = [0u8; 4096];
        let copy = &mut copy[..SIGNED.len()];
        copy.copy_from_slice(SIGNED);
        copy[100] ^= 0x10;
        let flipped = verify(copy, &PUBLIC);
        copy[100] ^= 0x10;
        let other = verify(SIGNED, &OTHER);
        // The same signature with S + ℓ (S is the trailer's last 32 bytes, little-endian).
        let mut carry = 0u16;
        for (byte, order) in copy[SIGNED.len() - 32..].iter_mut().zip(ORDER) {
            let sum = u16::from(*byte) + u16::from(order) + carry;
            *byte = sum as u8;
            carry = sum >> 8;
        }
        let malleated = carry == 0 && verify(copy, &PUBLIC);
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let small_order = verify(SIGNED, &identity);
        let verdict = |accepted: bool| if accepted { "ACCEPTED" } else { "refused" };
        semihosting::println!(
            "one bit flipped: {}; another public key: {}; S + l: {}; a small-order key: {}",
            verdict(flipped),
            verdict(other),
            verdict(malleated),
            verdict(small_order)
        );
        ok &= !flipped && !other && !malleated && !small_order;
    }
    semihosting::process::exit(if ok { 0 } else { 1 })
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("panic: {info}");
    semihosting::process::exit(101)
}

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    semihosting::process::exit(3)
}
