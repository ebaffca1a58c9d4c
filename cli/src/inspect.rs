//! `mfc inspect`: a blob's header, sizes and checksum status.

use std::path::PathBuf;

use mfc_compiler::Error;
use mfc_compiler::report::{
    SamplingReport, method_description, neighbouring_name, privacy_unit, stored_schema,
};
use mfc_formats::{Decoder, Mechanism, SensitivityMethod, Workload};
use serde_json::json;

/// Print what a blob holds and the device's verification of its sensitivity; fails (exit 2) on
/// any malformed or corrupted blob, and on one whose recorded sensitivity is below the bound
/// recomputed from its coefficients.
#[derive(clap::Args)]
pub struct Args {
    /// The .mfc blob.
    #[arg(value_parser = crate::options::in_path)]
    blob: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The public key (from `mfc keygen`) a signed blob's signature must verify under.
    #[arg(long, value_parser = crate::options::in_path)]
    public_key: Option<PathBuf>,
    /// Also write the report as `header.json` and every decoder table as a float32 `.npy` file
    /// (shapes as in formats/SPEC.md: `diagonals` n×h, `left`/`right` n×r; `theta`, `omega`;
    /// `kernel`, `generator`) into this directory, e.g. for `numpy.load`.
    #[arg(long)]
    export: Option<PathBuf>,
}

/// Writes `values` as a float32 `.npy` array of `shape` (row-major).
fn write_npy(
    path: &std::path::Path,
    shape: &[u64],
    values: mfc_formats::F32Table<'_>,
) -> Result<(), Error> {
    use npyz::WriterBuilder;
    let io = |e: std::io::Error| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .map_err(io)?;
    writer.extend(values.iter()).map_err(io)?;
    writer.finish().map_err(io)
}

