//! `mfc`: compile differentially private matrix-factorization mechanisms into `.mfc` blobs and
//! inspect them. Thin glue over the `mfc_compiler` library: one module per subcommand, results on
//! stdout, progress on stderr, errors once on stderr with exit code 2.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Results go to stdout through these two, which shadow the standard macros in every module of
/// the crate: a reader that stops early (`mfc inspect … | head -1`) closes the pipe, and the
/// standard ones then panic with a backtrace. Here the run ends quietly with exit code 0, as
/// a filter's does; any other write error still fails loudly.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

macro_rules! println {
    () => {
        $crate::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes `text` to stdout: a closed pipe ends the process with exit code 0.
fn write_stdout(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(text).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("mfc: cannot write to stdout: {e}");
            std::process::exit(2)
        }
    }
}

mod calibrate;
mod compare;
mod compile;
mod inspect;
mod options;
mod plot;
mod schema;
mod sign;
mod simulate;
mod status;

/// Differentially private continual release with correlated Gaussian noise.
#[derive(Parser)]
#[command(name = "mfc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Optimize, compress and calibrate a mechanism and write it as an .mfc blob.
    Compile(Box<compile::Args>),
    /// Print a blob's header, sizes and checksum status.
    Inspect(inspect::Args),
    /// Convert between (ε, δ) and the noise multiplier σ of a normalized mechanism.
    Calibrate(calibrate::Args),
    /// Compare mechanism families at equal privacy for one workload and schema (one table).
    Compare(compare::Args),
    /// Stream inputs (CSV or .npy) through a blob on the host and write the releases.
    Simulate(simulate::Args),
    /// Draw per-step error curves or factorization heatmaps (SVG).
    Plot(plot::Args),
    /// Make an Ed25519 key pair for signing blobs.
    Keygen(sign::KeygenArgs),
    /// Sign a blob (Ed25519, a detached trailer that devices check against the public key).
    Sign(sign::SignArgs),
}

/// The command line, or a refusal in one line (`mfc: invalid value '1000' for '--buffers
/// <BUFFERS>': 1000 is not in 1..=64`) instead of clap's several; `--help` and `--version` as
/// clap prints them.
fn parse() -> Result<Cli, Box<dyn std::error::Error>> {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            let text = e.to_string();
            let lines: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect();
            let line = lines.join(" ");
            Err(line.strip_prefix("error: ").unwrap_or(&line).into())
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    match parse()?.command {
        Command::Compile(args) => compile::run(*args),
        Command::Inspect(args) => inspect::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Keygen(args) => sign::keygen(args),
        Command::Sign(args) => sign::sign(args),
    }
}

/// The library's error in the CLI's words: an option refusal spelled `--min-sep 5: …`
/// ([`mfc_compiler::request::Spelling::Cli`]); anything else as the library says it.
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    use mfc_compiler::request::{OptionError, Spelling};
    if let Some(e) = err.downcast_ref::<OptionError>() {
        return format!("invalid option: {}", e.render(Spelling::Cli));
    }
    match err.downcast_ref::<mfc_compiler::Error>() {
        Some(mfc_compiler::Error::Option(e)) => {
            format!("invalid option: {}", e.render(Spelling::Cli))
        }
        _ => err.to_string(),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let mut message = format!("mfc: {}", describe(err.as_ref()));
            let mut source = err.source();
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}
