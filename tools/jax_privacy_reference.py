#!/usr/bin/env python3
"""Reference figures from the peer library jax_privacy (matrix_factorization).

Measures, with jax_privacy's own optimizers and sensitivity functions, the loss
sqrt(L) = sens(C) * ||B||_F of factorizations A = B C, for the settings mfc's
README/BENCHMARKS compare against.  Measurement only: nothing here is used by mfc.

Install (CPU jax; the figures were measured with jax_privacy 2.0.0, jax/jaxlib 0.10.2,
numpy 2.4.6, optax 0.2.8, Python 3.11):

    python3 -m venv /work/venv-jax
    /work/venv-jax/bin/pip install 'jax_privacy==2.0.0'
    /work/venv-jax/bin/python tools/jax_privacy_reference.py all

Subcommands (each prints a markdown table; `all` runs them in order):

    prefix512-fixed    n=512, fixed epoch order k=4, b=128: dense.optimize(512, epochs=4),
                       and the same C under min-separation (jax_privacy's upper bound, plus an
                       exact value by enumeration in numpy, labelled as such).
    prefix512-minsep   n=512, min-sep b=128, k=4: dense BandMF, general column-normalized
                       banded (banded.optimize), banded Toeplitz, BLT with 1..5 buffers.
    prefix2000-minsep  n=2000, min-sep b=100, k=20: BLT 1..5 buffers, banded Toeplitz, dense
                       BandMF bands=100 (stopped after --dense-limit seconds, default 1200).
    momentum-check     writes the n=64 momentum 0.95 / cooldown 16:0.05 matrix to
                       /tmp/momentum_small.npy for the cross-check against mfc (see below).
    momentum2052       the StackOverflow workload of 001 (n=2052, momentum 0.95, cooldown
                       over the last 513 steps to 0.05), k=6, b=342.

Figures measured with jax_privacy 2.0.0 on the shared 2-core machine (sqrt(L); load 1-19):
  n=512 fixed epoch (4,128): dense 127.32 (mfc certified 127.32); same C under min-sep:
    142.88 (jax_privacy upper bound), 142.62 (exact, enumeration).
  n=512 min-sep (4,128): general banded 128 bands 132.26, dense BandMF 128 132.27,
    banded Toeplitz 128 135.86 (134.61 column-normalized), BLT 140.94 (4-5 buffers).
  n=2000 min-sep (20,100): banded Toeplitz 100 903.67 (901.92 column-normalized),
    BLT 955.88 (2-3 buffers), 956.13 (4), 5 rejected (955.87 evaluated directly),
    dense BandMF 100 stopped at 20 min (916.71, not converged).
  momentum n=2052 min-sep (6,342): BLT (user loss) 5526.52; the dense and banded runs
    were stopped unconverged (see the printed notes).

Definitions.  A = lower-triangular ones unless stated.  L = sens(C)^2 ||B||_F^2, B = A C^-1,
sensitivity for unit-norm contributions.  "min-sep (k, b)": at most k participations, any two
at least b apart (jax_privacy min_sep=b, max_participations=k).  "fixed epoch (k, b)":
participations exactly b = n/k apart (jax_privacy epochs=k).  Seconds are wall clock of the
optimization call (including jit compilation), on a shared 2-core CPU machine; the script
prints `uptime` load next to each table.

Momentum cross-check with mfc (the matrix must agree with compiler/src/workload.rs).
`momentum-check` writes A, and also prints jax_privacy's single-participation dense optimum
for it (dense.optimize(n, A=A), sensitivity.single_participation_sensitivity):

    python tools/jax_privacy_reference.py momentum-check --check-cooldown 16 --check-final 0.5
    mfc compile --workload npy:/tmp/momentum_small.npy --steps 64 --band 64 --rank 0 --out /tmp/x.mfc
    mfc compile --workload momentum:0.95 --cooldown 16:0.5 --steps 64 --band 64 --rank 0 --out /tmp/y.mfc

Both must print the same "optimum sqrt(L)" line, and it must match the jax_privacy value.
Measured at mfc c7866b1: n=64 beta=0.95 cooldown 16:0.5 -> 139.2591 (mfc npy, mfc built-in,
jax_privacy 139.2591); beta=0.9 16:0.05 -> 89.9060 / 89.9060 / 89.9062; n=32 beta=0.95
16:0.05 -> 64.5366 / 64.5366 / 64.5367.  The default case (n=64, beta=0.95, 16:0.05) does not
certify in mfc ("optimizer did not certify the requested gap after 10000 iterations
(relative gap inf)", both via npy and built in, also with --gap 1e-3); jax_privacy gives
138.1808 there.

The momentum2052 BLT rows use jax_privacy's public LossFn / optimize_loss with a
user-written error function (MomentumCooldownLoss below): jax_privacy's BLT and Toeplitz
optimizers only build prefix-sum losses.  banded.optimize and dense.optimize take A directly.
"""

