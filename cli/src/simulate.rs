//! `mfc simulate`: streams a matrix of inputs (CSV or `.npy`, one row per step) through a blob
//! on the host, with the same runtime a device runs, and writes the released rows.

use std::path::{Path, PathBuf};

use mfc_compiler::Error;
use mfc_runtime::{ChaChaNoise, Replay};
use npyz::WriterBuilder;

/// Stream inputs through a blob on the host and write the private releases.
#[derive(clap::Args)]
pub struct Args {
    /// The .mfc blob.
    #[arg(value_parser = crate::options::in_path)]
    blob: PathBuf,
    /// Inputs, one row of d values per step: a .npy (float32/float64, 2-D) or a CSV file.
    #[arg(long, value_parser = crate::options::in_path)]
    input: PathBuf,
    /// Where to write the releases (same shape): .npy (float32) or CSV.
    #[arg(long, value_parser = crate::options::out_path)]
    out: PathBuf,
    /// A 64-hex-digit noise seed, for reproducible simulations only: whoever knows it knows the
    /// noise. Without it the seed comes from the operating system.
    #[arg(long)]
    seed: Option<String>,
    /// The public key (from `mfc keygen`) a signed blob's signature must verify under.
    #[arg(long, value_parser = crate::options::in_path)]
    public_key: Option<PathBuf>,
    /// Stream a blob whose recorded sensitivity cannot be verified (refused by default, as a
    /// device refusing unverifiable blobs refuses it): its (ε, δ) then rests on the compiler's
    /// word. A sensitivity below what the coefficients certify is refused even so.
    #[arg(long)]
    allow_unverified: bool,
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("{}: {e}", path.display()),
    ))
}

/// The input rows.
fn read_rows(path: &Path) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error>> {
    if path.extension().is_some_and(|e| e == "npy") {
        let m = mfc_compiler::workload::read_npy_matrix(path)?;
        return Ok((0..m.nrows())
            .map(|i| (0..m.ncols()).map(|j| m[(i, j)] as f32).collect())
            .collect());
    }
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, line)| {
            line.split(',')
                .map(|v| {
                    v.trim().parse::<f32>().map_err(|_| {
                        crate::options::Refusal(format!(
                            "{}:{}: `{}` is not a number",
                            path.display(),
                            n + 1,
                            v.trim()
                        ))
                        .into()
                    })
                })
                .collect()
        })
        .collect()
}

fn write_rows(path: &Path, rows: &[Vec<f32>], dim: usize) -> Result<(), Error> {
    if path.extension().is_some_and(|e| e == "npy") {
        let file = std::fs::File::create(path).map_err(|e| io_error(path, e))?;
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[rows.len() as u64, dim as u64])
            .writer(std::io::BufWriter::new(file))
            .begin_nd()
            .map_err(|e| io_error(path, e))?;
        writer
            .extend(rows.iter().flatten().copied())
            .map_err(|e| io_error(path, e))?;
        return writer.finish().map_err(|e| io_error(path, e));
    }
    let text: String = rows
        .iter()
        .map(|r| {
            let line: Vec<String> = r.iter().map(|x| x.to_string()).collect();
            line.join(",") + "\n"
        })
        .collect();
    std::fs::write(path, text).map_err(|e| io_error(path, e))
}

