"""PyTorch's front door to mfc: ``DPFTRLOptimizer`` wraps any ``torch.optim.Optimizer`` (as
Opacus' ``DPOptimizer`` does) and trains with DP-FTRL or BandMF, the correlated noise replayed
by the runtime a device runs, in one process or data-parallel under ``torch.distributed``.

Each step takes the batch's per-sample gradients (``p.grad_sample`` from Opacus'
``GradSampleModule``, or passed to ``step(grad_samples=...)`` by ``torch.func`` users),
flattens each example over the parameters in their order into one row of the ``(m, D)`` float32
examples, and hands them to ``mfc.GradientPrivatizer``: the runtime clips each *whole* example
to the blob's ``ζ`` and adds this step's correlated noise (``mfc.training``). ``ĝ`` divided by
``expected_batch_size`` (float32, Opacus' ``loss_reduction="mean"``) becomes ``p.grad`` and the
wrapped optimizer steps: plain SGD for a prefix-sum blob (DP-FTRL), SGD with the blob's momentum
``β`` (and its learning-rate schedule) for a ``momentum:β`` BandMF blob. The unit of privacy is
one example (one row of a per-sample gradient, all parameters together), each clipped to ``ζ``,
under the blob's participation schema and neighbouring relation (``privacy``); σ and ζ are the
blob's (``noise_multiplier=`` may raise σ, as ``mfc.Stream`` allows, and ``max_grad_norm=``
must equal ζ).

Choices. Tensors enter without a copy (``as_array``): a CPU float32 tensor becomes a numpy view
of its storage with its strides, so a column-major or sliced tensor is a strided view that
``mfc.Stream`` copies in logical order; another dtype, device or layout is refused naming the
conversion. Data-parallel (``distributed=True``): rank ``r`` of ``W`` owns the contiguous
coordinates ``numpy.array_split`` gives it and opens the shard ``Stream(..., shard=(start, end))``
from the common seed; each step the ranks exchange their examples' clip factors and coordinate
slices (in rank order, so the global batch is rank 0's examples, then rank 1's, ...), each
privatizes its slice of ``ĝ``, and an all-gather assembles ``ĝ``: the update equals the single
process's over the same global batch bit for bit. The ranks exchange raw per-example gradients
(one trust domain, as any data-parallel engine). A checkpoint records the world size, rank and
shard; restoring it on another world size or rank is refused (``ValueError``).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt
import torch

from ._mfc import Mechanism, Stream
from .training import GradientPrivatizer, _workload_momentum

__all__ = ["DPFTRLOptimizer", "as_array", "flatten_grad_samples", "shard_bounds"]

def _check_tensor(tensor: Any, name: str) -> torch.Tensor:
    """``tensor`` if it is a strided CPU float32 tensor, else the refusal naming the fix."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.layout != torch.strided:
        raise TypeError(
            f"{name}: layout {tensor.layout}; expected a dense (strided) tensor "
            "(convert with .to_dense())"
        )
    if tensor.dtype != torch.float32:
        raise TypeError(
            f"{name}: dtype {tensor.dtype}; expected torch.float32 (convert with .float())"
        )
    if tensor.device.type != "cpu":
        raise ValueError(
            f"{name}: on device {tensor.device}; expected a CPU tensor (move it with .cpu())"
        )
    return tensor


def as_array(tensor: torch.Tensor, name: str = "tensor") -> npt.NDArray[np.float32]:
    """A CPU float32 tensor as a numpy array sharing its memory (no copy), strides kept: a
    column-major, transposed or sliced tensor is a strided view, which ``mfc.Stream`` reads in
    logical order. The tensor is detached first (autograd is not involved); a negated view
    (``_neg_view``) is resolved, the only case that copies. Another dtype: ``TypeError`` naming
    ``.float()``; another device: ``ValueError`` naming ``.cpu()``; a sparse layout:
    ``TypeError`` naming ``.to_dense()``. ``tensor``: the tensor; ``name``: how refusals name
    it (default ``"tensor"``)."""
    tensor = _check_tensor(tensor, name).detach().resolve_neg()
    return tensor.numpy()


