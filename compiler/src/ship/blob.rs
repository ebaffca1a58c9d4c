//! Writing a compiled mechanism as an `.mfc` blob (see `formats/SPEC.md`).
//!
//! The coefficients written are exactly the f32-rounded ones the sensitivity was computed from:
//! [`CompiledMechanism::compressed`] already holds them, and the conversion to `f32` below is
//! exact. A blob that the format crate would refuse to read is never written.

use mfc_formats::{
    BandedLowRank as StoredBandedLowRank, Calibration, Decoder, ErrorSummary, Header, Mechanism,
    Neighbouring, Sensitivity, Workload as StoredWorkload, encode_f32s,
};

use crate::forms::banded::CompiledMechanism;
use crate::workload::Workload;
use crate::{Error, Result};

/// What the blob records besides the compiled decoder.
#[derive(Debug, Clone)]
pub struct BlobOptions {
    /// `ζ`, the L2 norm every input row is clipped to by the runtime.
    pub clip_norm: f64,
    /// The calibrated noise multiplier, if any.
    pub calibration: Option<Calibration>,
    /// The neighbouring relation the calibration is for: replace-one records twice the
    /// sensitivity of the encoder, so every noise figure doubles.
    pub neighbouring: Neighbouring,
}

impl Default for BlobOptions {
    fn default() -> Self {
        Self {
            clip_norm: 1.0,
            calibration: None,
            neighbouring: Neighbouring::AddOrRemove,
        }
    }
}

/// How much `neighbouring` scales the encoder's sensitivity (and so every noise figure): the
/// input moves by one record's contribution under add/remove, by the difference of two under
/// replace-one (`mfc_formats::Neighbouring`).
pub fn neighbouring_factor(neighbouring: Neighbouring) -> Result<f64> {
    match neighbouring {
        Neighbouring::AddOrRemove => Ok(1.0),
        Neighbouring::ReplaceOne => Ok(2.0),
        other => Err(Error::InvalidOption(format!(
            "unknown neighbouring relation {other:?}"
        ))),
    }
}

/// The name and version written into every blob's `generator` field.
pub const GENERATOR: &str = concat!("mfc-compiler ", env!("CARGO_PKG_VERSION"));

fn exact_f32(values: &[f64]) -> Result<Vec<u8>> {
    values
        .iter()
        .map(|&x| {
            let y = x as f32;
            if f64::from(y) == x {
                Ok(y)
            } else {
                Err(Error::Numerical(format!(
                    "coefficient {x:e} is not f32-representable: the sensitivity would not match the stored decoder"
                )))
            }
        })
        .collect::<Result<Vec<f32>>>()
        .map(encode_f32s)
}

/// What every form's header records besides the workload and the horizon: the schema, the
/// sensitivity of what ships, the calibration and the error over every step the blob allows.
struct Shipped<'a> {
    participation: &'a crate::privacy::participation::Participation,
    sensitivity: f64,
    method: mfc_formats::SensitivityMethod,
    sqrt_loss: f64,
    optimal_sqrt_loss: Option<f64>,
    /// The largest and the last per-step standard deviation (`σ = ζ = 1`).
    step_stddev: (f64, f64),
}

/// The largest and the last of the standard deviations of `per_step_variance`.
fn step_stddev(per_step_variance: &[f64]) -> (f64, f64) {
    let stddev = per_step_variance.iter().map(|v| v.sqrt());
    (
        stddev.clone().fold(0.0, f64::max),
        stddev.clone().next_back().unwrap_or(0.0),
    )
}

fn header<'a>(
    workload: StoredWorkload<'a>,
    steps: u32,
    shipped: Shipped<'_>,
    options: &BlobOptions,
) -> Result<Header<'a>> {
    // ×2 for replace-one is exact in floating point: the recorded sensitivity is twice the
    // encoder's, and every error figure (in units of σ·ζ) doubles with it.
    let factor = neighbouring_factor(options.neighbouring)?;
    let (max_step_stddev, final_step_stddev) = shipped.step_stddev;
    Ok(Header {
        workload,
        steps,
        participation: shipped.participation.to_format()?,
        neighbouring: options.neighbouring,
        sensitivity: Sensitivity {
            value: factor * shipped.sensitivity,
            method: shipped.method,
        },
        clip_norm: options.clip_norm,
        calibration: options.calibration,
        error: ErrorSummary {
            sqrt_loss: factor * shipped.sqrt_loss,
            optimal_sqrt_loss: shipped.optimal_sqrt_loss.map(|x| factor * x),
            max_step_stddev: factor * max_step_stddev,
            final_step_stddev: factor * final_step_stddev,
        },
        generator: GENERATOR,
    })
}

