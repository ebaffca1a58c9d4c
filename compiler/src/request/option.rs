//! The words of a refusal: the options a request has ([`Opt`]), how each front end spells them
//! ([`Spelling`]), the refusal of one option ([`OptionError`]: the option, the value, what is
//! allowed), the ranges every front end checks, and how numbers read in refusals and reports
//! ([`number`], [`epsilon_text`]). A leaf: it imports nothing else of the crate, so the crate's
//! error type can carry an [`OptionError`] without a circle.

use std::fmt;

/// An option of a request, as every front end has it. [`Opt::name`] is its identifier, which
/// the CLI spells `--kebab-case` and Python as a keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opt {
    /// The workload `A`.
    Workload,
    /// The momentum workload's learning-rate cooldown.
    Cooldown,
    /// The horizon `n`.
    Steps,
    /// `k`, the most steps one record takes part in.
    Epochs,
    /// `b` of min-separation.
    MinSep,
    /// `b` of fixed epoch order.
    Every,
    /// The neighbouring relation.
    Neighbouring,
    /// The form that ships.
    Form,
    /// Stamps of an encoder for `n / s` steps.
    Stamps,
    /// BandMF: `b̂`.
    Bands,
    /// BandMF `auto`: the most bands tried.
    MaxBands,
    /// BandMF: a banded Toeplitz encoder.
    Toeplitz,
    /// BLT: buffers.
    Buffers,
    /// BLT: the horizon the sensitivity covers.
    Horizon,
    /// Banded form: `h`.
    Band,
    /// Banded form: `r`.
    Rank,
    /// Banded form: L-BFGS iterations of the shipped-loss refinement.
    Refine,
    /// Banded form: the relative duality gap certified.
    Gap,
    /// What the strategy is optimized for: the total squared error or the max error.
    Objective,
    /// `ζ`.
    ClipNorm,
    /// `ε` of the target.
    Epsilon,
    /// `δ` of the target.
    Delta,
    /// `σ` given instead of a target.
    NoiseMultiplier,
    /// Run a compile whose estimated memory exceeds what is available.
    Force,
    /// The Poisson sampling probability `q` of each step (the accountant).
    SamplingProb,
    /// The number of examples in the dataset (the accountant).
    DatasetSize,
    /// The expected batch size (the accountant).
    BatchSize,
    /// The grid interval of privacy losses (the accountant's discretization).
    Discretization,
    /// The probability the accountant may move to infinite loss by truncation.
    TailMass,
}

impl Opt {
    /// Every option, for the renderers' placeholders.
    pub const ALL: [Opt; 29] = [
        Opt::Workload,
        Opt::Cooldown,
        Opt::Steps,
        Opt::Epochs,
        Opt::MinSep,
        Opt::Every,
        Opt::Neighbouring,
        Opt::Form,
        Opt::Stamps,
        Opt::Bands,
        Opt::MaxBands,
        Opt::Toeplitz,
        Opt::Buffers,
        Opt::Horizon,
        Opt::Band,
        Opt::Rank,
        Opt::Refine,
        Opt::Gap,
        Opt::Objective,
        Opt::ClipNorm,
        Opt::Epsilon,
        Opt::Delta,
        Opt::NoiseMultiplier,
        Opt::Force,
        Opt::SamplingProb,
        Opt::DatasetSize,
        Opt::BatchSize,
        Opt::Discretization,
        Opt::TailMass,
    ];

    /// The option's identifier (`min_sep`).
    pub const fn name(self) -> &'static str {
        match self {
            Opt::Workload => "workload",
            Opt::Cooldown => "cooldown",
            Opt::Steps => "steps",
            Opt::Epochs => "epochs",
            Opt::MinSep => "min_sep",
            Opt::Every => "every",
            Opt::Neighbouring => "neighbouring",
            Opt::Form => "form",
            Opt::Stamps => "stamps",
            Opt::Bands => "bands",
            Opt::MaxBands => "max_bands",
            Opt::Toeplitz => "toeplitz",
            Opt::Buffers => "buffers",
            Opt::Horizon => "horizon",
            Opt::Band => "band",
            Opt::Rank => "rank",
            Opt::Refine => "refine",
            Opt::Gap => "gap",
            Opt::Objective => "objective",
            Opt::ClipNorm => "clip_norm",
            Opt::Epsilon => "epsilon",
            Opt::Delta => "delta",
            Opt::NoiseMultiplier => "noise_multiplier",
            Opt::Force => "force",
            Opt::SamplingProb => "sampling_prob",
            Opt::DatasetSize => "dataset_size",
            Opt::BatchSize => "batch_size",
            Opt::Discretization => "discretization",
            Opt::TailMass => "tail_mass",
        }
    }

    /// Whether the option is a switch (no value).
    pub const fn is_switch(self) -> bool {
        matches!(self, Opt::Toeplitz | Opt::Force)
    }
}

/// How a front end spells options in its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spelling {
    /// `--min-sep 5`, `--toeplitz`.
    Cli,
    /// `min_sep=5`, `toeplitz=True`, `form='blt'`.
    Python,
    /// `` `min_sep` = 5 ``: the library's own [`fmt::Display`].
    Neutral,
}

impl Spelling {
    /// The option's name alone (for placeholders): `--min-sep`, `min_sep`, `` `min_sep` ``.
    pub fn name(self, option: Opt) -> String {
        match self {
            Spelling::Cli => format!("--{}", option.name().replace('_', "-")),
            Spelling::Python => option.name().to_string(),
            Spelling::Neutral => format!("`{}`", option.name()),
        }
    }

