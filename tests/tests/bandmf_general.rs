//! Issue 31: what the general banded optimizer ships (no `n × n` matrix for the prefix sum and
//! momentum: `mfc_compiler::optimize::banded::general`) is checked against independent
//! references: its recorded sensitivity against a brute force over every maximal pattern and
//! sign vector of the dense stored encoder, its loss and per-step variance against a dense
//! triangular solve, and its blob against the device's verification (`mfc_runtime::verify`),
//! which accepts it and refuses the same blob with its sensitivity lowered by 1%.

use faer::Mat;
use mfc_compiler::forms::bandmf::{
    BandMfKind, BandMfOptions, Bands, CompiledBandMf, compile_bandmf,
};
use mfc_compiler::optimize::banded::general::{Columns, GeneralOptions};
use mfc_compiler::privacy::participation::{Participation, brute_force_sensitivity};
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::{Schedule, Workload};
use mfc_formats::Mechanism;
use mfc_runtime::Error;
use mfc_runtime::verify::{self, Verdict};

fn check(bytes: &[u8]) -> Result<Verdict, Error> {
    let m = Mechanism::from_bytes(bytes).unwrap();
    let mut scratch = vec![0.0; verify::scratch_len(&m)];
    verify::verify(&m, &mut scratch, u64::MAX)
}

fn rescaled(bytes: &[u8], factor: f64) -> Vec<u8> {
    let mut m = Mechanism::from_bytes(bytes).unwrap().into_inner();
    m.header.sensitivity.value *= factor;
    m.to_vec().unwrap()
}

/// Every check of the module docs on one compiled encoder.
fn check_shipped(workload: &Workload, n: usize, compiled: &CompiledBandMf, what: &str) {
    assert!(
        compiled
            .coefficients
            .iter()
            .all(|&x| f64::from(x as f32) == x),
        "{what}: not f32"
    );
    let c = compiled.encoder();
    let brute = brute_force_sensitivity(c.as_ref(), &compiled.participation).unwrap();
    assert!(
        (compiled.sensitivity - brute).abs() <= 1e-12 * brute,
        "{what}: recorded {} vs brute force {brute}",
        compiled.sensitivity
    );
    assert!((compiled.sensitivity - 1.0).abs() < 1e-6, "{what}");
    let a = workload.matrix(n).unwrap();
    let mut inverse = Mat::<f64>::identity(n, n);
    c.solve_lower_triangular_in_place(inverse.as_mut());
    let b = &a * &inverse;
    let loss = brute * brute * b.squared_norm_l2();
    assert!(
        (compiled.sqrt_loss.powi(2) - loss).abs() <= 1e-9 * loss,
        "{what}: {} vs dense {}",
        compiled.sqrt_loss.powi(2),
        loss
    );
    for i in 0..n {
        let expected = brute * brute * b.row(i).squared_norm_l2();
        assert!(
            (compiled.per_step_variance[i] - expected).abs() <= 1e-9 * expected.max(1e-12),
            "{what}: step {i}"
        );
    }
    let bytes = mfc_compiler::forms::bandmf::encode(compiled, workload, &BlobOptions::default())
        .unwrap()
        .bytes;
    let Ok(Verdict::Verified { recorded, bound }) = check(&bytes) else {
        panic!("{what}: the device did not verify the blob")
    };
    assert!(
        recorded >= bound && (recorded - brute).abs() <= 2e-6 * brute,
        "{what}: recorded {recorded}, bound {bound}, brute force {brute}"
    );
    assert!(
        matches!(
            check(&rescaled(&bytes, 0.99)),
            Err(Error::SensitivityUnderstated { .. })
        ),
        "{what}: a 1% lower sensitivity was not refused"
    );
}

/// Prefix sum, momentum with a cooldown, and the same momentum matrix as a custom workload (the
/// dense path), under the three schemas, fixed and automatic bands, free and normalized columns.
#[test]
fn shipped_general_encoders_match_brute_force_and_the_device() {
    let n = 24;
    let momentum = Workload::Momentum {
        momentum: 0.9,
        schedule: Schedule::Cooldown {
            steps: 6,
            final_rate: 0.1,
        },
    };
    let custom = Workload::Custom {
        label: "momentum as a matrix".into(),
        matrix: momentum.matrix(n).unwrap(),
    };
    for workload in [Workload::PrefixSum, momentum, custom] {
        for participation in [
            Participation::Single,
            Participation::min_separation(3, 6).unwrap(),
            Participation::min_separation(4, 5).unwrap(),
            Participation::fixed_epoch_order(4, 6).unwrap(),
        ] {
            for bands in [Bands::Fixed(4), Bands::Auto { max: 256 }] {
                for columns in [Columns::Free, Columns::Normalized] {
                    let options = BandMfOptions {
                        participation,
                        kind: BandMfKind::General,
                        bands,
                        general: GeneralOptions {
                            columns,
                            ..GeneralOptions::default()
                        },
                        ..BandMfOptions::default()
                    };
                    let compiled = compile_bandmf(&workload, n, &options, &mut |_, _| {}).unwrap();
                    let what = format!(
                        "{} {participation:?} {bands:?} {columns:?}",
                        workload.label()
                    );
                    check_shipped(&workload, n, &compiled, &what);
                    let toeplitz = compiled.toeplitz_sqrt_loss.unwrap();
                    assert!(
                        compiled.sqrt_loss <= toeplitz * (1.0 + 1e-6),
                        "{what}: {} worse than Toeplitz {toeplitz}",
                        compiled.sqrt_loss,
                    );
                }
            }
        }
    }
}
