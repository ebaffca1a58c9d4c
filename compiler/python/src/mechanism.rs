//! `mfc.compile` and `mfc.Mechanism`: a compiled blob, its report and its dense matrices.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use mfc_compiler::compile::{Event, compile as run_compile};
use mfc_compiler::max_error::Objective;
use mfc_compiler::report::{
    SamplingReport, method_description, neighbouring_name, privacy_unit, stored_schema,
};
use mfc_compiler::request::{
    BandsChoice, FormKind, Horizon, MAX_BUFFERS, MAX_REFINE, MAX_STEPS, Opt, OptionError, Options,
    Spelling, Stamps, WorkloadSpec, parse_neighbouring,
};
use mfc_compiler::workload::Workload;
use mfc_formats::{Mechanism as Blob, Validated};
use numpy::PyArrayMethods;
use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::error::{Error, Result};
use crate::intake;
use crate::owned::form_name;

/// A compiled mechanism: the `.mfc` blob (what a device replays), its report, and — when it was
/// compiled here — the workload it was compiled for.
#[pyclass(module = "mfc", frozen)]
pub struct Mechanism {
    blob: Vec<u8>,
    report: serde_json::Value,
    workload: Option<(Workload, usize)>,
}

/// The blob's header as `mfc inspect --json` reports it, with the unit of privacy.
pub(crate) fn header_report(m: &Validated<'_>, blob_len: usize) -> Result<serde_json::Value> {
    let h = &m.header;
    let (schema, sampling) = stored_schema(&h.participation, h.steps)?;
    let workload = match h.workload {
        mfc_formats::Workload::PrefixSum => "prefix sum".to_string(),
        mfc_formats::Workload::Custom { label } => format!("custom ({label})"),
        _ => "unknown".to_string(),
    };
    // (ε, δ) derived from σ at the stored δ, as `mfc inspect` prints it; a stored ε below it is
    // a false claim and the blob is refused.
    let derived = match h.calibration {
        Some(c) => mfc_compiler::report::derived_privacy(&c, sampling.as_ref())?,
        None => None,
    };
    Ok(serde_json::json!({
        "form": form_name(m),
        "blob_bytes": blob_len,
        "generator": h.generator,
        "workload": workload,
        "steps": h.steps,
        "participation": schema,
        "participation_schema": schema_fields(&h.participation),
        "sampling": sampling.as_ref().map(SamplingReport::new),
        "neighbouring": neighbouring_name(h.neighbouring),
        "privacy_unit": privacy_unit(&schema, h.neighbouring, h.clip_norm),
        "sensitivity": h.sensitivity.value,
        "sensitivity_method": method_description(h.sensitivity.method),
        "sensitivity_exact": h.sensitivity.method.is_exact(),
        "clip_norm": h.clip_norm,
        "noise_multiplier": h.calibration.map(|c| c.noise_multiplier),
        "epsilon": derived.map(|(e, _)| e),
        "delta": derived.map(|(_, d)| d),
        "sqrt_loss": h.error.sqrt_loss,
        "optimal_sqrt_loss": h.error.optimal_sqrt_loss,
        "max_step_stddev": h.error.max_step_stddev,
        "final_step_stddev": h.error.final_step_stddev,
    }))
}

/// The stored participation schema as exact fields, for a program that enforces it (the Flower
/// sampler): `kind` (`single`, `fixed-epoch-order`, `min-separation`, `cyclic-poisson`) with
/// `max_participations` (k) and `separation` (b: exactly b apart for fixed epoch order, at
/// least b apart for min-separation), or `cycle_length` and `sampling_prob`.
fn schema_fields(stored: &mfc_formats::Participation) -> serde_json::Value {
    use mfc_formats::Participation as P;
    match *stored {
        P::Single => serde_json::json!({ "kind": "single", "max_participations": 1 }),
        P::FixedEpochOrder {
            max_participations,
            separation,
        } => serde_json::json!({
            "kind": "fixed-epoch-order",
            "max_participations": max_participations,
            "separation": separation,
        }),
        P::MinSeparation {
            max_participations,
            min_separation,
        } => serde_json::json!({
            "kind": "min-separation",
            "max_participations": max_participations,
            "separation": min_separation,
        }),
        P::CyclicPoisson {
            cycle_length,
            sampling_prob,
        } => serde_json::json!({
            "kind": "cyclic-poisson",
            "cycle_length": cycle_length,
            "sampling_prob": sampling_prob,
        }),
        _ => serde_json::json!({ "kind": "unknown" }),
    }
}

