//! `mfc.Stream`: the runtime's stream of a blob, one private release per step, with the same
//! checks, clipping and noise as on a device; the same blob and seed release what
//! `mfc simulate` and the device release, bit for bit.
//!
//! Opening a stream applies the device's policy: the blob's recorded sensitivity is checked
//! (`mfc_compiler::privacy::verdict::check`, the device's verification with the host's budget); an
//! understated one is refused, an unverifiable one too unless the caller passes
//! `allow_unverified=True`. A `noise_multiplier` below the blob's calibrated `σ` is refused
//! unless the caller passes `allow_lower_noise=True`; [`Stream::privacy`] reports the `(ε, δ)`
//! that then holds ([`crate::privacy`]).
//!
//! A batch (`m × d`) is `m` consecutive steps. It is checked whole — shape, finiteness, the range
//! clipping handles (`2^96·ζ`), the steps left, the clip factor — before the first of its steps,
//! so a refused batch, like a refused row, leaves the stream exactly as it was. One refusal can
//! come only midway: a BandMF blob whose encoder is numerically unstable refuses the step whose
//! release is not finite (`NonFiniteRelease`); the rows before it are then released and the
//! error says how many. Inputs go through [`crate::intake`]: read in place
//! only when C-contiguous, aligned and native float32, else converted in logical order.

use core::ops::Range;

use mfc_formats::Mechanism as Blob;
use mfc_runtime::noise::MAX_COORDINATES;
use mfc_runtime::{ChaChaNoise, ReleaseCounter, Shape};
use numpy::{PyArrayDyn, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::error::{Error, Result};
use crate::intake::{self, Array};
use crate::mechanism::{Mechanism, header_report};
use crate::owned::{OwnedReplay, form_name};
use crate::privacy::{StreamPrivacy, epsilon};

/// The epoch recorded in and required of checkpoints: a Python stream's seed is its key itself
/// (no device root and epoch derive it), so every checkpoint is of "epoch 1" and the key check
/// of `restore` is what binds a checkpoint to its seed.
const EPOCH: u64 = 1;

/// The noise source of `seed`: 32 bytes (`bytes`, `bytearray`, `memoryview`), or 64
/// hexadecimal digits as `mfc simulate --seed` takes them; OS entropy when absent.
fn noise(seed: Option<&Bound<'_, PyAny>>) -> Result<ChaChaNoise> {
    let Some(seed) = seed else {
        return Ok(ChaChaNoise::from_os_entropy()?);
    };
    let key: [u8; 32] = if let Ok(hex) = seed.extract::<String>() {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::Value(format!(
                "seed: expected 64 hexadecimal digits (0-9, a-f, A-F), got `{hex}` ({} characters)",
                hex.chars().count()
            )));
        }
        let digit = |b: u8| char::from(b).to_digit(16).unwrap_or(0) as u8;
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            if let [high, low] = *pair {
                *byte = digit(high) << 4 | digit(low);
            }
        }
        key
    } else {
        let bytes = intake::bytes(seed, "seed").map_err(|e| match e {
            Error::Type(_) => Error::Type(format!(
                "seed: expected 32 bytes or a str of 64 hex digits, got {}",
                seed.get_type()
            )),
            e => e,
        })?;
        bytes
            .as_slice()
            .try_into()
            .map_err(|_| Error::Value(format!("seed: expected 32 bytes, got {}", bytes.len())))?
    };
    Ok(ChaChaNoise::from_seed(key)?)
}

/// `(start, end)` of `shard`, checked: `0 ≤ start < end ≤ dim`.
fn shard_range(shard: &Bound<'_, PyAny>, dim: u64) -> Result<Range<usize>> {
    let refuse = || {
        Error::Value(format!(
            "shard: expected (start, end) with 0 ≤ start < end ≤ dim = {dim}, got {}",
            shard.str().map(|s| s.to_string()).unwrap_or_default()
        ))
    };
    let (start, end) = shard
        .extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()
        .map_err(|_| {
            Error::Type(format!(
                "shard: expected a tuple (start, end) of integers, got {}",
                shard.get_type()
            ))
        })?;
    let start = intake::size(&start, "shard start", 0, dim).map_err(|_| refuse())?;
    let end = intake::size(&end, "shard end", 0, dim).map_err(|_| refuse())?;
    if start >= end {
        return Err(refuse());
    }
    // Both at most `dim`, itself at most 2⁵¹: they fit a usize on every supported target.
    match (usize::try_from(start), usize::try_from(end)) {
        (Ok(a), Ok(b)) => Ok(a..b),
        _ => Err(refuse()),
    }
}

