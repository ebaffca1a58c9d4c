"""The batch sampler of amplified BandMF (issue 29; Choquette-Choo et al., NeurIPS 2023,
Algorithm 2) draws exactly the scheme the accountant assumes: over 10**5 steps each example is in
a batch with frequency q on its group's steps (a chi-squared test) and never on the others', the
batch sizes are Binomial(group size, q), the groups are uniform and independent; the draws are a
function of (seed, step); bad arguments and blobs of another scheme are refused by name. The
statistical tests use fixed seeds and a two-sided p-value threshold of 1e-6, and are shown to
fail for a sampler with a wrong q, for fixed-size batches and for equal-split groups."""

import math
import pickle

import numpy as np
import pytest

from mfc import CyclicPoissonSampling

SEED = 20231210
P_MIN = 1e-6

# The acceptance run: 10**5 steps, 100 examples in 3 groups, q = 0.3.
N, B, Q, STEPS = 100, 3, 0.3, 10**5


def chi2_p_value(x, df):
    """Two-sided p-value of a chi-squared statistic `x` with `df` degrees of freedom: too large a
    statistic (wrong frequencies) and too small a one (too regular to be random) both fail. The
    tails are the regularized incomplete gamma functions P(df/2, x/2) and Q(df/2, x/2), the
    smaller one computed directly (series for P, continued fraction for Q), so a tiny tail is
    accurate (no scipy needed)."""
    a, t = df / 2, x / 2
    if t <= 0:
        return 0.0
    front = math.exp(-t + a * math.log(t) - math.lgamma(a))
    if t < a + 1:  # P by its series
        term = total = 1 / a
        n = a
        while term > total * 1e-17:
            n += 1
            term *= t / n
            total += term
        lower = front * total
        return min(1.0, 2 * min(lower, 1 - lower))
    # Q by its continued fraction (modified Lentz).
    tiny = 1e-300
    b = t + 1 - a
    c, d = 1 / tiny, 1 / b
    upper = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        upper *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    upper *= front
    return min(1.0, 2 * min(upper, 1 - upper))


def draw(sampler, steps):
    """The first `steps` batches: (every drawn index, the step of each, each batch's size)."""
    batches = [sampler.batch(step) for step in range(steps)]
    sizes = np.array([b.size for b in batches])
    return np.concatenate(batches), np.repeat(np.arange(steps), sizes), sizes


def inclusion_p_value(groups, cycle_length, q, steps, examples):
    """Pearson chi-squared of each example's inclusion count against q times the number of its
    group's steps (one degree of freedom per example: q is given, not fitted)."""
    trials = np.bincount(np.arange(steps) % cycle_length, minlength=cycle_length)[groups]
    counts = np.bincount(examples, minlength=groups.size)
    x = np.sum((counts - q * trials) ** 2 / (trials * q * (1 - q)))
    return chi2_p_value(x, groups.size)


def batch_size_p_value(groups, cycle_length, q, sizes):
    """Pearson chi-squared of the batch sizes of each group's steps against Binomial(its size, q),
    the tails pooled so that every cell expects at least 5."""
    group_sizes = np.bincount(groups, minlength=cycle_length)
    step_group = np.arange(sizes.size) % cycle_length
    x, df = 0.0, 0
    for g, n in enumerate(group_sizes):
        observed = np.bincount(sizes[step_group == g], minlength=n + 1).astype(float)
        pmf = np.array([math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(n + 1)])
        expected = observed.sum() * pmf
        lo = int(np.argmax(np.cumsum(expected) >= 5))
        hi = n - int(np.argmax(np.cumsum(expected[::-1]) >= 5))
        assert lo < hi
        def cells(v):
            return np.concatenate(([v[: lo + 1].sum()], v[lo + 1 : hi], [v[hi:].sum()]))

        o, e = cells(observed), cells(expected)
        x += np.sum((o - e) ** 2 / e)
        df += o.size - 1
    return chi2_p_value(x, df)


@pytest.fixture(scope="module")
def acceptance():
    sampler = CyclicPoissonSampling(N, Q, STEPS, cycle_length=B, seed=SEED)
    return sampler, draw(sampler, STEPS)


def test_each_example_is_drawn_with_frequency_q_within_its_group(acceptance):
    sampler, (examples, _, _) = acceptance
    assert inclusion_p_value(sampler.groups, B, Q, STEPS, examples) > P_MIN