/// The decoder's tables with their shapes, for `--export`.
fn tables<'a>(m: &Mechanism<'a>) -> Vec<(&'static str, Vec<u64>, mfc_formats::F32Table<'a>)> {
    let n = u64::from(m.header.steps);
    match m.decoder {
        Decoder::BandedLowRank(d) => vec![
            ("diagonals", vec![n, u64::from(d.band)], d.diagonals),
            ("left", vec![n, u64::from(d.rank)], d.left),
            ("right", vec![n, u64::from(d.rank)], d.right),
        ],
        Decoder::Blt(d) => vec![
            ("theta", vec![d.buffers() as u64], d.theta),
            ("omega", vec![d.buffers() as u64], d.omega),
        ],
        Decoder::Fft(d) => vec![
            ("kernel", vec![2 * u64::from(d.block)], d.kernel),
            (
                "generator",
                vec![(d.generator.as_bytes().len() / 4) as u64],
                d.generator,
            ),
        ],
        Decoder::BandMf(d) => match d.kind {
            mfc_formats::BandMfKind::General => {
                vec![("encoder", vec![n, u64::from(d.bands)], d.encoder)]
            }
            _ => vec![("encoder", vec![u64::from(d.bands)], d.encoder)],
        },
        _ => Vec::new(),
    }
}

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::read(&args.blob).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", args.blob.display()),
        ))
    })?;
    let (m, bytes, signature) = crate::sign::open(&bytes, &args.blob, args.public_key.as_deref())?;
    let h = &m.header;
    let checksum = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into()?);
    let workload = match h.workload {
        Workload::PrefixSum => "prefix sum".to_string(),
        Workload::Custom { label } => format!("custom ({label})"),
        _ => "unknown".to_string(),
    };
    let (participation, sampling) = stored_schema(&h.participation, h.steps)?;
    let neighbouring = neighbouring_name(h.neighbouring);
    let unit = privacy_unit(&participation, h.neighbouring, h.clip_norm);
    // (form, its parameters, table bytes, runtime floats per coordinate, (h, r) if banded).
    let (form, detail, table_bytes, ram, banded) = match m.decoder {
        Decoder::BandedLowRank(d) => (
            "banded+low-rank",
            format!("(h, r) = ({}, {})", d.band, d.rank),
            d.diagonals.as_bytes().len() + d.left.as_bytes().len() + d.right.as_bytes().len(),
            (d.band + d.rank + 2) as usize,
            Some((d.band, d.rank)),
        ),
        Decoder::Fft(d) => (
            "fft",
            format!(
                "{:?}, block m = {}, stamps s = {}",
                d.kind, d.block, d.stamps
            ),
            d.kernel.as_bytes().len() + d.generator.as_bytes().len(),
            d.block as usize + 3,
            None,
        ),
        Decoder::Blt(d) => (
            "blt",
            format!("{} buffers", d.buffers()),
            d.theta.as_bytes().len() + d.omega.as_bytes().len(),
            d.buffers() + 2,
            None,
        ),
        Decoder::BandMf(d) => (
            "bandmf",
            format!(
                "{} encoder, b̂ = {} bands; releases {}",
                match d.kind {
                    mfc_formats::BandMfKind::General => "general banded",
                    _ => "banded Toeplitz",
                },
                d.bands,
                if matches!(h.workload, Workload::PrefixSum) {
                    "S(x + C⁻¹z)"
                } else {
                    "x + C⁻¹z per step (the caller applies A)"
                }
            ),
            d.encoder.as_bytes().len(),
            d.bands() + 2 * usize::from(matches!(h.workload, Workload::PrefixSum)),
            None,
        ),
        _ => ("unknown", String::new(), 0, 0, None),
    };
    let verification = mfc_compiler::privacy::verdict::check(&m);
    // (ε, δ) derived from σ at the stored δ; a stored ε below it is refused (exit 2).
    let derived = h.calibration.map_or(Ok(None), |c| {
        mfc_compiler::report::derived_privacy(&c, sampling.as_ref())
    });
    let report = json!({
        "file": args.blob.display().to_string(),
        "format_version": mfc_formats::FORMAT_VERSION,
        "blob_bytes": bytes.len(),
        "checksum": format!("{checksum:#010x}"),
        "checksum_ok": true,
        "signature": signature,
        "generator": h.generator,
        "workload": workload,
        "steps": h.steps,
        "unbounded_horizon": h.sensitivity.method.covers_every_horizon(),
        "participation": participation,
        "sampling": sampling.as_ref().map(SamplingReport::new),
        "accounting": if sampling.is_some() { "privacy loss distributions (an upper bound on ε)" } else { "analytic Gaussian" },
        "neighbouring": neighbouring,
        "privacy_unit": unit,
        "sensitivity": h.sensitivity.value,
        "sensitivity_method": format!("{:?}", h.sensitivity.method),
        "sensitivity_exact": h.sensitivity.method.is_exact(),
        "verification": verification.json,
        "clip_norm": h.clip_norm,
        "noise_multiplier": h.calibration.map(|c| c.noise_multiplier),
        "epsilon": derived.as_ref().ok().and_then(|p| p.map(|(e, _)| e)),
        "delta": derived.as_ref().ok().and_then(|p| p.map(|(_, d)| d)),
        "stored_target": h.calibration.and_then(|c| c.target).map(|t| json!({"epsilon": t.epsilon, "delta": t.delta})),
        "privacy_claim": match &derived {
            Ok(_) => json!("holds"),
            Err(e) => json!(format!("REFUSED: {e}")),
        },
        "sqrt_loss": h.error.sqrt_loss,
        "optimal_sqrt_loss": h.error.optimal_sqrt_loss,
        "max_step_stddev": h.error.max_step_stddev,
        "final_step_stddev": h.error.final_step_stddev,
        "decoder": form,
        "decoder_parameters": detail,
        "band": banded.map(|(h, _)| h),
        "rank": banded.map(|(_, r)| r),
        "table_bytes": table_bytes,
        "runtime_floats_per_coordinate": ram,
    });
    if let Some(dir) = &args.export {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", dir.display()),
            ))
        })?;
        let header = dir.join("header.json");
        std::fs::write(&header, serde_json::to_string_pretty(&report)?).map_err(|e| {
            Error::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", header.display()),
            ))
        })?;
        for (name, shape, values) in tables(&m) {
            write_npy(&dir.join(format!("{name}.npy")), &shape, values)?;
        }
    }
    // A blob that fails verification is reported, then refused (exit 2).
    let refused = |e: mfc_runtime::Error| -> Box<dyn std::error::Error> {
        format!("{}: {e}", args.blob.display()).into()
    };
    let outcome = || -> Result<(), Box<dyn std::error::Error>> {
        if let Some(e) = verification.refusal {
            return Err(refused(e));
        }
        match &derived {
            Err(e) => Err(format!("{}: {e}", args.blob.display()).into()),
            Ok(_) => Ok(()),
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return outcome();
    }
    println!("file                {}", args.blob.display());
    println!(
        "format              version {}, {} bytes, CRC-32 {checksum:#010x} ok",
        mfc_formats::FORMAT_VERSION,
        bytes.len()
    );
    println!("signature           {signature}");
    println!("generator           {}", h.generator);
    println!("workload            {workload}, n = {}", h.steps);
    if h.sensitivity.method.covers_every_horizon() {
        println!(
            "horizon             unbounded: the sensitivity holds for every number of steps; n is the design horizon"
        );
    }
    println!("participation       {participation}");
    println!("neighbouring        {neighbouring}");
    println!(
        "sensitivity         {:.9} ({:?}; {}{})",
        h.sensitivity.value,
        h.sensitivity.method,
        method_description(h.sensitivity.method),
        if neighbouring == "replace-one" {
            "; doubled for replace-one"
        } else {
            ""
        }
    );
    println!("verification        {}", verification.text);
    println!("clip norm           {}", h.clip_norm);
    match (h.calibration, &derived) {
        (Some(c), Ok(Some((epsilon, delta)))) => println!(
            "noise multiplier    σ = {:.6} for (ε, δ) = ({}, {delta:e}), {neighbouring} neighbours (ε derived from σ at the stored δ{})",
            c.noise_multiplier,
            mfc_compiler::request::epsilon_text(*epsilon),
            match sampling {
                Some(_) => ", by the accountant: privacy loss distributions, an upper bound",
                None => ", analytic Gaussian",
            },
        ),
        (Some(c), Ok(None)) => println!("noise multiplier    σ = {:.6}", c.noise_multiplier),
        (Some(c), Err(e)) => println!(
            "noise multiplier    σ = {:.6}; REFUSED: {e}",
            c.noise_multiplier
        ),
        (None, _) => println!("noise multiplier    not calibrated"),
    }
    // An unbounded BLT records the error of its design steps: its stream has no last step.
    let scope = if h.sensitivity.method == SensitivityMethod::BltTailBound {
        format!(
            "over the n = {} design steps only (the stream runs on; `mfc compile` prints how the error grows)",
            h.steps
        )
    } else {
        format!("over all n = {} steps", h.steps)
    };
    print!(
        "error (σ = ζ = 1)   {scope}: sqrt(L) = {:.4}",
        h.error.sqrt_loss
    );
    if let Some(opt) = h.error.optimal_sqrt_loss {
        print!(" (optimum {opt:.4})");
    }
    println!(
        ", max step stddev {:.4}, last {:.4}",
        h.error.max_step_stddev, h.error.final_step_stddev
    );
    println!(
        "decoder             {form}, {detail}, {table_bytes} table bytes; runtime RAM {ram}·d floats"
    );
    println!("unit of privacy     {unit}");
    outcome()
}