/// A private stream of a mechanism for rows of `dim` coordinates, as the device's runtime
/// replays it: `step(x)` releases the private prefix sum (or, for BandMF under another
/// workload, the noised input) of each row, clipped to the blob's ζ.
///
/// The blob's recorded sensitivity is checked first as a device checks it (`Mechanism.verify`):
/// `StreamError` if it is understated, and `StreamError` too if it cannot be checked (e.g. a
/// custom workload, or an FFT blob under min-separation) unless `allow_unverified=True`. The
/// workspace ((h + r + 2)·dim floats for a banded blob) is allocated fallibly: `MemoryError`
/// when it exceeds the machine's memory.
///
/// Args:
///     mechanism: the `Mechanism` whose blob the stream replays. Required.
///     dim: d, the coordinates of each row, an integer in 1..=2⁵¹ (`ValueError` naming it
///         otherwise). Required.
///     seed: the noise's key, 32 bytes (`bytes`, `bytearray`, `memoryview`) or 64 hex digits
///         as `mfc simulate --seed` takes them, for reproducible simulations only (whoever knows
///         it knows the noise). Default None: OS entropy.
///     shard: `(start, end)`, 0 <= start < end <= dim: only coordinates start..end of each row
///         (banded and bandmf blobs), whose releases equal those coordinates of the unsharded
///         stream with the same seed; its `step` then needs the whole row's `clip` factor.
///         Default None (the whole row).
///     noise_multiplier: replaces the blob's calibrated σ, a finite number > 0. At or above it
///         nothing more is needed; below it, `StreamError` (a `ValueError`) unless
///         `allow_lower_noise=True`. `privacy` reports the (ε, δ) recomputed from the stream's
///         σ at the blob's δ. Default None: the blob's σ.
///     allow_lower_noise: stream a `noise_multiplier` below the blob's, with a `UserWarning`
///         stating the weaker (ε, δ). Default False.
///     allow_unverified: stream a blob whose sensitivity cannot be verified, with a
///         `UserWarning`. Default False (refused). An understated blob is refused regardless.
///     sampler: the `CyclicPoissonSampling` the training loop draws its batches with; its
///         `check` refuses (`ValueError`) a blob of another scheme. Default None; a blob under
///         cyclic Poisson sampling streamed without one gives a `UserWarning`.
#[pyclass(module = "mfc")]
pub struct Stream {
    inner: OwnedReplay,
    row_dim: usize,
    shard: Option<(usize, usize)>,
    takes_inputs: bool,
    /// Whether the blob's workload is the prefix sum (its releases are prefix sums).
    prefix_sum: bool,
    form: &'static str,
    clip_norm: f64,
    privacy: StreamPrivacy,
    /// The machine's physical memory, the limit of the buffers a call allocates.
    memory: Option<u64>,
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
        let left = s.horizon().saturating_sub(s.steps_released()) as usize;
        if m > left && m > 1 {
            return Err(Error::Value(format!(
                "a batch of {m} rows needs {m} steps; the stream has {left} of its {} left",
                s.horizon()
            )));
        }
        Ok(())
    }

    /// A new float32 output array of `shape`, allocated fallibly (numpy's `MemoryError`).
    fn output<'py>(&self, py: Python<'py>, shape: &[usize]) -> Result<Bound<'py, PyArrayDyn<f32>>> {
        let elements = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        intake::check_bytes(elements, 4, "the release", self.memory)?;
        intake::empty(py, shape, "float32")
    }
}