/// The most operations the compiler spends on `certified`'s check of one blob (seconds on a
/// host; a device's budget is its own, `mfc_runtime::verify::operations`).
pub const VERIFY_OPERATIONS: u64 = 20_000_000_000;

/// The blob bytes of `mechanism`, its recorded sensitivity raised to the device's verification
/// bound `U` when `U` is larger by at most the rounding allowance (a relative `2·10⁻⁶`, twice
/// the looseness `mfc_runtime::verify` accepts of its own error bounds), so a
/// device that verifies it (`mfc_runtime::verify`, the same `f64` arithmetic bit for bit)
/// accepts it. A larger gap is left alone: it is not rounding, and the device refuses the blob,
/// which the tests of every form and schema would catch.
fn certified(mut mechanism: Mechanism<'_>) -> Result<Vec<u8>> {
    let validated = mechanism.validate()?;
    let mut scratch = vec![0.0; mfc_runtime::verify::scratch_len(&validated)];
    if let Ok(bound) =
        mfc_runtime::verify::sensitivity_bound(&validated, &mut scratch, VERIFY_OPERATIONS)
    {
        let recorded = &mut mechanism.header.sensitivity.value;
        if bound > *recorded && bound <= *recorded * (1.0 + 2e-6) {
            *recorded = bound;
        }
    }
    Ok(mechanism.to_vec()?)
}

/// A table over whole `f32` words.
fn table(bytes: &[u8]) -> Result<mfc_formats::F32Table<'_>> {
    mfc_formats::F32Table::new(bytes)
        .ok_or_else(|| Error::Numerical("table is not whole f32 words".into()))
}

/// Encodes `compiled` (for `workload`, under its participation schema) as blob bytes. Workloads
/// other than the prefix sum are stored as `Custom` with their label.
pub fn encode(
    compiled: &CompiledMechanism,
    workload: &Workload,
    options: &BlobOptions,
) -> Result<Vec<u8>> {
    let c = &compiled.compressed;
    let steps =
        u32::try_from(c.steps).map_err(|_| Error::InvalidOption("more than 2^32 steps".into()))?;
    let diagonals = exact_f32(&c.diagonals)?;
    let left = exact_f32(&c.left)?;
    let right = exact_f32(&c.right)?;
    let label = workload.label();
    let stored_workload = match workload {
        Workload::PrefixSum => StoredWorkload::PrefixSum,
        Workload::Momentum { .. } | Workload::Custom { .. } => {
            StoredWorkload::Custom { label: &label }
        }
    };
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.sqrt_loss,
        optimal_sqrt_loss: Some(compiled.optimal_sqrt_loss),
        step_stddev: step_stddev(&compiled.per_step_variance),
    };
    let mechanism = Mechanism {
        header: header(stored_workload, steps, shipped, options)?,
        decoder: Decoder::BandedLowRank(StoredBandedLowRank {
            band: c.band as u32,
            rank: c.rank as u32,
            diagonals: table(&diagonals)?,
            left: table(&left)?,
            right: table(&right)?,
        }),
    };
    certified(mechanism)
}