import argparse
import re
import subprocess
import sys
import time

import numpy as np

import jax

jax.config.update('jax_enable_x64', True)
import jax.numpy as jnp  # noqa: E402

import jax_privacy  # noqa: E402
from jax_privacy.matrix_factorization import banded  # noqa: E402
from jax_privacy.matrix_factorization import buffered_toeplitz  # noqa: E402
from jax_privacy.matrix_factorization import dense  # noqa: E402
from jax_privacy.matrix_factorization import sensitivity  # noqa: E402
from jax_privacy.matrix_factorization import streaming_matrix  # noqa: E402
from jax_privacy.matrix_factorization import toeplitz  # noqa: E402

ROWS = []


def load():
  try:
    return subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()
  except OSError:
    return 'uptime unavailable'


def row(setting, schema, family, params, sqrt_l, sens_fn, exact, seconds, note=''):
  r = dict(setting=setting, schema=schema, family=family, params=params,
           sqrt_l=sqrt_l, sens_fn=sens_fn, exact=exact, seconds=seconds, note=note)
  ROWS.append(r)
  print(f'  -> {family} {params}: sqrtL={sqrt_l:.4f} ({exact}, {sens_fn}) '
        f'{seconds:.1f}s {note} | load: {load()}', flush=True)
  return r


def print_table(title):
  print(f'\n### {title}\n')
  print(f'jax_privacy {jax_privacy.__version__ if hasattr(jax_privacy, "__version__") else "?"}'
        f', jax {jax.__version__}; load at end: {load()}\n')
  print('| setting | schema | family | parameters | √L | sensitivity function | exact/bound '
        '| seconds | note |')
  print('|---|---|---|---|---:|---|---|---:|---|')
  for r in ROWS:
    print(f"| {r['setting']} | {r['schema']} | {r['family']} | {r['params']} | "
          f"{r['sqrt_l']:.2f} | {r['sens_fn']} | {r['exact']} | {r['seconds']:.1f} | "
          f"{r['note']} |")
  ROWS.clear()
  sys.stdout.flush()


# ----------------------------------------------------------------------------
# Workloads and evaluation.


def prefix_workload(n):
  return np.tril(np.ones((n, n)))


def cooldown_rates(n, steps, final_rate):
  """mfc's Schedule::Cooldown::rates (compiler/src/workload.rs)."""
  start = n - steps
  return np.array([1.0 if i < start else
                   1.0 - (1.0 - final_rate) * (i - start + 1) / steps
                   for i in range(n)])


def momentum_workload(n, beta, cooldown=None):
  """mfc's Workload::Momentum: M[i,j] = sum_{l=j}^{i} eta_l beta^(l-j)."""
  eta = np.ones(n) if cooldown is None else cooldown_rates(n, *cooldown)
  m = np.zeros((n, n))
  for j in range(n):
    powers = beta ** np.arange(n - j)
    m[j:, j] = np.cumsum(eta[j:] * powers)
  return m, eta


def frob_b(a, c):
  """||A C^-1||_F for a square invertible (lower-triangular) C."""
  b = np.linalg.solve(c.T, a.T).T
  return float(np.linalg.norm(b))


def timed(fn):
  t = time.time()
  out = fn()
  jax.block_until_ready(out)
  return out, time.time() - t


def dense_callback(limit_s):
  """pg-tol termination (jax_privacy's default) plus a wall-clock limit."""
  state = dict(steps=0, stopped=False, t0=time.time())

  def cb(info):
    state['steps'] = info.step + 1
    if dense.pg_tol_termination_fn(info):
      return True
    if time.time() - state['t0'] > limit_s:
      state['stopped'] = True
      return True
    return False

  return cb, state


