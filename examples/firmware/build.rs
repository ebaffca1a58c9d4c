//! Build script of the firmware: the memory layout of the board, the blob to embed (optionally
//! corrupted), and the stream's dimension, workspace and checkpoint sizes as constants.
//!
//! Environment: `MFC_FIRMWARE_BLOB` (path of the blob, default `telemetry.mfc` beside this file,
//! or `blt.mfc` with the `size-blt` feature) and `MFC_FIRMWARE_DIM` (the dimension `d`, default
//! 4). The workspace is sized exactly from the blob's own parameters by the runtime's formula
//! (`mfc_runtime::Shape::workspace_len`), so the `.bss` of the firmware shows the runtime's RAM
//! formula: `(h + r + 2)·d` floats for a banded blob, `(m + 2)·d` for a BLT blob with `m`
//! buffers, `(b̂ + 2)·d` for a BandMF blob with `b̂` bands (`bandmf.mfc` with the `size-bandmf`
//! feature), `(m + 3)·d + 2m + 2N·k` for an FFT blob; a checkpoint slot is
//! `Shape::checkpoint_len` bytes, and the verifiers of its form and schema are
//! `verify::forms::of`. The blob's form is also set as the cfg `mfc_form` (`"banded"`,
//! `"blt"`, `"bandmf"` or `"fft"`, `Shape::name`).

use std::env;
use std::fs;
use std::path::PathBuf;

use mfc_formats::{Mechanism, Workload};
use mfc_runtime::Shape;