#[pymethods]
impl Stream {
    /// A private stream of a mechanism for rows of `dim` coordinates, as the device's runtime
    /// replays it.
    ///
    /// The blob's recorded sensitivity is checked first as a device checks it (`Mechanism.verify`):
    /// `StreamError` if it is understated, and `StreamError` too if it cannot be checked (e.g. a
    /// custom workload, or an FFT blob under min-separation) unless `allow_unverified=True`. The
    /// workspace ((h + r + 2)·dim floats for a banded blob) is allocated fallibly: `MemoryError`
    /// when it exceeds the machine's memory.
    ///
    /// Args:
    ///     mechanism: the `Mechanism` whose blob the stream replays. Required.
    ///     dim: d, the coordinates of each row, an integer in 1..=2⁵¹ (`ValueError` naming it
    ///         otherwise). Required.
    ///     seed: the noise's key, 32 bytes (`bytes`, `bytearray`, `memoryview`) or 64 hex digits
    ///         as `mfc simulate --seed` takes them, for reproducible simulations only (whoever knows
    ///         it knows the noise). Default None: OS entropy.
    ///     shard: `(start, end)`, 0 <= start < end <= dim: only coordinates start..end of each row
    ///         (banded and bandmf blobs), whose releases equal those coordinates of the unsharded
    ///         stream with the same seed; its `step` then needs the whole row's `clip` factor.
    ///         Default None (the whole row).
    ///     noise_multiplier: replaces the blob's calibrated σ, a finite number > 0. At or above it
    ///         nothing more is needed; below it, `StreamError` (a `ValueError`) unless
    ///         `allow_lower_noise=True`. `privacy` reports the (ε, δ) recomputed from the stream's
    ///         σ at the blob's δ. Default None: the blob's σ.
    ///     allow_lower_noise: stream a `noise_multiplier` below the blob's, with a `UserWarning`
    ///         stating the weaker (ε, δ). Default False.
    ///     allow_unverified: stream a blob whose sensitivity cannot be verified, with a
    ///         `UserWarning`. Default False (refused). An understated blob is refused regardless.
    ///     sampler: the `CyclicPoissonSampling` the training loop draws its batches with; its
    ///         `check` refuses (`ValueError`) a blob of another scheme. Default None; a blob under
    ///         cyclic Poisson sampling streamed without one gives a `UserWarning`.
    #[new]
    #[pyo3(signature = (
        mechanism, dim, seed=None, *, shard=None, noise_multiplier=None,
        allow_lower_noise=false, allow_unverified=false, sampler=None
    ))]
    #[allow(clippy::too_many_arguments)] // the constructor's keywords, one each
    fn new(
        py: Python<'_>,
        mechanism: &Bound<'_, Mechanism>,
        dim: &Bound<'_, PyAny>,
        seed: Option<Bound<'_, PyAny>>,
        shard: Option<Bound<'_, PyAny>>,
        noise_multiplier: Option<f64>,
        allow_lower_noise: bool,
        allow_unverified: bool,
        sampler: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // The training loop's sampler must draw the scheme the blob is accounted for.
        if let Some(sampler) = &sampler {
            sampler.call_method1("check", (mechanism,))?;
        }
        let mechanism = mechanism.get();
        let dim_value = intake::size(dim, "dim", 1, MAX_COORDINATES)?;
        let range = shard
            .as_ref()
            .map(|s| shard_range(s, dim_value))
            .transpose()?;
        let dim = usize::try_from(dim_value).map_err(|_| {
            Error::Value(format!(
                "dim: {dim_value} is beyond this machine's address space"
            ))
        })?;
        if let Some(sigma) = noise_multiplier
            && !(sigma.is_finite() && sigma > 0.0)
        {
            return Err(Error::Value(format!(
                "noise_multiplier: expected a finite number > 0, got {sigma:?}"
            ))
            .into());
        }
        let noise = noise(seed.as_ref())?;
        let blob = mechanism.blob();
        let m = Blob::from_bytes(blob).map_err(Error::from)?;
        let form = form_name(&m);
        if range.is_some() && !Shape::of(&m).is_ok_and(Shape::shardable) {
            return Err(Error::Value(format!(
                "shard: the {form} form has no shards (the banded and bandmf forms have)"
            ))
            .into());
        }

        // The noise: the blob's σ unless the caller's is given; below the blob's only by name.
        let calibration = m.header.calibration;
        let blob_sigma = calibration.map(|c| c.noise_multiplier);
        let delta = calibration.and_then(|c| c.target).map(|t| t.delta);
        let sigma = noise_multiplier
            .or(blob_sigma)
            .ok_or(Error::Runtime(mfc_runtime::Error::NotCalibrated))?;
        let header = header_report(&m, blob.len())?;
        let (_, sampling) =
            mfc_compiler::report::stored_schema(&m.header.participation, m.header.steps)
                .map_err(Error::from)?;
        let text = |key: &str| header[key].as_str().unwrap_or("unknown").to_string();
        let mut privacy = StreamPrivacy {
            noise_multiplier: sigma,
            blob_noise_multiplier: blob_sigma,
            delta,
            privacy_unit: text("privacy_unit"),
            participation: text("participation"),
            neighbouring: text("neighbouring"),
            sampling,
            verified: false,
            verification: String::new(),
            epsilons: std::sync::OnceLock::new(),
        };
        if let (true, Some(blob_sigma)) = (privacy.lowered(), blob_sigma)
            && !allow_lower_noise
        {
            let at = |s: f64| match (epsilon(s, delta, privacy.sampling.as_ref()), delta) {
                (Some(eps), Some(d)) => format!("(ε, δ) = ({eps:.6}, {d:e})"),
                _ => "no (ε, δ) (the blob records no δ)".into(),
            };
            return Err(Error::Refused(format!(
                "noise_multiplier = {sigma:?} is below the blob's calibrated σ = {blob_sigma:?} \
                 ({} per record): with it the stream would give {}; pass \
                 allow_lower_noise=True to stream with less noise than calibrated, or a \
                 noise_multiplier ≥ {blob_sigma:?}",
                at(blob_sigma),
                at(sigma)
            ))
            .into());
        }

        // The device's check (with the GIL released: it may take seconds), then its policy: an
        // understated sensitivity is refused, an unverifiable one unless allowed by name.
        let verification = py.detach(|| mfc_compiler::privacy::verdict::check(&m));
        let reason = verification.json["reason"]
            .as_str()
            .unwrap_or("the device's check did not verify it")
            .to_string();
        match verification.admit(&m, allow_unverified) {
            Err(mfc_runtime::Error::SensitivityUnverified) => {
                return Err(Error::Refused(format!(
                    "the blob's recorded sensitivity is unverifiable ({reason}), and a device's \
                     policy refuses such a blob: pass allow_unverified=True to stream it anyway \
                     (its (ε, δ) then rests on a sensitivity nobody checked)"
                ))
                .into());
            }
            Err(e) => return Err(Error::Runtime(e).into()),
            Ok(()) => {}
        }
        privacy.verified = verification.json["verdict"] == "verified";
        privacy.verification = verification.text.clone();

        let clip_norm = m.header.clip_norm;
        let memory = intake::physical_memory(py);
        let inner = py.detach(|| {
            OwnedReplay::open(blob, dim, range.clone(), noise, noise_multiplier, memory)
        })?;
        let takes_inputs = inner.get().takes_inputs();
        let stream = Self {
            inner,
            row_dim: dim,
            shard: range.map(|r| (r.start, r.end)),
            takes_inputs,
            prefix_sum: matches!(m.header.workload, mfc_formats::Workload::PrefixSum),
            form,
            clip_norm,
            privacy,
            memory,
        };
        let warn = |message: String| {
            let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
            let message = std::ffi::CString::new(message).unwrap_or_default();
            PyErr::warn(py, &category, &message, 1)
        };
        if !stream.privacy.verified {
            warn(format!(
                "sensitivity unverified (allow_unverified=True): {reason}; the stream's \
                 (ε, δ) rests on the blob's recorded sensitivity, which the device's check \
                 could not confirm"
            ))?;
        }
        if stream.privacy.sampling.is_some() && sampler.is_none() {
            warn(
                "the blob's (ε, δ) is accounted for cyclic Poisson sampling: draw each step's \
                 batch with mfc.CyclicPoissonSampling, for the stream's step \
                 (sampler.batch(stream.steps_released)), and pass it as sampler= (its check \
                 refuses a blob of another scheme)"
                    .to_string(),
            )?;
        }
        if stream.privacy.lowered() {
            warn(format!(
                "noise_multiplier = {sigma:?} is below the blob's calibrated σ = {:?} \
                 (allow_lower_noise=True): the blob's (ε, δ) no longer holds; this stream \
                 gives {}",
                blob_sigma.unwrap_or(f64::NAN),
                stream.privacy.statement()
            ))?;
        }
        Ok(stream)
    }

    /// Steps `x` through the stream: a float32 row `(d,)` gives one release, an `(m, d)`
    /// batch m consecutive releases (same shape). A refused call leaves the stream unchanged.
    ///
    /// Args:
    ///     x: the input, float32 of shape `(d,)` or `(m, d)`, any layout: C-contiguous, aligned,
    ///         native-endian `x` is read in place with the GIL released (do not write to it from
    ///         another thread meanwhile); column-major, transposed, strided, byte-swapped or
    ///         misaligned `x` is copied once in logical order first, so each release is that of
    ///         `x`'s C-ordered copy. Another dtype: `TypeError`; a wrong shape, a non-finite value
    ///         or too few steps left: `MfcError`; the runtime's refusals: `StreamError`.
    ///     clip: the whole row's clip factor (`mfc.clip_factor`), a number in [0, 1], required by a
    ///         shard (which steps one row at a time) and refused by an unsharded stream, which clips
    ///         each row itself. Default None.
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
        let input = intake::f32_array(x, "step")?;
        let (m, batched) = self.batch(&input.shape, "step")?;
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
        let d = self.inner.get().dim().max(1);
        let values = input.values()?;
        if batched && m > 1 {
            if let Some(at) = values.iter().position(|v| !v.is_finite()) {
                let refusal = mfc_runtime::Error::NonFiniteInput { index: at % d };
                return Err(Error::Value(format!(
                    "step: row {at_row}: {refusal}",
                    at_row = at / d
                ))
                .into());
            }
            if clip.is_some_and(|c| !(0.0..=1.0).contains(&c)) {
                return Err(Error::Runtime(mfc_runtime::Error::InvalidClipFactor).into());
            }
            // Every row within the range the runtime clips exactly, before the first step: a
            // row refused midway would leave the rows before it released.
            if clip.is_none() && self.inner.get().takes_inputs() {
                let replay = self.inner.get();
                for (i, row) in values.chunks_exact(d).enumerate() {
                    if let Err(refusal) = replay.check_input(row) {
                        return Err(Error::Value(format!("step: row {i}: {refusal}")).into());
                    }
                }
            }
        }
        let shape: &[usize] = if batched { &[m, d] } else { &[d] };
        let out = self.output(py, shape)?;
        {
            let mut writer = out
                .try_readwrite()
                .map_err(|e| Error::Value(format!("internal: {e}")))?;
            let release = writer
                .as_slice_mut()
                .map_err(|e| Error::Value(format!("internal: {e}")))?;
            let inner = &mut self.inner;
            py.detach(|| {
                inner.with(|s| {
                    let rows = values.chunks_exact(d).zip(release.chunks_exact_mut(d));
                    for (i, (row, release)) in rows.enumerate() {
                        match clip {
                            Some(c) => s.step_clipped(row, c, release),
                            None => s.step(row, release),
                        }
                        .map_err(|e| (i, e))?;
                    }
                    Ok::<(), (usize, mfc_runtime::Error)>(())
                })
            })
            .map_err(|(i, e)| match i {
                0 => Error::from(e),
                // Only a refusal the checks above cannot foresee (an unstable encoder's
                // non-finite release) stops a batch midway: say what was released.
                _ => Error::Refused(format!(
                    "step: row {i}: {e}; rows 0..{i} of the batch were released (the stream \
                     advanced {i} steps)"
                )),
            })?;
        }
        Ok(out.into_any())
    }

    /// A training step: the step's m examples, each clipped to ζ by itself (the unit of privacy
    /// is the example), their sum entering the stream; returns the step's release `(d,)`. A
    /// non-finite value is refused (`StreamError`) naming the example and the coordinate, the
    /// stream unchanged.
    ///
    /// Args:
    ///     examples: `(m, d)` float32 (any layout, as `step`; another dtype: `TypeError`); for a
    ///         shard (`shard=(start, end)`, not the whole row) `(m, end - start)`, this shard's
    ///         columns of the step's examples.
    ///     clips: keyword only, default None: required by a shard and refused by an unsharded
    ///         stream (which clips each example itself). The m factors of the **whole**
    ///         examples, `mfc.clip_factors(whole_examples, stream.clip_norm)`: a 1-D float32
    ///         array (any layout, read in logical order; another dtype: `TypeError`), each in
    ///         [0, 1]. The shard's release then equals coordinates start..end of the unsharded
    ///         `step_examples` with the same seed, bit for bit. The stream checks the factors'
    ///         count and range, not that they are the whole examples' (privacy rests on the
    ///         caller, as for `step`'s `clip`).
    #[pyo3(signature = (examples, *, clips=None))]
    fn step_examples<'py>(
        &mut self,
        py: Python<'py>,
        examples: &Bound<'py, PyAny>,
        clips: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let input: Array<'_, f32> = intake::f32_array(examples, "step_examples")?;
        let d = self.inner.get().dim().max(1);
        let [m, n] = *input.shape else {
            return Err(Error::Value(format!(
                "step_examples: expected shape (m, {d}), got {:?}",
                input.shape
            ))
            .into());
        };
        if n != d {
            return Err(Error::Value(format!(
                "step_examples: expected shape (m, {d}), got {:?}",
                input.shape
            ))
            .into());
        }
        // A partial shard cannot clip; a whole row clips itself and takes no factors.
        let partial = self.shard.is_some_and(|(a, b)| b - a != self.row_dim);
        let clips = match (clips, self.shard) {
            (None, Some((a, b))) if partial => {
                return Err(Error::Value(format!(
                    "step_examples: shard {a}..{b} sees only its coordinates of each example and                      cannot clip it: pass clips=mfc.clip_factors(examples, stream.clip_norm), the                      {m} factors of the whole (m, {row}) examples",
                    row = self.row_dim
                ))
                .into());
            }
            (Some(_), None) => {
                return Err(Error::Value(
                    "step_examples: clips is for shards only (each whole example's factor); an                      unsharded stream clips each example to ζ itself"
                        .into(),
                )
                .into());
            }
            (clips, _) => clips.map(|c| intake::f32_array(c, "clips")).transpose()?,
        };
        if let Some(clips) = &clips {
            if *clips.shape != [m] {
                return Err(Error::Value(format!(
                    "clips: expected shape ({m},), one factor per example, got {:?}",
                    clips.shape
                ))
                .into());
            }
            if let Some((i, c)) = clips
                .values()?
                .iter()
                .enumerate()
                .find(|(_, c)| !(0.0..=1.0).contains(*c))
            {
                return Err(Error::Value(format!(
                    "clips: clips[{i}] = {c:?} is not a clip factor in [0, 1] (the whole \
                     example's mfc.clip_factor)"
                ))
                .into());
            }
        }
        let clips = clips.as_ref().map(Array::values).transpose()?;
        let values = input.values()?;
        let out = self.output(py, &[d])?;
        {
            let mut writer = out
                .try_readwrite()
                .map_err(|e| Error::Value(format!("internal: {e}")))?;
            let release = writer
                .as_slice_mut()
                .map_err(|e| Error::Value(format!("internal: {e}")))?;
            let inner = &mut self.inner;
            // The runtime names the example and the coordinate (`NonFiniteExample`,
            // `ExampleTooLarge`).
            py.detach(|| {
                inner.with(|s| match clips {
                    Some(clips) => s.step_examples_clipped(values, clips, release),
                    None => s.step_examples(values, release),
                })
            })
            .map_err(|e| Error::Refused(format!("step_examples: {e}")))?;
        }
        Ok(out.into_any())
    }

    /// Advances one step and returns only the noise `σ·ζ·sens·(B̂ z)_i` (banded and FFT blobs):
    /// for a workload other than the prefix sum, whose `(A x)_i` the caller computes from inputs
    /// it clipped itself. BLT and BandMF streams add their noise to the inputs inside the stream
    /// and refuse it (`StreamError`): their `step` of an all-zero row releases the noise alone.
    fn step_noise<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = self.inner.get().dim();
        if matches!(self.form, "blt" | "bandmf") {
            let what = if self.form == "bandmf" && !self.prefix_sum {
                "x + noise, the noised input your optimizer applies A to"
            } else {
                "the private prefix sum of x"
            };
            return Err(Error::Refused(format!(
                "step_noise: a {} stream adds its noise to the inputs inside the stream and has \
                 no noise-only step: step(x) releases {what}; \
                 step(numpy.zeros({d}, numpy.float32)) releases the noise alone",
                self.form
            ))
            .into());
        }
        let out = self.output(py, &[d])?;
        {
            let mut writer = out
                .try_readwrite()
                .map_err(|e| Error::Value(format!("internal: {e}")))?;
            let release = writer
                .as_slice_mut()
                .map_err(|e| Error::Value(format!("internal: {e}")))?;
            let inner = &mut self.inner;
            py.detach(|| inner.with(|s| s.step_noise(release)))
                .map_err(Error::from)?;
        }
        Ok(out.into_any())
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
        let mut out: Vec<u8> = intake::zeroed(s.checkpoint_capacity(), "checkpoint", self.memory)?;
        let len = s
            .checkpoint(fingerprint, &counter, &mut out)
            .map_err(Error::from)?;
        Ok(PyBytes::new(py, out.get(..len).unwrap_or(&[])))
    }

    /// Loads a checkpoint into this fresh stream (same mechanism, `dim`, shard and seed as the
    /// stream that wrote it). Raises `StreamError` with the stream unchanged.
    ///
    /// Args:
    ///     checkpoint: the state `checkpoint` returned, `bytes`, `bytearray` or `memoryview`.
    ///     released: the steps already released, as the caller keeps them in durable storage, an
    ///         integer in 0..2³² (keyword only, required); a checkpoint behind it is refused, since
    ///         computing its later steps again would release them twice.
    #[pyo3(signature = (checkpoint, *, released))]
    fn restore(
        &mut self,
        checkpoint: &Bound<'_, PyAny>,
        released: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let checkpoint = intake::bytes(checkpoint, "checkpoint")?;
        let released = intake::size(released, "released", 0, u32::MAX.into())?;
        let released = u32::try_from(released).unwrap_or(u32::MAX);
        let form = self.form;
        let counter = ReleaseCounter::new(EPOCH, released);
        self.inner
            .with_fingerprint(|s, fingerprint| match fingerprint {
                Some(fingerprint) => s
                    .restore(fingerprint, &checkpoint, &counter)
                    .map_err(Error::from),
                None => Err(Error::Value(format!(
                    "restore: the {form} form has no checkpoints"
                ))),
            })?;
        Ok(())
    }

    /// For `bench/step.py` only: one step of the float32 row `x`, returning the seconds the
    /// runtime's step took by itself (no conversion, allocation or GIL hand-off), the reference
    /// a Python `step` is compared with.
    fn _step_seconds(&mut self, x: &Bound<'_, PyAny>) -> PyResult<f64> {
        let input = intake::f32_array(x, "_step_seconds")?;
        let input = input.values()?;
        let mut out: Vec<f32> = intake::zeroed(input.len(), "_step_seconds", self.memory)?;
        let started = std::time::Instant::now();
        self.inner
            .with(|s| s.step(input, &mut out))
            .map_err(Error::from)?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// What the stream's releases guarantee, recomputed from the noise multiplier it uses (the
    /// blob's `σ`, or `noise_multiplier`): a dict with `epsilon` (at the blob's `delta`, by the
    /// analytic Gaussian relation, rounded up, or by the accountant for a blob under cyclic
    /// Poisson sampling; `inf` beyond their range; `None` when the blob records no `δ`),
    /// `delta`, `noise_multiplier`, `zcdp_rho` (`None` under sampling), `blob_noise_multiplier`,
    /// `blob_epsilon`
    /// (the same computation for the blob's `σ`), `lowered` (the stream's `σ` is below the
    /// blob's: `allow_lower_noise=True` was needed), `privacy_unit`, `participation`,
    /// `neighbouring` (what the guarantee is for), `verified` and `verification` (whether the
    /// device's check confirmed the recorded sensitivity the guarantee rests on) and
    /// `statement`, all of it in one sentence.
    #[getter]
    fn privacy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.privacy.to_dict(py)
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

    /// Whether `step` releases private prefix sums (the blob's workload is the prefix sum);
    /// otherwise a BandMF stream releases the noised input `x_t + σζ·sens·(C⁻¹z)_t` the caller's
    /// optimizer applies its workload to, and a banded or FFT stream only its noise
    /// (`step_noise`).
    #[getter]
    fn releases_prefix_sums(&self) -> bool {
        self.prefix_sum
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