def test_no_example_is_drawn_outside_its_group(acceptance):
    sampler, (examples, steps, _) = acceptance
    assert np.array_equal(sampler.groups[examples], steps % B)


def test_batch_sizes_are_binomial(acceptance):
    sampler, (_, _, sizes) = acceptance
    assert batch_size_p_value(sampler.groups, B, Q, sizes) > P_MIN
    assert sizes.mean() == pytest.approx(sampler.expected_batch_size, rel=0.1)


def test_dp_sgd_is_one_group():
    steps = 20_000
    sampler = CyclicPoissonSampling(50, 0.1, steps, seed=SEED)
    assert not sampler.groups.any()
    assert sampler.expected_batch_size == pytest.approx(5.0)
    examples, _, sizes = draw(sampler, steps)
    assert inclusion_p_value(sampler.groups, 1, 0.1, steps, examples) > P_MIN
    assert batch_size_p_value(sampler.groups, 1, 0.1, sizes) > P_MIN


def test_the_tests_fail_for_a_wrong_q():
    steps = 20_000
    wrong = CyclicPoissonSampling(N, 0.31, steps, cycle_length=B, seed=SEED + 1)
    examples, _, sizes = draw(wrong, steps)
    assert inclusion_p_value(wrong.groups, B, Q, steps, examples) < P_MIN
    assert batch_size_p_value(wrong.groups, B, Q, sizes) < P_MIN


def test_the_batch_size_test_fails_for_fixed_size_batches(acceptance):
    # q times the group's size, randomly rounded, uniformly chosen: each example's frequency
    # is q, but the batch sizes are not Binomial.
    sampler, _ = acceptance
    rng = np.random.default_rng(SEED)
    steps = 20_000
    members = [np.flatnonzero(sampler.groups == g) for g in range(B)]
    mean = np.array([Q * members[step % B].size for step in range(steps)])
    sizes = np.floor(mean).astype(int) + (rng.random(steps) < mean - np.floor(mean))
    examples = np.concatenate(
        [rng.choice(members[step % B], size, replace=False) for step, size in enumerate(sizes)]
    )
    assert inclusion_p_value(sampler.groups, B, Q, steps, examples) > P_MIN
    assert batch_size_p_value(sampler.groups, B, Q, sizes) < P_MIN


@pytest.mark.parametrize("cycle_length", [7, 16, 64])
def test_groups_are_uniform_and_independent(cycle_length):
    n = 100_000
    sampler = CyclicPoissonSampling(n, 0.5, cycle_length, cycle_length=cycle_length, seed=SEED)
    groups = sampler.groups
    assert groups.dtype == np.int64 and groups.min() >= 0 and groups.max() < cycle_length
    counts = np.bincount(groups, minlength=cycle_length)
    expected = n / cycle_length
    assert chi2_p_value(np.sum((counts - expected) ** 2 / expected), cycle_length - 1) > P_MIN
    # Consecutive examples' groups, as pairs: independent and uniform (no serial structure).
    pairs = np.bincount(groups[0::2] * cycle_length + groups[1::2], minlength=cycle_length**2)
    expected = n / 2 / cycle_length**2
    x = np.sum((pairs - expected) ** 2 / expected)
    assert chi2_p_value(x, cycle_length**2 - 1) > P_MIN
    # Equal-split groups (a shuffle cut into b equal parts) are too even: the test refuses them.
    equal = np.random.default_rng(SEED).permutation(np.arange(n) % cycle_length)
    counts = np.bincount(equal, minlength=cycle_length)
    x = np.sum((counts - n / cycle_length) ** 2 / (n / cycle_length))
    assert chi2_p_value(x, cycle_length - 1) < P_MIN


def test_an_examples_group_depends_on_the_seed_and_its_index_only():
    small = CyclicPoissonSampling(50, 0.5, 7, cycle_length=7, seed=SEED)
    large = CyclicPoissonSampling(200, 0.5, 7, cycle_length=7, seed=SEED)
    assert np.array_equal(small.groups, large.groups[:50])
    assert [small.group_of(i) for i in range(50)] == small.groups.tolist()
    assert not small.groups.flags.writeable
    with pytest.raises(ValueError):
        small.groups.flags.writeable = True


def test_batches_are_sorted_indices_of_the_steps_group():
    sampler = CyclicPoissonSampling(200, 0.2, 40, cycle_length=4, seed=SEED)
    for step in range(40):
        batch = sampler.batch(step)
        assert batch.dtype == np.int64 and batch.ndim == 1
        assert np.all(np.diff(batch) > 0)
        assert np.all(sampler.groups[batch] == step % 4)
        batch[:] = -1  # a fresh array: the next draw is unaffected
        assert np.all(sampler.batch(step) >= 0)


