//! Helpers shared by the golden-bytes tests (`golden*.rs`): the header that every golden blob
//! carries but for its steps, sensitivity method and calibration, hex printing, and the checks
//! that every truncation and every single-bit flip of a valid blob is rejected. The golden bytes
//! themselves stay in each test file: they are the pinned reference.

use mfc_formats::{
    Calibration, ErrorSummary, Header, Mechanism, Neighbouring, Participation, Sensitivity,
    SensitivityMethod, Workload,
};

/// The golden header: prefix sums, single participation, sensitivity 1, clip norm 1, loss 2.
pub fn header(
    steps: u32,
    method: SensitivityMethod,
    calibration: Option<Calibration>,
) -> Header<'static> {
    Header {
        workload: Workload::PrefixSum,
        steps,
        participation: Participation::Single,
        neighbouring: Neighbouring::AddOrRemove,
        sensitivity: Sensitivity { value: 1.0, method },
        clip_norm: 1.0,
        calibration,
        error: ErrorSummary {
            sqrt_loss: 2.0,
            optimal_sqrt_loss: None,
            max_step_stddev: 1.5,
            final_step_stddev: 1.5,
        },
        generator: "mfc",
    }
}

/// The bytes as lowercase hex, two digits each, to compare with a golden string.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Asserts that every proper prefix of `blob` (the empty one included) fails to parse.
pub fn assert_every_truncation_rejected(blob: &[u8]) {
    for len in 0..blob.len() {
        assert!(
            Mechanism::from_bytes(&blob[..len]).is_err(),
            "prefix of {len} bytes"
        );
    }
}

/// Asserts that `blob` with any one of its bits flipped fails to parse.
pub fn assert_every_bit_flip_rejected(blob: &[u8]) {
    for bit in 0..blob.len() * 8 {
        let mut flipped = blob.to_vec();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(
            Mechanism::from_bytes(&flipped).is_err(),
            "bit {bit}: byte {}, bit {}",
            bit / 8,
            bit % 8
        );
    }
}
