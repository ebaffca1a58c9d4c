//! The privacy loss of the Gaussian mechanism and of the Poisson-subsampled Gaussian mechanism,
//! and its pessimistic discretization.
//!
//! # The pairs
//!
//! A sum query of sensitivity `s` (each record moves it by at most `s`), noise `N(0, σ²)`, each
//! record included independently with probability `q` (Poisson sampling). Under add-remove
//! neighbouring the tight worst-case pairs are one-dimensional (Zhu, Dong, Wang 2022, on Poisson
//! subsampling; Koskela et al. 2020, the subsampled Gaussian), one per direction, as
//! `dp_accounting`'s `AdjacencyType` names them:
//!
//! ```text
//! Remove: P = (1−q)·N(0, σ²) + q·N(−s, σ²),   Q = N(0, σ²),
//!         L(x) = ln(1 − q + q·e^{l(x)}),       l(x) = −s(x + s/2)/σ²;
//! Add:    P = N(0, σ²),   Q = (1−q)·N(0, σ²) + q·N(s, σ²),
//!         L(x) = −ln(1 − q + q·e^{−l(x)}),     l(x) = −s(x − s/2)/σ².
//! ```
//!
//! Both losses decrease in `x`. A record's guarantee is the worse of the two composed curves
//! (`max(δ_remove, δ_add)`: the direction is fixed across the composition for one pair of
//! neighbouring datasets). With `q = 1` the two coincide and `L` is the Gaussian's linear loss.
//! Replace-one with `q = 1` is the Gaussian with `s = 2` (the record moves the sum by up to `2`).
//!
//! # Discretization ("connect the dots", pessimistic)
//!
//! Doroshenko, Ghazi, Kamath, Kumar, Manurangsi (2022), Algorithm 1, here in its local form.
//! On the grid `ε_i = iΔ`, let `x_i = L⁻¹(ε_i)`; on the slab `x ∈ (x_{i+1}, x_i]` the likelihood
//! ratio lies in `[e^{ε_i}, e^{ε_{i+1}}]`. Its `P`-mass `a` and `Q`-mass `b` are split between the
//! two grid losses so that both masses are kept:
//!
//! ```text
//! ω(ε_{i+1}) += (a − e^{ε_i}·b) / (1 − e^{−Δ}),      ω(ε_i) += the rest of a.
//! ```
//!
//! The result is the PLD of a pair `(P̃, Q̃)` whose hockey-stick curve equals the true one at every
//! `ε_i` and interpolates it linearly in `e^ε` in between, which lies above the true curve since
//! `δ` is convex in `e^ε` (Doroshenko et al. 2022, §3): a dominating pair, and dominating pairs
//! compose (Zhu, Dong, Wang 2022). Its error is of second order in `Δ`, where rounding every loss
//! up to the grid ("privacy buckets", Meiser & Mohammadi 2018) loses `≈ Δ/2` per composition.
//!
//! Truncation: the grid spans `[L(x_hi), L(x_lo)]` rounded outwards, with `x_lo`, `x_hi` the
//! points beyond which `P` has mass at most `τ/2` on each side. Nothing is discarded: the `P`-mass
//! of `x < x_lo`-side losses above the grid goes to `+∞`, the mass of losses below the grid is
//! rounded up to its first point. Any mass the floating-point arithmetic loses (`1 − Σω`,
//! summed with compensation) is added to `+∞`.

use super::error::AccountantError;
use super::normal;
use super::pld::{DiscretePld, check_points};

/// Which of the two worst-case pairs (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `P` holds the record (with probability `q`), `Q` does not.
    Remove,
    /// `Q` holds the record, `P` does not.
    Add,
}

/// The privacy loss of one Poisson-subsampled Gaussian mechanism in one direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampledGaussianLoss {
    sigma: f64,
    sensitivity: f64,
    q: f64,
    direction: Direction,
}

impl SampledGaussianLoss {
    /// `σ > 0`, `s > 0`, `q ∈ (0, 1]` (checked by the callers in [`super`]).
    pub fn new(
        noise_multiplier: f64,
        sensitivity: f64,
        sampling_prob: f64,
        direction: Direction,
    ) -> Self {
        SampledGaussianLoss {
            sigma: noise_multiplier,
            sensitivity,
            q: sampling_prob,
            direction,
        }
    }

    /// The privacy loss `L(x)`.
    pub fn loss(&self, x: f64) -> f64 {
        let (s, v, q) = (self.sensitivity, self.sigma * self.sigma, self.q);
        match self.direction {
            Direction::Remove => {
                let l = -s * (x + 0.5 * s) / v;
                if q == 1.0 {
                    l
                } else if l > 0.0 {
                    l + libm::log(q + (1.0 - q) * libm::exp(-l))
                } else {
                    libm::log1p(q * libm::expm1(l))
                }
            }
            Direction::Add => {
                let l = -s * (x - 0.5 * s) / v;
                if q == 1.0 {
                    l
                } else if l < 0.0 {
                    l - libm::log(q + (1.0 - q) * libm::exp(l))
                } else {
                    -libm::log1p(q * libm::expm1(-l))
                }
            }
        }
    }

