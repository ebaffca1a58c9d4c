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
                  one_at_a_time=False, state=None):
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
    """One rank of a data-parallel run (``torch.multiprocessing.spawn``). ``plan``: ``("train",
    steps)`` from scratch; ``("resume", checkpoint_prefix, saved_world, first, last)`` restores
    the checkpoint of rank ``rank % saved_world`` and its model and trains steps first..last;
    ``("save", prefix, steps)``
    trains and saves. Writes the final flat parameters (or the refusal's message) to
    ``out.<rank>``."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        mechanism = mfc.Mechanism.from_bytes(blob)
        net = model()
        opt = DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=LR), mechanism,
                              expected_batch_size=expected_batch_size, seed=seed,
                              distributed=True)
        first, last = 0, plan[-1]
        if plan[0] == "resume":
            first = plan[3]
            saved = torch.load(f"{plan[1]}.{rank % plan[2]}", weights_only=False)
            try:
                opt.load_state_dict(saved["optimizer"])
            except ValueError as refusal:
                torch.save(str(refusal), f"{out}.{rank}")
                return
            net.load_state_dict(saved["model"])
        for x, y in data[first:last]:
            xl, yl = local_slice(x, y, world, rank)
            opt.zero_grad()
            opt.step(grad_samples=per_example_grads(net, xl, yl, one_at_a_time=True))
        if plan[0] == "save":
            torch.save({"optimizer": opt.state_dict(), "model": net.state_dict()},
                       f"{plan[1]}.{rank}")
        torch.save(torch.cat([p.detach().reshape(-1) for p in net.parameters()]),
                   f"{out}.{rank}")
    finally:
        dist.destroy_process_group()
