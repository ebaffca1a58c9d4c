//! A privacy accountant for compositions of Gaussian and Poisson-subsampled Gaussian mechanisms,
//! by privacy loss distributions (PLD), and the amplified BandMF calibration built on it
//! ([`bandmf`]).
//!
//! # What it computes
//!
//! A [`Composition`] of runs of [`SampledGaussian`] mechanisms (noise multiplier `σ` per unit
//! sensitivity, Poisson sampling probability `q`, `q = 1` meaning no sampling) under a
//! neighbouring relation; [`Composition::epsilon`] is the smallest `ε` with `δ(ε) ≤ δ`,
//! [`Composition::delta`] the `δ(ε)`, and [`noise_multiplier_for`] the smallest `σ` (within a
//! relative `1e-5`, rounded up) giving `(ε, δ)` for `count` runs. Every figure is an upper bound
//! on the true one (pessimistic): a reported `ε` or `δ` is never below the mechanism's, a
//! calibrated `σ` never below the smallest that meets the target.
//!
//! - **Gaussian only** (`q = 1` everywhere): the composition of Gaussians of `μ_i = s/σ_i` is the
//!   Gaussian of `μ² = Σ μ_i²` (Gaussian DP composes so: Dong, Roth, Su 2022), evaluated exactly by the analytic
//!   Gaussian relation of [`crate::privacy::calibrate`] (Balle & Wang 2018, Thm 8): no discretization, so
//!   one run with `q = 1` gives exactly `mfc calibrate`'s figures.
//! - **With sampling**: PLDs ([`pld`]) built by the pessimistic connect-the-dots discretization of
//!   each mechanism's exact privacy loss ([`gaussian`]; Doroshenko, Ghazi, Kamath, Kumar,
//!   Manurangsi 2022), composed by FFT convolution (Koskela, Jälkö, Honkela 2020), both
//!   directions (remove, add) of add-remove neighbouring carried separately and the worse one
//!   reported, as `dp_accounting` does.
//!
//! # Neighbouring
//!
//! Add-remove is supported with and without sampling. It also covers zero-out neighbouring
//! (replacing a record by one that contributes nothing, jax_privacy's default `REPLACE_SPECIAL`
//! for BandMF), whose worst-case pairs are the same. Replace-one is supported without sampling
//! (`q = 1`: the Gaussian of sensitivity 2 in add-remove units, as the blob records it) and
//! **refused with sampling** ([`AccountantError::ReplaceOneWithSampling`]): under Poisson sampling
//! the pair `(1−q)N(0)+qN(−1)` vs `(1−q)N(0)+qN(1)` that `dp_accounting` uses for replace-one is
//! not established as dominating for all pairs of records in many dimensions (the dominating
//! pairs Zhu, Dong, Wang 2022 give are for Poisson sampling under add-remove and for sampling
//! without replacement under replace-one), and Lebeda, Regehr, Kamath, Steinke
//! (2024) show how such single-step worst cases mislead under composition. Safe by default: the
//! option is refused rather than answered with an unproven figure.
//!
//! # Discretization and truncation ([`PldOptions`])
//!
//! - `discretization` `Δ` (default `1e-4`, `dp_accounting`'s default): the finest grid of privacy
//!   losses. Connect-the-dots errs by `O(Δ²)` per composition (on the safe side). With `adaptive`
//!   (default) the grid is coarsened to `min(1e-2, 0.02·s₁)` when that is larger, `s₁` the spread
//!   of one step's loss (`adaptive_interval`): the error stays near `1e-4` relative while wide
//!   distributions (large `q` or `ε`) take up to 100 times fewer points. On the acceptance grid
//!   `ε` stays within `2e-4` of `dp_accounting`'s pessimistic figure up to `10⁵` compositions.
//! - `tail_mass` `T` (default `1e-15`): the probability that truncation may move to `+∞` over the
//!   whole composition: each of a part's `k` single-step discretizations leaves out at most
//!   `T/(2·parts·k)` of `P` (sent to `+∞`), each of the `C` convolutions truncates at most
//!   `T/(4C)` per side (right tail to `+∞`, left tail rounded up). In a self-composition the
//!   window of each power `m` comes from the Chernoff bound on the single step's exact masses
//!   (not from the computed tails, which hold roundoff). Truncated mass is moved, never dropped.
//! - `max_points` (default `2²³`): a composed grid larger than this is refused
//!   ([`AccountantError::GridTooLarge`]); it bounds memory (`16 B` per point in the FFT) and time.
//!   At `Δ = 1e-4` it spans losses over ~800 nats, which only `ε` in the hundreds need.
//!
//! # Floating point
//!
//! The pessimism above is exact in real arithmetic. Masses are computed from tail
//! probabilities, never as differences of numbers near 1 (module `normal`), and mass lost by rounding
//! in a discretization is added to `+∞`. The FFT's own roundoff (about `1e-16·log₂N` of the
//! largest mass per point, of either sign) is not bounded a priori, as in every PLD accountant we
//! know of (`dp_accounting` included); it is measured against the direct sum in
//! module `convolution`'s tests, and the grid tests compare the end results with `dp_accounting`.

