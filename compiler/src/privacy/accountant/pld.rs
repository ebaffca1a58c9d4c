//! Discrete privacy loss distributions on a grid `ℓ = iΔ`, with a mass at `+∞`, and what the
//! accountant does with them: compose (convolve), truncate pessimistically, and read off
//! `δ(ε)` and `ε(δ)`.
//!
//! For a pair `(P, Q)` the privacy loss distribution (PLD) is the law of `L = ln(p/q)(X)` for
//! `X ~ P`, with `L = +∞` where `q = 0`; the hockey-stick divergence is
//!
//! ```text
//! δ(ε) = H_{e^ε}(P‖Q) = E[(1 − e^{ε−L})₊] = ω(+∞) + Σ_{ℓ > ε} ω(ℓ)·(1 − e^{ε−ℓ})
//! ```
//!
//! (Koskela, Jälkö, Honkela 2020; Doroshenko et al. 2022, §2). The PLD of a composition of
//! independent mechanisms is the convolution of their PLDs (Koskela et al. 2020; Zhu, Dong,
//! Wang 2022).
//!
//! # Pessimism
//!
//! `(1 − e^{ε−ℓ})₊` increases with `ℓ`, so any change that only moves mass to larger losses, or
//! adds mass, increases `δ(ε)` for every `ε` and, composed with anything, keeps doing so (couple
//! the losses: each rounded-up loss is at least the true one, so their sums are too). Every
//! operation here is of that kind:
//!
//! - **truncation** ([`DiscretePld::truncate`]): the right tail (largest losses, mass at most
//!   `τ`) goes to `+∞`; the left tail (mass at most `τ`) is added to the first kept point (rounded
//!   up); in self-composition the window is the Chernoff bound's, and the bound `τ` itself
//!   (not the computed tail) goes to `+∞` ([`DiscretePld::self_compose`]);
//! - the construction ([`super::gaussian`]) is the pessimistic "connect the dots" discretization.
//!
//! FFT outputs keep their roundoff, of either sign (it is zero-mean; clamping it to zero would
//! bias every composition upwards by the noise of all the tail points).
//!
//! `ε(δ)` is then computed exactly for the discrete distribution (the smallest `ε ≥ 0` with
//! `δ(ε) ≤ δ`), so it is at least the mechanism's true `ε`.

use super::convolution;
use super::error::AccountantError;

/// A privacy loss distribution on the grid `{iΔ}` plus `+∞`: mass `probs[j]` at loss
/// `(offset + j)·Δ`, and `infinity` at `+∞`.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscretePld {
    interval: f64,
    offset: i64,
    probs: Vec<f64>,
    infinity: f64,
}

impl DiscretePld {
    /// The PLD of a mechanism that reveals nothing: all mass at loss 0.
    pub fn identity(interval: f64) -> Self {
        DiscretePld {
            interval,
            offset: 0,
            probs: vec![1.0],
            infinity: 0.0,
        }
    }

    /// From its parts; negative masses are set to zero.
    pub(crate) fn from_parts(
        interval: f64,
        offset: i64,
        mut probs: Vec<f64>,
        infinity: f64,
    ) -> Self {
        for p in probs.iter_mut() {
            if p.is_nan() || *p <= 0.0 {
                *p = 0.0;
            }
        }
        if probs.is_empty() {
            probs.push(0.0);
        }
        DiscretePld {
            interval,
            offset,
            probs,
            infinity: infinity.clamp(0.0, 1.0),
        }
    }

    /// The grid interval `Δ`.
    pub fn interval(&self) -> f64 {
        self.interval
    }

    /// The number of grid points held.
    pub fn len(&self) -> usize {
        self.probs.len()
    }

    /// Whether no grid point is held (never: at least one is kept).
    pub fn is_empty(&self) -> bool {
        self.probs.is_empty()
    }

    /// The mass at `+∞`.
    pub fn infinity_mass(&self) -> f64 {
        self.infinity
    }

    /// The smallest and largest finite losses held.
    pub fn loss_range(&self) -> (f64, f64) {
        (
            self.offset as f64 * self.interval,
            (self.offset + self.probs.len() as i64 - 1) as f64 * self.interval,
        )
    }

