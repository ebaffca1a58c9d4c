//! A compile request, typed ([`CompileRequest`]: the workload, the participation schema, the
//! neighbouring relation, the form with its own parameters, the calibration), and the refusal of
//! an option ([`OptionError`]: the option, the value, what is allowed), which each front end
//! renders in its own words — the CLI as `--min-sep 5: …`, Python as `min_sep=5: …`
//! ([`Spelling`]). No front end's text lives in the library: an option is an [`Opt`], and a
//! message names other options by placeholder (`{epochs}`), spelled by the renderer.
//!
//! Front ends collect what their users typed into [`Options`] (every option optional, each typed
//! by the parsers here), and [`Options::request`] checks ranges, combinations and which options
//! apply to which form, before any work. The checks that need the horizon `n` (a band at most
//! `n`, a separation at most `n`) run at the start of [`crate::compile::compile`].

use std::fmt;
use std::path::PathBuf;

use faer::Mat;
use mfc_formats::Neighbouring;

use crate::forms::bandmf::{BandMfKind, Bands};
use crate::forms::fft::FftKind;
use crate::max_error::Objective;
use crate::privacy::participation::Participation;
use crate::workload::Schedule;

pub mod option;
pub use option::{
    CLIP_NORMS, MAX_BUFFERS, MAX_EPSILON, MAX_NOISE_MULTIPLIER, MAX_REFINE, MAX_STEPS, Opt,
    OptionError, Spelling, epsilon_text, integer_in, number, real_in,
};

/// The forms a blob ships ([`crate::forms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormKind {
    /// Banded plus low rank `(h, r)`.
    Banded,
    /// Buffered linear Toeplitz.
    Blt,
    /// The FFT mechanism (circulant decoder).
    Fft,
    /// The FFT mechanism with its optimal decoder.
    FftOptimal,
    /// A banded encoder.
    BandMf,
}

impl FormKind {
    /// `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`.
    pub const fn name(self) -> &'static str {
        match self {
            FormKind::Banded => "banded",
            FormKind::Blt => "blt",
            FormKind::Fft => "fft",
            FormKind::FftOptimal => "fft-optimal",
            FormKind::BandMf => "bandmf",
        }
    }

    /// The form named `text`.
    pub fn parse(text: &str) -> Result<Self, OptionError> {
        [
            FormKind::Banded,
            FormKind::Blt,
            FormKind::Fft,
            FormKind::FftOptimal,
            FormKind::BandMf,
        ]
        .into_iter()
        .find(|f| f.name() == text)
        .ok_or_else(|| {
            OptionError::new(
                Opt::Form,
                text,
                "expected `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`",
            )
        })
    }

    /// The options that apply to this form besides those of every form.
    fn takes(self, option: Opt) -> bool {
        match option {
            Opt::Band | Opt::Rank | Opt::Refine | Opt::Gap => self == FormKind::Banded,
            Opt::Stamps => matches!(
                self,
                FormKind::Banded | FormKind::Fft | FormKind::FftOptimal
            ),
            Opt::Buffers | Opt::Horizon => self == FormKind::Blt,
            Opt::Bands | Opt::MaxBands | Opt::Toeplitz => self == FormKind::BandMf,
            _ => true,
        }
    }
}

/// The neighbouring relation named `text`: `add-remove` or `replace-one`.
pub fn parse_neighbouring(text: &str) -> Result<Neighbouring, OptionError> {
    match text {
        "add-remove" => Ok(Neighbouring::AddOrRemove),
        "replace-one" => Ok(Neighbouring::ReplaceOne),
        other => Err(OptionError::new(
            Opt::Neighbouring,
            other,
            "expected `add-remove` or `replace-one`",
        )),
    }
}

/// How many stamps (001 App. D.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamps {
    /// Exactly this many (a divisor of `n`).
    Count(usize),
    /// Chosen by loss among [`crate::optimize::optimum::STAMP_CANDIDATES`] (banded form only).
    Auto,
}