mod convolution;
mod error;
mod normal;

pub mod bandmf;
pub mod gaussian;
pub mod pld;

use crate::request::option::Opt;
pub use error::AccountantError;
pub use mfc_formats::Neighbouring;

use gaussian::{Direction, SampledGaussianLoss};
use pld::DiscretePld;

/// How the privacy loss distributions are discretized and truncated (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PldOptions {
    /// The grid interval `Δ` of privacy losses, in `[1e-7, 0.1]`.
    pub discretization: f64,
    /// The probability truncation may move to `+∞` over a whole composition, in `[1e-30, 1e-6]`.
    pub tail_mass: f64,
    /// The largest grid (points) a distribution may have, at least `1024`.
    pub max_points: usize,
    /// Coarsen the grid where the single-step losses are spread wide enough that it costs no
    /// accuracy (module docs): `Δ = max(discretization, min(1e-2, c·s₁))`.
    pub adaptive: bool,
}

impl Default for PldOptions {
    fn default() -> Self {
        PldOptions {
            discretization: 1e-4,
            tail_mass: 1e-15,
            max_points: 1 << 23,
            adaptive: true,
        }
    }
}

impl PldOptions {
    /// Refuses out-of-range options.
    pub fn validate(&self) -> Result<(), AccountantError> {
        if !(self.discretization >= 1e-7 && self.discretization <= 0.1) {
            return Err(out_of_range(
                Opt::Discretization,
                self.discretization,
                "a grid interval in [1e-7, 0.1]",
            ));
        }
        if !(self.tail_mass >= 1e-30 && self.tail_mass <= 1e-6) {
            return Err(out_of_range(
                Opt::TailMass,
                self.tail_mass,
                "a probability in [1e-30, 1e-6]",
            ));
        }
        if self.max_points < 1024 {
            return Err(AccountantError::OutOfRange {
                option: Opt::Discretization,
                value: format!("(max points {})", self.max_points),
                allowed: "a grid of at least 1024 points",
            });
        }
        Ok(())
    }
}

/// One Gaussian mechanism of noise multiplier `σ` (noise `σ` per unit sensitivity) run on a
/// Poisson sample of the records, each included with probability `q` (`q = 1`: all records).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampledGaussian {
    /// `σ > 0`.
    pub noise_multiplier: f64,
    /// `q ∈ (0, 1]`.
    pub sampling_prob: f64,
}

impl SampledGaussian {
    /// Checks `σ > 0` finite and `q ∈ (0, 1]`.
    pub fn new(noise_multiplier: f64, sampling_prob: f64) -> Result<Self, AccountantError> {
        check_sampling_prob(sampling_prob)?;
        if !(noise_multiplier > 0.0 && noise_multiplier.is_finite()) {
            return Err(out_of_range(
                Opt::NoiseMultiplier,
                noise_multiplier,
                "a finite noise multiplier > 0",
            ));
        }
        Ok(SampledGaussian {
            noise_multiplier,
            sampling_prob,
        })
    }
}

