#!/usr/bin/env python3
"""Amplified BandMF vs DP-SGD vs un-amplified mfc, measured with mfc (issue 29's table, mfc's half).

The regime of tools/amplified_reference.py (jax_privacy's half, read from
tools/data/amplified_reference.json): n = 2000 steps, N = 60000 examples, expected batch
B = 500, delta = 1e-5, epsilon in {0.5, 1, 2, 4, 8, 16}, prefix sums.  For each epsilon it runs
the mfc binary (--mfc, else $MFC_BINARY, else target/release/mfc) and reads the compile
report's privacy.rmse_per_step: the expected RMSE per step of the released prefix sums, in units
of zeta, the clip norm.

- DP-SGD: `mfc compile --sampling-prob B/N --bands 1 --steps n --epsilon E --delta 1e-5`.
- Un-amplified mfc (no sampling: every example once per epoch of N/B = 120 steps in a fixed but
  arbitrary order, so at most k = ceil(2000/120) = 17 participations at least 120 apart; the
  schema --epochs 17 --min-sep 120): the best of
    * BandMF Toeplitz: `mfc compile --form bandmf --toeplitz --bands auto --epochs 17
      --min-sep 120 ...`, compiled per epsilon (well under a second), and
    * BLT: `mfc compile --form blt --buffers 4 --epochs 17 --min-sep 120 ...`, ~30 s a compile
      on the shared 2-core machine, so compiled ONCE with --noise-multiplier 1 and scaled by
      sigma(E) of `mfc calibrate --epsilon E --delta 1e-5` (the optimization does not depend on
      sigma, and RMSE = sigma * sens * sqrt(L) / sqrt(n)).  One direct compile at
      --blt-check-eps (default 1; `none` to skip) checks the scaling to 1e-9.
- Amplified BandMF: for b in --bands (default 1,2,4,8,12,16,24,32,48,64,80,100,120, so that
  q = B*b/N <= 1), `mfc compile --sampling-prob repr(B*b/N) --bands b --toeplitz ...`, once per
  (b, epsilon); the best b per epsilon (min RMSE).
- jax_privacy's best b, sigma and RMSE from the reference JSON, and the ratio mfc/jax.

Checks (exit 1 if any fails, after printing and saving): the amplified mfc RMSE is <= DP-SGD's
and <= the un-amplified mfc one at every epsilon, and every mfc sigma is within 1% of
jax_privacy's sigma at the same (b, epsilon) wherever the JSON has it.

Caveats: jax_privacy's default accountant is PLDAccountant(REPLACE_SPECIAL) with EQUAL_SPLIT
partitions (equal sigma to ADD_OR_REMOVE_ONE/INDEPENDENT for Poisson-subsampled Gaussians, as
tools/amplified_reference.py checks); mfc records add-remove neighbours with the groups drawn
independently; both account ceil(n/b) rounds.

Writes tools/data/amplified_table.json (--out) with the command line, the binary's sha256 and
`uptime` before and after.  Python 3 standard library only.  Run (about 5 min on the shared
machine):

    nice -n 10 python3 tools/amplified_table.py [--mfc PATH] [--eps 0.5,1,...] [--bands 1,2,...]
"""

