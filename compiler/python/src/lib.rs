//! `mfc` for Python: PyO3 bindings over the compiler ([`mfc_compiler::compile`], the pipeline
//! of `mfc compile`) and the runtime (the streams a device runs), so that a Python job compiles
//! a mechanism in one call and replays its blob bit for bit as `mfc simulate` and the device
//! do. The Python package (`python/mfc`) re-exports this module, `_mfc`, with type stubs.
//!
//! Long calls (compiling, stepping a stream) release the GIL. Arrays go through [`intake`]:
//! float32 inputs that are C-contiguous, aligned and native-endian are read in place, any other
//! layout is copied in logical order first; sizes are checked before anything is allocated.
//! Errors become `mfc.MfcError` subclasses (a `ValueError`) carrying the library's message,
//! `TypeError` for a wrong type, the `OSError` subclass of a file's failure, `MemoryError` for
//! an allocation too large; no Rust panic is meant to reach Python.

mod dense;
mod error;
mod intake;
mod mechanism;
mod owned;
mod privacy;
mod stream;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{BlobError, CompileError, Error, MfcError, StreamError};

/// σ for (ε, δ), or ε for (σ, δ), of a mechanism normalized to sensitivity 1 (the exact
/// analytic Gaussian calibration of `mfc calibrate`), with zCDP ρ = 1/(2σ²) and what the (ε, δ)
/// is for (`privacy_unit`: per record, under the participation schema and neighbouring relation
/// of the blob the σ goes into).
///
/// With `sampling_prob` and `steps` (and `bands`): DP-SGD (`bands=1`) or amplified BandMF
/// (the data in `bands` groups, step i Poisson-samples group i mod bands), by the accountant
/// (privacy loss distributions, pessimistic: the ε is an upper bound), add-remove neighbours, one
/// example the unit; the result then has `sampling_prob`, `steps`, `bands` and
/// `participations` instead of `zcdp_rho`, and `privacy_unit` states the scheme.
///
/// Args:
///     delta: δ, a number in (0, 1). Required.
///     epsilon: the target ε, a finite number > 0: the result's `noise_multiplier` is the σ
///         reaching it. Give `epsilon` or `noise_multiplier`, not both. Default None.
///     noise_multiplier: σ, a finite number > 0: the result's `epsilon` is its ε at `delta`
///         (refused beyond ε = 10⁴). Default None.
///     sampling_prob: q, the probability that a step samples each record of its group, in
///         (0, 1]; needs `steps`. Default None: no sampling (the analytic Gaussian relation).
///     steps: the training steps n, an integer >= 1; with `sampling_prob` only. Default None.
///     bands: b̂, the groups of cyclic Poisson sampling (BandMF's bands), an integer in
///         1..=steps; with `sampling_prob` only. Default None, meaning 1 (DP-SGD).
///
/// A refusal is a `CompileError` (a `ValueError`) naming the keyword, its value and the range.
#[pyfunction]
#[pyo3(signature = (*, delta, epsilon=None, noise_multiplier=None, sampling_prob=None, steps=None, bands=None))]
fn calibrate<'py>(
    py: Python<'py>,
    delta: f64,
    epsilon: Option<f64>,
    noise_multiplier: Option<f64>,
    sampling_prob: Option<f64>,
    steps: Option<u64>,
    bands: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    use mfc_compiler::privacy::calibrate::{
        epsilon_for_noise_multiplier, noise_multiplier_for, zcdp_rho,
    };
    let refuse = Error::Option;
    match (sampling_prob, steps) {
        (Some(q), Some(n)) => {
            return calibrate_amplified(py, delta, epsilon, noise_multiplier, q, n, bands);
        }
        (Some(_), None) => {
            return Err(
                refuse("sampling_prob: needs steps (the number of training steps)".into()).into(),
            );
        }
        (None, Some(_)) | (None, None) if bands.is_some() || steps.is_some() => {
            return Err(refuse(
                "steps, bands: apply with sampling_prob only (amplified BandMF, DP-SGD)".into(),
            )
            .into());
        }
        _ => {}
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(refuse(format!("delta={delta:?}: expected a number in (0, 1)")).into());
    }
    if let Some(eps) = epsilon
        && !(eps.is_finite() && eps > 0.0)
    {
        return Err(refuse(format!("epsilon={eps:?}: expected a finite number > 0")).into());
    }
    if let Some(sigma) = noise_multiplier
        && !(sigma.is_finite() && sigma > 0.0)
    {
        return Err(refuse(format!(
            "noise_multiplier={sigma:?}: expected a finite number > 0"
        ))
        .into());
    }
    let (epsilon, sigma) = match (epsilon, noise_multiplier) {
        (Some(eps), None) => {
            let sigma = noise_multiplier_for(eps, delta).ok_or_else(|| {
                refuse(format!(
                    "epsilon={eps:?}, delta={delta:?}: no noise multiplier σ ≤ 10⁸ reaches it"
                ))
            })?;
            (eps, sigma)
        }
        (None, Some(sigma)) => {
            let eps = epsilon_for_noise_multiplier(sigma, delta).ok_or_else(|| {
                refuse(format!(
                    "noise_multiplier={sigma:?}, delta={delta:?}: ε exceeds 10⁴ (no meaningful \
                         guarantee)"
                ))
            })?;
            (eps, sigma)
        }
        _ => {
            return Err(refuse(
                "calibrate: give either epsilon or noise_multiplier (with delta)".into(),
            )
            .into());
        }
    };
    let out = PyDict::new(py);
    out.set_item("epsilon", epsilon)?;
    out.set_item("delta", delta)?;
    out.set_item("noise_multiplier", sigma)?;
    out.set_item("zcdp_rho", zcdp_rho(sigma))?;
    out.set_item(
        "privacy_unit",
        mfc_compiler::privacy::calibrate::PRIVACY_UNIT,
    )?;
    Ok(out)
}

