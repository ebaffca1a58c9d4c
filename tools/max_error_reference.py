#!/usr/bin/env python3
"""Reference figures for mfc's max-error objective (issue 32), from independent code.

The max error of A = B C is sens(C) * max_i ||B[i,:]|| in units of sigma*zeta (sensitivity
included).  Measurement only: nothing here is used by mfc; the tests of compiler/src/max_error/
and BENCHMARKS.md ("Max error") compare against the figures this prints.

Install (CPU jax; measured with jax_privacy 2.0.0, jax/jaxlib 0.10.2, numpy 2.4.6, cvxpy 1.9.3,
clarabel 0.11.1, Python 3.11):

    python3 -m venv /work/venv-maxerr
    /work/venv-maxerr/bin/pip install 'jax_privacy==2.0.0' cvxpy clarabel
    /work/venv-maxerr/bin/python tools/max_error_reference.py all

Subcommands (`all` runs them in order):

    gamma2      The dense optimum gamma_2(A) = min_{A=BC} max_i ||B[i,:]|| max_j ||C[:,j]|| as a
                semidefinite program solved by Clarabel (interior point, not the iteration mfc
                uses): minimize t subject to [[P, A], [A^T, Q]] >= 0, diag P <= t, diag Q <= t.
                Prefix sums n in {2, 3, 8, 16, 32}, and the "hash" workload A[i,j] =
                1 + ((7i + 3j) mod 5)/4 for j <= i (else 0), n in {5, 12}.
    blt2048     jax_privacy's max-error BLT (buffered_toeplitz.optimize_loss with the closed-form
                single-participation max loss, exactly m buffers) for m = 1..5 at n = 2048: its
                max error with the sensitivity over n steps (the figure jax optimizes), with
                the sensitivity over every horizon (sensitivity_squared(blt, inf)), and the
                growth rate sqrt(limit_max_loss) = lim max error(N)/sqrt(N); the decoder-side
                parameters (theta, omega) of C^-1 (blt.inverse(), mfc's Blt convention).
                Also the square root (jax's optimal Toeplitz for max error) at n = 2048.
    minsep512   n = 512, min-separation (k, b) = (4, 128), max error (jnp.max reductions):
                jax_privacy's BLT (build_min_sep(error='max'), m = 1..5), banded Toeplitz with
                128 bands (optimize_banded_toeplitz, reduction_fn=jnp.max) and the general
                column-normalized banded strategy with 128 bands (banded.optimize, reduction
                jnp.max, sens^2 = k = 4).
    degenerate  The limit objective has no minimum: a one-buffer BLT with a decay near 1 has a
                smaller sqrt(limit_max_loss) than every BLT above, and a max error at n = 2048
                far above theirs.
"""

import argparse
import subprocess
import sys
import time

import numpy as np


def load():
  try:
    return subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()
  except OSError:
    return 'uptime unavailable'


def prefix(n):
  return np.tril(np.ones((n, n)))


def hash_workload(n):
  a = np.zeros((n, n))
  for i in range(n):
    for j in range(i + 1):
      a[i, j] = 1.0 + ((7 * i + 3 * j) % 5) / 4.0
  return a


def gamma2_sdp(a):
  import cvxpy as cp
  n = a.shape[0]
  z = cp.Variable((2 * n, 2 * n), symmetric=True)
  t = cp.Variable()
  cons = [z >> 0, z[:n, n:] == a, cp.diag(z) <= t]
  prob = cp.Problem(cp.Minimize(t), cons)
  prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
  return float(t.value), prob.status


def cmd_gamma2():
  print('\n### gamma_2 by SDP (cvxpy + Clarabel)\n')
  print('| workload | n | gamma_2 | status | seconds |')
  print('|---|---|---:|---|---:|')
  cases = [('prefix', n, prefix(n)) for n in (2, 3, 8, 16, 32)]
  cases += [('hash', n, hash_workload(n)) for n in (5, 12)]
  for name, n, a in cases:
    start = time.time()
    value, status = gamma2_sdp(a)
    print(f'| {name} | {n} | {value:.10f} | {status} | {time.time() - start:.1f} |',
          flush=True)
  print(f'\nload: {load()}')


def jax_modules():
  import jax
  jax.config.update('jax_enable_x64', True)
  import jax.numpy as jnp
  from jax_privacy.matrix_factorization import buffered_toeplitz as bt
  from jax_privacy.matrix_factorization import toeplitz
  from jax_privacy.matrix_factorization import banded
  return jax, jnp, bt, toeplitz, banded


def describe(blt):
  inv = blt.inverse()
  fmt = lambda v: '[' + ', '.join(f'{float(x):.17g}' for x in np.asarray(v)) + ']'
  return (f'C: theta={fmt(blt.buf_decay)} omega={fmt(blt.output_scale)}; '
          f'C^-1 (mfc Blt): theta={fmt(inv.buf_decay)} omega={fmt(inv.output_scale)}')


