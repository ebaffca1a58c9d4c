"""Training runs shared by ``test_torch.py`` and the processes it spawns (``torch.distributed``,
gloo): a small MLP, its per-example gradients (``torch.func``, one example at a time so that a
gradient's bits do not depend on how a batch is split over ranks), the hand-written reference
loop (``mfc.Stream.step_examples`` on numpy, differences of releases, the SGD or heavy-ball
update written out) and the data-parallel worker."""

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

import mfc
from mfc.torch import DPFTRLOptimizer

FEATURES, HIDDEN, CLASSES = 10, 16, 4
LR = 0.5


def model(seed=0):
    """The MLP (244 parameters), initialized from ``seed``."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, CLASSES)
    )


def batches(steps, sizes, seed=1):
    """``steps`` global batches ``(x, y)``, batch ``t`` of ``sizes[t % len(sizes)]`` examples."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in range(steps):
        m = sizes[t % len(sizes)]
        x = torch.randn(m, FEATURES, generator=g) * 3.0
        y = torch.randint(0, CLASSES, (m,), generator=g)
        out.append((x, y))
    return out


def per_example_grads(net, x, y, *, one_at_a_time=False):
    """One ``(m, *p.shape)`` tensor per parameter (``named_parameters`` order): ``torch.func``
    ``vmap(grad)``, or example by example (bits independent of the batch's split)."""
    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss(p, xe, ye):
        return F.cross_entropy(functional_call(net, p, (xe[None],)), ye[None])

    if x.shape[0] == 0:
        return [torch.zeros((0, *v.shape)) for v in params.values()]
    if one_at_a_time:
        rows = [grad(loss)(params, x[e], y[e]) for e in range(x.shape[0])]
        return [torch.stack([r[k] for r in rows]) for k in params]
    out = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    return [out[k] for k in params]


def reference_run(mechanism, seed, data, expected_batch_size, *, momentum=0.0, steps=None,
                  one_at_a_time=False):
    """The loop written by hand: per-example gradients flattened example by example, the
    unsharded ``Stream.step_examples`` (the runtime clips each example), ĝ the difference of
    consecutive releases (prefix-sum blob) or the release (BandMF momentum blob), divided by the
    expected batch size, and ``θ ← θ − lr·buf`` with ``buf ← β·buf + g`` (``buf = g`` without
    momentum). Returns the final parameters (flat)."""
    net = model()
    params = list(net.parameters())
    dim = sum(p.numel() for p in params)
    stream = mfc.Stream(mechanism, dim, seed)
    previous = np.zeros(dim, np.float32)
    buf = None
    for x, y in data[:steps]:
        grads = per_example_grads(net, x, y, one_at_a_time=one_at_a_time)
        rows = [torch.cat([g[e].reshape(-1) for g in grads]) for e in range(x.shape[0])]
        examples = (torch.stack(rows) if rows else torch.zeros((0, dim))).numpy()
        release = stream.step_examples(examples)
        if stream.releases_prefix_sums:
            noisy, previous = release - previous, release
        else:
            noisy = release
        g = torch.from_numpy(noisy / np.float32(expected_batch_size))
        if momentum:
            buf = g.clone() if buf is None else buf.mul(momentum).add(g)
        else:
            buf = g
        with torch.no_grad():
            offset = 0
            for p in params:
                n = p.numel()
                p.add_(buf[offset : offset + n].view_as(p), alpha=-LR)
                offset += n
    return torch.cat([p.detach().reshape(-1) for p in params])


def local_slice(x, y, world, rank):
    """Rank ``rank``'s examples of a global batch: contiguous, in rank order."""
    bounds = np.array_split(np.arange(x.shape[0]), world)[rank]
    lo, hi = (int(bounds[0]), int(bounds[-1]) + 1) if len(bounds) else (0, 0)
    return x[lo:hi], y[lo:hi]


def dist_worker(rank, world, init_file, blob, seed, data, expected_batch_size, out, plan):
    """One rank of a data-parallel run (``torch.multiprocessing``). ``plan`` (a dict):
    ``refuse``: ``(prefix, saved_world)``, first load the checkpoint of rank
    ``rank % saved_world`` and record the refusal (then train on, the optimizer untouched);
    ``resume``: ``(prefix, first)``, restore the rank's checkpoint and model of step ``first``;
    ``save``: ``(prefix, step)``, save them after ``step`` steps; ``last``: the steps to train
    up to; ``poison``: a step before which every rank first tries that step with rank 0's
    first example not finite in the last coordinate (the last rank's shard), recording the
    refusal and the steps released after it (then trains on). Writes ``{"params": flat
    parameters, "refusal": message or None, "poisoned": (message, steps) or None}`` to
    ``out.<rank>``."""
    import datetime

    import torch.distributed as dist

    torch.set_num_threads(1)
    # A rank out of step with the others fails the run within a minute instead of hanging.
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        mechanism = mfc.Mechanism.from_bytes(blob)
        net = model()
        opt = DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=LR), mechanism,
                              expected_batch_size=expected_batch_size, seed=seed,
                              distributed=True)
        first, refusal, poisoned = 0, None, None
        if "refuse" in plan:
            prefix, saved_world = plan["refuse"]
            saved = torch.load(f"{prefix}.{rank % saved_world}", weights_only=False)
            try:
                opt.load_state_dict(saved["optimizer"])
                refusal = "accepted"
            except ValueError as error:
                refusal = str(error)
        if "resume" in plan:
            prefix, first = plan["resume"]
            saved = torch.load(f"{prefix}.{rank}", weights_only=False)
            opt.load_state_dict(saved["optimizer"], released=first)
            net.load_state_dict(saved["model"])
        for t in range(first, plan["last"]):
            x, y = local_slice(*data[t], world, rank)
            if plan.get("poison") == t:
                grads = [g.clone() for g in per_example_grads(net, x, y, one_at_a_time=True)]
                if rank == 0:
                    grads[-1].reshape(grads[-1].shape[0], -1)[0, -1] = float("nan")
                try:
                    opt.step(grad_samples=grads)
                    poisoned = ("accepted", opt.steps_released)
                except Exception as error:  # noqa: BLE001 (recorded: the test checks it)
                    poisoned = (f"{type(error).__name__}: {error}", opt.steps_released)
            opt.zero_grad()
            opt.step(grad_samples=per_example_grads(net, x, y, one_at_a_time=True))
            if "save" in plan and t + 1 == plan["save"][1]:
                torch.save({"optimizer": opt.state_dict(), "model": net.state_dict()},
                           f"{plan['save'][0]}.{rank}")
        params = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
        torch.save({"params": params, "refusal": refusal, "poisoned": poisoned},
                   f"{out}.{rank}")
    finally:
        dist.destroy_process_group()
