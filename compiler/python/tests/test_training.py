"""`mfc.GradientPrivatizer` (mfc/training.py), the noisy gradient every framework wrapper uses,
against its definition computed independently: for a prefix-sum blob ĝ_t is the difference of
the stream's consecutive releases, and summing ĝ gives the releases back (in float64, to f32
rounding); for a BandMF blob of another workload, the release itself; every other blob refused.
"""

import numpy as np
import pytest

import mfc
from conftest import FORMS, open_stream

SEED = bytes(range(32))
DIM = 7


def batches(steps, seed=0):
    """Per-example gradients of each step: 0..4 examples, some above the clip norm."""
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((int(rng.integers(0, 5)), DIM)) * rng.uniform(0.1, 2.0)).astype(
            np.float32
        )
        for _ in range(steps)
    ]


def clipped_sum(examples, zeta):
    """Σ_e min(1, ζ/‖g_e‖)·g_e in float64: the clipped gradient sum, computed independently."""
    total = np.zeros(DIM)
    for g in examples.astype(np.float64):
        norm = np.linalg.norm(g)
        total += g * min(1.0, zeta / norm) if norm > 0 else g
    return total


PRIVATIZABLE = [
    name for name in FORMS if name not in ("banded-momentum",)
]


@pytest.mark.parametrize("name", PRIVATIZABLE)
def test_noisy_gradients_are_the_releases_increments(mechanisms, name):
    mechanism = mechanisms[name]
    steps = mechanism.steps
    data = batches(steps)
    privatizer = mfc.GradientPrivatizer(open_stream(name, mechanism, DIM, seed=SEED))
    reference = open_stream(name, mechanism, DIM, seed=SEED)
    previous = np.zeros(DIM, np.float32)
    running = np.zeros(DIM)
    for t, examples in enumerate(data):
        noisy = privatizer.privatize(examples)
        release = reference.step_examples(examples)
        assert noisy.dtype == np.float32 and noisy.shape == (DIM,)
        if reference.releases_prefix_sums:
            assert np.array_equal(noisy, release - previous), f"step {t}"
            previous = release
            running += noisy
            # Summing the noisy gradients gives the private prefix sums back (f32 rounding).
            assert np.allclose(running, release, rtol=1e-5, atol=1e-4 * (t + 1)), f"step {t}"
        else:
            assert name == "bandmf-momentum"
            assert np.array_equal(noisy, release), f"step {t}"
    assert privatizer.steps_released == steps


def test_the_noise_is_the_encoders_inverse_applied_to_the_draws(mechanisms):
    """ĝ − Σ clip(g) over the steps of a prefix-sum blob is the noise σζ·sens·(C⁻¹ z): a
    stream of zeros gives it alone, and adding the clipped sums moves ĝ by exactly them."""
    mechanism = mechanisms["bandmf"]
    zeta = mechanism.report["clip_norm"]
    noise_only = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    with_data = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    for examples in batches(mechanism.steps, seed=1):
        noise = noise_only.privatize(np.zeros((0, DIM), np.float32))
        noisy = with_data.privatize(examples)
        expected = clipped_sum(examples, zeta)
        assert np.allclose(noisy - noise, expected, atol=1e-4), (noisy - noise, expected)


def test_other_workloads_without_a_noisy_gradient_are_refused(mechanisms):
    stream = open_stream("banded-momentum", mechanisms["banded-momentum"], DIM, seed=SEED)
    with pytest.raises(ValueError, match="form='bandmf'"):
        mfc.GradientPrivatizer(stream)
    with pytest.raises(TypeError, match="mfc.Stream"):
        mfc.GradientPrivatizer(mechanisms["banded"])


@pytest.mark.parametrize("name", ["banded", "bandmf", "blt", "bandmf-momentum"])
def test_a_restored_privatizer_continues_bit_for_bit(mechanisms, name):
    mechanism = mechanisms[name]
    data = batches(mechanism.steps, seed=2)
    whole = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    expected = [whole.privatize(x) for x in data]
    first = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    half = len(data) // 2
    for x in data[:half]:
        first.privatize(x)
    state = first.state_dict()
    again = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    again.load_state_dict(state, released=half)
    for t, x in enumerate(data[half:], start=half):
        assert np.array_equal(again.privatize(x), expected[t]), f"step {t}"


def test_a_state_of_another_dimension_or_one_behind_is_refused(mechanisms):
    mechanism = mechanisms["banded"]
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    for x in batches(3):
        privatizer.privatize(x)
    state = privatizer.state_dict()
    other = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM + 1, seed=SEED))
    with pytest.raises(ValueError, match="row_dim=7.*row_dim=8"):
        other.load_state_dict(state)
    behind = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    # released is required: the state's own count cannot tell a stale state.
    with pytest.raises(ValueError, match=r"released=None.*released=3"):
        behind.load_state_dict(state)
    with pytest.raises(mfc.StreamError):
        behind.load_state_dict(state, released=5)
    # The refused restore left the privatizer fresh: it restores the state now.
    behind.load_state_dict(state, released=3)
    assert behind.steps_released == 3


def test_past_the_horizon_the_refusal_names_the_steps(mechanisms):
    """A training longer than the blob: the refusal names ``steps=`` (the compile option),
    the privatizer unchanged."""
    mechanism = mechanisms["banded"]
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    for x in batches(mechanism.steps, seed=3):
        privatizer.privatize(x)
    with pytest.raises(mfc.StreamError, match=f"compiled with steps={mechanism.steps}"):
        privatizer.privatize(batches(1, seed=4)[0])
    assert privatizer.steps_released == mechanism.steps
