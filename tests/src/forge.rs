//! Forged blobs (issue 27): honest blobs whose recorded sensitivity a forger lowered and then
//! steered into the class the device cannot verify, each by one route, with the outcome every
//! front door must give them by default. The Rust suite (`tests/tests/forged.rs`), `mfc
//! simulate`, the Python package and the C library's open all check the same blobs
//! (`cargo run --release -p mfc-tests --bin forge-blobs -- DIR` writes them with an index).
//!
//! | route | what the forger changed | outcome |
//! |---|---|---|
//! | relabelled schema | an FFT blob for single participation relabelled to min-separation, sensitivity halved | unverifiable (no device method for FFT under min-separation) |
//! | relabelled workload | a banded prefix-sum blob relabelled to a custom workload, sensitivity halved | unverifiable (the blob does not store `A`) |
//! | overlapping bands | a BandMF blob relabelled to `b < b̂` under min-separation, recorded at its single-participation value | unverifiable (columns of one record overlap) |
//! | overlapping bands, halved | the same recorded at half that | understated: below the certified lower bound (one column) |
//! | over budget | a banded decoder `B̂ = I` over 200 001 steps (more than the host's `2·10¹⁰` operations), sensitivity halved | unverifiable (over budget) |
//! | tiny pivot | one pivot of a banded decoder set to `10⁻²⁰` | understated (the pivot alone gives `10²⁰`) |
//! | diverging BLT | a BLT "for every horizon" whose encoder grows like `2.5ᵗ` | understated (its first steps exceed the record) |
//! | `{k: 1}` relabels | single-participation blobs (banded, FFT) relabelled to a schema with one participation (`MinSeparation {k: 1}`, `{k: 2, b: n}`, `FixedEpochOrder {k: 1}`) | verified as single participation; the banded ones lowered by 1%: understated |
//!
//! Every forged blob is a valid blob (checksum recomputed, every field in range): only the
//! verification and the policy stand between it and a stream.

use mfc_compiler::compile::compile;
use mfc_compiler::request::{BandsChoice, FormKind, Options, Stamps};
use mfc_runtime::formats::{
    BandedLowRank, Blt, Decoder, F32Table, Mechanism, Participation, SensitivityMethod, Workload,
    encode_f32s,
};

/// What every front door must do with a blob by default (and with the opt-in to admit
/// unverifiable blobs, only `Unverifiable` changes: it is admitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// The sensitivity is verified: streamed.
    Verified,
    /// The sensitivity cannot be verified: refused unless the caller opts in by name.
    Unverifiable,
    /// The recorded sensitivity is below a certified bound: refused whatever the opt-in.
    Understated,
}

impl Expected {
    /// The word the index file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Expected::Verified => "verified",
            Expected::Unverifiable => "unverifiable",
            Expected::Understated => "understated",
        }
    }
}

/// One blob of the suite.
pub struct Forged {
    /// A file name without extension.
    pub name: &'static str,
    /// The route, in words.
    pub route: &'static str,
    /// The blob.
    pub bytes: Vec<u8>,
    /// What a front door must do with it by default.
    pub expected: Expected,
}

/// An honest blob compiled with `σ = 1` by the compiler library.
fn honest(form: FormKind, steps: usize, tweak: impl FnOnce(&mut Options)) -> Vec<u8> {
    let mut options = Options {
        form: Some(form),
        steps: Some(steps),
        noise_multiplier: Some(1.0),
        ..Options::default()
    };
    tweak(&mut options);
    let request = options.request().expect("an honest request");
    compile(&request, &mut |_| {})
        .expect("an honest compile")
        .blob
}

/// `bytes` changed by `edit` and written again (checksum recomputed, fields validated).
fn edited<'a>(bytes: &'a [u8], edit: impl FnOnce(&mut Mechanism<'a>)) -> Vec<u8> {
    let mut m = Mechanism::from_bytes(bytes)
        .expect("a valid blob")
        .into_inner();
    edit(&mut m);
    m.to_vec().expect("the forged blob is valid")
}