impl Stamps {
    /// A number of stamps, or `auto`.
    pub fn parse(text: &str) -> Result<Self, OptionError> {
        if text == "auto" {
            return Ok(Stamps::Auto);
        }
        match text.parse::<usize>() {
            Ok(s) if s >= 1 => Ok(Stamps::Count(s)),
            _ => Err(OptionError::new(
                Opt::Stamps,
                text,
                "expected a divisor of {steps}, or `auto`",
            )),
        }
    }
}

/// BandMF's bands as a front end gives them: a number, or `auto` (with [`Opt::MaxBands`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandsChoice {
    /// `b̂`.
    Fixed(usize),
    /// Chosen by loss.
    Auto,
}

impl BandsChoice {
    /// A number of bands `b̂ ≥ 1`, or `auto`.
    pub fn parse(text: &str) -> Result<Self, OptionError> {
        if text == "auto" {
            return Ok(BandsChoice::Auto);
        }
        match text.parse::<usize>() {
            Ok(b) if b >= 1 => Ok(BandsChoice::Fixed(b)),
            _ => Err(OptionError::new(
                Opt::Bands,
                text,
                "expected a number of bands b̂ ≥ 1, or `auto`",
            )),
        }
    }
}

/// The horizon a BLT blob covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Horizon {
    /// The sensitivity covers this many steps; the runtime stops there.
    Steps(usize),
    /// The sensitivity bound holds for every horizon (single participation; `formats/SPEC.md`,
    /// "Unbounded horizon"): the runtime never stops on its own account.
    Unbounded,
}

impl Horizon {
    /// A number of steps, or `unbounded`.
    pub fn parse(text: &str) -> Result<Self, OptionError> {
        if text == "unbounded" {
            return Ok(Horizon::Unbounded);
        }
        text.parse()
            .ok()
            .filter(|&n| (1..=MAX_STEPS).contains(&n))
            .map(Horizon::Steps)
            .ok_or_else(|| {
                OptionError::new(
                    Opt::Horizon,
                    text,
                    format!("expected a number of steps in 1..={MAX_STEPS} (at least {{steps}}), or `unbounded`"),
                )
            })
    }
}

impl fmt::Display for Horizon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Horizon::Steps(n) => write!(f, "{n}"),
            Horizon::Unbounded => f.write_str("unbounded"),
        }
    }
}

/// The workload as requested.
#[derive(Debug, Clone)]
pub enum WorkloadSpec {
    /// Prefix sums.
    Prefix,
    /// Heavy-ball momentum with a learning-rate schedule (003 Prop. 4.2).
    Momentum {
        /// `β ∈ [0, 1)`.
        beta: f64,
        /// The learning rates.
        schedule: Schedule,
    },
    /// A square lower-triangular `.npy` matrix.
    Npy(PathBuf),
    /// The matrix itself (the Python package's numpy array), with a label for reports.
    Matrix {
        /// Where it came from.
        label: String,
        /// `A`.
        matrix: Mat<f64>,
    },
}

impl WorkloadSpec {
    /// The workload as a request names it in reports: `prefix`, `momentum:BETA`, `npy:PATH`, or
    /// a matrix's label.
    pub fn spec(&self) -> String {
        match self {
            WorkloadSpec::Prefix => "prefix".into(),
            WorkloadSpec::Momentum { beta, .. } => format!("momentum:{beta}"),
            WorkloadSpec::Npy(path) => format!("npy:{}", path.display()),
            WorkloadSpec::Matrix { label, .. } => label.clone(),
        }
    }