/// A composition of runs of [`SampledGaussian`] mechanisms for one record under one neighbouring
/// relation.
#[derive(Debug, Clone, PartialEq)]
pub struct Composition {
    neighbouring: Neighbouring,
    parts: Vec<(SampledGaussian, u64)>,
}

impl Composition {
    /// An empty composition (`ε = 0`).
    pub fn new(neighbouring: Neighbouring) -> Result<Self, AccountantError> {
        Ok(Composition {
            neighbouring,
            parts: Vec::new(),
        })
    }

    /// `count` runs of `mechanism`, on their own: the composition DP-SGD's accounting uses.
    pub fn repeated(
        mechanism: SampledGaussian,
        count: u64,
        neighbouring: Neighbouring,
    ) -> Result<Self, AccountantError> {
        let mut c = Composition::new(neighbouring)?;
        c.push(mechanism, count)?;
        Ok(c)
    }

    /// Adds `count` runs of `mechanism`. Refuses replace-one with `q < 1` (module docs).
    pub fn push(&mut self, mechanism: SampledGaussian, count: u64) -> Result<(), AccountantError> {
        let mechanism = SampledGaussian::new(mechanism.noise_multiplier, mechanism.sampling_prob)?;
        if self.neighbouring == Neighbouring::ReplaceOne && mechanism.sampling_prob < 1.0 {
            return Err(AccountantError::ReplaceOneWithSampling {
                sampling_prob: mechanism.sampling_prob,
            });
        }
        if count > 0 {
            self.parts.push((mechanism, count));
        }
        Ok(())
    }

    /// The neighbouring relation.
    pub fn neighbouring(&self) -> Neighbouring {
        self.neighbouring
    }

    /// The privacy loss distribution of the whole composition.
    pub fn privacy_loss(&self, options: &PldOptions) -> Result<ComposedLoss, AccountantError> {
        options.validate()?;
        let s = self.neighbouring.sensitivity_factor();
        // The Gaussian runs compose into one Gaussian of μ² = Σ count·(s/σ)².
        let mu2: f64 = self
            .parts
            .iter()
            .filter(|(m, _)| m.sampling_prob == 1.0)
            .map(|(m, k)| *k as f64 * (s / m.noise_multiplier).powi(2))
            .sum();
        let sampled: Vec<&(SampledGaussian, u64)> = self
            .parts
            .iter()
            .filter(|(m, _)| m.sampling_prob < 1.0)
            .collect();
        if sampled.is_empty() {
            return Ok(ComposedLoss::Gaussian {
                noise_multiplier: if mu2 > 0.0 {
                    1.0 / mu2.sqrt()
                } else {
                    f64::INFINITY
                },
            });
        }
        let interval = if options.adaptive {
            let finest = sampled
                .iter()
                .map(|(m, _)| adaptive_interval(s / m.noise_multiplier, m.sampling_prob))
                .chain((mu2 > 0.0).then(|| adaptive_interval(mu2.sqrt(), 1.0)))
                .fold(f64::INFINITY, f64::min);
            finest.max(options.discretization)
        } else {
            options.discretization
        };
        let parts = sampled.len() + usize::from(mu2 > 0.0);
        let convolutions: u64 = sampled
            .iter()
            .map(|(_, k)| u64::from(DiscretePld::convolutions(*k)))
            .sum::<u64>()
            + parts as u64;
        let conv_tail = options.tail_mass / (4.0 * convolutions as f64);
        let chain = |direction: Direction| -> Result<DiscretePld, AccountantError> {
            let mut total: Option<DiscretePld> = None;
            let mut absorb = |next: DiscretePld| -> Result<(), AccountantError> {
                total = Some(match total.take() {
                    None => next,
                    Some(t) => t.compose(&next, conv_tail, options.max_points)?,
                });
                Ok(())
            };
            if mu2 > 0.0 {
                let loss = SampledGaussianLoss::new(1.0 / mu2.sqrt(), 1.0, 1.0, Direction::Remove);
                let single_tail = options.tail_mass / (2.0 * parts as f64);
                absorb(loss.discretize(interval, single_tail, options.max_points)?)?;
            }
            for (m, k) in &sampled {
                let loss =
                    SampledGaussianLoss::new(m.noise_multiplier, s, m.sampling_prob, direction);
                let single_tail = options.tail_mass / (2.0 * parts as f64 * *k as f64);
                let one = loss.discretize(interval, single_tail, options.max_points)?;
                absorb(one.self_compose(*k, conv_tail, options.max_points)?)?;
            }
            Ok(total.unwrap_or_else(|| DiscretePld::identity(interval)))
        };
        Ok(ComposedLoss::Discrete {
            remove: chain(Direction::Remove)?,
            add: chain(Direction::Add)?,
        })
    }

