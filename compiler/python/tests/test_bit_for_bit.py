"""For the same blob and seed, a Python stream releases what `mfc simulate` releases, bit for bit,
for every form; a checkpointed and restored stream continues bit for bit; two shards' releases,
concatenated, are the unsharded stream's."""

import subprocess

import numpy as np
import pytest

import mfc
from conftest import FORMS, UNVERIFIABLE, open_stream

SEED = "5a" * 32
D = 7


def simulate(mfc_binary, tmp_path, mechanism, inputs, allow_unverified=False):
    blob, x, out = tmp_path / "m.mfc", tmp_path / "x.npy", tmp_path / "y.npy"
    mechanism.save(blob)
    np.save(x, inputs)
    command = [mfc_binary, "simulate", str(blob), "--input", str(x), "--out", str(out), "--seed", SEED]
    # The CLI's opt-in for an unverifiable blob, where the binary has it (issue 27).
    help_text = subprocess.run([mfc_binary, "simulate", "--help"], capture_output=True, text=True).stdout
    if allow_unverified and "--allow-unverified" in help_text:
        command.append("--allow-unverified")
    subprocess.run(command, check=True, capture_output=True)
    return np.load(out)


def inputs(steps, seed=3):
    rng = np.random.default_rng(seed)
    # Some rows above the clip norm, some below: clipping is part of what must agree.
    return (rng.standard_normal((steps, D)) * rng.uniform(0.1, 2.0, (steps, 1))).astype(np.float32)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_python_releases_equal_mfc_simulate(name, mechanisms, mfc_binary, tmp_path):
    m = mechanisms[name]
    x = inputs(m.steps)
    expected = simulate(mfc_binary, tmp_path, m, x, allow_unverified=name in UNVERIFIABLE)
    stream = open_stream(name, m, D, seed=SEED)
    takes_inputs = not (m.form == "banded" and "momentum" in name)
    if takes_inputs:
        rows = [stream.step(row) for row in x[:5]]  # one row at a time, then a batch
        got = np.vstack(rows + [stream.step(x[5:])])
    else:
        # A banded blob of another workload releases its noise only, as simulate does.
        got = np.vstack([stream.step_noise() for _ in range(m.steps)])
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), name
    # Bytes and the hex string are the same seed.
    again = open_stream(name, m, D, seed=bytes.fromhex(SEED))
    if takes_inputs:
        assert np.array_equal(again.step(x), expected)


@pytest.mark.parametrize(
    "name", ["banded", "blt", "fft", "fft-optimal", "bandmf", "bandmf-toeplitz-minsep"]
)
def test_checkpoint_restore_continues_bit_for_bit(name, mechanisms):
    m = mechanisms[name]
    x = inputs(m.steps, seed=5)
    whole = mfc.Stream(m, D, seed=SEED).step(x)
    first = mfc.Stream(m, D, seed=SEED)
    head = first.step(x[:9])
    saved = first.checkpoint()
    resumed = mfc.Stream(m, D, seed=SEED)
    resumed.restore(saved, released=9)
    assert resumed.steps_released == 9
    assert np.array_equal(np.vstack([head, resumed.step(x[9:])]), whole)
    # A stale checkpoint (behind what was released) and another seed's are refused, unchanged.
    stale = mfc.Stream(m, D, seed=SEED)
    with pytest.raises(mfc.StreamError, match="released"):
        stale.restore(saved, released=10)
    assert stale.steps_released == 0
    other = mfc.Stream(m, D, seed="a5" * 32)
    with pytest.raises(mfc.StreamError, match="key"):
        other.restore(saved, released=9)
    assert other.steps_released == 0


@pytest.mark.parametrize("name", ["banded", "bandmf"])
def test_shards_concatenate_to_the_unsharded_stream(name, mechanisms):
    m = mechanisms[name]
    x = inputs(m.steps, seed=9)
    whole = mfc.Stream(m, D, seed=SEED).step(x)
    cut = 3
    shards = [mfc.Stream(m, D, seed=SEED, shard=(0, cut)), mfc.Stream(m, D, seed=SEED, shard=(cut, D))]
    for t, row in enumerate(x):
        clip = mfc.clip_factor(row, m.report["clip_norm"])
        parts = [shards[0].step(row[:cut], clip=clip), shards[1].step(row[cut:], clip=clip)]
        assert np.array_equal(np.concatenate(parts), whole[t])
    with pytest.raises(mfc.StreamError, match="clip factor"):
        mfc.Stream(m, D, seed=SEED, shard=(0, cut)).step(x[0, :cut])


def test_blt_and_fft_have_no_shards(mechanisms):
    for name in ["blt", "fft"]:
        m = mechanisms[name]
        with pytest.raises(mfc.MfcError, match="no shards"):
            mfc.Stream(m, D, seed=SEED, shard=(0, 3))


def test_no_seed_draws_from_the_os():
    m = mfc.compile(steps=8, band=2, rank=1, noise_multiplier=1.0)
    x = np.zeros(3, np.float32)
    assert not np.array_equal(mfc.Stream(m, 3).step(x), mfc.Stream(m, 3).step(x))


@pytest.mark.parametrize("name", sorted(FORMS))
def test_save_load_round_trip_keeps_the_statement(name, mechanisms, tmp_path):
    """A saved blob loads back to the same bytes; its header report states the same unit of
    privacy, schema, relation, sensitivity and (epsilon, delta) as the compile report."""
    m = mechanisms[name]
    path = tmp_path / "m.mfc"
    m.save(path)
    loaded = mfc.Mechanism.load(path)
    assert loaded.bytes == m.bytes and loaded.form == m.form and loaded.steps == m.steps
    for key in ["privacy_unit", "participation", "neighbouring", "sensitivity", "clip_norm"]:
        assert loaded.report[key] == m.report[key], key
    assert loaded.report["epsilon"] == m.report["privacy"]["epsilon"]
    assert loaded.report["delta"] == m.report["privacy"]["delta"]
    assert loaded.report["noise_multiplier"] == m.report["privacy"]["noise_multiplier"]