def dense_note(state, limit_s, max_steps=10000):
  if state['stopped']:
    return f'STOPPED at the {limit_s:.0f} s limit after {state["steps"]} L-BFGS steps (not converged)'
  if state['steps'] >= max_steps:
    return f'hit max_optimizer_steps={max_steps}'
  return f'converged (pg tol) in {state["steps"]} steps'


def exact_minsep_sens_by_enumeration(x, b, k):
  """Exact min-sep sensitivity of a Gram matrix X >= 0 (NOT a jax_privacy function).

  For X with non-negative entries the worst case puts the same unit vector in every
  participation, so sens^2 = max over participation sets pi of sum(X[pi, pi]); with X >= 0
  adding a participation never lowers the sum, so we enumerate the maximal sets
  (exactly k positions when k of them fit), vectorizing over the last position.
  """
  n = x.shape[0]
  assert np.all(x >= 0), 'enumeration is exact only for X >= 0'
  assert (k - 1) * b < n
  best = -np.inf
  diag = np.diag(x)

  def rec(prefix, partial):
    nonlocal best
    depth = len(prefix)
    start = prefix[-1] + b if prefix else 0
    if depth == k - 1:
      last = np.arange(start, n)
      if last.size == 0:
        return
      tot = partial + diag[last] + 2 * x[np.array(prefix)][:, last].sum(axis=0)
      best = max(best, float(tot.max()))
      return
    for p in range(start, n - (k - 1 - depth) * b):
      add = diag[p] + 2 * sum(x[q, p] for q in prefix)
      rec(prefix + [p], partial + add)

  rec([], 0.0)
  return float(np.sqrt(best))


# ----------------------------------------------------------------------------
# Families.


def run_dense(setting, a, *, epochs=1, bands=None, equal_norm=False,
              min_sep=None, k=None, limit_s=1e9, label=None):
  n = a.shape[0]
  cb, state = dense_callback(limit_s)
  kwargs = dict(epochs=epochs, callback=cb)
  if bands is not None:
    kwargs.update(bands=bands, equal_norm=equal_norm)
  if not np.array_equal(a, prefix_workload(n)):
    kwargs['A'] = jnp.asarray(a)
  c, dt = timed(lambda: dense.optimize(n, **kwargs))
  c = np.asarray(c)
  fb = frob_b(a, c)
  note = dense_note(state, limit_s)
  if bands is None:
    params = f'dense.optimize({n}, epochs={epochs})'
    s = sensitivity.fixed_epoch_sensitivity(jnp.asarray(c), epochs)
    row(setting, f'fixed epoch (k={epochs}, b={n // epochs})', 'dense (001 optimum)', params,
        s * fb, 'sensitivity.fixed_epoch_sensitivity',
        'exact (X is diagonal on each pattern by the orthogonality mask)', dt, note)
  else:
    params = f'dense.optimize({n}, bands={bands}, equal_norm={equal_norm})'
    s = sensitivity.get_sensitivity_banded(jnp.asarray(c), min_sep, k)
    row(setting, f'min-sep (k={k}, b={min_sep})', label or 'dense BandMF', params,
        s * fb, 'sensitivity.get_sensitivity_banded', f'exact (bands {bands} <= min_sep)',
        dt, note)
  return c


def run_banded_general(setting, a_stream, a, n, bands, min_sep, k, max_steps=100, label=''):
  """banded.optimize: column-normalized general banded C (streaming, custom workload)."""
  kwargs = dict(bands=bands, max_optimizer_steps=max_steps)
  if a_stream is not None:
    kwargs['A'] = a_stream
  strat, dt = timed(lambda: banded.optimize(n, **kwargs))
  c = np.asarray(strat.materialize())
  s = sensitivity.get_sensitivity_banded(jnp.asarray(c), min_sep, k)
  row(setting, f'min-sep (k={k}, b={min_sep})', 'banded (column-normalized, general)',
      f'banded.optimize({n}, bands={bands}{label}, max_optimizer_steps={max_steps})',
      s * frob_b(a, c), 'sensitivity.get_sensitivity_banded',
      f'exact (bands {bands} <= min_sep)', dt)