    /// The smallest `ε ≥ 0` (an upper bound on the true one) with `δ(ε) ≤ delta`; `+∞` if none.
    pub fn epsilon(&self, delta: f64, options: &PldOptions) -> Result<f64, AccountantError> {
        check_delta(delta)?;
        Ok(self.privacy_loss(options)?.epsilon(delta))
    }

    /// `δ(ε)` (an upper bound on the true one).
    pub fn delta(&self, epsilon: f64, options: &PldOptions) -> Result<f64, AccountantError> {
        check_epsilon(epsilon)?;
        Ok(self.privacy_loss(options)?.delta(epsilon))
    }
}

/// The privacy loss of a composition, ready for `ε(δ)` and `δ(ε)` queries.
#[derive(Debug, Clone, PartialEq)]
pub enum ComposedLoss {
    /// A Gaussian mechanism of sensitivity 1 and this noise multiplier (`+∞`: no mechanism),
    /// evaluated exactly.
    Gaussian {
        /// `σ = 1/μ`.
        noise_multiplier: f64,
    },
    /// Discretized distributions for the two directions of add-remove neighbouring.
    Discrete {
        /// Remove direction.
        remove: DiscretePld,
        /// Add direction.
        add: DiscretePld,
    },
}

impl ComposedLoss {
    /// The smallest `ε ≥ 0` with `δ(ε) ≤ delta` (`+∞` if none, or above `1e4` for a Gaussian).
    pub fn epsilon(&self, delta: f64) -> f64 {
        match self {
            ComposedLoss::Gaussian { noise_multiplier } => {
                if noise_multiplier.is_infinite() {
                    0.0
                } else {
                    crate::privacy::calibrate::epsilon_for_noise_multiplier(
                        *noise_multiplier,
                        delta,
                    )
                    .unwrap_or(f64::INFINITY)
                }
            }
            ComposedLoss::Discrete { remove, add } => remove
                .epsilon_for_delta(delta)
                .max(add.epsilon_for_delta(delta)),
        }
    }

    /// `δ(ε)`.
    pub fn delta(&self, epsilon: f64) -> f64 {
        match self {
            ComposedLoss::Gaussian { noise_multiplier } => {
                if noise_multiplier.is_infinite() {
                    0.0
                } else {
                    crate::privacy::calibrate::delta_for_epsilon(*noise_multiplier, epsilon)
                }
            }
            ComposedLoss::Discrete { remove, add } => remove
                .delta_for_epsilon(epsilon)
                .max(add.delta_for_epsilon(epsilon)),
        }
    }
}

/// Connect-the-dots errs by about `0.1·(Δ/s₁)²` relative in `ε`, with `s₁` the spread of the
/// bulk of one step's privacy loss (measured against `dp_accounting` and finer grids: `Δ/s₁` of
/// 0.008, 0.08 and 0.19 gave 4e-6, 6e-4 and 3e-3). For the subsampled Gaussian of `μ = s/σ` the
/// bulk is `q·(e^l − 1)` with `l ~ N(−μ²/2, μ²)`; `s₁ = q·min(μ, 1)·e^{−max(0, μ²−1)/2}` is below
/// its interquartile range for every `μ`. This returns `min(1e-2, 0.02·s₁)`, for an error near
/// `4e-5`.
fn adaptive_interval(mu: f64, q: f64) -> f64 {
    let spread = q * mu.min(1.0) * (-(mu * mu - 1.0).max(0.0) / 2.0).exp();
    (0.02 * spread).min(1e-2)
}

