//! A long horizon on the device: a constant input of 0.3 (`d = 1`) streamed for 10⁶ steps
//! through each form whose blob has that horizon, one after the other, all through
//! [`Replay`](mfc_runtime::Replay):
//!
//! - `drift.mfc`: BLT, 4 buffers optimized for 64 steps, sensitivity and error over 10⁶ steps —
//!   the stream of the issue whose plain `f32` sum ended at 299 546.7 for 300 000;
//! - `drift-bandmf.mfc`: BandMF, banded Toeplitz encoder of 4 bands, optimized over 10⁶ steps;
//! - `drift-fft.mfc`: FFT, 1000 blocks of 1000 steps (its workspace, 19 387 floats, is the
//!   largest here).
//!
//! All three have `σ = 10⁻⁶` (commands in `README.md`). For each blob the firmware prints a
//! banner, the release of every 100 000th step as its `f32` bits and, at the end, a checksum
//! folded over the bits of all 10⁶ releases; `tests/tests/firmware.rs` replays the same blobs,
//! key and inputs on the host and requires every line bit for bit, and
//! `tests/tests/exact_sums.rs` checks there that every host release of these blobs is within 4
//! ulps of the exact sum (so the device's are too). Each blob's stream draws the noise of epoch
//! 1 of the same root secret: the three runs test arithmetic, not a deployment (which must
//! never reuse a key across mechanisms on the same data).
//!
//! The banded form does not take part: its tables hold `4n·(h + 2r)` bytes, 16 MB at `n = 10⁶`
//! for `(h, r) = (2, 1)`, four times the board's 4 MiB of flash (`README.md` states the largest
//! `n` that fits; `tests/tests/exact_sums.rs` covers `n = 10⁶` on the host).
//!
//! Exit codes (semihosting): 0 success, 2 a runtime error, 3 a hard fault, 101 a panic.
#![no_std]
#![no_main]

use cortex_m as _;
use cortex_m_rt::{ExceptionFrame, entry, exception};
use mfc_runtime::formats::FftKind;
use mfc_runtime::{Error, Mechanism, ReleaseCounter, Replay, Shape, epoch_noise};

#[allow(dead_code)]
#[path = "../scenario.rs"]
mod scenario;

/// The long-horizon blobs, by form (commands in `README.md`).
static BLOBS: [(&str, &[u8]); 3] = [
    ("BLT", include_bytes!("../../drift.mfc")),
    ("BandMF", include_bytes!("../../drift-bandmf.mfc")),
    ("FFT", include_bytes!("../../drift-fft.mfc")),
];

/// Floats of workspace: the largest of the blobs' at `d = 1`, the FFT blob's (Mechanism 1 with
/// blocks of `m = 1000` steps; the BLT and BandMF blobs need 6), by the runtime's formula
/// (`Shape::workspace_len`, evaluated at compile time).
const WORKSPACE: usize = Shape::Fft {
    kind: FftKind::Circulant,
    block: 1000,
}
.workspace_len(1)
.unwrap();

/// The constant input of every step.
const INPUT: f32 = 0.3;

/// Every this many steps a release is printed.
const EVERY: u32 = 100_000;

#[entry]
fn main() -> ! {
    let code = match run() {
        Ok(()) => 0,
        Err(e) => {
            semihosting::eprintln!("error: {e}");
            2
        }
    };
    semihosting::process::exit(code)
}

fn run() -> Result<(), Error> {
    let mut workspace = [0.0f32; WORKSPACE];
    for (form, blob) in BLOBS {
        drift(form, blob, &mut workspace)?;
    }
    Ok(())
}

/// Streams 0.3 through `blob` for its whole horizon, printing what the module docs say.
fn drift(form: &str, blob: &'static [u8], workspace: &mut [f32]) -> Result<(), Error> {
    let mechanism = Mechanism::from_bytes(blob)?;
    let counter = ReleaseCounter::FACTORY.cold_start()?;
    let noise = epoch_noise(&scenario::ROOT_SECRET, &counter)?;
    let mut stream = Replay::open(mechanism, 1, workspace, noise)?;
    let crc = u32::from_le_bytes([
        blob[blob.len() - 4],
        blob[blob.len() - 3],
        blob[blob.len() - 2],
        blob[blob.len() - 1],
    ]);
    semihosting::println!(
        "mfc drift firmware: {form} blob CRC-32 {crc:#010x}, n = {}, d = 1, input {INPUT}",
        stream.horizon()
    );
    let mut release = [0.0f32];
    let mut checksum = 0u32;
    for step in 0..stream.horizon() {
        stream.step(&[INPUT], &mut release)?;
        checksum = scenario::fold_checksum(checksum, &release);
        if (step + 1) % EVERY == 0 {
            semihosting::println!(
                "release {:>7}: {:08x} | {}",
                step + 1,
                release[0].to_bits(),
                release[0]
            );
        }
    }
    semihosting::println!(
        "done: {} steps released, checksum {checksum:#010x}",
        stream.steps_released()
    );
    Ok(())
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