def run_banded_toeplitz(setting, a, n, bands, min_sep, k):
  coef, dt = timed(lambda: toeplitz.optimize_banded_toeplitz(n, bands))
  coef = np.asarray(coef)
  schema = f'min-sep (k={k}, b={min_sep})'
  # (i) the Toeplitz C itself.  For bands <= min_sep, sens^2 = k ||coef||^2 (the first k
  # columns b apart have full norm when n - (k-1) b >= bands), so the single-participation
  # loss that optimize_banded_toeplitz minimizes is the min-sep loss up to the factor k.
  c = np.asarray(toeplitz.materialize_lower_triangular(jnp.asarray(coef), n))
  s = sensitivity.get_sensitivity_banded(jnp.asarray(c), min_sep, k)
  try:
    s_t = float(np.sqrt(toeplitz.minsep_sensitivity_squared(jnp.asarray(coef), min_sep, k, n)))
    agree = f'toeplitz.minsep_sensitivity_squared agrees ({s_t:.6f})' if abs(s_t - s) < 1e-9 * s \
        else f'toeplitz.minsep_sensitivity_squared gives {s_t:.6f}'
  except ValueError as e:  # coefficients not non-negative / non-increasing
    agree = f'toeplitz.minsep_sensitivity_squared refuses: {str(e)[:60]}'
  row(setting, schema, 'banded Toeplitz', f'toeplitz.optimize_banded_toeplitz({n}, {bands})',
      s * frob_b(a, c), 'sensitivity.get_sensitivity_banded',
      f'exact (bands {bands} <= min_sep)', dt, agree)
  # (ii) the same coefficients, column-normalized (how jax_privacy deploys them:
  # toeplitz.inverse_as_streaming_matrix(coef, column_normalize_for_n=n)).
  cn = np.asarray(banded.ColumnNormalizedBanded.from_banded_toeplitz(
      n, jnp.asarray(coef)).materialize())
  s = sensitivity.get_sensitivity_banded(jnp.asarray(cn), min_sep, k)
  row(setting, schema, 'banded Toeplitz, column-normalized',
      f'same coef, banded.ColumnNormalizedBanded.from_banded_toeplitz({n}, coef)',
      s * frob_b(a, cn), 'sensitivity.get_sensitivity_banded',
      f'exact (bands {bands} <= min_sep)', 0.0, 'no extra optimization')


def run_blt(setting, a, n, nbuf, min_sep, k, loss_fn=None, label='', check_bound=True):
  if loss_fn is None:
    loss_fn = buffered_toeplitz.LossFn.build_min_sep(
        n, error='mean', min_sep=min_sep, max_participations=k)
    call = (f'optimize_loss(LossFn.build_min_sep({n}, error="mean", min_sep={min_sep}, '
            f'max_participations={k}), num_buffers={nbuf})')
  else:
    call = f'optimize_loss({label}, num_buffers={nbuf})'
  try:
    (blt, loss), dt = timed(lambda: buffered_toeplitz.optimize_loss(loss_fn, num_buffers=nbuf))
  except (RuntimeError, ValueError) as e:
    print(f'  BLT {nbuf} buffers failed: {e}', flush=True)
    note = f'FAILED: {str(e).splitlines()[0][:70]}'
    # optimize_loss rejects the optimized BLT when blt.inverse() fails its diagonalization
    # check; the message prints the BLT, which we evaluate directly from its coefficients.
    found = re.search(r'buf_decay=\[([^\]]*)\],\s*output_scale=\[([^\]]*)\]', str(e))
    if found:
      rejected = buffered_toeplitz.BufferedToeplitz.build(
          buf_decay=[float(v) for v in found.group(1).split(',')],
          output_scale=[float(v) for v in found.group(2).split(',')])
      coef = np.asarray(rejected.toeplitz_coefs(n))
      c = np.asarray(toeplitz.materialize_lower_triangular(jnp.asarray(coef), n))
      s = float(np.sqrt(toeplitz.minsep_sensitivity_squared(jnp.asarray(coef), min_sep, k, n)))
      note += (f'; the rejected BLT (buf_decay={found.group(1)}, output_scale={found.group(2)})'
               f' evaluated directly: sqrtL={s * frob_b(a, c):.4f}')
    row(setting, f'min-sep (k={k}, b={min_sep})', 'BLT', call, float('nan'), '-', '-', 0.0,
        note)
    return None
  coef = np.asarray(blt.toeplitz_coefs(n))
  c = np.asarray(toeplitz.materialize_lower_triangular(jnp.asarray(coef), n))
  # With checks on: raises unless coef is non-negative and non-increasing, the condition
  # under which this min-sep sensitivity is exact (2405.13763, Thm 2).
  s = float(np.sqrt(toeplitz.minsep_sensitivity_squared(jnp.asarray(coef), min_sep, k, n)))
  sqrt_l = s * frob_b(a, c)
  note = (f'optimizer loss gives {np.sqrt(n * float(loss)):.4f}; '
          f'buf_decay={np.round(np.asarray(blt.buf_decay), 6).tolist()}, '
          f'output_scale={np.round(np.asarray(blt.output_scale), 6).tolist()}')
  if check_bound:
    ub = sensitivity.get_min_sep_sensitivity_upper_bound(jnp.asarray(c), min_sep, k)
    note += f'; get_min_sep_sensitivity_upper_bound={ub:.6f} vs exact {s:.6f}'
  row(setting, f'min-sep (k={k}, b={min_sep})', 'BLT', call, sqrt_l,
      'toeplitz.minsep_sensitivity_squared',
      'exact (coefs checked >= 0, non-increasing)', dt, note)
  return blt


