//! The host reference of the telemetry firmware (`examples/firmware`): the same blob, root secret,
//! epoch and events through the host runtime, uninterrupted, must give the release lines the
//! firmware printed under QEMU — bit for bit. Two telemetry blobs: `telemetry.mfc` (banded plus
//! low rank, `Stream`) and `bandmf.mfc` (banded Toeplitz, `BandMfStream`), each run by the
//! firmware with the same reboot protocol.
//!
//! Why exact, not within a tolerance: every operation of the runtime is an IEEE-754 basic `f32`
//! operation (or a conversion done on the bits) executed in the same order on both sides — on the
//! Cortex-M4F's FPU and with SSE2 on the host — and Rust never contracts `a * b + c` into a fused
//! multiply-add on its own. The host groups several decoder terms per pass over memory and the
//! device one, but each coordinate adds the same terms in the same order either way. The only
//! non-basic functions (`expf`/`logf` in the ziggurat's rare wedge and tail branches, `sqrtf` in
//! clipping) come from the same `libm` crate on both sides, or are correctly rounded (`sqrtf`). A
//! mismatch is therefore a real divergence, not rounding noise.
//!
//! The long-horizon (`drift`) firmware streams 0.3 for 10⁶ steps through three blobs (BLT,
//! BandMF, FFT: `examples/firmware/drift*.mfc`); its host reference is the same three streams
//! through `Replay`, whose every release `tests/tests/exact_sums.rs` finds within 4 ulps of the
//! exact sum.
//!
//! `MFC_FIRMWARE_LOG`, `MFC_FIRMWARE_BANDMF_LOG`, `MFC_FIRMWARE_BLT_LOG` and
//! `MFC_FIRMWARE_DRIFT_LOG` name the captured QEMU outputs of the three telemetry builds and the
//! drift firmware, `MFC_FIRMWARE_M0_LOG` and `MFC_FIRMWARE_M33_LOG` those of the banded telemetry
//! build on a Cortex-M0 and a Cortex-M33; `.ci/firmware.sh` sets them and runs the comparisons. Built with `CI=true`
//! (`.ci/run`) the comparisons are ordinary tests and fail when a log is missing; otherwise they
//! are ignored (listed as such by `cargo test`), and the host-side checks run alone: the
//! firmware's reboot protocol replayed on the host equals the uninterrupted stream, and the drift
//! reference covers 10⁶ steps of every blob.

use std::fmt::Write as _;
use std::path::PathBuf;

use mfc_runtime::checkpoint::BlobFingerprint;
use mfc_runtime::{
    BandMfStream, BltStream, ChaChaNoise, Error, Mechanism, ReleaseCounter, Replay, Stream,
    epoch_noise,
};

#[path = "../../examples/firmware/src/scenario.rs"]
#[allow(dead_code)]
mod scenario;

use scenario::{REBOOT_AFTER, ROOT_SECRET, STALE_AFTER, events, write_release};

const DIM: usize = 4;

fn blob(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/firmware")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn line(step: u32, release: &[f32]) -> String {
    let mut s = String::new();
    write_release(&mut s, step, release).unwrap();
    s
}

/// The firmware's two runs on the host, for one stream type (`Stream`, `BandMfStream` or
/// `BltStream`, which share these methods; the firmware replays them through `Replay`): `reference`, the uninterrupted stream of epoch 1, one release line per
/// step; `with_reboot`, the firmware's protocol — step → checkpoint → count → emit, a reboot after
/// `REBOOT_AFTER` steps, the stale checkpoint refused, the newest restored.
macro_rules! protocol {
    ($module:ident, $stream:ident) => {
        mod $module {
            use super::*;

            pub fn reference(bytes: &[u8]) -> Vec<String> {
                let mechanism = Mechanism::from_bytes(bytes).unwrap();
                let counter = ReleaseCounter::FACTORY.cold_start().unwrap();
                let len = $stream::<ChaChaNoise>::workspace_len(&mechanism, DIM).unwrap();
                let mut workspace = vec![0.0f32; len];
                let noise = epoch_noise(&ROOT_SECRET, &counter).unwrap();
                let mut stream = $stream::new(mechanism, DIM, &mut workspace, noise).unwrap();
                let (mut input, mut release) = ([0.0f32; DIM], [0.0f32; DIM]);
                (0..stream.horizon())
                    .map(|step| {
                        events(step, &mut input);
                        stream.step(&input, &mut release).unwrap();
                        line(step, &release)
                    })
                    .collect()
            }

            pub fn with_reboot(bytes: &[u8]) -> Vec<String> {
                let (mechanism, blob) = BlobFingerprint::load(bytes).unwrap();
                let mut counter = ReleaseCounter::FACTORY.cold_start().unwrap();
                let len = $stream::<ChaChaNoise>::workspace_len(&mechanism, DIM).unwrap();
                let mut workspace = vec![0.0f32; len];
                let (mut newest, mut older) = (vec![0u8; 68 + 4 * (len + 8)], Vec::new());
                let (mut input, mut release) = ([0.0f32; DIM], [0.0f32; DIM]);
                let mut lines = Vec::new();
                {
                    let noise = epoch_noise(&ROOT_SECRET, &counter).unwrap();
                    let mut stream = $stream::new(mechanism, DIM, &mut workspace, noise).unwrap();
                    for step in 0..REBOOT_AFTER {
                        events(step, &mut input);
                        stream.step(&input, &mut release).unwrap();
                        let n = stream.checkpoint(&blob, &counter, &mut newest).unwrap();
                        counter.record(&stream).unwrap();
                        if step + 1 == STALE_AFTER {
                            older = newest[..n].to_vec();
                        }
                        lines.push(line(step, &release));
                    }
                }
                workspace.fill(f32::NAN);
                let noise = epoch_noise(&ROOT_SECRET, &counter).unwrap();
                let mut stream = $stream::new(mechanism, DIM, &mut workspace, noise).unwrap();
                assert_eq!(
                    stream.restore(&blob, &older, &counter),
                    Err(Error::StaleCheckpoint {
                        step: STALE_AFTER,
                        released: REBOOT_AFTER
                    })
                );
                stream.restore(&blob, &newest, &counter).unwrap();
                for step in REBOOT_AFTER..stream.horizon() {
                    events(step, &mut input);
                    stream.step(&input, &mut release).unwrap();
                    stream.checkpoint(&blob, &counter, &mut newest).unwrap();
                    counter.record(&stream).unwrap();
                    lines.push(line(step, &release));
                }
                lines
            }
        }
    };
}
protocol!(banded, Stream);
protocol!(bandmf, BandMfStream);
protocol!(blt, BltStream);

