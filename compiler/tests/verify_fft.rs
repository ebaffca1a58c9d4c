//! Issue 20, FFT forms: the device's bound `U` (`mfc_runtime::verify`, `verify/fft.rs`) against
//! dense references built here from the stored `f32` tables with faer, not with the runtime's
//! recursions: Mechanism 1's minimum-norm encoder `B̂†S` of the dense stored decoder, and
//! Mechanism 2's encoder `ŶE(M̂T̂)⁻¹` with the dense Gohberg–Semencul matrix `M̂` and its residual
//! `‖M̂T̂ − I‖₁` by a dense product. Each sensitivity through `participation::sensitivity`.

use faer::prelude::Solve;
use faer::{Mat, Side};
use mfc_compiler::blob::{BlobOptions, encode_fft};
use mfc_compiler::fft::{
    FftKind, FftOptions, compile_fft, for_each_inverse_row, stored_dense_decoder,
};
use mfc_compiler::participation::{Participation, sensitivity};
use mfc_compiler::workload::Workload;
use mfc_runtime::formats::Mechanism;
use mfc_runtime::verify::{self, Unverifiable, Verdict};

const SIZES: &[(usize, usize)] = &[(1, 1), (2, 3), (5, 2), (16, 1), (33, 2), (64, 1), (100, 3)];

fn prefix(n: usize) -> Mat<f64> {
    Workload::PrefixSum.matrix(n).unwrap()
}

/// The single-participation sensitivity of the dense encoder `Ĉ` the blob's value is about.
fn dense_reference(kind: FftKind, stamps: usize, kernel: &[f32], generator: &[f32]) -> f64 {
    let m = kernel.len() / 2;
    let n = m * stamps;
    match kind {
        FftKind::Circulant => {
            // B̂†S of the whole stamped decoder (carries included).
            let b = stored_dense_decoder(kind, stamps, kernel, generator);
            let gram = &b * b.transpose();
            let c = b.transpose() * gram.llt(Side::Lower).unwrap().solve(prefix(n));
            assert!((&b * &c - prefix(n)).norm_max() < 1e-8);
            sensitivity(c.as_ref(), &Participation::Single)
                .unwrap()
                .value
        }
        FftKind::OptimalDecoder => {
            // Ĉ = ŶE(M̂T̂)⁻¹ of one block; B̂_m Ĉ = S_m exactly, and the stamped encoder is
            // block diagonal, so its single-participation sensitivity is the block's.
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
            let exact = sensitivity(c.as_ref(), &Participation::Single)
                .unwrap()
                .value;
            // The recorded bound: ‖ŷ‖/(1 − ‖M̂T̂ − I‖₁), the residual by the dense product.
            let residual = (0..m)
                .map(|j| {
                    (0..m)
                        .map(|i| (mt[(i, j)] - f64::from(u8::from(i == j))).abs())
                        .sum::<f64>()
                })
                .fold(0.0f64, f64::max);
            let recorded = t[(0, 0)].sqrt() / (1.0 - residual);
            assert!(exact <= recorded * (1.0 + 1e-12), "{exact} > {recorded}");
            recorded
        }
    }
}

/// `U` of every FFT blob the compiler writes (both kinds, several m and s) is the dense
/// reference and the compiler's own value up to the rounding allowance, and the blob verifies.
#[test]
fn fft_bound_matches_the_dense_reference() {
    for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
        for &(m, stamps) in SIZES {
            let compiled = compile_fft(&FftOptions {
                steps: m * stamps,
                stamps,
                kind,
                participation: Participation::Single,
            })
            .unwrap();
            let bytes = encode_fft(&compiled, &BlobOptions::default()).unwrap();
            let blob = Mechanism::from_bytes(&bytes).unwrap();
            let mut scratch = vec![0.0; verify::scratch_len(&blob)];
            assert_eq!(scratch.len(), 18 * m);
            let bound = verify::sensitivity_bound(&blob, &mut scratch, u64::MAX).unwrap();
            let reference = dense_reference(kind, stamps, &compiled.kernel, &compiled.generator);
            let label = format!("{kind:?} m={m} s={stamps}");
            assert!(
                bound >= reference && bound <= reference * (1.0 + 1e-9),
                "{label}: U = {bound}, dense {reference}"
            );
            let ratio = bound / compiled.sensitivity;
            assert!((ratio - 1.0).abs() < 2e-6, "{label}: U/compiler = {ratio}");
            // The scratch's previous contents do not matter.
            scratch.fill(f64::NAN);
            let verdict = verify::verify(&blob, &mut scratch, u64::MAX);
            assert!(
                matches!(verdict, Ok(Verdict::Verified { .. })),
                "{label}: {verdict:?}"
            );
        }
    }
}

/// The operations the FFT check spends and the scratch it needs, each refused with the typed
/// outcome when short.
#[test]
fn fft_budget_and_scratch_are_enforced() {
    for (kind, per) in [(FftKind::Circulant, 14), (FftKind::OptimalDecoder, 11)] {
        let compiled = compile_fft(&FftOptions {
            steps: 40,
            stamps: 2,
            kind,
            participation: Participation::Single,
        })
        .unwrap();
        let bytes = encode_fft(&compiled, &BlobOptions::default()).unwrap();
        let blob = Mechanism::from_bytes(&bytes).unwrap();
        let needed = verify::operations(&blob).unwrap();
        assert_eq!(needed, per * 20 * 20);
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
