"""mfc's correlated noise as an optax ``GradientTransformation`` (jax_privacy's *privatizer*,
its noise addition step): ``matrix_factorization_privatizer(privatizer, expected_batch_size=B)``
turns each step's per-example gradients into the noisy gradient ``ĝ_t / B`` of DP-FTRL or BandMF
(``mfc.GradientPrivatizer``), for the optimizer chained after it: ``optax.sgd(lr)`` for a
prefix-sum blob (DP-FTRL), ``optax.sgd(lr, momentum=β)`` for a BandMF ``momentum:β`` blob.

Privacy: the unit is one example (its gradient, clipped to the blob's ``ζ`` by mfc's runtime),
under the blob's participation schema and neighbouring relation (``Stream.privacy``); the loop
must feed each example only in the steps that schema allows. Everything after the noise
(``B``, the optimizer) is post-processing.

Choices:

- **The host stream.** The noise comes from mfc's runtime on the host (``Stream``), reached with
  ``jax.experimental.io_callback(..., ordered=True)``: ``update`` works eagerly and inside
  ``jax.jit``, each call runs exactly one step of the stream, in program order. ``jax.vmap`` of
  ``update`` is refused by JAX itself (``ValueError: Cannot vmap ordered IO callback``). Do not
  ``jax.pmap`` it either: JAX runs it (jax 0.10), each device calling the host once, so on one
  device it is one step and on several the first device's call takes a step with its part of
  the batch only and the others are refused by the step count (below), the stream advanced:
  one stream is one sequence of steps. Do not differentiate through ``update``. The
  per-example gradients travel to the host and ``ĝ`` back (``(m, D)`` and ``(D,)`` float32,
  CPU: no copy of consequence). Under ``jax.jit`` a refusal on the host (a finished stream, a
  count out of step) reaches the caller as ``jax.errors.JaxRuntimeError`` carrying mfc's
  message, not as ``mfc.StreamError``.
- **Input.** ``update(updates, state)`` takes the *per-example* gradients: a pytree whose leaves
  each have the leading batch axis ``m`` (e.g. ``jax.vmap(jax.grad(loss), (None, 0, 0))``). They
  are flattened in ``jax.tree_util`` leaf order, each leaf's trailing axes in C order, into the
  ``(m, D)`` float32 rows the runtime clips to ``ζ`` one by one; ``ĝ_t / B`` (computed on the host
  in float32) comes back in the same order with the leaves' shapes minus the batch axis. Leaves
  of another dtype are refused (``TypeError`` naming the leaf and ``.astype(jnp.float32)``): they
  are not converted silently. ``m = 0`` is a step with an empty batch (it still adds its noise).
- **Scaling.** ``ĝ_t`` is divided by ``expected_batch_size``, never by the batch's own size
  (as Opacus' ``expected_batch_size``): under Poisson sampling the batch size is itself private.
- **State.** The privatizer (the stream) lives on the host, outside the optax state. ``init``
  returns ``MatrixFactorizationPrivatizerState(count)``, the steps this transformation has taken
  (an int32 scalar); ``update`` refuses (``RuntimeError`` from the host, surfaced by JAX) a state
  whose ``count`` differs from the privatizer's ``steps_released``, so an optax state restored
  without the privatizer, or reused, is caught. To restart, save and restore
  ``GradientPrivatizer.state_dict`` next to the optax state.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import io_callback

from .training import GradientPrivatizer

__all__ = ["MatrixFactorizationPrivatizerState", "matrix_factorization_privatizer"]


class MatrixFactorizationPrivatizerState(NamedTuple):
    """The optax state: ``count``, the steps taken (the privatizer itself lives on the host)."""

    count: Any


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}={value!r}: expected a number > 0")
    value = float(value)
    if not (value > 0.0 and np.isfinite(value)):
        raise ValueError(f"{name}={value!r}: expected a finite number > 0")
    return value


def matrix_factorization_privatizer(
    privatizer: GradientPrivatizer, *, expected_batch_size: float
) -> optax.GradientTransformation:
    """The optax transformation adding ``privatizer``'s correlated noise (see the module).

    ``update(per_example_grads, state, params=None)`` -> ``(ĝ_t / expected_batch_size, state')``
    with ``ĝ_t = privatizer.privatize(rows)``, ``rows`` the ``(m, D)`` float32 per-example
    gradients flattened in ``jax.tree_util`` leaf order (``D`` must be ``privatizer.dim``;
    ``ValueError`` otherwise, and for leaves of different batch sizes). A sharded privatizer is
    refused (``ValueError``): its clip factors need the whole rows, which this transformation does
    not see. ``expected_batch_size``: the divisor of ``ĝ_t`` (positive; the expected number of
    examples per step, ``q·N`` under Poisson sampling, never the batch's own size, which is
    itself private)."""
    if not isinstance(privatizer, GradientPrivatizer):
        raise TypeError(
            f"privatizer: expected an mfc.GradientPrivatizer, got {type(privatizer).__name__}"
        )
    if privatizer.stream.shard is not None:
        raise ValueError(
            f"privatizer: a shard {privatizer.stream.shard} needs the whole rows' clip factors; "
            "matrix_factorization_privatizer takes an unsharded privatizer"
        )
    batch = np.float32(_positive("expected_batch_size", expected_batch_size))
    dim = privatizer.dim

    def host(count: np.ndarray, rows: np.ndarray) -> np.ndarray:
        # Runs on the host, in program order (ordered io_callback).
        if int(count) != privatizer.steps_released:
            raise RuntimeError(
                f"matrix_factorization_privatizer: the optax state's count={int(count)} differs "
                f"from the privatizer's steps_released={privatizer.steps_released}: restore "
                "GradientPrivatizer.state_dict together with the optax state"
            )
        noisy = privatizer.privatize(np.asarray(rows, dtype=np.float32))
        return np.asarray(noisy / batch, dtype=np.float32)

    def init_fn(params: Any) -> MatrixFactorizationPrivatizerState:
        del params
        return MatrixFactorizationPrivatizerState(count=jnp.zeros([], jnp.int32))

    def update_fn(
        updates: Any, state: MatrixFactorizationPrivatizerState, params: Any = None
    ) -> tuple[Any, MatrixFactorizationPrivatizerState]:
        del params
        paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(updates)
        if not paths_leaves:
            raise ValueError("matrix_factorization_privatizer: the gradients have no leaves")
        m = None
        for path, leaf in paths_leaves:
            name = jax.tree_util.keystr(path) or "<root>"
            dtype = getattr(leaf, "dtype", None)
            if dtype != jnp.float32:
                raise TypeError(
                    f"matrix_factorization_privatizer: leaf {name} is {dtype}, expected float32 "
                    "(convert explicitly, e.g. .astype(jnp.float32))"
                )
            if leaf.ndim < 1:
                raise ValueError(
                    f"matrix_factorization_privatizer: leaf {name} has no batch axis; pass "
                    "per-example gradients (leading axis m)"
                )
            if m is None:
                m = leaf.shape[0]
            elif leaf.shape[0] != m:
                raise ValueError(
                    f"matrix_factorization_privatizer: leaf {name} has {leaf.shape[0]} examples, "
                    f"the first leaf {m}; pass per-example gradients, every leaf with the "
                    "leading batch axis (e.g. jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))"
                )
        shapes = [leaf.shape[1:] for _, leaf in paths_leaves]
        sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        if sum(sizes) != dim:
            raise ValueError(
                f"matrix_factorization_privatizer: the gradients have D={sum(sizes)} coordinates "
                f"per example, the privatizer dim={dim}"
            )
        rows = jnp.concatenate(
            [leaf.reshape(m, size) for (_, leaf), size in zip(paths_leaves, sizes)], axis=1
        )
        noisy = io_callback(
            host, jax.ShapeDtypeStruct((dim,), jnp.float32), state.count, rows, ordered=True
        )
        out, start = [], 0
        for shape, size in zip(shapes, sizes):
            out.append(noisy[start : start + size].reshape(shape))
            start += size
        return (
            jax.tree_util.tree_unflatten(treedef, out),
            MatrixFactorizationPrivatizerState(count=state.count + 1),
        )

    return optax.GradientTransformation(init_fn, update_fn)