impl Mechanism {
    /// A mechanism of `blob`, checked (checksum, version, every field) as a device checks it.
    fn parse(
        blob: Vec<u8>,
        compiled: Option<(serde_json::Value, Workload, usize)>,
    ) -> Result<Self> {
        let header = header_report(&Blob::from_bytes(&blob)?, blob.len())?;
        let (report, workload) = match compiled {
            // The compile report, with the header's keys it lacks (form, generator, steps…).
            Some((mut report, workload, steps)) => {
                if let (Some(map), serde_json::Value::Object(extra)) =
                    (report.as_object_mut(), header)
                {
                    for (key, value) in extra {
                        map.entry(key).or_insert(value);
                    }
                }
                (report, Some((workload, steps)))
            }
            None => (header, None),
        };
        Ok(Self {
            blob,
            report,
            workload,
        })
    }

    /// The blob's bytes.
    pub fn blob(&self) -> &[u8] {
        &self.blob
    }
}

/// `m` as a new C-ordered float64 numpy array (numpy's allocation: `MemoryError` if it fails),
/// freeing `m` once copied.
fn to_numpy<'py>(py: Python<'py>, m: faer::Mat<f64>) -> Result<Bound<'py, PyAny>> {
    let (rows, cols) = (m.nrows(), m.ncols());
    let out = intake::empty::<f64>(py, &[rows, cols], "float64")?;
    {
        let mut writer = out
            .try_readwrite()
            .map_err(|e| Error::Value(format!("internal: {e}")))?;
        let values = writer
            .as_slice_mut()
            .map_err(|e| Error::Value(format!("internal: {e}")))?;
        for (i, row) in values.chunks_exact_mut(cols.max(1)).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = m[(i, j)];
            }
        }
    }
    Ok(out.into_any())
}