/// Relative precision of [`noise_multiplier_for`]: it returns the upper end of a bracket this
/// narrow, whose lower end fails the target, or earlier a `σ` whose accounted `ε` is within
/// `1e-7` below the target (then within about `1e-7` of the boundary).
pub const NOISE_MULTIPLIER_RTOL: f64 = 1e-5;

/// The smallest noise multiplier `σ` (rounded up, relative precision [`NOISE_MULTIPLIER_RTOL`])
/// such that `count` runs of the Poisson-subsampled Gaussian with sampling probability
/// `sampling_prob` are `(ε, δ)`-DP under `neighbouring`.
///
/// `q = 1`: exact, `σ = s·√count·σ₁(ε, δ)` with `σ₁` the analytic-Gaussian calibration. `q < 1`:
/// a bracketing search on `ln σ` (regula falsi, Illinois variant, falling back to bisection),
/// started from the central-limit guess `σ² = 1/ln(1 + μ²/(q²k))` (Bu, Dong, Long, Su 2020) with
/// `μ = 1/σ₁`, which returns the upper end: a `σ` whose accounted `ε` is at most the target.
pub fn noise_multiplier_for(
    sampling_prob: f64,
    count: u64,
    neighbouring: Neighbouring,
    epsilon: f64,
    delta: f64,
    options: &PldOptions,
) -> Result<f64, AccountantError> {
    check_sampling_prob(sampling_prob)?;
    check_epsilon(epsilon)?;
    if epsilon == 0.0 {
        return Err(out_of_range(Opt::Epsilon, epsilon, "a finite ε > 0"));
    }
    check_delta(delta)?;
    options.validate()?;
    let s = neighbouring.sensitivity_factor();
    if count == 0 {
        return Err(AccountantError::OutOfRange {
            option: Opt::Steps,
            value: "0".into(),
            allowed: "at least 1 composition",
        });
    }
    if neighbouring == Neighbouring::ReplaceOne && sampling_prob < 1.0 {
        return Err(AccountantError::ReplaceOneWithSampling { sampling_prob });
    }
    let unreachable = |why: &str| AccountantError::TargetUnreachable {
        epsilon,
        delta,
        why: why.into(),
    };
    let single = crate::privacy::calibrate::noise_multiplier_for(epsilon, delta)
        .ok_or_else(|| unreachable("no Gaussian noise multiplier up to 1e8 meets it"))?;
    let scale = s * (count as f64).sqrt();
    let gaussian = if scale == 1.0 {
        single
    } else {
        // Two ulps up: the product must not round below the exact one.
        single * scale * (1.0 + 4.0 * f64::EPSILON)
    };
    if sampling_prob == 1.0 {
        return Ok(gaussian);
    }
    let eps_at = |sigma: f64| -> Result<f64, AccountantError> {
        let mechanism = SampledGaussian::new(sigma, sampling_prob)?;
        match Composition::repeated(mechanism, count, neighbouring)?.epsilon(delta, options) {
            // A grid too large for a smaller σ than a working one: its ε is above the target.
            Err(AccountantError::GridTooLarge { .. }) => Ok(f64::INFINITY),
            other => other,
        }
    };
    let mu = 1.0 / single;
    let (q, k) = (sampling_prob, count as f64);
    let guess = (1.0 / libm::log1p(mu * mu / (q * q * k)).sqrt()).min(gaussian);
    search(eps_at, guess, gaussian, epsilon).map_err(|e| match e {
        Some(e) => e,
        None => unreachable("no noise multiplier found in the search range"),
    })
}

