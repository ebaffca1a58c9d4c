//! Build script of the firmware: the memory layout of the board, the blob to embed (optionally
//! corrupted), and the stream's dimension and workspace size as constants.
//!
//! Environment: `MFC_FIRMWARE_BLOB` (path of the blob, default `telemetry.mfc` beside this file)
//! and `MFC_FIRMWARE_DIM` (the dimension `d`, default 4). The workspace is sized exactly
//! `(h + r + 1)·d` floats from the blob's own `(h, r)`, so the `.bss` of the firmware shows the
//! runtime's RAM formula.

use std::env;
use std::fs;
use std::path::PathBuf;

use mfc_formats::{Decoder, Mechanism};

/// MPS2-AN386 (Cortex-M4F): 4 MiB of code memory at 0, 4 MiB of SRAM at 0x2000_0000.
const MEMORY: &str = "MEMORY
{
  FLASH : ORIGIN = 0x00000000, LENGTH = 4M
  RAM : ORIGIN = 0x20000000, LENGTH = 4M
}
";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));

    fs::write(out.join("memory.x"), MEMORY).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg=-Tlink.x");
    if env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo:rustc-link-arg=-Tdefmt.x");
    }

    println!("cargo:rerun-if-env-changed=MFC_FIRMWARE_BLOB");
    println!("cargo:rerun-if-env-changed=MFC_FIRMWARE_DIM");
    let blob_path = env::var_os("MFC_FIRMWARE_BLOB")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("telemetry.mfc"));
    println!("cargo:rerun-if-changed={}", blob_path.display());
    let mut blob = fs::read(&blob_path)
        .unwrap_or_else(|e| panic!("cannot read the blob {}: {e}", blob_path.display()));
    let mechanism = Mechanism::from_bytes(&blob)
        .unwrap_or_else(|e| panic!("{} is not a valid blob: {e}", blob_path.display()));
    let Decoder::BandedLowRank(decoder) = mechanism.decoder else {
        panic!("{}: unsupported decoder", blob_path.display());
    };
    let (band, rank, steps) = (decoder.band, decoder.rank, mechanism.header.steps);
    let dim: usize = env::var("MFC_FIRMWARE_DIM")
        .map(|d| {
            d.parse()
                .expect("MFC_FIRMWARE_DIM must be a positive integer")
        })
        .unwrap_or(4);
    assert!(dim >= 1, "MFC_FIRMWARE_DIM must be at least 1");
    let workspace = (band as usize + rank as usize + 1) * dim;

    if env::var_os("CARGO_FEATURE_CORRUPT_BLOB").is_some() {
        // One flipped bit in the middle of the coefficient tables: only the checksum notices.
        let at = blob.len() / 2;
        blob[at] ^= 0x10;
    }
    fs::write(out.join("blob.mfc"), &blob).expect("write blob.mfc");
    fs::write(
        out.join("config.rs"),
        format!(
            "/// The stream's dimension `d`.\npub const DIM: usize = {dim};\n\
             /// Floats of workspace: `(h + r + 1)·d` with `(h, r) = ({band}, {rank})`.\n\
             pub const WORKSPACE: usize = {workspace};\n\
             /// The blob's horizon `n`.\npub const STEPS: u32 = {steps};\n\
             /// The blob's `(h, r)`.\npub const BAND_RANK: (u32, u32) = ({band}, {rank});\n"
        ),
    )
    .expect("write config.rs");
}
