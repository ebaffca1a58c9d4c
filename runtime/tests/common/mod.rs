//! What the runtime's integration tests share: random banded-plus-low-rank tables and a
//! calibrated mechanism around them (σ = 0.7, sens = 1.3, the given ζ), built here rather than
//! by the compiler so that the runtime is tested on shapes no optimizer would produce.

#![allow(dead_code)]

use mfc_formats::{
    BandMf, BandMfKind, BandedLowRank, Calibration, Decoder, ErrorSummary, F32Table, Header,
    Mechanism, Neighbouring, Participation, Sensitivity, SensitivityMethod, Validated, Workload,
    encode_f32s,
};

/// SplitMix64 mapped to `[−½, ½)`: coefficients and inputs independent of the code under test.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

/// The encoded tables of an `n`-step decoder with band `h` and rank `r`.
pub struct Tables {
    pub n: usize,
    pub h: usize,
    pub r: usize,
    pub diagonals: Vec<u8>,
    pub left: Vec<u8>,
    pub right: Vec<u8>,
}

/// Random tables: main diagonal in `[½, 3/2)` (never zero), other coefficients in `[−½, ½)`,
/// zero padding above the diagonal.
pub fn tables(n: usize, h: usize, r: usize, seed: u64) -> Tables {
    let mut g = Gen(seed);
    let diagonals = encode_f32s((0..n * h).map(|idx| {
        let (i, k) = (idx / h, idx % h);
        if k > i {
            0.0
        } else if k == 0 {
            1.0 + g.next()
        } else {
            g.next()
        }
    }));
    let left = encode_f32s((0..n * r).map(|_| g.next()));
    let right = encode_f32s((0..n * r).map(|_| g.next()));
    Tables {
        n,
        h,
        r,
        diagonals,
        left,
        right,
    }
}

/// The encoded table of an `n`-step BandMF encoder with `bands` bands.
pub struct EncoderTable {
    pub n: usize,
    pub bands: usize,
    pub kind: BandMfKind,
    pub encoder: Vec<u8>,
}

/// A random BandMF encoder: diagonal in `[¾, 5/4)`, other coefficients in `[−⅛, ⅛)` (so that
/// `C⁻¹` stays moderate), zero padding left of column 0.
pub fn encoder_table(kind: BandMfKind, n: usize, bands: usize, seed: u64) -> EncoderTable {
    let mut g = Gen(seed);
    let mut coefficient = |l: usize| {
        if l == 0 {
            1.0 + 0.5 * g.next()
        } else {
            0.25 * g.next()
        }
    };
    let encoder = match kind {
        BandMfKind::Toeplitz => encode_f32s((0..bands).map(&mut coefficient).collect::<Vec<_>>()),
        _ => encode_f32s(
            (0..n * bands)
                .map(|q| {
                    let (i, l) = (q / bands, q % bands);
                    if l > i { 0.0 } else { coefficient(l) }
                })
                .collect::<Vec<_>>(),
        ),
    };
    EncoderTable {
        n,
        bands,
        kind,
        encoder,
    }
}

/// A BandMF mechanism over `t`, header as [`mechanism`]'s, validated.
pub fn bandmf<'a>(t: &'a EncoderTable, workload: Workload<'a>, clip_norm: f64) -> Validated<'a> {
    Mechanism {
        header: header(t.n, workload, clip_norm),
        decoder: Decoder::BandMf(BandMf {
            kind: t.kind,
            bands: t.bands as u32,
            encoder: F32Table::new(&t.encoder).unwrap(),
        }),
    }
    .validate()
    .expect("valid tables")
}

/// A mechanism over `t` with σ = 0.7, sens = 1.3 and clip norm `clip_norm`, validated.
pub fn mechanism<'a>(t: &'a Tables, workload: Workload<'a>, clip_norm: f64) -> Validated<'a> {
    Mechanism {
        header: header(t.n, workload, clip_norm),
        decoder: Decoder::BandedLowRank(BandedLowRank {
            band: t.h as u32,
            rank: t.r as u32,
            diagonals: F32Table::new(&t.diagonals).unwrap(),
            left: F32Table::new(&t.left).unwrap(),
            right: F32Table::new(&t.right).unwrap(),
        }),
    }
    .validate()
    .expect("valid tables")
}

/// The header of [`mechanism`] and [`bandmf`]: σ = 0.7, sens = 1.3, the given ζ.
fn header<'a>(n: usize, workload: Workload<'a>, clip_norm: f64) -> Header<'a> {
    Header {
        workload,
        steps: n as u32,
        participation: Participation::Single,
        neighbouring: Neighbouring::AddOrRemove,
        sensitivity: Sensitivity {
            value: 1.3,
            method: SensitivityMethod::MaxColumnNorm,
        },
        clip_norm,
        calibration: Some(Calibration {
            noise_multiplier: 0.7,
            target: None,
        }),
        error: ErrorSummary {
            sqrt_loss: 1.0,
            optimal_sqrt_loss: None,
            max_step_stddev: 1.0,
            final_step_stddev: 1.0,
        },
        generator: "test",
    }
}

/// A zeroed workspace for a banded stream of `dim` coordinates of `m`.
pub fn workspace(m: &Validated<'_>, dim: usize) -> Vec<f32> {
    let len = mfc_runtime::Stream::<mfc_runtime::ChaChaNoise>::workspace_len(m, dim);
    vec![0.0; len.expect("a banded mechanism and a valid dimension")]
}