fn noise(seed: Option<&str>) -> Result<ChaChaNoise, Box<dyn std::error::Error>> {
    let Some(hex) = seed else {
        return Ok(ChaChaNoise::from_os_entropy()?);
    };
    // Checked as characters before any slicing: 64 bytes need not be 64 characters.
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(crate::options::Refusal(format!(
            "--seed must be 64 hexadecimal digits (0-9, a-f, A-F), got `{hex}` ({} characters)",
            hex.chars().count()
        ))
        .into());
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let digit = |b: u8| char::from(b).to_digit(16).unwrap_or(0) as u8;
        *byte = digit(pair[0]) << 4 | digit(pair[1]);
    }
    if key == [0; 32] {
        return Err(crate::options::Refusal(format!(
            "--seed {hex}: the all-zero seed is refused (64 hexadecimal digits, not all 0)"
        ))
        .into());
    }
    Ok(ChaChaNoise::from_seed(key)?)
}

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::read(&args.blob).map_err(|e| io_error(&args.blob, e))?;
    let (m, _, _) = crate::sign::open(&bytes, &args.blob, args.public_key.as_deref())?;
    // The device's check and policy first (`mfc_compiler::privacy::verdict`): an understated sensitivity
    // is refused before any step, and so is one that cannot be verified unless the caller opted
    // in by name.
    let verification = mfc_compiler::privacy::verdict::check(&m);
    match verification.admit(&m, args.allow_unverified) {
        Err(mfc_runtime::Error::SensitivityUnverified) => {
            return Err(format!(
                "{}: refused: sensitivity {} (a device refusing unverifiable blobs refuses it; \
                 --allow-unverified streams it on the compiler's word)",
                args.blob.display(),
                verification.text
            )
            .into());
        }
        Err(e) => return Err(format!("{}: {e}", args.blob.display()).into()),
        Ok(()) if verification.is_unverifiable() => eprintln!(
            "mfc simulate: {}: sensitivity {}; streamed anyway (--allow-unverified): its (ε, δ) \
             rests on the compiler's word",
            args.blob.display(),
            verification.text
        ),
        Ok(()) => {}
    }
    let inputs = read_rows(&args.input)?;
    let dim = inputs.first().map_or(0, Vec::len);
    if inputs.is_empty() || inputs.iter().any(|r| r.len() != dim) {
        return Err(crate::options::Refusal(format!(
            "{}: expected a non-empty matrix with rows of equal length",
            args.input.display()
        ))
        .into());
    }
    // Refused whole before any step (the runtime would refuse the step, naming the coordinate
    // only): the row is the step, counted from 0 as the runtime counts steps.
    for (row, values) in inputs.iter().enumerate() {
        if let Some((column, value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(crate::options::Refusal(format!(
                "{}: row {row} (step {row}), coordinate {column} is {value}: inputs must be finite",
                args.input.display()
            ))
            .into());
        }
    }
    let noise = noise(args.seed.as_deref())?;
    let mut out = vec![vec![0.0f32; dim]; inputs.len()];
    // Prefix-sum blobs release A x + noise; other workloads release the noise only (the caller
    // adds its own A x from inputs it clipped), but for BandMF the noised inputs x + C⁻¹z.
    let mut ws = vec![0.0; Replay::workspace_len(&m, dim)?];
    let mut replay = Replay::open(m, dim, &mut ws, noise)?;
    let noise_only = !replay.releases_prefix_sums() && !matches!(replay, Replay::BandMf(_));
    // The whole input checked before the first step, so that nothing is streamed in vain: no
    // more rows than the blob's horizon, every row within the range the runtime clips exactly.
    let horizon = u64::from(replay.horizon());
    if inputs.len() as u64 > horizon {
        return Err(crate::options::Refusal(format!(
            "{}: {} rows, but the blob releases at most {horizon} steps",
            args.input.display(),
            inputs.len()
        ))
        .into());
    }
    if !noise_only {
        for (row, x) in inputs.iter().enumerate() {
            if let Err(e) = replay.check_input(x) {
                return Err(crate::options::Refusal(format!(
                    "{}: row {row} (step {row}): {e}",
                    args.input.display()
                ))
                .into());
            }
        }
    }
    for (x, y) in inputs.iter().zip(&mut out) {
        if noise_only {
            replay.step_noise(y)?;
        } else {
            replay.step(x, y)?;
        }
    }
    write_rows(&args.out, &out, dim)?;
    eprintln!(
        "{} steps of d = {dim} released -> {}",
        out.len(),
        args.out.display()
    );
    Ok(())
}
