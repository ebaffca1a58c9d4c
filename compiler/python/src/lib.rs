//! `mfc` for Python: PyO3 bindings over the compiler ([`mfc_compiler::pipeline`], the pipeline
//! of `mfc compile`) and the runtime (the streams a device runs), so that a Python job compiles
//! a mechanism in one call and replays its blob bit for bit as `mfc simulate` and the device
//! do. The Python package (`python/mfc`) re-exports this module, `_mfc`, with type stubs.
//!
//! Long calls (compiling, stepping a stream) release the GIL. Float32 inputs that are already
//! C-contiguous are read in place; errors become `mfc.MfcError` subclasses (a `ValueError`)
//! carrying the library's message, or `TypeError` for a wrong dtype.

mod dense;
mod error;
mod mechanism;
mod owned;
mod replay;
mod stream;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{BlobError, CompileError, Error, MfcError, StreamError};

/// `σ` for `(ε, δ)`, or `ε` for `(σ, δ)`, for a mechanism normalized to sensitivity 1 (the exact
/// analytic Gaussian calibration of `mfc calibrate`), with zCDP `ρ = 1/(2σ²)` and what the
/// `(ε, δ)` is for (`privacy_unit`).
#[pyfunction]
#[pyo3(signature = (*, delta, epsilon=None, noise_multiplier=None))]
fn calibrate<'py>(
    py: Python<'py>,
    delta: f64,
    epsilon: Option<f64>,
    noise_multiplier: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    use mfc_compiler::calibrate::{epsilon_for_noise_multiplier, noise_multiplier_for, zcdp_rho};
    let refuse = |why: String| Error::Compiler(mfc_compiler::Error::InvalidOption(why));
    let (epsilon, sigma) = match (epsilon, noise_multiplier) {
        (Some(eps), None) => {
            let sigma = noise_multiplier_for(eps, delta)
                .ok_or_else(|| refuse(format!("no σ for ε = {eps}, δ = {delta}")))?;
            (eps, sigma)
        }
        (None, Some(sigma)) => {
            let eps = epsilon_for_noise_multiplier(sigma, delta)
                .ok_or_else(|| refuse(format!("no ε for σ = {sigma}, δ = {delta}")))?;
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
    out.set_item("privacy_unit", mfc_compiler::calibrate::PRIVACY_UNIT)?;
    Ok(out)
}

/// The runtime's clip factor `min(1, ζ/‖x‖)` of a whole float32 row, exactly as a stream
/// computes it: what a shard's `step(x, clip=...)` needs from the whole row.
#[pyfunction]
fn clip_factor(row: numpy::PyReadonlyArray1<'_, f32>, clip_norm: f32) -> PyResult<f32> {
    let row = row.as_array();
    Ok(match row.as_slice() {
        Some(slice) => mfc_runtime::clip_factor(slice, clip_norm),
        None => mfc_runtime::clip_factor(&row.to_vec(), clip_norm),
    })
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
    Ok(())
}
