"""``mfc.torch`` (issue 30): tensors at the door without a copy and in logical order, the
``DPFTRLOptimizer`` against the loop written by hand on ``mfc.Stream`` (bit for bit, 20 steps,
a prefix-sum blob and a BandMF momentum blob, with ``torch.func`` and with Opacus'
``GradSampleModule``), and data-parallel runs under ``torch.distributed`` (gloo, 2 and 4
processes) equal to the single process bit for bit, with their checkpoints."""

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

import torch.multiprocessing as tmp  # noqa: E402

import mfc  # noqa: E402
import mfc.torch as mt  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import torch_runs as runs  # noqa: E402

SEED = "0f" * 32
BATCH = 6


@pytest.fixture(scope="module")
def blobs():
    return {
        "prefix-banded": mfc.compile(steps=24, band=3, rank=2, epsilon=2.0, delta=1e-6),
        "bandmf-momentum": mfc.compile(
            steps=24, form="bandmf", bands=2, workload="momentum:0.9", epsilon=2.0, delta=1e-6
        ),
    }


# --- tensors at the door ---------------------------------------------------------------------


def release_of(x, *, via_torch):
    stream = mfc.Stream(mfc.compile(steps=4, band=2, rank=1, epsilon=2.0, delta=1e-6), 5,
                        SEED)
    return stream.step_examples(mt.as_array(x) if via_torch else x)


def test_as_array_shares_memory_and_keeps_strides():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).requires_grad_()
    a = mt.as_array(t)
    assert a.dtype == np.float32 and a.shape == (3, 4)
    assert np.shares_memory(a, t.detach().numpy())
    assert a.__array_interface__["data"][0] == t.data_ptr()
    col = t.detach().t().contiguous().t()  # column-major
    b = mt.as_array(col)
    assert b.__array_interface__["data"][0] == col.data_ptr()
    assert b.strides == (4, 12) and np.array_equal(b, t.detach().numpy())


def test_layouts_release_as_the_contiguous_copy():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 5, generator=g) * 2
    expected = release_of(x.contiguous().numpy().copy(), via_torch=False)
    wide = torch.randn(7, 9, generator=g)
    wide[:, 2:7] = x
    layouts = {
        "column-major": x.t().contiguous().t(),
        "transposed": wide.t().contiguous()[2:7].t(),
        "sliced": wide[:, 2:7],
        "every other row": torch.stack([x, x], dim=1).reshape(14, 5)[::2],
    }
    for name, t in layouts.items():
        assert torch.equal(t, x), name
        got = release_of(t, via_torch=True)
        assert np.array_equal(got, expected), name


def test_refusals_name_the_conversion():
    with pytest.raises(TypeError, match=r"torch.float64.*\.float\(\)"):
        mt.as_array(torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"torch.float16.*\.float\(\)"):
        mt.as_array(torch.zeros(2, 3, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"device meta.*\.cpu\(\)"):
        mt.as_array(torch.zeros(2, 3, device="meta"))
    with pytest.raises(TypeError, match=r"sparse_coo.*\.to_dense\(\)"):
        mt.as_array(torch.zeros(2, 3).to_sparse())
    with pytest.raises(TypeError, match="expected a torch.Tensor, got ndarray"):
        mt.as_array(np.zeros((2, 3), np.float32))


# --- the optimizer against the loop written by hand ------------------------------------------


def optimizer_run(mechanism, data, *, momentum=0.0, opacus_module=False, steps=20):
    net = runs.model()
    sgd = torch.optim.SGD(net.parameters(), lr=runs.LR, momentum=momentum)
    if opacus_module:
        net = opacus.GradSampleModule(net, loss_reduction="sum")
    opt = mt.DPFTRLOptimizer(sgd, mechanism, expected_batch_size=BATCH, seed=SEED)
    for x, y in data[:steps]:
        opt.zero_grad()
        if opacus_module:
            torch.nn.functional.cross_entropy(net(x), y, reduction="sum").backward()
            opt.step()
        else:
            opt.step(grad_samples=runs.per_example_grads(net, x, y))
    assert opt.steps_released == steps
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]), opt


@pytest.mark.parametrize("name,momentum", [("prefix-banded", 0.0), ("bandmf-momentum", 0.9)])
def test_optimizer_equals_the_hand_written_loop(blobs, name, momentum):
    data = runs.batches(20, [BATCH, 4, 9, 0, 6])
    got, opt = optimizer_run(blobs[name], data, momentum=momentum)
    expected = runs.reference_run(blobs[name], SEED, data, BATCH, momentum=momentum)
    assert torch.equal(got, expected)
    assert not torch.equal(got, runs.reference_run(blobs[name], "1f" * 32, data, BATCH,
                                                   momentum=momentum))
    assert opt.privacy == opt.stream.privacy and opt.privacy["epsilon"] <= 2.0 + 1e-9


def test_opacus_grad_sample_module(blobs, monkeypatch):
    """``p.grad_sample`` from Opacus: the reference is the hand-written loop on the same
    per-example gradients (Opacus', so that both sides have the same bits)."""
    data = runs.batches(20, [BATCH, 3, 8])
    got, _ = optimizer_run(blobs["prefix-banded"], data, opacus_module=True)

    def opacus_grads(net, x, y, one_at_a_time=False):
        module = opacus.GradSampleModule(net, loss_reduction="sum")
        torch.nn.functional.cross_entropy(module(x), y, reduction="sum").backward()
        out = [p.grad_sample.detach().clone() for p in net.parameters()]
        module._close()
        for p in net.parameters():
            p.grad_sample = None
        return out

    monkeypatch.setattr(runs, "per_example_grads", opacus_grads)
    expected = runs.reference_run(blobs["prefix-banded"], SEED, data, BATCH)
    assert torch.equal(got, expected)


