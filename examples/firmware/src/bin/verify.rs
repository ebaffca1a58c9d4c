//! Issue 20 on the device: the runtime's verification of a blob's recorded sensitivity
//! (`mfc_runtime::verify`) on a Cortex-M4F under QEMU, for one blob of each form it verifies,
//! each compiled by `mfc compile` (commands below). For each blob it prints the verdict, the
//! bound's `f64` bits (the host computes the same bits: `tests/tests/firmware.rs` is not needed,
//! `mfc inspect --json` prints the bound), the operations, the instructions (SysTick under
//! `qemu -icount shift=6`, with its wraps counted, converted by the board's calibration loop) and
//! the stack; then it lowers each blob's recorded sensitivity by 1%, rewrites the blob with its
//! CRC-32 (`Mechanism::write_to`) and requires the refusal `SensitivityUnderstated`.
//!
//! Blobs (from the repository root):
//!
//! ```text
//! mfc compile --workload prefix --steps 64 --band 4 --rank 4 --epsilon 2 --delta 1e-6 \
//!     --clip-norm 1 --out examples/firmware/verify-banded.mfc              # CRC-32 0x5f641869
//! mfc compile --workload prefix --steps 64 --band 4 --rank 4 --epochs 4 --every 16 \
//!     --epsilon 2 --delta 1e-6 --out examples/firmware/verify-banded-every.mfc       # 0x691341a4
//! mfc compile --workload prefix --steps 64 --band 4 --rank 4 --epochs 4 --min-sep 16 \
//!     --epsilon 2 --delta 1e-6 --out examples/firmware/verify-banded-min-sep.mfc     # 0x36192524
//! mfc compile --workload prefix --form blt --buffers 4 --steps 64 --horizon 4096 --epochs 4 \
//!     --min-sep 16 --epsilon 2 --delta 1e-6 --out examples/firmware/verify-blt.mfc   # 0x57c4d973
//! mfc compile --workload prefix --form bandmf --bands 8 --steps 64 --epochs 4 --min-sep 16 \
//!     --epsilon 2 --delta 1e-6 --out examples/firmware/verify-bandmf.mfc            # 0x5325f48d
//! mfc compile --workload prefix --form blt --buffers 4 --steps 48 --horizon unbounded \
//!     --epsilon 2 --delta 1e-6 --out examples/firmware/verify-blt-unbounded.mfc     # 0x14d927ca
//! mfc compile --workload prefix --form fft --steps 32 --stamps 2 --epsilon 2 --delta 1e-6 \
//!     --out examples/firmware/verify-fft.mfc                                     # 0xe4f0f340
//! mfc compile --workload prefix --form fft-optimal --steps 32 --stamps 2 --epsilon 2 \
//!     --delta 1e-6 --out examples/firmware/verify-fft-optimal.mfc                # 0x34b83cf2
//! ```
//!
//! The sixth is the README's BLT with a bound for every horizon (`verify::blt_tail`), whose
//! operations are counted as it runs.
//!
//! Exit codes (semihosting): 0 every blob verified and every lowered one refused, 1 otherwise,
//! 3 a hard fault, 101 a panic.
#![no_std]
#![no_main]

use cortex_m as _;
use cortex_m_rt::{ExceptionFrame, entry, exception};
use mfc_runtime::verify::{self, Verdict};
use mfc_runtime::{Error, Mechanism};

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

/// The blobs, with their names.
static BLOBS: [(&str, &[u8]); 8] = [
    (
        "banded (h, r) = (4, 4), n = 64, single",
        include_bytes!("../../verify-banded.mfc"),
    ),
    (
        "banded (h, r) = (4, 4), n = 64, fixed epoch order (4, 16)",
        include_bytes!("../../verify-banded-every.mfc"),
    ),
    (
        "banded (h, r) = (4, 4), n = 64, min-sep (4, 16)",
        include_bytes!("../../verify-banded-min-sep.mfc"),
    ),
    (
        "blt m = 4, n = 4096, min-sep (4, 16)",
        include_bytes!("../../verify-blt.mfc"),
    ),
    (
        "bandmf general b = 8, n = 64, min-sep (4, 16)",
        include_bytes!("../../verify-bandmf.mfc"),
    ),
    (
        "blt m = 4, n = 48, unbounded horizon",
        include_bytes!("../../verify-blt-unbounded.mfc"),
    ),
    (
        "fft circulant m = 16, s = 2, single",
        include_bytes!("../../verify-fft.mfc"),
    ),
    (
        "fft optimal decoder m = 16, s = 2, single",
        include_bytes!("../../verify-fft-optimal.mfc"),
    ),
];

