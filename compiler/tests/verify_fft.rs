//! Issue 20, FFT forms: the device's bound `U` (`mfc_runtime::verify`, `verify/fft.rs`) against
//! dense references built here from the stored `f32` tables with faer, not with the runtime's
//! recursions: Mechanism 1's minimum-norm encoder `B̂†S` of the dense stored decoder, and
//! Mechanism 2's encoder `ŶE(M̂T̂)⁻¹` with the dense Gohberg–Semencul matrix `M̂` and its residual
//! `‖M̂T̂ − I‖₁` by a dense product. Each sensitivity through `participation::sensitivity`, and
//! under several participations no more than the brute force over sign patterns.

use faer::prelude::Solve;
use faer::{Mat, Side};
use mfc_compiler::forms::fft::{
    FftKind, FftOptions, compile_fft, for_each_inverse_row, stamp_encoder, stored_dense_decoder,
};
use mfc_compiler::privacy::participation::{Participation, brute_force_sensitivity, sensitivity};
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::Workload;
use mfc_runtime::formats::{Mechanism, SensitivityMethod};
use mfc_runtime::verify::{self, Unverifiable, Verdict};

const SIZES: &[(usize, usize)] = &[(1, 1), (2, 3), (5, 2), (16, 1), (33, 2), (64, 1), (100, 3)];

fn prefix(n: usize) -> Mat<f64> {
    Workload::PrefixSum.matrix(n).unwrap()
}

/// The sensitivity under `participation` of the dense encoder `Ĉ` the blob's value is about,
/// with its method; asserts that the brute force over sign patterns does not exceed it.
fn dense_reference(
    kind: FftKind,
    stamps: usize,
    kernel: &[f32],
    generator: &[f32],
    participation: &Participation,
) -> (f64, SensitivityMethod) {
    let m = kernel.len() / 2;
    let n = m * stamps;
    let brute_force_below = |c: &Mat<f64>, value: f64| {
        if !matches!(participation, Participation::Single) {
            let brute = brute_force_sensitivity(c.as_ref(), participation).unwrap();
            assert!(brute <= value * (1.0 + 1e-12), "{brute} > {value}");
        }
    };
    match kind {
        FftKind::Circulant => {
            // B̂†S of the whole stamped decoder (carries included).
            let b = stored_dense_decoder(kind, stamps, kernel, generator);
            let gram = &b * b.transpose();
            let c = b.transpose() * gram.llt(Side::Lower).unwrap().solve(prefix(n));
            assert!((&b * &c - prefix(n)).norm_max() < 1e-8);
            let s = sensitivity(c.as_ref(), participation).unwrap();
            brute_force_below(&c, s.value);
            (s.value, s.method)
        }
        FftKind::OptimalDecoder => {
            // Ĉ = ŶE(M̂T̂)⁻¹ of one block; B̂_m Ĉ = S_m exactly, and the stamped encoder is
            // block diagonal.
            let y: Vec<f64> = kernel.iter().map(|&v| f64::from(v)).collect();
            let ye = Mat::from_fn(2 * m, m, |i, j| y[(i + 2 * m - j) % (2 * m)]);
            let t = ye.transpose() * &ye;
            let x: Vec<f64> = generator.iter().map(|&v| f64::from(v)).collect();
            let mut gs = Mat::<f64>::zeros(m, m);
            for_each_inverse_row(&x, |i, r| {
                for (j, v) in r.iter().enumerate() {
                    gs[(i, j)] = *v;
                }
            });
            let mt = &gs * &t;
            let c = &ye * mt.partial_piv_lu().solve(Mat::<f64>::identity(m, m));
            let b = stored_dense_decoder(kind, 1, kernel, generator);
            assert!((&b * &c - prefix(m)).norm_max() < 1e-6);
            let c = stamp_encoder(&c, stamps);
            let exact = sensitivity(c.as_ref(), participation).unwrap().value;
            // The recorded bound: sens(ŶE)/(1 − ‖M̂T̂ − I‖₁), the residual by the dense product.
            let residual = (0..m)
                .map(|j| {
                    (0..m)
                        .map(|i| (mt[(i, j)] - f64::from(u8::from(i == j))).abs())
                        .sum::<f64>()
                })
                .fold(0.0f64, f64::max);
            let base = sensitivity(stamp_encoder(&ye, stamps).as_ref(), participation).unwrap();
            let recorded = base.value / (1.0 - residual);
            assert!(exact <= recorded * (1.0 + 1e-12), "{exact} > {recorded}");
            brute_force_below(&c, recorded);
            (recorded, base.method)
        }
    }
}

/// Compiles `kind` for `m·stamps` steps under `participation`, and returns the compiled
/// mechanism with its blob's bytes.
fn compiled(
    kind: FftKind,
    m: usize,
    stamps: usize,
    participation: Participation,
) -> (mfc_compiler::forms::fft::FftMechanism, Vec<u8>) {
    let compiled = compile_fft(&FftOptions {
        steps: m * stamps,
        stamps,
        kind,
        participation,
    })
    .unwrap();
    let bytes = mfc_compiler::forms::fft::encode(&compiled, &BlobOptions::default())
        .unwrap()
        .bytes;
    (compiled, bytes)
}

