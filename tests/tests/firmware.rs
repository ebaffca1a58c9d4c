//! The host reference of the telemetry firmware (`examples/firmware`): the same blob, root secret,
//! epoch and events through the host runtime, uninterrupted, must give the release lines the
//! firmware printed under QEMU — bit for bit.
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
//! `MFC_FIRMWARE_LOG` names the captured QEMU output (`.ci/firmware.sh` sets it). Without it only
//! the host-side checks run: the firmware's reboot protocol replayed on the host equals the
//! uninterrupted stream.

use std::fmt::Write as _;
use std::path::PathBuf;

use mfc_runtime::checkpoint::BlobFingerprint;
use mfc_runtime::{Error, Mechanism, ReleaseCounter, Stream, epoch_noise};

#[path = "../../examples/firmware/src/scenario.rs"]
#[allow(dead_code)]
mod scenario;

use scenario::{REBOOT_AFTER, ROOT_SECRET, STALE_AFTER, events, write_release};

const DIM: usize = 4;

fn blob() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/firmware/telemetry.mfc");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn line(step: u32, release: &[f32]) -> String {
    let mut s = String::new();
    write_release(&mut s, step, release).unwrap();
    s
}

/// The uninterrupted stream of epoch 1: one release line per step.
fn reference(bytes: &[u8]) -> Vec<String> {
    let mechanism = Mechanism::from_bytes(bytes).unwrap();
    let counter = ReleaseCounter::FACTORY.cold_start().unwrap();
    let mut workspace =
        vec![0.0f32; Stream::<mfc_runtime::ChaChaNoise>::workspace_len(&mechanism, DIM).unwrap()];
    let noise = epoch_noise(&ROOT_SECRET, &counter).unwrap();
    let mut stream = Stream::new(mechanism, DIM, &mut workspace, noise).unwrap();
    let (mut input, mut release) = ([0.0f32; DIM], [0.0f32; DIM]);
    (0..stream.horizon())
        .map(|step| {
            events(step, &mut input);
            stream.step(&input, &mut release).unwrap();
            line(step, &release)
        })
        .collect()
}

/// The firmware's protocol on the host: step → checkpoint → count → emit, a reboot after
/// `REBOOT_AFTER` steps, the stale checkpoint refused, the newest restored.
fn with_reboot(bytes: &[u8]) -> Vec<String> {
    let (mechanism, blob) = BlobFingerprint::load(bytes).unwrap();
    let mut counter = ReleaseCounter::FACTORY.cold_start().unwrap();
    let len = Stream::<mfc_runtime::ChaChaNoise>::workspace_len(&mechanism, DIM).unwrap();
    let mut workspace = vec![0.0f32; len];
    let (mut newest, mut older) = (vec![0u8; 68 + 4 * len], Vec::new());
    let (mut input, mut release) = ([0.0f32; DIM], [0.0f32; DIM]);
    let mut lines = Vec::new();
    {
        let noise = epoch_noise(&ROOT_SECRET, &counter).unwrap();
        let mut stream = Stream::new(mechanism, DIM, &mut workspace, noise).unwrap();
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
    let mut stream = Stream::new(mechanism, DIM, &mut workspace, noise).unwrap();
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

#[test]
fn the_firmware_protocol_with_a_reboot_equals_the_uninterrupted_stream() {
    let bytes = blob();
    let reference = reference(&bytes);
    assert_eq!(reference.len(), 64);
    assert_eq!(with_reboot(&bytes), reference);
}

#[test]
fn the_firmware_output_under_qemu_equals_the_host_reference() {
    let Some(log) = std::env::var_os("MFC_FIRMWARE_LOG") else {
        eprintln!(
            "MFC_FIRMWARE_LOG is not set: no QEMU output to compare (.ci/firmware.sh sets it)"
        );
        return;
    };
    let text = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{}: {e}", PathBuf::from(&log).display()));
    let bytes = blob();
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
    let reference = reference(&bytes);
    assert_eq!(released.len(), reference.len(), "release lines in {text}");
    for (got, want) in released.iter().zip(&reference) {
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
