//! The Rust side of the C examples (`runtime/capi/examples/scenario.h`, run by `telemetry.c` on a
//! host and by the bare-metal C firmware under QEMU): the same blob (any form), the same epoch key
//! (root secret, epoch 1) and inputs through `mfc_runtime::Replay`, **uninterrupted**, printed in
//! the same format (step, then the bit patterns of the f32 releases). The C programs reboot midway
//! and restore a checkpoint; CI compares their release lines with these exactly, so a restore
//! that did not continue the stream bit for bit would show.
//!
//! Run: `cargo run --release -p mfc-examples --example capi_reference -- BLOB [MAX_STEPS]`

use mfc_formats::Mechanism;
use mfc_runtime::{ReleaseCounter, Replay, epoch_noise};

const DIM: usize = 4;

/// The C scenario's demo root secret (`scenario_root`: 31 characters and the NUL).
const ROOT: [u8; 32] = *b"mfc C firmware demo root secret\0";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: capi_reference BLOB [MAX_STEPS]")?;
    let max_steps: u32 = args.next().map_or(Ok(u32::MAX), |s| s.parse())?;
    let bytes = std::fs::read(path)?;
    let mechanism = Mechanism::from_bytes(&bytes)?;
    let mut workspace = vec![0.0f32; Replay::workspace_len(&mechanism, DIM)?];
    // The C scenario's cold start from the factory counter: epoch 1.
    let counter = ReleaseCounter::FACTORY.cold_start()?;
    let noise = epoch_noise(&ROOT, &counter)?;
    let mut replay = Replay::open(mechanism, DIM, &mut workspace, noise)?;
    let mut release = [0.0f32; DIM];
    for step in 0..replay.horizon().min(max_steps) {
        let big = if step % 3 == 0 { 40.0f32 } else { 0.3 };
        let input: [f32; DIM] = core::array::from_fn(|c| {
            big * (((step as usize * 7 + c * 3) % 11) as i32 - 5) as f32 / 5.0
        });
        replay.step(&input, &mut release)?;
        let bits: Vec<String> = release
            .iter()
            .map(|x| format!("{:08x}", x.to_bits()))
            .collect();
        println!("{step} {}", bits.join(" "));
    }
    Ok(())
}