    /// `prefix`, `momentum:BETA` (with `cooldown`, `STEPS:FINAL`) or `npy:PATH`.
    pub fn parse(spec: &str, cooldown: Option<&str>) -> Result<Self, OptionError> {
        if cooldown.is_some() && !spec.starts_with("momentum:") {
            return Err(OptionError::new(
                Opt::Cooldown,
                cooldown.unwrap_or_default(),
                "applies to {workload} momentum:BETA only",
            ));
        }
        if spec == "prefix" {
            return Ok(WorkloadSpec::Prefix);
        }
        if let Some(beta) = spec.strip_prefix("momentum:") {
            let beta = beta
                .parse::<f64>()
                .ok()
                .filter(|b| (0.0..1.0).contains(b))
                .ok_or_else(|| {
                    OptionError::new(
                        Opt::Workload,
                        spec,
                        "expected momentum:BETA with BETA in [0, 1)",
                    )
                })?;
            let schedule = match cooldown {
                None => Schedule::Constant,
                Some(c) => {
                    let refuse = || {
                        OptionError::new(
                            Opt::Cooldown,
                            c,
                            "expected STEPS:FINAL, STEPS ≥ 1 steps falling linearly to a final rate FINAL in (0, 1]",
                        )
                    };
                    let (m, rate) = c.split_once(':').ok_or_else(refuse)?;
                    let steps = m
                        .parse::<usize>()
                        .ok()
                        .filter(|&s| s >= 1)
                        .ok_or_else(refuse)?;
                    let final_rate = rate
                        .parse::<f64>()
                        .ok()
                        .filter(|r| *r > 0.0 && *r <= 1.0)
                        .ok_or_else(refuse)?;
                    Schedule::Cooldown { steps, final_rate }
                }
            };
            return Ok(WorkloadSpec::Momentum { beta, schedule });
        }
        if let Some(path) = spec.strip_prefix("npy:") {
            if path.is_empty() {
                return Err(OptionError::new(
                    Opt::Workload,
                    spec,
                    "the path is empty (expected npy:PATH to a square .npy matrix)",
                ));
            }
            return Ok(WorkloadSpec::Npy(PathBuf::from(path)));
        }
        Err(OptionError::new(
            Opt::Workload,
            spec,
            "expected `prefix`, `momentum:BETA` or `npy:PATH`",
        ))
    }
}

/// The form that ships and its own parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum FormSpec {
    /// Banded plus low rank `(h, r)` ([`crate::forms::banded`]).
    Banded {
        /// `h ≥ 1`.
        band: usize,
        /// `r ≥ 0`.
        rank: usize,
        /// Stamps of the optimum.
        stamps: Stamps,
        /// L-BFGS iterations of the shipped-loss refinement.
        refine: usize,
        /// The relative duality gap certified.
        gap: f64,
    },
    /// BLT with `buffers` buffers ([`crate::forms::blt`]).
    Blt {
        /// `m`.
        buffers: usize,
        /// The horizon the sensitivity covers (default: the steps).
        horizon: Option<Horizon>,
    },
    /// The FFT mechanism ([`crate::forms::fft`]).
    Fft {
        /// Circulant or optimal decoder.
        kind: FftKind,
        /// Blocks of `n / stamps` steps.
        stamps: usize,
    },
    /// A banded encoder ([`crate::forms::bandmf`]).
    BandMf {
        /// General or Toeplitz.
        kind: BandMfKind,
        /// `b̂`, or how to choose it.
        bands: Bands,
    },
}

impl FormSpec {
    /// The form's kind.
    pub fn kind(&self) -> FormKind {
        match self {
            FormSpec::Banded { .. } => FormKind::Banded,
            FormSpec::Blt { .. } => FormKind::Blt,
            FormSpec::Fft {
                kind: FftKind::Circulant,
                ..
            } => FormKind::Fft,
            FormSpec::Fft { .. } => FormKind::FftOptimal,
            FormSpec::BandMf { .. } => FormKind::BandMf,
        }
    }
}

/// How `σ` is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Privacy {
    /// Not calibrated: the caller supplies `σ` to the runtime.
    Uncalibrated,
    /// Calibrated for `(ε, δ)` (the analytic Gaussian relation, `σ` rounded up).
    Target {
        /// `ε`.
        epsilon: f64,
        /// `δ`.
        delta: f64,
    },
    /// This `σ`, and the `ε` it gives at `delta` when given.
    NoiseMultiplier {
        /// `σ`.
        sigma: f64,
        /// `δ` to report `ε` at.
        delta: Option<f64>,
    },
}