/// Encodes a compiled FFT mechanism (001 §4, App. K; `formats/SPEC.md`, decoder 1) for the
/// prefix-sum workload. The tables are the `f32` values the sensitivity was computed from.
pub fn encode_fft(
    compiled: &crate::forms::fft::FftMechanism,
    options: &BlobOptions,
) -> Result<Vec<u8>> {
    use crate::forms::fft::FftKind;
    let too_long = || Error::InvalidOption("more than 2^32 steps".into());
    let block = u32::try_from(compiled.block).map_err(|_| too_long())?;
    let stamps = u32::try_from(compiled.stamps).map_err(|_| too_long())?;
    let steps = block.checked_mul(stamps).ok_or_else(too_long)?;
    let kernel = encode_f32s(compiled.kernel.iter().copied());
    let generator = encode_f32s(compiled.generator.iter().copied());
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.sqrt_loss,
        optimal_sqrt_loss: None,
        step_stddev: step_stddev(&compiled.per_step_variance),
    };
    let mechanism = Mechanism {
        header: header(StoredWorkload::PrefixSum, steps, shipped, options)?,
        decoder: Decoder::Fft(mfc_formats::Fft {
            kind: match compiled.kind {
                FftKind::Circulant => mfc_formats::FftKind::Circulant,
                FftKind::OptimalDecoder => mfc_formats::FftKind::OptimalDecoder,
            },
            block,
            stamps,
            kernel: table(&kernel)?,
            generator: table(&generator)?,
        }),
    };
    certified(mechanism)
}

/// Encodes a compiled BLT (`formats/SPEC.md`, decoder 2) for the prefix sum: the stored `θ, ω`
/// are the `f32` values the sensitivity was computed from, `steps` is the horizon it covers, and
/// the error figures are over that whole horizon (not the steps it was optimized for).
pub fn encode_blt(
    compiled: &crate::forms::blt::CompiledBlt,
    options: &BlobOptions,
) -> Result<Vec<u8>> {
    let steps = u32::try_from(compiled.horizon)
        .map_err(|_| Error::InvalidOption("the horizon exceeds 2^32 − 1 steps".into()))?;
    let theta = exact_f32(&compiled.blt.theta)?;
    let omega = exact_f32(&compiled.blt.omega)?;
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.horizon_error.sqrt_loss,
        optimal_sqrt_loss: None,
        step_stddev: (
            compiled.horizon_error.max_step_stddev,
            compiled.horizon_error.final_step_stddev,
        ),
    };
    let mechanism = Mechanism {
        header: header(StoredWorkload::PrefixSum, steps, shipped, options)?,
        decoder: Decoder::Blt(mfc_formats::Blt {
            theta: table(&theta)?,
            omega: table(&omega)?,
        }),
    };
    certified(mechanism)
}

/// Encodes a compiled BandMF encoder (`formats/SPEC.md`, decoder 3) for `workload`: the stored
/// coefficients are the `f32` values the sensitivity was computed from. Workloads other than the
/// prefix sum are stored as `Custom` with their label; the runtime then releases `x_t + w_t` and
/// the caller applies `A`.
pub fn encode_bandmf(
    compiled: &crate::forms::bandmf::CompiledBandMf,
    workload: &Workload,
    options: &BlobOptions,
) -> Result<Vec<u8>> {
    use crate::forms::bandmf::BandMfKind;
    let too_long = |what: &str| Error::InvalidOption(format!("{what} exceeds 2^32 − 1"));
    let steps = u32::try_from(compiled.steps).map_err(|_| too_long("the horizon"))?;
    let bands = u32::try_from(compiled.bands).map_err(|_| too_long("the number of bands"))?;
    let encoder = exact_f32(&compiled.coefficients)?;
    let label = workload.label();
    let stored_workload = match workload {
        Workload::PrefixSum => StoredWorkload::PrefixSum,
        Workload::Momentum { .. } | Workload::Custom { .. } => {
            StoredWorkload::Custom { label: &label }
        }
    };
    let shipped = Shipped {
        participation: &compiled.participation,
        sensitivity: compiled.sensitivity,
        method: compiled.sensitivity_method,
        sqrt_loss: compiled.sqrt_loss,
        optimal_sqrt_loss: None,
        step_stddev: step_stddev(&compiled.per_step_variance),
    };
    let mechanism = Mechanism {
        header: header(stored_workload, steps, shipped, options)?,
        decoder: Decoder::BandMf(mfc_formats::BandMf {
            kind: match compiled.kind {
                BandMfKind::General => mfc_formats::BandMfKind::General,
                BandMfKind::Toeplitz => mfc_formats::BandMfKind::Toeplitz,
            },
            bands,
            encoder: table(&encoder)?,
        }),
    };
    certified(mechanism)
}