def flatten_grad_samples(
    grad_samples: Sequence[torch.Tensor], params: Optional[Sequence[torch.Tensor]] = None
) -> npt.NDArray[np.float32]:
    """The ``(m, D)`` float32 examples of one step: row ``e`` is example ``e``'s gradient over
    every parameter, in the given order (each flattened in row-major order), so that the
    runtime clips the whole example. ``grad_samples``: one ``(m, *p.shape)`` tensor per
    parameter (a list of them, as Opacus accumulates, is concatenated along the examples).
    A single parameter's contiguous per-sample gradient is used without a copy. ``params``
    (optional): the parameters, to check each ``grad_samples`` entry's shape against."""
    flat = []
    m = None
    for i, g in enumerate(grad_samples):
        if isinstance(g, (list, tuple)):
            for j, part in enumerate(g):
                _check_tensor(part, f"grad_samples[{i}][{j}]")
            g = torch.cat(list(g), dim=0) if len(g) > 0 else None
            if g is None:
                raise ValueError(f"grad_samples[{i}]: an empty list")
        g = _check_tensor(g, f"grad_samples[{i}]").detach()
        if g.dim() < 1:
            raise ValueError(f"grad_samples[{i}]: a 0-d tensor; expected (m, *param.shape)")
        if params is not None and tuple(g.shape[1:]) != tuple(params[i].shape):
            raise ValueError(
                f"grad_samples[{i}]: shape {tuple(g.shape)}; expected (m, "
                f"{', '.join(map(str, params[i].shape))}) for parameter {i}"
            )
        if m is None:
            m = g.shape[0]
        elif g.shape[0] != m:
            raise ValueError(
                f"grad_samples[{i}]: {g.shape[0]} examples, grad_samples[0] has {m}; every "
                "parameter's per-sample gradient has one row per example"
            )
        flat.append(g.reshape(g.shape[0], math.prod(g.shape[1:])))
    if not flat:
        raise ValueError("grad_samples: no parameters")
    examples = flat[0] if len(flat) == 1 else torch.cat(flat, dim=1)
    return as_array(examples, "grad_samples")


