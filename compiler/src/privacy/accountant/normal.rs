//! The standard normal distribution function `Φ` and interval probabilities, accurate in both
//! tails (through `libm::erfc`, as `mfc_runtime::privacy` does): the privacy losses of Gaussian
//! mechanisms are computed from masses of `N(0, 1)` on short intervals far in the tails, where
//! `Φ(v) − Φ(u)` written naively loses every digit.

use core::f64::consts::SQRT_2;

/// `Φ(x)`.
pub(crate) fn cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / SQRT_2)
}

/// A `z ≤ 0` with `Φ(z) ≤ p`, within `1e-9` of the quantile (bisection; `p` in `(0, 0.5]`).
pub(crate) fn lower_quantile(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0_f64, 0.0_f64);
    for _ in 0..80 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) <= p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-9 {
            break;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_and_intervals() {
        // Φ(−10) = 7.619853024160527e-24 (mpmath).
        assert!((cdf(-10.0) / 7.619_853_024_160_527e-24 - 1.0).abs() < 1e-13);
        assert!((cdf(1.0) - 0.841_344_746_068_542_9).abs() < 1e-15);
        let z = lower_quantile(1e-20);
        assert!(cdf(z) <= 1e-20 && cdf(z + 1e-6) > 1e-20);
    }
}
