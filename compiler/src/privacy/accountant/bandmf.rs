//! Amplified BandMF: privacy amplification by sampling for banded encoders, and the choice of the
//! number of bands for a privacy target.
//!
//! # The scheme and its accounting
//!
//! Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta, Xu (NeurIPS 2023), "(Amplified)
//! Banded Matrix Factorizations", §4 (Algorithm 2, Thm 4): the records are split into `b̂` groups;
//! step `i` draws a Poisson sample, each record of group `i mod b̂` with probability `q`, and no
//! record of another group; the encoder `C` is lower triangular with `b̂` bands and columns of norm
//! at most 1 (unit clipping). One record then takes part only in the steps of its group, at least
//! (exactly) `b̂` apart, whose columns of `C` do not overlap, and the mechanism is as private as
//! the composition of `⌈n/b̂⌉` Poisson-subsampled Gaussian mechanisms of noise multiplier `σ` and
//! rate `q` (the noise being `σ·ζ` for clipping norm `ζ`). `b̂ = 1` is DP-SGD, the same code.
//! jax_privacy computes exactly this (`experimental.accounting.amplified_bandmf_event`:
//! `dpsgd_event(σ, ⌈n/b̂⌉, sampling_prob)`), with `sampling_prob` the rate **within a group**:
//! the expected batch is `q·N/b̂` for `N` records, so for an expected batch `B`,
//! `q = B·b̂/N` ([`AmplifiedBandMf::for_batch`]).
//!
//! Neighbouring: add-remove (and zero-out) as in [`super`]. Under add-remove the group of a
//! record must not depend on the other records (groups drawn independently per record, e.g.
//! from a hash of its identifier: jax_privacy's `PartitionType.INDEPENDENT`); splitting the
//! dataset into equal groups (jax_privacy's default `EQUAL_SPLIT`) is covered under zero-out
//! neighbouring, which is what jax_privacy's default accountant (`REPLACE_SPECIAL`) assumes.
//!
//! # Choosing `b̂`
//!
//! More bands lower the error of the factorization at a fixed `σ` but raise `q` (the groups are
//! smaller for the same batch) and so the `σ` a target needs, up to the un-amplified `σ` when
//! `q = 1`. McKenna (ICLR 2025, §5) picks `b̂` by minimizing the expected error over candidate
//! band counts; [`choose_bands`] does the same: for each candidate it calibrates `σ(b̂)`
//! and asks the caller for the loss per unit noise of the best `b̂`-banded encoder, and returns
//! the candidate minimizing `σ(b̂)·loss(b̂)`.

use super::error::AccountantError;
use super::{Composition, Neighbouring, PldOptions, SampledGaussian, noise_multiplier_for};
use crate::request::option::Opt;

/// The amplified BandMF sampling scheme: `steps` steps, `bands` groups and bands, rate
/// `sampling_prob` within the active group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AmplifiedBandMf {
    steps: usize,
    bands: usize,
    sampling_prob: f64,
}

impl AmplifiedBandMf {
    /// Checks `1 ≤ bands ≤ steps` and `q ∈ (0, 1]`.
    pub fn new(steps: usize, bands: usize, sampling_prob: f64) -> Result<Self, AccountantError> {
        if steps == 0 {
            return Err(AccountantError::OutOfRange {
                option: Opt::Steps,
                value: "0".into(),
                allowed: "at least 1 step",
            });
        }
        if bands == 0 || bands > steps {
            return Err(AccountantError::BandsAboveSteps { bands, steps });
        }
        SampledGaussian::new(1.0, sampling_prob)?;
        Ok(AmplifiedBandMf {
            steps,
            bands,
            sampling_prob,
        })
    }