# ----------------------------------------------------------------------------
# Settings.


def cmd_prefix512_fixed(args):
  n, k, b = 512, 4, 128
  a = prefix_workload(n)
  cb, state = dense_callback(1e9)
  c, dt = timed(lambda: dense.optimize(n, epochs=k, callback=cb))
  c = np.asarray(c)
  fb = frob_b(a, c)
  s = sensitivity.fixed_epoch_sensitivity(jnp.asarray(c), k)
  note = dense_note(state, 1e9) + '; mfc certified optimum 127.32'
  row('n=512', f'fixed epoch (k={k}, b={b})', 'dense (001 optimum)',
      f'dense.optimize({n}, epochs={k})', s * fb, 'sensitivity.fixed_epoch_sensitivity',
      'exact (X diagonal on each pattern)', dt, note)
  ub = sensitivity.get_min_sep_sensitivity_upper_bound(jnp.asarray(c), b, k)
  row('n=512', f'min-sep (k={k}, b={b})', 'dense (001 fixed-epoch optimum, reused)',
      f'C from dense.optimize({n}, epochs={k})', ub * fb,
      'sensitivity.get_min_sep_sensitivity_upper_bound', 'UPPER BOUND', 0.0,
      f'sens bound {ub:.6f} vs fixed-epoch sens {s:.6f}')
  if not args.skip_enumeration:
    x = c.T @ c
    x[np.abs(x) < 1e-14] = 0.0  # the orthogonality mask's exact zeros, up to rounding
    if np.all(x >= 0):
      t = time.time()
      se = exact_minsep_sens_by_enumeration(x, b, k)
      row('n=512', f'min-sep (k={k}, b={b})', 'dense (001 fixed-epoch optimum, reused)',
          f'C from dense.optimize({n}, epochs={k})', se * fb,
          'exact enumeration in numpy (NOT jax_privacy), X >= 0', 'exact', time.time() - t,
          f'sens {se:.6f}')
    else:
      print(f'  X has negative entries (min {x.min():.3g}); no exact enumeration', flush=True)
  print_table('n = 512, k = 4, b = 128: fixed epoch order')


def cmd_prefix512_minsep(args):
  n, k, b = 512, 4, 128
  a = prefix_workload(n)
  s = 'n=512'
  for bands in args.bands or [16, 32, 64, 128]:
    run_dense(s, a, bands=bands, equal_norm=True, min_sep=b, k=k)
  if not args.skip_banded_general:
    for bands in args.bands or [16, 32, 64, 128]:
      run_banded_general(s, None, a, n, bands, b, k)
  for bands in args.bands or [16, 32, 64, 128]:
    run_banded_toeplitz(s, a, n, bands, b, k)
  for nbuf in args.buffers or [1, 2, 3, 4, 5]:
    run_blt(s, a, n, nbuf, b, k)
  print_table('n = 512, min-separation k = 4, b = 128')