/// Scratch for the verification: the most any of the blobs needs (4 104 floats, the BLT at
/// `n = 4096`), 33.6 KB of stack.
#[cfg(not(mfc_ram_16k))]
const SCRATCH: usize = 4200;
/// On the Cortex-M0 (`microbit`, 16 KiB of RAM) 4 KiB of scratch: every blob but the BLT at
/// `n = 4096` fits, which is reported as skipped (`README.md`, "Choosing a form").
#[cfg(mfc_ram_16k)]
const SCRATCH: usize = 512;

/// Copy of a blob, for the lowered one.
const COPY: usize = 4096;

#[entry]
fn main() -> ! {
    let timer = systick::Timer::start_counting_wraps();
    let overhead = {
        let start = timer.ticks();
        timer.ticks() - start
    };
    let loop_ticks = timer.loop_ticks();
    let mut ok = true;
    let mut scratch = [0.0f64; SCRATCH];
    for (name, blob) in BLOBS {
        let m = match Mechanism::from_bytes(blob) {
            Ok(m) => m,
            Err(e) => {
                semihosting::println!("{name}: {}", Error::from(e));
                ok = false;
                continue;
            }
        };
        let needed = verify::scratch_len(&m);
        if needed > SCRATCH {
            semihosting::println!(
                "{name}: skipped: needs {needed} floats of scratch, this board keeps {SCRATCH}"
            );
            continue;
        }
        let stack = systick::StackProbe::paint();
        let start = timer.ticks();
        let verdict = verify::verify(&m, &mut scratch, u64::MAX);
        let ticks = (timer.ticks() - start).saturating_sub(overhead);
        let stack_bytes = stack.used();
        let operations = verify::operations(&m)
            .or_else(|| match m.decoder {
                mfc_runtime::formats::Decoder::Blt(d) => {
                    verify::blt_tail::certify(d.theta, d.omega, &mut scratch, u64::MAX)
                        .ok()
                        .map(|c| c.operations)
                }
                _ => None,
            })
            .unwrap_or(0);
        match verdict {
            Ok(Verdict::Verified { recorded, bound }) => semihosting::println!(
                "{name}: verified, recorded {recorded} >= bound {bound} ({:#018x}); {operations} operations, {} instructions, {stack_bytes} bytes of stack, {} floats of scratch",
                bound.to_bits(),
                ticks * systick::LOOP_INSTRUCTIONS / loop_ticks,
                needed
            ),
            other => {
                semihosting::println!("{name}: not verified: {other:?}");
                ok = false;
            }
        }
        // The same blob with its recorded sensitivity lowered by 1%, CRC recomputed.
        let mut lowered = m.into_inner();
        lowered.header.sensitivity.value *= 0.99;
        let mut copy = [0u8; COPY];
        let refused = match lowered.write_to(&mut copy) {
            Ok(bytes) => match Mechanism::from_bytes(bytes) {
                Ok(m) => verify::verify(&m, &mut scratch, u64::MAX),
                Err(e) => Err(Error::from(e)),
            },
            Err(e) => Err(Error::from(e)),
        };
        match refused {
            Err(e @ Error::SensitivityUnderstated { .. }) => {
                semihosting::println!("{name}, sensitivity lowered 1%: refused: {e}")
            }
            other => {
                semihosting::println!("{name}, sensitivity lowered 1%: NOT refused: {other:?}");
                ok = false;
            }
        }
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