fn to_python<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| Error::Value(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

#[pymethods]
impl Mechanism {
    /// A mechanism from a blob's bytes, checked as a device checks it: checksum, version, every
    /// field (`BlobError`).
    ///
    /// Args:
    ///     data: the blob, `bytes`, `bytearray`, `memoryview` or any buffer of bytes (copied).
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Self::parse(intake::bytes(data, "data")?, None)?)
    }

    /// A mechanism from an .mfc file. A file that cannot be read raises the `OSError` of its
    /// cause (`FileNotFoundError`, `PermissionError`, ... with `filename`); one that is not a
    /// valid blob raises `BlobError`.
    ///
    /// Args:
    ///     path: the file, a `str` or `os.PathLike`.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        let blob = std::fs::read(&path).map_err(|error| Error::Io {
            path: path.display().to_string(),
            error,
        })?;
        Self::parse(blob, None).map_err(|e| match e {
            Error::Runtime(mfc_runtime::Error::InvalidBlob(error)) => {
                Error::Compiler(mfc_compiler::Error::BlobFile {
                    path: path.display().to_string(),
                    error,
                })
                .into()
            }
            e => e.into(),
        })
    }

    /// Writes the blob to a file (the `OSError` of the cause if it cannot).
    ///
    /// Args:
    ///     path: the file, a `str` or `os.PathLike` (overwritten if it exists).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        std::fs::write(&path, &self.blob).map_err(|error| {
            Error::Io {
                path: path.display().to_string(),
                error,
            }
            .into()
        })
    }

    /// The blob's bytes, as a device stores them.
    #[getter]
    fn bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.blob)
    }

    /// The report: `mfc compile --json`'s for a compiled mechanism, else the blob's header as
    /// `mfc inspect --json` gives it. Either states the unit of privacy (`privacy_unit`), the
    /// participation schema and the neighbouring relation next to `(epsilon, delta)`;
    /// `participation_schema` gives the schema as exact fields (`kind`, `max_participations`,
    /// `separation`, or `cycle_length` and `sampling_prob`).
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.report)
    }

    /// The device's check of the recorded sensitivity, with the host's budget (`mfc inspect`
    /// prints the same): a dict with `verdict` — `verified` (with `recorded`, `bound` and
    /// `operations`), `unverifiable` (with `reason`; a device's policy refuses it, and so does
    /// `Stream` unless `allow_unverified=True`) or `refused` (with `reason`: the blob records
    /// less than its coefficients have, and `Stream` refuses it).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let m = Blob::from_bytes(&self.blob).map_err(Error::from)?;
        let verification = py.detach(|| mfc_compiler::privacy::verdict::check(&m));
        to_python(py, &verification.json)
    }

    /// The decoder form: `banded`, `blt`, `fft` or `bandmf`.
    #[getter]
    fn form(&self) -> PyResult<&'static str> {
        Ok(form_name(
            &Blob::from_bytes(&self.blob).map_err(Error::from)?,
        ))
    }

    /// The horizon `n`.
    #[getter]
    fn steps(&self) -> PyResult<u32> {
        Ok(Blob::from_bytes(&self.blob)
            .map_err(Error::from)?
            .header
            .steps)
    }

    /// `(B, C)`: the decoder B̂ and the encoder Ĉ as float64 arrays, from the f32 coefficients
    /// the blob stores, with B̂ Ĉ = A. sqrt(L) = sens(Ĉ)·‖B̂‖_F, and the sensitivity under the blob's
    /// participation schema is a function of Ĉ (single participation: its largest column norm). FFT
    /// blobs: B̂ is n x 2n, Ĉ 2n x n. `MemoryError` when the dense matrices (a few n x n float64 at
    /// once: about 320 GB at n = 10⁵) exceed the machine's memory or cannot be allocated.
    ///
    /// Args:
    ///     workload: the n x n float64 workload matrix A (any layout; read in logical order), needed
    ///         only for a blob of a workload other than the prefix sum that was not compiled in this
    ///         process. Default None.
    #[pyo3(signature = (workload=None))]
    fn to_dense<'py>(
        &self,
        py: Python<'py>,
        workload: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let memory = intake::physical_memory(py);
        let m = Blob::from_bytes(&self.blob).map_err(Error::from)?;
        crate::dense::check_memory(&m, memory)?;
        let given = workload
            .map(|w| intake::f64_matrix(&w, "workload", memory))
            .transpose()?;
        let compiled = match (&given, &self.workload) {
            (None, Some((w, steps))) if !matches!(w, Workload::PrefixSum) => {
                Some(w.matrix(*steps).map_err(Error::from)?)
            }
            _ => None,
        };
        let (b, c) = py.detach(|| crate::dense::to_dense(&m, given.or(compiled)))?;
        let b = to_numpy(py, b)?;
        let c = to_numpy(py, c)?;
        PyTuple::new(py, [b, c])
    }

    fn __repr__(&self) -> String {
        let get = |key: &str| self.report.get(key).cloned().unwrap_or_default();
        format!(
            "Mechanism(form={}, steps={}, sqrt_loss={}, sensitivity={}, blob_bytes={})",
            get("form"),
            get("steps"),
            get("sqrt_loss"),
            get("sensitivity"),
            self.blob.len()
        )
    }
}

/// A refusal of the library in Python's words: `min_sep=5: needs epochs K, …`.
fn refusal(e: mfc_compiler::Error) -> Error {
    match e {
        mfc_compiler::Error::Option(o) => Error::Option(o.render(Spelling::Python)),
        e => Error::Compiler(e),
    }
}

/// A library parser's result, its refusal in Python's words.
fn parsed<T>(r: std::result::Result<T, OptionError>) -> Result<T> {
    r.map_err(|e| Error::Option(e.render(Spelling::Python)))
}

/// A value given as a number or a string (`stamps=4` or `stamps="auto"`).
fn text(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    value.map(|v| Ok(v.str()?.to_string())).transpose()
}

/// Compiles of this module running now (on any Python thread): the last one to end clears the
/// process-wide interrupt flag (`mfc_compiler::interrupt`).
static ACTIVE_COMPILES: AtomicUsize = AtomicUsize::new(0);

/// One running compile in [`ACTIVE_COMPILES`]: the interrupt flag is process-wide, so a flag
/// left by an earlier interrupted compile is cleared when the first of a batch starts and when
/// the last ends (a panic included), never under another compile still running.
struct Running;