/// The bracketing search of [`noise_multiplier_for`]: `eps_at` decreases in `σ`; returns the
/// smallest `σ` found (to [`NOISE_MULTIPLIER_RTOL`]) with `eps_at(σ) ≤ target`. `Err(None)` if
/// no bracket is found.
fn search(
    eps_at: impl Fn(f64) -> Result<f64, AccountantError>,
    guess: f64,
    ceiling: f64,
    target: f64,
) -> Result<f64, Option<AccountantError>> {
    let f = |sigma: f64| -> Result<f64, AccountantError> {
        let e = eps_at(sigma)?;
        // g = ln ε − ln target: ≤ 0 meets the target; ε = 0 meets it too.
        Ok(if e <= 0.0 {
            -1e3
        } else if e.is_finite() {
            (e / target).ln()
        } else {
            1e3
        })
    };
    // Bracket [lo, hi] in σ with f(lo) > 0 ≥ f(hi).
    let (mut lo, mut f_lo, mut hi, mut f_hi);
    let f_guess = f(guess).map_err(Some)?;
    if f_guess <= 0.0 {
        hi = guess;
        f_hi = f_guess;
        lo = guess;
        f_lo = f_guess;
        for _ in 0..200 {
            lo *= 0.9;
            if lo < 1e-6 {
                return Ok(hi);
            }
            f_lo = f(lo).map_err(Some)?;
            if f_lo > 0.0 {
                break;
            }
            hi = lo;
            f_hi = f_lo;
        }
        if f_lo <= 0.0 {
            return Err(None);
        }
    } else {
        lo = guess;
        f_lo = f_guess;
        hi = guess;
        f_hi = f_guess;
        for step in 0..200 {
            hi = if hi < ceiling {
                (hi * 1.1).min(ceiling)
            } else {
                hi * 1.05
            };
            if step > 0 && hi > 1e3 * ceiling {
                return Err(None);
            }
            f_hi = f(hi).map_err(Some)?;
            if f_hi <= 0.0 {
                break;
            }
            lo = hi;
            f_lo = f_hi;
        }
        if f_hi > 0.0 {
            return Err(None);
        }
    }
    // Illinois regula falsi on (ln σ, f), bisection when it stalls.
    let (mut a, mut fa, mut b, mut fb) = (lo.ln(), f_lo, hi.ln(), f_hi);
    let mut best = hi;
    let mut side = 0i8;
    for _ in 0..100 {
        // Done when the bracket is narrow, or when σ = e^b meets the target with an ε within
        // 1e-7 of it (then σ is within ~1e-7 of the boundary: d ln ε/d ln σ is below −1 here).
        if b - a <= NOISE_MULTIPLIER_RTOL * 0.5 || fb >= -1e-7 {
            break;
        }
        let mut x = if fa.is_finite() && fb.is_finite() && fa < 1e2 && fb > -1e2 && fa != fb {
            b - fb * (b - a) / (fb - fa)
        } else {
            0.5 * (a + b)
        };
        // Keep the probe strictly inside, at least a little away from both ends, so the bracket
        // shrinks (a probe at b − margin that fails closes it to `margin`).
        let margin = (0.25 * NOISE_MULTIPLIER_RTOL)
            .max(1e-3 * (b - a))
            .min(0.25 * (b - a));
        if !x.is_finite() {
            x = 0.5 * (a + b);
        }
        x = x.clamp(a + margin, b - margin);
        let sigma = x.exp();
        let fx = f(sigma).map_err(Some)?;
        if fx > 0.0 {
            a = x;
            fa = fx;
            if side == -1 {
                fb *= 0.5;
            }
            side = -1;
        } else {
            b = x;
            fb = fx;
            best = sigma;
            if side == 1 {
                fa *= 0.5;
            }
            side = 1;
        }
    }
    Ok(best)
}

fn out_of_range(option: Opt, value: f64, allowed: &'static str) -> AccountantError {
    AccountantError::OutOfRange {
        option,
        value: format!("{value}"),
        allowed,
    }
}

fn check_sampling_prob(q: f64) -> Result<(), AccountantError> {
    if !(q > 0.0 && q <= 1.0) {
        return Err(out_of_range(
            Opt::SamplingProb,
            q,
            "a probability in (0, 1]",
        ));
    }
    Ok(())
}

fn check_delta(delta: f64) -> Result<(), AccountantError> {
    if !(delta > 0.0 && delta < 1.0) {
        return Err(out_of_range(Opt::Delta, delta, "a probability in (0, 1)"));
    }
    Ok(())
}

fn check_epsilon(epsilon: f64) -> Result<(), AccountantError> {
    if !(epsilon >= 0.0 && epsilon.is_finite()) {
        return Err(out_of_range(Opt::Epsilon, epsilon, "a finite ε ≥ 0"));
    }
    Ok(())
}
