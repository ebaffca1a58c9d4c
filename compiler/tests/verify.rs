//! Issue 20: every blob the compiler writes passes the device's verification
//! (`mfc_runtime::verify`), for every form and schema it can verify, and the same blob with its
//! recorded sensitivity lowered by 1% and its checksum recomputed is refused. The bound the
//! device computes is also checked against an independent dense reference: the compiler's
//! recorded value, which comes from a different algorithm (`toeplitz_sensitivity`, the dense
//! encoder `B̂⁻¹S`, the BandMF dynamic programme), agrees with it to 2e-6 (the bound's rounding allowance).

use std::process::Command;

use mfc_runtime::Error;
use mfc_runtime::formats::Mechanism;
use mfc_runtime::verify::{self, Unverifiable, Verdict};

/// Compiles a blob with `extra` arguments and returns its bytes.
fn compile(name: &str, extra: &str) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("mfc-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{name}.mfc"));
    let o = Command::new(env!("CARGO_BIN_EXE_mfc"))
        .args(["compile", "--noise-multiplier", "1", "--out"])
        .arg(&out)
        .args(extra.split_whitespace())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{extra}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read(out).unwrap()
}

fn check(bytes: &[u8]) -> Result<Verdict, Error> {
    let m = Mechanism::from_bytes(bytes).unwrap();
    let mut scratch = vec![0.0; verify::scratch_len(&m)];
    verify::verify(&m, &mut scratch, u64::MAX)
}

/// The blob with its recorded sensitivity scaled by `factor`, checksum recomputed.
fn rescaled(bytes: &[u8], factor: f64) -> Vec<u8> {
    let mut m = Mechanism::from_bytes(bytes).unwrap().into_inner();
    m.header.sensitivity.value *= factor;
    m.to_vec().unwrap()
}

/// The forms and schemas the device verifies exactly.
const VERIFIED: &[(&str, &str)] = &[
    ("banded", "--steps 24 --band 3 --rank 2"),
    (
        "banded-replace",
        "--steps 24 --band 3 --rank 2 --neighbouring replace-one",
    ),
    ("blt", "--form blt --steps 32 --buffers 3"),
    (
        "blt-horizon",
        "--form blt --steps 32 --buffers 2 --horizon 200",
    ),
    (
        "bandmf-toeplitz",
        "--form bandmf --toeplitz --steps 32 --bands 4",
    ),
    (
        "bandmf-toeplitz-min-sep",
        "--form bandmf --toeplitz --steps 32 --bands 4 --epochs 4 --min-sep 8",
    ),
    (
        "bandmf-toeplitz-every",
        "--form bandmf --toeplitz --steps 32 --bands 8 --epochs 4 --every 8",
    ),
    ("bandmf-general", "--form bandmf --steps 24 --bands 3"),
    (
        "bandmf-general-min-sep",
        "--form bandmf --steps 24 --bands 3 --epochs 3 --min-sep 6",
    ),
    (
        "bandmf-general-every",
        "--form bandmf --steps 24 --bands 4 --epochs 3 --every 6",
    ),
    (
        "bandmf-general-replace",
        "--form bandmf --steps 24 --bands 3 --epochs 3 --min-sep 6 --neighbouring replace-one",
    ),
    (
        "bandmf-momentum",
        "--form bandmf --toeplitz --steps 32 --bands 4 --workload momentum:0.9",
    ),
    ("fft", "--form fft --steps 16"),
    ("fft-m1", "--form fft --steps 3 --stamps 3"),
    ("fft-stamps", "--form fft --steps 120 --stamps 3"),
    ("fft-long", "--form fft --steps 500"),
    ("fft-optimal", "--form fft-optimal --steps 16"),
    ("fft-optimal-m1", "--form fft-optimal --steps 2 --stamps 2"),
    (
        "fft-optimal-stamps",
        "--form fft-optimal --steps 120 --stamps 4",
    ),
    ("fft-optimal-long", "--form fft-optimal --steps 500"),
    (
        "fft-every",
        "--form fft --steps 48 --stamps 2 --epochs 3 --every 16",
    ),
    (
        "fft-every-absolute",
        "--form fft --steps 200 --epochs 10 --every 20",
    ),
    (
        "fft-optimal-every",
        "--form fft-optimal --steps 64 --stamps 4 --epochs 4 --every 16",
    ),
    (
        "fft-optimal-replace",
        "--form fft-optimal --steps 64 --stamps 2 --neighbouring replace-one",
    ),
];