def cmd_blt2048():
  jax, jnp, bt, toeplitz, _ = jax_modules()
  n = 2048
  print(f'\n### jax_privacy max-error BLT, n = {n}, single participation\n')
  print('| m | max error (sens over n) | max error (sens over every horizon) '
        '| sqrt(limit_max_loss) | seconds |')
  print('|---|---:|---:|---:|---:|')
  params = []
  for m in range(1, 6):
    start = time.time()
    loss_fn = bt.LossFn.build_closed_form_single_participation(n=n)
    blt, loss = bt.optimize_loss(loss_fn=loss_fn, num_buffers=m)
    seconds = time.time() - start
    inv = blt.inverse()
    err = float(bt.max_error(inv, n))
    sens_inf = float(bt.sensitivity_squared(blt, jnp.inf))
    limit = float(bt.limit_max_loss(blt))
    print(f'| {m} | {float(loss) ** 0.5:.9f} | {(err * sens_inf) ** 0.5:.9f} '
          f'| {limit ** 0.5:.6e} | {seconds:.1f} |', flush=True)
    params.append((m, describe(blt)))
  c = np.asarray(toeplitz.optimal_max_error_strategy_coefs(n))
  sqrt_max = float(np.sum(c ** 2))  # B = C: sens = ||c||, last row norm = ||c||
  print(f'\nsquare root (optimal Toeplitz for max error): {sqrt_max:.9f}')
  print('\nparameters:')
  for m, d in params:
    print(f'- m = {m}: {d}')
  print(f'\nload: {load()}')


def cmd_minsep512():
  jax, jnp, bt, toeplitz, banded = jax_modules()
  n, k, b = 512, 4, 128
  print(f'\n### n = {n}, min-separation (k, b) = ({k}, {b}), max error\n')
  print('| mechanism | max error | seconds |')
  print('|---|---:|---:|')
  for m in range(1, 6):
    start = time.time()
    loss_fn = bt.LossFn.build_min_sep(n=n, error='max', min_sep=b, max_participations=k)
    try:
      blt, loss = bt.optimize_loss(loss_fn=loss_fn, num_buffers=m)
      print(f'| BLT, {m} buffers | {float(loss) ** 0.5:.9f} | {time.time() - start:.1f} |',
            flush=True)
      print(f'|   parameters | {describe(blt)} | |')
    except RuntimeError as e:
      print(f'| BLT, {m} buffers | failed: {e} | {time.time() - start:.1f} |', flush=True)
  start = time.time()
  coef = toeplitz.optimize_banded_toeplitz(n, b, reduction_fn=jnp.max)
  sens2 = float(toeplitz.minsep_sensitivity_squared(coef, min_sep=b, max_participations=k,
                                                    n=n))
  err = float(jnp.max(toeplitz.per_query_error(strategy_coef=coef, n=n)))
  print(f'| banded Toeplitz, {b} bands | {(sens2 * err) ** 0.5:.9f} | '
        f'{time.time() - start:.1f} |', flush=True)
  start = time.time()
  c = banded.optimize(n, bands=b, reduction_fn=jnp.max)
  err = float(jnp.max(banded.per_query_error(c)))
  print(f'| general banded (column-normalized), {b} bands | {(k * err) ** 0.5:.9f} | '
        f'{time.time() - start:.1f} |', flush=True)
  print(f'\nload: {load()}')


def cmd_degenerate():
  jax, jnp, bt, _, _ = jax_modules()
  n = 2048
  print('\n### the limit objective has no minimum (one buffer, decay near 1)\n')
  print('| C: theta, omega | sqrt(limit_max_loss) | max error at n = 2048 (sens over n) |')
  print('|---|---:|---:|')
  for theta, omega in [(1 - 1e-4, 1e-2), (1 - 1e-6, 1e-3), (1 - 1e-7, 3e-4)]:
    blt = bt.BufferedToeplitz.build(buf_decay=[theta], output_scale=[omega])
    limit = float(bt.limit_max_loss(blt))
    finite = float(bt.max_loss(blt, n))
    print(f'| {theta!r}, {omega!r} | {limit ** 0.5:.6e} | {finite ** 0.5:.4f} |', flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('command', choices=['gamma2', 'blt2048', 'minsep512', 'degenerate',
                                          'all'])
  args = parser.parse_args()
  commands = {'gamma2': cmd_gamma2, 'blt2048': cmd_blt2048, 'minsep512': cmd_minsep512,
              'degenerate': cmd_degenerate}
  for name in (commands if args.command == 'all' else [args.command]):
    commands[name]()
  sys.stdout.flush()


if __name__ == '__main__':
  main()
