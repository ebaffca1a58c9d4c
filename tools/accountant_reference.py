#!/usr/bin/env python3
"""Reference values for mfc's privacy accountant (compiler/src/accountant), from the peers.

Writes compiler/tests/data/accountant_reference.json, read by compiler/tests/accountant.rs:

- "epsilon": the acceptance grid of issue 29, q in {1e-4, 1e-3, 1e-2, 0.1, 0.5, 1},
  compositions k in {1, 10, 1e3, 1e5}, sigma in {0.5, 1, 2, 8}, delta in {1e-5, 1e-8}: the
  epsilon of k-fold Poisson-subsampled Gaussians under add-remove from dp_accounting's PLD,
  pessimistic ("connect the dots", its default) and optimistic (privacy buckets rounded down),
  both at dp_accounting's default discretization 1e-4. Points whose epsilon is out of any useful
  regime are skipped and listed: dp_accounting's RDP accountant (an upper bound, cheap) gives
  epsilon > 100 at delta = 1e-8 (their PLD would need millions of grid points).
- "sigma": the noise multiplier for a target (epsilon, delta) in {(1, 1e-5), (4, 1e-8)} on the
  same (q, k) grid: dp_accounting.calibrate_dp_mechanism with its PLDAccountant (pessimistic),
  bracketed by dp_accounting's RDP calibration (an upper bound) to keep it fast, and a
  bisection on the optimistic PLD returning the lower end of its bracket (a lower bound on the
  true sigma; 0 when the optimistic PLD meets the target for every sigma tried, as happens at
  1e5 compositions, where rounding down loses ~k*1e-4/2 of privacy loss). Skipped: targets whose
  RDP sigma is below 0.8 (dp_accounting takes minutes per calibration there: its
  single-step grids span ~1/sigma^2 nats at 1e-4).
- "bandmf": jax_privacy 2.0's BandMFExecutionPlanConfig noise multiplier (its default
  PLDAccountant(REPLACE_SPECIAL), value_discretization_interval 1e-4) for amplified BandMF at
  n = 2000 steps, 60000 examples, expected batch 500 (sampling_prob = 500*bands/60000, the rate
  within a group: jax_privacy's expected batch is num_examples/num_bands*sampling_prob),
  epsilon in {0.5, 1, 2, 4, 8, 16}, delta = 1e-5, bands in {1, 8, 64}.

Install and run (the figures committed were produced with dp-accounting 0.6.0, jax_privacy
2.0.0, jax 0.10.2, numpy 2.4.6, scipy 1.17.1, Python 3.11; on the shared 2-core machine
epsilon took ~10 min, sigma ~25 min, bandmf ~3 min):

    python3 -m venv /work/venv-acct
    /work/venv-acct/bin/pip install dp-accounting==0.6.0 jax_privacy==2.0.0
    /work/venv-acct/bin/python tools/accountant_reference.py [--only epsilon,sigma,bandmf]
"""

import argparse
import json
import logging
import math
import os
import sys
import time

import dp_accounting
from dp_accounting import dp_event, rdp
from dp_accounting.pld import privacy_loss_distribution as pld_lib

OUT = os.path.join(os.path.dirname(__file__), "..", "compiler", "tests", "data",
                   "accountant_reference.json")
QS = [1e-4, 1e-3, 1e-2, 0.1, 0.5, 1.0]
KS = [1, 10, 1000, 100000]
SIGMAS = [0.5, 1.0, 2.0, 8.0]
DELTAS = [1e-5, 1e-8]
SIGMA_POINTS = [(1.0, 1e-5), (4.0, 1e-8)]  # (target epsilon, delta)
INTERVAL = 1e-4
EPS_CAP = 100.0
SIGMA_FLOOR = 0.8


def rdp_epsilon(q, k, sigma, delta):
    acc = rdp.RdpAccountant()
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), k)
    return acc.get_epsilon(delta)


def pld(q, k, sigma, pessimistic):
    """dp_accounting's PLD of k-fold Poisson-subsampled Gaussians (add-remove)."""
    p = pld_lib.from_gaussian_mechanism(
        sigma, pessimistic_estimate=pessimistic, value_discretization_interval=INTERVAL,
        sampling_prob=q, use_connect_dots=pessimistic)
    return p.self_compose(k) if k > 1 else p


def epsilon_grid(log):
    rows, skipped = [], []
    for q in QS:
        for k in KS:
            for sigma in SIGMAS:
                bound = rdp_epsilon(q, k, sigma, min(DELTAS))
                if bound > EPS_CAP:
                    skipped.append({"q": q, "k": k, "sigma": sigma, "rdp_epsilon": bound})
                    continue
                t = time.time()
                pess, opt = pld(q, k, sigma, True), pld(q, k, sigma, False)
                for delta in DELTAS:
                    rows.append({
                        "q": q, "k": k, "sigma": sigma, "delta": delta,
                        "pessimistic": pess.get_epsilon_for_delta(delta),
                        "optimistic": opt.get_epsilon_for_delta(delta),
                    })
                log(f"epsilon q={q} k={k} sigma={sigma}: {rows[-2]['pessimistic']:.6g} "
                    f"[{rows[-2]['optimistic']:.6g}] ({time.time() - t:.1f}s)")
    return rows, skipped