/// The memory of the board QEMU runs each target on (`.ci/firmware.sh`).
///
/// - `thumbv7em-none-eabihf`, Cortex-M4F, `mps2-an386`: 4 MiB of code memory at 0, 4 MiB of SRAM
///   at `0x2000_0000`.
/// - `thumbv6m-none-eabi`, Cortex-M0, `microbit` (nRF51822): 256 KiB of flash at 0, 16 KiB of
///   RAM at `0x2000_0000`.
/// - `thumbv8m.main-none-eabihf`, Cortex-M33, `mps2-an505`: the core boots in the secure state
///   with its vector table at `0x1000_0000`, the secure alias of the 4 MiB SSRAM1; RAM is the
///   secure alias of SSRAM2 and 3, 4 MiB at `0x3800_0000`.
fn memory(target: &str) -> &'static str {
    match target {
        "thumbv6m-none-eabi" => {
            "MEMORY\n{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 256K\n  RAM : ORIGIN = 0x20000000, LENGTH = 16K\n}\n"
        }
        "thumbv8m.main-none-eabihf" | "thumbv8m.main-none-eabi" => {
            "MEMORY\n{\n  FLASH : ORIGIN = 0x10000000, LENGTH = 4M\n  RAM : ORIGIN = 0x38000000, LENGTH = 4M\n}\n"
        }
        _ => {
            "MEMORY\n{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 4M\n  RAM : ORIGIN = 0x20000000, LENGTH = 4M\n}\n"
        }
    }
}

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));

    let target = env::var("TARGET").expect("cargo sets TARGET");
    fs::write(out.join("memory.x"), memory(&target)).expect("write memory.x");
    // The Cortex-M0 board's 16 KiB of RAM: the verify firmware keeps less scratch there.
    println!("cargo::rustc-check-cfg=cfg(mfc_ram_16k)");
    if target == "thumbv6m-none-eabi" {
        println!("cargo::rustc-cfg=mfc_ram_16k");
    }
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg=-Tlink.x");
    if env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        println!("cargo:rustc-link-arg=-Tdefmt.x");
    }

    println!("cargo:rerun-if-env-changed=MFC_FIRMWARE_BLOB");
    println!("cargo:rerun-if-env-changed=MFC_FIRMWARE_DIM");
    println!(
        "cargo::rustc-check-cfg=cfg(mfc_form, values(\"banded\", \"blt\", \"bandmf\", \"fft\"))"
    );
    let size_blt = env::var_os("CARGO_FEATURE_SIZE_BLT").is_some();
    let size_bandmf = env::var_os("CARGO_FEATURE_SIZE_BANDMF").is_some();
    let default_blob = match (size_blt, size_bandmf) {
        (true, _) => "blt.mfc",
        (_, true) => "bandmf.mfc",
        _ => "telemetry.mfc",
    };
    let blob_path = env::var_os("MFC_FIRMWARE_BLOB")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join(default_blob));
    println!("cargo:rerun-if-changed={}", blob_path.display());
    let mut blob = fs::read(&blob_path)
        .unwrap_or_else(|e| panic!("cannot read the blob {}: {e}", blob_path.display()));
    let mechanism = Mechanism::from_bytes(&blob)
        .unwrap_or_else(|e| panic!("{} is not a valid blob: {e}", blob_path.display()));
    let steps = mechanism.header.steps;
    let dim: usize = env::var("MFC_FIRMWARE_DIM")
        .map(|d| {
            d.parse()
                .expect("MFC_FIRMWARE_DIM must be a positive integer")
        })
        .unwrap_or(4);
    assert!(dim >= 1, "MFC_FIRMWARE_DIM must be at least 1");
    let shape = Shape::of(&mechanism)
        .unwrap_or_else(|e| panic!("{}: unsupported decoder: {e}", blob_path.display()));
    let workspace = shape.workspace_len(dim).unwrap_or_else(|| {
        panic!(
            "{}: no stream of {dim} coordinates (too many, or an FFT block this build cannot replay)",
            blob_path.display()
        )
    });
    let checkpoint = shape
        .checkpoint_len(dim)
        .unwrap_or_else(|| panic!("{}: no checkpoint size", blob_path.display()));
    let form = shape.name();
    println!("cargo::rustc-cfg=mfc_form=\"{form}\"");
    if (size_blt || size_bandmf) && !matches!(shape, Shape::Blt { .. } | Shape::BandMf { .. }) {
        panic!(
            "{}: the size-blt and size-bandmf features need a BLT or a BandMF blob",
            blob_path.display()
        );
    }
    // What the bench run prints of the form (`log::Form`).
    let parameters = match shape {
        Shape::Banded { band, rank } => format!(
            "/// The blob's `(h, r)`.\npub const BAND_RANK: (u32, u32) = ({band}, {rank});\n"
        ),
        Shape::Blt { buffers } => format!(
            "/// The blob's BLT buffers per coordinate `m`.\npub const BUFFERS: usize = {buffers};\n"
        ),
        Shape::BandMf { bands, prefix_sum } => {
            assert!(
                prefix_sum && matches!(mechanism.header.workload, Workload::PrefixSum),
                "{}: the telemetry firmware releases prefix sums",
                blob_path.display()
            );
            let toeplitz = matches!(
                mechanism.decoder,
                mfc_formats::Decoder::BandMf(d) if matches!(d.kind, mfc_formats::BandMfKind::Toeplitz)
            );
            format!(
                "/// The blob's BandMF bands `b̂`.\npub const BANDS: u32 = {bands};\n\
                 /// Whether the blob's encoder is banded Toeplitz.\npub const TOEPLITZ: bool = {toeplitz};\n"
            )
        }
        Shape::Fft { block, .. } => {
            format!("/// The blob's FFT block `m`.\npub const BLOCK: u32 = {block};\n")
        }
        _ => panic!(
            "{}: a form this firmware does not know",
            blob_path.display()
        ),
    };
    let verify_forms = mfc_runtime::verify::forms::of(&mechanism);
    let config = format!(
        "/// The stream's dimension `d`.\npub const DIM: usize = {dim};\n\
         /// Floats of workspace of the {form} stream (`Shape::workspace_len`).\n\
         pub const WORKSPACE: usize = {workspace};\n\
         /// Bytes of a checkpoint slot (`Shape::checkpoint_len`).\n\
         pub const CHECKPOINT: usize = {checkpoint};\n\
         /// The blob's horizon `n`.\npub const STEPS: u32 = {steps};\n{parameters}\
         /// The verifiers the blob needs, its form's and its schema's (`verify::forms::of`).\n\
         pub const VERIFY_FORMS: u8 = {verify_forms:#010b};\n"
    );

    if env::var_os("CARGO_FEATURE_CORRUPT_BLOB").is_some() {
        // One flipped bit in the middle of the coefficient tables: only the checksum notices.
        let at = blob.len() / 2;
        blob[at] ^= 0x10;
    }
    fs::write(out.join("blob.mfc"), &blob).expect("write blob.mfc");
    fs::write(out.join("config.rs"), config).expect("write config.rs");
}