/// A typed compile request: what [`crate::compile::compile`] builds.
#[derive(Debug, Clone)]
pub struct CompileRequest {
    /// The workload `A`.
    pub workload: WorkloadSpec,
    /// `n` (required except for a matrix workload, whose size it must match).
    pub steps: Option<usize>,
    /// The participation schema.
    pub participation: Participation,
    /// The neighbouring relation.
    pub neighbouring: Neighbouring,
    /// The form and its parameters.
    pub form: FormSpec,
    /// `ζ`.
    pub clip_norm: f64,
    /// The calibration.
    pub privacy: Privacy,
    /// Amplified BandMF: the cyclic Poisson sampling under which `σ` is calibrated and which
    /// the blob records (the groups being the encoder's bands `b̂`).
    pub sampling: Option<Sampling>,
    /// Run a compile whose estimated memory exceeds what is available.
    pub force: bool,
    /// What the strategy is optimized for: the total squared error (the default) or the max
    /// error ([`crate::max_error`]).
    pub objective: Objective,
}

/// How a compile request gives its cyclic Poisson sampling (amplified BandMF).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The rate `q` within a group, for the fixed `b̂` of [`FormSpec::BandMf`].
    Rate {
        /// `q ∈ (0, 1]`.
        sampling_prob: f64,
    },
    /// The dataset and its expected batch: `q = B·b̂/N`, and `b̂` fixed, or chosen for the
    /// target by [`crate::privacy::accountant::bandmf::choose_bands`] (`--bands auto`).
    Batch {
        /// `N`, the records.
        dataset_size: u64,
        /// `B`, the expected batch size.
        batch_size: f64,
    },
}

/// What a front end collected, every option optional and typed; [`Options::request`] checks
/// it. [`Default`] is "nothing given": a banded `(4, 4)` prefix-sum mechanism under single
/// participation, add-remove neighbours, `ζ = 1`, uncalibrated.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The workload (prefix sums when absent).
    pub workload: Option<WorkloadSpec>,
    /// `n`.
    pub steps: Option<usize>,
    /// `k`.
    pub epochs: Option<usize>,
    /// `b` of min-separation.
    pub min_sep: Option<usize>,
    /// `b` of fixed epoch order.
    pub every: Option<usize>,
    /// The neighbouring relation (add-remove when absent).
    pub neighbouring: Option<Neighbouring>,
    /// The form (banded when absent).
    pub form: Option<FormKind>,
    /// Stamps (banded, FFT; 1 when absent).
    pub stamps: Option<Stamps>,
    /// BandMF's bands (`auto` when absent).
    pub bands: Option<BandsChoice>,
    /// BandMF `auto`'s most bands (256 when absent).
    pub max_bands: Option<usize>,
    /// BandMF: banded Toeplitz.
    pub toeplitz: bool,
    /// BLT buffers (4 when absent).
    pub buffers: Option<usize>,
    /// BLT horizon.
    pub horizon: Option<Horizon>,
    /// `h` (4 when absent).
    pub band: Option<usize>,
    /// `r` (4 when absent).
    pub rank: Option<usize>,
    /// Refinement iterations (50 when absent).
    pub refine: Option<usize>,
    /// The duality gap (1e-6 when absent).
    pub gap: Option<f64>,
    /// `objective`.
    pub objective: Option<Objective>,
    /// `ζ` (1 when absent).
    pub clip_norm: Option<f64>,
    /// `ε`.
    pub epsilon: Option<f64>,
    /// `δ`.
    pub delta: Option<f64>,
    /// `σ`.
    pub noise_multiplier: Option<f64>,
    /// Amplified BandMF: the cyclic Poisson sampling rate within a group.
    pub sampling_prob: Option<f64>,
    /// Amplified BandMF: the records `N` (with `batch_size`: `q = B·b̂/N`).
    pub dataset_size: Option<u64>,
    /// Amplified BandMF: the expected batch `B`.
    pub batch_size: Option<f64>,
    /// Force a compile past its memory estimate.
    pub force: bool,
}

