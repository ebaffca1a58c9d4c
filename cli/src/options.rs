//! Value parsers for the options of every subcommand: each refuses a value before any work is
//! done, with one line that names the value and the allowed range (clap adds the option's name:
//! `invalid value '1000' for '--buffers <BUFFERS>': 1000 is not in 1..=64`). Ranges that
//! depend on other options (a band at most the number of steps) are checked by the subcommand
//! before its first expensive call.

use mfc_compiler::max_error::Objective;
use mfc_compiler::request::{
    self, BandsChoice, FormKind, Horizon, MAX_BUFFERS, MAX_REFINE, OptionError, Spelling, Stamps,
};
use mfc_formats::Neighbouring;

/// The most steps a blob can hold (`header.steps` is a `u32`, `formats/SPEC.md`).
pub const MAX_STEPS: u64 = request::MAX_STEPS as u64;

/// A library parser's refusal as clap shows it (`invalid value 'X' for '--opt <OPT>': …`): what
/// is allowed, other options spelled as the CLI spells them.
fn library<T>(result: Result<T, OptionError>) -> Result<T, String> {
    result.map_err(|e| Spelling::Cli.spell(&e.expected))
}

/// `--neighbouring`: `add-remove` or `replace-one`.
pub fn neighbouring(text: &str) -> Result<Neighbouring, String> {
    library(request::parse_neighbouring(text))
}

/// `--form`: `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`.
pub fn form(text: &str) -> Result<FormKind, String> {
    library(FormKind::parse(text))
}

/// `--stamps`: a number or `auto`.
pub fn stamps(text: &str) -> Result<Stamps, String> {
    library(Stamps::parse(text))
}

/// `--bands`: a number of bands or `auto`.
pub fn bands(text: &str) -> Result<BandsChoice, String> {
    library(BandsChoice::parse(text))
}

/// An integer in `lo..=hi`.
fn integer_in(text: &str, lo: u64, hi: u64) -> Result<usize, String> {
    let value: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number in {lo}..={hi}"))?;
    if !(lo..=hi).contains(&value) {
        return Err(format!("{value} is not in {lo}..={hi}"));
    }
    usize::try_from(value).map_err(|_| format!("{value} does not fit this machine's usize"))
}

/// A finite number in the interval that `(lo, hi, lo_open, hi_open)` describes.
fn real_in(text: &str, lo: f64, hi: f64, lo_open: bool, hi_open: bool) -> Result<f64, String> {
    let range = format!(
        "{}{lo}, {hi}{}",
        if lo_open { "(" } else { "[" },
        if hi_open { ")" } else { "]" }
    );
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number in {range}"))?;
    let above = if lo_open { value > lo } else { value >= lo };
    let below = if hi_open { value < hi } else { value <= hi };
    if !(value.is_finite() && above && below) {
        return Err(format!("{} is not a finite number in {range}", text.trim()));
    }
    Ok(value)
}

/// `--steps`, `--horizon`: `1..=2³²−1` (the blob stores the horizon as a `u32`).
pub fn steps(text: &str) -> Result<usize, String> {
    integer_in(text, 1, MAX_STEPS)
}

/// `--horizon`: a number of steps (`1..=2³²−1`; at least `--steps`, checked with it) or
/// `unbounded`.
pub fn horizon(text: &str) -> Result<Horizon, String> {
    if text == "unbounded" {
        return Ok(Horizon::Unbounded);
    }
    steps(text)
        .map(Horizon::Steps)
        .map_err(|e| format!("{e}, or `unbounded`"))
}

/// `--buffers`' range as a `u64` for [`integer_in`].
const BUFFERS: u64 = MAX_BUFFERS as u64;

/// `--buffers`: `1..=64`, the BLT buffers the format allows (`formats/SPEC.md`, decoder 2).
pub fn buffers(text: &str) -> Result<usize, String> {
    integer_in(text, 1, BUFFERS)
}

/// `--band`: `h ≥ 1` (at most `--steps`, checked with it).
pub fn band(text: &str) -> Result<usize, String> {
    integer_in(text, 1, MAX_STEPS)
}

/// `--rank`: `r ≥ 0` (at most `--steps`, checked with it).
pub fn rank(text: &str) -> Result<usize, String> {
    integer_in(text, 0, MAX_STEPS)
}

/// `--max-bands`: `1..=2³²−1`.
pub fn max_bands(text: &str) -> Result<usize, String> {
    integer_in(text, 1, MAX_STEPS)
}

