//! Golden bytes of the FFT decoder form (decoder 1, `SPEC.md`), its validation, and: every
//! truncation and single-bit flip of an FFT blob is rejected without a panic.

mod common;

use common::hex;
use mfc_formats::{
    Decoder, Error, F32Table, Fft, FftKind, Mechanism, SensitivityMethod, encode_f32s,
};

/// m = 1, s = 2, the optimal decoder: ŷ = (1, 0) (for m = 1, v = (1, 0) is its own square
/// root) and x̂ = T̂⁻¹e₀ = (1).
fn mechanism<'a>(kernel: &'a [u8], generator: &'a [u8]) -> Mechanism<'a> {
    Mechanism {
        header: common::header(2, SensitivityMethod::GeneratorResidualBound, None),
        decoder: Decoder::Fft(Fft {
            kind: FftKind::OptimalDecoder,
            block: 1,
            stamps: 2,
            kernel: F32Table::new(kernel).unwrap(),
            generator: F32Table::new(generator).unwrap(),
        }),
    }
}

/// The bytes, annotated as in `SPEC.md` (CRC from Python's `zlib.crc32`).
const GOLDEN: &str = concat!(
    "4d4643424c4f4200", // magic
    "0100",             // format version 1
    "0000",             // flags
    "44000000",         // payload length 68
    "00",               // workload: PrefixSum
    "02",               // steps: 2
    "00",               // participation: Single
    "000000000000f03f", // sensitivity.value: 1.0
    "04",               // sensitivity.method: GeneratorResidualBound
    "000000000000f03f", // clip_norm: 1.0
    "00",               // calibration: None
    "0000000000000040", // error.sqrt_loss: 2.0
    "00",               // error.optimal_sqrt_loss: None
    "000000000000f83f", // error.max_step_stddev: 1.5
    "000000000000f83f", // error.final_step_stddev: 1.5
    "036d6663",         // generator: "mfc"
    "01",               // decoder: Fft
    "01",               //   kind: OptimalDecoder
    "01",               //   block: 1
    "02",               //   stamps: 2
    "08",
    "0000803f",
    "00000000", // kernel (8 bytes): 1.0, 0.0
    "04",
    "0000803f", // generator (4 bytes): 1.0
    "f3fa7f3e", // CRC-32
);

#[test]
fn fft_blob_bytes_are_pinned() {
    let (k, g) = (encode_f32s([1.0, 0.0]), encode_f32s([1.0]));
    let blob = mechanism(&k, &g).to_vec().unwrap();
    assert_eq!(hex(&blob), GOLDEN);
    assert_eq!(blob.len(), 88);
    let back = Mechanism::from_bytes(&blob).unwrap();
    assert_eq!(back, mechanism(&k, &g));
}

#[test]
fn fft_validation_refuses_inconsistent_shapes() {
    let (k, g) = (encode_f32s([1.0, 0.0]), encode_f32s([1.0]));
    let check = |edit: &dyn Fn(&mut Fft<'_>), expected: Error| {
        let mut m = mechanism(&k, &g);
        if let Decoder::Fft(f) = &mut m.decoder {
            edit(f);
        }
        assert_eq!(m.validate().map(|_| ()), Err(expected));
        assert_eq!(m.to_vec(), Err(expected));
    };
    let field = |field| Error::InvalidField { field };
    check(&|f| f.block = 0, field("decoder.block"));
    check(&|f| f.stamps = 0, field("decoder.block"));
    check(&|f| f.stamps = 3, field("decoder.stamps"));
    check(
        &|f| (f.block, f.stamps) = (u32::MAX, 1),
        field("decoder.stamps"),
    );
    let short = encode_f32s([1.0]);
    let mut m = mechanism(&short, &g);
    assert_eq!(
        m.validate().map(|_| ()),
        Err(Error::TableLength {
            table: "decoder.kernel",
            expected: 8,
            found: 4
        })
    );
    let nan = encode_f32s([1.0, f32::NAN]);
    m = mechanism(&nan, &g);
    assert_eq!(
        m.validate().map(|_| ()),
        Err(Error::NonFiniteCoefficient {
            table: "decoder.kernel",
            index: 1
        })
    );
    for bad in [0.0f32, -1.0] {
        let x = encode_f32s([bad]);
        assert_eq!(
            mechanism(&k, &x).validate().map(|_| ()),
            Err(field("decoder.generator"))
        );
    }
    // Mechanism 1 stores no generator.
    let mut circulant = mechanism(&k, &g);
    if let Decoder::Fft(f) = &mut circulant.decoder {
        f.kind = FftKind::Circulant;
    }
    assert_eq!(
        circulant.validate().map(|_| ()),
        Err(Error::TableLength {
            table: "decoder.generator",
            expected: 0,
            found: 4
        })
    );
    if let Decoder::Fft(f) = &mut circulant.decoder {
        f.generator = F32Table::empty();
    }
    assert_eq!(circulant.validate().map(|_| ()), Ok(()));
}

#[test]
fn every_truncation_and_bit_flip_of_an_fft_blob_is_rejected() {
    let (k, g) = (encode_f32s([1.0, 0.0]), encode_f32s([1.0]));
    let blob = mechanism(&k, &g).to_vec().unwrap();
    common::assert_every_truncation_rejected(&blob);
    common::assert_every_bit_flip_rejected(&blob);
}