/// The participation schema of `(epochs, min_sep, every)` as front ends give them: single
/// participation when none is given, `k`-participation at least `b` apart (min-separation) or
/// exactly `b` apart (fixed epoch order); `k = 1` is single participation.
pub fn participation(
    epochs: Option<usize>,
    min_sep: Option<usize>,
    every: Option<usize>,
) -> Result<Participation, OptionError> {
    for (option, value) in [
        (Opt::Epochs, epochs),
        (Opt::MinSep, min_sep),
        (Opt::Every, every),
    ] {
        if let Some(v) = value {
            integer_in(option, v, 1, MAX_STEPS)?;
        }
    }
    let schema = |result: crate::Result<Participation>, option, value: usize| {
        result.map_err(|e| OptionError::new(option, value, e.to_string()))
    };
    match (epochs, min_sep, every) {
        (None, None, None) => Ok(Participation::Single),
        (Some(k), Some(b), None) => schema(Participation::min_separation(k, b), Opt::MinSep, b),
        (Some(k), None, Some(b)) => schema(Participation::fixed_epoch_order(k, b), Opt::Every, b),
        (Some(k), None, None) => Err(OptionError::new(
            Opt::Epochs,
            k,
            "needs {min_sep} B (participations at least B steps apart) or {every} B (exactly B apart)",
        )),
        (None, Some(b), _) => Err(OptionError::new(
            Opt::MinSep,
            b,
            "needs {epochs} K, the most steps one record takes part in",
        )),
        (None, None, Some(b)) => Err(OptionError::new(
            Opt::Every,
            b,
            "needs {epochs} K, the most steps one record takes part in",
        )),
        (Some(_), Some(b), Some(_)) => Err(OptionError::new(
            Opt::MinSep,
            b,
            "excludes {every} (at least b apart, or exactly b apart: one of the two)",
        )),
    }
}

/// Refuses a separation `b` above the `steps` the schema covers (no pattern could then hold two
/// participations, and a blob stores `1 ≤ b ≤ n`).
pub fn check_separation(participation: &Participation, steps: usize) -> Result<(), OptionError> {
    match participation.separation() {
        Some(b) if b > steps => Err(OptionError::new(
            match participation {
                Participation::FixedEpochOrder { .. } => Opt::Every,
                _ => Opt::MinSep,
            },
            b,
            format!("the separation must be at most the number of steps, {steps}"),
        )),
        _ => Ok(()),
    }
}

