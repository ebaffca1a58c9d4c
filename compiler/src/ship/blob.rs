//! Writing a compiled mechanism as an `.mfc` blob (see `formats/SPEC.md`), for every form: the
//! header every form shares ([`Shipped`], the calibration, the neighbouring relation), the
//! device's verification bound raised into the record when rounding puts it just above the
//! compiler's value, and the bytes ([`write()`]). Each form builds its decoder table
//! (`crate::forms::*::encode`) from exactly the `f32`-rounded coefficients its sensitivity was
//! computed from ([`exact_f32`] refuses any other). A blob that the format crate would refuse to
//! read is never written.

use mfc_formats::{
    Calibration, Decoder, ErrorSummary, Header, Mechanism, Neighbouring, Sensitivity,
    Workload as StoredWorkload, encode_f32s,
};

use crate::privacy::accountant::bandmf::AmplifiedBandMf;
use crate::privacy::participation::Participation;
use crate::privacy::verdict::VERIFY_OPERATIONS;
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
    /// The sampling scheme the calibration is accounted under (amplified BandMF), if any: the
    /// header then records cyclic Poisson sampling as its participation schema, and the
    /// encoder's sensitivity must be that of single participation (its largest column norm).
    pub sampling: Option<AmplifiedBandMf>,
}

impl Default for BlobOptions {
    fn default() -> Self {
        Self {
            clip_norm: 1.0,
            calibration: None,
            neighbouring: Neighbouring::AddOrRemove,
            sampling: None,
        }
    }
}

/// The name and version written into every blob's `generator` field.
pub const GENERATOR: &str = concat!("mfc-compiler ", env!("CARGO_PKG_VERSION"));

/// The little-endian bytes of `values`, each of which must be an `f32` (the coefficients the
/// sensitivity was computed from), else a numerical error.
pub fn exact_f32(values: &[f64]) -> Result<Vec<u8>> {
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
pub struct Shipped<'a> {
    /// The participation schema the sensitivity is for.
    pub participation: &'a crate::privacy::participation::Participation,
    /// The encoder's sensitivity under it (before the neighbouring relation's factor).
    pub sensitivity: f64,
    /// How it was computed.
    pub method: mfc_formats::SensitivityMethod,
    /// `sqrt(L)` over every step the blob allows (`σ = ζ = 1`).
    pub sqrt_loss: f64,
    /// `sqrt(L)` of the optimum the form approximates, if it has one.
    pub optimal_sqrt_loss: Option<f64>,
    /// The largest and the last per-step standard deviation (`σ = ζ = 1`).
    pub step_stddev: (f64, f64),
}

/// The largest and the last of the standard deviations of `per_step_variance`.
pub fn step_stddev(per_step_variance: &[f64]) -> (f64, f64) {
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
    let factor = options.neighbouring.sensitivity_factor();
    let (max_step_stddev, final_step_stddev) = shipped.step_stddev;
    Ok(Header {
        workload,
        steps,
        participation: match &options.sampling {
            None => shipped.participation.to_format()?,
            Some(scheme)
                if *shipped.participation == Participation::Single
                    && scheme.steps() == steps as usize =>
            {
                scheme.to_format()?
            }
            Some(_) => {
                return Err(Error::InvalidArgument(format!(
                    "cyclic Poisson sampling over {} steps records the sensitivity of single participation over the blob's steps, not of {} over {steps}",
                    options.sampling.as_ref().map_or(0, |s| s.steps()),
                    shipped.participation.describe()
                )));
            }
        },
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

/// The blob bytes of `mechanism`, its recorded sensitivity raised to the device's verification
/// bound `U` when `U` is larger by at most the rounding allowance (a relative `2·10⁻⁶`, twice
/// the looseness `mfc_runtime::verify` accepts of its own error bounds), so a
/// device that verifies it (`mfc_runtime::verify`, the same `f64` arithmetic bit for bit)
/// accepts it. A larger gap is left alone: it is not rounding, and the device refuses the blob,
/// which the tests of every form and schema would catch.
fn certified(mut mechanism: Mechanism<'_>) -> Result<Mechanism<'_>> {
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
    Ok(mechanism)
}

/// A blob as written, and the sensitivity it records.
#[derive(Debug, Clone)]
pub struct Written {
    /// The `.mfc` bytes.
    pub bytes: Vec<u8>,
    /// The encoder's sensitivity as the blob records it, divided by the neighbouring relation's
    /// factor: the compiler's value, or the device's verification bound when rounding puts that
    /// just above it (`certified`), so reports state the sensitivity the noise is scaled by.
    pub sensitivity: f64,
}

/// The blob of `decoder` for `workload` over `steps` steps: the header of `shipped` and
/// `options`, the recorded sensitivity `certified`, the bytes, and that sensitivity — computed
/// here once, never read back from the bytes.
pub fn write(
    workload: StoredWorkload<'_>,
    steps: u32,
    shipped: Shipped<'_>,
    decoder: Decoder<'_>,
    options: &BlobOptions,
) -> Result<Written> {
    let mechanism = certified(Mechanism {
        header: header(workload, steps, shipped, options)?,
        decoder,
    })?;
    let sensitivity =
        mechanism.header.sensitivity.value / options.neighbouring.sensitivity_factor();
    Ok(Written {
        bytes: mechanism.to_vec()?,
        sensitivity,
    })
}

/// How `workload` is stored: the prefix sum by name, any other as `Custom` with `label`.
pub fn stored_workload<'a>(workload: &Workload, label: &'a str) -> StoredWorkload<'a> {
    match workload {
        Workload::PrefixSum => StoredWorkload::PrefixSum,
        Workload::Momentum { .. } | Workload::Custom { .. } => StoredWorkload::Custom { label },
    }
}

/// `n` as the `u32` a header stores, or an error naming `what`.
pub fn steps_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Numerical(format!("{what} exceeds 2^32 − 1 steps")))
}

/// A table over whole `f32` words.
pub fn table(bytes: &[u8]) -> Result<mfc_formats::F32Table<'_>> {
    mfc_formats::F32Table::new(bytes)
        .ok_or_else(|| Error::Numerical("table is not whole f32 words".into()))
}