/// `--refine`: `0..=1 000 000` iterations ([`MAX_REFINE`]).
pub fn refine(text: &str) -> Result<usize, String> {
    integer_in(text, 0, MAX_REFINE as u64)
}

/// `--epochs`, `--min-sep`, `--every`: `1..=2³²−1` (the blob stores them as `u32`).
pub fn count(text: &str) -> Result<usize, String> {
    integer_in(text, 1, MAX_STEPS)
}

/// `--objective`: `total` or `max`.
pub fn objective(text: &str) -> Result<Objective, String> {
    Objective::parse(text).map_err(|e| e.expected)
}

/// `--gap`: a relative duality gap in `(0, 1)`.
pub fn gap(text: &str) -> Result<f64, String> {
    real_in(text, 0.0, 1.0, true, true)
}

/// `--clip-norm`: `ζ` in `[2⁻⁶⁴, 2⁶⁴]`, where the runtime's clipping is proven exact
/// (`mfc_runtime::clip`; the runtime refuses other values with `UnsupportedClipNorm`).
pub fn clip_norm(text: &str) -> Result<f64, String> {
    let value: f64 = text.trim().parse().map_err(|_| {
        format!(
            "`{text}` is not a number in [2^-64, 2^64] (the clip norms the runtime clips exactly)"
        )
    })?;
    let (lo, hi) = (2f64.powi(-64), 2f64.powi(64));
    if !(lo..=hi).contains(&value) {
        return Err(format!(
            "{} is not in [2^-64, 2^64] (the clip norms the runtime clips exactly)",
            text.trim()
        ));
    }
    Ok(value)
}

/// `--epsilon`: `ε` in `(0, 1000]`.
pub fn epsilon(text: &str) -> Result<f64, String> {
    real_in(text, 0.0, 1000.0, true, false)
}

/// `--delta`: `δ` in `(0, 1)`.
pub fn delta(text: &str) -> Result<f64, String> {
    real_in(text, 0.0, 1.0, true, true)
}

/// `--sampling-prob`: the Poisson sampling probability `q` in `(0, 1]`.
pub fn sampling_prob(text: &str) -> Result<f64, String> {
    real_in(text, 0.0, 1.0, true, false)
}

/// `--batch-size`: an expected batch size `B` in `(0, 10¹⁵]`.
pub fn batch_size(text: &str) -> Result<f64, String> {
    real_in(text, 0.0, 1e15, true, false)
}

/// `--noise-multiplier`: `σ` in `(0, 10⁶]`.
pub fn noise_multiplier(text: &str) -> Result<f64, String> {
    real_in(text, 0.0, 1e6, true, false)
}

/// An output file: a non-empty path whose folder exists, so a long compile never ends in an
/// unwritable `--out`.
pub fn out_path(text: &str) -> Result<std::path::PathBuf, String> {
    if text.is_empty() {
        return Err("the path is empty (expected a file in an existing folder)".into());
    }
    let path = std::path::PathBuf::from(text);
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if !folder.is_dir() {
        return Err(format!(
            "{text}: the folder {} does not exist (expected a file in an existing folder)",
            folder.display()
        ));
    }
    if path.is_dir() {
        return Err(format!("{text} is a folder (expected a file path)"));
    }
    Ok(path)
}

/// An input file: a path to an existing, readable file.
pub fn in_path(text: &str) -> Result<std::path::PathBuf, String> {
    if text.is_empty() {
        return Err("the path is empty (expected an existing file)".into());
    }
    let path = std::path::PathBuf::from(text);
    match std::fs::File::open(&path) {
        Ok(_) if path.is_dir() => Err(format!("{text} is a folder (expected a file)")),
        Ok(_) => Ok(path),
        Err(e) => Err(format!("{e} (expected an existing, readable file)")),
    }
}

/// A refusal of the command line's own (an option or input the library does not see), printed
/// once as `mfc: invalid option: …` like the library's.
#[derive(Debug)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid option: {}", self.0)
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_value_and_the_interval() {
        assert_eq!(buffers("1000").unwrap_err(), "1000 is not in 1..=64");
        assert_eq!(buffers("64").unwrap(), 64);
        assert!(buffers("-1").unwrap_err().contains("1..=64"));
        assert!(gap("nan").unwrap_err().contains("(0, 1)"));
        assert!(gap("inf").unwrap_err().contains("(0, 1)"));
        assert!(clip_norm("0").unwrap_err().contains("[2^-64, 2^64]"));
        assert_eq!(clip_norm("1.5").unwrap(), 1.5);
        assert!(delta("1").unwrap_err().contains("(0, 1)"));
    }
}