def test_q_one_takes_whole_groups_and_a_cycle_covers_every_example_once():
    sampler = CyclicPoissonSampling(30, 1.0, 10, cycle_length=5, seed=SEED)
    batches = list(sampler)
    assert np.array_equal(np.sort(np.concatenate(batches[:5])), np.arange(30))
    for step, batch in enumerate(batches):
        assert np.array_equal(batch, np.flatnonzero(sampler.groups == step % 5))


def test_random_access_and_restarts_draw_the_same_batches():
    sampler = CyclicPoissonSampling(80, 0.25, 300, cycle_length=6, seed=SEED)
    in_order = list(sampler)
    assert len(in_order) == len(sampler) == 300
    for step in [299, 0, 157, 3, 157]:  # any order, repeated: the same batch
        assert np.array_equal(sampler.batch(step), in_order[step])
    restarted = CyclicPoissonSampling(80, 0.25, 300, cycle_length=6, seed=SEED)
    assert all(np.array_equal(a, b) for a, b in zip(restarted, in_order))
    unpickled = pickle.loads(pickle.dumps(sampler))
    assert all(np.array_equal(a, b) for a, b in zip(unpickled, in_order))
    other = CyclicPoissonSampling(80, 0.25, 300, cycle_length=6, seed=SEED + 1)
    assert not np.array_equal(other.groups, sampler.groups)
    assert sum(np.array_equal(a, b) for a, b in zip(other, in_order)) < 30


def test_the_draws_are_the_documented_philox_streams():
    # The docstring's definition, step by step, with numpy's Philox (stable across versions).
    seed, n, b, q = 2024, 20, 3, 0.5
    sampler = CyclicPoissonSampling(n, q, 10, cycle_length=b, seed=seed)
    key = np.random.SeedSequence(seed).generate_state(2, np.uint64)
    raw = np.random.Philox(key=key, counter=[0, 0, 0, 0]).random_raw(n)
    assert np.all(raw < np.uint64(2**64 - 2**64 % b))  # no rejection for this seed
    assert np.array_equal(sampler.groups, (raw % np.uint64(b)).astype(np.int64))
    for step in range(10):
        members = np.flatnonzero(sampler.groups == step % b)
        raw = np.random.Philox(key=key, counter=[0, 0, step, 1]).random_raw(members.size)
        assert np.array_equal(sampler.batch(step), members[raw < np.uint64(math.floor(q * 2**64))])
    # Pinned: a numpy that changed these streams would change every restarted loop's batches.
    assert sampler.groups.tolist() == [2, 2, 1, 1, 0, 2, 0, 2, 1, 0, 0, 1, 0, 2, 1, 2, 1, 1, 2, 0]
    assert [b.tolist() for b in sampler][:4] == [[6, 9, 10, 12], [2, 14, 17], [5, 18], [9]]


