//! `mfc.Stream`: the runtime's stream of a blob, one private release per step, with the same
//! checks, clipping and noise as on a device; the same blob and seed release what
//! `mfc simulate` and the device release, bit for bit.
//!
//! A batch (`m × d`) is `m` consecutive steps. It is checked whole — shape, finiteness, the steps
//! left, the clip factor — before the first of its steps, so a refused batch, like a refused
//! row, leaves the stream exactly as it was.

use core::ops::Range;

use mfc_formats::Mechanism as Blob;
use mfc_runtime::{ChaChaNoise, ReleaseCounter};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::{Error, Result};
use crate::mechanism::Mechanism;
use crate::owned::OwnedReplay;
use crate::replay::{form_name, shardable, takes_inputs};

/// The epoch recorded in and required of checkpoints: a Python stream's seed is its key itself
/// (no device root and epoch derive it), so every checkpoint is of "epoch 1" and the key check
/// of `restore` is what binds a checkpoint to its seed.
const EPOCH: u64 = 1;

/// The noise source of `seed`: 32 bytes, or 64 hexadecimal digits as `mfc simulate --seed`
/// takes them; OS entropy when absent.
fn noise(seed: Option<&Bound<'_, PyAny>>) -> Result<ChaChaNoise> {
    let Some(seed) = seed else {
        return Ok(ChaChaNoise::from_os_entropy()?);
    };
    let key: [u8; 32] = if let Ok(bytes) = seed.extract::<Vec<u8>>() {
        if seed.is_instance_of::<pyo3::types::PyString>() {
            return Err(Error::Type(
                "seed: 32 bytes or a str of 64 hex digits".into(),
            ));
        }
        bytes
            .as_slice()
            .try_into()
            .map_err(|_| Error::Value(format!("seed: expected 32 bytes, got {}", bytes.len())))?
    } else if let Ok(hex) = seed.extract::<String>() {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::Value(format!(
                "seed: expected 64 hexadecimal digits (0-9, a-f, A-F), got `{hex}` ({} characters)",
                hex.chars().count()
            )));
        }
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let digit = |b: u8| char::from(b).to_digit(16).unwrap_or(0) as u8;
            *byte = digit(pair[0]) << 4 | digit(pair[1]);
        }
        key
    } else {
        return Err(Error::Type(
            "seed: expected 32 bytes or a str of 64 hex digits".into(),
        ));
    };
    Ok(ChaChaNoise::from_seed(key)?)
}

/// A float32 array's values, in place when C-contiguous (else copied once), and its shape.
enum Rows<'py> {
    Borrowed(numpy::PyReadonlyArrayDyn<'py, f32>),
    Copied(Vec<f32>),
}

impl Rows<'_> {
    fn slice(&self) -> &[f32] {
        match self {
            Rows::Borrowed(a) => a.as_slice().unwrap_or(&[]),
            Rows::Copied(v) => v,
        }
    }
}

fn rows<'py>(x: &Bound<'py, PyAny>, what: &str) -> Result<(Rows<'py>, Vec<usize>)> {
    let array = x.cast::<PyArrayDyn<f32>>().map_err(|_| {
        let dtype = x
            .getattr("dtype")
            .map(|d| d.to_string())
            .unwrap_or_else(|_| x.get_type().to_string());
        Error::Type(format!(
            "{what}: expected a float32 numpy array, got {dtype} (convert with x.astype(numpy.float32))"
        ))
    })?;
    let shape = array.shape().to_vec();
    let readonly = array.readonly();
    if readonly.as_slice().is_ok() {
        return Ok((Rows::Borrowed(readonly), shape));
    }
    Ok((
        Rows::Copied(readonly.as_array().iter().copied().collect()),
        shape,
    ))
}

/// A private stream of a mechanism: `step(x)` releases the private prefix sum (or, for BandMF
/// under another workload, the noised input) of each row, clipped to the blob's `ζ`.
#[pyclass(module = "mfc")]
pub struct Stream {
    inner: OwnedReplay,
    row_dim: usize,
    shard: Option<(usize, usize)>,
    takes_inputs: bool,
    form: &'static str,
    clip_norm: f64,
}

impl Stream {
    /// `(rows, d)` of an input of `shape`: one row (`(d,)`) or a batch (`(m, d)`).
    fn batch(&self, shape: &[usize], what: &str) -> Result<(usize, bool)> {
        let d = self.inner.get().dim();
        match *shape {
            [n] if n == d => Ok((1, false)),
            [m, n] if n == d => Ok((m, true)),
            _ => Err(Error::Value(format!(
                "{what}: expected shape ({d},) or (m, {d}), got {shape:?}"
            ))),
        }
    }

