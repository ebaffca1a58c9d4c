//! Golden bytes of the BandMF decoder form (decoder 3, `SPEC.md`), both kinds, and its
//! validation: every truncation and single-bit flip of a BandMF blob is rejected without a
//! panic.

mod common;

use common::hex;
use mfc_formats::{
    BandMf, BandMfKind, Decoder, Error, F32Table, Mechanism, SensitivityMethod, encode_f32s,
};

fn mechanism(kind: BandMfKind, bands: u32, encoder: &[u8]) -> Mechanism<'_> {
    Mechanism {
        header: common::header(3, SensitivityMethod::MaxColumnNorm, None),
        decoder: Decoder::BandMf(BandMf {
            kind,
            bands,
            encoder: F32Table::new(encoder).unwrap(),
        }),
    }
}

/// The header shared by both golden blobs, annotated as in `SPEC.md`.
const HEADER: &str = concat!(
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
);

/// Toeplitz, `b̂ = 2`, `c = (1, −0.5)` over 3 steps (computed independently with Python's
/// `struct` and `zlib.crc32`).
const TOEPLITZ: [&str; 9] = [
    "4d4643424c4f4200", // magic
    "0100",             // format version 1
    "0000",             // flags
    "3e000000",         // payload length 62
    HEADER,
    "03",                 // decoder: BandMf
    "0102",               //   kind: Toeplitz, bands: 2
    "080000803f000000bf", //   encoder: 8 bytes, c = (1.0, -0.5)
    "2270abc1",           // CRC-32 (zlib.crc32)
];

/// General, `b̂ = 2`, rows `(C[i,i], C[i,i−1])` = (1, +0 padding), (0.75, −0.5), (1.25, 0.25).
const GENERAL: [&str; 9] = [
    "4d4643424c4f4200", // magic
    "0100",             // format version 1
    "0000",             // flags
    "4e000000",         // payload length 78
    HEADER,
    "03",                                                 // decoder: BandMf
    "0002",                                               //   kind: General, bands: 2
    "180000803f000000000000403f000000bf0000a03f0000803e", //   encoder: 24 bytes
    "a3ddb81e",                                           // CRC-32 (zlib.crc32)
];

#[test]
fn bandmf_blob_bytes_are_pinned() {
    let c = encode_f32s([1.0, -0.5]);
    let blob = mechanism(BandMfKind::Toeplitz, 2, &c).to_vec().unwrap();
    assert_eq!(hex(&blob), TOEPLITZ.concat());
    assert_eq!(blob.len(), 82);
    assert_eq!(
        Mechanism::from_bytes(&blob).unwrap(),
        mechanism(BandMfKind::Toeplitz, 2, &c)
    );
    let rows = encode_f32s([1.0, 0.0, 0.75, -0.5, 1.25, 0.25]);
    let blob = mechanism(BandMfKind::General, 2, &rows).to_vec().unwrap();
    assert_eq!(hex(&blob), GENERAL.concat());
    assert_eq!(blob.len(), 98);
    let parsed = Mechanism::from_bytes(&blob).unwrap();
    let Decoder::BandMf(d) = parsed.decoder else {
        panic!("not a BandMF blob")
    };
    assert_eq!(d.row(1).unwrap().iter().collect::<Vec<_>>(), [0.75, -0.5]);
    assert!(d.row(3).is_none());
}