/// `calibrate` with `sampling_prob`: the accountant's `σ` or `ε` for DP-SGD or amplified BandMF.
fn calibrate_amplified<'py>(
    py: Python<'py>,
    delta: f64,
    epsilon: Option<f64>,
    noise_multiplier: Option<f64>,
    sampling_prob: f64,
    steps: u64,
    bands: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    use mfc_compiler::privacy::accountant::bandmf::AmplifiedBandMf;
    use mfc_compiler::privacy::accountant::{AccountantError, PldOptions};
    use mfc_compiler::request::Spelling;
    let refuse = |e: AccountantError| Error::Option(e.option_error().render(Spelling::Python));
    let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let scheme = AmplifiedBandMf::new(size(steps), size(bands.unwrap_or(1)), sampling_prob)
        .map_err(refuse)?;
    let options = PldOptions::default();
    let (epsilon, sigma) = match (epsilon, noise_multiplier) {
        (Some(eps), None) => (
            eps,
            py.detach(|| scheme.noise_multiplier(eps, delta, &options))
                .map_err(refuse)?,
        ),
        (None, Some(sigma)) => (
            py.detach(|| scheme.epsilon(sigma, delta, &options))
                .map_err(refuse)?,
            sigma,
        ),
        _ => {
            return Err(Error::Option(
                "calibrate: give either epsilon or noise_multiplier (with delta)".into(),
            )
            .into());
        }
    };
    let out = PyDict::new(py);
    out.set_item("epsilon", epsilon)?;
    out.set_item("delta", delta)?;
    out.set_item("noise_multiplier", sigma)?;
    out.set_item("sampling_prob", sampling_prob)?;
    out.set_item("steps", steps)?;
    out.set_item("bands", scheme.bands())?;
    out.set_item("participations", scheme.participations())?;
    out.set_item("privacy_unit", scheme.describe())?;
    Ok(out)
}

/// `ζ` as a stream applies it: rounded **down** to `f32` (`mfc_runtime`'s `setup::clip_norm`),
/// not to nearest as a Python float's conversion would. A `ζ` the blob records, e.g. 0.1, then
/// gives the factors the stream computes itself; an `f32` value is kept as it is. A `ζ` that is
/// not positive and finite is passed on, and the runtime's factor is 0 for it.
fn stream_clip_norm(clip_norm: f64) -> f32 {
    let nearest = clip_norm as f32;
    if clip_norm.is_finite() && clip_norm > 0.0 && f64::from(nearest) > clip_norm {
        // The next float32 toward zero (`nearest` is positive; from +inf, f32::MAX).
        f32::from_bits(nearest.to_bits() - 1)
    } else {
        nearest
    }
}