impl Running {
    fn enter() -> Self {
        if ACTIVE_COMPILES.fetch_add(1, Ordering::SeqCst) == 0 {
            mfc_compiler::interrupt::clear();
        }
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if ACTIVE_COMPILES.fetch_sub(1, Ordering::SeqCst) == 1 {
            mfc_compiler::interrupt::clear();
        }
    }
}

/// Optimizes, compresses and calibrates a mechanism: `mfc compile` with its options as
/// keywords (`--min-sep` is `min_sep`), returning the `Mechanism` (its blob and report).
///
/// Every keyword is optional; the options of one form are refused for another (`band`, `rank`,
/// `refine`, `gap`: `form="banded"`; `stamps`: banded and fft; `buffers`, `horizon`:
/// `blt`; `bands`, `max_bands`, `toeplitz`: `bandmf`). A refusal is a `CompileError` (a
/// `ValueError`) naming the keyword, the value and what is allowed (`min_sep=0: expected an
/// integer in 1..=4294967295`). Releases the GIL while it runs; Ctrl-C stops it within an
/// optimizer iteration (`KeyboardInterrupt`); the estimated memory and time of a long compile
/// arrive as a `UserWarning` before the work.
///
/// Args:
///     steps: the horizon n, an integer in 1..=2³²−1. Required, except with an `npy:` or array
///         `workload`, whose size it must then match.
///     workload: the workload A: `"prefix"` (prefix sums, the default), `"momentum:BETA"`
///         (heavy-ball momentum SGD iterates, BETA in [0, 1), learning rates from `cooldown`),
///         `"npy:PATH"` (a square lower-triangular float64 or float32 .npy matrix, as
///         `numpy.save` writes it) or the n x n float64 numpy matrix A itself (any layout, read
///         in logical order).
///     cooldown: `"STEPS:FINAL"`: the momentum workload's learning rate falls linearly from 1 to
///         FINAL in (0, 1] over the last STEPS >= 1 steps. Default None (a constant rate);
///         refused for another workload.
///     epochs: k: each record takes part in at most k steps, an integer in 1..=2³²−1; needs
///         `min_sep` or `every`. Default None: single participation.
///     min_sep: b-min-separation (jax_privacy's `min_sep`, federated training): any two
///         participations of a record are at least b steps apart, an integer in 1..=steps; needs
///         `epochs`; excludes `every`. Default None.
///     every: fixed epoch order ((k, b)-participation, Choquette-Choo et al. 2023): a record's
///         participations are exactly b steps apart, an integer in 1..=steps; needs `epochs`.
///         Default None.
///     neighbouring: the neighbouring relation the (ε, δ) is for: `"add-remove"` (the default:
///         add or remove one record) or `"replace-one"` (replace one record: twice the
///         sensitivity, so twice the noise).
///     form: the decoder form: `"banded"` (banded plus low rank, any workload; the default),
///         `"blt"` (buffered linear Toeplitz, prefix sums), `"fft"` or `"fft-optimal"` (the
///         FFT mechanism or its optimal decoder, prefix sums, no optimization) or `"bandmf"`
///         (BandMF, prefix sums or momentum; the default with `sampling_prob` or
///         `dataset_size`).
///     stamps: banded and fft forms: repeat an encoder optimized for n/S steps S times, S an
///         integer dividing `steps`, or `"auto"` (banded only: S among 1, 2, 4, 5, 8, 10, 16,
///         20 by the loss). Default 1.
///     band: banded form: h, the decoder's diagonals kept exactly, an integer >= 1. Default 4.
///     rank: banded form: r, the rank of the decoder's part below the band, an integer >= 0.
///         Default 4.
///     refine: banded form: L-BFGS iterations of the refinement after the fit, an integer in
///         0..=1000000 (0 ships the fit). Default 50.
///     gap: banded form: stop optimizing at this relative duality gap, a number in (0, 1)
///         (ignored by the min-separation optimizer, which has no dual bound). Default 1e-6.
///     objective: `"total"` (the default: the total squared error, sqrt(L)) or `"max"` (the
///         largest per-step standard deviation, continual counting's objective; every form, the
///         banded one under single participation only). `report["objective"]` says what was
///         optimized (`"none"` for fft).
///     bands: bandmf form: b̂, the encoder's bands, an integer in 1..=min(b, steps) under
///         `min_sep`/`every` b (1..=steps otherwise), or `"auto"` (the default): the fewest
///         bands among 1, 2, 4, ... (at most `max_bands`) within 1% of the best sqrt(L); with
///         `dataset_size`, the bands minimizing the expected error for (ε, δ).
///     max_bands: bandmf form with `bands="auto"`: the most bands tried, an integer >= 1 (the
///         device keeps (b̂ + 2)·d floats). Default 256.
///     toeplitz: bandmf form: a banded Toeplitz encoder (b̂ coefficients, any horizon) instead of
///         a general one (n x b̂ coefficients). Default False.
///     buffers: blt form: buffers per coordinate, an integer in 1..=64. Default 4.
///     horizon: blt form: the horizon the sensitivity covers and the runtime stops at, an integer
///         in steps..=2³²−1, or `"unbounded"` (a bound valid for every horizon; single
///         participation). Default None: `steps`.
///     clip_norm: ζ, the L2 norm the runtime clips every input row to, a number in [2⁻⁶⁴, 2⁶⁴].
///         Default 1.0.
///     epsilon: calibrate σ for this ε, a number in (0, 1000); needs `delta`; excludes
///         `noise_multiplier`. Default None.
///     delta: δ of the privacy target, a number in (0, 1). Default None.
///     noise_multiplier: record this σ instead of calibrating one, a number in (0, 10⁶); with
///         `delta` its ε is reported. Default None (with neither `epsilon` nor
///         `noise_multiplier` the blob is uncalibrated).
///     sampling_prob: amplified BandMF under cyclic Poisson sampling (Choquette-Choo et al. 2023b):
///         the records in `bands` groups, step i samples each record of group i mod bands with
///         probability q in (0, 1) (`bands=1` is DP-SGD); σ is calibrated by the accountant and
///         the scheme recorded in the blob (`report["sampling"]`; draw batches with
///         `CyclicPoissonSampling`). Implies `form="bandmf"`; needs a fixed `bands`;
///         add-remove neighbours. Default None.
///     dataset_size: instead of `sampling_prob`: the records N, an integer >= 1, with
///         `batch_size` (q = batch_size·bands/N); with `bands="auto"` and (ε, δ), the bands
///         are chosen. Default None.
///     batch_size: the expected batch size B, a number > 0, with `dataset_size`. Default None.
///     force: run a compile refused for its estimated memory (the dense banded compile, a BandMF
///         one with n x n matrices). Default False.
///     progress: None or True (the default): a compile longer than a second writes a progress
///         line to `sys.stderr` once a second; False silences it; a callable receives the latest
///         line (a `str`) at most every 50 ms instead, and an exception it raises stops the
///         compile.
#[pyfunction]
#[pyo3(signature = (
    *, steps=None, workload=None, cooldown=None, epochs=None, min_sep=None, every=None,
    neighbouring="add-remove", form=None, stamps=None, band=None, rank=None, refine=None,
    gap=None, objective=None, bands=None, max_bands=None, toeplitz=false, buffers=None, horizon=None,
    clip_norm=1.0, epsilon=None, delta=None, noise_multiplier=None, sampling_prob=None,
    dataset_size=None, batch_size=None, force=false, progress=None
))]
#[allow(clippy::too_many_arguments)]
pub fn compile(
    py: Python<'_>,
    steps: Option<Bound<'_, PyAny>>,
    workload: Option<Bound<'_, PyAny>>,
    cooldown: Option<String>,
    epochs: Option<Bound<'_, PyAny>>,
    min_sep: Option<Bound<'_, PyAny>>,
    every: Option<Bound<'_, PyAny>>,
    neighbouring: &str,
    form: Option<&str>,
    stamps: Option<Bound<'_, PyAny>>,
    band: Option<Bound<'_, PyAny>>,
    rank: Option<Bound<'_, PyAny>>,
    refine: Option<Bound<'_, PyAny>>,
    gap: Option<f64>,
    objective: Option<&str>,
    bands: Option<Bound<'_, PyAny>>,
    max_bands: Option<Bound<'_, PyAny>>,
    toeplitz: bool,
    buffers: Option<Bound<'_, PyAny>>,
    horizon: Option<Bound<'_, PyAny>>,
    clip_norm: f64,
    epsilon: Option<f64>,
    delta: Option<f64>,
    noise_multiplier: Option<f64>,
    sampling_prob: Option<f64>,
    dataset_size: Option<Bound<'_, PyAny>>,
    batch_size: Option<f64>,
    force: bool,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<Mechanism> {
    // Integers are checked with the keyword's name and the library's range: a negative number
    // is a CompileError (a ValueError) naming it, not pyo3's nameless OverflowError.
    let option = |e: Error| match e {
        Error::Value(why) => Error::Option(why),
        e => e,
    };
    let size = |value: Option<Bound<'_, PyAny>>, name: Opt, min: usize, max: usize| {
        value
            .map(|v| {
                let v = intake::size(&v, name.name(), min as u64, max as u64).map_err(option)?;
                usize::try_from(v)
                    .map_err(|_| option(Error::Value(format!("{} {v}: too large", name.name()))))
            })
            .transpose()
    };
    // A string names a workload as the CLI does; an array is A itself (any float64 layout, read
    // in logical order).
    let workload = match workload {
        None => parsed(WorkloadSpec::parse("prefix", cooldown.as_deref()))?,
        Some(w) => match w.extract::<String>() {
            Ok(spec) => parsed(WorkloadSpec::parse(&spec, cooldown.as_deref()))?,
            Err(_) => {
                let a = intake::f64_matrix(&w, "workload", intake::physical_memory(py)).map_err(
                    |e| match e {
                        Error::Type(_) => Error::Type(format!(
                            "workload: expected `prefix`, `momentum:BETA`, `npy:PATH` or a 2-D \
                             float64 numpy array, got {}",
                            w.getattr("dtype")
                                .map(|d| format!("an array of {d}"))
                                .unwrap_or_else(|_| w.get_type().to_string())
                        )),
                        e => e,
                    },
                )?;
                if let Some(c) = cooldown.as_deref() {
                    return Err(Error::Option(
                        OptionError::new(
                            Opt::Cooldown,
                            c,
                            "applies to {workload} momentum:BETA only",
                        )
                        .render(Spelling::Python),
                    )
                    .into());
                }
                let label = format!("numpy array {}×{}", a.nrows(), a.ncols());
                WorkloadSpec::Matrix { label, matrix: a }
            }
        },
    };
    let request = Options {
        workload: Some(workload),
        steps: size(steps, Opt::Steps, 1, MAX_STEPS)?,
        epochs: size(epochs, Opt::Epochs, 1, MAX_STEPS)?,
        min_sep: size(min_sep, Opt::MinSep, 1, MAX_STEPS)?,
        every: size(every, Opt::Every, 1, MAX_STEPS)?,
        neighbouring: Some(parsed(parse_neighbouring(neighbouring))?),
        form: form.map(|f| parsed(FormKind::parse(f))).transpose()?,
        stamps: text(stamps.as_ref())?
            .map(|t| parsed(Stamps::parse(&t)))
            .transpose()?,
        bands: text(bands.as_ref())?
            .map(|t| parsed(BandsChoice::parse(&t)))
            .transpose()?,
        max_bands: size(max_bands, Opt::MaxBands, 1, MAX_STEPS)?,
        toeplitz,
        buffers: size(buffers, Opt::Buffers, 1, MAX_BUFFERS)?,
        horizon: text(horizon.as_ref())?
            .map(|t| parsed(Horizon::parse(&t)))
            .transpose()?,
        band: size(band, Opt::Band, 1, MAX_STEPS)?,
        rank: size(rank, Opt::Rank, 0, MAX_STEPS)?,
        refine: size(refine, Opt::Refine, 0, MAX_REFINE)?,
        gap,
        objective: objective.map(|o| parsed(Objective::parse(o))).transpose()?,
        clip_norm: Some(clip_norm),
        epsilon,
        delta,
        noise_multiplier,
        sampling_prob,
        dataset_size: size(dataset_size, Opt::DatasetSize, 1, usize::MAX)?.map(|n| n as u64),
        batch_size,
        force,
    }
    .request()
    .map_err(|e| Error::Option(e.render(Spelling::Python)))?;
    // Where progress lines go: `progress=False` drops them, a callable receives them, and by
    // default they are written to `sys.stderr` as the CLI does (once a second, from the first
    // second on, so a short compile prints nothing).
    let report_progress = match &progress {
        Some(p) if p.is_callable() => Some(p.clone().unbind()),
        Some(p) if !p.is_truthy()? => None,
        Some(p) if !p.is(pyo3::types::PyBool::new(py, true)) => {
            return Err(Error::Type(format!(
                "progress: expected None, True, False or a callable taking a str, got {}",
                p.get_type()
            ))
            .into());
        }
        // `sys.stderr` may be None (pythonw): then there is nowhere to write.
        _ => py
            .import("sys")?
            .getattr("stderr")?
            .getattr("write")
            .ok()
            .map(Bound::unbind),
    };
    let is_stderr = !progress.as_ref().is_some_and(|p| p.is_callable());
    // The compile runs on a worker thread; this one looks for Python's Ctrl-C every 50 ms (a
    // signal reaches only Python code), stopping the compile at its next iteration, and passes
    // the latest progress line on.
    let latest: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    // Warnings (a long compile's estimate, given before any work) are raised as they come.
    let pending: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let warn = |py: Python<'_>, line: String| -> PyResult<()> {
        let category = py.get_type::<PyUserWarning>();
        let message = std::ffi::CString::new(line).unwrap_or_default();
        PyErr::warn(py, &category, &message, 1)
    };
    let (compiled, warnings, interrupted) = py.detach(|| {
        let _running = Running::enter();
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                run_compile(&request, &mut |event| match event {
                    Event::Warning(line) => {
                        if let Ok(mut lines) = pending.lock() {
                            lines.push(line);
                        }
                    }
                    Event::Progress(line) => {
                        if let Ok(mut slot) = latest.lock() {
                            *slot = Some(line);
                        }
                    }
                })
            });
            let started = std::time::Instant::now();
            let mut shown = started;
            let mut polled = started;
            let mut interrupted = None;
            while !worker.is_finished() {
                // A short compile returns within 5 ms; signals and progress every 50 ms.
                std::thread::sleep(std::time::Duration::from_millis(5));
                if polled.elapsed() < std::time::Duration::from_millis(50) {
                    continue;
                }
                polled = std::time::Instant::now();
                if interrupted.is_some() {
                    // Another compile's end may have cleared the flag: keep it set.
                    mfc_compiler::interrupt::interrupt();
                    continue;
                }
                let due = !is_stderr
                    || (started.elapsed().as_secs_f64() >= 1.0
                        && shown.elapsed().as_secs_f64() >= 1.0);
                let line = if due {
                    latest.lock().ok().and_then(|mut slot| slot.take())
                } else {
                    None
                };
                let warnings: Vec<String> = pending
                    .lock()
                    .map(|mut lines| lines.drain(..).collect())
                    .unwrap_or_default();
                let checked = Python::attach(|py| -> PyResult<()> {
                    for line in warnings {
                        warn(py, line)?;
                    }
                    py.check_signals()?;
                    if let (Some(line), Some(sink)) = (line, &report_progress) {
                        let text = if is_stderr {
                            format!(
                                "mfc compile: {:.0} s: {line}\n",
                                started.elapsed().as_secs_f64()
                            )
                        } else {
                            line
                        };
                        sink.call1(py, (text,))?;
                        shown = std::time::Instant::now();
                    }
                    Ok(())
                });
                if let Err(e) = checked {
                    mfc_compiler::interrupt::interrupt();
                    interrupted = Some(e);
                }
            }
            let compiled = worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            let warnings: Vec<String> = pending
                .lock()
                .map(|mut lines| lines.drain(..).collect())
                .unwrap_or_default();
            (compiled, warnings, interrupted)
        })
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    for line in warnings {
        warn(py, line)?;
    }
    let compiled = compiled.map_err(refusal)?;
    let report = compiled.json(None);
    Ok(Mechanism::parse(
        compiled.blob,
        Some((report, compiled.workload, compiled.steps)),
    )?)
}
