"""Bad input raises an exception that names the problem, and the stream is unchanged afterwards:
its next release equals that of a twin stream that never saw the bad input."""

import numpy as np
import pytest

import mfc
from conftest import open_stream

SEED = "3c" * 32
D = 5


@pytest.fixture()
def pair(mechanisms):
    m = mechanisms["banded"]
    return m, mfc.Stream(m, D, seed=SEED), mfc.Stream(m, D, seed=SEED)


def assert_unchanged(stream, twin):
    x = np.linspace(-0.3, 0.4, D, dtype=np.float32)
    assert stream.steps_released == twin.steps_released
    assert np.array_equal(stream.step(x), twin.step(x))


def test_wrong_dtype(pair):
    _, s, twin = pair
    with pytest.raises(TypeError, match="float32"):
        s.step(np.ones(D))
    with pytest.raises(TypeError, match="float32"):
        s.step([1.0] * D)
    assert_unchanged(s, twin)


def test_wrong_shape(pair):
    _, s, twin = pair
    for bad in [np.ones(D + 1, np.float32), np.ones((2, 2, D), np.float32), np.ones((3, D - 1), np.float32)]:
        with pytest.raises(mfc.MfcError, match="shape"):
            s.step(bad)
    assert_unchanged(s, twin)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite(pair, bad):
    _, s, twin = pair
    x = np.ones(D, np.float32)
    x[2] = bad
    with pytest.raises(mfc.StreamError, match="coordinate 2 is not finite"):
        s.step(x)
    batch = np.ones((4, D), np.float32)
    batch[3, 1] = bad
    with pytest.raises(mfc.MfcError, match="row 3: input coordinate 1 is not finite"):
        s.step(batch)
    assert_unchanged(s, twin)


def test_past_the_horizon(pair):
    m, s, twin = pair
    x = np.zeros((m.steps - 1, D), np.float32)
    s.step(x)
    twin.step(x)
    with pytest.raises(mfc.MfcError, match="2 rows needs 2 steps; the stream has 1"):
        s.step(np.zeros((2, D), np.float32))
    assert_unchanged(s, twin)
    with pytest.raises(mfc.StreamError, match=f"all {m.steps} steps have been released"):
        s.step(np.zeros(D, np.float32))
    assert s.steps_released == m.steps


def test_bad_clip_factor(pair, mechanisms):
    _, s, twin = pair
    # An unsharded stream clips each row itself: a caller's factor is refused, not trusted.
    with pytest.raises(mfc.MfcError, match="clip is for shards only"):
        s.step(np.full(D, 1000.0, np.float32), clip=1.0)
    assert_unchanged(s, twin)
    shard = mfc.Stream(mechanisms["banded"], D, seed=SEED, shard=(0, 3))
    with pytest.raises(mfc.StreamError, match="clip"):
        shard.step(np.ones(3, np.float32), clip=1.5)
    # One factor cannot stand for a batch's rows.
    with pytest.raises(mfc.MfcError, match="one row at a time"):
        shard.step(np.ones((2, 3), np.float32), clip=1.0)
    assert shard.steps_released == 0


def test_corrupt_blob(mechanisms, tmp_path):
    blob = bytearray(mechanisms["banded"].bytes)
    blob[100] ^= 0x01
    with pytest.raises(mfc.BlobError, match="checksum mismatch"):
        mfc.Mechanism.from_bytes(bytes(blob))
    path = tmp_path / "bad.mfc"
    path.write_bytes(bytes(blob))
    with pytest.raises(mfc.BlobError, match="bad.mfc: blob checksum mismatch"):
        mfc.Mechanism.load(path)
    with pytest.raises(mfc.BlobError):
        mfc.Mechanism.from_bytes(bytes(blob[:20]))


def test_bad_seed(mechanisms):
    m = mechanisms["banded"]
    with pytest.raises(mfc.MfcError, match="32 bytes, got 31"):
        mfc.Stream(m, D, seed=b"\x01" * 31)
    with pytest.raises(mfc.MfcError, match="64 hexadecimal digits"):
        mfc.Stream(m, D, seed="zz" * 32)
    with pytest.raises(mfc.StreamError, match="seed"):
        mfc.Stream(m, D, seed=bytes(32))


def test_compile_refusals_name_the_option():
    # The CLI's messages, with its options spelled as the keywords passed.
    with pytest.raises(mfc.CompileError, match=r"min_sep=0: expected an integer in 1\.\.=4294967295"):
        mfc.compile(steps=8, epochs=2, min_sep=0)
    with pytest.raises(mfc.CompileError, match=r"epochs=2: needs min_sep B .* or every B"):
        mfc.compile(steps=8, epochs=2)
    with pytest.raises(mfc.CompileError, match="steps: is required"):
        mfc.compile()
    with pytest.raises(mfc.CompileError, match="form='dense': expected `banded`, `blt`, `fft`, `fft-optimal` or `bandmf`"):
        mfc.compile(steps=8, form="dense")
    with pytest.raises(mfc.CompileError, match="bands=9: b̂ must be in 1..=8"):
        mfc.compile(steps=8, form="bandmf", bands=9)