    /// The scheme whose expected batch is `batch_size` for `dataset_size` records:
    /// `q = batch·b̂/N` (refused above 1).
    pub fn for_batch(
        steps: usize,
        bands: usize,
        dataset_size: u64,
        batch_size: f64,
    ) -> Result<Self, AccountantError> {
        if dataset_size == 0 {
            return Err(AccountantError::OutOfRange {
                option: Opt::DatasetSize,
                value: "0".into(),
                allowed: "at least 1 record",
            });
        }
        if !(batch_size > 0.0 && batch_size.is_finite()) {
            return Err(AccountantError::OutOfRange {
                option: Opt::BatchSize,
                value: format!("{batch_size}"),
                allowed: "an expected batch size > 0",
            });
        }
        if bands == 0 || bands > steps {
            return Err(AccountantError::BandsAboveSteps { bands, steps });
        }
        let q = batch_size * bands as f64 / dataset_size as f64;
        if q > 1.0 {
            return Err(AccountantError::BatchTooLarge {
                batch_size,
                bands,
                dataset_size,
            });
        }
        Self::new(steps, bands, q)
    }

    /// `n`.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// `b̂`.
    pub fn bands(&self) -> usize {
        self.bands
    }

    /// `q`, the sampling probability within a group.
    pub fn sampling_prob(&self) -> f64 {
        self.sampling_prob
    }

    /// `⌈n/b̂⌉`: the most steps one record can take part in, and the number of subsampled
    /// Gaussian mechanisms composed.
    pub fn participations(&self) -> u64 {
        self.steps.div_ceil(self.bands) as u64
    }

    /// The sampling scheme in words (the participation schema of a blob that records it).
    pub fn schema(&self) -> String {
        let (b, q, k) = (self.bands, self.sampling_prob, self.participations());
        if b == 1 {
            format!(
                "Poisson sampling (DP-SGD, BandMF with 1 band): every step includes each record with probability {q}, so a record is in at most {k} steps"
            )
        } else {
            format!(
                "cyclic Poisson sampling (amplified BandMF, {b} bands): the records split into {b} groups, step i includes each record of group i mod {b} with probability {q}, so a record is in at most {k} steps, exactly {b} apart"
            )
        }
    }

    /// The scheme, the unit of privacy and the neighbouring relation in words: what every
    /// `(ε, δ)` of the scheme is printed with (the CLI's `calibrate`, Python's `calibrate`).
    pub fn describe(&self) -> String {
        format!(
            "{}; unit of privacy: one example (its gradient clipped to ζ; noise σ·ζ per unit of the encoder's sensitivity); neighbouring datasets differ by adding or removing one example; ε is a pessimistic upper bound (privacy loss distributions)",
            self.schema()
        )
    }

    /// The participation schema a blob records for the scheme: cyclic Poisson sampling with
    /// `b̂` groups and rate `q` (`SPEC.md`, participation `3`).
    pub fn to_format(&self) -> Result<mfc_formats::Participation, AccountantError> {
        let cycle_length =
            u32::try_from(self.bands).map_err(|_| AccountantError::BandsAboveSteps {
                bands: self.bands,
                steps: self.steps,
            })?;
        Ok(mfc_formats::Participation::CyclicPoisson {
            cycle_length,
            sampling_prob: self.sampling_prob,
        })
    }

    /// The scheme a blob of `steps` steps records, if its schema is cyclic Poisson sampling.
    pub fn from_format(
        stored: &mfc_formats::Participation,
        steps: u32,
    ) -> Option<Result<Self, AccountantError>> {
        match *stored {
            mfc_formats::Participation::CyclicPoisson {
                cycle_length,
                sampling_prob,
            } => Some(Self::new(
                steps as usize,
                cycle_length as usize,
                sampling_prob,
            )),
            _ => None,
        }
    }

    /// The composition the scheme is accounted as, for noise multiplier `σ`.
    pub fn composition(&self, noise_multiplier: f64) -> Result<Composition, AccountantError> {
        Composition::repeated(
            SampledGaussian::new(noise_multiplier, self.sampling_prob)?,
            self.participations(),
            Neighbouring::AddOrRemove,
        )
    }

    /// `ε` at `δ` for noise multiplier `σ` (an upper bound).
    pub fn epsilon(
        &self,
        noise_multiplier: f64,
        delta: f64,
        options: &PldOptions,
    ) -> Result<f64, AccountantError> {
        self.composition(noise_multiplier)?.epsilon(delta, options)
    }

