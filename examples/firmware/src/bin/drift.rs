//! A long horizon on the device: a constant input of 0.3 (`d = 1`) streamed for 10⁶ steps
//! through a BLT blob (`drift.mfc`: 4 buffers optimized for 64 steps, sensitivity and error over
//! 10⁶ steps, `σ = 10⁻⁶`), the stream of the issue whose plain `f32` sum ended at 299 546.7 for
//! 300 000. It prints the release of every 100 000th step as its `f32` bits and, at the end, a
//! checksum folded over the bits of all 10⁶ releases; `tests/tests/firmware.rs` replays the same
//! blob, key and inputs on the host and requires both bit for bit, and checks there that every
//! host release is within 4 ulps of the exact sum (so the device's are too).
//!
//! Exit codes (semihosting): 0 success, 2 a runtime error, 3 a hard fault, 101 a panic.
#![no_std]
#![no_main]

use cortex_m as _;
use cortex_m_rt::{ExceptionFrame, entry, exception};
use mfc_runtime::{BltStream, Error, Mechanism, ReleaseCounter, epoch_noise};

#[allow(dead_code)]
#[path = "../scenario.rs"]
mod scenario;

/// The long-horizon BLT blob (command in `README.md`).
static BLOB: &[u8] = include_bytes!("../../drift.mfc");

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
    let mechanism = Mechanism::from_bytes(BLOB)?;
    let counter = ReleaseCounter::FACTORY.cold_start()?;
    let noise = epoch_noise(&scenario::ROOT_SECRET, &counter)?;
    // (m + 2)·d floats for m ≤ 14 buffers, d = 1.
    let mut workspace = [0.0f32; 16];
    let mut stream = BltStream::new(mechanism, 1, &mut workspace, noise)?;
    let crc = u32::from_le_bytes([
        BLOB[BLOB.len() - 4],
        BLOB[BLOB.len() - 3],
        BLOB[BLOB.len() - 2],
        BLOB[BLOB.len() - 1],
    ]);
    semihosting::println!(
        "mfc drift firmware: blob CRC-32 {crc:#010x}, n = {}, d = 1, input {INPUT}",
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