    /// The option with a value: `--min-sep 5`, `min_sep=5`, `` `min_sep` = 5 ``.
    pub fn with_value(self, option: Opt, value: &str) -> String {
        let name = self.name(option);
        match self {
            Spelling::Cli if value.is_empty() => name,
            Spelling::Cli => format!("{name} {value}"),
            Spelling::Python if option.is_switch() => format!("{name}=True"),
            Spelling::Python if value.is_empty() => name,
            Spelling::Python if value.parse::<f64>().is_ok() => format!("{name}={value}"),
            // Python's repr of a str: single quotes, backslashes and quotes escaped.
            Spelling::Python => {
                format!(
                    "{name}='{}'",
                    value.replace('\\', "\\\\").replace('\'', "\\'")
                )
            }
            Spelling::Neutral if value.is_empty() => name,
            Spelling::Neutral => format!("{name} = {value}"),
        }
    }

    /// `text` with every placeholder `{name}` of an [`Opt`] spelled.
    pub fn spell(self, text: &str) -> String {
        let mut out = text.to_string();
        for option in Opt::ALL {
            let placeholder = format!("{{{}}}", option.name());
            if out.contains(&placeholder) {
                out = out.replace(&placeholder, &self.name(option));
            }
        }
        out
    }
}

/// A refused option: which one, the value given, and what is allowed (a text that may name other
/// options by placeholder, `{epochs}`).
#[derive(Debug, Clone, PartialEq)]
pub struct OptionError {
    /// The option refused.
    pub option: Opt,
    /// The value given, as typed (empty for a switch).
    pub value: String,
    /// What is allowed, or why the value cannot be: a range, a list, a combination.
    pub expected: String,
}

impl OptionError {
    /// A refusal of `option` = `value`.
    pub fn new(option: Opt, value: impl fmt::Display, expected: impl Into<String>) -> Self {
        Self {
            option,
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// One line in the front end's words: `--min-sep 5: needs --epochs K, …`.
    pub fn render(&self, spelling: Spelling) -> String {
        format!(
            "{}: {}",
            spelling.with_value(self.option, &self.value),
            spelling.spell(&self.expected)
        )
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(Spelling::Neutral))
    }
}

impl std::error::Error for OptionError {}

/// The most steps a blob holds (`header.steps` is a `u32`, `formats/SPEC.md`): the bound of
/// `steps`, `epochs`, `min_sep`, `every`, `band`, `rank`, `max_bands` and `horizon`.
pub const MAX_STEPS: usize = u32::MAX as usize;
/// The most L-BFGS iterations `refine` takes (each costs `O(n²(h + r))`).
pub const MAX_REFINE: usize = 1_000_000;
/// The most BLT buffers the format allows (`formats/SPEC.md`, decoder 2).
pub const MAX_BUFFERS: usize = mfc_formats::MAX_BLT_BUFFERS as usize;
/// The clip norms the runtime clips exactly, `[2⁻⁶⁴, 2⁶⁴]` (`mfc_runtime::clip`).
pub const CLIP_NORMS: (f64, f64) = (5.421_010_862_427_522e-20, 18_446_744_073_709_551_616.0);
/// The largest `ε` a target may name.
pub const MAX_EPSILON: f64 = 1000.0;
/// The largest `σ` a request may give.
pub const MAX_NOISE_MULTIPLIER: f64 = 1e6;

/// A number as a refusal shows it: plain for ordinary magnitudes (`0.5`, `1000`), in scientific
/// notation below `10⁻³` and from `10⁷` on (`1e-6` as typed, not `0.000001`; `1e-300`, not three
/// hundred zeros).
pub fn number(x: f64) -> String {
    let magnitude = x.abs();
    if x.is_finite() && x != 0.0 && !(1e-3..1e7).contains(&magnitude) {
        format!("{x:e}")
    } else {
        x.to_string()
    }
}

/// `value` in `lo..=hi`, or the refusal of `option`.
pub fn integer_in(option: Opt, value: usize, lo: usize, hi: usize) -> Result<usize, OptionError> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(OptionError::new(
            option,
            value,
            format!("expected an integer in {lo}..={hi}"),
        ))
    }
}

/// `value` finite in the interval `(lo, hi)` with the ends open or closed as given, or the
/// refusal of `option` naming the interval.
pub fn real_in(
    option: Opt,
    value: f64,
    (lo, lo_open): (f64, bool),
    (hi, hi_open): (f64, bool),
) -> Result<f64, OptionError> {
    let above = if lo_open { value > lo } else { value >= lo };
    let below = if hi_open { value < hi } else { value <= hi };
    if value.is_finite() && above && below {
        return Ok(value);
    }
    let interval = format!(
        "{}{lo}, {hi}{}",
        if lo_open { "(" } else { "[" },
        if hi_open { ")" } else { "]" }
    );
    Err(OptionError::new(
        option,
        number(value),
        format!("expected a finite number in {interval}"),
    ))
}

/// `ε` for a report: rounded **up** to six decimals, without trailing zeros (`2` for the
/// `1.999999999…` of a `σ` calibrated for `ε = 2` and rounded up).
pub fn epsilon_text(epsilon: f64) -> String {
    format!("{}", (epsilon * 1e6).ceil() / 1e6)
}
