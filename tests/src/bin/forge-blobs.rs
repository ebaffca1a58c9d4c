//! Writes the forged-blob suite of issue 27 (`mfc_tests::forge`) into a directory, for the front
//! doors tested outside Rust (`.ci/python.sh`, `.ci/capi.sh`): `DIR/NAME.mfc` for each blob and
//! `DIR/index.tsv`, one line per blob: `NAME<TAB>EXPECTED<TAB>ROUTE`, `EXPECTED` one of
//! `verified`, `unverifiable`, `understated`.
//!
//! `cargo run --release -p mfc-tests --bin forge-blobs -- DIR`

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: forge-blobs DIR");
        return ExitCode::from(2);
    };
    let dir = std::path::PathBuf::from(dir);
    let run = || -> std::io::Result<usize> {
        std::fs::create_dir_all(&dir)?;
        let mut index = std::fs::File::create(dir.join("index.tsv"))?;
        let suite = mfc_tests::forge::forged_blobs();
        for f in &suite {
            std::fs::write(dir.join(format!("{}.mfc", f.name)), &f.bytes)?;
            writeln!(index, "{}\t{}\t{}", f.name, f.expected.as_str(), f.route)?;
        }
        Ok(suite.len())
    };
    match run() {
        Ok(n) => {
            eprintln!("{n} blobs -> {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("forge-blobs: {}: {e}", dir.display());
            ExitCode::from(2)
        }
    }
}
