#!/usr/bin/env python3
"""High-precision reference sensitivities of BLT encoders, for compiler/src/toeplitz.rs tests.

The family (from the review of issue 15): m buffers with clustered decays near 1,
theta_j = f32(1 - 0.002 * 1.35**j), omega_j = f32(-0.9 * (1 - theta_j) / m), j = 0..m-1,
over n = 2000 steps under b-min-separation (k, b) = (4, 100). The encoder C = T(r)^-1 with
r_0 = 1, r_k = sum_j omega_j theta_j^(k-1) is computed at 60 digits two ways (forward
substitution against r, and the inverse filter in state-space form); its min-separation
sensitivity is the {0, b, 2b, 3b} pattern of the non-increasing majorant of |c| (exact when
c is non-negative and non-increasing, which the script reports).

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install mpmath
    /tmp/venv/bin/python tools/blt_series_reference.py
"""
import struct

import mpmath as mp

mp.mp.dps = 60
N, K, B = 2000, 4, 100


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def family(m):
    theta = [f32(1.0 - 0.002 * 1.35**j) for j in range(m)]
    omega = [f32(-0.9 * (1.0 - t) / m) for t in theta]
    return theta, omega


def encoder(theta, omega):
    th = [mp.mpf(t) for t in theta]
    om = [mp.mpf(w) for w in omega]
    state, c = [mp.mpf(0)] * len(th), []
    for t in range(N):
        z = (1 if t == 0 else 0) - mp.fsum(w * s for w, s in zip(om, state))
        c.append(z)
        state = [th[j] * state[j] + z for j in range(len(th))]
    # Independent check on a prefix: forward substitution against r.
    r = [mp.mpf(1)] + [mp.fsum(w * t ** (k - 1) for w, t in zip(om, th)) for k in range(1, 200)]
    for k in range(1, 200):
        direct = -mp.fsum(r[l] * c[k - l] for l in range(1, k + 1))
        assert abs(direct - c[k]) < mp.mpf(10) ** -40, k
    return c


def min_separation_sensitivity(c):
    majorant = [abs(x) for x in c]
    for t in range(len(c) - 2, -1, -1):
        majorant[t] = max(majorant[t], majorant[t + 1])
    exact = all(a == b for a, b in zip(majorant, c))
    column = [mp.mpf(0)] * N
    for start in list(range(0, N, B))[:K]:
        for t in range(N - start):
            column[start + t] += majorant[t]
    return mp.sqrt(mp.fsum(x * x for x in column)), exact


for m in (4, 8, 16):
    theta, omega = family(m)
    c = encoder(theta, omega)
    sens, exact = min_separation_sensitivity(c)
    single = mp.sqrt(mp.fsum(x * x for x in c))
    print(f"m = {m:2}: min-separation {mp.nstr(sens, 17)} ({'exact' if exact else 'majorant bound'}), single {mp.nstr(single, 17)}")
