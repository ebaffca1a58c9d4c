//! Issue 27: the forged-blob suite (`mfc_tests::forge`) against the device's verification and
//! policy, on the device's terms (`mfc_runtime::policy`, a refusing device and the host's
//! policy with and without the opt-in), through the host's own front door
//! (`mfc_compiler::privacy::verdict`, which `mfc simulate` and Python's `Stream` use), and through
//! `mfc simulate` itself when its binary is built (always under CI).

use std::path::PathBuf;
use std::process::Command;

use mfc_runtime::Error;
use mfc_runtime::formats::Mechanism;
use mfc_runtime::policy::{self, Policy};
use mfc_runtime::verify::{self, Verdict};
use mfc_tests::forge::{Expected, forged_blobs};

/// The host's verification budget (`mfc_compiler::privacy::verdict::VERIFY_OPERATIONS`).
const BUDGET: u64 = 20_000_000_000;

#[test]
fn every_front_door_policy_gives_each_forged_blob_its_outcome() {
    let suite = forged_blobs();
    assert!(suite.len() >= 12);
    for f in &suite {
        let m = Mechanism::from_bytes(&f.bytes).unwrap();
        let mut scratch = vec![0.0; verify::scratch_len(&m)];
        let verdict = verify::verify(&m, &mut scratch, BUDGET);
        match f.expected {
            Expected::Verified => {
                assert!(
                    matches!(verdict, Ok(Verdict::Verified { .. })),
                    "{}: {verdict:?}",
                    f.name
                )
            }
            Expected::Unverifiable => {
                assert!(
                    matches!(verdict, Ok(Verdict::Unverifiable(_))),
                    "{}: {verdict:?}",
                    f.name
                )
            }
            Expected::Understated => assert!(
                matches!(verdict, Err(Error::SensitivityUnderstated { .. })),
                "{}: {verdict:?}",
                f.name
            ),
        }
        for allow in [false, true] {
            let admitted = policy::admit(&m, None, &Policy::host(BUDGET, allow), &mut scratch);
            let host = mfc_compiler::privacy::verdict::check(&m).admit(&m, allow);
            let expected = match (f.expected, allow) {
                (Expected::Verified, _) | (Expected::Unverifiable, true) => Ok(()),
                (Expected::Unverifiable, false) => Err(Error::SensitivityUnverified),
                (Expected::Understated, _) => {
                    Err(Error::SensitivityUnderstated { shortfall_ppb: 0 })
                }
            };
            let same = |got: &Result<(), Error>| match (got, &expected) {
                (
                    Err(Error::SensitivityUnderstated { .. }),
                    Err(Error::SensitivityUnderstated { .. }),
                ) => true,
                _ => *got == expected,
            };
            assert!(
                same(&admitted.map(|_| ())),
                "{} (allow {allow}): policy",
                f.name
            );
            assert!(same(&host), "{} (allow {allow}): verdict: {host:?}", f.name);
        }
    }
}

/// The `mfc` binary beside this test's executable (`target/release/mfc`), built by `cargo test
/// --workspace`.
fn mfc_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("mfc");
    path.exists().then_some(path)
}

#[test]
fn mfc_simulate_refuses_the_forged_blobs_and_admits_the_unverifiable_ones_with_the_opt_in() {
    let Some(mfc) = mfc_binary() else {
        // Under CI (`.ci/run` builds the workspace first) the binary is required.
        if cfg!(mfc_ci) {
            panic!("target/release/mfc is missing: run cargo test --release --workspace");
        }
        eprintln!("skipped: no target/release/mfc (run cargo test --release --workspace)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("mfc-forged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.csv");
    std::fs::write(&input, "1,2\n0.5,0.25\n").unwrap();
    for f in forged_blobs() {
        let blob = dir.join(format!("{}.mfc", f.name));
        std::fs::write(&blob, &f.bytes).unwrap();
        for allow in [false, true] {
            let out = dir.join(format!("{}-{allow}.csv", f.name));
            let mut command = Command::new(&mfc);
            command
                .arg("simulate")
                .arg(&blob)
                .arg("--input")
                .arg(&input)
                .arg("--out")
                .arg(&out);
            if allow {
                command.arg("--allow-unverified");
            }
            let o = command.output().unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            match (f.expected, allow) {
                (Expected::Verified, _) => {
                    assert!(o.status.success(), "{}: {stderr}", f.name);
                    assert!(!stderr.contains("unverifiable"), "{}: {stderr}", f.name);
                }
                (Expected::Unverifiable, false) => {
                    assert_eq!(o.status.code(), Some(2), "{}: {stderr}", f.name);
                    assert!(
                        stderr.contains("--allow-unverified"),
                        "{}: {stderr}",
                        f.name
                    );
                    assert!(!out.exists());
                }
                (Expected::Unverifiable, true) => {
                    assert!(o.status.success(), "{}: {stderr}", f.name);
                    // The opt-in is printed.
                    assert!(
                        stderr.contains("streamed anyway (--allow-unverified)"),
                        "{}: {stderr}",
                        f.name
                    );
                }
                (Expected::Understated, _) => {
                    assert_eq!(o.status.code(), Some(2), "{}: {stderr}", f.name);
                    assert!(stderr.contains("below the bound"), "{}: {stderr}", f.name);
                    assert!(!out.exists());
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