impl Options {
    /// The typed request, or the first refused option: each value in its range, each option
    /// applying to the form, the schema and the calibration whole.
    pub fn request(&self) -> Result<CompileRequest, OptionError> {
        // Amplification by sampling needs a banded encoder: BandMF is the default form then.
        let sampling = self.sampling()?;
        let form = self.form.unwrap_or(match sampling {
            Some(_) => FormKind::BandMf,
            None => FormKind::Banded,
        });
        if let Some(sampling) = sampling {
            // First: with sampling, the form's options are judged against BandMF.
            let schema = participation(self.epochs, self.min_sep, self.every)?;
            self.check_sampling(sampling, form, schema)?;
        }
        let given: [(Opt, Option<String>); 10] = [
            (Opt::Band, self.band.map(|v| v.to_string())),
            (Opt::Rank, self.rank.map(|v| v.to_string())),
            (Opt::Refine, self.refine.map(|v| v.to_string())),
            (Opt::Gap, self.gap.map(|v| v.to_string())),
            (
                Opt::Stamps,
                self.stamps.map(|s| match s {
                    Stamps::Count(n) => n.to_string(),
                    Stamps::Auto => "auto".into(),
                }),
            ),
            (Opt::Buffers, self.buffers.map(|v| v.to_string())),
            (Opt::Horizon, self.horizon.map(|h| h.to_string())),
            (
                Opt::Bands,
                self.bands.map(|b| match b {
                    BandsChoice::Fixed(n) => n.to_string(),
                    BandsChoice::Auto => "auto".into(),
                }),
            ),
            (Opt::MaxBands, self.max_bands.map(|v| v.to_string())),
            (Opt::Toeplitz, self.toeplitz.then(String::new)),
        ];
        for (option, value) in given {
            if let Some(value) = value.filter(|_| !form.takes(option)) {
                let forms: Vec<&str> = [
                    FormKind::Banded,
                    FormKind::Blt,
                    FormKind::Fft,
                    FormKind::FftOptimal,
                    FormKind::BandMf,
                ]
                .into_iter()
                .filter(|f| f.takes(option))
                .map(FormKind::name)
                .collect();
                return Err(OptionError::new(
                    option,
                    value,
                    format!(
                        "applies to {{form}} {} only; the form is `{}`",
                        forms.join(" or "),
                        form.name()
                    ),
                ));
            }
        }
        if let Some(steps) = self.steps {
            integer_in(Opt::Steps, steps, 1, MAX_STEPS)?;
        }
        let form_spec = match form {
            FormKind::Banded => FormSpec::Banded {
                band: integer_in(Opt::Band, self.band.unwrap_or(4), 1, MAX_STEPS)?,
                rank: integer_in(Opt::Rank, self.rank.unwrap_or(4), 0, MAX_STEPS)?,
                stamps: self.stamps.unwrap_or(Stamps::Count(1)),
                refine: integer_in(Opt::Refine, self.refine.unwrap_or(50), 0, MAX_REFINE)?,
                gap: real_in(Opt::Gap, self.gap.unwrap_or(1e-6), (0.0, true), (1.0, true))?,
            },
            FormKind::Blt => FormSpec::Blt {
                buffers: integer_in(Opt::Buffers, self.buffers.unwrap_or(4), 1, MAX_BUFFERS)?,
                horizon: self.horizon,
            },
            FormKind::Fft | FormKind::FftOptimal => FormSpec::Fft {
                kind: if form == FormKind::Fft {
                    FftKind::Circulant
                } else {
                    FftKind::OptimalDecoder
                },
                stamps: match self.stamps.unwrap_or(Stamps::Count(1)) {
                    Stamps::Count(s) => s,
                    Stamps::Auto => {
                        return Err(OptionError::new(
                            Opt::Stamps,
                            "auto",
                            "expected a number of blocks dividing {steps} (`auto` chooses the banded form's stamps)",
                        ));
                    }
                },
            },
            FormKind::BandMf => FormSpec::BandMf {
                kind: if self.toeplitz {
                    BandMfKind::Toeplitz
                } else {
                    BandMfKind::General
                },
                bands: match self.bands.unwrap_or(BandsChoice::Auto) {
                    BandsChoice::Fixed(b) => {
                        if let Some(max) = self.max_bands {
                            return Err(OptionError::new(
                                Opt::MaxBands,
                                max,
                                format!("applies to {{bands}} auto only; {{bands}} is {b}"),
                            ));
                        }
                        Bands::Fixed(b)
                    }
                    BandsChoice::Auto => Bands::Auto {
                        max: integer_in(
                            Opt::MaxBands,
                            self.max_bands.unwrap_or(256),
                            1,
                            MAX_STEPS,
                        )?,
                    },
                },
            },
        };
        let workload = self.workload.clone().unwrap_or(WorkloadSpec::Prefix);
        if !matches!(workload, WorkloadSpec::Prefix)
            && matches!(form, FormKind::Blt | FormKind::Fft | FormKind::FftOptimal)
        {
            return Err(OptionError::new(
                Opt::Form,
                form.name(),
                "releases prefix sums only: the workload must be `prefix` (the banded and bandmf forms take any workload)",
            ));
        }
        let participation = participation(self.epochs, self.min_sep, self.every)?;
        if self.horizon == Some(Horizon::Unbounded) && participation != Participation::Single {
            return Err(OptionError::new(
                Opt::Horizon,
                "unbounded",
                "the bound for every horizon is proven for single participation only: drop {epochs}, {min_sep} and {every}, or give a finite {horizon}",
            ));
        }
        Ok(CompileRequest {
            workload,
            steps: self.steps,
            participation,
            neighbouring: self.neighbouring.unwrap_or(Neighbouring::AddOrRemove),
            form: form_spec,
            clip_norm: match self.clip_norm {
                None => 1.0,
                Some(z) if (CLIP_NORMS.0..=CLIP_NORMS.1).contains(&z) => z,
                Some(z) => {
                    return Err(OptionError::new(
                        Opt::ClipNorm,
                        number(z),
                        "expected a number in [2^-64, 2^64] (the clip norms the runtime clips exactly)",
                    ));
                }
            },
            privacy: self.privacy()?,
            sampling,
            force: self.force,
            objective: self.objective(form, &participation)?,
        })
    }

