#!/usr/bin/env python3
"""Reference values for the privacy calibration, computed independently of mfc at high precision.

The analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) with sensitivity 1 and noise multiplier
sigma is (eps, delta)-DP exactly for

    delta(sigma, eps) = Phi(1/(2 sigma) - eps sigma) - e^eps Phi(-1/(2 sigma) - eps sigma).

This script evaluates that relation with mpmath at 80 significant digits (no floating-point
cancellation: e^eps Phi(.) and Phi(.) are both exact to far more digits than their difference
needs) and solves it by bisection for

- sigma(eps, delta), the smallest noise multiplier with delta(sigma, eps) <= delta, and
- eps(sigma, delta), the smallest eps with delta(sigma, eps) <= delta,

for delta down to 1e-12 and eps up to 50, each rounded once to the nearest f64 (printed as the
shortest decimal that reads back as it). Its output is the table of
`runtime/src/privacy.rs::tests::REFERENCE_*`, pasted as printed.

Run: python3 -m venv venv && venv/bin/pip install mpmath && venv/bin/python tools/calibration_reference.py
"""

from mpmath import mp, mpf, erfc, exp, sqrt

mp.dps = 80


def phi(x):
    """The standard normal distribution function."""
    return erfc(-x / sqrt(2)) / 2


def delta(sigma, eps):
    a = 1 / (2 * sigma)
    return phi(a - eps * sigma) - exp(eps) * phi(-a - eps * sigma)


def bisect(too_small, lo, hi):
    """The boundary of a monotone predicate in [lo, hi], to 1e-40 relative."""
    while hi - lo > mpf("1e-40") * hi:
        mid = (lo + hi) / 2
        if too_small(mid):
            lo = mid
        else:
            hi = mid
    return hi


def sigma_for(eps, target):
    hi = mpf(1)
    while delta(hi, eps) > target:
        hi *= 2
    return bisect(lambda s: delta(s, eps) > target, mpf(0) + mpf("1e-30"), hi)


def eps_for(sigma, target):
    if delta(sigma, 0) <= target:
        return mpf(0)
    hi = mpf(1)
    while delta(sigma, hi) > target:
        hi *= 2
    return bisect(lambda e: delta(sigma, e) > target, mpf(0), hi)


DELTAS = ["1e-3", "1e-5", "1e-6", "1e-9", "1e-12"]
EPSILONS = ["0.1", "0.5", "1", "2", "4", "8", "16", "30", "50"]
SIGMAS = ["0.1", "0.2", "0.5", "1", "2", "4", "10"]


def main():
    print("/// (ε, δ, σ): the smallest σ with δ(σ, ε) ≤ δ (tools/calibration_reference.py).")
    print("const REFERENCE_SIGMA: [(f64, f64, f64); %d] = [" % (len(EPSILONS) * len(DELTAS)))
    for e in EPSILONS:
        for d in DELTAS:
            s = sigma_for(mpf(e), mpf(d))
            print("    (%s, %s, %r)," % (e if "." in e else e + ".0", d, float(s)))
    print("];")
    rows = []
    for s in SIGMAS:
        for d in DELTAS:
            e = eps_for(mpf(s), mpf(d))
            if e <= 50:
                rows.append((s, d, e))
    print("/// (σ, δ, ε): the smallest ε with δ(σ, ε) ≤ δ, for ε ≤ 50 (tools/calibration_reference.py).")
    print("const REFERENCE_EPSILON: [(f64, f64, f64); %d] = [" % len(rows))
    for s, d, e in rows:
        print("    (%s, %s, %r)," % (s if "." in s else s + ".0", d, float(e)))
    print("];")


if __name__ == "__main__":
    main()
