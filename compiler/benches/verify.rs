//! Host time of the device's verification (`mfc_runtime::verify::verify`, issue 20) for the
//! blobs named on the command line: operations, scratch and the median of 15 runs, each blob
//! in turn within a round so that load affects them alike.
//!
//! Run: `cargo bench -p mfc-compiler --bench verify -- e.mfc s.mfc` (README, "A device that
//! checks the blob", with the blobs of its CLI list).

use std::time::Instant;

use mfc_runtime::formats::Mechanism;
use mfc_runtime::verify::{self, Verdict};

fn main() {
    let blobs: Vec<(String, Vec<u8>)> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            (path, bytes)
        })
        .collect();
    let mut seconds = vec![Vec::new(); blobs.len()];
    for _ in 0..15 {
        for ((path, bytes), times) in blobs.iter().zip(&mut seconds) {
            let m = Mechanism::from_bytes(bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
            let mut scratch = vec![0.0; verify::scratch_len(&m)];
            let started = Instant::now();
            let verdict = verify::verify(&m, &mut scratch, u64::MAX);
            times.push(started.elapsed().as_secs_f64());
            assert!(
                matches!(verdict, Ok(Verdict::Verified { .. })),
                "{path}: {verdict:?}"
            );
        }
    }
    for ((path, bytes), times) in blobs.iter().zip(&mut seconds) {
        let m = Mechanism::from_bytes(bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        times.sort_by(f64::total_cmp);
        println!(
            "{path}: {:?}, {} operations, {} floats of scratch, median {:.4} s (min {:.4} s)",
            m.header.participation,
            verify::operations(&m).unwrap_or(0),
            verify::scratch_len(&m),
            times[times.len() / 2],
            times[0]
        );
    }
}