#[test]
fn bandmf_validation_refuses_bad_encoders() {
    let field = |field| Error::InvalidField { field };
    let c = encode_f32s([1.0, -0.5]);
    for bands in [0, 4] {
        assert_eq!(
            mechanism(BandMfKind::Toeplitz, bands, &c).validate(),
            Err(field("decoder.bands")),
            "b̂ = {bands}"
        );
    }
    assert_eq!(
        mechanism(BandMfKind::Toeplitz, 1, &c).validate(),
        Err(Error::TableLength {
            table: "decoder.encoder",
            expected: 4,
            found: 8
        })
    );
    let singular = encode_f32s([0.0, 1.0]);
    assert_eq!(
        mechanism(BandMfKind::Toeplitz, 2, &singular).validate(),
        Err(Error::SingularEncoder { step: 0 })
    );
    let negative_zero = encode_f32s([-0.0, 1.0]);
    assert_eq!(
        mechanism(BandMfKind::Toeplitz, 2, &negative_zero).validate(),
        Err(Error::SingularEncoder { step: 0 })
    );
    // A subnormal diagonal is as good as singular: 1/c overflows f32.
    for tiny in [f32::MIN_POSITIVE / 2.0, -1e-45] {
        let subnormal = encode_f32s([tiny, 1.0]);
        assert_eq!(
            mechanism(BandMfKind::Toeplitz, 2, &subnormal).validate(),
            Err(Error::SingularEncoder { step: 0 }),
            "{tiny:e}"
        );
    }
    let smallest_normal = encode_f32s([f32::MIN_POSITIVE, 1.0]);
    assert!(
        mechanism(BandMfKind::Toeplitz, 2, &smallest_normal)
            .validate()
            .is_ok()
    );
    let nan = encode_f32s([1.0, f32::NAN]);
    assert_eq!(
        mechanism(BandMfKind::Toeplitz, 2, &nan).validate(),
        Err(Error::NonFiniteCoefficient {
            table: "decoder.encoder",
            index: 1
        })
    );
    // General: the shape is n × b̂, the diagonal non-zero, the padding +0.0.
    assert_eq!(
        mechanism(BandMfKind::General, 2, &c).validate(),
        Err(Error::TableLength {
            table: "decoder.encoder",
            expected: 24,
            found: 8
        })
    );
    let subnormal_diagonal = encode_f32s([1.0, 0.0, 0.75, -0.5, 1e-40, 0.25]);
    assert_eq!(
        mechanism(BandMfKind::General, 2, &subnormal_diagonal).validate(),
        Err(Error::SingularEncoder { step: 2 })
    );
    let zero_diagonal = encode_f32s([1.0, 0.0, 0.0, -0.5, 1.25, 0.25]);
    assert_eq!(
        mechanism(BandMfKind::General, 2, &zero_diagonal).validate(),
        Err(Error::SingularEncoder { step: 1 })
    );
    for padding in [0.5, -0.0] {
        let rows = encode_f32s([1.0, padding, 0.75, -0.5, 1.25, 0.25]);
        assert_eq!(
            mechanism(BandMfKind::General, 2, &rows).validate(),
            Err(Error::NonZeroPadding { step: 0 }),
            "{padding}"
        );
    }
    let infinite = encode_f32s([1.0, 0.0, 0.75, -0.5, f32::INFINITY, 0.25]);
    assert_eq!(
        mechanism(BandMfKind::General, 2, &infinite).validate(),
        Err(Error::NonFiniteCoefficient {
            table: "decoder.encoder",
            index: 4
        })
    );
}

/// `OrthogonalColumns` is exact only with `b̂ ≤ b`: a blob that claims it with more bands than
/// the separation (whose real sensitivity may be many times the recorded one) is refused, under
/// both multi-participation schemas; with `b̂ ≤ b`, or a single participation, it is accepted.
#[test]
fn orthogonal_columns_with_overlapping_bands_is_refused() {
    use mfc_formats::Participation;
    let c = encode_f32s([1.0, 1.0, 1.0]);
    let claim = |participation, method| {
        let mut m = mechanism(BandMfKind::Toeplitz, 3, &c);
        m.header.steps = 16;
        m.header.participation = participation;
        m.header.sensitivity.method = method;
        m.validate().map(|_| ())
    };
    let orthogonal = SensitivityMethod::OrthogonalColumns;
    for gap in [1, 2] {
        for participation in [
            Participation::MinSeparation {
                max_participations: 4,
                min_separation: gap,
            },
            Participation::FixedEpochOrder {
                max_participations: 4,
                separation: gap,
            },
        ] {
            assert_eq!(
                claim(participation, orthogonal),
                Err(Error::InvalidField {
                    field: "decoder.bands"
                }),
                "{participation:?}"
            );
            // Another method (an upper bound the writer computed) makes no such claim.
            assert_eq!(
                claim(participation, SensitivityMethod::AbsoluteGramBound),
                Ok(())
            );
        }
    }
    let separated = Participation::MinSeparation {
        max_participations: 4,
        min_separation: 3,
    };
    assert_eq!(claim(separated, orthogonal), Ok(()));
    let once = Participation::MinSeparation {
        max_participations: 1,
        min_separation: 1,
    };
    assert_eq!(claim(once, orthogonal), Ok(()));
}