    /// Refuses a batch of `m` steps when fewer remain, before any of them runs.
    fn check_left(&self, m: usize) -> Result<()> {
        let s = self.inner.get();
        let left = (s.horizon() - s.steps_released()) as usize;
        if m > left && m > 1 {
            return Err(Error::Value(format!(
                "a batch of {m} rows needs {m} steps; the stream has {left} of its {} left",
                s.horizon()
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl Stream {
    /// A stream of `mechanism` for rows of `dim` coordinates. `seed`: 32 bytes or 64 hex digits
    /// (for reproducible simulations only: whoever knows it knows the noise); OS entropy when
    /// absent. `shard=(start, end)`: only coordinates `start..end` of each row (banded and BandMF
    /// blobs), whose releases equal those coordinates of the unsharded stream with the same
    /// seed; its `step` needs the whole row's `clip` factor. `noise_multiplier`: override the
    /// blob's `σ` (the blob's `(ε, δ)` then no longer applies). The blob's recorded sensitivity
    /// is checked first as a device checks it (`Mechanism.verify`): `StreamError` if it is
    /// understated, a `UserWarning` if it cannot be checked.
    #[new]
    #[pyo3(signature = (mechanism, dim, seed=None, *, shard=None, noise_multiplier=None))]
    fn new(
        py: Python<'_>,
        mechanism: &Mechanism,
        dim: usize,
        seed: Option<Bound<'_, PyAny>>,
        shard: Option<(usize, usize)>,
        noise_multiplier: Option<f64>,
    ) -> PyResult<Self> {
        let noise = noise(seed.as_ref())?;
        let blob = mechanism.blob();
        let m = Blob::from_bytes(blob).map_err(Error::from)?;
        // The device's check first, as `mfc simulate` does (with the GIL released: it may take
        // seconds): a blob recording less sensitivity than its coefficients have is refused
        // before any step; one the runtime cannot check is replayed with a warning.
        let verification = py.detach(|| mfc_compiler::verdict::check(&m));
        if let Some(e) = verification.refusal {
            return Err(Error::Runtime(e).into());
        }
        if verification.json["verdict"] == "unverifiable" {
            let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
            let message = std::ffi::CString::new(format!("sensitivity {}", verification.text))
                .unwrap_or_default();
            PyErr::warn(py, &category, &message, 1)?;
        }
        let form = form_name(&m);
        if shard.is_some() && !shardable(&m) {
            return Err(Error::Value(format!(
                "shard: the {form} form has no shards (the banded and bandmf forms have)"
            ))
            .into());
        }
        let takes_inputs = takes_inputs(&m);
        let clip_norm = m.header.clip_norm;
        let range: Option<Range<usize>> = shard.map(|(a, b)| a..b);
        let inner = py.detach(|| OwnedReplay::open(blob, dim, range, noise, noise_multiplier))?;
        Ok(Self {
            inner,
            row_dim: dim,
            shard,
            takes_inputs,
            form,
            clip_norm,
        })
    }

    /// Steps `x` through the stream: a float32 row of `d` values gives one release, an `(m, d)`
    /// batch `m` consecutive releases (same shape). C-contiguous float32 input is read in place,
    /// with the GIL released: do not write to `x` from another thread meanwhile. `clip`: the
    /// whole row's clip factor (`mfc.clip_factor`), required by a shard (which steps one row at
    /// a time) and refused elsewhere. Raises, with the stream unchanged: `TypeError` for another dtype,
    /// `MfcError` for a wrong shape, a non-finite value or too few steps left, `StreamError`
    /// for the runtime's refusals.
    #[pyo3(signature = (x, clip=None))]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        clip: Option<f32>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !self.takes_inputs {
            return Err(Error::Value(
                "step: this banded blob's workload is not the prefix sum, so the runtime \
                 releases its noise only: call step_noise() and add it to your own (A x)_i"
                    .into(),
            )
            .into());
        }
        let (input, shape) = rows(x, "step")?;
        let (m, batched) = self.batch(&shape, "step")?;
        // A clip factor from the caller is trusted: only a shard, which cannot see the whole
        // row, takes one, and only for one row (each row has its own factor).
        if clip.is_some() && self.shard.is_none() {
            return Err(Error::Value(
                "step: clip is for shards only (the whole row's factor, from an all-reduce); \
                 an unsharded stream clips each row to ζ itself"
                    .into(),
            )
            .into());
        }
        if clip.is_some() && batched {
            return Err(Error::Value(format!(
                "step: a shard steps one row at a time with that row's clip factor; got a batch \
                 of {m} rows"
            ))
            .into());
        }
        self.check_left(m)?;
        let d = self.inner.get().dim();
        let values = input.slice();
        if batched && m > 1 {
            if let Some(at) = values.iter().position(|v| !v.is_finite()) {
                let refusal = mfc_runtime::Error::NonFiniteInput { index: at % d };
                return Err(Error::Value(format!("step: row {}: {refusal}", at / d)).into());
            }
            if clip.is_some_and(|c| !(0.0..=1.0).contains(&c)) {
                return Err(Error::Runtime(mfc_runtime::Error::InvalidClipFactor).into());
            }
        }
        let mut out = vec![0.0f32; values.len()];
        let inner = &mut self.inner;
        py.detach(|| {
            inner.with(|s| {
                for (row, release) in values.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                    match clip {
                        Some(c) => s.step_clipped(row, c, release)?,
                        None => s.step(row, release)?,
                    }
                }
                Ok::<(), mfc_runtime::Error>(())
            })
        })
        .map_err(Error::from)?;
        let out = PyArray1::from_vec(py, out);
        Ok(if batched {
            out.reshape([m, d])?.into_any()
        } else {
            out.into_any()
        })
    }

    /// A training step: `examples` is `(m, d)` float32, the step's `m` examples; each is clipped
    /// to `ζ` by itself (the unit of privacy is the example) and their sum enters the stream.
    /// Returns the step's release.
    fn step_examples<'py>(
        &mut self,
        py: Python<'py>,
        examples: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let (input, shape) = rows(examples, "step_examples")?;
        let d = self.inner.get().dim();
        if !matches!(*shape, [_, n] if n == d) {
            return Err(Error::Value(format!(
                "step_examples: expected shape (m, {d}), got {shape:?}"
            ))
            .into());
        }
        let values = input.slice();
        let mut out = vec![0.0f32; d];
        let inner = &mut self.inner;
        py.detach(|| inner.with(|s| s.step_examples(values, &mut out)))
            .map_err(Error::from)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// Advances one step and returns only the noise `σ·ζ·sens·(B̂ z)_i` (banded and FFT blobs):
    /// for a workload other than the prefix sum, whose `(A x)_i` the caller computes from inputs
    /// it clipped itself.
    fn step_noise<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let d = self.inner.get().dim();
        let mut out = vec![0.0f32; d];
        let inner = &mut self.inner;
        py.detach(|| inner.with(|s| s.step_noise(&mut out)))
            .map_err(Error::from)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// The stream's state as bytes (every form; the runtime's checkpoint format):
    /// a fresh stream of the same mechanism, `dim`, shard and seed continues from it with
    /// `restore`, bit for bit. Keep it secret: with the seed it reveals the running sum.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let Some(fingerprint) = self.inner.fingerprint() else {
            return Err(Error::Value(format!(
                "checkpoint: the {} form has no checkpoints",
                self.form
            ))
            .into());
        };
        let s = self.inner.get();
        let counter = ReleaseCounter::new(EPOCH, s.steps_released());
        let mut out = vec![0u8; s.checkpoint_capacity()];
        let len = s
            .checkpoint(fingerprint, &counter, &mut out)
            .map_err(Error::from)?;
        Ok(PyBytes::new(py, out.get(..len).unwrap_or(&[])))
    }

    /// Loads a checkpoint into this fresh stream (same mechanism, `dim`, shard and seed as the
    /// stream that wrote it). `released`: the steps already released, as the caller keeps
    /// them in durable storage; a checkpoint behind it is refused, since computing its later
    /// steps again would release them twice. Raises `StreamError` with the stream unchanged.
    #[pyo3(signature = (checkpoint, *, released))]
    fn restore(&mut self, checkpoint: &[u8], released: u32) -> PyResult<()> {
        let form = self.form;
        let counter = ReleaseCounter::new(EPOCH, released);
        self.inner
            .with_fingerprint(|s, fingerprint| match fingerprint {
                Some(fingerprint) => s
                    .restore(fingerprint, checkpoint, &counter)
                    .map_err(Error::from),
                None => Err(Error::Value(format!(
                    "restore: the {form} form has no checkpoints"
                ))),
            })?;
        Ok(())
    }

    /// For `bench/step.py` only: one step of the C-contiguous float32 row `x`, returning the
    /// seconds the runtime's step took by itself (no conversion, allocation or GIL hand-off), the
    /// reference a Python `step` is compared with.
    fn _step_seconds(&mut self, x: numpy::PyReadonlyArray1<'_, f32>) -> PyResult<f64> {
        let input = x
            .as_slice()
            .map_err(|_| Error::Value("_step_seconds: x must be C-contiguous".into()))?;
        let mut out = vec![0.0f32; input.len()];
        let started = std::time::Instant::now();
        self.inner
            .with(|s| s.step(input, &mut out))
            .map_err(Error::from)?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// Steps released so far.
    #[getter]
    fn steps_released(&self) -> u32 {
        self.inner.get().steps_released()
    }

    /// The horizon `n`: the stream refuses step `n + 1`.
    #[getter]
    fn horizon(&self) -> u32 {
        self.inner.get().horizon()
    }

    /// Coordinates of each input row this stream takes (a shard's: `end - start`).
    #[getter]
    fn dim(&self) -> usize {
        self.inner.get().dim()
    }

    /// Coordinates of the whole row.
    #[getter]
    fn row_dim(&self) -> usize {
        self.row_dim
    }

    /// `(start, end)` of a shard, or `None`.
    #[getter]
    fn shard(&self) -> Option<(usize, usize)> {
        self.shard
    }

    /// The decoder form: `banded`, `blt`, `fft` or `bandmf`.
    #[getter]
    fn form(&self) -> &'static str {
        self.form
    }

    /// `ζ`, the clip norm recorded in the blob.
    #[getter]
    fn clip_norm(&self) -> f64 {
        self.clip_norm
    }

    fn __repr__(&self) -> String {
        let s = self.inner.get();
        format!(
            "Stream(form={}, dim={}, shard={:?}, step {}/{})",
            self.form,
            s.dim(),
            self.shard,
            s.steps_released(),
            s.horizon()
        )
    }
}