#[test]
fn the_firmware_protocol_with_a_reboot_equals_the_uninterrupted_stream() {
    let bytes = blob("telemetry.mfc");
    let reference = banded::reference(&bytes);
    assert_eq!(reference.len(), 64);
    assert_eq!(banded::with_reboot(&bytes), reference);
    let bytes = blob("bandmf.mfc");
    let reference = bandmf::reference(&bytes);
    assert_eq!(reference.len(), 64);
    assert_eq!(bandmf::with_reboot(&bytes), reference);
    let bytes = blob("blt.mfc");
    let reference = blt::reference(&bytes);
    assert_eq!(reference.len(), 64);
    assert_eq!(blt::with_reboot(&bytes), reference);
}

/// The QEMU output named by the environment variable `var`; panics (the test fails) when it is
/// not set or not readable.
fn qemu_log(var: &str) -> String {
    let log = std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: no QEMU output to compare (.ci/firmware.sh sets it)")
    });
    std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{var}={}: {e}", PathBuf::from(&log).display()))
}

/// The QEMU log of a telemetry build against the host reference `reference` of blob `bytes`:
/// the banner, every release line, the stale checkpoint refused, the end.
fn compare_log(text: &str, bytes: &[u8], reference: &[String]) {
    let crc = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    let mut expected_banner = String::new();
    write!(
        expected_banner,
        "mfc telemetry firmware: blob CRC-32 {crc:#010x}, n = 64, d = {DIM}, epoch 1"
    )
    .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first().copied(), Some(expected_banner.as_str()));
    let released: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("release"))
        .collect();
    assert_eq!(released.len(), reference.len(), "release lines in {text}");
    for (got, want) in released.iter().zip(reference) {
        assert_eq!(got, want);
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("reboot: older checkpoint refused: stale: at step 24, but 40")),
        "the stale checkpoint was not refused:\n{text}"
    );
    assert_eq!(lines.last().copied(), Some("done: 64 steps released"));
    eprintln!("{} release lines equal the host reference", released.len());
}

#[test]
#[cfg_attr(
    not(mfc_ci),
    ignore = "needs MFC_FIRMWARE_LOG from .ci/firmware.sh, which runs it (required with CI=true)"
)]
fn the_firmware_output_under_qemu_equals_the_host_reference() {
    let bytes = blob("telemetry.mfc");
    let text = qemu_log("MFC_FIRMWARE_LOG");
    compare_log(&text, &bytes, &banded::reference(&bytes));
}

#[test]
#[cfg_attr(
    not(mfc_ci),
    ignore = "needs MFC_FIRMWARE_BANDMF_LOG from .ci/firmware.sh, which runs it (required with CI=true)"
)]
fn the_bandmf_firmware_output_under_qemu_equals_the_host_reference() {
    let bytes = blob("bandmf.mfc");
    let text = qemu_log("MFC_FIRMWARE_BANDMF_LOG");
    compare_log(&text, &bytes, &bandmf::reference(&bytes));
}

