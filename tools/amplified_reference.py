#!/usr/bin/env python3
"""Amplified BandMF vs DP-SGD, measured with the peer library jax_privacy (issue 29's table).

The regime: n = 2000 steps, N = 60000 examples, expected batch B = 500, delta = 1e-5,
epsilon in {0.5, 1, 2, 4, 8, 16}, prefix-sum workload A (lower-triangular ones).  Measurement
only: nothing here is used by mfc.  For each epsilon it prints and writes
tools/data/amplified_reference.json:

- DP-SGD: bands = 1, sampling_prob = B/N, sigma from jax_privacy's BandMFExecutionPlanConfig
  (calibrated by dp_accounting.calibrate_dp_mechanism on its amplified_bandmf_event, which for
  one band is jax_privacy's dpsgd_event: 2000-fold Poisson(q)-subsampled Gaussian), and
  RMSE = sigma * sens(C) * ||B||_F / sqrt(n) with C = I, B = A, i.e. sigma * sqrt((n+1)/2).
- Amplified BandMF for bands b in --bands (default 1,2,4,8,12,16,24,32,48,64,80,100,120; the
  largest admissible is floor(N/B) = 120, so that sampling_prob = B*b/N <= 1: 128 is not):
  sigma(b) from BandMFExecutionPlanConfig(iterations=n, strategy=coef_b, sampling_prob=B*b/N)
  (ceil(n/b) rounds of a Poisson(B*b/N)-subsampled Gaussian: jax_privacy's expected batch is
  num_examples/num_bands*sampling_prob = B), and the strategy the execution plan uses:
  BandMFExecutionPlanConfig.default(num_bands=b, ...) calls
  toeplitz.optimize_banded_toeplitz(n, b, max_optimizer_steps=500) (L-BFGS on the mean squared
  prefix-sum error of a banded *Toeplitz* C, ||coef|| = 1).  The plan's noising matrix is C^-1
  for that Toeplitz C (column_normalize=False, its default) or for C with every column rescaled
  to norm 1 (column_normalize=True, recommended by jax_privacy when n is known).  Both are
  reported; the headline RMSE(b) is the column-normalized one:
      RMSE(b) = sigma(b) * max_col_norm(C) * ||A C^-1||_F / sqrt(n)     (max_col_norm = 1)
  The loss depends only on b, so each strategy is optimized once and reused for every epsilon.
  Both losses are cross-checked by materializing C and a scipy banded solve.
- Optionally (--general-bands, default 2,4,8,16,32), jax_privacy's general column-normalized
  banded optimizer banded.optimize (NOT what the execution plan uses), initialized at the
  Toeplitz optimum and stopped after --general-steps L-BFGS steps (100, its default) or
  --general-limit seconds (240), whichever first: at n = 2000 it costs ~0.5 s/step at b = 8 and
  ~5.5 s/step at b = 64 on this machine, too slow for the whole grid.

Units: RMSE is the standard deviation of the error of one released prefix sum of clipped-gradient
sums (per coordinate, averaged over the n steps as a root mean square), in units of zeta, the
clip norm (jax_privacy's l2_clip_norm; its stddev is noise_multiplier * l2_clip_norm *
max_column_norm).  jax_privacy's own _AmplifiedBandMFHelper divides this by the batch size.

Accountant (caveat): BandMFExecutionPlanConfig's default accountant is
dp_accounting PLDAccountant(REPLACE_SPECIAL) (zero-out adjacency; value_discretization_interval
1e-4, pessimistic), query sensitivity = l2_clip_norm, with PartitionType.EQUAL_SPLIT.  For a
Poisson-subsampled Gaussian dp_accounting builds the same PLD for REPLACE_SPECIAL as for
ADD_OR_REMOVE_ONE (both the remove and the add direction), so sigma is the add-remove figure;
jax_privacy however accepts ADD_OR_REMOVE_ONE only with PartitionType.INDEPENDENT (EQUAL_SPLIT
partitions by the dataset size).  The script recomputes a few points with
PLDAccountant(ADD_OR_REMOVE_ONE) + INDEPENDENT to show the sigma agrees.  When b does not divide
n the accountant takes ceil(n/b) rounds (b = 120: 17 rounds, although 40 of the 120 groups
take part only 16 times).

Install and run (measured with jax_privacy 2.0.0, dp-accounting 0.6.0, jax 0.10.2,
numpy 2.4.6, scipy 1.17.1, Python 3.11, on the shared 2-core machine at load 3-4: 20 min in
all, Toeplitz strategies 3 min (4-19 s each), 78 sigma calibrations 9.5 min (2-24 s each),
general banded 6 min (25 s at b = 2 to 171 s at b = 32, 100 steps each)):

    python3 -m venv /work/venv-acct
    /work/venv-acct/bin/pip install dp-accounting==0.6.0 jax_privacy==2.0.0
    nice -n 10 /work/venv-acct/bin/python tools/amplified_reference.py \\
        [--bands 1,2,4,...] [--eps 0.5,1,...] [--general-bands 2,4,8,16,32|none] [--out PATH]
"""

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import time

