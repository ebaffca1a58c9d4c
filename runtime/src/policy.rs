//! The device's privacy policy: a floor the device states for itself, checked before any release,
//! together with the verification of the blob's sensitivity ([`crate::verify`]).
//!
//! A blob's privacy is that of a Gaussian mechanism with noise multiplier `σ` for the unit of
//! privacy its header states (its participation schema and neighbouring relation; 003
//! Thm 2.1), **provided its recorded sensitivity is true**, which [`crate::verify`]
//! checks. The floor is on `σ` directly ([`Floor::NoiseMultiplier`]) or on the `ε` that `σ`
//! gives at the device's own `δ` ([`Floor::Epsilon`], the analytic Gaussian relation of
//! [`crate::privacy`], `ε` rounded up). [`admit`] runs both, in that order of cost: the floor
//! first (a few hundred operations), then the verification within the policy's budget; a blob
//! whose sensitivity cannot be verified is refused or admitted as
//! [`Policy::refuse_unverifiable`] says.
//!
//! A blob under cyclic Poisson sampling (amplified BandMF) is not one Gaussian release: its `ε`
//! is that of `⌈n/b̂⌉` composed Poisson-subsampled Gaussians of rate `q` (Choquette-Choo et al.
//! 2023b), which the device does not compute, and which grows with `q` and `⌈n/b̂⌉` as well as
//! falling with `σ`. Neither floor above can bound it, so both refuse such a blob;
//! [`Floor::CyclicPoisson`] bounds all three, and so the `ε` the host's accountant gives for
//! them.

use mfc_formats::{Participation, Validated};

use crate::error::Error;
use crate::privacy::epsilon_for_noise_multiplier;
use crate::verify::{self, Verdict};

/// The least privacy the device accepts, for the unit of privacy of the blob's header.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Floor {
    /// `σ ≥ min`. With `min > 0`, refuses a blob under cyclic Poisson sampling, whose `ε` `σ`
    /// alone does not bound (use [`Floor::CyclicPoisson`]); `min ≤ 0` is no floor at all.
    NoiseMultiplier {
        /// The least noise multiplier.
        min: f64,
    },
    /// `ε(σ, δ) ≤ max` at the device's `δ`, by the analytic Gaussian relation: one Gaussian
    /// release of sensitivity 1. Refuses a blob under cyclic Poisson sampling, whose `ε` is that
    /// of a composition of subsampled Gaussians (use [`Floor::CyclicPoisson`]).
    Epsilon {
        /// The largest `ε`.
        max: f64,
        /// The device's `δ`, in `(0, 1)`.
        delta: f64,
    },
    /// Blobs under cyclic Poisson sampling only: `σ ≥ min_noise_multiplier`, `q ≤
    /// max_sampling_prob` and `⌈n/b̂⌉ ≤ max_participations`. The accountant's `ε` is
    /// non-decreasing in `q` and in the number of composed mechanisms and non-increasing in `σ`,
    /// so every blob admitted has at most the `ε` of those three bounds (computed on the host:
    /// `mfc calibrate --sampling-prob`).
    CyclicPoisson {
        /// The least noise multiplier.
        min_noise_multiplier: f64,
        /// The largest sampling probability within a group.
        max_sampling_prob: f64,
        /// The most steps one record may take part in, `⌈n/b̂⌉`.
        max_participations: u32,
    },
}

/// What a device requires of a blob before it releases anything.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Policy {
    /// The privacy floor.
    pub floor: Floor,
    /// The most operations the sensitivity's verification may spend ([`verify::operations`]).
    pub max_operations: u64,
    /// Refuse a blob whose sensitivity cannot be verified within the budget and scratch
    /// ([`Error::SensitivityUnverified`]) instead of admitting it on the compiler's word.
    pub refuse_unverifiable: bool,
    /// Admit a BLT blob whose recorded bound claims to hold for every horizon (`BltTailBound`,
    /// `mfc compile --horizon unbounded`) **that could not be verified** within the budget and
    /// scratch. [`crate::verify`] recomputes that bound ([`verify::blt_tail`]): a verified one is
    /// admitted without this opt-in, a lowered one refused. What stays unverifiable is a blob
    /// over the budget, or one whose state matrix has no provably contracting power, e.g. forged
    /// or miscompiled parameters whose encoder does not decay: its stream never stops, and would
    /// release with a sensitivity growing without limit. Refused unless the device opts in,
    /// whatever `refuse_unverifiable` says; opt in only for blobs from a compiler the device
    /// trusts (e.g. signed ones, `crate::signature`).
    pub admit_unbounded_horizon: bool,
}

