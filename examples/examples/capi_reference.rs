//! The Rust side of the C example (`runtime/capi/examples/telemetry.c`): the same blob, seed and
//! inputs through `mfc_runtime::Stream`, printed in the same format (step, then the bit patterns
//! of the f32 releases), so CI can compare the C program's output exactly.
//!
//! Run: `cargo run --release -p mfc-examples --example capi_reference -- BLOB`

use mfc_formats::Mechanism;
use mfc_runtime::{ChaChaNoise, Error, Stream};

const DIM: usize = 4;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: capi_reference BLOB")?;
    let bytes = std::fs::read(path)?;
    let mechanism = Mechanism::from_bytes(&bytes)?;
    let mut workspace = vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&mechanism, DIM)?];
    let mut stream = Stream::new(
        mechanism,
        DIM,
        &mut workspace,
        ChaChaNoise::from_seed([0x5a; 32])?,
    )?;
    let mut release = [0.0f32; DIM];
    for step in 0u32.. {
        let big = if step % 3 == 0 { 40.0f32 } else { 0.3 };
        let input: [f32; DIM] = core::array::from_fn(|c| {
            big * (((step as usize * 7 + c * 3) % 11) as i32 - 5) as f32 / 5.0
        });
        match stream.step(&input, &mut release) {
            Ok(()) => {}
            Err(Error::StreamFinished { .. }) => break,
            Err(e) => return Err(e.into()),
        }
        let bits: Vec<String> = release
            .iter()
            .map(|x| format!("{:08x}", x.to_bits()))
            .collect();
        println!("{step} {}", bits.join(" "));
    }
    Ok(())
}