/// The runtime's clip factor min(1, ζ/‖row‖) of a whole float32 row, exactly as a stream
/// computes it: what a shard's `step(x, clip=...)` needs from the whole row.
///
/// Args:
///     row: the whole row, a 1-D float32 numpy array of any layout (another dtype: `TypeError`;
///         another number of dimensions: `MfcError`).
///     clip_norm: ζ, the clip norm (the blob's `clip_norm`), a number in [2⁻⁶⁴, 2⁶⁴], the
///         clip norms the runtime clips exactly; rounded down to float32 as a stream rounds the
///         blob's ζ, so `stream.clip_norm` gives the stream's own factor.
///
/// Returns the factor, a float in [0, 1]: 0 for a ζ outside that range or a non-finite row
/// (which a stream refuses).
#[pyfunction]
fn clip_factor(row: &Bound<'_, PyAny>, clip_norm: f64) -> PyResult<f32> {
    let clip_norm = stream_clip_norm(clip_norm);
    let row = intake::f32_array(row, "row")?;
    if row.shape.len() != 1 {
        return Err(Error::Value(format!(
            "row: expected a 1-D float32 array, got shape {:?}",
            row.shape
        ))
        .into());
    }
    Ok(mfc_runtime::clip_factor(row.values()?, clip_norm))
}

/// The runtime's clip factor `min(1, ζ/‖x_e‖)` of each row `x_e` of `examples`, exactly as an
/// unsharded `Stream.step_examples` computes it for each whole example: the `(m,)` float32
/// `clips` a shard's `step_examples` needs.
///
/// Args:
///     examples: `(m, d)` float32, the whole examples (any layout, read in logical order;
///         another dtype: `TypeError`).
///     clip_norm: ζ, as for `clip_factor` (rounded down to float32 as a stream rounds it).
#[pyfunction]
fn clip_factors<'py>(
    py: Python<'py>,
    examples: &Bound<'py, PyAny>,
    clip_norm: f64,
) -> PyResult<Bound<'py, numpy::PyArray1<f32>>> {
    let clip_norm = stream_clip_norm(clip_norm);
    let examples = intake::f32_array(examples, "examples")?;
    let [m, d] = *examples.shape else {
        return Err(Error::Value(format!(
            "examples: expected a 2-D float32 array (m, d), got shape {:?}",
            examples.shape
        ))
        .into());
    };
    let values = examples.values()?;
    let factors: Vec<f32> = if d == 0 {
        // Rows of no coordinates (`chunks_exact` takes no empty chunks).
        vec![mfc_runtime::clip_factor(&[], clip_norm); m]
    } else {
        py.detach(|| {
            values
                .chunks_exact(d)
                .map(|row| mfc_runtime::clip_factor(row, clip_norm))
                .collect()
        })
    };
    Ok(numpy::PyArray1::from_vec(py, factors))
}

/// For the tests of layouts only: whether `x`, a numpy array, would be read in place (C-contiguous,
/// aligned, native byte order) rather than copied in logical order first.
#[pyfunction]
fn _reads_in_place(x: &Bound<'_, PyAny>) -> PyResult<bool> {
    let array = x
        .cast::<numpy::PyUntypedArray>()
        .map_err(|_| Error::Type("_reads_in_place: expected a numpy array".into()))?;
    Ok(intake::reads_in_place(array))
}

/// The extension module.
#[pymodule]
fn _mfc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("MfcError", py.get_type::<MfcError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("BlobError", py.get_type::<BlobError>())?;
    m.add("StreamError", py.get_type::<StreamError>())?;
    m.add_class::<mechanism::Mechanism>()?;
    m.add_class::<stream::Stream>()?;
    m.add_function(wrap_pyfunction!(mechanism::compile, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(clip_factor, m)?)?;
    m.add_function(wrap_pyfunction!(clip_factors, m)?)?;
    m.add_function(wrap_pyfunction!(_reads_in_place, m)?)?;
    Ok(())
}