    /// `(loss, mass)` of each finite grid point, in increasing loss.
    pub fn masses(&self) -> impl DoubleEndedIterator<Item = (f64, f64)> + '_ {
        self.probs
            .iter()
            .enumerate()
            .map(move |(j, &p)| ((self.offset + j as i64) as f64 * self.interval, p))
    }

    /// Total mass, finite and infinite (1 up to rounding).
    pub fn total_mass(&self) -> f64 {
        self.probs.iter().sum::<f64>() + self.infinity
    }

    /// Pessimistic truncation: the longest prefix of mass `≤ tail` is added to the first kept
    /// point (its losses rounded up), the longest suffix of mass `≤ tail` goes to `+∞`.
    pub fn truncate(&mut self, tail: f64) {
        if tail <= 0.0 || self.probs.len() <= 1 {
            return;
        }
        let mut left = 0.0;
        let mut start = 0;
        while start + 1 < self.probs.len() && left + self.probs[start] <= tail {
            left += self.probs[start];
            start += 1;
        }
        let mut right = 0.0;
        let mut end = self.probs.len();
        while end > start + 1 && right + self.probs[end - 1] <= tail {
            right += self.probs[end - 1];
            end -= 1;
        }
        self.probs.truncate(end);
        self.probs.drain(..start);
        // Sums of roundoff can come out negative: never subtract.
        self.probs[0] += left.max(0.0);
        self.offset += start as i64;
        self.infinity = (self.infinity + right.max(0.0)).min(1.0);
    }

    /// The PLD of the composition of the two mechanisms (the convolution), truncated with
    /// `tail` ([`DiscretePld::truncate`]). Refuses a result longer than `max_points`.
    pub fn compose(
        &self,
        other: &DiscretePld,
        tail: f64,
        max_points: usize,
    ) -> Result<DiscretePld, AccountantError> {
        let mut out = self.convolve(other, max_points)?;
        out.truncate(tail);
        Ok(out)
    }

    /// The untruncated convolution. FFT roundoff is left as it is (outputs of either sign
    /// around the true masses): clamping it would turn zero-mean noise into mass that, far in
    /// the tails of a peaked distribution and over many compositions, adds up.
    fn convolve(
        &self,
        other: &DiscretePld,
        max_points: usize,
    ) -> Result<DiscretePld, AccountantError> {
        assert_eq!(
            self.interval.to_bits(),
            other.interval.to_bits(),
            "PLDs on different grids"
        );
        let points = self.probs.len() + other.probs.len() - 1;
        check_points(points, max_points, self.interval)?;
        let probs = if core::ptr::eq(self, other) {
            convolution::square(&self.probs)
        } else {
            convolution::convolve(&self.probs, &other.probs)
        };
        Ok(DiscretePld {
            interval: self.interval,
            offset: self.offset + other.offset,
            probs,
            infinity: self.infinity + other.infinity - self.infinity * other.infinity,
        })
    }

    /// Keeps the grid points `[lo, hi]` (absolute indices, loss `iΔ`), knowing the true mass
    /// below `lo` and the true mass above `hi` are each at most `tail`: `tail` is added to `+∞`
    /// (a bound, not the computed sum, which holds roundoff), the computed mass below is added to
    /// the first kept point (rounded up).
    fn cut(&mut self, lo: i64, hi: i64, tail: f64) {
        let first = self.offset;
        let last = self.offset + self.probs.len() as i64 - 1;
        let (lo, hi) = (lo.max(first), hi.min(last));
        if lo > hi {
            return;
        }
        let start = (lo - first) as usize;
        let end = (hi - first) as usize + 1;
        if end < self.probs.len() {
            self.probs.truncate(end);
            self.infinity = (self.infinity + tail).min(1.0);
        }
        let below: f64 = self.probs[..start].iter().sum();
        self.probs.drain(..start);
        self.probs[0] += below.max(0.0);
        self.offset = lo;
    }

    /// The PLD of `count` independent runs of the mechanism, by binary powering (at most
    /// `2·log₂(count)` convolutions). Each power `m` is cut to the window that holds all but
    /// `tail` of the `m`-fold sum's mass on each side by the Chernoff bound
    /// `P(S_m ≥ u) ≤ min_{t>0} M(t)^m e^{−tu}` (and `t < 0` below) on this distribution's moment
    /// generating function `M` — computed from the exact single-step masses, so the window does
    /// not depend on roundoff in the tails (as `dp_accounting`'s `self_convolve` does).
    pub fn self_compose(
        &self,
        count: u64,
        tail: f64,
        max_points: usize,
    ) -> Result<DiscretePld, AccountantError> {
        if count == 0 {
            return Ok(DiscretePld::identity(self.interval));
        }
        let chernoff = Chernoff::new(&self.probs, self.interval);
        let window = |m: u64| -> (i64, i64) {
            let (l, u) = chernoff.window(m, tail, self.probs.len());
            (m as i64 * self.offset + l, m as i64 * self.offset + u)
        };
        let mut result: Option<(DiscretePld, u64)> = None;
        let mut base = (self.clone(), 1u64);
        let mut k = count;
        while k > 0 {
            if k & 1 == 1 {
                result = Some(match result {
                    None => base.clone(),
                    Some((r, m)) => {
                        let mut next = r.convolve(&base.0, max_points)?;
                        let (lo, hi) = window(m + base.1);
                        next.cut(lo, hi, tail);
                        (next, m + base.1)
                    }
                });
            }
            k >>= 1;
            if k > 0 {
                let mut next = base.0.convolve(&base.0, max_points)?;
                let (lo, hi) = window(2 * base.1);
                next.cut(lo, hi, tail);
                base = (next, 2 * base.1);
            }
        }
        Ok(result
            .map(|r| r.0)
            .unwrap_or_else(|| DiscretePld::identity(self.interval)))
    }

    /// The number of convolutions [`DiscretePld::self_compose`] performs for `count`.
    pub fn convolutions(count: u64) -> u32 {
        if count <= 1 {
            0
        } else {
            (63 - count.leading_zeros()) + count.count_ones() - 1
        }
    }

    /// `δ(ε) = ω(+∞) + Σ_{ℓ > ε} ω(ℓ)(1 − e^{ε−ℓ})` of this distribution.
    pub fn delta_for_epsilon(&self, epsilon: f64) -> f64 {
        let mut delta = self.infinity;
        for (loss, p) in self.masses().rev() {
            if loss <= epsilon {
                break;
            }
            delta += -libm::expm1(epsilon - loss) * p;
        }
        delta.min(1.0)
    }

    /// The smallest `ε ≥ 0` with `δ(ε) ≤ delta` for this distribution (`+∞` if the mass at
    /// `+∞` exceeds `delta`). On `[ℓ_j, ℓ_{j+1}]`, `δ(ε) = U_j − e^ε W_j` with
    /// `U_j = ω(+∞) + Σ_{i>j} ω_i` and `W_j = Σ_{i>j} ω_i e^{−ℓ_i}`; walking down from the top
    /// finds the interval where `δ` crosses the target and solves there.
    pub fn epsilon_for_delta(&self, delta: f64) -> f64 {
        if self.infinity > delta {
            return f64::INFINITY;
        }
        let (mut upper, mut lower) = (self.infinity, 0.0_f64);
        let mut above = f64::INFINITY; // ℓ_{j+1}
        for (loss, p) in self.masses().rev() {
            let at = loss.max(0.0);
            // δ at `at` with the masses above `loss` only.
            let d = upper - libm::exp(at) * lower;
            if d > delta {
                // The crossing lies in (at, above].
                if lower <= 0.0 {
                    return above;
                }
                let eps = libm::log((upper - delta) / lower);
                return eps.clamp(at, above);
            }
            if loss <= 0.0 {
                return 0.0;
            }
            upper += p;
            lower += p * libm::exp(-loss);
            above = loss;
        }
        // All finite masses included: δ(ε) = U − e^ε W for ε below the smallest loss.
        let d0 = upper - lower;
        if d0 <= delta || lower <= 0.0 {
            return 0.0;
        }
        libm::log((upper - delta) / lower).clamp(0.0, above)
    }
}