/// Every blob of the suite (module docs), in a fixed order.
pub fn forged_blobs() -> Vec<Forged> {
    let fft = honest(FormKind::Fft, 32, |r| r.stamps = Some(Stamps::Count(2)));
    let banded = honest(FormKind::Banded, 24, |r| {
        r.band = Some(3);
        r.rank = Some(2);
    });
    let bandmf = honest(FormKind::BandMf, 32, |r| {
        r.toeplitz = true;
        r.bands = Some(BandsChoice::Fixed(4));
    });
    let single_bandmf = Mechanism::from_bytes(&bandmf)
        .expect("valid")
        .header
        .sensitivity
        .value;
    let mut suite = vec![
        Forged {
            name: "fft-relabelled-min-sep",
            route: "an FFT blob for single participation relabelled to min-separation (2, 8), sensitivity halved",
            bytes: edited(&fft, |m| {
                m.header.participation = Participation::MinSeparation {
                    max_participations: 2,
                    min_separation: 8,
                };
                m.header.sensitivity.value /= 2.0;
            }),
            expected: Expected::Unverifiable,
        },
        Forged {
            name: "banded-relabelled-custom",
            route: "a banded prefix-sum blob relabelled to a custom workload, sensitivity halved",
            bytes: edited(&banded, |m| {
                m.header.workload = Workload::Custom {
                    label: "momentum:0.9",
                };
                m.header.sensitivity.value /= 2.0;
            }),
            expected: Expected::Unverifiable,
        },
        Forged {
            name: "bandmf-overlapping-bands",
            route: "a 4-band BandMF blob relabelled to min-separation (4, 2), recorded at its single-participation sensitivity",
            bytes: edited(&bandmf, |m| {
                m.header.participation = Participation::MinSeparation {
                    max_participations: 4,
                    min_separation: 2,
                };
                m.header.sensitivity.method = SensitivityMethod::AbsoluteGramBound;
            }),
            expected: Expected::Unverifiable,
        },
        Forged {
            name: "bandmf-overlapping-bands-halved",
            route: "the same, recorded at half its single-participation sensitivity",
            bytes: edited(&bandmf, |m| {
                m.header.participation = Participation::MinSeparation {
                    max_participations: 4,
                    min_separation: 2,
                };
                m.header.sensitivity.method = SensitivityMethod::AbsoluteGramBound;
                m.header.sensitivity.value = single_bandmf / 2.0;
            }),
            expected: Expected::Understated,
        },
        over_budget(),
        Forged {
            name: "banded-tiny-pivot",
            route: "one pivot of a banded decoder set to 1e-20, sensitivity kept",
            bytes: tiny_pivot(&banded),
            expected: Expected::Understated,
        },
        diverging_blt(),
    ];
    for (name, participation) in [
        (
            "relabel-min-sep-k1",
            Participation::MinSeparation {
                max_participations: 1,
                min_separation: 4,
            },
        ),
        (
            "relabel-min-sep-b-n",
            Participation::MinSeparation {
                max_participations: 2,
                min_separation: 24,
            },
        ),
        (
            "relabel-every-k1",
            Participation::FixedEpochOrder {
                max_participations: 1,
                separation: 6,
            },
        ),
    ] {
        let relabelled = edited(&banded, |m| m.header.participation = participation);
        let lowered = edited(&relabelled, |m| m.header.sensitivity.value *= 0.99);
        suite.push(Forged {
            name,
            route: "a single-participation banded blob relabelled to a schema with one participation",
            bytes: relabelled,
            expected: Expected::Verified,
        });
        suite.push(Forged {
            name: match name {
                "relabel-min-sep-k1" => "relabel-min-sep-k1-lowered",
                "relabel-min-sep-b-n" => "relabel-min-sep-b-n-lowered",
                _ => "relabel-every-k1-lowered",
            },
            route: "the same relabel with the sensitivity lowered by 1%",
            bytes: lowered,
            expected: Expected::Understated,
        });
    }
    // FFT blobs have no device method under min-separation, but `{k: 1}` is single participation.
    suite.push(Forged {
        name: "relabel-fft-min-sep-k1",
        route: "a single-participation FFT blob relabelled to min-separation with k = 1",
        bytes: edited(&fft, |m| {
            m.header.participation = Participation::MinSeparation {
                max_participations: 1,
                min_separation: 8,
            }
        }),
        expected: Expected::Verified,
    });
    suite
}

