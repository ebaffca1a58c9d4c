//! Golden bytes: the exact encoding of a small mechanism is the contract of `SPEC.md`.
//! Also: every truncation and every single-bit flip of a valid blob is rejected, never a panic.

mod common;

use common::hex;
use mfc_formats::{
    BandedLowRank, Calibration, Decoder, Error, F32Table, Mechanism, PrivacyTarget,
    SensitivityMethod, encode_f32s,
};
use proptest::prelude::*;

/// n = 3, h = 2, r = 1: B̂ = [[1, 0, 0], [0.5, 1, 0], [0.25, 0.5, 1]] with the corner from L Rᵀ.
fn tables() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    (
        encode_f32s([1.0, 0.0, 1.0, 0.5, 1.0, 0.5]),
        encode_f32s([0.0, 0.0, 0.5]),
        encode_f32s([0.5, 0.0, 0.0]),
    )
}

fn mechanism<'a>(d: &'a [u8], l: &'a [u8], r: &'a [u8]) -> Mechanism<'a> {
    Mechanism {
        header: common::header(
            3,
            SensitivityMethod::MaxColumnNorm,
            Some(Calibration {
                noise_multiplier: 2.0,
                target: Some(PrivacyTarget {
                    epsilon: 2.0,
                    delta: 0.5,
                }),
            }),
        ),
        decoder: Decoder::BandedLowRank(BandedLowRank {
            band: 2,
            rank: 1,
            diagonals: F32Table::new(d).unwrap(),
            left: F32Table::new(l).unwrap(),
            right: F32Table::new(r).unwrap(),
        }),
    }
}

fn banded<'a>(m: &Mechanism<'a>) -> BandedLowRank<'a> {
    match m.decoder {
        Decoder::BandedLowRank(b) => b,
        _ => unreachable!("the golden mechanism is banded"),
    }
}

fn golden_blob() -> Vec<u8> {
    let (d, l, r) = tables();
    mechanism(&d, &l, &r).to_vec().unwrap()
}

/// The bytes, annotated as in `SPEC.md`.
const GOLDEN: &str = concat!(
    "4d4643424c4f4200", // magic "MFCBLOB\0"
    "0100",             // format version 1
    "0000",             // flags
    "81000000",         // payload length 129
    // payload (postcard)
    "00",               // workload: PrefixSum
    "03",               // steps: 3
    "00",               // participation: Single
    "000000000000f03f", // sensitivity.value: 1.0
    "00",               // sensitivity.method: MaxColumnNorm
    "000000000000f03f", // clip_norm: 1.0
    "01",               // calibration: Some
    "0000000000000040", //   noise_multiplier: 2.0
    "01",               //   target: Some
    "0000000000000040", //     epsilon: 2.0
    "000000000000e03f", //     delta: 0.5
    "0000000000000040", // error.sqrt_loss: 2.0
    "00",               // error.optimal_sqrt_loss: None
    "000000000000f83f", // error.max_step_stddev: 1.5
    "000000000000f83f", // error.final_step_stddev: 1.5
    "03",
    "6d6663", // generator: "mfc"
    "00",     // decoder: BandedLowRank
    "02",     //   band: 2
    "01",     //   rank: 1
    "18",
    "0000803f",
    "00000000",
    "0000803f",
    "0000003f",
    "0000803f",
    "0000003f", // diagonals
    "0c",
    "00000000",
    "00000000",
    "0000003f", // left
    "0c",
    "0000003f",
    "00000000",
    "00000000", // right
    "a64bc3c1", // CRC-32 of everything above (zlib.crc32)
);

#[test]
fn golden_bytes() {
    assert_eq!(hex(&golden_blob()), GOLDEN);
}

#[test]
fn golden_round_trip_reads_tables_in_place() {
    let blob = golden_blob();
    let m = Mechanism::from_bytes(&blob).unwrap();
    let (d, l, r) = tables();
    assert_eq!(m, mechanism(&d, &l, &r));
    let b = banded(&m);
    // The table points into the blob: no copy.
    let start = b.diagonals.as_bytes().as_ptr() as usize - blob.as_ptr() as usize;
    assert_eq!(&blob[start..start + 24], &d[..]);
    assert_eq!(
        b.diagonal_row(2).unwrap().iter().collect::<Vec<_>>(),
        [1.0, 0.5]
    );
    assert_eq!(b.left_row(2).unwrap().get(0), Some(0.5));
    assert_eq!(m.noise_stddev(), Some(2.0));
}