/// The telemetry firmware built for the smallest and the newest cores QEMU runs: the Cortex-M0
/// (`thumbv6m-none-eabi`, `microbit`: no FPU, so every `f32` operation is a soft-float routine)
/// and the Cortex-M33 (`thumbv8m.main-none-eabihf`, `mps2-an505`). Their releases must equal the
/// host's bit for bit, as the Cortex-M4F's do: the soft-float routines round as IEEE-754 does.
#[test]
#[cfg_attr(
    not(mfc_ci),
    ignore = "needs MFC_FIRMWARE_M0_LOG from .ci/firmware.sh, which runs it (required with CI=true)"
)]
fn the_cortex_m0_firmware_output_equals_the_host_reference() {
    let bytes = blob("telemetry.mfc");
    let text = qemu_log("MFC_FIRMWARE_M0_LOG");
    compare_log(&text, &bytes, &banded::reference(&bytes));
}

/// As [`the_cortex_m0_firmware_output_equals_the_host_reference`], on the Cortex-M33.
#[test]
#[cfg_attr(
    not(mfc_ci),
    ignore = "needs MFC_FIRMWARE_M33_LOG from .ci/firmware.sh, which runs it (required with CI=true)"
)]
fn the_cortex_m33_firmware_output_equals_the_host_reference() {
    let bytes = blob("telemetry.mfc");
    let text = qemu_log("MFC_FIRMWARE_M33_LOG");
    compare_log(&text, &bytes, &banded::reference(&bytes));
}

/// The drift firmware's blobs, in the order it streams them, by the form name it prints.
const DRIFT_BLOBS: [(&str, &str); 3] = [
    ("BLT", "drift.mfc"),
    ("BandMF", "drift-bandmf.mfc"),
    ("FFT", "drift-fft.mfc"),
];

/// The drift firmware's run on the host: for each blob, through `Replay` with the firmware's key,
/// its output lines (banner, every 100 000th release, the checksum of all releases). That every
/// one of these host releases is within 4 ulps of the exact sum is checked in
/// `tests/tests/exact_sums.rs`.
fn drift_on_the_host() -> Vec<String> {
    let mut lines = Vec::new();
    for (form, name) in DRIFT_BLOBS {
        let bytes = blob(name);
        let m = Mechanism::from_bytes(&bytes).unwrap();
        let counter = ReleaseCounter::FACTORY.cold_start().unwrap();
        let mut workspace = vec![0.0f32; Replay::workspace_len(&m, 1).unwrap()];
        let noise = epoch_noise(&ROOT_SECRET, &counter).unwrap();
        let mut stream = Replay::open(m, 1, &mut workspace, noise).unwrap();
        let crc = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
        let n = stream.horizon();
        lines.push(format!(
            "mfc drift firmware: {form} blob CRC-32 {crc:#010x}, n = {n}, d = 1, input 0.3"
        ));
        let (mut release, mut checksum) = ([0.0f32], 0u32);
        for step in 0..n {
            stream.step(&[0.3], &mut release).unwrap();
            checksum = scenario::fold_checksum(checksum, &release);
            if (step + 1) % 100_000 == 0 {
                lines.push(format!(
                    "release {:>7}: {:08x} | {}",
                    step + 1,
                    release[0].to_bits(),
                    release[0]
                ));
            }
        }
        lines.push(format!(
            "done: {n} steps released, checksum {checksum:#010x}"
        ));
    }
    lines
}

/// The host side of the drift comparison runs without QEMU: 10⁶ steps of each blob, ten
/// releases and a checksum each.
#[test]
fn the_drift_reference_covers_every_blob_for_a_million_steps() {
    let lines = drift_on_the_host();
    assert_eq!(lines.len(), 12 * DRIFT_BLOBS.len());
    for (chunk, (form, _)) in lines.chunks(12).zip(DRIFT_BLOBS) {
        assert!(chunk[0].contains(&format!("{form} blob")) && chunk[0].contains("n = 1000000"));
        assert!(chunk[11].starts_with("done: 1000000 steps released"));
        eprintln!("{}\n{}", chunk[10], chunk[11]);
    }
}

/// The device released the same bits: every printed release and the checksum of all 10⁶.
#[test]
#[cfg_attr(
    not(mfc_ci),
    ignore = "needs MFC_FIRMWARE_DRIFT_LOG from .ci/firmware.sh, which runs it (required with CI=true)"
)]
fn the_drift_firmware_output_under_qemu_equals_the_host_reference() {
    let text = qemu_log("MFC_FIRMWARE_DRIFT_LOG");
    let expected = drift_on_the_host();
    let got: Vec<&str> = text.lines().collect();
    for (line, (got, want)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "line {} of the QEMU output:\n{text}", line + 1);
    }
    assert_eq!(
        got.len(),
        expected.len(),
        "lines in the QEMU output:\n{text}"
    );
    eprintln!("{} lines equal the host reference", got.len());
}

#[test]
#[cfg_attr(
    not(mfc_ci),
    ignore = "needs MFC_FIRMWARE_BLT_LOG from .ci/firmware.sh, which runs it (required with CI=true)"
)]
fn the_blt_firmware_output_under_qemu_equals_the_host_reference() {
    let bytes = blob("blt.mfc");
    let text = qemu_log("MFC_FIRMWARE_BLT_LOG");
    compare_log(&text, &bytes, &blt::reference(&bytes));
}