    /// `L⁻¹(ε)`: the `x` with `L(x) = ε`; `+∞` below the range of `L`, `−∞` above it.
    pub fn inverse_loss(&self, eps: f64) -> f64 {
        let (s, v, q) = (self.sensitivity, self.sigma * self.sigma, self.q);
        match self.direction {
            Direction::Remove => {
                // e^l = 1 + (e^ε − 1)/q, defined for ε > ln(1 − q).
                let l = if q == 1.0 {
                    eps
                } else if eps <= libm::log1p(-q) {
                    return f64::INFINITY;
                } else if eps > 0.0 {
                    eps + libm::log1p(-(1.0 - q) * libm::exp(-eps)) - libm::log(q)
                } else {
                    libm::log1p(libm::expm1(eps) / q)
                };
                -0.5 * s - v * l / s
            }
            Direction::Add => {
                // e^{−l} = 1 + (e^{−ε} − 1)/q, defined for ε < −ln(1 − q).
                let l = if q == 1.0 {
                    eps
                } else if eps >= -libm::log1p(-q) {
                    return f64::NEG_INFINITY;
                } else if eps < 0.0 {
                    eps - libm::log1p(-(1.0 - q) * libm::exp(eps)) + libm::log(q)
                } else {
                    -libm::log1p(libm::expm1(-eps) / q)
                };
                0.5 * s - v * l / s
            }
        }
    }

    /// The shift of the mixture component that holds the record, in `P` (Remove) or `Q` (Add).
    fn shift(&self) -> f64 {
        match self.direction {
            Direction::Remove => -self.sensitivity,
            Direction::Add => self.sensitivity,
        }
    }

    /// `(P(X ≤ x), Q(X ≤ x))`.
    fn cdfs(&self, x: f64) -> (f64, f64) {
        let plain = normal::cdf(x / self.sigma);
        let moved = normal::cdf((x - self.shift()) / self.sigma);
        let mixed = (1.0 - self.q) * plain + self.q * moved;
        match self.direction {
            Direction::Remove => (mixed, plain),
            Direction::Add => (plain, mixed),
        }
    }

    /// The exact `δ(ε)` of one run in this direction: `P(x ≤ x*) − e^ε Q(x ≤ x*)` at
    /// `x* = L⁻¹(ε)`, since `L ≥ ε` exactly left of `x*` (`L` decreases; for `q = 1` this is
    /// Balle & Wang 2018, Thm 8).
    pub fn hockey_stick(&self, eps: f64) -> f64 {
        let x = self.inverse_loss(eps);
        if x == f64::INFINITY {
            return (-libm::expm1(eps)).max(0.0);
        }
        if x == f64::NEG_INFINITY {
            return 0.0;
        }
        let (p, q) = self.cdfs(x);
        (p - libm::exp(eps) * q).max(0.0)
    }

    /// The points beyond which `P` has at most `tail/2` on each side: `(x_lo, x_hi)`.
    fn truncation(&self, tail: f64) -> (f64, f64) {
        let z = normal::lower_quantile(0.5 * tail);
        let (s, sd) = (self.sensitivity, self.sigma);
        match self.direction {
            // P's components are N(0) and N(−s): the low side is the shifted one's.
            Direction::Remove => (sd * z - s, -sd * z),
            Direction::Add => (sd * z, -sd * z),
        }
    }

    /// The pessimistic connect-the-dots PLD (module docs) on the grid `iΔ`, `interval = Δ`, with
    /// at most `tail` of `P`'s mass outside the grid's slabs.
    pub fn discretize(
        &self,
        interval: f64,
        tail: f64,
        max_points: usize,
    ) -> Result<DiscretePld, AccountantError> {
        let (x_lo, x_hi) = self.truncation(tail);
        let top = (self.loss(x_lo) / interval).ceil();
        let bottom = (self.loss(x_hi) / interval).floor();
        let points = (top - bottom + 1.0).max(1.0);
        if !(points.is_finite()) || points > max_points as f64 {
            return Err(AccountantError::GridTooLarge {
                points: if points.is_finite() {
                    points as usize
                } else {
                    usize::MAX
                },
                limit: max_points,
                discretization: interval,
            });
        }
        let (i_lo, n) = (bottom as i64, points as usize);
        check_points(n, max_points, interval)?;
        // Each slab boundary x_i and the small tail probabilities of both components there.
        let sd = self.sigma;
        let shift = self.shift();
        let boundary = |i: usize| -> Boundary {
            let x = self.inverse_loss((i_lo + i as i64) as f64 * interval);
            Boundary {
                plain: Tail::new(x / sd),
                moved: Tail::new((x - shift) / sd),
            }
        };
        let q = self.q;
        // (P-mass, Q-mass) of x ∈ (lo, hi].
        let masses = |lo: &Boundary, hi: &Boundary| -> (f64, f64) {
            let plain = Tail::interval(&lo.plain, &hi.plain);
            let moved = Tail::interval(&lo.moved, &hi.moved);
            let mixed = if q == 1.0 {
                moved
            } else {
                (1.0 - q) * plain + q * moved
            };
            match self.direction {
                Direction::Remove => (mixed, plain),
                Direction::Add => (plain, mixed),
            }
        };
        let mut probs = vec![0.0; n];
        let denominator = -libm::expm1(-interval);
        let minus_inf = Boundary {
            plain: Tail::new(f64::NEG_INFINITY),
            moved: Tail::new(f64::NEG_INFINITY),
        };
        let plus_inf = Boundary {
            plain: Tail::new(f64::INFINITY),
            moved: Tail::new(f64::INFINITY),
        };
        let mut upper = boundary(0); // x_0: losses below ε_0 lie right of it.
        // Losses below the grid: rounded up to its first point.
        probs[0] += masses(&upper, &plus_inf).0;
        for i in 0..n - 1 {
            let lower = boundary(i + 1);
            let (a, b) = masses(&lower, &upper);
            let eps_i = (i_lo + i as i64) as f64 * interval;
            let hi = ((a - libm::exp(eps_i) * b) / denominator).clamp(0.0, a);
            probs[i + 1] += hi;
            probs[i] += a - hi;
            upper = lower;
        }
        // Losses above the grid: to +∞.
        let mut infinity = masses(&minus_inf, &upper).0;
        // Compensated (Neumaier) sum: the stored masses telescope to 1 up to a few roundings
        // (neighbouring tails subtract exactly, Sterbenz), so the deficit is what they really
        // lack, not summation noise.
        let total = compensated_sum(probs.iter().copied().chain([infinity]));
        if total < 1.0 {
            infinity += 1.0 - total;
        }
        Ok(DiscretePld::from_parts(interval, i_lo, probs, infinity))
    }
}