def optimistic_sigma(eps_of, target, hi, tol=1e-3):
    """A lower bound on the smallest sigma with eps_of(sigma) <= target (eps_of decreasing):
    bisection on log sigma below hi (which meets it), returning the lower end of the final
    bracket; 0 if every sigma down to hi/2**12 meets the target."""
    lo = hi
    for _ in range(12):
        lo /= 2
        if eps_of(lo) > target:
            break
    else:
        return 0.0
    while hi / lo - 1 > tol:
        mid = math.sqrt(lo * hi)
        if eps_of(mid) > target:
            lo = mid
        else:
            hi = mid
    return lo


def rdp_sigma(q, k, target, delta):
    """dp_accounting's RDP calibration: an upper bound on the PLD one."""
    return dp_accounting.calibrate_dp_mechanism(
        rdp.RdpAccountant,
        lambda s: dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)), k),
        target, delta, tol=1e-4)


def sigma_grid(log, save):
    rows, skipped = [], []
    for q in QS:
        for k in KS:
            for target, delta in SIGMA_POINTS:
                    t = time.time()

                    def make_event(sigma):
                        return dp_event.SelfComposedDpEvent(
                            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), k)
                    upper = rdp_sigma(q, k, target, delta) * 1.001
                    if upper < SIGMA_FLOOR:
                        skipped.append({"q": q, "k": k, "delta": delta, "epsilon": target,
                                        "rdp_sigma": upper})
                        continue
                    pess = dp_accounting.calibrate_dp_mechanism(
                        lambda: dp_accounting.pld.PLDAccountant(
                            value_discretization_interval=INTERVAL),
                        make_event, target, delta,
                        bracket_interval=dp_accounting.ExplicitBracketInterval(
                            upper / 4, upper), tol=1e-6 * upper)
                    opt = optimistic_sigma(
                        lambda s: pld(q, k, s, False).get_epsilon_for_delta(delta), target, pess)
                    rows.append({"q": q, "k": k, "delta": delta, "epsilon": target,
                                 "pessimistic": pess, "optimistic": opt})
                    log(f"sigma q={q} k={k} delta={delta} eps={target}: {pess:.6g} [{opt:.6g}] "
                        f"({time.time() - t:.1f}s)")
                    save(rows, skipped)
    return rows, skipped


def bandmf_grid(log):
    import numpy as np
    from jax_privacy.experimental import execution_plan
    rows = []
    n, examples, batch, delta = 2000, 60000, 500, 1e-5
    for bands in [1, 8, 64]:
        q = batch * bands / examples
        for eps in [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]:
            t = time.time()
            config = execution_plan.BandMFExecutionPlanConfig(
                iterations=n, strategy=np.ones(bands), epsilon=eps, delta=delta,
                sampling_prob=q)
            event = config.plan.dp_event  # SelfComposed(PoissonSampled(q, Gaussian(sigma)), rounds)
            sigma = event.event.event.noise_multiplier
            rows.append({"steps": n, "dataset_size": examples, "batch_size": batch,
                         "bands": bands, "sampling_prob": q, "rounds": event.count,
                         "epsilon": eps, "delta": delta, "noise_multiplier": sigma})
            log(f"bandmf bands={bands} q={q:.6g} eps={eps}: sigma={sigma:.6g} rounds={event.count} "
                f"({time.time() - t:.1f}s)")
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="epsilon,sigma,bandmf")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    out = {}
    if os.path.exists(OUT):
        with open(OUT) as f:
            out = json.load(f)
    parts = args.only.split(",")
    versions = {"dp_accounting": dp_accounting.__version__ if hasattr(dp_accounting, "__version__")
                else "0.6.0", "discretization": INTERVAL}
    out["generator"] = {"script": "tools/accountant_reference.py", **versions}
    def save():
        with open(OUT, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    if "epsilon" in parts:
        out["epsilon"], out["epsilon_skipped"] = epsilon_grid(log)
        save()
    if "sigma" in parts:
        def save_sigma(rows, skipped):
            out["sigma"], out["sigma_skipped"] = rows, skipped
            save()
        save_sigma(*sigma_grid(log, save_sigma))
    if "bandmf" in parts:
        import jax_privacy
        out["generator"]["jax_privacy"] = jax_privacy.__version__
        out["bandmf"] = bandmf_grid(log)
        save()


if __name__ == "__main__":
    main()