#[test]
fn every_compiled_blob_verifies_and_a_lowered_sensitivity_is_refused() {
    for (name, extra) in VERIFIED {
        let bytes = compile(name, extra);
        let m = Mechanism::from_bytes(&bytes).unwrap();
        match check(&bytes) {
            Ok(Verdict::Verified { recorded, bound }) => {
                assert_eq!(recorded, m.header.sensitivity.value);
                // Exact methods: the device's bound is the recorded value up to rounding.
                assert!(
                    bound <= recorded && bound >= recorded * (1.0 - 2e-6),
                    "{name}: bound {bound}, recorded {recorded}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        let lowered = rescaled(&bytes, 0.99);
        match check(&lowered) {
            Err(Error::SensitivityUnderstated { shortfall_ppb }) => {
                assert!(
                    (9_999_000..=10_001_000).contains(&shortfall_ppb),
                    "{name}: {shortfall_ppb}"
                )
            }
            other => panic!("{name}: lowered 1%: {other:?}"),
        }
        // A lowering by the rounding allowance (2e-6) and a little is refused too: the bound is tight.
        assert!(
            matches!(
                check(&rescaled(&bytes, 1.0 - 1e-5)),
                Err(Error::SensitivityUnderstated { .. })
            ),
            "{name}"
        );
    }
}

#[test]
fn what_the_device_cannot_check_is_unverifiable_not_refused() {
    for (name, extra, why) in [
        (
            "fft-min-sep",
            "--form fft --steps 16 --stamps 2 --epochs 2 --min-sep 8",
            Unverifiable::Schema,
        ),
        (
            "fft-optimal-min-sep",
            "--form fft-optimal --steps 16 --epochs 2 --min-sep 8",
            Unverifiable::Schema,
        ),
        (
            "banded-min-sep",
            "--steps 16 --band 2 --rank 1 --epochs 2 --min-sep 8",
            Unverifiable::Schema,
        ),
    ] {
        let bytes = compile(name, extra);
        assert_eq!(check(&bytes), Ok(Verdict::Unverifiable(why)), "{name}");
        // Unverifiable is an outcome, not a refusal: lowering changes nothing.
        assert_eq!(
            check(&rescaled(&bytes, 0.99)),
            Ok(Verdict::Unverifiable(why))
        );
    }
}

#[test]
fn budget_and_scratch_are_enforced() {
    let bytes = compile("banded-budget", "--steps 24 --band 3 --rank 2");
    let m = Mechanism::from_bytes(&bytes).unwrap();
    let needed = verify::operations(&m).unwrap();
    // n(n+1)/2 · (h + 2r) for the banded form.
    assert_eq!(needed, 24 * 25 / 2 * (3 + 2 * 2));
    let mut scratch = vec![0.0; verify::scratch_len(&m)];
    assert_eq!(scratch.len(), 3 + 2 * 2);
    assert_eq!(
        verify::verify(&m, &mut scratch, needed - 1),
        Ok(Verdict::Unverifiable(Unverifiable::OverBudget {
            operations: needed
        }))
    );
    assert_eq!(
        verify::verify(&m, &mut scratch[..6], needed),
        Ok(Verdict::Unverifiable(Unverifiable::ScratchTooSmall {
            needed: 7
        }))
    );
    assert!(matches!(
        verify::verify(&m, &mut scratch, needed),
        Ok(Verdict::Verified { .. })
    ));
}

/// `mfc inspect` prints the verdict and refuses (exit 2) a lowered blob; `mfc simulate` refuses
/// it before any step and writes nothing.
#[test]
fn inspect_prints_the_verdict_and_simulate_refuses_a_lowered_blob() {
    let dir = std::env::temp_dir().join(format!("mfc-verify-{}", std::process::id()));
    let bytes = compile(
        "cli-bandmf",
        "--form bandmf --toeplitz --steps 16 --bands 2",
    );
    let (good, bad) = (dir.join("cli-good.mfc"), dir.join("cli-bad.mfc"));
    std::fs::write(&good, &bytes).unwrap();
    std::fs::write(&bad, rescaled(&bytes, 0.99)).unwrap();
    let mfc = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_mfc"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = mfc(&["inspect".as_ref(), good.as_os_str()]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("verification        verified: recorded"),
        "{text}"
    );
    let o = mfc(&["inspect".as_ref(), bad.as_os_str(), "--json".as_ref()]);
    assert_eq!(o.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["verification"]["verdict"], "refused");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("below the bound"), "{err}");
    let (input, out) = (dir.join("cli-in.csv"), dir.join("cli-out.csv"));
    std::fs::write(&input, "1\n2\n").unwrap();
    let o = mfc(&[
        "simulate".as_ref(),
        bad.as_os_str(),
        "--input".as_ref(),
        input.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("below the bound"));
    assert!(!out.exists());
}
