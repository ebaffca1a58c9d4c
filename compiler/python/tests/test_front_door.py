"""The front door's policies and refusals (issue 27): sizes checked before allocating (an
ordinary exception, never an abort or a PanicException), an unverifiable blob refused unless the
caller opts in by name, a noise multiplier below the blob's refused unless the caller opts in by
name (and then the (epsilon, delta) that holds is recomputed and reported), files failing with
the OSError of their cause, sizes checked with the argument's name, bytes-like blobs accepted."""

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import mfc

SEED = "2d" * 32
D = 5


def run_isolated(code):
    """Runs `code` in a fresh interpreter (an abort there cannot take pytest down) and returns
    its exit code and output."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
    )
    return done.returncode, done.stdout + done.stderr


ORDINARY = """
import mfc, numpy as np
{setup}
try:
    {call}
except Exception as e:  # an ordinary exception: not BaseException, not an abort
    print("raised", type(e).__name__, e)
else:
    print("returned")
"""


def test_a_huge_dim_raises_memory_error_not_an_abort():
    code = ORDINARY.format(
        setup="m = mfc.compile(steps=8, band=2, rank=1, noise_multiplier=1.0)",
        call="mfc.Stream(m, 10**10)",
    )
    status, output = run_isolated(code)
    assert status == 0, output
    assert "raised MemoryError" in output and "dim = 10000000000" in output, output


def test_to_dense_of_a_long_blob_raises_memory_error_not_a_panic():
    # A BLT blob stores its parameters only (a few bytes for any n): n = 10^5 dense matrices
    # are 80 GB each.
    code = ORDINARY.format(
        setup='m = mfc.compile(steps=64, form="blt", horizon=100000, buffers=2, '
        "epsilon=2.0, delta=1e-6)\nassert m.steps == 100000",
        call="m.to_dense()",
    )
    status, output = run_isolated(code)
    assert status == 0, output
    assert "raised MemoryError" in output and "n = 100000" in output, output


@pytest.mark.parametrize(
    "dim, match",
    [
        (-1, r"dim=-1: expected an integer in 1\.\.=2251799813685248"),
        (0, r"dim=0: expected an integer in 1\.\.="),
        (2**51 + 1, r"dim=2251799813685249: expected an integer in 1\.\.="),
        (10**40, r"dim=10000000000000000000000000000000000000000: expected"),
    ],
)
def test_dim_out_of_range_names_the_argument(dim, match, mechanisms):
    with pytest.raises(ValueError, match=match):
        mfc.Stream(mechanisms["banded"], dim)


def test_a_dim_beyond_an_fft_stream_s_noise_names_the_argument(mechanisms):
    # An FFT stream draws 2m noise coordinates per input coordinate (m = 12 steps per block
    # here): 2m·dim must stay within the noise's 2^51.
    m = mechanisms["fft"]
    with pytest.raises(ValueError, match=r"dim: 281474976710656 coordinates are more than a stream of this fft blob"):
        mfc.Stream(m, 2**48)


def test_sizes_name_the_argument(mechanisms):
    m = mechanisms["banded"]
    with pytest.raises(TypeError, match="dim: expected an integer"):
        mfc.Stream(m, 3.0)
    for shard in [(-1, 3), (3, 3), (2, D + 1), (4, 2)]:
        with pytest.raises(ValueError, match=r"shard: expected \(start, end\) with 0 ≤ start < end ≤ dim = 5"):
            mfc.Stream(m, D, shard=shard)
    s = mfc.Stream(m, D, seed=SEED)
    saved = s.checkpoint()
    with pytest.raises(ValueError, match=r"released=-1: expected an integer in 0\.\.=4294967295"):
        s.restore(saved, released=-1)
    with pytest.raises(ValueError, match=r"released=4294967296: expected"):
        s.restore(saved, released=2**32)
    for keyword, value, range_ in [
        ("steps", -1, "1..=4294967295"),
        ("steps", 0, "1..=4294967295"),
        ("epochs", -2, "1..=4294967295"),
        ("min_sep", -3, "1..=4294967295"),
        ("every", -4, "1..=4294967295"),
        ("band", -5, "1..=4294967295"),
        ("rank", -6, "0..=4294967295"),
        ("refine", -7, "0..=1000000"),
        ("max_bands", -8, "1..=4294967295"),
        ("buffers", 65, "1..=64"),
    ]:
        options = {"steps": 8, keyword: value}
        with pytest.raises(mfc.CompileError, match=f"{keyword}={value}: expected an integer in {range_}"):
            mfc.compile(**options)


def test_a_missing_file_is_file_not_found_error(tmp_path, mechanisms):
    path = tmp_path / "absent.mfc"
    with pytest.raises(FileNotFoundError) as caught:
        mfc.Mechanism.load(path)
    assert caught.value.filename == str(path)
    assert not isinstance(caught.value, mfc.MfcError)
    with pytest.raises(FileNotFoundError):
        mechanisms["banded"].save(tmp_path / "no such folder" / "m.mfc")
    with pytest.raises(IsADirectoryError):
        mfc.Mechanism.load(tmp_path)


def test_bytes_like_blobs_and_checkpoints(mechanisms):
    m = mechanisms["bandmf"]
    blob = m.bytes
    for data in [bytearray(blob), memoryview(blob), memoryview(bytearray(blob))]:
        assert mfc.Mechanism.from_bytes(data).bytes == blob
    with pytest.raises(TypeError, match="data: expected bytes, bytearray or memoryview, got <class 'str'>"):
        mfc.Mechanism.from_bytes(blob.hex())
    x = np.linspace(-1, 1, D, dtype=np.float32)
    first = mfc.Stream(m, D, seed=bytearray.fromhex(SEED))
    first.step(x)
    saved = first.checkpoint()
    resumed = mfc.Stream(m, D, seed=memoryview(bytes.fromhex(SEED)))
    resumed.restore(bytearray(saved), released=1)
    assert np.array_equal(resumed.step(x), first.step(x))


@pytest.mark.parametrize("name", ["banded", "blt", "bandmf"])
def test_a_batch_with_a_row_beyond_the_clipping_range_releases_nothing(name, mechanisms):
    """A row beyond 2^96·ζ midway through a batch is refused before the first step: the rows
    before it are not released (a caller resending the batch would count them twice)."""
    m = mechanisms[name]
    s, twin = mfc.Stream(m, D, seed=SEED), mfc.Stream(m, D, seed=SEED)
    batch = np.ones((5, D), np.float32)
    batch[2, 1] = 1e35
    with pytest.raises(mfc.MfcError, match=r"row 2: input coordinate 1 exceeds 2\^96·ζ"):
        s.step(batch)
    assert s.steps_released == 0
    batch[2, 1] = 1.0
    assert np.array_equal(s.step(batch), twin.step(batch))


def test_step_examples_names_the_example_and_the_coordinate(mechanisms):
    m = mechanisms["banded"]
    s, twin = mfc.Stream(m, D, seed=SEED), mfc.Stream(m, D, seed=SEED)
    examples = np.ones((4, D), np.float32)
    examples[2, 3] = np.inf
    with pytest.raises(mfc.StreamError, match="step_examples: example 2, coordinate 3 is not finite"):
        s.step_examples(examples)
    # Column-major: the same example and coordinate (logical, not memory, order).
    with pytest.raises(mfc.StreamError, match="example 2, coordinate 3"):
        s.step_examples(np.asfortranarray(examples))
    # Beyond 2^96·ζ an example is refused by name, not zeroed without a word.
    huge = np.ones((4, D), np.float32)
    huge[1, 2] = -1e30
    with pytest.raises(mfc.StreamError, match=r"example 1, coordinate 2 exceeds 2\^96·ζ"):
        s.step_examples(huge)
    x = np.ones(D, np.float32)
    assert s.steps_released == 0 and np.array_equal(s.step(x), twin.step(x))


@pytest.mark.parametrize("name", ["bandmf-momentum", "bandmf", "blt"])
def test_step_noise_says_what_to_do_instead_and_it_works(name, mechanisms):
    """BLT and BandMF add their noise inside the stream: step_noise is refused with the advice
    to step zeros, and stepping zeros does release the noise alone: a twin stream's release of
    x minus it is the clipped x (BandMF of another workload: x + noise) or its prefix sum."""
    m = mechanisms[name]
    s = mfc.Stream(m, D, seed=SEED)
    with pytest.raises(mfc.StreamError, match=r"step\(numpy.zeros\(5, numpy.float32\)\) releases the noise alone"):
        s.step_noise()
    assert s.steps_released == 0
    twin = mfc.Stream(m, D, seed=SEED)
    rng = np.random.default_rng(5)
    total = np.zeros(D)
    for _ in range(3):
        x = (rng.standard_normal(D) * 0.2).astype(np.float32)  # below ζ = 1: not clipped
        noise = s.step(np.zeros(D, np.float32))
        release = twin.step(x)
        total += x
        expected = x if name == "bandmf-momentum" else total
        np.testing.assert_allclose(release - noise, expected, rtol=0, atol=1e-4)


# The unverifiable blob of the tests: the FFT mechanism under min-separation (no exact
# device-side method), compiled honestly.
FFT_MIN_SEP = dict(steps=64, form="fft", stamps=2, epochs=2, min_sep=16, epsilon=2.0, delta=1e-6)


@pytest.fixture(scope="module")
def unverifiable():
    return mfc.compile(**FFT_MIN_SEP)


def test_an_unverifiable_blob_is_refused_unless_allowed_by_name(unverifiable, mfc_binary, tmp_path):
    m = unverifiable
    # The CLI's check says the same (independently of the Python binding).
    path = tmp_path / "fft.mfc"
    m.save(path)
    inspect = subprocess.run([mfc_binary, "inspect", str(path)], capture_output=True, text=True)
    assert "unverifiable" in inspect.stdout, inspect.stdout
    assert m.verify()["verdict"] == "unverifiable"
    with pytest.raises(mfc.StreamError, match=r"unverifiable .*pass allow_unverified=True"):
        mfc.Stream(m, D, seed=SEED)
    with pytest.warns(UserWarning, match=r"sensitivity unverified \(allow_unverified=True\)"):
        s = mfc.Stream(m, D, seed=SEED, allow_unverified=True)
    assert s.privacy["verified"] is False and "NOT verified" in s.privacy["statement"]
    assert s.step(np.ones(D, np.float32)).shape == (D,)
    # A verified blob needs no opt-in and warns nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = mfc.Stream(mfc.compile(steps=64, form="fft", stamps=2, epsilon=2.0, delta=1e-6), D)
    assert v.privacy["verified"] is True


def analytic_gaussian_delta(sigma, eps):
    """delta(eps) of the Gaussian mechanism of sensitivity 1 and noise multiplier sigma (Balle &
    Wang 2018, Thm 8), written here independently of the package."""
    phi = lambda t: 0.5 * math.erfc(-t / math.sqrt(2))
    return phi(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * phi(-1 / (2 * sigma) - eps * sigma)


def test_lowering_the_noise_needs_the_opt_in_and_reports_the_epsilon_that_holds(mechanisms):
    m = mechanisms["banded"]
    sigma = m.report["privacy"]["noise_multiplier"]
    delta = m.report["privacy"]["delta"]
    low = round(sigma / 4, 3)
    with pytest.raises(mfc.StreamError) as refused:
        mfc.Stream(m, D, seed=SEED, noise_multiplier=low)
    message = str(refused.value)
    assert isinstance(refused.value, ValueError)
    for needle in ["noise_multiplier", repr(low), repr(sigma), "allow_lower_noise=True"]:
        assert needle in message, (needle, message)
    with pytest.warns(UserWarning, match="allow_lower_noise=True.*no longer holds"):
        s = mfc.Stream(m, D, seed=SEED, noise_multiplier=low, allow_lower_noise=True)
    p = s.privacy
    assert p["lowered"] is True and p["noise_multiplier"] == low and p["delta"] == delta
    assert p["blob_noise_multiplier"] == sigma
    # The reported epsilon is the analytic Gaussian's for sigma' at the blob's delta: delta(eps)
    # is at most delta there, and above it 1e-6 lower (the solver rounds up, to 1e-12).
    eps = p["epsilon"]
    assert analytic_gaussian_delta(low, eps) <= delta
    assert analytic_gaussian_delta(low, eps * (1 - 1e-6)) > delta
    assert eps > p["blob_epsilon"] and p["blob_epsilon"] == pytest.approx(2.0, rel=1e-9)
    assert p["zcdp_rho"] == pytest.approx(1 / (2 * low**2), rel=1e-12)
    for key in ["privacy_unit", "participation", "neighbouring"]:
        assert p[key] == m.report[key], key
    assert f"{eps:.6f}" in p["statement"] and p["privacy_unit"] in p["statement"]
    # The stream really uses sigma': the same seed's noise, scaled by sigma'/sigma.
    zeros = np.zeros(D, np.float32)
    ratio = s.step(zeros) / mfc.Stream(m, D, seed=SEED).step(zeros)
    np.testing.assert_allclose(ratio, low / sigma, rtol=1e-5)


def test_raising_the_noise_needs_nothing_and_is_reported(mechanisms):
    m = mechanisms["bandmf"]
    sigma = m.report["privacy"]["noise_multiplier"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = mfc.Stream(m, D, noise_multiplier=sigma)
        high = mfc.Stream(m, D, noise_multiplier=2 * sigma)
    assert same.privacy["lowered"] is False and same.privacy["epsilon"] == same.privacy["blob_epsilon"]
    p = high.privacy
    assert p["lowered"] is False and p["epsilon"] < p["blob_epsilon"]
    assert analytic_gaussian_delta(2 * sigma, p["epsilon"]) <= p["delta"]
    # The blob's own sigma: its (epsilon, delta) recomputed, within the solver's rounding.
    plain = mfc.Stream(m, D).privacy
    assert plain["noise_multiplier"] == sigma
    assert plain["epsilon"] == pytest.approx(m.report["privacy"]["epsilon"], rel=1e-9)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_a_noise_multiplier_out_of_range_is_refused(bad, mechanisms):
    with pytest.raises(ValueError, match="noise_multiplier: expected a finite number > 0"):
        mfc.Stream(mechanisms["banded"], D, noise_multiplier=bad, allow_lower_noise=True)


def test_calibrate_names_the_option_and_its_range():
    for kwargs, match in [
        (dict(delta=2.0, epsilon=1.0), r"delta=2\.0: expected a number in \(0, 1\)"),
        (dict(delta=0.0, epsilon=1.0), r"delta=0\.0: expected a number in \(0, 1\)"),
        (dict(delta=1e-6, epsilon=-1.0), r"epsilon=-1\.0: expected a finite number > 0"),
        (dict(delta=1e-6, noise_multiplier=0.0), r"noise_multiplier=0\.0: expected a finite number > 0"),
        (dict(delta=1e-6, noise_multiplier=1e-9), r"noise_multiplier=1e-9, delta=1e-6: ε exceeds 10⁴"),
    ]:
        with pytest.raises(mfc.CompileError, match=match):
            mfc.calibrate(**kwargs)


def test_calibrate_with_sampling_matches_the_cli_and_the_reference():
    """Issue 29: DP-SGD's sigma through the accountant equals jax_privacy's for the same scheme
    (n = 2000, 60 000 examples, expected batch 500, delta = 1e-5, epsilon = 1: 1.5873258), the
    scheme is stated in words, and the refusals name the keyword."""
    q = 500 / 60000
    c = mfc.calibrate(epsilon=1.0, delta=1e-5, sampling_prob=q, steps=2000)
    assert abs(c["noise_multiplier"] / 1.5873258373762238 - 1) < 1e-4
    assert c["participations"] == 2000 and c["bands"] == 1
    assert "DP-SGD" in c["privacy_unit"] and "adding or removing one example" in c["privacy_unit"]
    back = mfc.calibrate(
        noise_multiplier=c["noise_multiplier"], delta=1e-5, sampling_prob=q, steps=2000, bands=8
    )
    assert back["participations"] == 250 and back["epsilon"] < 1.0
    with pytest.raises(mfc.CompileError, match=r"bands=11: expected 1..=10"):
        mfc.calibrate(epsilon=1.0, delta=1e-5, sampling_prob=0.5, steps=10, bands=11)
    with pytest.raises(mfc.CompileError, match="sampling_prob: needs steps"):
        mfc.calibrate(epsilon=1.0, delta=1e-5, sampling_prob=0.5)
    with pytest.raises(mfc.CompileError, match=r"sampling_prob=1.5: expected a probability in \(0, 1\]"):
        mfc.calibrate(epsilon=1.0, delta=1e-5, sampling_prob=1.5, steps=10)


def test_the_forged_blobs_get_the_device_s_outcome(forged_blobs):
    """Issue 27: each forged blob (a lowered sensitivity steered into the unverifiable class, or a
    {k: 1} relabel) is streamed, refused unless allowed by name, or refused whatever the opt-in,
    exactly as the device's policy says (tests/tests/forged.rs checks the same in Rust)."""
    assert len(forged_blobs) >= 12
    outcomes = {"verified": 0, "unverifiable": 0, "understated": 0}
    for name, expected, path in forged_blobs:
        m = mfc.Mechanism.load(path)
        outcomes[expected] += 1
        if expected == "verified":
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                s = mfc.Stream(m, 2, seed=SEED)
            assert s.privacy["verified"] is True, name
        elif expected == "unverifiable":
            with pytest.raises(mfc.StreamError, match=r"pass allow_unverified=True"):
                mfc.Stream(m, 2, seed=SEED)
            with pytest.warns(UserWarning, match=r"allow_unverified=True"):
                s = mfc.Stream(m, 2, seed=SEED, allow_unverified=True)
            assert s.privacy["verified"] is False, name
        else:
            for allow in (False, True):
                with pytest.raises(mfc.StreamError, match=r"below the bound"):
                    mfc.Stream(m, 2, seed=SEED, allow_unverified=allow)
    assert all(count > 0 for count in outcomes.values()), outcomes
