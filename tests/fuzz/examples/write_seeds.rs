//! Writes the seed corpus of the `checkpoint` fuzz target into `seeds/checkpoint/`: valid
//! checkpoints of the blobs in `seeds/blob/`, in the target's input layout
//! (`mfc_fuzz::checkpoint::seeds`). Run it from anywhere after a change of the checkpoint format:
//! `cargo run --manifest-path tests/fuzz/Cargo.toml --example write_seeds`.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/checkpoint");
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in mfc_fuzz::checkpoint::seeds() {
        std::fs::write(dir.join(&name), &bytes)?;
        println!("{name}: {} bytes", bytes.len());
    }
    Ok(())
}