    /// The smallest `σ` (rounded up) meeting `(ε, δ)`.
    pub fn noise_multiplier(
        &self,
        epsilon: f64,
        delta: f64,
        options: &PldOptions,
    ) -> Result<f64, AccountantError> {
        noise_multiplier_for(
            self.sampling_prob,
            self.participations(),
            Neighbouring::AddOrRemove,
            epsilon,
            delta,
            options,
        )
    }
}

/// One candidate of [`choose_bands`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandCandidate {
    /// `b̂`.
    pub bands: usize,
    /// `q = batch·b̂/N`.
    pub sampling_prob: f64,
    /// The calibrated `σ(b̂)`.
    pub noise_multiplier: f64,
    /// The caller's loss per unit noise for `b̂` bands.
    pub loss: f64,
    /// `σ(b̂)·loss(b̂)`, the expected error minimized.
    pub error: f64,
}

/// The default candidates for [`choose_bands`]: powers of two up to the largest admissible
/// `b̂ = min(n, ⌊N/B⌋)` (so that `q ≤ 1`), and that largest one.
pub fn default_band_candidates(steps: usize, dataset_size: u64, batch_size: f64) -> Vec<usize> {
    let most = ((dataset_size as f64 / batch_size).floor() as usize)
        .min(steps)
        .max(1);
    let mut out: Vec<usize> = (0..usize::BITS)
        .map(|p| 1usize << p)
        .take_while(|&b| b <= most)
        .collect();
    if out.last() != Some(&most) {
        out.push(most);
    }
    out
}

/// What [`choose_bands`] calibrates for: `n` steps, `N` records, expected batch `B`, `(ε, δ)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BandTarget {
    /// `n`.
    pub steps: usize,
    /// `N`.
    pub dataset_size: u64,
    /// `B`, the expected batch size.
    pub batch_size: f64,
    /// `ε`.
    pub epsilon: f64,
    /// `δ`.
    pub delta: f64,
}

/// Picks `b̂` (and `σ`) minimizing the expected error `σ(b̂)·loss(b̂)` of amplified BandMF for
/// `target`, over `candidates` (default [`default_band_candidates`]). `loss(b̂)` is the caller's
/// loss per unit noise of its best `b̂`-banded encoder with columns of norm at most 1 (e.g. `√L`
/// or the RMSE of its factorization at `σ = 1`); it is called once per candidate, and its errors
/// are passed through. Returns the best candidate and all of them.
pub fn choose_bands<E: From<AccountantError>>(
    target: &BandTarget,
    candidates: Option<&[usize]>,
    mut loss: impl FnMut(usize) -> Result<f64, E>,
    options: &PldOptions,
) -> Result<(BandCandidate, Vec<BandCandidate>), E> {
    let BandTarget {
        steps,
        dataset_size,
        batch_size,
        epsilon,
        delta,
    } = *target;
    let defaults;
    let candidates = match candidates {
        Some(c) => c,
        None => {
            defaults = default_band_candidates(steps, dataset_size, batch_size);
            &defaults
        }
    };
    let mut all = Vec::with_capacity(candidates.len());
    for &bands in candidates {
        let scheme = AmplifiedBandMf::for_batch(steps, bands, dataset_size, batch_size)?;
        let sigma = scheme.noise_multiplier(epsilon, delta, options)?;
        let l = loss(bands)?;
        all.push(BandCandidate {
            bands,
            sampling_prob: scheme.sampling_prob(),
            noise_multiplier: sigma,
            loss: l,
            error: sigma * l,
        });
    }
    let best = all
        .iter()
        .copied()
        .filter(|c| c.error.is_finite())
        .min_by(|a, b| a.error.total_cmp(&b.error))
        .ok_or(AccountantError::OutOfRange {
            option: Opt::Bands,
            value: format!("{candidates:?}"),
            allowed: "at least one candidate with a finite loss",
        })?;
    Ok((best, all))
}
