//! Golden bytes of the BLT decoder form (decoder 2, `SPEC.md`) and its validation: every
//! truncation and single-bit flip of a BLT blob is rejected without a panic.

mod common;

use common::hex;
use mfc_formats::{Blt, Decoder, Error, F32Table, Mechanism, SensitivityMethod, encode_f32s};

/// One buffer: θ = 0.5, ω = −0.25, over 3 steps.
fn mechanism<'a>(theta: &'a [u8], omega: &'a [u8]) -> Mechanism<'a> {
    Mechanism {
        header: common::header(3, SensitivityMethod::MaxColumnNorm, None),
        decoder: Decoder::Blt(Blt {
            theta: F32Table::new(theta).unwrap(),
            omega: F32Table::new(omega).unwrap(),
        }),
    }
}

/// The bytes, annotated as in `SPEC.md` (computed independently with Python's `struct` and
/// `zlib.crc32`).
const GOLDEN: &str = concat!(
    "4d4643424c4f4200", // magic
    "0100",             // format version 1
    "0000",             // flags
    "3d000000",         // payload length 61
    "00",               // workload: PrefixSum
    "03",               // steps: 3
    "00",               // participation: Single
    "000000000000f03f", // sensitivity.value: 1.0
    "00",               // sensitivity.method: MaxColumnNorm
    "000000000000f03f", // clip_norm: 1.0
    "00",               // calibration: None
    "0000000000000040", // error.sqrt_loss: 2.0
    "00",               // error.optimal_sqrt_loss: None
    "000000000000f83f", // error.max_step_stddev: 1.5
    "000000000000f83f", // error.final_step_stddev: 1.5
    "036d6663",         // generator: "mfc"
    "02",               // decoder: Blt
    "04",               //   theta: 4 bytes
    "0000003f",         //     θ = 0.5
    "04",               //   omega: 4 bytes
    "000080be",         //     ω = -0.25
    "6662a44b",         // CRC-32 (zlib.crc32)
);

#[test]
fn blt_blob_bytes_are_pinned() {
    let (t, w) = (encode_f32s([0.5]), encode_f32s([-0.25]));
    let blob = mechanism(&t, &w).to_vec().unwrap();
    assert_eq!(hex(&blob), GOLDEN);
    assert_eq!(blob.len(), 81);
    assert_eq!(Mechanism::from_bytes(&blob).unwrap(), mechanism(&t, &w));
}

#[test]
fn blt_validation_refuses_bad_parameters() {
    let w = encode_f32s([-0.25]);
    let field = |field| Error::InvalidField { field };
    for bad in [0.0f32, 1.0, -0.5, 2.0, f32::NAN] {
        let t = encode_f32s([bad]);
        let m = mechanism(&t, &w);
        assert!(m.validate().is_err(), "θ = {bad}");
        assert!(m.to_vec().is_err());
    }
    let t = encode_f32s([0.5]);
    let empty = encode_f32s([]);
    assert_eq!(
        mechanism(&empty, &empty).validate().map(|_| ()),
        Err(field("decoder.theta"))
    );
    let two = encode_f32s([0.5, 0.25]);
    assert_eq!(
        mechanism(&t, &two).validate().map(|_| ()),
        Err(Error::TableLength {
            table: "decoder.omega",
            expected: 4,
            found: 8
        })
    );
    let nan = encode_f32s([f32::INFINITY]);
    assert_eq!(
        mechanism(&t, &nan).validate().map(|_| ()),
        Err(Error::NonFiniteCoefficient {
            table: "decoder.omega",
            index: 0
        })
    );
    let many = encode_f32s(vec![0.5; 65]);
    assert_eq!(
        mechanism(&many, &many).validate().map(|_| ()),
        Err(field("decoder.theta"))
    );
}

#[test]
fn every_truncation_and_bit_flip_is_rejected() {
    let (t, w) = (encode_f32s([0.5]), encode_f32s([-0.25]));
    let blob = mechanism(&t, &w).to_vec().unwrap();
    common::assert_every_truncation_rejected(&blob);
    common::assert_every_bit_flip_rejected(&blob);
}

/// The same BLT with a sensitivity valid for every horizon (method `9`, `BltTailBound`, appended
/// after the format's first release): one byte and the checksum differ from [`GOLDEN`]; the
/// method is refused for another decoder or another participation schema.
const GOLDEN_UNBOUNDED: &str = concat!(
    "4d4643424c4f4200", // magic
    "0100",             // format version 1
    "0000",             // flags
    "3d000000",         // payload length 61
    "00",               // workload: PrefixSum
    "03",               // steps: 3, the design horizon (the runtime does not stop there)
    "00",               // participation: Single
    "000000000000f03f", // sensitivity.value: 1.0
    "09",               // sensitivity.method: BltTailBound
    "000000000000f03f", // clip_norm: 1.0
    "00",               // calibration: None
    "0000000000000040", // error.sqrt_loss: 2.0
    "00",               // error.optimal_sqrt_loss: None
    "000000000000f83f", // error.max_step_stddev: 1.5
    "000000000000f83f", // error.final_step_stddev: 1.5
    "036d6663",         // generator: "mfc"
    "02",               // decoder: Blt
    "04",               //   theta: 4 bytes
    "0000003f",         //     θ = 0.5
    "04",               //   omega: 4 bytes
    "000080be",         //     ω = -0.25
    "99a13b35",         // CRC-32 (zlib.crc32)
);

#[test]
fn an_unbounded_blt_blob_is_pinned_and_refused_elsewhere() {
    let (t, w) = (encode_f32s([0.5]), encode_f32s([-0.25]));
    let mut m = mechanism(&t, &w);
    m.header.sensitivity.method = SensitivityMethod::BltTailBound;
    let blob = m.to_vec().unwrap();
    assert_eq!(hex(&blob), GOLDEN_UNBOUNDED);
    let parsed = Mechanism::from_bytes(&blob).unwrap();
    assert!(parsed.header.sensitivity.method.covers_every_horizon());
    assert!(!parsed.header.sensitivity.method.is_exact());
    common::assert_every_bit_flip_rejected(&blob);
    let refused = Err(Error::InvalidField {
        field: "sensitivity.method",
    });
    let mut schema = m;
    schema.header.participation = mfc_formats::Participation::MinSeparation {
        max_participations: 1,
        min_separation: 2,
    };
    assert_eq!(schema.validate().map(|_| ()), refused);
    let diagonals = encode_f32s([1.0f32; 3]);
    let empty = encode_f32s([]);
    let banded = Mechanism {
        header: m.header,
        decoder: Decoder::BandedLowRank(mfc_formats::BandedLowRank {
            band: 1,
            rank: 0,
            diagonals: F32Table::new(&diagonals).unwrap(),
            left: F32Table::new(&empty).unwrap(),
            right: F32Table::new(&empty).unwrap(),
        }),
    };
    assert_eq!(banded.validate().map(|_| ()), refused);
}
