"""Correlated noise for training loops, independent of the framework (numpy): the step the
PyTorch optimizer (``mfc.torch``), the optax transformation (``mfc.jax``) and the Flower strategy
(``mfc.flower``) share.

DP-FTRL and BandMF train with the *noisy gradient* of the matrix factorization mechanism: step
``t`` turns its examples' gradients ``g_{t,e}``, each clipped to ``ζ``, into

    ĝ_t = Σ_e clip(g_{t,e}) + σ·ζ·sens(C)·(C⁻¹ z)_t

and hands ``ĝ_t`` (divided by the expected batch size) to an ordinary optimizer: plain SGD for
the prefix-sum workload (DP-FTRL, Kairouz et al. 2021; Denisov et al. 2022, §2), SGD with
momentum ``β`` and the learning-rate schedule for the momentum workload (Choquette-Choo et al.
2023, "Multi-epoch matrix factorization mechanisms", Prop. 4.2). The optimizer applies the
workload ``A`` to ``ĝ``, so its iterates are the mechanism's private release ``A x + B z`` (with
``B = A C⁻¹``): everything after ``ĝ`` is post-processing. This is jax_privacy's "privatizer"
(``noise_addition``), with the noise replayed by the runtime a device runs.

Where ``ĝ_t`` comes from, by blob:

- **prefix-sum blobs** (every form: banded, BLT, FFT, BandMF): the stream releases the private
  prefix sum ``r_t = Σ_{s≤t} x_s + (B z)_t`` and ``ĝ_t = r_t − r_{t−1}`` (``B = S C⁻¹``, so the
  difference of consecutive releases is ``x_t + (C⁻¹ z)_t``);
- **BandMF blobs of another workload** (``momentum:β`` with a cooldown): the stream releases
  ``ĝ_t`` itself;
- banded and FFT blobs of another workload release only their noise ``(B z)_t`` and are refused
  here (compile the workload with ``form="bandmf"``, or stream the prefix sum).

Per-example clipping happens inside the runtime (``Stream.step_examples``): the unit of privacy
is one example, each clipped to the blob's ``ζ``, under the blob's participation schema and
neighbouring relation (``Stream.privacy``).
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from ._mfc import Mechanism, Stream, StreamError

__all__ = ["GradientPrivatizer"]

# A blob's workload as its report names it: "momentum:0.9" (compiled in this process), or
# "custom (momentum 0.9, cooldown 10:0.1)" (read from bytes: the compiler's `Workload::label`).
_MOMENTUM = re.compile(r"momentum[ :]([0-9.eE+-]+)")


def _workload_momentum(mechanism: Mechanism) -> Optional[float]:
    """The ``β`` of a ``momentum:β`` blob, ``None`` for any other workload (the framework
    wrappers warn when their optimizer's momentum is not the blob's)."""
    found = _MOMENTUM.search(str(mechanism.report.get("workload", "")))
    return float(found.group(1)) if found else None


class GradientPrivatizer:
    """The noisy gradient sum ``ĝ_t`` of each training step from a ``Stream`` (see the module).

    ``privatize(examples)`` takes the step's per-example gradients, ``(m, d)`` float32 (any
    layout; ``m = 0`` is a step with an empty batch, which still adds its noise), and returns
    ``ĝ_t``, ``(d,)`` float32: the sum of the examples, each clipped to ``ζ`` by the runtime,
    plus this step's correlated noise. A shard (``Stream(..., shard=(start, end))``) takes its
    coordinates of every example and the examples' whole-row clip factors (``clips``).

    ``stream``: the ``Stream`` the noise comes from (its mechanism, seed and shard). It must
    release prefix sums (``Stream.releases_prefix_sums``) or be a BandMF stream; anything else
    is refused (``ValueError``) when the privatizer is made, another type with ``TypeError``.
    """

    def __init__(self, stream: Stream) -> None:
        if not isinstance(stream, Stream):
            raise TypeError(f"stream: expected an mfc.Stream, got {type(stream).__name__}")
        if not stream.releases_prefix_sums and stream.form != "bandmf":
            raise ValueError(
                f"stream: a {stream.form} blob of a workload other than the prefix sum releases "
                "only its noise, not a noisy gradient: compile that workload with "
                "form='bandmf', or the prefix sum with any form"
            )
        self._stream = stream
        self._prefix_sum = stream.releases_prefix_sums
        # r_{t−1}, the last release of a prefix-sum stream (r_0 = 0).
        self._previous = np.zeros(stream.dim, np.float32)

    @property
    def stream(self) -> Stream:
        """The stream the noise comes from."""
        return self._stream

    @property
    def dim(self) -> int:
        """Coordinates of ``ĝ_t`` (a shard's: ``end - start``)."""
        return self._stream.dim

    @property
    def steps_released(self) -> int:
        """Steps privatized so far (the stream's)."""
        return self._stream.steps_released

    def privatize(
        self,
        examples: npt.NDArray[np.float32],
        clips: Optional[npt.NDArray[np.float32]] = None,
    ) -> npt.NDArray[np.float32]:
        """``ĝ_t`` of one step from ``examples``, its ``(m, d)`` float32 per-example gradients
        (see the class). ``clips``: the ``m`` whole-row clip factors (``mfc.clip_factors`` of the whole
        examples), required by a shard and refused otherwise. A refusal (``TypeError`` for
        another dtype, ``mfc.MfcError`` for a shape, a non-finite value or a finished stream)
        leaves the privatizer unchanged; past the blob's horizon, the ``StreamError`` names the
        ``steps`` it was compiled with."""
        horizon = self._stream.horizon
        if self._stream.steps_released >= horizon:
            raise StreamError(
                f"privatize: all {horizon} steps have been released: the blob was compiled with "
                f"steps={horizon} (one per training step); a longer training needs a blob "
                "compiled with more steps (mfc.compile(steps=...))"
            )
        if clips is None:
            release = self._stream.step_examples(examples)
        else:
            release = self._stream.step_examples(examples, clips=clips)
        if not self._prefix_sum:
            return release
        noisy = release - self._previous
        self._previous = release
        return noisy

    def state_dict(self) -> dict[str, Any]:
        """The privatizer's state: the stream's checkpoint (keep it secret: with the seed it
        reveals the running sum), its step count, shard and dimension, and the last release."""
        return {
            "checkpoint": self._stream.checkpoint(),
            "steps_released": self._stream.steps_released,
            "row_dim": self._stream.row_dim,
            "shard": self._stream.shard,
            "previous": self._previous.tobytes(),
        }

    def load_state_dict(self, state: dict[str, Any], *, released: Optional[int] = None) -> None:
        """Continues from ``state`` (``state_dict``) on this privatizer's fresh stream (same
        mechanism, seed, dimension and shard; another shard or dimension is refused with
        ``ValueError`` naming both). ``released``: the steps already released as the caller
        keeps them in durable storage; a state behind it is refused (``Stream.restore``), since
        replaying its later steps would release them twice. It is required, as by
        ``Stream.restore`` (``released=None`` is refused with ``ValueError``): the state's own
        count cannot detect a stale state; pass ``released=state["steps_released"]`` by name
        only when this state is known to be the latest."""
        for key, mine in (("row_dim", self._stream.row_dim), ("shard", self._stream.shard)):
            theirs = state.get(key)
            if isinstance(theirs, list):
                theirs = tuple(theirs)
            if theirs != mine:
                raise ValueError(
                    f"load_state_dict: the state is of {key}={theirs!r}, this stream's is "
                    f"{key}={mine!r}; restore it on a stream of the same {key}"
                )
        previous = np.frombuffer(state["previous"], dtype=np.float32)
        if previous.shape != self._previous.shape:
            raise ValueError(
                f"load_state_dict: 'previous' has {previous.size} values, expected {self.dim}"
            )
        if released is None:
            raise ValueError(
                "load_state_dict: released=None; pass released=N, the steps already released as "
                "kept in durable storage (a stale state, behind N, is then refused rather than "
                f"replayed), or released={int(state['steps_released'])} (the state's own count) "
                "if this state is known to be the latest"
            )
        self._stream.restore(state["checkpoint"], released=released)
        self._previous = previous.copy()