#[test]
fn every_truncation_and_bit_flip_is_rejected() {
    let c = encode_f32s([1.0, -0.5]);
    let rows = encode_f32s([1.0, 0.0, 0.75, -0.5, 1.25, 0.25]);
    for blob in [
        mechanism(BandMfKind::Toeplitz, 2, &c).to_vec().unwrap(),
        mechanism(BandMfKind::General, 2, &rows).to_vec().unwrap(),
    ] {
        common::assert_every_truncation_rejected(&blob);
        common::assert_every_bit_flip_rejected(&blob);
    }
}

/// Cyclic Poisson sampling (participation 3, `SPEC.md`): the Toeplitz blob above under
/// `CyclicPoisson { b̂ = 2, q = 0.25 }` (bytes computed independently with Python's `struct` and
/// `zlib.crc32`).
const CYCLIC_POISSON: [&str; 18] = [
    "4d4643424c4f4200",                                   // magic
    "0100",                                               // format version 1
    "0000",                                               // flags
    "47000000",                                           // payload length 71
    "00",                                                 // workload: PrefixSum
    "03",                                                 // steps: 3
    "03",                                                 // participation: CyclicPoisson
    "02",                                                 //   cycle_length b̂: 2
    "000000000000d03f",                                   //   sampling_prob q: 0.25
    "000000000000f03f",                                   // sensitivity.value: 1.0
    "00",                                                 // sensitivity.method: MaxColumnNorm
    "000000000000f03f",                                   // clip_norm: 1.0
    "00",                                                 // calibration: None
    "000000000000004000000000000000f83f000000000000f83f", // error: 2.0, None, 1.5, 1.5
    "036d6663",                                           // generator: "mfc"
    "0301020800",     // decoder: BandMf, Toeplitz, b̂ = 2, 8 bytes
    "00803f000000bf", //   c = (1.0, -0.5)
    "b0b9afd0",       // CRC-32 (zlib.crc32)
];

#[test]
fn cyclic_poisson_blob_bytes_are_pinned() {
    use mfc_formats::Participation;
    let c = encode_f32s([1.0, -0.5]);
    let sampled = |cycle_length, sampling_prob: f64| {
        let mut m = mechanism(BandMfKind::Toeplitz, 2, &c);
        m.header.participation = Participation::CyclicPoisson {
            cycle_length,
            sampling_prob,
        };
        m
    };
    let blob = sampled(2, 0.25).to_vec().unwrap();
    assert_eq!(hex(&blob), CYCLIC_POISSON.concat());
    assert_eq!(Mechanism::from_bytes(&blob).unwrap(), sampled(2, 0.25));
    // Three groups for two bands is valid (the columns still do not overlap); q = 1 is valid.
    assert!(sampled(3, 1.0).validate().is_ok());
}

/// A cyclic Poisson schema is valid only where its analysis holds: a probability `q ∈ (0, 1]`,
/// `1 ≤ b̂ ≤ n`, a BandMF decoder of at most `b̂` bands, add-remove neighbours.
#[test]
fn cyclic_poisson_outside_its_analysis_is_refused() {
    use mfc_formats::{Neighbouring, Participation};
    let c = encode_f32s([1.0, -0.5]);
    let refused = Err(Error::InvalidField {
        field: "participation",
    });
    let sampled = |cycle_length, sampling_prob| {
        let mut m = mechanism(BandMfKind::Toeplitz, 2, &c);
        m.header.participation = Participation::CyclicPoisson {
            cycle_length,
            sampling_prob,
        };
        m
    };
    for (b, q) in [
        (2, 0.0),
        (2, -0.25),
        (2, 1.5),
        (2, f64::NAN),
        (2, f64::INFINITY),
        (0, 0.25),
        (4, 0.25), // more groups than steps
        (1, 0.25), // 2 bands overlap within one group
    ] {
        assert_eq!(
            sampled(b, q).validate().map(|_| ()),
            refused,
            "b̂ {b}, q {q}"
        );
    }
    let mut replace = sampled(2, 0.25);
    replace.header.neighbouring = Neighbouring::ReplaceOne;
    assert_eq!(replace.validate().map(|_| ()), refused);
    // Any other decoder: the amplified analysis needs a banded encoder.
    let (theta, omega) = (encode_f32s([0.5]), encode_f32s([0.25]));
    let mut blt = sampled(2, 0.25);
    blt.decoder = Decoder::Blt(mfc_formats::Blt {
        theta: F32Table::new(&theta).unwrap(),
        omega: F32Table::new(&omega).unwrap(),
    });
    assert_eq!(blt.validate().map(|_| ()), refused);
}