def shard_bounds(dim: int, world_size: int) -> list[tuple[int, int]]:
    """The contiguous coordinate ranges ``(start, end)`` of ``world_size`` ranks over ``dim``
    coordinates, as ``numpy.array_split`` splits them (the first ``dim % world_size`` ranks
    have one more)."""
    if world_size < 1 or world_size > dim:
        raise ValueError(
            f"world_size={world_size}: expected 1..={dim} (one coordinate at least per rank)"
        )
    size, extra = divmod(dim, world_size)
    bounds = []
    start = 0
    for r in range(world_size):
        end = start + size + (1 if r < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def _is_opacus_dp_optimizer(optimizer: Any) -> bool:
    """Whether ``optimizer`` is one of Opacus' ``DPOptimizer`` classes (which clip and noise
    ``p.grad_sample`` themselves in ``step``), without importing Opacus."""
    return any(
        cls.__module__.startswith("opacus.") and cls.__name__ == "DPOptimizer"
        for cls in type(optimizer).__mro__
    )


class DPFTRLOptimizer(torch.optim.Optimizer):
    """DP-FTRL / BandMF around ``optimizer`` (see the module): ``step()`` privatizes the
    per-sample gradients with ``mechanism``'s correlated noise and steps ``optimizer``.

    ``mechanism``: the compiled blob (``mfc.compile`` / ``Mechanism.load``); the optimizer opens
    its ``Stream`` over the parameters' ``D`` coordinates (a shard of them with
    ``distributed=True``) with ``seed`` (32 bytes or 64 hex digits; OS entropy when absent,
    which a distributed run and a restart cannot share, so ``distributed=True`` requires it)
    and the stream's keywords ``noise_multiplier`` (above the blob's σ, or below it with
    ``allow_lower_noise=True``), ``allow_unverified`` and ``sampler``.

    ``expected_batch_size``: what ``ĝ`` is divided by with ``loss_reduction="mean"`` (Opacus'
    meaning: under Poisson sampling the batch's size varies; data-parallel, the global batch's).
    ``max_grad_norm``: optional, must equal the blob's ``clip_norm`` (the runtime clips to it).
    ``distributed``: shard the noise over the ranks of ``process_group`` (default group).

    A ``momentum:β`` blob expects ``torch.optim.SGD`` with ``momentum=β`` (and the blob's
    learning-rate schedule); another momentum, dampening or Nesterov gives a ``UserWarning``:
    still private (post-processing), not the error the blob was optimized for. So does an
    optimizer other than ``torch.optim.SGD`` (Adam, ...) for a prefix-sum or ``momentum:β``
    blob. An Opacus ``DPOptimizer`` (``PrivacyEngine.make_private``) is refused
    (``TypeError``): it clips and noises ``p.grad_sample`` itself and would overwrite mfc's
    noisy gradient; wrap its ``original_optimizer`` and keep the ``GradSampleModule``.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        mechanism: Mechanism,
        *,
        expected_batch_size: Optional[float],
        seed: Union[bytes, str, None] = None,
        loss_reduction: str = "mean",
        max_grad_norm: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
        allow_lower_noise: bool = False,
        allow_unverified: bool = False,
        sampler: Optional[Any] = None,
        distributed: bool = False,
        process_group: Optional[Any] = None,
    ) -> None:
        # Like Opacus' DPOptimizer, a torch.optim.Optimizer (schedulers accept it) whose
        # param_groups, state and defaults are the wrapped optimizer's.
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}"
            )
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism: expected an mfc.Mechanism, got {type(mechanism).__name__}")
        if _is_opacus_dp_optimizer(optimizer):
            raise TypeError(
                f"optimizer: an Opacus {type(optimizer).__name__} (from "
                "PrivacyEngine.make_private) clips and adds its own noise and would overwrite mfc's noisy gradient; wrap its "
                "plain optimizer instead (optimizer.original_optimizer) and keep the model in "
                "opacus.GradSampleModule (make_private is not needed)"
            )
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"loss_reduction={loss_reduction!r}: expected 'mean' or 'sum'")
        if loss_reduction == "mean":
            if (
                not isinstance(expected_batch_size, numbers.Real)
                or isinstance(expected_batch_size, bool)
                or not math.isfinite(expected_batch_size)
                or expected_batch_size <= 0
            ):
                raise ValueError(
                    f"expected_batch_size={expected_batch_size!r}: expected a finite number > 0 "
                    "(required by loss_reduction='mean')"
                )
        self.original_optimizer = optimizer
        self.expected_batch_size = expected_batch_size
        self.loss_reduction = loss_reduction
        self.mechanism = mechanism
        params = self.params
        if not params:
            raise ValueError("optimizer: no parameter requires a gradient")
        self.dim = sum(p.numel() for p in params)
        clip_norm = float(mechanism.report["clip_norm"])
        if max_grad_norm is not None and float(max_grad_norm) != clip_norm:
            raise ValueError(
                f"max_grad_norm={max_grad_norm!r}: the blob clips to clip_norm={clip_norm!r} "
                "(its sensitivity is for it); compile the blob with clip_norm= instead"
            )
        self.max_grad_norm = clip_norm

        self.distributed = bool(distributed)
        self.process_group = process_group
        if self.distributed:
            if seed is None:
                raise ValueError(
                    "seed=None: distributed=True needs the one seed every rank shares "
                    "(32 bytes or 64 hex digits, drawn once and kept secret)"
                )
            import torch.distributed as dist

            if not dist.is_available() or not dist.is_initialized():
                raise ValueError(
                    "distributed=True: torch.distributed is not initialized "
                    "(call torch.distributed.init_process_group first)"
                )
            self.world_size = dist.get_world_size(process_group)
            self.rank = dist.get_rank(process_group)
            self.bounds = shard_bounds(self.dim, self.world_size)
            shard: Optional[tuple[int, int]] = self.bounds[self.rank]
        else:
            self.world_size, self.rank, self.bounds, shard = 1, 0, [(0, self.dim)], None
        stream = Stream(
            mechanism,
            self.dim,
            seed,
            shard=shard,
            noise_multiplier=noise_multiplier,
            allow_lower_noise=allow_lower_noise,
            allow_unverified=allow_unverified,
            sampler=sampler,
        )
        self.privatizer = GradientPrivatizer(stream)
        self._seeded = seed is not None
        self._check_momentum()

    # --- the wrapped optimizer's state, as Opacus' DPOptimizer exposes it -------------------

    @property
    def param_groups(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The wrapped optimizer's ``param_groups`` (a scheduler's changes reach it)."""
        return self.original_optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value: list[dict[str, Any]]) -> None:
        self.original_optimizer.param_groups = value

    @property
    def state(self) -> Any:  # type: ignore[override]
        """The wrapped optimizer's ``state``."""
        return self.original_optimizer.state

    @state.setter
    def state(self, value: Any) -> None:
        self.original_optimizer.state = value

    @property
    def defaults(self) -> dict[str, Any]:  # type: ignore[override]
        """The wrapped optimizer's ``defaults``."""
        return self.original_optimizer.defaults

    @defaults.setter
    def defaults(self, value: dict[str, Any]) -> None:
        self.original_optimizer.defaults = value

    @property
    def params(self) -> list[torch.Tensor]:
        """The parameters that require a gradient, in the wrapped optimizer's order: the
        order of the coordinates of each example."""
        return [p for group in self.param_groups for p in group["params"] if p.requires_grad]

    @property
    def stream(self) -> Stream:
        """The stream the noise comes from (a shard's, data-parallel)."""
        return self.privatizer.stream

    @property
    def privacy(self) -> dict[str, Any]:
        """What the releases guarantee (``mfc.Stream.privacy``): ``epsilon``, ``delta``,
        ``noise_multiplier``, ``privacy_unit``, ``participation``, ``statement``, ..."""
        return self.stream.privacy

    @property
    def steps_released(self) -> int:
        """Steps privatized so far."""
        return self.privatizer.steps_released

    def __repr__(self) -> str:
        return f"DPFTRLOptimizer({self.original_optimizer!r})"

    def _check_momentum(self) -> None:
        beta = _workload_momentum(self.mechanism)
        workload = (
            "the prefix sum (DP-FTRL: plain SGD)"
            if beta is None
            else f"momentum:{beta} (heavy-ball momentum {beta})"
        )
        if not isinstance(self.original_optimizer, torch.optim.SGD):
            if self.privatizer.stream.releases_prefix_sums or beta is not None:
                warnings.warn(
                    f"the blob's workload is {workload}, the wrapped optimizer is "
                    f"{type(self.original_optimizer).__name__}: still private (post-processing), "
                    "but not the workload the noise was optimized for "
                    f"(use torch.optim.SGD(momentum={0.0 if beta is None else beta}))",
                    UserWarning,
                    stacklevel=3,
                )
            return
        if beta is None:
            return  # DP-FTRL with or without momentum (Kairouz et al. 2021): either is usual
        for i, group in enumerate(self.param_groups):
            momentum = group.get("momentum", 0.0)
            dampening = group.get("dampening", 0.0)
            nesterov = group.get("nesterov", False)
            if momentum != beta or dampening != 0 or nesterov:
                warnings.warn(
                    f"the blob's workload is {workload}, the "
                    f"SGD's param_groups[{i}] has momentum={momentum}, dampening={dampening}, "
                    f"nesterov={nesterov}: still private (post-processing), but not the "
                    f"workload the noise was optimized for (use SGD(momentum={beta}))",
                    UserWarning,
                    stacklevel=3,
                )

    # --- the step --------------------------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears ``p.grad`` (the wrapped optimizer's ``zero_grad``) and ``p.grad_sample``.
        ``set_to_none``: passed to the wrapped optimizer (default ``True``: ``p.grad`` becomes
        ``None`` rather than zeros)."""
        for p in self.params:
            p.grad_sample = None
        self.original_optimizer.zero_grad(set_to_none)

    def _grad_samples(self) -> list[Any]:
        found = []
        for i, p in enumerate(self.params):
            g = getattr(p, "grad_sample", None)
            if g is None:
                raise ValueError(
                    f"parameter {i} (shape {tuple(p.shape)}) has no grad_sample: wrap the model "
                    "in opacus.GradSampleModule, or pass step(grad_samples=...)"
                )
            found.append(g)
        return found

    def privatize(
        self, grad_samples: Optional[Sequence[torch.Tensor]] = None
    ) -> npt.NDArray[np.float32]:
        """``ĝ`` of this step, ``(D,)`` float32, not yet divided by the batch size (the runtime
        step; ``step`` calls it). Data-parallel, every rank calls it with its own examples.
        ``grad_samples``: one ``(m, *p.shape)`` tensor per parameter in the optimizer's order
        (default: each parameter's ``p.grad_sample``, which it consumes)."""
        params = self.params
        given = self._grad_samples() if grad_samples is None else list(grad_samples)
        if len(given) != len(params):
            raise ValueError(
                f"grad_samples: {len(given)} tensors for {len(params)} parameters; expected one "
                "(m, *p.shape) tensor per parameter, in the optimizer's order"
            )
        examples = flatten_grad_samples(given, params)
        if not self.distributed:
            return self.privatizer.privatize(examples)
        return self._privatize_distributed(examples)

    def _privatize_distributed(self, examples: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        import torch.distributed as dist

        from ._mfc import clip_factors

        group, world, rank = self.process_group, self.world_size, self.rank
        m = examples.shape[0]
        # How many examples each rank has this step (Poisson batches differ).
        counts_t = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(counts_t, torch.tensor([m], dtype=torch.int64), group=group)
        counts = [int(c.item()) for c in counts_t]
        most = max(counts)
        # Whole-row clip factors, the runtime's, of every example in rank order.
        local_factors = torch.zeros(most, dtype=torch.float32)
        if m:
            local_factors[:m] = torch.from_numpy(
                np.ascontiguousarray(clip_factors(examples, self.stream.clip_norm))
            )
        factors_t = [torch.empty(most, dtype=torch.float32) for _ in range(world)]
        dist.all_gather(factors_t, local_factors, group=group)
        factors = torch.cat([f[:c] for f, c in zip(factors_t, counts)]).numpy()
        # A factor of 0 is the runtime's for a row it refuses (a value not finite or beyond
        # the range clipping handles); any other row's is positive. Every rank sees every
        # factor, so all refuse here together, before any shard steps: a shard alone would
        # refuse only the rows whose bad coordinate it holds, and the other ranks' streams
        # would step without it (the ranks out of step, the collectives hung).
        refused = np.flatnonzero(factors == 0)
        if refused.size:
            e = int(refused[0])
            source = int(np.searchsorted(np.cumsum(counts), e, side="right"))
            raise ValueError(
                f"grad_samples: example {e - sum(counts[:source])} of rank {source} has a value "
                "that is not finite or too large to clip exactly (mfc.clip_factors gives it 0); "
                "every rank refuses the step, no stream changed"
            )
        # Rank q receives every example's coordinates bounds[q], the sources in rank order
        # (all_to_all_single with split sizes: gloo's all_to_all wants equal shapes).
        local = torch.from_numpy(np.ascontiguousarray(examples))
        send = torch.cat([local[:, s:e].reshape(-1) for s, e in self.bounds])
        start, end = self.bounds[rank]
        width = end - start
        receive = torch.empty(sum(counts) * width, dtype=torch.float32)
        dist.all_to_all_single(
            receive,
            send,
            output_split_sizes=[c * width for c in counts],
            input_split_sizes=[m * (e - s) for s, e in self.bounds],
            group=group,
        )
        slices = receive.reshape(sum(counts), width).numpy()
        mine = self.privatizer.privatize(slices, clips=factors)
        # ĝ assembled from the ranks' slices (padded to the widest shard).
        widest = max(e - s for s, e in self.bounds)
        padded = torch.zeros(widest, dtype=torch.float32)
        padded[: end - start] = torch.from_numpy(mine)
        parts = [torch.empty(widest, dtype=torch.float32) for _ in range(world)]
        dist.all_gather(parts, padded, group=group)
        return torch.cat([part[: e - s] for part, (s, e) in zip(parts, self.bounds)]).numpy()

    def pre_step(self, grad_samples: Optional[Sequence[torch.Tensor]] = None) -> None:
        """Writes ``p.grad = ĝ / expected_batch_size`` (float32; ``ĝ`` itself with
        ``loss_reduction="sum"``) for every parameter, in their order. ``p.grad_sample`` (when
        ``grad_samples`` is not given) is cleared once privatized, so that no later step
        privatizes the same examples again."""
        noisy = self.privatize(grad_samples)
        if grad_samples is None:
            # Consumed: a later step must not privatize these examples again (a backward
            # without zero_grad would append to a stale grad_sample, and its examples would
            # join two steps, beyond the blob's participation schema).
            for p in self.params:
                p.grad_sample = None
        if self.loss_reduction == "mean":
            noisy = np.divide(noisy, np.float32(self.expected_batch_size), dtype=np.float32)
        flat = torch.from_numpy(np.ascontiguousarray(noisy))
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    def step(  # type: ignore[override]
        self,
        closure: Optional[Callable[[], float]] = None,
        *,
        grad_samples: Optional[Sequence[torch.Tensor]] = None,
    ) -> Optional[float]:
        """One private step: ``closure`` (if any, with gradients on), ``pre_step`` from
        ``p.grad_sample`` or ``grad_samples`` (one ``(m, *p.shape)`` tensor per parameter, in
        the optimizer's order; ``m = 0`` still adds the step's noise), then the wrapped
        optimizer's step. A refused batch (dtype, device, shape, non-finite value, finished
        stream) raises before any parameter changes."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.pre_step(grad_samples)
        self.original_optimizer.step()
        return loss

    # --- checkpoints -----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        """The wrapped optimizer's ``state_dict`` and, under ``"mfc"``, the privatizer's state
        (keep it secret: with the seed it reveals the running sum) with the world size, rank
        and shard."""
        return {
            "optimizer": self.original_optimizer.state_dict(),
            "mfc": {
                "privatizer": self.privatizer.state_dict(),
                "world_size": self.world_size,
                "rank": self.rank,
                "dim": self.dim,
            },
        }

    def load_state_dict(  # type: ignore[override]
        self, state_dict: Mapping[str, Any], *, released: Optional[int] = None
    ) -> None:
        """Continues from ``state_dict`` on this fresh optimizer (same mechanism and seed;
        an optimizer made with ``seed=None`` is refused, ``ValueError``: its stream is another).
        A checkpoint of another world size or rank is refused (``ValueError`` naming both):
        each rank's noise state is of its own shard. ``released`` (required; ``None`` is
        refused): the steps already released as kept in durable storage
        (``GradientPrivatizer.load_state_dict``), so that a stale checkpoint is refused rather
        than replayed."""
        if not self._seeded:
            raise ValueError(
                "load_state_dict: this optimizer was made with seed=None (OS entropy), and a "
                "checkpoint continues only the stream of the seed it was made with: make the "
                "optimizer with that seed= (to restart a run, draw its seed once, e.g. "
                "secrets.token_hex(32), and keep it as secret as the checkpoint)"
            )
        ours = state_dict["mfc"]
        for key, mine in (("world_size", self.world_size), ("rank", self.rank), ("dim", self.dim)):
            if ours.get(key) != mine:
                raise ValueError(
                    f"load_state_dict: the checkpoint is of {key}={ours.get(key)!r}, this "
                    f"optimizer's is {key}={mine!r}; restore it with {key}={ours.get(key)!r} "
                    "(a checkpoint's noise state is of its own shard, world_size and rank)"
                )
        self.privatizer.load_state_dict(ours["privatizer"], released=released)
        self.original_optimizer.load_state_dict(state_dict["optimizer"])