def test_properties_and_repr():
    sampler = CyclicPoissonSampling(60_000, 0.5333333333333333, 2000, cycle_length=64, seed=SEED)
    assert sampler.expected_batch_size == pytest.approx(500.0)
    assert (sampler.num_examples, sampler.iterations, sampler.cycle_length) == (60_000, 2000, 64)
    assert sampler.sampling_prob == 0.5333333333333333 and sampler.seed == SEED
    assert sampler.scheme == {"scheme": "cyclic Poisson", "cycle_length": 64,
                              "sampling_prob": 0.5333333333333333, "iterations": 2000}
    assert str(SEED) not in repr(sampler) and "cycle_length=64" in repr(sampler)
    fresh = [CyclicPoissonSampling(10, 0.5, 4).seed for _ in range(2)]
    assert fresh[0] != fresh[1] and all(s >= 0 for s in fresh)  # OS entropy, readable


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_examples=0), ValueError, r"num_examples=0: expected an integer >= 1"),
        (dict(num_examples=-5), ValueError, r"num_examples=-5: expected an integer >= 1"),
        (dict(num_examples=10.0), TypeError, r"num_examples=10\.0: expected an integer"),
        (dict(num_examples=True), TypeError, r"num_examples=True: expected an integer"),
        (dict(sampling_prob=0), ValueError, r"sampling_prob=0: expected a number in \(0, 1\]"),
        (dict(sampling_prob=-0.1), ValueError, r"sampling_prob=-0\.1: expected a number in \(0, 1"),
        (dict(sampling_prob=1.5), ValueError, r"sampling_prob=1\.5: expected a number in \(0, 1\]"),
        (dict(sampling_prob=float("nan")), ValueError, r"sampling_prob=nan: expected"),
        (dict(sampling_prob=float("inf")), ValueError, r"sampling_prob=inf: expected"),
        (dict(sampling_prob="0.5"), TypeError, r"sampling_prob='0\.5': expected a number"),
        (dict(sampling_prob=True), TypeError, r"sampling_prob=True: expected a number"),
        (dict(iterations=0), ValueError, r"iterations=0: expected an integer in 1\.\.=4294967295"),
        (dict(iterations=2**32), ValueError, r"iterations=4294967296: expected an integer in 1"),
        (dict(iterations=None), TypeError, r"iterations=None: expected an integer"),
        (dict(cycle_length=0), ValueError, r"cycle_length=0: expected an integer in 1\.\.=8 "
         r"\(1 <= cycle_length <= iterations=8\)"),
        (dict(cycle_length=9), ValueError, r"cycle_length=9: expected an integer in 1\.\.=8"),
        (dict(cycle_length=2.0), TypeError, r"cycle_length=2\.0: expected an integer"),
        (dict(seed=-1), ValueError, r"seed=-1: expected an integer >= 0 \(or None for OS entropy"),
        (dict(seed="abc"), TypeError, r"seed='abc': expected an integer"),
        (dict(seed=1.0), TypeError, r"seed=1\.0: expected an integer"),
        (dict(seed=False), TypeError, r"seed=False: expected an integer"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, error, message):
    options = dict(num_examples=10, sampling_prob=0.5, iterations=8, cycle_length=2, seed=1)
    options.update(kwargs)
    with pytest.raises(error, match=message):
        CyclicPoissonSampling(**options)


def test_numpy_integers_are_integers():
    sampler = CyclicPoissonSampling(np.int64(10), np.float32(0.5), np.uint32(8),
                                    cycle_length=np.int16(2), seed=np.uint64(3))
    assert np.array_equal(sampler.batch(np.int64(5)), sampler.batch(5))


def test_bad_steps_and_examples_are_refused_by_name():
    sampler = CyclicPoissonSampling(10, 0.5, 8, cycle_length=2, seed=1)
    with pytest.raises(ValueError, match=r"step=8: expected an integer in 0\.\.=7"):
        sampler.batch(8)
    with pytest.raises(ValueError, match=r"step=-1: expected an integer in 0\.\.=7"):
        sampler.batch(-1)
    with pytest.raises(TypeError, match=r"step=1\.0: expected an integer"):
        sampler.batch(1.0)
    with pytest.raises(TypeError, match=r"step=True: expected an integer"):
        sampler.batch(True)
    with pytest.raises(ValueError, match=r"example=10: expected an integer in 0\.\.=9"):
        sampler.group_of(10)


class Blob:
    """A stand-in for a compiled mfc.Mechanism: only its report."""

    def __init__(self, sampling, steps=2000):
        self.report = {"form": "bandmf", "steps": steps, "sampling": sampling}


def recorded(cycle_length=64, sampling_prob=0.5333333333333333, iterations=2000):
    return {"scheme": "cyclic Poisson", "cycle_length": cycle_length,
            "sampling_prob": sampling_prob, "iterations": iterations}


@pytest.fixture()
def sampler():
    return CyclicPoissonSampling(60_000, 0.5333333333333333, 2000, cycle_length=64, seed=SEED)


def test_check_admits_the_blobs_scheme(sampler):
    assert sampler.check(Blob(recorded())) is None
    assert sampler.check(Blob(recorded(iterations=3000), steps=3000)) is None  # stops early
    assert sampler.check(Blob(sampler.scheme)) is None
    # q one ulp apart (computed another way): the same scheme.
    sampler.check(Blob(recorded(sampling_prob=math.nextafter(0.5333333333333333, 1.0))))
    dp_sgd = CyclicPoissonSampling(60_000, 500 / 60_000, 2000, seed=SEED)
    dp_sgd.check(Blob(recorded(cycle_length=1, sampling_prob=500 / 60_000)))


