//! The telemetry scenario, shared word for word by the firmware and the host reference
//! (`tests/tests/firmware.rs` includes this file): the demo root secret, the events of each step,
//! the step after which the device "reboots", and the text of a release line.
//!
//! Only `core` is used, so the same code runs on the device and on the host.

use core::fmt::{self, Write};

/// The device's root secret, from which each epoch's noise key is derived. **Demo only**: a real
/// device has a per-device secret provisioned into OTP or a secure element, never in its image.
pub const ROOT_SECRET: [u8; 32] = *b"mfc firmware demo root secret!!!";

/// Steps released before the simulated reboot; the stream resumes from its checkpoint after it.
pub const REBOOT_AFTER: u32 = 40;

/// An older checkpoint (after this many steps) is kept, to show that restoring it is refused.
pub const STALE_AFTER: u32 = 24;

/// The telemetry events of `step`: counter `k` counts one event when `(7·step + 3·k) mod (k + 2)`
/// is 0, so some steps see several events at once (a row of norm above ζ = 1, which the runtime
/// clips) and some none.
pub fn events(step: u32, out: &mut [f32]) {
    for (k, x) in out.iter_mut().enumerate() {
        let k = k as u32;
        *x = if (7 * step + 3 * k).is_multiple_of(k + 2) {
            1.0
        } else {
            0.0
        };
    }
}

/// `checksum` with the bits of `row` folded in: what the budget programs print, so that no
/// release can be optimized away. (The telemetry build does not use it.)
#[allow(dead_code)]
pub fn fold_checksum(checksum: u32, row: &[f32]) -> u32 {
    row.iter()
        .fold(checksum, |c, x| c.rotate_left(5) ^ x.to_bits())
}

/// One release line: `release <step>:` then each coordinate as its f32 bits in hex (exact), then
/// `|` and each coordinate to three decimals (for reading; truncated, from the same bits).
pub fn write_release(w: &mut impl Write, step: u32, release: &[f32]) -> fmt::Result {
    write!(w, "release {step:>3}:")?;
    for x in release {
        write!(w, " {:08x}", x.to_bits())?;
    }
    w.write_str(" |")?;
    for &x in release {
        let milli = (x * 1000.0) as i32;
        let sign = if milli < 0 { "-" } else { " " };
        let m = milli.unsigned_abs();
        write!(w, " {sign}{}.{:03}", m / 1000, m % 1000)?;
    }
    Ok(())
}