/// `U` against the dense reference and the compiler's value; the blob verifies, from a scratch
/// whose previous contents do not matter.
fn check_against_reference(kind: FftKind, m: usize, stamps: usize, participation: Participation) {
    let (compiled, bytes) = compiled(kind, m, stamps, participation);
    let blob = Mechanism::from_bytes(&bytes).unwrap();
    let mut scratch = vec![0.0; verify::scratch_len(&blob)];
    assert_eq!(scratch.len(), 18 * m);
    let label = format!("{kind:?} m={m} s={stamps} {participation:?}");
    let (reference, method) = dense_reference(
        kind,
        stamps,
        &compiled.kernel,
        &compiled.generator,
        &participation,
    );
    let bound = match verify::sensitivity_bound(&blob, &mut scratch, u64::MAX) {
        Ok(bound) => bound,
        Err(Unverifiable::Schema) => {
            // Only when the Gram has a negative entry on a pattern (001 Eq. 3 is not exact).
            assert_ne!(method, SensitivityMethod::NonnegativeGram, "{label}");
            return;
        }
        Err(other) => panic!("{label}: {other:?}"),
    };
    assert!(
        bound >= reference && bound <= reference * (1.0 + 1e-9),
        "{label}: U = {bound}, dense {reference}"
    );
    let ratio = bound / compiled.sensitivity;
    assert!((ratio - 1.0).abs() < 2e-6, "{label}: U/compiler = {ratio}");
    scratch.fill(f64::NAN);
    let verdict = verify::verify(&blob, &mut scratch, u64::MAX);
    assert!(
        matches!(verdict, Ok(Verdict::Verified { .. })),
        "{label}: {verdict:?}"
    );
}

/// `U` of every FFT blob the compiler writes (both kinds, several m and s) is the dense
/// reference and the compiler's own value up to the rounding allowance, and the blob verifies.
#[test]
fn fft_bound_matches_the_dense_reference() {
    for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
        for &(m, stamps) in SIZES {
            check_against_reference(kind, m, stamps, Participation::Single);
        }
    }
}

/// The same under fixed epoch order (`k` participations exactly `b` apart), where the device
/// sums the Gram over each pattern: equal to the dense value when the Gram is non-negative on
/// every pattern, unverifiable otherwise (checked against the reference's method).
#[test]
fn fft_fixed_epoch_order_matches_the_dense_reference() {
    for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
        for (m, stamps, k, b) in [
            (8, 2, 2, 8),
            (12, 3, 3, 12),
            (10, 2, 4, 5),
            (16, 1, 2, 8),
            (6, 4, 3, 7),
            (9, 2, 6, 3),
            // Negative Gram entries on the patterns: Circulant records (and the device checks)
            // the absolute-Gram bound; OptimalDecoder is unverifiable.
            (200, 1, 10, 20),
            (64, 1, 8, 8),
        ] {
            let participation = Participation::fixed_epoch_order(k, b).unwrap();
            check_against_reference(kind, m, stamps, participation);
        }
    }
}

/// The operations the FFT check spends and the scratch it needs, each refused with the typed
/// outcome when short.
#[test]
fn fft_budget_and_scratch_are_enforced() {
    for (kind, per) in [(FftKind::Circulant, 14), (FftKind::OptimalDecoder, 11)] {
        let (_, bytes) = compiled(kind, 20, 2, Participation::Single);
        let blob = Mechanism::from_bytes(&bytes).unwrap();
        let needed = verify::operations(&blob).unwrap();
        assert_eq!(needed, per * 20 * 20);
        // Fixed epoch order adds the pattern sums: n·k'² Gram entries (2m operations each for
        // Circulant, one for OptimalDecoder).
        let every = Participation::fixed_epoch_order(3, 10).unwrap();
        let (_, every_bytes) = compiled(kind, 20, 2, every);
        let per_entry = if kind == FftKind::Circulant { 40 } else { 1 };
        assert_eq!(
            verify::operations(&Mechanism::from_bytes(&every_bytes).unwrap()),
            Some(per * 20 * 20 + 40 * 9 * per_entry)
        );
        let mut scratch = vec![0.0; verify::scratch_len(&blob)];
        assert_eq!(scratch.len(), 18 * 20);
        assert_eq!(
            verify::verify(&blob, &mut scratch, needed - 1),
            Ok(Verdict::Unverifiable(Unverifiable::OverBudget {
                operations: needed
            }))
        );
        assert_eq!(
            verify::verify(&blob, &mut scratch[..18 * 20 - 1], needed),
            Ok(Verdict::Unverifiable(Unverifiable::ScratchTooSmall {
                needed: 18 * 20
            }))
        );
        assert!(matches!(
            verify::verify(&blob, &mut scratch, needed),
            Ok(Verdict::Verified { .. })
        ));
    }
}

/// A Circulant blob whose Gram has negative entries on a pattern is checked against the
/// absolute-Gram bound only when it records that method: relabelled `SpectralBound` (CRC
/// recomputed) it is unverifiable, not verified against a bound it does not claim.
#[test]
fn fft_absolute_gram_bound_only_when_recorded() {
    let participation = Participation::fixed_epoch_order(10, 20).unwrap();
    let (compiled, bytes) = compiled(FftKind::Circulant, 200, 1, participation);
    assert_eq!(
        compiled.sensitivity_method,
        SensitivityMethod::AbsoluteGramBound
    );
    let mut m = Mechanism::from_bytes(&bytes).unwrap().into_inner();
    m.header.sensitivity.method = SensitivityMethod::SpectralBound;
    let relabelled = m.to_vec().unwrap();
    let blob = Mechanism::from_bytes(&relabelled).unwrap();
    let mut scratch = vec![0.0; verify::scratch_len(&blob)];
    assert_eq!(
        verify::verify(&blob, &mut scratch, u64::MAX),
        Ok(Verdict::Unverifiable(Unverifiable::Schema))
    );
}