import argparse
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_STEPS = 2000
N_EXAMPLES = 60000
BATCH = 500
DELTA = 1e-5
EPOCHS = math.ceil(N_STEPS / (N_EXAMPLES // BATCH))  # 17
MIN_SEP = N_EXAMPLES // BATCH  # 120
SIGMA_RTOL = 0.01


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError as e:
        return f"uptime failed: {e}"


class Mfc:
    def __init__(self, binary, tmp):
        self.binary = binary
        self.tmp = tmp
        self.calls = []

    def run(self, args):
        cmd = [self.binary] + args + ["--json"]
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        secs = time.time() - t
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {shlex.join(cmd)}\n{p.stderr}")
        self.calls.append(dict(command=shlex.join(cmd), seconds=secs))
        return json.loads(p.stdout), secs

    def compile(self, args):
        out = os.path.join(self.tmp, "x.mfc")
        rep, secs = self.run(["compile"] + args + ["--steps", str(N_STEPS), "--delta", repr(DELTA),
                                                   "--out", out])
        return dict(sigma=rep["noise_multiplier"], rmse=rep["privacy"]["rmse_per_step"],
                    epsilon=rep["privacy"]["epsilon"], sensitivity=rep["sensitivity"],
                    bands=rep.get("bands"), kind=rep.get("kind", rep.get("form")),
                    sampling=rep.get("sampling"), seconds=secs)


def floats(s):
    return [float(x) for x in s.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mfc", default=os.environ.get("MFC_BINARY",
                                                    os.path.join(ROOT, "target/release/mfc")))
    ap.add_argument("--eps", default="0.5,1,2,4,8,16")
    ap.add_argument("--bands", default="1,2,4,8,12,16,24,32,48,64,80,100,120")
    ap.add_argument("--blt-check-eps", default="1")
    ap.add_argument("--reference", default=os.path.join(ROOT, "tools/data/amplified_reference.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tools/data/amplified_table.json"))
    a = ap.parse_args()
    eps_list = floats(a.eps)
    bands_list = [int(b) for b in a.bands.split(",")]
    for b in bands_list:
        if BATCH * b > N_EXAMPLES:
            sys.exit(f"b = {b}: q = B*b/N > 1")
    ref = json.load(open(a.reference))
    jax_sigma = {(r["bands"], r["epsilon"]): r for r in ref["sigma"]}
    jax_best = {r["epsilon"]: r for r in ref["summary"]}

    t0 = time.time()
    up0 = uptime()
    log(f"uptime: {up0}")
    with open(a.mfc, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    version = subprocess.run([a.mfc, "--version"], capture_output=True, text=True).stdout.strip()
    failures = []
    out = dict(
        generator=dict(script="tools/amplified_table.py", command=shlex.join(sys.argv),
                       mfc=a.mfc, mfc_version=version, mfc_sha256=sha,
                       python=sys.version.split()[0], uptime_start=up0),
        setting=dict(steps=N_STEPS, dataset_size=N_EXAMPLES, batch_size=BATCH, delta=DELTA,
                     workload="prefix sums", epochs=EPOCHS, min_sep=MIN_SEP,
                     rmse="compile report privacy.rmse_per_step, units of the clip norm",
                     reference=os.path.relpath(a.reference, ROOT)),
    )

    with tempfile.TemporaryDirectory() as tmp:
        mfc = Mfc(a.mfc, tmp)
        sched = ["--epochs", str(EPOCHS), "--min-sep", str(MIN_SEP)]

        # Un-amplified BLT: once at sigma = 1, scaled by the calibrated sigma.
        blt1 = mfc.compile(["--form", "blt", "--buffers", "4"] + sched + ["--noise-multiplier", "1"])
        log(f"BLT (k, b) = ({EPOCHS}, {MIN_SEP}) at sigma 1: RMSE {blt1['rmse']:.6f} "
            f"(sens {blt1['sensitivity']:.6f}, {blt1['seconds']:.1f} s)")
        calib = {}
        for eps in eps_list:
            rep, secs = mfc.run(["calibrate", "--epsilon", repr(eps), "--delta", repr(DELTA)])
            calib[eps] = rep["noise_multiplier"]
        blt_check = None
        if a.blt_check_eps != "none":
            ce = float(a.blt_check_eps)
            if ce not in calib:
                sys.exit(f"--blt-check-eps {ce} not in --eps")
            d = mfc.compile(["--form", "blt", "--buffers", "4"] + sched + ["--epsilon", repr(ce)])
            scaled = calib[ce] * blt1["rmse"]
            blt_check = dict(epsilon=ce, direct=d["rmse"], scaled=scaled, sigma_direct=d["sigma"],
                             seconds=d["seconds"])
            log(f"BLT check at eps {ce:g}: direct {d['rmse']:.9f}, scaled {scaled:.9f}")
            if abs(d["rmse"] - scaled) > 1e-9 * scaled or d["sigma"] != calib[ce]:
                failures.append(f"BLT scaling at eps {ce:g}: direct {d['rmse']!r} vs scaled {scaled!r}")

        unamp, dpsgd, grid = [], [], []
        for eps in eps_list:
            e = ["--epsilon", repr(eps)]
            t = mfc.compile(["--form", "bandmf", "--toeplitz", "--bands", "auto"] + sched + e)
            unamp.append(dict(epsilon=eps, bandmf_toeplitz=t,
                              blt=dict(sigma=calib[eps], rmse=calib[eps] * blt1["rmse"])))
            log(f"eps {eps:g}: un-amplified BandMF Toeplitz (b = {t['bands']}) {t['rmse']:.4f}, "
                f"BLT {calib[eps] * blt1['rmse']:.4f}")
            q = BATCH / N_EXAMPLES
            d = mfc.compile(["--sampling-prob", repr(q), "--bands", "1"] + e)
            d.update(epsilon=eps, sampling_prob=q)
            dpsgd.append(d)
            log(f"eps {eps:g}: DP-SGD sigma {d['sigma']:.6f} RMSE {d['rmse']:.4f} ({d['seconds']:.1f} s)")
            for b in bands_list:
                q = BATCH * b / N_EXAMPLES
                r = mfc.compile(["--sampling-prob", repr(q), "--bands", str(b), "--toeplitz"] + e)
                r.update(epsilon=eps, bands=b, sampling_prob=q)
                j = jax_sigma.get((b, eps))
                if j is not None:
                    r.update(jax_sigma=j["noise_multiplier"], jax_rmse=j["rmse"],
                             sigma_ratio=r["sigma"] / j["noise_multiplier"],
                             rmse_ratio=r["rmse"] / j["rmse"])
                    if abs(r["sigma_ratio"] - 1) > SIGMA_RTOL:
                        failures.append(f"sigma at b = {b}, eps = {eps:g}: mfc {r['sigma']!r} vs "
                                        f"jax_privacy {j['noise_multiplier']!r}")
                grid.append(r)
                log(f"eps {eps:g} b {b}: sigma {r['sigma']:.6f} RMSE {r['rmse']:.4f} "
                    f"({r['seconds']:.1f} s)" + (f" jax {j['rmse']:.4f}" if j else ""))

        summary = []
        for eps, d, u in zip(eps_list, dpsgd, unamp):
            rows = [r for r in grid if r["epsilon"] == eps]
            best = min(rows, key=lambda r: r["rmse"])
            forms = dict(bandmf_toeplitz=u["bandmf_toeplitz"]["rmse"], blt=u["blt"]["rmse"])
            uform = min(forms, key=forms.get)
            line = dict(epsilon=eps, dpsgd_sigma=d["sigma"], dpsgd_rmse=d["rmse"],
                        unamplified_form=uform, unamplified_rmse=forms[uform],
                        unamplified_bands=u["bandmf_toeplitz"]["bands"] if uform == "bandmf_toeplitz"
                        else None,
                        best_bands=best["bands"], sigma=best["sigma"], rmse=best["rmse"],
                        ratio_dpsgd=best["rmse"] / d["rmse"],
                        ratio_unamplified=best["rmse"] / forms[uform])
            j = jax_best.get(eps)
            if j is not None:
                line.update(jax_best_bands=j["best_bands"], jax_sigma=j["sigma"], jax_rmse=j["rmse"],
                            ratio_jax=best["rmse"] / j["rmse"])
            summary.append(line)
            if not best["rmse"] <= d["rmse"]:
                failures.append(f"eps {eps:g}: amplified {best['rmse']!r} > DP-SGD {d['rmse']!r}")
            if not best["rmse"] <= forms[uform]:
                failures.append(f"eps {eps:g}: amplified {best['rmse']!r} (b = {best['bands']}) > "
                                f"un-amplified {uform} {forms[uform]!r}")

    out.update(blt_unit_sigma=blt1, blt_check=blt_check, calibrate_sigma=[
        dict(epsilon=e, noise_multiplier=s) for e, s in calib.items()],
        unamplified=unamp, dpsgd=dpsgd, amplified=grid, summary=summary, failures=failures,
        calls=mfc.calls)
    out["generator"].update(uptime_end=uptime(), seconds_total=time.time() - t0)

    def f(x, p=2):
        return "–" if x is None else f"{x:.{p}f}"

    print("| ε | DP-SGD σ | DP-SGD RMSE | un-amplified mfc RMSE | mfc b̂ | mfc σ | mfc RMSE "
          "| jax b̂ | jax σ | jax RMSE | mfc/jax | amplified/DP-SGD | amplified/un-amplified |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        uf = (f"BandMF Toeplitz b̂={s['unamplified_bands']}" if s["unamplified_form"] == "bandmf_toeplitz"
              else "BLT 4 buffers")
        print(f"| {s['epsilon']:g} | {s['dpsgd_sigma']:.4f} | {s['dpsgd_rmse']:.2f} | "
              f"{s['unamplified_rmse']:.2f} ({uf}) | {s['best_bands']} | {s['sigma']:.4f} | "
              f"{s['rmse']:.2f} | {s.get('jax_best_bands', '–')} | {f(s.get('jax_sigma'), 4)} | "
              f"{f(s.get('jax_rmse'))} | {f(s.get('ratio_jax'), 4)} | {s['ratio_dpsgd']:.3f} | "
              f"{s['ratio_unamplified']:.3f} |")
    print()
    print("Un-amplified, (k, b) = (%d, %d): RMSE of each form" % (EPOCHS, MIN_SEP))
    print()
    print("| ε | σ | BandMF Toeplitz (b̂ auto) | BLT 4 buffers |")
    print("|---|---|---|---|")
    for u in unamp:
        t = u["bandmf_toeplitz"]
        print(f"| {u['epsilon']:g} | {t['sigma']:.4f} | {t['rmse']:.2f} (b̂={t['bands']}) | "
              f"{u['blt']['rmse']:.2f} |")
    print()
    print("Amplified grid: mfc RMSE (mfc/jax_privacy RMSE)")
    print()
    print("| b̂ | " + " | ".join(f"ε={e:g}" for e in eps_list) + " |")
    print("|---|" + "---|" * len(eps_list))
    for b in bands_list:
        cells = []
        for eps in eps_list:
            r = next(r for r in grid if r["bands"] == b and r["epsilon"] == eps)
            cells.append(f"{r['rmse']:.2f}" + (f" ({r['rmse_ratio']:.4f})" if "rmse_ratio" in r else ""))
        print(f"| {b} | " + " | ".join(cells) + " |")
    sr = [r["sigma_ratio"] for r in grid if "sigma_ratio" in r]
    if sr:
        print(f"\nσ mfc/jax_privacy over {len(sr)} grid points: {min(sr):.6f} to {max(sr):.6f}")

    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    log(f"wrote {a.out} ({out['generator']['seconds_total']:.0f} s)")
    if failures:
        print("\nFAILED checks:", file=sys.stderr)
        for x in failures:
            print(f"- {x}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