def test_momentum_mismatch_warns_and_keywords_refused(blobs):
    net = runs.model()
    with pytest.warns(UserWarning, match=r"momentum:0.9.*momentum=0.5"):
        mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.5),
                           blobs["bandmf-momentum"], expected_batch_size=4)
    with pytest.raises(ValueError, match=r"max_grad_norm=2.0.*clip_norm=1.0"):
        mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), blobs["prefix-banded"],
                           expected_batch_size=4, max_grad_norm=2.0)
    with pytest.raises(mfc.StreamError, match="noise"):
        mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), blobs["prefix-banded"],
                           expected_batch_size=4, noise_multiplier=0.01)
    with pytest.raises(ValueError, match="expected_batch_size=0"):
        mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), blobs["prefix-banded"],
                           expected_batch_size=0)
    opt = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), blobs["prefix-banded"],
                             expected_batch_size=4)
    before = [p.detach().clone() for p in net.parameters()]
    with pytest.raises(ValueError, match="no grad_sample"):
        opt.step()
    with pytest.raises(TypeError, match=r"float64.*\.float\(\)"):
        opt.step(grad_samples=[torch.zeros((2, *p.shape), dtype=torch.float64)
                               for p in net.parameters()])
    with pytest.raises(ValueError, match=r"grad_samples\[1\]: shape"):
        opt.step(grad_samples=[torch.zeros((2, *p.shape)) if i == 0 else torch.zeros((2, 3))
                               for i, p in enumerate(net.parameters())])
    assert opt.steps_released == 0
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_zero_grad_clears_grad_sample_and_checkpoint_continues(blobs):
    data = runs.batches(20, [BATCH, 5])
    expected, _ = optimizer_run(blobs["bandmf-momentum"], data, momentum=0.9)
    got, opt = optimizer_run(blobs["bandmf-momentum"], data, momentum=0.9, steps=8)
    for p in opt.params:
        p.grad_sample = torch.zeros(1)
    opt.zero_grad()
    assert all(p.grad_sample is None and p.grad is None for p in opt.params)
    saved = opt.state_dict()
    assert saved["mfc"]["world_size"] == 1 and saved["mfc"]["rank"] == 0
    # A restart: a fresh model and optimizer from the saved state continue bit for bit.
    net = runs.model()
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(got, net.parameters())
    fresh = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=runs.LR, momentum=0.9),
                               blobs["bandmf-momentum"], expected_batch_size=BATCH, seed=SEED)
    fresh.load_state_dict(saved, released=8)
    for x, y in data[8:20]:
        fresh.zero_grad()
        fresh.step(grad_samples=runs.per_example_grads(net, x, y))
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in net.parameters()]), expected)
    saved["mfc"]["world_size"] = 2
    again = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=runs.LR, momentum=0.9),
                               blobs["bandmf-momentum"], expected_batch_size=BATCH, seed=SEED)
    with pytest.raises(ValueError, match="world_size=2.*world_size=1"):
        again.load_state_dict(saved)


# --- data-parallel under torch.distributed ---------------------------------------------------


def spawn(tmp_path, world, blob, data, plan, tag):
    init = tmp_path / f"init-{tag}"
    out = tmp_path / f"out-{tag}"
    tmp.spawn(runs.dist_worker, args=(world, str(init), blob.bytes, SEED, data, BATCH,
                                      str(out), plan), nprocs=world, join=True)
    return [torch.load(f"{out}.{r}", weights_only=False) for r in range(world)]


@pytest.mark.parametrize("world", [2, 4])
def test_data_parallel_equals_one_process(blobs, tmp_path, world):
    # Global batches of 7, 3 (a rank of 4 has none) and 9 examples, 12 steps.
    data = runs.batches(12, [7, 3, 9])
    blob = blobs["bandmf-momentum" if world == 4 else "prefix-banded"]
    expected = runs.reference_run(blob, SEED, data, BATCH, one_at_a_time=True)
    finals = spawn(tmp_path, world, blob, data, ("train", 12), "run")
    for rank, final in enumerate(finals):
        assert torch.equal(final, expected), rank


def test_data_parallel_checkpoint(blobs, tmp_path):
    data = runs.batches(12, [7, 3, 9])
    blob = blobs["prefix-banded"]
    expected = runs.reference_run(blob, SEED, data, BATCH, one_at_a_time=True)
    prefix = str(tmp_path / "ckpt")
    spawn(tmp_path, 2, blob, data, ("save", prefix, 5), "first")
    finals = spawn(tmp_path, 2, blob, data, ("resume", prefix, 2, 5, 12), "resumed")
    assert all(torch.equal(final, expected) for final in finals)
    # Another world size is refused, naming both (rank r reads the checkpoint of rank r % 2).
    refusals = spawn(tmp_path, 4, blob, data, ("resume", prefix, 2, 5, 12), "four")
    for message in refusals:
        assert "world_size=2" in message and "world_size=4" in message