    /// The objective, refused where no optimizer of it exists: the banded form under max
    /// error needs single participation and one stamp (the certified max-error optimum, `γ₂`,
    /// is computed for single participation; [`crate::max_error::dense`]).
    fn objective(
        &self,
        form: FormKind,
        participation: &Participation,
    ) -> Result<Objective, OptionError> {
        let objective = self.objective.unwrap_or_default();
        if objective == Objective::Max && form == FormKind::Banded {
            if *participation != Participation::Single {
                return Err(OptionError::new(
                    Opt::Objective,
                    "max",
                    "with {form} banded needs single participation (the certified max-error \
                     optimum is computed for it); under {epochs}, {min_sep} or {every} use \
                     {form} bandmf or blt, which optimize the max error under every schema",
                ));
            }
            if let Some(stamps) = self.stamps.filter(|s| *s != Stamps::Count(1)) {
                return Err(OptionError::new(
                    Opt::Stamps,
                    match stamps {
                        Stamps::Count(s) => s.to_string(),
                        Stamps::Auto => "auto".into(),
                    },
                    "expected 1 with {objective} max: the max-error banded form is not stamped",
                ));
            }
        }
        Ok(objective)
    }

    /// The sampling of `(sampling_prob, dataset_size, batch_size)`: a rate, or a dataset and
    /// its expected batch, not both.
    fn sampling(&self) -> Result<Option<Sampling>, OptionError> {
        if let Some(n) = self.dataset_size {
            integer_in(Opt::DatasetSize, n as usize, 1, usize::MAX)?;
        }
        if let Some(b) = self.batch_size {
            real_in(Opt::BatchSize, b, (0.0, true), (f64::MAX, false))?;
        }
        match (self.sampling_prob, self.dataset_size, self.batch_size) {
            (None, None, None) => Ok(None),
            (Some(q), None, None) => Ok(Some(Sampling::Rate {
                sampling_prob: real_in(Opt::SamplingProb, q, (0.0, true), (1.0, false))?,
            })),
            (None, Some(dataset_size), Some(batch_size)) => Ok(Some(Sampling::Batch {
                dataset_size,
                batch_size,
            })),
            (Some(q), _, _) => Err(OptionError::new(
                Opt::SamplingProb,
                number(q),
                "excludes {dataset_size} and {batch_size}: give the rate within a group, or the dataset and its expected batch (q = batch·bands/dataset)",
            )),
            (None, Some(n), None) => Err(OptionError::new(
                Opt::DatasetSize,
                n,
                "needs {batch_size} B, the expected batch (q = B·bands/N)",
            )),
            (None, None, Some(b)) => Err(OptionError::new(
                Opt::BatchSize,
                number(b),
                "needs {dataset_size} N, the records (q = B·bands/N)",
            )),
        }
    }

    /// Cyclic Poisson sampling (amplified BandMF, Choquette-Choo et al. 2023b) composes with a
    /// BandMF encoder whose bands `b̂` are the groups, add-remove neighbours and no other
    /// participation schema: the scheme itself bounds each record's steps. A rate needs a fixed
    /// `b̂`; a dataset and batch may let `--bands auto` choose it for an `(ε, δ)` target.
    fn check_sampling(
        &self,
        sampling: Sampling,
        form: FormKind,
        participation: Participation,
    ) -> Result<(), OptionError> {
        let (option, value) = match sampling {
            Sampling::Rate { sampling_prob } => (Opt::SamplingProb, number(sampling_prob)),
            Sampling::Batch { dataset_size, .. } => (Opt::DatasetSize, dataset_size.to_string()),
        };
        if form != FormKind::BandMf {
            return Err(OptionError::new(
                option,
                value,
                format!(
                    "amplification by sampling needs a banded encoder: {{form}} bandmf (the form is `{}`)",
                    form.name()
                ),
            ));
        }
        if participation != Participation::Single {
            return Err(OptionError::new(
                option,
                value,
                "excludes {epochs}, {min_sep} and {every}: under cyclic Poisson sampling a record is in at most ⌈n/b̂⌉ steps, exactly b̂ apart, by the scheme itself",
            ));
        }
        if self.neighbouring == Some(Neighbouring::ReplaceOne) {
            return Err(OptionError::new(
                Opt::Neighbouring,
                "replace-one",
                "with sampling, the Poisson-sampled accountant supports add-remove only",
            ));
        }
        match (sampling, self.bands) {
            (_, Some(BandsChoice::Fixed(_))) => Ok(()),
            (Sampling::Rate { .. }, _) => Err(OptionError::new(
                option,
                value,
                "needs {bands} B, a fixed number of bands: the records are split into B groups and q is the rate within one (or give {dataset_size} and {batch_size} to let {bands} auto choose B)",
            )),
            (Sampling::Batch { .. }, _) if self.epsilon.is_none() => Err(OptionError::new(
                Opt::Bands,
                "auto",
                "with {dataset_size}, chooses the bands for a target: give {epsilon} and {delta}, or a fixed {bands} B",
            )),
            (Sampling::Batch { .. }, _) => Ok(()),
        }
    }

