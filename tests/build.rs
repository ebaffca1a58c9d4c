//! Sets the cfg `mfc_ci` when the tests are built with `CI=true` (as `.ci/run` runs): the
//! firmware comparisons (`tests/firmware.rs`) are then ordinary tests, which fail without the
//! QEMU logs, instead of ignored ones.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(mfc_ci)");
    println!("cargo::rerun-if-env-changed=CI");
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        println!("cargo::rustc-cfg=mfc_ci");
    }
}