import numpy as np
import scipy.linalg

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import dp_accounting  # noqa: E402
import jax_privacy  # noqa: E402
from jax_privacy import batch_selection  # noqa: E402
from jax_privacy.experimental import execution_plan  # noqa: E402
from jax_privacy.matrix_factorization import banded  # noqa: E402
from jax_privacy.matrix_factorization import toeplitz  # noqa: E402

N_STEPS, N_EXAMPLES, BATCH, DELTA = 2000, 60000, 500, 1e-5
EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
BANDS = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 100, 120]
PLAN_OPT_STEPS = 500  # BandMFExecutionPlanConfig.default's strategy_optimization_steps
ADD_REMOVE_CHECKS = [(1, 1.0), (8, 1.0), (64, 8.0)]  # (bands, epsilon)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                   "amplified_reference.json")


def load():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def log(s):
    print(s, file=sys.stderr, flush=True)


def dense_rmse(C):
    """max_col_norm(C) * ||A C^-1||_F / sqrt(n) for A = prefix sums, by a dense solve."""
    C = np.asarray(C, dtype=np.float64)
    n = C.shape[0]
    nz = np.nonzero(C)
    u = int((nz[0] - nz[1]).max())  # bands - 1; C is lower triangular
    assert (nz[0] >= nz[1]).all()
    # B = A C^-1  <=>  C^T B^T = A^T, C^T upper triangular with u superdiagonals.
    M = C.T
    ab = np.zeros((u + 1, n))
    for k in range(u + 1):
        ab[u - k, k:] = np.diagonal(M, k)
    Bt = scipy.linalg.solve_banded((0, u), ab, np.triu(np.ones((n, n))))
    return float(np.linalg.norm(C, axis=0).max() * np.linalg.norm(Bt) / math.sqrt(n))


