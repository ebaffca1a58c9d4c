//! Privacy calibration of a normalized matrix mechanism (`no_std`, `libm` only).
//!
//! A matrix mechanism whose encoder has sensitivity 1 (after normalization) and whose noise is
//! `N(0, σ²)` is, for adaptive streams, exactly as private as one Gaussian mechanism with
//! sensitivity 1 and noise multiplier `σ` (Denisov et al. 2022, Thm 2.1; Choquette-Choo et al.
//! 2023, Thm 2.2). Its tight `(ε, δ)` curve is the analytic Gaussian relation (Balle & Wang 2018,
//! Thm 8):
//!
//! `δ(ε) = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ)`,
//!
//! and its zCDP parameter is `ρ = 1/(2σ²)`. The solvers below bracket the answer by bisection and
//! return the conservative end: `σ` rounded up, `ε` rounded up. Only `core` and `libm` are used,
//! so the same code runs on a device.

/// `Φ(x)`, the standard normal distribution function, accurate in both tails.
fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / core::f64::consts::SQRT_2)
}

/// The smallest `δ` for which a Gaussian mechanism with sensitivity 1 and noise multiplier `σ` is
/// `(ε, δ)`-DP (Balle & Wang 2018, Thm 8).
pub fn delta_for_epsilon(noise_multiplier: f64, epsilon: f64) -> f64 {
    let s = noise_multiplier;
    let a = 1.0 / (2.0 * s);
    let first = normal_cdf(a - epsilon * s);
    // e^ε Φ(−a − εσ) in log space: the factors overflow and underflow separately for large ε.
    let tail = normal_cdf(-a - epsilon * s);
    let second = if tail > 0.0 {
        libm::exp(epsilon + libm::log(tail))
    } else {
        0.0
    };
    (first - second).max(0.0)
}

/// The smallest `ε` (rounded up, relative precision 1e-12) such that noise multiplier `σ` gives
/// `(ε, δ)`-DP. Returns `None` for `σ` or `δ` out of range, or if `ε` exceeds 1e4.
pub fn epsilon_for_noise_multiplier(noise_multiplier: f64, delta: f64) -> Option<f64> {
    if !(noise_multiplier.is_finite() && noise_multiplier > 0.0 && delta > 0.0 && delta < 1.0) {
        return None;
    }
    if delta_for_epsilon(noise_multiplier, 0.0) <= delta {
        return Some(0.0);
    }
    // δ(ε) decreases in ε: find hi with δ(hi) ≤ δ.
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while delta_for_epsilon(noise_multiplier, hi) > delta {
        lo = hi;
        hi *= 2.0;
        if hi > 1e4 {
            return None;
        }
    }
    bisect(&mut lo, &mut hi, |eps| {
        delta_for_epsilon(noise_multiplier, eps) > delta
    });
    Some(hi)
}

/// The smallest noise multiplier `σ` (rounded up, relative precision 1e-12) that gives
/// `(ε, δ)`-DP. Returns `None` for a target out of range.
pub fn noise_multiplier_for(epsilon: f64, delta: f64) -> Option<f64> {
    if !(epsilon.is_finite() && epsilon > 0.0 && delta > 0.0 && delta < 1.0) {
        return None;
    }
    // δ(σ) decreases in σ: find hi with δ(hi) ≤ δ.
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while delta_for_epsilon(hi, epsilon) > delta {
        lo = hi;
        hi *= 2.0;
        if hi > 1e8 {
            return None;
        }
    }
    bisect(&mut lo, &mut hi, |sigma| {
        sigma <= 0.0 || delta_for_epsilon(sigma, epsilon) > delta
    });
    Some(hi)
}

/// The zCDP parameter `ρ = 1/(2σ²)` of the normalized mechanism.
pub fn zcdp_rho(noise_multiplier: f64) -> f64 {
    1.0 / (2.0 * noise_multiplier * noise_multiplier)
}

/// Shrinks `[lo, hi]` while `too_small(mid)` tells which half holds the boundary, until the
/// bracket is 1e-12 relative; `hi` always satisfies the target.
fn bisect(lo: &mut f64, hi: &mut f64, too_small: impl Fn(f64) -> bool) {
    for _ in 0..200 {
        if *hi - *lo <= 1e-12 * *hi {
            break;
        }
        let mid = 0.5 * (*lo + *hi);
        if too_small(mid) {
            *lo = mid;
        } else {
            *hi = mid;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    /// Reference values given by the issue (computed independently of this code).
    #[test]
    fn matches_reference_values() {
        for (sigma, delta, eps) in [
            (1.0, 1e-5, 4.377178),
            (2.0, 1e-6, 2.254085),
            (0.5, 1e-6, 10.997151),
        ] {
            let got = epsilon_for_noise_multiplier(sigma, delta).unwrap();
            assert!(
                close(got, eps, 1e-6),
                "σ={sigma} δ={delta}: ε={got}, want {eps}"
            );
        }
        let sigma = noise_multiplier_for(1.0, 1e-5).unwrap();
        assert!(close(sigma, 3.730632, 1e-6), "σ={sigma}");
    }

    #[test]
    fn calibrated_sigma_is_never_below_the_boundary() {
        for &(eps, delta) in &[
            (1.0, 1e-5),
            (2.0, 1e-6),
            (0.1, 1e-9),
            (8.0, 1e-6),
            (30.0, 1e-3),
        ] {
            let sigma = noise_multiplier_for(eps, delta).unwrap();
            assert!(delta_for_epsilon(sigma, eps) <= delta);
            // and it is tight: 1e-9 less noise would violate the target.
            assert!(delta_for_epsilon(sigma * (1.0 - 1e-9), eps) > delta);
            // round trip: the ε of that σ is the target (rounded up).
            let back = epsilon_for_noise_multiplier(sigma, delta).unwrap();
            assert!(back <= eps * (1.0 + 1e-9) && close(back, eps, 1e-8));
        }
    }

    #[test]
    fn rejects_out_of_range() {
        assert_eq!(noise_multiplier_for(0.0, 1e-5), None);
        assert_eq!(noise_multiplier_for(1.0, 1.0), None);
        assert_eq!(epsilon_for_noise_multiplier(-1.0, 1e-5), None);
        assert_eq!(epsilon_for_noise_multiplier(f64::NAN, 1e-5), None);
        assert!(close(zcdp_rho(2.0), 0.125, 1e-15));
    }
}