#[test]
fn write_to_matches_to_vec_and_reports_small_buffers() {
    let blob = golden_blob();
    let (d, l, r) = tables();
    let m = mechanism(&d, &l, &r);
    let mut buf = [0u8; 512];
    assert_eq!(m.write_to(&mut buf).unwrap(), &blob[..]);
    let mut small = vec![0u8; blob.len() - 1];
    assert_eq!(m.write_to(&mut small), Err(Error::BufferTooSmall));
}

#[test]
fn framing_errors_are_specific() {
    let blob = golden_blob();
    assert_eq!(Mechanism::from_bytes(&[]), Err(Error::Truncated));
    let mut b = blob.clone();
    b[0] ^= 1;
    assert_eq!(Mechanism::from_bytes(&b), Err(Error::BadMagic));
    let mut b = blob.clone();
    b[8] = 2;
    assert_eq!(
        Mechanism::from_bytes(&b),
        Err(Error::UnsupportedVersion { found: 2 })
    );
    let mut b = blob.clone();
    b[10] = 1;
    assert_eq!(
        Mechanism::from_bytes(&b),
        Err(Error::UnsupportedFlags { found: 1 })
    );
    let mut b = blob.clone();
    b.push(0);
    assert_eq!(Mechanism::from_bytes(&b), Err(Error::TrailingBytes));
    let mut b = blob.clone();
    let n = b.len();
    b[n - 1] ^= 0x80;
    assert!(matches!(
        Mechanism::from_bytes(&b),
        Err(Error::ChecksumMismatch { .. })
    ));
}

/// Re-frames a modified payload with a correct checksum, to reach the semantic checks.
fn reframe(m: &Mechanism<'_>) -> Vec<u8> {
    frame(&postcard::to_allocvec(m).unwrap())
}

/// Wraps `payload` in the frame of `SPEC.md`: magic, version 1, no flags, length, CRC-32.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut blob = Vec::new();
    blob.extend_from_slice(&mfc_formats::MAGIC);
    blob.extend_from_slice(&1u16.to_le_bytes());
    blob.extend_from_slice(&0u16.to_le_bytes());
    blob.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    blob.extend_from_slice(payload);
    let crc = mfc_formats::checksum(&blob);
    blob.extend_from_slice(&crc.to_le_bytes());
    blob
}

#[test]
fn semantic_errors_are_reported_even_with_a_valid_checksum() {
    let (d, l, r) = tables();
    let good = mechanism(&d, &l, &r);
    // Each edit of the golden mechanism, re-framed with a correct checksum, is refused.
    let refused = |m: &Mechanism<'_>, expected: Error| {
        assert_eq!(Mechanism::from_bytes(&reframe(m)), Err(expected));
    };
    let with_decoder = |b| Mechanism {
        decoder: Decoder::BandedLowRank(b),
        ..good
    };

    let mut m = good;
    m.header.steps = 0;
    refused(&m, Error::InvalidField { field: "steps" });

    let mut m = good;
    m.header.sensitivity.value = f64::NAN;
    refused(
        &m,
        Error::InvalidField {
            field: "sensitivity.value",
        },
    );

    let singular = encode_f32s([1.0, 0.0, 0.0, 0.5, 1.0, 0.5]);
    let m = with_decoder(BandedLowRank {
        diagonals: F32Table::new(&singular).unwrap(),
        ..banded(&good)
    });
    refused(&m, Error::SingularDecoder { step: 1 });

    let nan = encode_f32s([0.0, f32::NAN, 0.5]);
    let m = with_decoder(BandedLowRank {
        left: F32Table::new(&nan).unwrap(),
        ..banded(&good)
    });
    refused(
        &m,
        Error::NonFiniteCoefficient {
            table: "decoder.left",
            index: 1,
        },
    );

    let short = encode_f32s([0.0, 0.5]);
    let m = with_decoder(BandedLowRank {
        right: F32Table::new(&short).unwrap(),
        ..banded(&good)
    });
    refused(
        &m,
        Error::TableLength {
            table: "decoder.right",
            expected: 12,
            found: 8,
        },
    );

    let m = with_decoder(BandedLowRank {
        band: 4,
        ..banded(&good)
    });
    let bad_band = Error::InvalidField {
        field: "decoder.band",
    };
    refused(&m, bad_band);
    // An encoder refuses to write what a reader would refuse to read.
    assert_eq!(m.to_vec(), Err(bad_band));
}