def strategies(bands_list):
    """The execution plan's banded Toeplitz strategy per b, and its two losses."""
    rows = {}
    for b in bands_list:
        t = time.time()
        coef = toeplitz.optimize_banded_toeplitz(n=N_STEPS, bands=b,
                                                 max_optimizer_steps=PLAN_OPT_STEPS)
        coef = jax.block_until_ready(coef)
        secs = time.time() - t
        plain = math.sqrt(float(toeplitz.loss(coef, N_STEPS)))  # mean, times sens^2 = 1
        cn = banded.ColumnNormalizedBanded.from_banded_toeplitz(N_STEPS, coef)
        normalized = math.sqrt(float(jnp.mean(banded.per_query_error(cn))))
        # numpy's own Toeplitz (jax's materialize_lower_triangular takes ~1 min at n = 2000)
        col = np.zeros(N_STEPS)
        col[:b] = np.asarray(coef)
        dense_plain = dense_rmse(scipy.linalg.toeplitz(col, np.zeros(N_STEPS)))
        dense_cn = dense_rmse(cn.materialize())
        rows[b] = dict(bands=b, optimizer="toeplitz.optimize_banded_toeplitz",
                       max_optimizer_steps=PLAN_OPT_STEPS, seconds=secs,
                       coef_norm=float(jnp.linalg.norm(coef)),
                       rmse_unit_sigma_plain=plain, rmse_unit_sigma_normalized=normalized,
                       dense_check_plain=dense_plain, dense_check_normalized=dense_cn,
                       coef=[float(x) for x in np.asarray(coef)])
        log(f"toeplitz b={b}: ||B||_F/sqrt(n) plain {plain:.6f} (dense {dense_plain:.6f}), "
            f"column-normalized {normalized:.6f} (dense {dense_cn:.6f}), {secs:.1f}s | {load()}")
    return rows


def plan_sigma(coef, eps, q, add_remove=False):
    kwargs = {}
    if add_remove:
        kwargs = dict(accountant=dp_accounting.pld.PLDAccountant(
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE),
            partition_type=batch_selection.PartitionType.INDEPENDENT)
    config = execution_plan.BandMFExecutionPlanConfig(
        iterations=N_STEPS, strategy=np.asarray(coef), epsilon=eps, delta=DELTA,
        sampling_prob=q, column_normalize=True, **kwargs)
    event = config.plan.dp_event  # SelfComposed(PoissonSampled(q, Gaussian(sigma)), rounds)
    assert isinstance(event, dp_accounting.SelfComposedDpEvent), event
    assert abs(event.event.sampling_probability - q) < 1e-15, event
    return event.event.event.noise_multiplier, event.count


def sigmas(strats, eps_list):
    rows = []
    for b, s in strats.items():
        q = BATCH * b / N_EXAMPLES
        for eps in eps_list:
            t = time.time()
            sigma, rounds = plan_sigma(s["coef"], eps, q)
            secs = time.time() - t
            rows.append(dict(bands=b, epsilon=eps, delta=DELTA, sampling_prob=q, rounds=rounds,
                             noise_multiplier=sigma, seconds=secs,
                             rmse=sigma * s["rmse_unit_sigma_normalized"],
                             rmse_plain=sigma * s["rmse_unit_sigma_plain"]))
            log(f"sigma b={b} q={q:.6g} eps={eps}: {sigma:.6g} rounds={rounds} ({secs:.1f}s)")
    return rows


def general_banded(strats, bands_list, steps, limit):
    rows = []
    for b in bands_list:
        if b not in strats:
            log(f"general b={b}: skipped (no Toeplitz strategy for b={b} in --bands)")
            continue
        c0 = banded.ColumnNormalizedBanded.from_banded_toeplitz(
            N_STEPS, jnp.asarray(strats[b]["coef"]))
        t = time.time()
        done = {"steps": 0, "stopped": "max_optimizer_steps"}

        def callback(a):
            done["steps"] = int(a.step) + 1
            if time.time() - t > limit:
                done["stopped"] = f"time limit {limit:.0f}s"
                return True
            return False

        c = banded.optimize(N_STEPS, bands=b, C=c0, max_optimizer_steps=steps,
                            callback=callback)
        c = jax.block_until_ready(c)
        secs = time.time() - t
        rmse = math.sqrt(float(jnp.mean(banded.per_query_error(c))))
        dense = dense_rmse(c.materialize())
        rows.append(dict(bands=b, optimizer="banded.optimize (init: Toeplitz optimum)",
                         steps=done["steps"], stopped=done["stopped"], seconds=secs,
                         rmse_unit_sigma=rmse, dense_check=dense,
                         toeplitz_normalized=strats[b]["rmse_unit_sigma_normalized"]))
        log(f"general b={b}: {rmse:.6f} (dense {dense:.6f}; Toeplitz column-normalized "
            f"{strats[b]['rmse_unit_sigma_normalized']:.6f}) after {done['steps']} steps, "
            f"{done['stopped']}, {secs:.1f}s | {load()}")
    return rows