def cmd_prefix2000_minsep(args):
  n, k, b = 2000, 20, 100
  a = prefix_workload(n)
  s = 'n=2000'
  for nbuf in args.buffers or [1, 2, 3, 4, 5]:
    run_blt(s, a, n, nbuf, b, k)
  for bands in args.bands or [16, 32, 64, 100]:
    run_banded_toeplitz(s, a, n, bands, b, k)
  if not args.skip_dense:
    run_dense(s, a, bands=100, equal_norm=True, min_sep=b, k=k,
              limit_s=args.dense_limit)
  print_table('n = 2000, min-separation k = 20, b = 100')


def cmd_momentum_check(args):
  n, beta, steps, final = args.check_n, args.check_beta, args.check_cooldown, args.check_final
  a, _ = momentum_workload(n, beta, (steps, final))
  np.save(args.out, a.astype(np.float64))
  print(f'wrote {args.out}: {n}x{n} momentum {beta}, cooldown {steps}:{final}; '
        f'A[n-1,0]={a[-1, 0]:.12f}, A[n-1,n-1]={a[-1, -1]:.6f}')
  c = np.asarray(dense.optimize(n, A=jnp.asarray(a)))
  s = sensitivity.single_participation_sensitivity(jnp.asarray(c))
  print(f'jax_privacy dense.optimize({n}, A=A), single participation: '
        f'optimum sqrt(L) = {s * frob_b(a, c):.4f}')


class MomentumCooldownLoss:
  """||A C^-1||_F^2 / n for a Toeplitz C^-1 (coefficients c) and A = S diag(eta) T_beta.

  A user-written `error_for_inv` for buffered_toeplitz.LossFn (jax_privacy's LossFn accepts
  any callable; its build_* constructors only cover the prefix workload).  With
  T = Toeplitz(t), t = T_beta c, and Q = diag(eta) S^T S diag(eta):
  ||S diag(eta) T||_F^2 = tr(T^T Q T) = t^T G t, G[a, b] = sum_j Q[j+a, j+b], so the loss is
  the quadratic form c^T (M_beta^T G M_beta) c / n with a matrix precomputed once.
  """

  def __init__(self, n, beta, eta):
    self.n = n
    idx = np.arange(n)
    q = np.outer(eta, eta) * (n - np.maximum.outer(idx, idx))  # (S^T S)[p,q] = n - max(p,q)
    g = np.zeros((n, n))
    for d in range(n):  # G[a, a+d] = sum_{p=a}^{n-1-d} Q[p, p+d]: suffix sums per diagonal
      suffix = np.cumsum(q.diagonal(d)[::-1])[::-1]
      g[idx[:n - d], idx[:n - d] + d] = suffix
      g[idx[:n - d] + d, idx[:n - d]] = suffix
    m_beta = np.tril(beta ** np.maximum(np.subtract.outer(idx, idx), 0))
    self.gram = jnp.asarray(m_beta.T @ g @ m_beta / n)

  def __call__(self, inv_blt):
    c = inv_blt.toeplitz_coefs(self.n)
    return c @ (self.gram @ c)