/// `Σ x` with Neumaier's compensation.
pub(crate) fn compensated_sum(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut carry) = (0.0_f64, 0.0_f64);
    for x in xs {
        let t = sum + x;
        carry += if sum.abs() >= x.abs() {
            (sum - t) + x
        } else {
            (x - t) + sum
        };
        sum = t;
    }
    sum + carry
}

/// `Φ` at a point, kept as its smaller tail so interval masses never subtract numbers near 1.
#[derive(Debug, Clone, Copy)]
struct Tail {
    x: f64,
    /// `Φ(−|x|)`.
    small: f64,
}

impl Tail {
    fn new(x: f64) -> Self {
        Tail {
            x,
            small: normal::cdf(-x.abs()),
        }
    }

    /// `Φ(v) − Φ(u)` for `u ≤ v`.
    fn interval(u: &Tail, v: &Tail) -> f64 {
        let p = if u.x >= 0.0 {
            u.small - v.small
        } else if v.x <= 0.0 {
            v.small - u.small
        } else {
            1.0 - u.small - v.small
        };
        p.max(0.0)
    }
}

/// A slab boundary: the tails of the unshifted and shifted components.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    plain: Tail,
    moved: Tail,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `L⁻¹` inverts `L` in both directions and for several `q`.
    #[test]
    fn inverse_loss_inverts_loss() {
        for q in [1e-4, 0.01, 0.5, 1.0] {
            for direction in [Direction::Remove, Direction::Add] {
                let m = SampledGaussianLoss::new(0.8, 1.0, q, direction);
                for x in [-6.0, -2.0, -0.5, 0.0, 0.3, 1.7, 5.0] {
                    let l = m.loss(x);
                    let back = m.inverse_loss(l);
                    assert!(
                        (back - x).abs() < 1e-7 * (1.0 + x.abs()) || l.abs() < 1e-12,
                        "q={q} {direction:?} x={x}: L={l}, L⁻¹(L)={back}"
                    );
                }
            }
        }
    }

    /// The discretized PLD's `δ(ε)` is at least the exact one, equal to it on the grid (connect
    /// the dots), and close between.
    #[test]
    fn connect_the_dots_is_exact_on_the_grid_and_above_between() {
        for (sigma, q) in [(1.0, 1.0), (0.7, 0.05), (2.0, 0.3), (0.5, 1e-3)] {
            for direction in [Direction::Remove, Direction::Add] {
                let m = SampledGaussianLoss::new(sigma, 1.0, q, direction);
                let interval = 1e-3;
                let pld = m.discretize(interval, 1e-20, 1 << 24).unwrap();
                assert!((pld.total_mass() - 1.0).abs() < 1e-12);
                for i in [1, 7, 50, 333, 1200, 2500] {
                    let eps = i as f64 * interval;
                    let exact = m.hockey_stick(eps);
                    let got = pld.delta_for_epsilon(eps);
                    assert!(
                        got >= exact * (1.0 - 1e-9) - 1e-18 && got <= exact * (1.0 + 1e-6) + 1e-15,
                        "σ={sigma} q={q} {direction:?} ε={eps}: {got} vs exact {exact}"
                    );
                    let mid = eps + 0.37 * interval;
                    let exact = m.hockey_stick(mid);
                    let got = pld.delta_for_epsilon(mid);
                    assert!(
                        got >= exact * (1.0 - 1e-9) - 1e-18,
                        "between: {got} < {exact}"
                    );
                }
            }
        }
    }
}