impl Policy {
    /// The policy of the host's front doors (`mfc simulate`, Python's `Stream`, the C library's
    /// open): no floor beyond a calibrated, positive `σ`; the verification within
    /// `max_operations`; and a blob whose sensitivity cannot be verified refused, as a device
    /// with `refuse_unverifiable` refuses it, unless the caller opted in by name
    /// (`allow_unverified`: `--allow-unverified`, `allow_unverified=True`,
    /// `MFC_OPEN_ALLOW_UNVERIFIED`), which admits every unverifiable blob, one whose bound claims
    /// every horizon included. A blob below the certified lower bound of
    /// [`verify::lower`] is refused whatever the opt-in.
    pub const fn host(max_operations: u64, allow_unverified: bool) -> Self {
        Policy {
            floor: Floor::NoiseMultiplier { min: 0.0 },
            max_operations,
            refuse_unverifiable: !allow_unverified,
            admit_unbounded_horizon: allow_unverified,
        }
    }

    /// What this policy does with the outcome of [`verify::verify`]: the verdict when the blob
    /// is admitted, else the refusal ([`Error::SensitivityUnverified`] for an unverifiable blob
    /// the policy does not admit, or the verification's own refusal).
    pub fn decide(
        &self,
        m: &Validated<'_>,
        verdict: Result<Verdict, Error>,
    ) -> Result<Verdict, Error> {
        match verdict? {
            Verdict::Unverifiable(_)
                if m.header.sensitivity.method.covers_every_horizon()
                    && !self.admit_unbounded_horizon =>
            {
                Err(Error::SensitivityUnverified)
            }
            Verdict::Unverifiable(_) if self.refuse_unverifiable => {
                Err(Error::SensitivityUnverified)
            }
            verdict => Ok(verdict),
        }
    }
}

/// Checks `noise_multiplier` (the blob's own `σ` when `None`) against `floor`: `Ok(())`, or
/// [`Error::BelowPrivacyFloor`] (also for a blob without `σ` and no `σ` given, or a floor out of
/// range, which can admit nothing).
pub fn check_floor(
    m: &Validated<'_>,
    noise_multiplier: Option<f64>,
    floor: Floor,
) -> Result<(), Error> {
    let sigma = noise_multiplier
        .or(m.header.calibration.map(|c| c.noise_multiplier))
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or(Error::BelowPrivacyFloor)?;
    let sampled = match m.header.participation {
        Participation::CyclicPoisson {
            cycle_length,
            sampling_prob,
        } => Some((m.header.steps.div_ceil(cycle_length.max(1)), sampling_prob)),
        _ => None,
    };
    let ok = match (floor, sampled) {
        // No floor at all (`min ≤ 0`) admits any blob; a σ floor cannot bound a sampled one.
        (Floor::NoiseMultiplier { min }, None) => min.is_finite() && sigma >= min,
        (Floor::NoiseMultiplier { min }, Some(_)) => min <= 0.0,
        (Floor::Epsilon { max, delta }, None) => {
            epsilon_for_noise_multiplier(sigma, delta).is_some_and(|eps| eps <= max)
        }
        (Floor::Epsilon { .. }, Some(_)) | (Floor::CyclicPoisson { .. }, None) => false,
        (
            Floor::CyclicPoisson {
                min_noise_multiplier,
                max_sampling_prob,
                max_participations,
            },
            Some((participations, q)),
        ) => {
            min_noise_multiplier.is_finite()
                && sigma >= min_noise_multiplier
                && q <= max_sampling_prob
                && participations <= max_participations
        }
    };
    if ok {
        Ok(())
    } else {
        Err(Error::BelowPrivacyFloor)
    }
}

/// The floor, then the verification of the sensitivity (with `scratch`, at least
/// [`verify::scratch_len`] floats for a verdict), before any stream is built: `Ok` with the
/// verification's verdict when the blob is admitted, else the refusal. Changes nothing.
pub fn admit(
    m: &Validated<'_>,
    noise_multiplier: Option<f64>,
    policy: &Policy,
    scratch: &mut [f64],
) -> Result<Verdict, Error> {
    admit_only::<{ verify::forms::ALL }>(m, noise_multiplier, policy, scratch)
}

/// [`admit`] linking the sensitivity verifiers of `FORMS` only ([`verify::verify_only`]): a
/// blob of another form is refused ([`Error::VerifierNotLinked`]) whatever the policy.
pub fn admit_only<const FORMS: u8>(
    m: &Validated<'_>,
    noise_multiplier: Option<f64>,
    policy: &Policy,
    scratch: &mut [f64],
) -> Result<Verdict, Error> {
    check_floor(m, noise_multiplier, policy.floor)?;
    policy.decide(
        m,
        verify::verify_only::<FORMS>(m, scratch, policy.max_operations),
    )
}