/// `B̂ = I` over 200 001 steps: `Ĉ = S`, sensitivity `√n ≈ 447`, recorded as half of it; its
/// verification needs `n(n + 1)/2 > 2·10¹⁰` operations, over the host's budget, and the
/// certified lower bound (the pivots, 1) is far below the record.
fn over_budget() -> Forged {
    const STEPS: usize = 200_001;
    let banded = honest(FormKind::Banded, 8, |r| {
        r.band = Some(1);
        r.rank = Some(0);
    });
    let ones = encode_f32s(vec![1.0f32; STEPS]);
    let empty = encode_f32s(Vec::<f32>::new());
    let bytes = edited(&banded, |m| {
        m.header.steps = STEPS as u32;
        m.header.sensitivity.value = (STEPS as f64).sqrt() / 2.0;
        m.decoder = Decoder::BandedLowRank(BandedLowRank {
            band: 1,
            rank: 0,
            diagonals: F32Table::new(&ones).expect("aligned"),
            left: F32Table::new(&empty).expect("aligned"),
            right: F32Table::new(&empty).expect("aligned"),
        });
    });
    Forged {
        name: "banded-over-budget",
        route: "a banded decoder B = I over 200 001 steps (verification over the host's budget), sensitivity halved",
        bytes,
        expected: Expected::Unverifiable,
    }
}

/// The banded blob with its pivot at step 5 set to `10⁻²⁰`.
fn tiny_pivot(banded: &[u8]) -> Vec<u8> {
    let m = Mechanism::from_bytes(banded).expect("valid");
    let Decoder::BandedLowRank(d) = m.decoder else {
        unreachable!("a banded blob")
    };
    let h = d.band as usize;
    let mut diagonals: Vec<f32> = d.diagonals.iter().collect();
    diagonals[5 * h] = 1e-20;
    let table = encode_f32s(diagonals);
    edited(banded, |m| {
        if let Decoder::BandedLowRank(d) = &mut m.decoder {
            d.diagonals = F32Table::new(&table).expect("aligned");
        }
    })
}

/// A BLT of one buffer, `θ = 0.5`, `ω = 3`: its decoder `r(x) = 1 + 3x/(1 − x/2)` vanishes at
/// `x = −0.4`, so the encoder `c = 1/r` grows like `2.5ᵗ`; recorded as a bound for every horizon
/// of 1.
fn diverging_blt() -> Forged {
    let blt = honest(FormKind::Blt, 16, |r| r.buffers = Some(1));
    let theta = encode_f32s([0.5f32]);
    let omega = encode_f32s([3.0f32]);
    let bytes = edited(&blt, |m| {
        m.header.participation = Participation::Single;
        m.header.sensitivity.value = 1.0;
        m.header.sensitivity.method = SensitivityMethod::BltTailBound;
        m.decoder = Decoder::Blt(Blt {
            theta: F32Table::new(&theta).expect("aligned"),
            omega: F32Table::new(&omega).expect("aligned"),
        });
    });
    Forged {
        name: "blt-unbounded-diverging",
        route: "a BLT recorded for every horizon whose encoder grows like 2.5^t, sensitivity 1",
        bytes,
        expected: Expected::Understated,
    }
}
