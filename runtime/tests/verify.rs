//! Issue 20: the device's verification (`mfc_runtime::verify`) against independent dense
//! references on seeded random coefficients: the bound `U` is never below the reference (the
//! soundness rule) and at most `10⁻⁶` above it (the rounding allowance), for the banded form
//! (dense `B̂⁻¹S`), the BLT form (the inverse power series of `r`), and BandMF encoders under
//! every schema (every participation pattern enumerated). And the policy refuses a lowered `σ`.

use mfc_formats::{
    BandMf, BandMfKind, BandedLowRank, Blt, Calibration, Decoder, ErrorSummary, F32Table, Header,
    Mechanism, Neighbouring, Participation, Sensitivity, SensitivityMethod, Workload, encode_f32s,
};
use mfc_runtime::Error;
use mfc_runtime::policy::{Floor, Policy, admit, check_floor};
use mfc_runtime::verify::{self, Verdict};

/// A small deterministic generator (SplitMix64), for coefficients in `[lo, hi)`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn in_range(&mut self, lo: f64, hi: f64) -> f32 {
        (lo + (hi - lo) * self.next()) as f32
    }
}

fn header(steps: u32, participation: Participation, sensitivity: f64) -> Header<'static> {
    Header {
        workload: Workload::PrefixSum,
        steps,
        participation,
        neighbouring: Neighbouring::AddOrRemove,
        sensitivity: Sensitivity {
            value: sensitivity,
            method: SensitivityMethod::MaxColumnNorm,
        },
        clip_norm: 1.0,
        calibration: Some(Calibration {
            noise_multiplier: 2.0,
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

/// `U` for `decoder` under `participation` (the recorded value is irrelevant to the bound).
fn bound(steps: u32, participation: Participation, decoder: Decoder<'_>) -> f64 {
    let m = Mechanism {
        header: header(steps, participation, 1.0),
        decoder,
    }
    .validate()
    .unwrap();
    let mut scratch = vec![0.0; verify::scratch_len(&m)];
    verify::sensitivity_bound(&m, &mut scratch, u64::MAX).unwrap()
}

fn assert_tight(u: f64, reference: f64, what: &str) {
    assert!(
        u >= reference && u <= reference * (1.0 + 1e-6),
        "{what}: U = {u}, reference {reference}"
    );
}

/// Dense `B̂` of a banded-plus-low-rank decoder, then `Ĉ = B̂⁻¹S` column by column, in `f64`.
#[test]
fn banded_bound_matches_the_dense_encoder() {
    let mut rng = Rng(1);
    for (n, h, r) in [(1, 1, 0), (5, 2, 1), (12, 3, 2), (20, 1, 3), (16, 4, 0)] {
        let diagonals: Vec<f32> = (0..n * h)
            .map(|e| {
                let (i, k) = (e / h, e % h);
                match k {
                    _ if k > i => 0.0,
                    0 => rng.in_range(0.5, 1.5),
                    _ => rng.in_range(-0.4, 0.4),
                }
            })
            .collect();
        let left: Vec<f32> = (0..n * r).map(|_| rng.in_range(-0.3, 0.3)).collect();
        let right: Vec<f32> = (0..n * r).map(|_| rng.in_range(-0.3, 0.3)).collect();
        let b = |i: usize, j: usize| -> f64 {
            if j > i {
                0.0
            } else if i - j < h {
                f64::from(diagonals[i * h + i - j])
            } else {
                (0..r)
                    .map(|c| f64::from(left[i * r + c]) * f64::from(right[j * r + c]))
                    .sum()
            }
        };
        let mut reference = 0.0f64;
        for j in 0..n {
            let mut y = vec![0.0f64; n];
            for i in j..n {
                let s: f64 = (j..i).map(|q| b(i, q) * y[q]).sum();
                y[i] = (1.0 - s) / b(i, i);
            }
            reference = reference.max(y.iter().map(|v| v * v).sum::<f64>());
        }
        let (d, l, rr) = (
            encode_f32s(diagonals.iter().copied()),
            encode_f32s(left.iter().copied()),
            encode_f32s(right.iter().copied()),
        );
        let decoder = Decoder::BandedLowRank(BandedLowRank {
            band: h as u32,
            rank: r as u32,
            diagonals: F32Table::new(&d).unwrap(),
            left: F32Table::new(&l).unwrap(),
            right: F32Table::new(&rr).unwrap(),
        });
        let u = bound(n as u32, Participation::Single, decoder);
        assert_tight(u, reference.sqrt(), &format!("banded n={n} h={h} r={r}"));
    }
}

/// The BLT encoder `c = 1/r` by the inverse power series of `r_0 = 1`, `r_k = Σ ω θ^{k−1}`.
#[test]
fn blt_bound_matches_the_inverse_series() {
    let mut rng = Rng(2);
    for (n, m) in [(1, 1), (10, 1), (40, 2), (64, 3)] {
        let theta: Vec<f32> = (0..m).map(|_| rng.in_range(0.3, 0.95)).collect();
        let omega: Vec<f32> = (0..m).map(|_| rng.in_range(0.05, 0.3)).collect();
        let r: Vec<f64> = (0..n)
            .map(|k| match k {
                0 => 1.0,
                _ => (0..m)
                    .map(|j| f64::from(omega[j]) * f64::from(theta[j]).powi(k as i32 - 1))
                    .sum(),
            })
            .collect();
        let mut c = vec![0.0f64; n];
        for k in 0..n {
            c[k] = if k == 0 { 1.0 } else { 0.0 } - (1..=k).map(|l| r[l] * c[k - l]).sum::<f64>();
        }
        let (t, o) = (encode_f32s(theta.clone()), encode_f32s(omega.clone()));
        let decoder = Decoder::Blt(Blt {
            theta: F32Table::new(&t).unwrap(),
            omega: F32Table::new(&o).unwrap(),
        });
        let single = c.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert_tight(
            bound(n as u32, Participation::Single, decoder),
            single,
            "blt single",
        );
        // Fixed epoch order, (k, b) = (3, 4): ‖|C| 1_{0, 4, 8}‖ (the compiler's formula).
        if n >= 8 {
            let g: f64 = (0..n)
                .map(|t| {
                    let s: f64 = (0..3)
                        .filter(|p| p * 4 <= t)
                        .map(|p| c[t - p * 4].abs())
                        .sum();
                    s * s
                })
                .sum();
            let p = Participation::FixedEpochOrder {
                max_participations: 3,
                separation: 4,
            };
            assert_tight(bound(n as u32, p, decoder), g.sqrt(), "blt fixed epoch");
            // Min separation, (3, 4): the same for the non-increasing majorant of |c|.
            let mut hat: Vec<f64> = c.iter().map(|x| x.abs()).collect();
            for t in (0..n - 1).rev() {
                hat[t] = hat[t].max(hat[t + 1]);
            }
            let g: f64 = (0..n)
                .map(|t| {
                    let s: f64 = (0..3).filter(|p| p * 4 <= t).map(|p| hat[t - p * 4]).sum();
                    s * s
                })
                .sum();
            let p = Participation::MinSeparation {
                max_participations: 3,
                min_separation: 4,
            };
            assert_tight(bound(n as u32, p, decoder), g.sqrt(), "blt min separation");
        }
    }
}

/// Every pattern of at most `k` steps below `n`, pairwise at least (`exact`: adjacent exactly)
/// `b` apart.
fn patterns(n: usize, k: usize, b: usize, exact: bool) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    let mut stack: Vec<Vec<usize>> = (0..n).map(|s| vec![s]).collect();
    while let Some(p) = stack.pop() {
        let last = *p.last().unwrap();
        if p.len() < k {
            let next: Vec<usize> = if exact {
                (last + b < n).then_some(last + b).into_iter().collect()
            } else {
                (last + b..n).collect()
            };
            for q in next {
                let mut longer = p.clone();
                longer.push(q);
                stack.push(longer);
            }
        }
        all.push(p);
    }
    all
}

/// BandMF with `b̂ ≤ b`: columns of one pattern are orthogonal, so the sensitivity is the
/// largest `sqrt(Σ_{j∈π} ‖Ĉ[:, j]‖²)` over the enumerated patterns.
#[test]
fn bandmf_bound_matches_every_pattern() {
    let mut rng = Rng(3);
    for (n, bands, k, b) in [
        (6, 1, 2, 2),
        (9, 2, 3, 2),
        (12, 3, 3, 3),
        (10, 2, 5, 4),
        (7, 3, 1, 7),
    ] {
        for kind in [BandMfKind::General, BandMfKind::Toeplitz] {
            let rows = if kind == BandMfKind::General { n } else { 1 };
            let table: Vec<f32> = (0..rows * bands)
                .map(|e| match (e / bands, e % bands) {
                    (i, l) if l > i && kind == BandMfKind::General => 0.0,
                    (_, 0) => rng.in_range(0.5, 1.5),
                    _ => rng.in_range(-0.6, 0.6),
                })
                .collect();
            let entry = |i: usize, j: usize| -> f64 {
                let l = i - j;
                f64::from(match kind {
                    BandMfKind::General => table[i * bands + l],
                    _ => table[l],
                })
            };
            let norm2 =
                |j: usize| -> f64 { (j..n.min(j + bands)).map(|i| entry(i, j).powi(2)).sum() };
            let bytes = encode_f32s(table.clone());
            let decoder = Decoder::BandMf(BandMf {
                kind,
                bands: bands as u32,
                encoder: F32Table::new(&bytes).unwrap(),
            });
            for (participation, exact) in [
                (Participation::Single, true),
                (
                    Participation::MinSeparation {
                        max_participations: k as u32,
                        min_separation: b as u32,
                    },
                    false,
                ),
                (
                    Participation::FixedEpochOrder {
                        max_participations: k as u32,
                        separation: b as u32,
                    },
                    true,
                ),
            ] {
                let (kk, bb) = if participation == Participation::Single {
                    (1, 1)
                } else {
                    (k, b)
                };
                let reference = patterns(n, kk, bb, exact)
                    .iter()
                    .map(|p| p.iter().map(|&j| norm2(j)).sum::<f64>())
                    .fold(0.0, f64::max)
                    .sqrt();
                let what = format!("{kind:?} n={n} b̂={bands} {participation:?}");
                assert_tight(bound(n as u32, participation, decoder), reference, &what);
            }
        }
    }
}

/// A blob whose σ was lowered (checksum recomputed) is refused under a floor at the original σ,
/// before any stream exists; the original blob is admitted, verified.
#[test]
fn a_lowered_noise_multiplier_is_refused_by_the_floor() {
    let c = encode_f32s([1.0f32, -0.5]);
    let decoder = Decoder::BandMf(BandMf {
        kind: BandMfKind::Toeplitz,
        bands: 2,
        encoder: F32Table::new(&c).unwrap(),
    });
    let sens = (1.25f64).sqrt() * (1.0 + 1e-9);
    let honest = Mechanism {
        header: header(8, Participation::Single, sens),
        decoder,
    };
    let bytes = honest.to_vec().unwrap();
    let mut lowered = Mechanism::from_bytes(&bytes).unwrap().into_inner();
    lowered.header.calibration = Some(Calibration {
        noise_multiplier: 2.0 * 0.99,
        target: None,
    });
    let lowered_bytes = lowered.to_vec().unwrap();
    let eps_at_2 = mfc_runtime::privacy::epsilon_for_noise_multiplier(2.0, 1e-6).unwrap();
    for floor in [
        Floor::NoiseMultiplier { min: 2.0 },
        Floor::Epsilon {
            max: eps_at_2,
            delta: 1e-6,
        },
    ] {
        let policy = Policy {
            floor,
            max_operations: 1000,
            refuse_unverifiable: true,
            admit_unbounded_horizon: false,
        };
        let good = Mechanism::from_bytes(&bytes).unwrap();
        assert!(matches!(
            admit(&good, None, &policy, &mut []),
            Ok(Verdict::Verified { .. })
        ));
        let bad = Mechanism::from_bytes(&lowered_bytes).unwrap();
        assert_eq!(
            admit(&bad, None, &policy, &mut []),
            Err(Error::BelowPrivacyFloor)
        );
        // A σ given by the caller is what the floor checks.
        assert_eq!(check_floor(&bad, Some(2.0), floor), Ok(()));
        assert_eq!(
            check_floor(&good, Some(1.9), floor),
            Err(Error::BelowPrivacyFloor)
        );
    }
    // Unverifiable under a policy that requires verification: refused; else admitted.
    let good = Mechanism::from_bytes(&bytes).unwrap();
    let mut policy = Policy {
        floor: Floor::NoiseMultiplier { min: 1.0 },
        max_operations: 0,
        refuse_unverifiable: true,
        admit_unbounded_horizon: false,
    };
    assert_eq!(
        admit(&good, None, &policy, &mut []),
        Err(Error::SensitivityUnverified)
    );
    policy.refuse_unverifiable = false;
    assert!(matches!(
        admit(&good, None, &policy, &mut []),
        Ok(Verdict::Unverifiable(_))
    ));
}

/// Cyclic Poisson sampling (amplified BandMF) records the largest column norm: the device
/// verifies it as single participation (exact; a 1% lower record is refused as understated).
/// Neither a σ floor nor an ε floor (one Gaussian release) bounds its ε, which also grows with
/// `q` and `⌈n/b̂⌉`: both refuse it, and the cyclic Poisson floor admits it only within its
/// three bounds (and refuses blobs without sampling).
#[test]
fn cyclic_poisson_is_verified_as_its_largest_column_and_refused_by_an_epsilon_floor() {
    let c = encode_f32s([1.0f32, -0.5]);
    let decoder = Decoder::BandMf(BandMf {
        kind: BandMfKind::Toeplitz,
        bands: 2,
        encoder: F32Table::new(&c).unwrap(),
    });
    let sampled = Participation::CyclicPoisson {
        cycle_length: 2,
        sampling_prob: 0.25,
    };
    let sens = (1.25f64).sqrt();
    assert_tight(bound(8, sampled, decoder), sens, "cyclic Poisson");
    let blob = |value: f64| {
        Mechanism {
            header: header(8, sampled, value),
            decoder,
        }
        .to_vec()
        .unwrap()
    };
    let (honest, lowered) = (blob(sens * (1.0 + 1e-9)), blob(sens * 0.99));
    let honest = Mechanism::from_bytes(&honest).unwrap();
    assert!(matches!(
        verify::verify(&honest, &mut [], 1000),
        Ok(Verdict::Verified { .. })
    ));
    assert!(matches!(
        verify::verify(&Mechanism::from_bytes(&lowered).unwrap(), &mut [], 1000),
        Err(Error::SensitivityUnderstated { .. })
    ));
    let refused = Err(Error::BelowPrivacyFloor);
    let sigma_floor = Floor::NoiseMultiplier { min: 2.0 };
    assert_eq!(check_floor(&honest, None, sigma_floor), refused);
    let no_floor = Floor::NoiseMultiplier { min: 0.0 };
    assert_eq!(check_floor(&honest, None, no_floor), Ok(()));
    let epsilon_floor = Floor::Epsilon {
        max: 1e4,
        delta: 1e-6,
    };
    assert_eq!(check_floor(&honest, None, epsilon_floor), refused);
    // n = 8, b̂ = 2: 4 participations at q = 0.25, σ = 2.
    let floor =
        |min_noise_multiplier, max_sampling_prob, max_participations| Floor::CyclicPoisson {
            min_noise_multiplier,
            max_sampling_prob,
            max_participations,
        };
    assert_eq!(check_floor(&honest, None, floor(2.0, 0.25, 4)), Ok(()));
    assert_eq!(check_floor(&honest, None, floor(2.01, 0.25, 4)), refused);
    assert_eq!(check_floor(&honest, None, floor(2.0, 0.2, 4)), refused);
    assert_eq!(check_floor(&honest, None, floor(2.0, 0.25, 3)), refused);
    assert_eq!(
        check_floor(&honest, Some(1.5), floor(2.0, 0.25, 4)),
        refused
    );
    let single = Mechanism {
        header: header(8, Participation::Single, sens * (1.0 + 1e-9)),
        decoder,
    }
    .to_vec()
    .unwrap();
    let single = Mechanism::from_bytes(&single).unwrap();
    assert_eq!(check_floor(&single, None, floor(2.0, 1.0, 8)), refused);
    assert_eq!(check_floor(&single, None, sigma_floor), Ok(()));
}

/// Issue 33: `verify_only` links the verifiers of its forms and schemas only, gives the verdict
/// of `verify` for a blob among them (verified, or refused when lowered 1%), and refuses any
/// other blob with `VerifierNotLinked`, never admitting it unverified: another form, another
/// schema, or the BLT's bound over every horizon for a bounded one.
#[test]
fn verify_only_gives_the_verdict_of_verify_for_its_forms_and_refuses_the_others() {
    use verify::forms::{
        ALL, BANDED, BANDMF, BLT, BLT_EVERY_HORIZON, FFT, FIXED_EPOCH_ORDER, MIN_SEPARATION, SINGLE,
    };
    let (t, o) = (
        encode_f32s(vec![0.9f32, 0.5]),
        encode_f32s(vec![0.2f32, 0.1]),
    );
    let decoder = Decoder::Blt(Blt {
        theta: F32Table::new(&t).unwrap(),
        omega: F32Table::new(&o).unwrap(),
    });
    let schemas = [
        (Participation::Single, SINGLE),
        (
            Participation::FixedEpochOrder {
                max_participations: 3,
                separation: 4,
            },
            FIXED_EPOCH_ORDER,
        ),
        (
            Participation::MinSeparation {
                max_participations: 3,
                min_separation: 4,
            },
            MIN_SEPARATION,
        ),
        // At most one participation fits in the 40 steps: single participation.
        (
            Participation::MinSeparation {
                max_participations: 3,
                min_separation: 40,
            },
            SINGLE,
        ),
    ];
    for (participation, schema) in schemas {
        let u = bound(40, participation, decoder);
        for (recorded, lowered) in [(u, false), (u * 0.99, true)] {
            let m = Mechanism {
                header: header(40, participation, recorded),
                decoder,
            }
            .validate()
            .unwrap();
            assert_eq!(verify::forms::of(&m), BLT | schema, "{participation:?}");
            let mut scratch = vec![0.0; verify::scratch_len(&m)];
            let expected = verify::verify(&m, &mut scratch, u64::MAX);
            if lowered {
                assert!(matches!(
                    expected,
                    Err(Error::SensitivityUnderstated { .. })
                ));
            } else {
                assert_eq!(expected, Ok(Verdict::Verified { recorded, bound: u }));
            }
            let mut only = |forms: u8| match forms {
                ALL => verify::verify_only::<ALL>(&m, &mut scratch, u64::MAX),
                0b1110_0010 => verify::verify_only::<
                    { BLT | SINGLE | FIXED_EPOCH_ORDER | MIN_SEPARATION },
                >(&m, &mut scratch, u64::MAX),
                0b0010_0010 => verify::verify_only::<{ BLT | SINGLE }>(&m, &mut scratch, u64::MAX),
                0b0100_0010 => {
                    verify::verify_only::<{ BLT | FIXED_EPOCH_ORDER }>(&m, &mut scratch, u64::MAX)
                }
                0b1000_0010 => {
                    verify::verify_only::<{ BLT | MIN_SEPARATION }>(&m, &mut scratch, u64::MAX)
                }
                0b1111_1101 => verify::verify_only::<{ ALL & !BLT }>(&m, &mut scratch, u64::MAX),
                0b1110_0100 => verify::verify_only::<
                    { BLT_EVERY_HORIZON | SINGLE | FIXED_EPOCH_ORDER | MIN_SEPARATION },
                >(&m, &mut scratch, u64::MAX),
                _ => unreachable!(),
            };
            for forms in [
                ALL,
                BLT | SINGLE | FIXED_EPOCH_ORDER | MIN_SEPARATION,
                BLT | SINGLE,
                BLT | FIXED_EPOCH_ORDER,
                BLT | MIN_SEPARATION,
            ] {
                let verdict = only(forms);
                if forms & schema != 0 {
                    assert_eq!(verdict, expected, "{participation:?}, forms {forms:#010b}");
                } else {
                    assert_eq!(
                        verdict,
                        Err(Error::VerifierNotLinked),
                        "{participation:?}, forms {forms:#010b}"
                    );
                }
            }
            // Every form and schema but this blob's form: refused whatever its sensitivity.
            let others = BANDED | BANDMF | FFT | SINGLE | FIXED_EPOCH_ORDER | MIN_SEPARATION;
            assert_eq!(ALL & !BLT, others | BLT_EVERY_HORIZON);
            assert_eq!(only(ALL & !BLT), Err(Error::VerifierNotLinked));
            assert_eq!(
                only(BLT_EVERY_HORIZON | SINGLE | FIXED_EPOCH_ORDER | MIN_SEPARATION),
                Err(Error::VerifierNotLinked)
            );
        }
    }
}