def test_step_examples_clips_each_example(pair):
    """One example per step is one row: step_examples equals step bit for bit, a long example
    included (clipped to zeta the same way); a refused shape leaves the stream unchanged."""
    m, s, twin = pair
    rng = np.random.default_rng(4)
    for scale in [0.01, 100.0]:
        x = (rng.standard_normal(D) * scale).astype(np.float32)
        assert np.array_equal(s.step_examples(x[None, :]), twin.step(x))
    with pytest.raises(mfc.MfcError, match="shape"):
        s.step_examples(np.ones(D, np.float32))
    with pytest.raises(mfc.StreamError, match="not finite"):
        s.step_examples(np.full((2, D), np.nan, np.float32))
    assert_unchanged(s, twin)
    # Two examples of norm 100 move the sum by at most 2 zeta: against a zero step, the
    # difference is the clipped sum (the noise is the same, same seed and step). The runtime
    # clips to just below zeta (a margin of about 2^-15 that absorbs f32 rounding, clip.rs).
    a, b = mfc.Stream(m, D, seed=SEED), mfc.Stream(m, D, seed=SEED)
    big = np.zeros((2, D), np.float32)
    big[:, 0] = 100.0
    moved = a.step_examples(big) - b.step(np.zeros(D, np.float32))
    zeta = m.report["clip_norm"]
    assert 2 * zeta * (1 - 2.0**-13) <= moved[0] <= 2 * zeta, moved[0]
    assert np.all(moved[1:] == 0.0)


def test_noise_only_blob_refuses_step(mechanisms):
    s = open_stream("banded-momentum", mechanisms["banded-momentum"], D, seed=SEED)
    with pytest.raises(mfc.MfcError, match="step_noise"):
        s.step(np.ones(D, np.float32))
    assert s.steps_released == 0


def test_calibrate_round_trip():
    sigma = mfc.calibrate(epsilon=2.0, delta=1e-6)["noise_multiplier"]
    back = mfc.calibrate(noise_multiplier=sigma, delta=1e-6)
    assert back["epsilon"] == pytest.approx(2.0, rel=1e-9)
    assert back["zcdp_rho"] == pytest.approx(1 / (2 * sigma**2), rel=1e-12)
    assert "per record" in back["privacy_unit"]
    with pytest.raises(mfc.CompileError, match="either epsilon or noise_multiplier"):
        mfc.calibrate(delta=1e-6)


def test_strided_input_is_copied_once_and_agrees():
    """C-contiguous float32 input is read in place; a strided view is copied once and gives the
    same releases as its contiguous copy."""
    m = mfc.compile(steps=6, band=2, rank=1, noise_multiplier=1.0)
    wide = np.arange(2 * 6 * D, dtype=np.float32).reshape(6, 2 * D) / 100
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    a = mfc.Stream(m, D, seed=SEED).step(view)
    b = mfc.Stream(m, D, seed=SEED).step(np.ascontiguousarray(view))
    assert np.array_equal(a, b)


def lowered(m, factor=0.99):
    """The blob with its recorded sensitivity times ``factor`` and its CRC-32 recomputed: what a
    buggy or curious server could send (the checksum catches accidents only)."""
    import struct
    import zlib

    blob = bytearray(m.bytes)
    recorded = struct.pack("<d", m.verify()["recorded"])
    at = blob.find(recorded)
    assert at > 0 and blob.find(recorded, at + 1) < 0
    blob[at : at + 8] = struct.pack("<d", m.verify()["recorded"] * factor)
    blob[-4:] = struct.pack("<I", zlib.crc32(bytes(blob[:-4])))
    return mfc.Mechanism.from_bytes(bytes(blob))


def test_the_device_check_refuses_an_understated_sensitivity(mechanisms):
    """Every blob of the fixtures verifies, except the banded custom workload (its A is not in
    the blob); lowered by 1% with its CRC recomputed, each verified one is refused by
    ``verify`` and by ``Stream``; an unverifiable one is refused unless the caller opts in by
    name, and then streamed with a warning."""
    for name, m in mechanisms.items():
        verdict = m.verify()
        if name == "banded-momentum":
            assert verdict["verdict"] == "unverifiable", verdict
            with pytest.raises(mfc.StreamError, match="allow_unverified=True"):
                mfc.Stream(m, D, seed=SEED)
            with pytest.warns(UserWarning, match="does not store its custom workload"):
                s = mfc.Stream(m, D, seed=SEED, allow_unverified=True)
            assert s.privacy["verified"] is False
            continue
        assert verdict["verdict"] == "verified", (name, verdict)
        assert verdict["recorded"] >= verdict["bound"]
        bad = lowered(m)
        assert bad.verify()["verdict"] == "refused", name
        with pytest.raises(mfc.StreamError, match="below the bound"):
            mfc.Stream(bad, D, seed=SEED)
