"""The cost of a `Stream.step` from Python against the runtime's own step, at d = 10^6 with
(h, r) = (6, 6): interleaved runs on two streams of the same blob, medians, and the ratio.

Run: python compiler/python/bench/step.py [--steps N] (after pip install ./compiler/python).
"""

import argparse
import statistics
import time

import numpy as np

import mfc


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dim", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=60, help="interleaved pairs of steps")
    args = parser.parse_args()
    mechanism = mfc.compile(steps=2 * args.steps + 2, band=6, rank=6, noise_multiplier=1.0)
    python_stream = mfc.Stream(mechanism, args.dim, seed="11" * 32)
    rust_stream = mfc.Stream(mechanism, args.dim, seed="11" * 32)
    x = (np.random.default_rng(0).standard_normal(args.dim) * 1e-3).astype(np.float32)
    python_stream.step(x)  # warm up: page in the workspaces
    rust_stream._step_seconds(x)
    python, rust = [], []
    for _ in range(args.steps):
        started = time.perf_counter()
        python_stream.step(x)
        python.append(time.perf_counter() - started)
        rust.append(rust_stream._step_seconds(x))
    p, r = statistics.median(python), statistics.median(rust)
    print(f"d = {args.dim}, (h, r) = (6, 6), {args.steps} interleaved pairs of steps")
    print(f"Stream.step from Python  median {p * 1e3:8.3f} ms")
    print(f"the runtime's step       median {r * 1e3:8.3f} ms")
    print(f"ratio                    {p / r:8.3f}")


if __name__ == "__main__":
    main()
