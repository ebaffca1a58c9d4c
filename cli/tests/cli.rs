//! Drives the real `mfc` binary: each subcommand once on good input and once on bad input.
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the `mfc` binary with `args` and returns what it did.
fn mfc(args: &[OsString]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mfc"))
        .args(args)
        .output()
        .expect("the mfc binary runs")
}

/// Splits `line` on white space into arguments, each `{}` replaced whole by the next of `values`.
fn args(line: &str, values: &[&dyn AsRef<OsStr>]) -> Vec<OsString> {
    let mut values = values.iter();
    let args = line
        .split_whitespace()
        .map(|word| match word {
            "{}" => values.next().expect("a value for every {}").as_ref().into(),
            _ => word.into(),
        })
        .collect();
    assert!(
        values.next().is_none(),
        "a {{}} for every value in {line:?}"
    );
    args
}

/// Runs `mfc`, asserts that it succeeded (showing its stderr if not) and returns its stdout.
fn mfc_ok(args: &[OsString]) -> String {
    let o = mfc(args);
    assert!(o.status.success(), "mfc {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// Runs `mfc` like [`mfc_ok`] and parses its stdout as JSON.
fn mfc_json(args: &[OsString]) -> serde_json::Value {
    serde_json::from_str(&mfc_ok(args)).expect("mfc prints JSON")
}

/// Runs `mfc`, asserts that it exited with code 2 (showing its output if not), returns stderr.
fn assert_refused(args: &[OsString]) -> String {
    let o = mfc(args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(
        o.status.code(),
        Some(2),
        "mfc {args:?}\nstdout: {out}\nstderr: {err}"
    );
    err
}

/// A path for `name` in a temporary folder of this test run.
fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mfc-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// What the run printed on stdout.
fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What the run printed on stderr.
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn compile_writes_a_blob_and_reports_json() {
    let out = temp("prefix.mfc");
    let report = mfc_json(&args(
        "compile --workload prefix --steps 64 --band 3 --rank 2 --epsilon 2 --delta 1e-6 \
         --out {} --json",
        &[&out],
    ));
    for field in [
        "steps",
        "band",
        "rank",
        "sqrt_loss",
        "optimal_sqrt_loss",
        "duality_gap",
        "sensitivity",
        "blob_bytes",
    ] {
        assert!(report.get(field).is_some(), "missing {field}");
    }
    assert_eq!(report["steps"], 64);
    assert!(report["duality_gap"].as_f64().unwrap() <= 1e-6);
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(report["blob_bytes"].as_u64().unwrap() as usize, bytes.len());
    assert!(
        report["sqrt_loss"].as_f64().unwrap()
            >= report["optimal_sqrt_loss"].as_f64().unwrap() * (1.0 - 1e-9)
    );

    let inspected = mfc_json(&args("inspect {} --json", &[&out]));
    assert_eq!(inspected["steps"], 64);
    assert_eq!(inspected["band"], 3);
    assert_eq!(inspected["rank"], 2);
    assert_eq!(inspected["checksum_ok"], true);
    assert_eq!(inspected["sensitivity"], report["sensitivity"]);
    assert_eq!(inspected["epsilon"], 2.0);

    assert!(mfc_ok(&args("inspect {}", &[&out])).contains("banded+low-rank"));
}

#[test]
fn compile_rejects_bad_options_with_exit_code_2() {
    let out = temp("bad.mfc");
    let err = assert_refused(&args("compile --steps 16 --band 0 --out {}", &[&out]));
    assert!(err.starts_with("mfc: "), "{err}");
    let err = assert_refused(&args(
        "compile --workload nonsense --steps 16 --out {}",
        &[&out],
    ));
    assert!(
        err.contains("--workload nonsense: expected `prefix`"),
        "{err}"
    );
}

/// Issue 18: a horizon whose dense compile would not fit in this machine's memory is refused
/// before any matrix is built (n = 50 000 would need tens of GB), naming the option, the value,
/// the largest `--steps` that fits and the forms that scale; no blob is written.
#[test]
fn compile_refuses_a_dense_compile_larger_than_the_machine() {
    let out = temp("huge.mfc");
    let err = assert_refused(&args("compile --steps 50000 --out {}", &[&out]));
    for needle in [
        "--steps 50000",
        "GB of memory",
        "available",
        "--steps up to",
        "--form blt",
        "fft",
        "banded Toeplitz",
        "--force",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in {err}");
    }
    assert!(!out.exists());
}

/// Issue 18: with stderr not a terminal (a log file, CI), the optimizer's progress is printed as
/// lines with the iteration and the duality gap, the first one at once.
#[test]
fn compile_prints_progress_lines_when_stderr_is_not_a_terminal() {
    let out = temp("progress.mfc");
    let o = mfc(&args(
        "compile --steps 48 --band 3 --rank 2 --out {}",
        &[&out],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("iteration 1,"))
        .unwrap_or_else(|| panic!("no progress line in {err:?}"));
    assert!(
        line.starts_with("mfc compile: ") && line.contains("relative duality gap"),
        "{line}"
    );
}

/// Issue 31: the `(h, r)` form under min-separation says before any work what it will take and
/// which forms serve min-separation faster (its first stderr line; the run is then stopped).
#[test]
fn compile_under_min_separation_estimates_before_the_work() {
    use std::io::BufRead;
    let out = temp("min-sep-estimate.mfc");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mfc"))
        .args(args(
            "compile --steps 2000 --epochs 20 --min-sep 100 --band 4 --rank 4 --out {}",
            &[&out],
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(first.starts_with("mfc: warning: n = 2000: "), "{first}");
    for what in [
        " min on a 2-core machine",
        "--form bandmf",
        "100 bands",
        "--form blt",
    ] {
        assert!(first.contains(what), "{what:?} missing from {first}");
    }
    assert!(!out.exists(), "a stopped compile wrote a blob");
}

/// Issue 31: `mfc compare` in a log (stderr not a terminal) prints a line when each part of
/// the table starts and ends.
#[test]
fn compare_prints_progress_lines_when_stderr_is_not_a_terminal() {
    let o = mfc(&args("compare --steps 32 --epochs 2 --every 16", &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let started = err.lines().filter(|l| l.contains(": started: ")).count();
    let done = err.lines().filter(|l| l.contains(": done: ")).count();
    assert!(started >= 5 && started == done, "{err}");
    assert!(err.lines().all(|l| l.starts_with("mfc compare: ")), "{err}");
}

#[test]
fn inspect_reports_corruption_and_exits_2() {
    let out = temp("corrupt.mfc");
    mfc_ok(&args(
        "compile --steps 16 --band 2 --rank 1 --out {}",
        &[&out],
    ));
    let mut bytes = std::fs::read(&out).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&out, &bytes).unwrap();
    let err = assert_refused(&args("inspect {}", &[&out]));
    assert!(err.contains("checksum mismatch"), "{err}");
    assert_eq!(err.lines().count(), 1, "the error is printed once");

    assert_refused(&args("inspect {}", &[&temp("missing.mfc")]));
}

#[test]
fn compile_reads_a_numpy_workload() {
    // A 3×3 float64 lower-triangular matrix in NPY v1.0 format, as numpy.save writes it.
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 3), }";
    let mut padded = header.to_string();
    while (10 + padded.len() + 1) % 64 != 0 {
        padded.push(' ');
    }
    padded.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    npy.extend_from_slice(padded.as_bytes());
    for v in [1.0f64, 0.0, 0.0, 0.5, 1.0, 0.0, 0.25, 0.5, 1.0] {
        npy.extend_from_slice(&v.to_le_bytes());
    }
    let path = temp("workload.npy");
    std::fs::write(&path, &npy).unwrap();
    let out = temp("npy.mfc");
    let spec = format!("npy:{}", path.display());
    let report = mfc_json(&args(
        "compile --workload {} --band 1 --rank 1 --out {} --json",
        &[&spec, &out],
    ));
    assert_eq!(report["steps"], 3);

    // Not lower triangular: refused.
    let mut upper = npy.clone();
    let data = upper.len() - 9 * 8;
    upper[data + 8..data + 16].copy_from_slice(&2.0f64.to_le_bytes());
    std::fs::write(&path, &upper).unwrap();
    assert_refused(&args("compile --workload {} --out {}", &[&spec, &out]));
}

#[test]
fn calibrate_answers_both_directions() {
    let v = mfc_json(&args("calibrate --epsilon 1 --delta 1e-5 --json", &[]));
    let sigma = v["noise_multiplier"].as_f64().unwrap();
    assert!((sigma - 3.730632).abs() < 4e-6 && sigma >= 3.730632 * (1.0 - 1e-6));

    let v = mfc_json(&args(
        "calibrate --noise-multiplier 1 --delta 1e-5 --json",
        &[],
    ));
    assert!((v["epsilon"].as_f64().unwrap() - 4.377178).abs() < 5e-6);
    // The (ε, δ) comes with what it is for, in JSON as in text.
    let unit = v["privacy_unit"].as_str().unwrap();
    assert!(unit.contains("per record") && unit.contains("neighbouring relation"));

    assert_refused(&args("calibrate --delta 1e-5", &[]));
}

/// Issue 29: `--sampling-prob` calibrates DP-SGD and amplified BandMF with the accountant,
/// against jax_privacy 2.0's value for the same scheme (`tools/accountant_reference.py`:
/// n = 2000, 60 000 examples, expected batch 500, δ = 1e-5, ε = 1: σ = 1.5873258), states the
/// scheme, the unit and the relation, and refuses replace-one with sampling.
#[test]
fn calibrate_with_sampling_matches_the_reference_accountant() {
    let v = mfc_json(&args(
        "calibrate --sampling-prob 0.008333333333333333 --steps 2000 --epsilon 1 --delta 1e-5 \
         --json",
        &[],
    ));
    let sigma = v["noise_multiplier"].as_f64().unwrap();
    assert!((sigma / 1.5873258373762238 - 1.0).abs() < 1e-4, "{sigma}");
    let unit = v["privacy_unit"].as_str().unwrap();
    assert!(
        unit.contains("DP-SGD") && unit.contains("one example"),
        "{unit}"
    );
    assert!(unit.contains("adding or removing one example"), "{unit}");
    // Back: that σ gives at most the target ε; more bands, fewer participations, less ε.
    let back = |bands: u32| {
        mfc_json(&args(
            &format!(
                "calibrate --sampling-prob 0.008333333333333333 --steps 2000 --bands {bands} \
                 --noise-multiplier {sigma} --delta 1e-5 --json"
            ),
            &[],
        ))["epsilon"]
            .as_f64()
            .unwrap()
    };
    let (one, eight) = (back(1), back(8));
    assert!(one <= 1.0 && one > 0.99, "{one}");
    assert!(eight < one, "{eight} vs {one}");
    assert_refused(&args(
        "calibrate --sampling-prob 0.5 --steps 10 --bands 11 --epsilon 1 --delta 1e-5",
        &[],
    ));
    assert_refused(&args("calibrate --steps 10 --epsilon 1 --delta 1e-5", &[]));
}

/// Issue 29: `mfc compile --sampling-prob q --bands b̂` writes amplified BandMF: the blob records
/// cyclic Poisson sampling, its σ is the accountant's (the same as `mfc calibrate`'s for the
/// scheme, within 0.01% of jax_privacy's `BandMFExecutionPlanConfig`), the device verifies its
/// sensitivity as the largest column norm, and `inspect` derives ε by the accountant and states
/// the scheme next to (ε, δ).
#[test]
fn compile_with_sampling_records_the_scheme_and_the_accountant_s_sigma() {
    let out = temp("amplified.mfc");
    let q = "0.5333333333333333"; // 500·64/60000: expected batch 500 of 60 000, 64 groups
    let report = mfc_json(&args(
        &format!(
            "compile --sampling-prob {q} --bands 64 --toeplitz --steps 2000 --epsilon 8 \
             --delta 1e-5 --out {{}} --json"
        ),
        &[&out],
    ));
    let sigma = report["privacy"]["noise_multiplier"].as_f64().unwrap();
    let calibrated = mfc_json(&args(
        &format!(
            "calibrate --sampling-prob {q} --steps 2000 --bands 64 --epsilon 8 --delta 1e-5 --json"
        ),
        &[],
    ));
    assert_eq!(sigma, calibrated["noise_multiplier"].as_f64().unwrap());
    // jax_privacy 2.0 (compiler/tests/data/accountant_reference.json): 1.977249056904702.
    assert!((sigma / 1.977249056904702 - 1.0).abs() < 1e-4, "{sigma}");
    // A composition of subsampled Gaussians has no ρ-zCDP of one Gaussian release.
    assert!(report["privacy"]["zcdp_rho"].is_null(), "{report}");
    let sampling = &report["sampling"];
    assert_eq!(sampling["scheme"], "cyclic Poisson");
    assert_eq!(sampling["cycle_length"], 64);
    assert_eq!(
        sampling["sampling_prob"].as_f64().unwrap(),
        0.5333333333333333
    );
    assert_eq!(sampling["participations"], 32);
    let schema = report["participation"].as_str().unwrap();
    assert!(
        schema.starts_with("cyclic Poisson sampling") && schema.contains("exactly 64 apart"),
        "{schema}"
    );
    assert!(
        report["privacy_unit"].as_str().unwrap().contains(schema),
        "{report}"
    );
    let inspected = mfc_json(&args("inspect {} --json", &[&out]));
    assert_eq!(inspected["sampling"], report["sampling"]);
    assert_eq!(inspected["participation"], report["participation"]);
    assert_eq!(inspected["privacy_claim"], "holds");
    let epsilon = inspected["epsilon"].as_f64().unwrap();
    assert!(epsilon <= 8.0 && epsilon > 7.99, "{epsilon}");
    assert!(
        inspected["verification"].to_string().contains("verified"),
        "{inspected}"
    );
    // DP-SGD is one band: the same code, a noise multiplier of jax_privacy's within 0.01%.
    let dpsgd = mfc_json(&args(
        "compile --sampling-prob 0.008333333333333333 --bands 1 --steps 2000 --epsilon 1 \
         --delta 1e-5 --out {} --json",
        &[&temp("dpsgd.mfc")],
    ));
    let sigma = dpsgd["privacy"]["noise_multiplier"].as_f64().unwrap();
    assert!((sigma / 1.5873258373762238 - 1.0).abs() < 1e-4, "{sigma}");
    // One band, general encoder: the identity, whose sqrt(L) is ‖S‖_F = sqrt(n(n+1)/2).
    let identity = (2000.0f64 * 2001.0 / 2.0).sqrt();
    let sqrt_loss = dpsgd["sqrt_loss"].as_f64().unwrap();
    assert!((sqrt_loss / identity - 1.0).abs() < 1e-6, "{sqrt_loss}");
    assert!(
        dpsgd["participation"].as_str().unwrap().contains("DP-SGD"),
        "{dpsgd}"
    );
}

/// Issue 29, choosing the bands: with the dataset and its expected batch, `--bands auto` picks
/// the candidate b̂ (1, 2, 4, … and ⌊N/B⌋) whose compiled blob has the least RMSE per step at
/// the target, each candidate compiled on its own with `--bands b̂` as the reference.
#[test]
fn bands_auto_with_a_batch_chooses_the_least_error() {
    let setting = "--dataset-size 6000 --batch-size 100 --toeplitz --steps 500 --epsilon 4 \
                   --delta 1e-5";
    let rmse = |bands: &str| {
        let report = mfc_json(&args(
            &format!("compile {setting} --bands {bands} --out {{}} --json"),
            &[&temp(&format!("auto-{bands}.mfc"))],
        ));
        (
            report["bands"].as_u64().unwrap(),
            report["privacy"]["rmse_per_step"].as_f64().unwrap(),
            report["sampling"]["sampling_prob"].as_f64().unwrap(),
        )
    };
    let (chosen, best, q) = rmse("auto");
    let mut least = f64::INFINITY;
    for b in [1, 2, 4, 8, 16, 32, 60] {
        let (bands, error, rate) = rmse(&b.to_string());
        assert_eq!(bands, b);
        assert_eq!(rate, 100.0 * b as f64 / 6000.0);
        least = least.min(error);
        if b == chosen {
            assert_eq!(error, best);
            assert_eq!(rate, q);
        }
    }
    assert_eq!(best, least, "chose b̂ = {chosen}");
    assert!(chosen > 1, "DP-SGD is not the best at ε = 4");
}

/// A reader that stops early (`mfc calibrate … | head -1`) closes the pipe before `mfc` writes:
/// the run ends quietly with exit code 0, not with a panic and its backtrace.
#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mfc"))
        .args(args(
            "calibrate --sampling-prob 0.01 --steps 2000 --epsilon 1 --delta 1e-5",
            &[],
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the accountant takes a while: the pipe is closed before it writes
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Issue 29's refusals: a rate outside (0, 1], bands above the steps, a sampling rate with a
/// form or schema it does not compose with, replace-one, `--bands auto`: each one line naming
/// the option.
#[test]
fn compile_with_sampling_refuses_what_it_does_not_compose_with() {
    let out = temp("amplified-refused.mfc");
    for (line, names) in [
        (
            "--sampling-prob 0 --bands 4",
            "0 is not a finite number in (0, 1]",
        ),
        (
            "--sampling-prob 1.5 --bands 4",
            "1.5 is not a finite number in (0, 1]",
        ),
        ("--sampling-prob 0.1 --bands 17", "--bands 17"),
        (
            "--sampling-prob 0.1",
            "--sampling-prob 0.1: needs --bands B",
        ),
        (
            "--sampling-prob 0.1 --bands auto",
            "--sampling-prob 0.1: needs --bands B",
        ),
        (
            "--sampling-prob 0.1 --bands 4 --form blt",
            "--sampling-prob 0.1: amplification by sampling needs a banded encoder: --form bandmf",
        ),
        (
            "--sampling-prob 0.1 --bands 4 --epochs 2 --min-sep 8",
            "--sampling-prob 0.1: excludes --epochs",
        ),
        (
            "--sampling-prob 0.1 --bands 4 --neighbouring replace-one",
            "--neighbouring replace-one",
        ),
    ] {
        let err = assert_refused(&args(
            &format!("compile --steps 16 {line} --epsilon 1 --delta 1e-5 --out {{}}"),
            &[&out],
        ));
        assert!(err.contains(names), "{line}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{line}: {err}");
    }
}

#[test]
fn issue_31_fixed_epoch_order_is_certified_to_the_requested_gap() {
    // The fixed-epoch optimizer is Newton's method on the dual: the --gap asked for is the gap
    // certified (it was clamped to 1e-4, from when the method was first order, and stopped at
    // 8e-5 while the progress line said "target 1e-6").
    let out = temp("issue31-gap.mfc");
    let report = mfc_json(&args(
        "compile --steps 512 --epochs 4 --every 128 --band 4 --rank 4 --refine 0 --gap 1e-6 \
         --out {} --json",
        &[&out],
    ));
    let gap = report["duality_gap"].as_f64().unwrap();
    assert!(gap > 0.0 && gap <= 1e-6, "{gap}");
}

#[test]
fn compile_momentum_with_cooldown_for_multiple_epochs() {
    let out = temp("momentum.mfc");
    let report = mfc_json(&args(
        "compile --workload momentum:0.95 --cooldown 16:0.05 --steps 64 --epochs 4 --every 16 \
         --band 4 --rank 3 --out {} --json",
        &[&out],
    ));
    let fixed =
        "fixed epoch order (k, b) = (4, 16): each record in at most 4 steps, exactly 16 apart";
    assert_eq!(report["participation"], fixed);
    assert_eq!(report["step_stddev"].as_array().unwrap().len(), 64);
    assert!(report["duality_gap"].as_f64().unwrap() <= 1e-6);
    let inspected = mfc_json(&args("inspect {} --json", &[&out]));
    assert_eq!(inspected["participation"], fixed);
    assert_eq!(inspected["sensitivity"], report["sensitivity"]);

    // A cooldown without momentum, an unparsable β, a lone --epochs, a lone separation and
    // both separations at once are refused with code 2, naming the option.
    for (bad, named) in [
        ("--workload prefix --cooldown 4:0.1", "--cooldown"),
        ("--workload momentum:fast", "momentum"),
        ("--workload prefix --epochs 2", "--epochs 2"),
        ("--workload prefix --min-sep 4", "--min-sep 4"),
        ("--workload prefix --every 4", "--every 4"),
        (
            "--workload prefix --epochs 2 --min-sep 4 --every 4",
            "--min-sep",
        ),
        (
            "--workload prefix --epochs 2 --min-sep 0",
            "'0' for '--min-sep <B>': 0 is not in 1..=",
        ),
        (
            "--workload prefix --neighbouring swap-one",
            "'swap-one' for '--neighbouring <RELATION>': expected `add-remove` or `replace-one`",
        ),
    ] {
        let err = assert_refused(&args(
            &["compile --steps 32 --out {}", bad].join(" "),
            &[&out],
        ));
        assert!(err.contains(named), "{bad}: {err}");
    }
}

/// Issue 15: `--min-sep b` is b-min-separation as the field names it (participations AT LEAST b
/// apart); the blob, the report and `inspect` say so, and the relation is stated next to (ε, δ).
#[test]
fn min_sep_means_at_least_b_apart() {
    let out = temp("min-sep.mfc");
    let report = mfc_json(&args(
        "compile --steps 48 --epochs 2 --min-sep 12 --band 4 --rank 2 --epsilon 2 --delta 1e-6 \
         --neighbouring replace-one --out {} --json",
        &[&out],
    ));
    let schema = "min-separation (k, b) = (2, 12): each record in at most 2 steps, any two at least 12 apart";
    assert_eq!(report["participation"], schema);
    assert_eq!(report["neighbouring"], "replace-one");
    let inspected = mfc_json(&args("inspect {} --json", &[&out]));
    assert_eq!(inspected["participation"], schema);
    assert_eq!(inspected["neighbouring"], "replace-one");
    assert_eq!(inspected["sensitivity"], report["sensitivity"]);
    // Replace-one records twice the encoder's sensitivity, which compiles to about 1.
    let s = inspected["sensitivity"].as_f64().unwrap();
    assert!((s - 2.0).abs() < 1e-3, "{s}");
    let text = stdout(&mfc(&args("inspect {}", &[&out])));
    assert!(
        text.contains("(ε, δ) = (2, 1e-6), replace-one neighbours"),
        "{text}"
    );
    assert!(text.contains("any two at least 12 apart"), "{text}");
}

#[test]
fn compile_blt_and_fft_forms_and_inspect_them() {
    let out = temp("blt.mfc");
    let report = mfc_json(&args(
        "compile --form blt --buffers 3 --steps 128 --horizon 5000 --epsilon 2 --delta 1e-6 \
         --out {} --json",
        &[&out],
    ));
    assert_eq!(report["horizon"], 5000);
    assert_eq!(report["runtime_floats_per_coordinate"], 5);
    let inspected = mfc_json(&args("inspect {} --json", &[&out]));
    assert_eq!(inspected["decoder"], "blt");
    assert_eq!(inspected["steps"], 5000);
    assert_eq!(inspected["sensitivity"], report["sensitivity"]);
    // The blob's error figures cover its 5000 steps, not the 128 it was optimized for.
    let design_max = report["step_stddev"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .fold(0.0, f64::max);
    let horizon_max = report["horizon_max_step_stddev"].as_f64().unwrap();
    assert_eq!(
        inspected["max_step_stddev"],
        report["horizon_max_step_stddev"]
    );
    assert_eq!(inspected["sqrt_loss"], report["horizon_sqrt_loss"]);
    assert!(
        horizon_max > 2.0 * design_max,
        "{horizon_max} vs {design_max}"
    );
    // The privacy statement's error figures are the horizon's too: its per-step maximum and the
    // calibration's RMSE and largest stddev (σ·ζ·…) cover all 5000 steps.
    assert_eq!(report["max_step_stddev"], report["horizon_max_step_stddev"]);
    assert_eq!(report["sqrt_loss"], report["horizon_sqrt_loss"]);
    assert_eq!(report["error_steps"], 5000);
    let sigma = report["noise_multiplier"].as_f64().unwrap();
    let privacy = &report["privacy"];
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
    assert!(close(
        privacy["max_stddev_per_step"].as_f64().unwrap(),
        sigma * horizon_max
    ));
    assert!(close(
        privacy["rmse_per_step"].as_f64().unwrap(),
        sigma * report["horizon_sqrt_loss"].as_f64().unwrap() / 5000f64.sqrt()
    ));
    // The FFT form, stamped.
    let fft = temp("fft.mfc");
    mfc_ok(&args(
        "compile --form fft-optimal --steps 64 --stamps 2 --out {} --json",
        &[&fft],
    ));
    let inspected = mfc_json(&args("inspect {} --json", &[&fft]));
    assert_eq!(inspected["decoder"], "fft");
    assert_eq!(inspected["sensitivity_method"], "GeneratorResidualBound");
    // BLT releases prefix sums only; an unknown form is refused.
    for bad in ["--form blt --workload momentum:0.9", "--form dense"] {
        assert_refused(&args(
            &["compile --steps 32 --out {}", bad].join(" "),
            &[&out],
        ));
    }
}

/// `--horizon unbounded`: the report's error figures cover the design steps only and say so, with
/// the table of how the per-step error grows; `inspect` says the same of the blob, and that the
/// device verifies it.
#[test]
fn compile_an_unbounded_blt_and_inspect_it() {
    let out = temp("unbounded.mfc");
    let text = stdout(&mfc(&args(
        "compile --form blt --buffers 3 --steps 48 --horizon unbounded --epsilon 2 --delta 1e-6 \
         --out {}",
        &[&out],
    )));
    assert!(
        text.contains("(units of σ·ζ, over the 48 design steps only)"),
        "{text}"
    );
    assert!(text.contains("stddev of release t"), "{text}");
    let json = mfc_json(&args(
        "compile --form blt --buffers 3 --steps 48 --horizon unbounded --out {} --json",
        &[&out],
    ));
    assert_eq!(json["horizon"], "unbounded");
    assert_eq!(json["error_scope"], "over the 48 design steps only");
    let inspected = stdout(&mfc(&args("inspect {}", &[&out])));
    assert!(
        inspected.contains("over the n = 48 design steps only"),
        "{inspected}"
    );
    // The device's verification recomputes the bound for every horizon (issue 20), and counts
    // the operations it spent.
    let verification = &mfc_json(&args("inspect {} --json", &[&out]))["verification"];
    assert_eq!(verification["verdict"], "verified", "{verification}");
    assert_eq!(verification["recorded"], verification["bound"]);
    assert!(verification["operations"].as_u64().unwrap() > 0);
}

/// `--form bandmf`: both kinds, `--bands N|auto`, the prefix sum and momentum; `inspect` shows
/// the form; `simulate` replays it; out-of-range bands are refused naming the option, the value
/// and the allowed range.
#[test]
fn compile_bandmf_forms_and_inspect_them() {
    let toeplitz = temp("bandmf-toeplitz.mfc");
    let report = mfc_json(&args(
        "compile --form bandmf --toeplitz --bands auto --max-bands 16 --steps 96 --epochs 3 \
         --min-sep 32 --epsilon 2 --delta 1e-6 --out {} --json",
        &[&toeplitz],
    ));
    assert_eq!(report["kind"], "banded Toeplitz");
    assert_eq!(report["sensitivity_exact"], true);
    let method = report["sensitivity_method"].as_str().unwrap();
    assert!(method.contains("orthogonal"), "{method}");
    let tried: Vec<u64> = report["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[0].as_u64().unwrap())
        .collect();
    assert_eq!(tried, [1, 2, 4, 8, 16]);
    let bands = report["bands"].as_u64().unwrap();
    assert_eq!(report["runtime_floats_per_coordinate"], bands + 2);
    let inspected = mfc_json(&args("inspect {} --json", &[&toeplitz]));
    assert_eq!(inspected["decoder"], "bandmf");
    assert_eq!(inspected["table_bytes"], 4 * bands);
    assert_eq!(inspected["sensitivity"], report["sensitivity"]);
    assert_eq!(inspected["sensitivity_exact"], true);
    // General, for momentum: n × b̂ coefficients, and the stream keeps no running sum.
    let general = temp("bandmf-general.mfc");
    let report = mfc_json(&args(
        "compile --form bandmf --bands 4 --workload momentum:0.9 --cooldown 16:0.1 --steps 64 \
         --noise-multiplier 1 --out {} --json",
        &[&general],
    ));
    assert_eq!(report["kind"], "general banded");
    assert_eq!(report["runtime_floats_per_coordinate"], 4);
    assert!(
        report["sqrt_loss"].as_f64().unwrap()
            <= report["toeplitz_sqrt_loss"].as_f64().unwrap() * (1.0 + 1e-6)
    );
    let inspected = mfc_json(&args("inspect {} --json", &[&general]));
    assert_eq!(inspected["table_bytes"], 4 * 64 * 4);
    let input = temp("bandmf-inputs.csv");
    std::fs::write(&input, "1,0\n0,2\n0.5,0.5\n").unwrap();
    let out = temp("bandmf-released.csv");
    mfc_ok(&args(
        "simulate {} --input {} --out {} --seed {}",
        &[&general, &input, &out, &"0f".repeat(32)],
    ));
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 3);
    // Refusals name the option, the value and the range.
    for (bad, said) in [
        (
            "--bands 33 --epochs 2 --min-sep 32",
            "--bands 33: b̂ must be in 1..=32",
        ),
        (
            "--bands 0",
            "'0' for '--bands <N|auto>': expected a number of bands b̂ ≥ 1",
        ),
        ("--bands 65", "--bands 65: b̂ must be in 1..=64"),
        (
            "--bands many",
            "'many' for '--bands <N|auto>': expected a number",
        ),
        (
            "--bands auto --max-bands 0",
            "'0' for '--max-bands <MAX_BANDS>': 0 is not in 1..=",
        ),
    ] {
        let err = assert_refused(&args(
            &["compile --form bandmf --steps 64 --out {}", bad].join(" "),
            &[&general],
        ));
        assert!(err.contains(said), "{bad}: {err}");
    }
    let err = assert_refused(&args("compile --steps 64 --bands 4 --out {}", &[&general]));
    assert!(
        err.contains("--bands 4: applies to --form bandmf only; the form is `banded`"),
        "{err}"
    );
    // The general optimizer's memory is linear in n, but at a billion steps it does not fit:
    // refused before any work, with the estimate, naming the way out.
    let err = assert_refused(&args(
        "compile --form bandmf --bands 4 --steps 1000000000 --out {}",
        &[&general],
    ));
    assert!(
        err.contains("--steps 1000000000")
            && err.contains("GB of memory")
            && err.contains("--toeplitz"),
        "{err}"
    );
    // A banded Toeplitz encoder for a scheduled workload is O(n²) per evaluation: refused at
    // beyond its limit, naming the option, the value and the range.
    let err = assert_refused(&args(
        "compile --form bandmf --toeplitz --bands 4 --workload momentum:0.9 --cooldown 1000:0.1 --steps 1000000 --out {}",
        &[&general],
    ));
    assert!(
        err.contains("--steps 1000000")
            && err.contains("--cooldown")
            && err.contains("up to 65536 steps"),
        "{err}"
    );
}

#[test]
fn simulate_streams_inputs_like_the_runtime() {
    let blob = temp("simulate.mfc");
    mfc_ok(&args(
        "compile --steps 12 --band 3 --rank 2 --noise-multiplier 1.5 --out {}",
        &[&blob],
    ));
    let input = temp("inputs.csv");
    let rows: Vec<[f32; 2]> = (0..10).map(|i| [i as f32 * 0.25, 3.0 - i as f32]).collect();
    let csv: String = rows
        .iter()
        .map(|r| format!("{},{}\n", r[0], r[1]))
        .collect();
    std::fs::write(&input, csv).unwrap();
    let seed = "0f".repeat(32);
    let (csv_out, npy_out) = (temp("released.csv"), temp("released.npy"));
    for out in [&csv_out, &npy_out] {
        mfc_ok(&args(
            "simulate {} --input {} --out {} --seed {}",
            &[&blob, &input, out, &seed],
        ));
    }
    // The same stream in process, with the same seed.
    let bytes = std::fs::read(&blob).unwrap();
    let m = mfc_formats::Mechanism::from_bytes(&bytes).unwrap();
    let len = mfc_runtime::Stream::<mfc_runtime::ChaChaNoise>::workspace_len(&m, 2).unwrap();
    let mut ws = vec![0.0f32; len];
    let noise = mfc_runtime::ChaChaNoise::from_seed([0x0f; 32]).unwrap();
    let mut stream = mfc_runtime::Stream::new(m, 2, &mut ws, noise).unwrap();
    let written = std::fs::read_to_string(&csv_out).unwrap();
    let npy = mfc_compiler::workload::read_npy_matrix(&npy_out).unwrap();
    assert_eq!((npy.nrows(), npy.ncols()), (10, 2));
    for (i, (line, x)) in written.lines().zip(&rows).enumerate() {
        let mut y = [0.0f32; 2];
        stream.step(x, &mut y).unwrap();
        let got: Vec<f32> = line.split(',').map(|v| v.parse().unwrap()).collect();
        assert_eq!(got, y, "step {i}");
        assert_eq!([npy[(i, 0)] as f32, npy[(i, 1)] as f32], y);
    }
    // A malformed input and a short seed are refused with code 2.
    std::fs::write(&input, "1,2\n3,x\n").unwrap();
    let simulate = "simulate {} --input {} --out {}";
    assert_refused(&args(simulate, &[&blob, &input, &csv_out]));
    assert_refused(&args(
        &[simulate, "--seed abc"].join(" "),
        &[&blob, &input, &csv_out],
    ));
}

/// Issue 16: a `--seed` of 64 bytes that are not 64 ASCII characters (32 two-byte `é`) made
/// `mfc simulate` panic (exit 101) slicing inside a character; it is refused with exit 2 and a
/// message naming the option, like any other seed that is not 64 hexadecimal digits.
#[test]
fn simulate_refuses_a_non_ascii_seed() {
    let blob = temp("seed.mfc");
    mfc_ok(&args(
        "compile --steps 4 --band 1 --rank 0 --noise-multiplier 1 --out {}",
        &[&blob],
    ));
    let input = temp("seed-inputs.csv");
    std::fs::write(&input, "1\n2\n").unwrap();
    let out = temp("seed-out.csv");
    for seed in [
        "é".repeat(32),
        "0g".repeat(32),
        "ab".repeat(33),
        "€".repeat(21) + "0",
    ] {
        assert!(seed.len() >= 64, "{seed}");
        let err = assert_refused(&args(
            "simulate {} --input {} --out {} --seed {}",
            &[&blob, &input, &out, &seed],
        ));
        assert!(
            err.contains("--seed") && err.contains("64 hexadecimal digits"),
            "{err}"
        );
    }
}

/// `inspect --export` writes the tables as .npy; rebuilding B̂ from them by the SPEC's formula
/// gives back the loss recorded in the header.
#[test]
fn inspect_exports_the_tables_for_numpy() {
    let blob = temp("export.mfc");
    mfc_ok(&args(
        "compile --steps 20 --band 3 --rank 2 --out {}",
        &[&blob],
    ));
    let dir = temp("export-dir");
    mfc_ok(&args("inspect {} --export {}", &[&blob, &dir]));
    let read = |name: &str| mfc_compiler::workload::read_npy_matrix(dir.join(name)).unwrap();
    let (d, l, r) = (read("diagonals.npy"), read("left.npy"), read("right.npy"));
    assert_eq!((d.nrows(), d.ncols(), l.ncols(), r.ncols()), (20, 3, 2, 2));
    let header: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("header.json")).unwrap()).unwrap();
    // B̂[i, j] = D[i, i−j] for i − j < h, (L Rᵀ)[i, j] below the band.
    let mut frobenius = 0.0;
    for i in 0..20 {
        for j in 0..=i {
            let b = if i - j < 3 {
                d[(i, i - j)]
            } else {
                (0..2).map(|q| l[(i, q)] * r[(j, q)]).sum()
            };
            frobenius += b * b;
        }
    }
    let sens = header["sensitivity"].as_f64().unwrap();
    let sqrt_loss = header["sqrt_loss"].as_f64().unwrap();
    assert!((sens * frobenius.sqrt() - sqrt_loss).abs() <= 1e-6 * sqrt_loss);
}

#[test]
fn compare_prints_every_family_and_refuses_an_empty_horizon() {
    let report = mfc_json(&args(
        "compare --steps 32 --band 3 --rank 2 --max-buffers 2 --json",
        &[],
    ));
    assert_eq!(report["neighbouring"], "add-remove");
    assert!(
        report["participation"]
            .as_str()
            .unwrap()
            .starts_with("single")
    );
    let names: Vec<&str> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mechanism"].as_str().unwrap())
        .collect();
    for family in [
        "optimal",
        "banded + low rank",
        "BLT, 2",
        "FFT",
        "BandMF, banded Toeplitz",
        "BandMF, general banded",
        "square root",
        "Honaker online",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(family)),
            "{family} missing: {names:?}"
        );
    }
    assert_refused(&args("compare --steps 0", &[]));
}

#[test]
fn plot_writes_svg_figures() {
    let errors = temp("errors.svg");
    mfc_ok(&args("plot --steps 48 --out {}", &[&errors]));
    let svg = std::fs::read_to_string(&errors).unwrap();
    assert!(svg.starts_with("<svg"));
    // One curve per family drawn, each with its label.
    for label in ["optimal", "BLT, 4 buffers", "square root", "Honaker online"] {
        assert!(svg.contains(label), "{label} missing");
    }
    assert!(svg.matches("<polyline").count() >= 6);
    let heat = temp("heat.svg");
    mfc_ok(&args("plot --kind heatmap --steps 16 --out {}", &[&heat]));
    // 2 panels of 16 × 16 cells.
    assert!(
        std::fs::read_to_string(&heat)
            .unwrap()
            .matches("<rect")
            .count()
            >= 2 * 256
    );
    // An unknown kind and a heatmap of more than 512 steps are refused.
    for bad in ["--steps 16 --kind pie", "--kind heatmap --steps 600"] {
        assert_refused(&args(&["plot --out {}", bad].join(" "), &[&heat]));
    }
}
