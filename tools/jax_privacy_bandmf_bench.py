#!/usr/bin/env python3
"""One timed jax_privacy optimization, for the interleaved table of issue 31.

`cargo bench -p mfc-compiler --bench banded_general -- table` runs this script between its own
rows (same machine, same minute) and reads the last line, a JSON object:

    {"sqrt_l": ..., "wall": ..., "cpu": ..., "what": ...}

"wall" and "cpu" cover the optimization call only (jit compilation included, the import of jax
excluded); "cpu" is this process's CPU time over all its threads (time.process_time).

Subcommands (prefix sum, b-min-separation with at most k participations):

    banded N K B BANDS [STEPS]   banded.optimize(N, bands=BANDS, max_optimizer_steps=STEPS)
                                 (column-normalized general banded; default 100 steps, the
                                 library's default); sqrt(L) = sens * ||A C^-1||_F with
                                 sensitivity.get_sensitivity_banded (exact for BANDS <= B).
    blt N K B BUFFERS            buffered_toeplitz.optimize_loss(LossFn.build_min_sep(N,
                                 error='mean', min_sep=B, max_participations=K), num_buffers);
                                 sqrt(L) from toeplitz.minsep_sensitivity_squared and the dense
                                 decoder.

Install (CPU jax; measured with jax_privacy 2.0.0, jax 0.10.2, Python 3.11):

    python3 -m venv /work/venv-bandmf
    /work/venv-bandmf/bin/pip install 'jax_privacy==2.0.0'

Measurement only: nothing here is used by mfc.
"""

import json
import sys
import time

import numpy as np

import jax

jax.config.update('jax_enable_x64', True)
import jax.numpy as jnp  # noqa: E402

from jax_privacy.matrix_factorization import banded  # noqa: E402
from jax_privacy.matrix_factorization import buffered_toeplitz  # noqa: E402
from jax_privacy.matrix_factorization import sensitivity  # noqa: E402
from jax_privacy.matrix_factorization import toeplitz  # noqa: E402


def frob_b(n, c):
  """||S C^-1||_F for the prefix sum S, by a dense triangular solve."""
  import scipy.linalg  # pylint: disable=import-outside-toplevel
  s = np.tril(np.ones((n, n)))
  # B = S C^-1  <=>  C^T B^T = S^T.
  b_t = scipy.linalg.solve_triangular(c.T, s.T, lower=False)
  return float(np.linalg.norm(b_t))


def timed(fn):
  wall, cpu = time.perf_counter(), time.process_time()
  out = fn()
  jax.block_until_ready(out)
  return out, time.perf_counter() - wall, time.process_time() - cpu


def cmd_banded(n, k, b, bands, steps=100):
  strategy, wall, cpu = timed(
      lambda: banded.optimize(n, bands=bands, max_optimizer_steps=steps))
  c = np.asarray(strategy.materialize())
  sens = float(sensitivity.get_sensitivity_banded(jnp.asarray(c), b, k))
  return dict(sqrt_l=sens * frob_b(n, c), wall=wall, cpu=cpu,
              what=f'banded.optimize({n}, bands={bands}, max_optimizer_steps={steps})')


def cmd_blt(n, k, b, buffers):
  loss_fn = buffered_toeplitz.LossFn.build_min_sep(
      n, error='mean', min_sep=b, max_participations=k)
  (blt, _), wall, cpu = timed(
      lambda: buffered_toeplitz.optimize_loss(loss_fn, num_buffers=buffers))
  coef = np.asarray(blt.toeplitz_coefs(n))
  c = np.asarray(toeplitz.materialize_lower_triangular(jnp.asarray(coef), n))
  sens = float(np.sqrt(toeplitz.minsep_sensitivity_squared(jnp.asarray(coef), b, k, n)))
  return dict(sqrt_l=sens * frob_b(n, c), wall=wall, cpu=cpu,
              what=f'optimize_loss(LossFn.build_min_sep({n}, min_sep={b}, '
                   f'max_participations={k}), num_buffers={buffers})')


def main():
  command, numbers = sys.argv[1], [int(x) for x in sys.argv[2:]]
  result = {'banded': cmd_banded, 'blt': cmd_blt}[command](*numbers)
  print(json.dumps(result), flush=True)


if __name__ == '__main__':
  main()