def test_check_refuses_a_blob_without_sampling(sampler):
    with pytest.raises(ValueError, match=r"sampling: the mechanism records none .* this sampler "
                       r"draws cyclic Poisson sampling with cycle_length=64, "
                       r"sampling_prob=0\.5333333333333333, iterations=2000"):
        sampler.check(Blob(None))
    blob = Blob(None)
    del blob.report["sampling"]  # a blob from before the key existed
    with pytest.raises(ValueError, match="sampling: the mechanism records none"):
        sampler.check(blob)


@pytest.mark.parametrize(
    "sampling, steps, message",
    [
        (recorded(cycle_length=32), 2000, r"cycle_length: the mechanism's 32, this sampler's 64"),
        (recorded(sampling_prob=0.5), 2000,
         r"sampling_prob: the mechanism's 0\.5, this sampler's 0\.5333333333333333"),
        (recorded(sampling_prob=0.5333333333333333 * (1 + 1e-9)), 2000, r"sampling_prob: "),
        (recorded(iterations=1999), 1999,
         r"iterations: the mechanism's 1999 steps, this sampler's 2000"),
        (dict(recorded(), scheme="balls in bins"), 2000,
         r"scheme: the mechanism's 'balls in bins', this sampler's 'cyclic Poisson'"),
    ],
)
def test_check_refuses_another_scheme_naming_both_values(sampler, sampling, steps, message):
    with pytest.raises(ValueError, match=r"the mechanism's sampling scheme is not this "
                       r"sampler's: .*" + message):
        sampler.check(Blob(sampling, steps))


def test_check_names_every_mismatch_and_needs_a_report(sampler):
    with pytest.raises(ValueError, match=r"cycle_length: .*; sampling_prob: .*; iterations: "):
        sampler.check(Blob(recorded(cycle_length=4, sampling_prob=0.1, iterations=10), 10))
    with pytest.raises(TypeError, match="check: expected an mfc.Mechanism"):
        sampler.check(b"MFC blob bytes")


def test_a_compiled_blob_records_the_scheme_its_sampler_checks():
    """End to end: ``mfc.compile(sampling_prob=q, bands=b)`` records cyclic Poisson sampling
    (also after a round trip through the blob's bytes), the sampler of that scheme is admitted,
    and one of another q, b or horizon, or a blob compiled without sampling, is refused."""
    import mfc

    q = 500 * 4 / 60_000
    m = mfc.compile(
        sampling_prob=q, bands=4, toeplitz=True, steps=64, epsilon=2.0, delta=1e-5
    )
    assert m.report["sampling"] == {
        "scheme": "cyclic Poisson",
        "cycle_length": 4,
        "sampling_prob": q,
        "iterations": 64,
        "participations": 16,
    }
    assert m.report["participation"].startswith("cyclic Poisson sampling")
    loaded = mfc.Mechanism.from_bytes(m.bytes)
    assert loaded.report["sampling"] == m.report["sampling"]
    sampler = CyclicPoissonSampling(60_000, q, 64, cycle_length=4, seed=1)
    for blob in (m, loaded):
        sampler.check(blob)
    CyclicPoissonSampling(60_000, q, 32, cycle_length=4, seed=1).check(m)  # stops early
    for other in (
        CyclicPoissonSampling(60_000, q, 64, cycle_length=2, seed=1),
        CyclicPoissonSampling(60_000, q * (1 + 1e-9), 64, cycle_length=4, seed=1),
        CyclicPoissonSampling(60_000, q, 65, cycle_length=4, seed=1),
    ):
        with pytest.raises(ValueError, match="not this sampler's"):
            other.check(m)
    plain = mfc.compile(form="bandmf", bands=4, toeplitz=True, steps=64, noise_multiplier=1.0)
    assert plain.report["sampling"] is None
    with pytest.raises(ValueError, match="records none"):
        sampler.check(plain)
    # A stream checks the sampler it is given, and warns without one.
    with pytest.raises(ValueError, match="not this sampler's"):
        mfc.Stream(m, 2, seed=bytes(range(32)), sampler=other)
    with pytest.warns(UserWarning, match="cyclic Poisson sampling"):
        mfc.Stream(m, 2, seed=bytes(range(32)))
    # The stream's privacy is the accountant's, not one Gaussian release's.
    stream = mfc.Stream(m, 2, seed=bytes(range(32)), sampler=sampler)
    assert stream.privacy["zcdp_rho"] is None
    assert stream.privacy["participation"] == m.report["participation"]
    assert stream.privacy["epsilon"] <= 2.0
    assert "privacy loss distributions" in stream.privacy["statement"]
