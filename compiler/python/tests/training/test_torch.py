"""``mfc.torch`` (issue 30): tensors at the door without a copy and in logical order, the
``DPFTRLOptimizer`` against the loop written by hand on ``mfc.Stream`` (bit for bit, 20 steps,
a prefix-sum blob and a BandMF momentum blob, with ``torch.func`` and with Opacus'
``GradSampleModule``), and data-parallel runs under ``torch.distributed`` (gloo, 2 and 4
processes) equal to the single process bit for bit, with their checkpoints."""

import multiprocessing
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

# Opacus' hooks on a first layer whose input needs no gradient (harmless).
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook:UserWarning")


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


def test_a_step_consumes_grad_sample(blobs):
    """After a step from ``p.grad_sample`` (Opacus), the next backward without ``zero_grad``
    starts a fresh ``grad_sample``: its step privatizes its own batch only, as the reference
    does, not the previous batch again (which would put those examples in two steps)."""
    data = runs.batches(2, [BATCH, 5])
    net = runs.model()
    module = opacus.GradSampleModule(net, loss_reduction="sum")
    opt = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=runs.LR),
                             blobs["prefix-banded"], expected_batch_size=BATCH, seed=SEED)
    for x, y in data:  # no zero_grad between the steps
        torch.nn.functional.cross_entropy(module(x), y, reduction="sum").backward()
        assert all(isinstance(p.grad_sample, torch.Tensor) for p in opt.params)
        opt.step()
        assert all(p.grad_sample is None for p in opt.params)
    module._close()
    got = torch.cat([p.detach().reshape(-1) for p in net.parameters()])

    def opacus_grads(net, x, y, one_at_a_time=False):
        module = opacus.GradSampleModule(net, loss_reduction="sum")
        torch.nn.functional.cross_entropy(module(x), y, reduction="sum").backward()
        out = [p.grad_sample.detach().clone() for p in net.parameters()]
        module._close()
        for p in net.parameters():
            p.grad_sample = None
        return out

    original = runs.per_example_grads
    runs.per_example_grads = opacus_grads
    try:
        expected = runs.reference_run(blobs["prefix-banded"], SEED, data, BATCH)
    finally:
        runs.per_example_grads = original
    assert torch.equal(got, expected)


def test_opacus_dp_optimizer_refused_and_other_optimizers_warn(blobs):
    """Opacus' ``DPOptimizer`` (``make_private``) would clip and noise ``p.grad_sample`` again
    and overwrite mfc's ``ĝ``: refused naming ``original_optimizer``, nothing stepped. An
    optimizer other than SGD warns for a prefix-sum and a momentum blob, naming both."""
    net = opacus.GradSampleModule(runs.model())
    dp = opacus.optimizers.DPOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                       noise_multiplier=1.0, max_grad_norm=1.0,
                                       expected_batch_size=4)
    with pytest.raises(TypeError, match=r"Opacus DPOptimizer.*original_optimizer"):
        mt.DPFTRLOptimizer(dp, blobs["prefix-banded"], expected_batch_size=4)
    # Its unwrapped optimizer is accepted.
    mt.DPFTRLOptimizer(dp.original_optimizer, blobs["prefix-banded"], expected_batch_size=4)
    for name, expected in (("prefix-banded", r"prefix sum.*Adam.*SGD\(momentum=0.0\)"),
                           ("bandmf-momentum", r"momentum:0.9.*Adam.*SGD\(momentum=0.9\)")):
        with pytest.warns(UserWarning, match=expected):
            mt.DPFTRLOptimizer(torch.optim.Adam(net.parameters(), lr=0.1), blobs[name],
                               expected_batch_size=4)


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
    # An optimizer without the seed (OS entropy) cannot continue it: refused naming seed=.
    unseeded = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=runs.LR, momentum=0.9),
                                  blobs["bandmf-momentum"], expected_batch_size=BATCH)
    with pytest.raises(ValueError, match=r"seed=None.*seed="):
        unseeded.load_state_dict(saved, released=8)
    assert unseeded.steps_released == 0
    saved["mfc"]["world_size"] = 2
    again = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=runs.LR, momentum=0.9),
                               blobs["bandmf-momentum"], expected_batch_size=BATCH, seed=SEED)
    with pytest.raises(ValueError, match="world_size=2.*world_size=1"):
        again.load_state_dict(saved)