    /// The calibration of `(epsilon, delta, noise_multiplier)`.
    fn privacy(&self) -> Result<Privacy, OptionError> {
        if let Some(e) = self.epsilon {
            real_in(Opt::Epsilon, e, (0.0, true), (MAX_EPSILON, false))?;
        }
        if let Some(d) = self.delta {
            real_in(Opt::Delta, d, (0.0, true), (1.0, true))?;
        }
        if let Some(s) = self.noise_multiplier {
            real_in(
                Opt::NoiseMultiplier,
                s,
                (0.0, true),
                (MAX_NOISE_MULTIPLIER, false),
            )?;
        }
        match (self.epsilon, self.delta, self.noise_multiplier) {
            (Some(epsilon), Some(delta), None) => Ok(Privacy::Target { epsilon, delta }),
            (None, delta, Some(sigma)) => Ok(Privacy::NoiseMultiplier { sigma, delta }),
            (None, None, None) => Ok(Privacy::Uncalibrated),
            (Some(e), None, None) => Err(OptionError::new(
                Opt::Epsilon,
                number(e),
                "needs {delta}, the δ of the target",
            )),
            (Some(e), _, Some(_)) => Err(OptionError::new(
                Opt::Epsilon,
                number(e),
                "excludes {noise_multiplier}: give a target ({epsilon} with {delta}) or σ",
            )),
            (None, Some(d), None) => Err(OptionError::new(
                Opt::Delta,
                number(d),
                "needs {epsilon} (a target) or {noise_multiplier} (σ, whose ε at δ is reported)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One refusal, rendered by every front end: the option, the value, the range, and the
    /// other options it names spelled the same way.
    #[test]
    fn option_errors_render_in_each_front_end_s_words() {
        let e = Options {
            min_sep: Some(5),
            ..Options::default()
        }
        .request()
        .unwrap_err();
        assert_eq!(
            e.render(Spelling::Cli),
            "--min-sep 5: needs --epochs K, the most steps one record takes part in"
        );
        assert_eq!(
            e.render(Spelling::Python),
            "min_sep=5: needs epochs K, the most steps one record takes part in"
        );
        let e = Options {
            form: Some(FormKind::Blt),
            band: Some(3),
            ..Options::default()
        }
        .request()
        .unwrap_err();
        assert_eq!(
            e.render(Spelling::Cli),
            "--band 3: applies to --form banded only; the form is `blt`"
        );
        let e = Options {
            toeplitz: true,
            ..Options::default()
        }
        .request()
        .unwrap_err();
        assert_eq!(
            e.render(Spelling::Python),
            "toeplitz=True: applies to form bandmf only; the form is `banded`"
        );
        assert_eq!(
            FormKind::parse("fancy")
                .unwrap_err()
                .render(Spelling::Python),
            "form='fancy': expected `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`"
        );
        let e = Options {
            delta: Some(1.5),
            epsilon: Some(1.0),
            ..Options::default()
        }
        .request()
        .unwrap_err();
        assert_eq!(
            e.render(Spelling::Cli),
            "--delta 1.5: expected a finite number in (0, 1)"
        );
    }
}