def cmd_momentum2052(args):
  n, k, b = 2052, 6, 342
  beta, cooldown = 0.95, (513, 0.05)
  a, eta = momentum_workload(n, beta, cooldown)
  s = 'momentum n=2052'
  fams = set(args.families or ['blt', 'banded', 'dense-fixed', 'dense-band'])
  if 'blt' in fams:
    err = MomentumCooldownLoss(n, beta, eta)

    def sens2(blt):
      return toeplitz.minsep_sensitivity_squared(
          strategy_coef=blt.toeplitz_coefs(n), min_sep=b, max_participations=k,
          skip_checks=True)

    loss_fn = buffered_toeplitz.LossFn(
        error_for_inv=err, sensitivity_squared=sens2, n=n, min_sep=b,
        max_participations=sensitivity.minsep_true_max_participations(n, b, k))
    for nbuf in args.buffers or [1, 2, 3, 4, 5]:
      run_blt(s, a, n, nbuf, b, k, loss_fn=loss_fn,
              label='LossFn(error_for_inv=<user-written momentum/cooldown error>, '
                    'sensitivity_squared=toeplitz.minsep_sensitivity_squared)')
  if 'banded' in fams:
    a_stream = streaming_matrix.momentum_sgd_matrix(beta, jnp.asarray(eta))
    for bands in args.banded_bands:
      run_banded_general(s, a_stream, a, n, bands, b, k, max_steps=args.banded_steps,
                         label=', A=streaming_matrix.momentum_sgd_matrix(0.95, eta)')
  if 'dense-fixed' in fams:
    cb, state = dense_callback(args.dense_limit)
    c, dt = timed(lambda: dense.optimize(n, epochs=k, A=jnp.asarray(a), callback=cb))
    c = np.asarray(c)
    fb = frob_b(a, c)
    sf = sensitivity.fixed_epoch_sensitivity(jnp.asarray(c), k)
    row(s, f'fixed epoch (k={k}, b={b})', 'dense (001 optimum)',
        f'dense.optimize({n}, epochs={k}, A=A)', sf * fb,
        'sensitivity.fixed_epoch_sensitivity', 'exact (X diagonal on each pattern)', dt,
        dense_note(state, args.dense_limit))
    ub = sensitivity.get_min_sep_sensitivity_upper_bound(jnp.asarray(c), b, k)
    row(s, f'min-sep (k={k}, b={b})', 'dense fixed-epoch C, reused',
        f'C from dense.optimize({n}, epochs={k}, A=A)', ub * fb,
        'sensitivity.get_min_sep_sensitivity_upper_bound', 'UPPER BOUND', 0.0,
        f'sens bound {ub:.6f}')
  if 'dense-band' in fams:
    for bands in args.bands or [342, 64]:
      run_dense(s, a, bands=bands, equal_norm=True, min_sep=b, k=k,
                limit_s=args.dense_band_limit)
  print_table('StackOverflow momentum workload (001): n = 2052, momentum 0.95, '
              'cooldown 513 steps to 0.05, k = 6, b = 342')


def main():
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  sub = p.add_subparsers(dest='cmd', required=True)
  for name in ['prefix512-fixed', 'prefix512-minsep', 'prefix2000-minsep', 'momentum-check',
               'momentum2052', 'all']:
    q = sub.add_parser(name)
    q.add_argument('--bands', type=int, nargs='*', help='override the bands list')
    q.add_argument('--buffers', type=int, nargs='*', help='override the BLT buffer counts')
    q.add_argument('--families', nargs='*',
                   help='momentum2052: subset of blt banded dense-band dense-fixed')
    q.add_argument('--dense-limit', type=float, default=1200.0,
                   help='wall-clock limit (s) for the large dense optimizations')
    q.add_argument('--dense-band-limit', type=float, default=900.0,
                   help='momentum2052: wall-clock limit (s) for each dense BandMF run')
    q.add_argument('--banded-bands', type=int, nargs='*', default=[64],
                   help='momentum2052: bands for banded.optimize (342 needs ~11 GB for the '
                        'un-checkpointed scan)')
    q.add_argument('--banded-steps', type=int, default=100,
                   help='max_optimizer_steps for banded.optimize at n=2052')
    q.add_argument('--skip-dense', action='store_true', help='prefix2000: skip dense BandMF')
    q.add_argument('--skip-banded-general', action='store_true',
                   help='prefix512-minsep: skip banded.optimize')
    q.add_argument('--skip-enumeration', action='store_true',
                   help='prefix512-fixed: skip the exact min-sep enumeration')
    q.add_argument('--out', default='/tmp/momentum_small.npy')
    q.add_argument('--check-n', type=int, default=64, help='momentum-check: n')
    q.add_argument('--check-beta', type=float, default=0.95, help='momentum-check: momentum')
    q.add_argument('--check-cooldown', type=int, default=16, help='momentum-check: cooldown steps')
    q.add_argument('--check-final', type=float, default=0.05, help='momentum-check: final rate')
  args = p.parse_args()
  print(f'jax_privacy {getattr(jax_privacy, "__version__", "?")}, jax {jax.__version__}, '
        f'numpy {np.__version__}, x64={jax.config.read("jax_enable_x64")}; {load()}',
        flush=True)
  cmds = dict(zip(['prefix512-fixed', 'prefix512-minsep', 'prefix2000-minsep',
                   'momentum-check', 'momentum2052'],
                  [cmd_prefix512_fixed, cmd_prefix512_minsep, cmd_prefix2000_minsep,
                   cmd_momentum_check, cmd_momentum2052]))
  if args.cmd == 'all':
    for f in cmds.values():
      f(args)
  else:
    cmds[args.cmd](args)


if __name__ == '__main__':
  main()