# --- data-parallel under torch.distributed ---------------------------------------------------


def spawn(tmp_path, world, blob, data, plan, tag):
    """A data-parallel run of ``world`` processes (``runs.dist_worker``); each rank's output.
    The forkserver imports torch and mfc once for every run of the session."""
    init = tmp_path / f"init-{tag}"
    out = tmp_path / f"out-{tag}"
    tmp.start_processes(runs.dist_worker, args=(world, str(init), blob.bytes, SEED, data, BATCH,
                                                str(out), plan),
                        nprocs=world, join=True, start_method="forkserver")
    return [torch.load(f"{out}.{r}", weights_only=False) for r in range(world)]


DATA_PARALLEL_STEPS = 12


@pytest.fixture(scope="module")
def data_parallel(blobs, tmp_path_factory):
    """Global batches of 7, 3 (a rank of 4 has none), 0 and 9 examples; the reference; and a
    2-process run (prefix-sum blob) that checkpoints after 5 of its 12 steps."""
    multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "mfc", "mfc.torch",
                                            "torch_runs"])
    tmp_path = tmp_path_factory.mktemp("data-parallel")
    data = runs.batches(DATA_PARALLEL_STEPS, [7, 3, 0, 9])
    blob = blobs["prefix-banded"]
    expected = runs.reference_run(blob, SEED, data, BATCH, one_at_a_time=True)
    prefix = str(tmp_path / "checkpoint")
    finals = spawn(tmp_path, 2, blob, data, {"save": (prefix, 5), "last": DATA_PARALLEL_STEPS},
                   "two")
    return dict(data=data, blob=blob, expected=expected, prefix=prefix, finals=finals,
                tmp_path=tmp_path)


def test_data_parallel_two_processes_and_restart(data_parallel):
    run = data_parallel
    for rank, final in enumerate(run["finals"]):
        assert torch.equal(final["params"], run["expected"]), rank
    # A restart from the checkpoint of step 5 (same world size) continues bit for bit.
    resumed = spawn(run["tmp_path"], 2, run["blob"], run["data"],
                    {"resume": (run["prefix"], 5), "last": DATA_PARALLEL_STEPS}, "resumed")
    for rank, final in enumerate(resumed):
        assert torch.equal(final["params"], run["expected"]), rank


def test_data_parallel_four_processes(data_parallel):
    """4 processes: the 2-process checkpoints are refused naming both world sizes (the
    optimizer untouched); a step whose non-finite value only the last rank's shard holds is
    refused by every rank alike, no stream stepped; then 12 steps equal the single process
    bit for bit."""
    run = data_parallel
    finals = spawn(run["tmp_path"], 4, run["blob"], run["data"],
                   {"refuse": (run["prefix"], 2), "poison": 4, "last": DATA_PARALLEL_STEPS},
                   "four")
    for rank, final in enumerate(finals):
        assert "world_size=2" in final["refusal"] and "world_size=4" in final["refusal"], rank
        message, steps = final["poisoned"]
        assert message.startswith("ValueError: grad_samples: example 0 of rank 0"), (rank, message)
        assert steps == 4, rank
        assert torch.equal(final["params"], run["expected"]), rank


def test_public_names_documented_and_schedulers_drive_the_wrapped_optimizer(blobs):
    import inspect

    for name in mt.__all__:
        obj = getattr(mt, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for member in (m for m in vars(obj) if not m.startswith("_")):
                assert inspect.getdoc(getattr(obj, member)), f"{name}.{member}"
    net = runs.model()
    opt = mt.DPFTRLOptimizer(torch.optim.SGD(net.parameters(), lr=1.0), blobs["prefix-banded"],
                             expected_batch_size=2, seed=SEED)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        opt.step(grad_samples=[torch.ones((2, *p.shape)) for p in net.parameters()])
        scheduler.step()
    assert opt.original_optimizer.param_groups[0]["lr"] == 0.125
