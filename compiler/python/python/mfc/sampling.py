"""The batch sampler of amplified BandMF (issue 29): exactly the sampling scheme the privacy
accounting of ``mfc calibrate --sampling-prob`` assumes, drawn reproducibly, with ``check`` to
refuse a blob whose recorded scheme differs, so a training loop cannot silently sample
differently from what its blob promises.

The scheme is cyclic Poisson sampling, Algorithm 2 of Choquette-Choo, Ganesh, McKenna, McMahan,
Rush, Thakurta and Xu, "(Amplified) Banded Matrix Factorizations: A unified approach to private
training", NeurIPS 2023 (arXiv:2306.08153); jax_privacy's
``batch_selection.CyclicPoissonSampling`` with ``partition_type=PartitionType.INDEPENDENT`` and
no truncation. The examples are split into ``cycle_length`` (b̂, the encoder's bands) groups;
step i Poisson-samples group ``i mod b̂``: each of its examples is in the batch independently
with probability ``sampling_prob`` (q), the examples of the other groups never. ``b̂ = 1`` is
Poisson-sampled DP-SGD. Pure Python and numpy.
"""

from __future__ import annotations

import math
import numbers
import operator
import threading
from collections.abc import Mapping
from typing import Any, Iterator, Optional

import numpy as np
import numpy.typing as npt

__all__ = ["CyclicPoissonSampling"]

# The scheme's name in a blob's report (``Mechanism.report["sampling"]["scheme"]``).
SCHEME = "cyclic Poisson"

# The largest number of steps (a blob's steps are in 1..=2**32-1).
MAX_ITERATIONS = 2**32 - 1

# Relative tolerance of ``check`` on sampling_prob: the blob stores the f64 it was compiled
# with; this admits only q computed two ways (``batch * b / n`` vs ``batch / (n / b)``).
PROB_RTOL = 1e-12

_TWO_64 = 2**64


def _integer(name: str, value: Any, low: int, high: Optional[int] = None, why: str = "") -> int:
    """``value`` as an int in ``low..=high``: ``TypeError`` for a non-integer (``bool``
    included), ``ValueError`` naming ``name``, the value and the range otherwise."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name}={value!r}: expected an integer, got {type(value).__name__}")
    value = operator.index(value)
    if value < low or (high is not None and value > high):
        allowed = f"in {low}..={high}" if high is not None else f">= {low}"
        raise ValueError(f"{name}={value}: expected an integer {allowed}{why}")
    return value


def _probability(name: str, value: Any) -> float:
    """``value`` as a float in (0, 1] (``TypeError`` for a non-number, ``bool`` included)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        kind = type(value).__name__
        raise TypeError(f"{name}={value!r}: expected a number in (0, 1], got {kind}")
    q = float(value)
    if not 0.0 < q <= 1.0:  # NaN fails too
        raise ValueError(f"{name}={value!r}: expected a number in (0, 1]")
    return q