#[test]
fn every_truncation_is_rejected() {
    common::assert_every_truncation_rejected(&golden_blob());
}

#[test]
fn every_single_bit_flip_is_rejected() {
    common::assert_every_bit_flip_rejected(&golden_blob());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary bytes after a valid prefix never panic the parser.
    #[test]
    fn arbitrary_payloads_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut blob = golden_blob()[..16].to_vec();
        blob.extend_from_slice(&tail);
        let _ = Mechanism::from_bytes(&blob);
    }

    /// Arbitrary payloads with a correct frame and checksum reach the decoder and never panic it.
    #[test]
    fn arbitrary_framed_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Mechanism::from_bytes(&frame(&payload));
    }

    /// Any multi-byte corruption of a valid blob is rejected.
    #[test]
    fn random_corruptions_are_rejected(at in 0usize..155, xor in 1u8..=255) {
        let mut b = golden_blob();
        let i = at % b.len();
        b[i] ^= xor;
        prop_assert!(Mechanism::from_bytes(&b).is_err());
    }
}

/// The golden mechanism under 2-min-separation with at most 2 participations, for replace-one
/// neighbours: the participation variant `02 02 02` and the extension `00 01` after the decoder
/// (`SPEC.md`, "Extensions"), pinned byte for byte.
const GOLDEN_MIN_SEPARATION_REPLACE_ONE: &str = concat!(
    "4d4643424c4f4200", // magic
    "0100",             // format version 1: extensions do not change it
    "0000",             // flags
    "85000000",         // payload length 133
    "00",               // workload: PrefixSum
    "03",               // steps: 3
    "020202",           // participation: MinSeparation { k = 2, b = 2 }
    "000000000000f03f00",
    "000000000000f03f",
    "010000000000000040010000000000000040000000000000e03f",
    "000000000000004000000000000000f83f000000000000f83f",
    "036d6663",
    "000201",
    "180000803f000000000000803f0000003f0000803f0000003f",
    "0c00000000000000000000003f",
    "0c0000003f0000000000000000",
    "0001",     // extension 0, Neighbouring: ReplaceOne
    "ebf12b0f", // CRC-32
);

#[test]
fn golden_min_separation_replace_one() {
    let (d, l, r) = tables();
    let mut m = mechanism(&d, &l, &r);
    m.header.participation = mfc_formats::Participation::MinSeparation {
        max_participations: 2,
        min_separation: 2,
    };
    m.header.neighbouring = mfc_formats::Neighbouring::ReplaceOne;
    let blob = m.to_vec().unwrap();
    assert_eq!(hex(&blob), GOLDEN_MIN_SEPARATION_REPLACE_ONE);
    assert_eq!(Mechanism::from_bytes(&blob).unwrap(), m);
    let mut buf = [0u8; 512];
    assert_eq!(m.write_to(&mut buf).unwrap(), &blob[..]);
    common::assert_every_truncation_rejected(&blob);
    common::assert_every_bit_flip_rejected(&blob);
    // A reader that predates the extension decodes the mechanism and finds two bytes left over,
    // which it refuses (`TrailingPayload`) rather than misread the relation.
    let payload = mfc_formats::payload(&blob).unwrap();
    let (_, rest): (Mechanism<'_>, _) = postcard::take_from_bytes(payload).unwrap();
    assert_eq!(rest, [0x00, 0x01]);
    // One encoding per mechanism: the default value written explicitly, or the extension twice,
    // is refused.
    let body = &payload[..payload.len() - 2];
    for tail in [&[0x00, 0x00][..], &[0x00, 0x01, 0x00, 0x01], &[0x01, 0x00]] {
        let framed = frame(&[body, tail].concat());
        assert!(Mechanism::from_bytes(&framed).is_err(), "tail {tail:02x?}");
    }
    // Add/remove blobs carry no extension: their bytes are those of version 1 before it.
    m.header.neighbouring = mfc_formats::Neighbouring::AddOrRemove;
    assert_eq!(m.to_vec().unwrap().len(), blob.len() - 2);
}