/// The log moment generating function `ln M(t) = ln Σ_j ω_j e^{t·j}` of a distribution on grid
/// indices `j ≥ 0`, tabulated at `t = ±2^{i/2}` nats (`i = −24 … 24`), for Chernoff windows.
struct Chernoff {
    /// `(t per grid index, ln M(t))`.
    table: Vec<(f64, f64)>,
}

impl Chernoff {
    fn new(probs: &[f64], interval: f64) -> Self {
        let support: Vec<(f64, f64)> = probs
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > 0.0)
            .map(|(j, p)| (j as f64, p.ln()))
            .collect();
        let mut table = Vec::new();
        for i in -24..=24 {
            let t_nats = 2f64.powf(i as f64 / 2.0);
            for t in [t_nats * interval, -t_nats * interval] {
                // log-sum-exp of ln ω_j + t·j
                let top = support
                    .iter()
                    .map(|(j, lp)| lp + t * j)
                    .fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = support.iter().map(|(j, lp)| (lp + t * j - top).exp()).sum();
                table.push((t, top + sum.ln()));
            }
        }
        Chernoff { table }
    }

    /// `[l, u]` in grid indices of the `m`-fold sum (offsets excluded) outside which each side
    /// holds at most `tail`: `u = min_{t>0} (m ln M(t) − ln tail)/t`, `l` likewise for `t < 0`;
    /// clamped to the support `[0, m(len − 1)]`.
    fn window(&self, m: u64, tail: f64, len: usize) -> (i64, i64) {
        let most = m as f64 * (len as f64 - 1.0);
        let (mut lo, mut hi) = (0.0_f64, most);
        let log_tail = tail.ln();
        for &(t, log_m) in &self.table {
            let bound = (m as f64 * log_m - log_tail) / t;
            if t > 0.0 {
                hi = hi.min(bound);
            } else {
                lo = lo.max(bound);
            }
        }
        let (lo, hi) = (lo.floor().max(0.0), hi.ceil().min(most));
        if lo > hi {
            return (0, most as i64);
        }
        (lo as i64, hi as i64)
    }
}