class CyclicPoissonSampling:
    """Cyclic Poisson sampling (Choquette-Choo et al., NeurIPS 2023, Algorithm 2), the scheme
    amplified BandMF and DP-SGD are accounted for.

    ``num_examples`` (N >= 1) examples, indexed ``0..N-1``, are assigned to ``cycle_length``
    (b̂, ``1 <= b̂ <= iterations``) groups; of the ``iterations`` steps (at most 2**32 - 1),
    step ``i`` (``0 <= i < iterations``) includes each example of group ``i mod b̂``
    independently with probability ``sampling_prob`` (q in (0, 1]) and no other example. Each example's group is drawn
    uniformly at random and independently of every other example (jax_privacy's
    ``PartitionType.INDEPENDENT``): this is what the accounting assumes under add-remove
    neighbours, since adding or removing one example leaves the others' groups as they were. A
    shuffle split into equal groups (jax_privacy's ``EQUAL_SPLIT``, its default) couples the
    groups of different examples, is not what mfc accounts for and is not offered; neither is
    truncating batches (``truncated_batch_size``), which changes the accounting too.

    Batches are Poisson-sized: ``expected_batch_size`` is ``q * N / b̂`` and a batch may be
    empty. Take every step, an empty batch included (the step still adds its noise), and
    normalize a batch's clipped-gradient sum by ``expected_batch_size``, never by its own size.

    Everything is a function of ``seed`` (a non-negative integer; ``None`` draws 128 bits of OS
    entropy, then readable as ``seed``): ``batch(step)`` draws any step without the ones before
    it, and a restarted loop with the same seed draws the same batches. Amplification rests on
    the batches being secret: keep the seed as secret as the data (it is left out of ``repr``),
    and never use a fixed, known seed outside simulations.

    The draws use integer arithmetic on the raw outputs of numpy's ``Philox`` (Philox4x64-10,
    a fixed algorithm, as ``SeedSequence`` is; no ``Generator`` method, whose streams numpy may
    change), with ``key = SeedSequence(seed).generate_state(2, uint64)``: the groups
    are the raw 64-bit outputs ``r`` of Philox with that key and counter ``(0, 0, 0, 0)``, in
    order, ``r mod b̂`` for each ``r < 2**64 - (2**64 mod b̂)`` (the others rejected, so the
    groups are exactly uniform and example j's group depends on the seed and j only); step i
    uses the outputs of counter ``(0, 0, i, 1)``, one per member of its group in increasing
    index order, and includes a member when its output is below ``floor(q * 2**64)`` (every
    member when q = 1): probability exactly q for q >= 2**-12, within 2**-64 below it otherwise.

    ``check(mechanism)`` refuses a compiled ``mfc.Mechanism`` whose recorded sampling scheme is
    not this one. Memory: about 16 bytes per example."""

    def __init__(
        self,
        num_examples: int,
        sampling_prob: float,
        iterations: int,
        *,
        cycle_length: int = 1,
        seed: Optional[int] = None,
    ) -> None:
        self._num_examples = _integer("num_examples", num_examples, 1)
        self._sampling_prob = _probability("sampling_prob", sampling_prob)
        self._iterations = _integer("iterations", iterations, 1, MAX_ITERATIONS)
        self._cycle_length = _integer(
            "cycle_length", cycle_length, 1, self._iterations,
            f" (1 <= cycle_length <= iterations={self._iterations})",
        )
        if seed is None:
            seed = np.random.SeedSequence().entropy
        else:
            seed = _integer("seed", seed, 0, why=" (or None for OS entropy)")
        self._seed = int(seed)

        key = np.random.SeedSequence(self._seed).generate_state(2, np.uint64)
        self._philox = np.random.Philox(key=key, counter=np.zeros(4, np.uint64))
        self._state = self._philox.state
        self._lock = threading.Lock()

        groups = self._draw_groups()
        groups.flags.writeable = False
        self._groups = groups
        # The members of group g, in increasing index order: _order[_offsets[g]:_offsets[g+1]].
        self._order = np.argsort(groups, kind="stable").astype(np.int64, copy=False)
        sizes = np.bincount(groups, minlength=self._cycle_length)
        self._offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        q = self._sampling_prob
        self._threshold = None if q == 1.0 else np.uint64(math.floor(q * 2.0**64))

    def _stream(self, counter: tuple[int, int, int, int]) -> np.random.Philox:
        """The shared Philox at ``counter`` with an empty buffer: the same stream as
        ``Philox(key=key, counter=counter)``. Call with the lock held."""
        state = self._state
        state["state"]["counter"][:] = counter
        state["buffer_pos"] = 4
        state["has_uint32"] = 0
        state["uinteger"] = 0
        self._philox.state = state
        return self._philox

    def _draw_groups(self) -> npt.NDArray[np.int64]:
        b = self._cycle_length
        n = self._num_examples
        limit = _TWO_64 - _TWO_64 % b
        with self._lock:
            philox = self._stream((0, 0, 0, 0))
            raw = philox.random_raw(n)
            if limit < _TWO_64:
                accepted = raw[raw < np.uint64(limit)]
                while accepted.size < n:
                    more = philox.random_raw(n - accepted.size)
                    accepted = np.concatenate((accepted, more[more < np.uint64(limit)]))
                raw = accepted
        return (raw % np.uint64(b)).astype(np.int64)

    @property
    def num_examples(self) -> int:
        """N, the number of examples (indexed ``0..N-1``)."""
        return self._num_examples

    @property
    def sampling_prob(self) -> float:
        """q, the probability with which each example of the step's group is in its batch."""
        return self._sampling_prob

    @property
    def iterations(self) -> int:
        """The number of steps (batches)."""
        return self._iterations

    @property
    def cycle_length(self) -> int:
        """b̂, the number of groups (the encoder's bands); 1 is DP-SGD."""
        return self._cycle_length

    @property
    def seed(self) -> int:
        """The seed every draw derives from (the OS entropy drawn when none was given): keep
        it secret, as the batches it determines."""
        return self._seed

    @property
    def expected_batch_size(self) -> float:
        """``q * N / b̂``: the expected batch size over the random groups (a step's batch has
        expectation ``q`` times its group's size)."""
        return self._sampling_prob * self._num_examples / self._cycle_length

    @property
    def groups(self) -> npt.NDArray[np.int64]:
        """The group (in ``0..b̂-1``) of each example, a read-only int64 array of length N."""
        return self._groups.view()  # a view of a read-only array cannot be made writeable

    @property
    def scheme(self) -> dict[str, Any]:
        """This sampler as a blob records its scheme (``Mechanism.report["sampling"]``)."""
        return {
            "scheme": SCHEME,
            "cycle_length": self._cycle_length,
            "sampling_prob": self._sampling_prob,
            "iterations": self._iterations,
        }

    def group_of(self, example: int) -> int:
        """The group of example ``example`` (``0 <= example < num_examples``)."""
        example = _integer("example", example, 0, self._num_examples - 1)
        return int(self._groups[example])

    def batch(self, step: int) -> npt.NDArray[np.int64]:
        """The batch of step ``step`` (``0 <= step < iterations``): the sorted int64 indices of
        the examples drawn, a fresh array, possibly empty. A function of (seed, step) only."""
        step = _integer("step", step, 0, self._iterations - 1)
        g = step % self._cycle_length
        members = self._order[self._offsets[g] : self._offsets[g + 1]]
        if self._threshold is None:
            return members.copy()
        with self._lock:
            raw = self._stream((0, 0, step, 1)).random_raw(members.size)
        return members[raw < self._threshold]

    def __iter__(self) -> Iterator[npt.NDArray[np.int64]]:
        """The batches of steps ``0, 1, ..., iterations - 1``, as ``batch``."""
        for step in range(self._iterations):
            yield self.batch(step)

    def __len__(self) -> int:
        return self._iterations

    def check(self, mechanism: Any) -> None:
        """Refuses (``ValueError`` naming the mechanism's value and this sampler's) a compiled
        mechanism whose ``report["sampling"]`` is not this sampler's scheme: a blob without
        sampling (its noise is not accounted for amplification), another scheme, another
        ``cycle_length``, another ``sampling_prob`` (beyond a relative 1e-12) or fewer steps
        than ``iterations`` (more steps are fine: the sampler then stops early). ``TypeError``
        if ``mechanism`` has no ``report`` dict."""
        report = getattr(mechanism, "report", None)
        if not isinstance(report, Mapping):
            raise TypeError(
                f"check: expected an mfc.Mechanism (with a report dict), got "
                f"{type(mechanism).__name__}"
            )
        mine = (
            f"this sampler draws {SCHEME} sampling with cycle_length={self._cycle_length}, "
            f"sampling_prob={self._sampling_prob!r}, iterations={self._iterations}"
        )
        recorded = report.get("sampling")
        if recorded is None:
            raise ValueError(
                "sampling: the mechanism records none (its noise is not accounted for "
                f"amplification by sampling); {mine}"
            )
        if not isinstance(recorded, Mapping):
            raise ValueError(f"sampling: the mechanism records {recorded!r}, not a scheme; {mine}")

        mismatches = []
        scheme = recorded.get("scheme")
        if scheme != SCHEME:
            mismatches.append(f"scheme: the mechanism's {scheme!r}, this sampler's {SCHEME!r}")
        cycle_length = recorded.get("cycle_length")
        if cycle_length != self._cycle_length:
            mismatches.append(
                f"cycle_length: the mechanism's {cycle_length!r}, this sampler's "
                f"{self._cycle_length}"
            )
        q = recorded.get("sampling_prob")
        if not (
            isinstance(q, numbers.Real)
            and not isinstance(q, bool)
            and self._sampling_prob <= float(q)  # never above what the blob accounts
            and math.isclose(float(q), self._sampling_prob, rel_tol=PROB_RTOL, abs_tol=0.0)
        ):
            mismatches.append(
                f"sampling_prob: the mechanism's {q!r}, this sampler's {self._sampling_prob!r}"
            )
        steps = recorded.get("iterations", report.get("steps"))
        if not (
            isinstance(steps, numbers.Integral)
            and not isinstance(steps, bool)
            and steps >= self._iterations
        ):
            mismatches.append(
                f"iterations: the mechanism's {steps!r} steps, this sampler's "
                f"{self._iterations} (its steps past the mechanism's are not accounted)"
            )
        if mismatches:
            raise ValueError(
                "the mechanism's sampling scheme is not this sampler's: " + "; ".join(mismatches)
            )

    def __repr__(self) -> str:
        # The seed is left out: it determines the batches, which must stay secret.
        return (
            f"CyclicPoissonSampling(num_examples={self._num_examples}, "
            f"sampling_prob={self._sampling_prob!r}, iterations={self._iterations}, "
            f"cycle_length={self._cycle_length})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (
                self._num_examples,
                self._sampling_prob,
                self._iterations,
                self._cycle_length,
                self._seed,
            ),
        )


def _rebuild(
    num_examples: int, sampling_prob: float, iterations: int, cycle_length: int, seed: int
) -> CyclicPoissonSampling:
    """Unpickles a sampler: the same draws, rebuilt from its parameters and seed."""
    return CyclicPoissonSampling(
        num_examples, sampling_prob, iterations, cycle_length=cycle_length, seed=seed
    )