def table(out):
    strats = {s["bands"]: s for s in out["strategies"]}
    general = {g["bands"]: g for g in out.get("general_banded", [])}
    by_eps = {}
    for r in out["sigma"]:
        by_eps.setdefault(r["epsilon"], []).append(r)
    summary = []
    print(f"\n### Amplified BandMF vs DP-SGD (jax_privacy {jax_privacy.__version__}, "
          f"n={N_STEPS}, N={N_EXAMPLES}, B={BATCH}, delta={DELTA:g})\n")
    print("RMSE per step of the released prefix sums, units of the clip norm; strategy: "
          "toeplitz.optimize_banded_toeplitz (the execution plan's), column-normalized; "
          "last column: same strategy without column normalization (the plan's default).\n")
    print("| ε | DP-SGD σ | DP-SGD RMSE | best b̂ | σ(b̂) | RMSE(b̂) | ratio to DP-SGD "
          "| RMSE(b̂) not normalized |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for eps, rows in sorted(by_eps.items()):
        dpsgd = next(r for r in rows if r["bands"] == 1)
        best = min(rows, key=lambda r: r["rmse"])
        line = dict(epsilon=eps, dpsgd_sigma=dpsgd["noise_multiplier"], dpsgd_rmse=dpsgd["rmse"],
                    best_bands=best["bands"], sigma=best["noise_multiplier"], rmse=best["rmse"],
                    ratio=best["rmse"] / dpsgd["rmse"], rmse_plain=best["rmse_plain"])
        summary.append(line)
        print(f"| {eps:g} | {line['dpsgd_sigma']:.4f} | {line['dpsgd_rmse']:.2f} | "
              f"{line['best_bands']} | {line['sigma']:.4f} | {line['rmse']:.2f} | "
              f"{line['ratio']:.3f} | {line['rmse_plain']:.2f} |")
    bands = sorted(strats)
    print("\nRMSE(b̂) grid (column-normalized Toeplitz; ratio to DP-SGD in brackets):\n")
    print("| b̂ | ‖B‖_F/√n | opt s | " + " | ".join(f"ε={e:g}" for e in sorted(by_eps)) + " |")
    print("|---:|---:|---:|" + "---:|" * len(by_eps))
    for b in bands:
        cells = []
        for eps, rows in sorted(by_eps.items()):
            dp = next(r for r in rows if r["bands"] == 1)["rmse"]
            r = next(r for r in rows if r["bands"] == b)
            cells.append(f"{r['rmse']:.2f} ({r['rmse'] / dp:.3f})")
        s = strats[b]
        print(f"| {b} | {s['rmse_unit_sigma_normalized']:.4f} | {s['seconds']:.1f} | "
              + " | ".join(cells) + " |")
    if general:
        print("\nGeneral banded optimizer (banded.optimize; not the plan's), ‖B‖_F/√n:\n")
        print("| b̂ | general | Toeplitz col-normalized | steps | stopped | seconds |")
        print("|---:|---:|---:|---:|---|---:|")
        for b, g in sorted(general.items()):
            print(f"| {b} | {g['rmse_unit_sigma']:.4f} | {g['toeplitz_normalized']:.4f} | "
                  f"{g['steps']} | {g['stopped']} | {g['seconds']:.1f} |")
    if out.get("add_remove_check"):
        print("\nσ with PLDAccountant(ADD_OR_REMOVE_ONE) + PartitionType.INDEPENDENT vs the "
              "default (REPLACE_SPECIAL, EQUAL_SPLIT):\n")
        for c in out["add_remove_check"]:
            print(f"- b̂={c['bands']}, ε={c['epsilon']:g}: {c['add_remove']:.6f} vs "
                  f"{c['default']:.6f}")
    print("\nSanity (figures issue 29 quotes):")
    for b, eps, what in [(64, 8.0, "about half DP-SGD's"), (8, 1.0, "below DP-SGD")]:
        rows = by_eps.get(eps, [])
        r = next((r for r in rows if r["bands"] == b), None)
        dp = next((r for r in rows if r["bands"] == 1), None)
        if r and dp:
            print(f"- b̂={b}, ε={eps:g}: RMSE {r['rmse']:.2f} vs DP-SGD {dp['rmse']:.2f}, "
                  f"ratio {r['rmse'] / dp['rmse']:.3f} (claimed {what}); not normalized "
                  f"{r['rmse_plain'] / dp['rmse']:.3f}")
    print(f"\nload at end: {load()}")
    return summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bands", default=",".join(map(str, BANDS)))
    parser.add_argument("--eps", default=",".join(f"{e:g}" for e in EPSILONS))
    parser.add_argument("--general-bands", default="2,4,8,16,32",
                        help="bands for banded.optimize, or 'none'")
    parser.add_argument("--general-steps", type=int, default=100)
    parser.add_argument("--general-limit", type=float, default=240.0)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    bands_list = sorted({int(x) for x in args.bands.split(",")})
    if 1 not in bands_list:
        bands_list = [1] + bands_list  # DP-SGD
    too_many = [b for b in bands_list if BATCH * b > N_EXAMPLES]
    if too_many:
        sys.exit(f"bands {too_many} > N/B = {N_EXAMPLES // BATCH}: sampling_prob would exceed 1")
    eps_list = [float(x) for x in args.eps.split(",")]
    general = [] if args.general_bands == "none" else [int(x) for x in
                                                      args.general_bands.split(",")]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    t0 = time.time()
    out = dict(generator=dict(script="tools/amplified_reference.py",
                              jax_privacy=jax_privacy.__version__, jax=jax.__version__,
                              numpy=np.__version__, python=sys.version.split()[0],
                              dp_accounting="0.6.0" if not hasattr(dp_accounting, "__version__")
                              else dp_accounting.__version__),
               setting=dict(steps=N_STEPS, dataset_size=N_EXAMPLES, batch_size=BATCH,
                            delta=DELTA, workload="prefix sums",
                            accountant="BandMFExecutionPlanConfig default: "
                                       "PLDAccountant(REPLACE_SPECIAL), EQUAL_SPLIT",
                            rmse="sigma * max_col_norm(C) * ||A C^-1||_F / sqrt(n), "
                                 "units of the clip norm"))

    def save():
        out["seconds_total"] = time.time() - t0
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")

    strats = strategies(bands_list)
    out["strategies"] = list(strats.values())
    save()
    out["sigma"] = sigmas(strats, eps_list)
    save()
    checks = []
    for b, eps in ADD_REMOVE_CHECKS:
        if b in strats and eps in eps_list:
            t = time.time()
            ar, _ = plan_sigma(strats[b]["coef"], eps, BATCH * b / N_EXAMPLES, add_remove=True)
            default = next(r["noise_multiplier"] for r in out["sigma"]
                           if r["bands"] == b and r["epsilon"] == eps)
            checks.append(dict(bands=b, epsilon=eps, add_remove=ar, default=default,
                               seconds=time.time() - t))
            log(f"add-remove check b={b} eps={eps}: {ar:.6g} vs default {default:.6g}")
    out["add_remove_check"] = checks
    save()
    if general:
        out["general_banded"] = general_banded(strats, general, args.general_steps,
                                               args.general_limit)
        save()
    out["summary"] = table(out)
    save()
    print(f"total {time.time() - t0:.0f}s; wrote {args.out}")


if __name__ == "__main__":
    main()