/// Refuses a grid of more than `max_points` points.
pub(crate) fn check_points(
    points: usize,
    max_points: usize,
    interval: f64,
) -> Result<(), AccountantError> {
    if points > max_points {
        return Err(AccountantError::GridTooLarge {
            points,
            limit: max_points,
            discretization: interval,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ε(δ)` inverts `δ(ε)` on a small distribution, and truncation only raises `δ(ε)`.
    #[test]
    fn epsilon_inverts_delta_and_truncation_is_pessimistic() {
        let probs = vec![0.1, 0.2, 0.3, 0.25, 0.1, 0.04, 0.009, 0.0009];
        let infinity = 1.0 - probs.iter().sum::<f64>();
        let pld = DiscretePld::from_parts(0.5, -2, probs, infinity);
        for delta in [0.5, 0.1, 0.01, 0.002] {
            let eps = pld.epsilon_for_delta(delta);
            let back = pld.delta_for_epsilon(eps);
            assert!(
                (back - delta).abs() <= 1e-12 || (eps == 0.0 && back <= delta),
                "δ={delta}: ε={eps}, δ(ε)={back}"
            );
            assert!(pld.delta_for_epsilon(eps * 0.999 - 1e-9) > delta || eps == 0.0);
        }
        assert_eq!(pld.epsilon_for_delta(infinity * 0.5), f64::INFINITY);
        let mut cut = pld.clone();
        cut.truncate(0.01);
        assert!(cut.len() < pld.len());
        for eps in [-1.0, 0.0, 0.3, 1.0, 2.0, 10.0] {
            assert!(cut.delta_for_epsilon(eps) >= pld.delta_for_epsilon(eps) - 1e-15);
        }
    }

    /// Truncation with a coarse budget (1e-3, in self-composition's Chernoff windows and in
    /// `compose`) never lowers `δ(ε)` below the untruncated composition: what is cut on the
    /// right goes to `+∞` (dropping it instead fails here).
    #[test]
    fn truncated_compositions_stay_above_exact_ones() {
        let probs = vec![0.3, 0.3, 0.2, 0.1, 0.05, 0.03, 0.015, 0.004, 0.0009, 0.0001];
        let pld = DiscretePld::from_parts(0.5, -2, probs, 0.0);
        let exact = pld.self_compose(12, 0.0, 1 << 20).unwrap();
        let cut = pld.self_compose(12, 1e-3, 1 << 20).unwrap();
        assert!(cut.len() < exact.len());
        let other = DiscretePld::from_parts(0.5, -1, vec![0.25; 4], 0.0);
        let exact2 = exact.compose(&other, 0.0, 1 << 20).unwrap();
        let cut2 = exact.compose(&other, 1e-3, 1 << 20).unwrap();
        assert!(cut2.len() < exact2.len());
        let (_, top) = exact2.loss_range();
        let mut eps = -2.0;
        while eps < top {
            assert!(cut.delta_for_epsilon(eps) >= exact.delta_for_epsilon(eps) - 1e-15);
            assert!(cut2.delta_for_epsilon(eps) >= exact2.delta_for_epsilon(eps) - 1e-15);
            eps += 0.25;
        }
        // And the cut is felt: at the top, δ is all truncated mass.
        assert!(cut.delta_for_epsilon(top) > exact.delta_for_epsilon(top));
    }

    /// Self-composition by powering equals composing one at a time.
    #[test]
    fn self_compose_matches_repeated_compose() {
        let pld = DiscretePld::from_parts(0.25, -1, vec![0.2, 0.5, 0.29], 0.01);
        let mut slow = DiscretePld::identity(0.25);
        for _ in 0..13 {
            slow = slow.compose(&pld, 0.0, 1 << 20).unwrap();
        }
        let fast = pld.self_compose(13, 0.0, 1 << 20).unwrap();
        assert_eq!(fast.len(), slow.len());
        for ((a, p), (b, q)) in fast.masses().zip(slow.masses()) {
            assert!((a - b).abs() < 1e-12 && (p - q).abs() < 1e-15);
        }
        assert!((fast.infinity_mass() - slow.infinity_mass()).abs() < 1e-15);
        assert_eq!(DiscretePld::convolutions(13), 3 + 2);
        assert!(matches!(
            pld.self_compose(13, 0.0, 10),
            Err(AccountantError::GridTooLarge { .. })
        ));
    }
}
