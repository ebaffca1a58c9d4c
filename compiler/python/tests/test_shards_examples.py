"""Training steps on shards: a shard given its columns of each step's examples and the whole
examples' factors (``clips=mfc.clip_factors(examples, stream.clip_norm)``) releases exactly, bit
for bit, its coordinates of the unsharded ``step_examples`` with the same seed: 2 and 3 shards of
banded and BandMF (prefix sums and momentum) blobs, steps of random sizes (none included), an
all-zero example, a clip norm that is not a float32 (0.1, which the stream rounds down). The
factors matter (swapped or wrong factors change the release), any layout is read in logical
order, and the refusals name ``clips`` and leave the stream unchanged. The reference is the
unsharded ``step_examples``, itself checked against numpy's per-example clipping in
``test_layouts.py``."""

import numpy as np
import pytest

import mfc

SEED = "5e" * 32
D = 10
SPLITS = [[(0, 5), (5, 10)], [(0, 1), (1, 7), (7, D)]]
# Blobs of the sharded forms; "bandmf-zeta" has a clip norm float32 cannot hold.
NAMES = ["banded", "bandmf", "bandmf-momentum", "bandmf-zeta"]


@pytest.fixture(scope="module")
def blobs(mechanisms):
    extra = {"bandmf-zeta": mfc.compile(
        steps=12, form="bandmf", bands=2, clip_norm=0.1, epsilon=2.0, delta=1e-6
    )}
    return {**mechanisms, **extra}


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def step_batches(steps, zeta, seed):
    """Each step's examples: 0 to 5 of them (none at steps 1 and 6), of norms from far below
    ``zeta`` to far above it, and an all-zero example at step 3."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(steps):
        m = 0 if t in (1, 6) else int(rng.integers(1, 6))
        x = rng.standard_normal((m, D)).astype(np.float32)
        x *= (zeta * rng.choice([0.01, 0.3, 3.0, 50.0], size=(m, 1))).astype(np.float32)
        if t == 3:
            x[0] = 0.0
        out.append(x)
    if steps > 6:
        assert any(len(x) == 0 for x in out)
        norms = np.concatenate([np.linalg.norm(x, axis=1) for x in out])
        assert (norms > zeta).any() and (norms < zeta).any()
    return out


def unsharded(m, batches):
    s = mfc.Stream(m, D, seed=SEED)
    return [s.step_examples(x) for x in batches]


def sharded(m, batches, ranges, factors=None):
    """The releases assembled from one stream per range; ``factors(x, zeta, shard)`` gives the
    clips each shard is handed (by default the whole examples' ``clip_factors``)."""
    shards = [mfc.Stream(m, D, seed=SEED, shard=r) for r in ranges]
    zeta = shards[0].clip_norm
    out = []
    for x in batches:
        parts = []
        for k, ((a, b), s) in enumerate(zip(ranges, shards)):
            clips = mfc.clip_factors(x, zeta) if factors is None else factors(x, zeta, k)
            parts.append(s.step_examples(x[:, a:b], clips=clips))
        out.append(np.concatenate(parts))
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("ranges", SPLITS, ids=["2-shards", "3-shards"])
def test_shards_equal_the_unsharded_step_bit_for_bit(name, ranges, blobs):
    m = blobs[name]
    batches = step_batches(10, m.report["clip_norm"], seed=NAMES.index(name))
    whole = unsharded(m, batches)
    got = sharded(m, batches, ranges)
    for t, (g, w) in enumerate(zip(got, whole)):
        assert np.array_equal(bits(g), bits(w)), (name, ranges, t)


def test_clip_factors_are_the_streams_own(blobs):
    """``clip_factors`` with ``stream.clip_norm`` (a float64 0.1) equals each row's
    ``clip_factor`` and the stream's own factor: a one-shard stream given them releases what
    ``step_examples`` releases; the factors of 0.1 rounded to the nearest float32 instead
    (above the stream's ζ) would not."""
    m = blobs["bandmf-zeta"]
    zeta = m.report["clip_norm"]
    assert float(np.float32(zeta)) > zeta  # rounding to nearest goes up here
    x = np.concatenate(step_batches(10, zeta, seed=4))
    f = mfc.clip_factors(x, zeta)
    assert f.dtype == np.float32 and f.shape == (len(x),)
    assert [mfc.clip_factor(row, zeta) for row in x] == f.tolist()
    down = np.nextafter(np.float32(zeta), np.float32(0))
    assert np.array_equal(f, mfc.clip_factors(x, float(down)))
    assert not np.array_equal(f, mfc.clip_factors(x, float(np.float32(zeta))))


@pytest.mark.parametrize("name", ["banded", "bandmf-momentum"])
def test_any_layout_is_read_in_logical_order(name, blobs):
    """Column-major examples (the shard's columns of a Fortran-ordered batch) and strided
    factors release what their C-ordered copies release."""
    m = blobs[name]
    batches = step_batches(6, m.report["clip_norm"], seed=8)
    expected = sharded(m, batches, SPLITS[0])
    shards = [mfc.Stream(m, D, seed=SEED, shard=r) for r in SPLITS[0]]
    for t, x in enumerate(batches):
        f = np.asfortranarray(x)
        spaced = np.zeros(2 * len(x), np.float32)
        spaced[::2] = mfc.clip_factors(f, shards[0].clip_norm)
        clips = spaced[::2]
        assert not clips.flags.c_contiguous or len(x) <= 1
        parts = [s.step_examples(f[:, a:b], clips=clips) for (a, b), s in zip(SPLITS[0], shards)]
        assert np.array_equal(bits(np.concatenate(parts)), bits(expected[t])), t


@pytest.mark.parametrize("name", ["banded", "bandmf", "bandmf-momentum"])
def test_swapped_or_wrong_factors_change_the_release(name, blobs):
    """Each example's factor is its own: two examples' factors swapped on one shard (two ranks
    that exchanged a slice of the factors), or a shard clipping its own columns, release
    something else than the unsharded step."""
    m = blobs[name]
    batches = step_batches(10, m.report["clip_norm"], seed=12)
    whole = unsharded(m, batches)

    def swapped(x, zeta, shard):
        f = mfc.clip_factors(x, zeta)
        if shard == 1 and len(f) >= 2:
            f[[0, -1]] = f[[-1, 0]]
        return f

    def own_columns(x, zeta, shard):
        a, b = SPLITS[0][shard]
        return mfc.clip_factors(np.ascontiguousarray(x[:, a:b]), zeta)

    for wrong in (swapped, own_columns):
        got = sharded(m, batches, SPLITS[0], wrong)
        assert any(not np.array_equal(bits(g), bits(w)) for g, w in zip(got, whole)), wrong
        # The first shard of the swap is untouched: its coordinates still agree.
        if wrong is swapped:
            assert all(np.array_equal(bits(g[:5]), bits(w[:5])) for g, w in zip(got, whole))


def test_refusals_name_clips_and_change_nothing(blobs):
    m = blobs["bandmf"]
    x = np.concatenate(step_batches(10, m.report["clip_norm"], seed=3))
    f = mfc.clip_factors(x, m.report["clip_norm"])
    shard = mfc.Stream(m, D, seed=SEED, shard=(2, 6))
    part = x[:, 2:6]
    with pytest.raises(mfc.MfcError, match=r"clips=mfc\.clip_factors"):
        shard.step_examples(part)
    with pytest.raises(TypeError, match="clips.*float64"):
        shard.step_examples(part, clips=f.astype(np.float64))
    with pytest.raises(TypeError, match="clips"):
        shard.step_examples(part, clips=list(f))
    for wrong in (f[:-1], np.append(f, np.float32(1.0)), f.reshape(1, -1)):
        with pytest.raises(mfc.MfcError, match=r"clips: expected shape \(%d,\)" % len(x)):
            shard.step_examples(part, clips=wrong)
    for bad in (1.5, -0.25, np.nan, np.inf):
        g = f.copy()
        g[1] = bad
        with pytest.raises(mfc.MfcError, match=r"clips\[1\] = .* in \[0, 1\]"):
            shard.step_examples(part, clips=g)
    with pytest.raises(mfc.MfcError, match=r"expected shape \(m, 4\)"):
        shard.step_examples(x, clips=f)
    bad = part.copy()
    bad[1, 2] = np.nan
    with pytest.raises(mfc.StreamError, match="example 1, coordinate 2"):
        shard.step_examples(bad, clips=f)
    assert shard.steps_released == 0
    # Unchanged: the next step is the first.
    fresh = mfc.Stream(m, D, seed=SEED, shard=(2, 6))
    assert np.array_equal(
        bits(shard.step_examples(part, clips=f)), bits(fresh.step_examples(part, clips=f))
    )
    # An unsharded stream clips each example itself and refuses factors.
    whole = mfc.Stream(m, D, seed=SEED)
    with pytest.raises(mfc.MfcError, match="clips is for shards only"):
        whole.step_examples(x, clips=f)
    assert whole.steps_released == 0
    # A "shard" of the whole row is the whole row: it clips itself, or takes the factors.
    full = [mfc.Stream(m, D, seed=SEED, shard=(0, D)) for _ in range(2)]
    expected = bits(whole.step_examples(x))
    assert np.array_equal(bits(full[0].step_examples(x)), expected)
    assert np.array_equal(bits(full[1].step_examples(x, clips=f)), expected)


def test_clip_factors_refusals():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match="float64"):
        mfc.clip_factors(x.astype(np.float64), 1.0)
    with pytest.raises(mfc.MfcError, match=r"\(m, d\)"):
        mfc.clip_factors(x[0], 1.0)
    assert mfc.clip_factors(np.zeros((0, 4), np.float32), 1.0).shape == (0,)
    assert mfc.clip_factors(np.zeros((2, 0), np.float32), 1.0).tolist() == [1.0, 1.0]


def test_a_shard_checkpoint_restores_into_the_same_coordinates_only(blobs):
    """A restart with another split: the ranks whose range changed refuse their old checkpoint;
    the same range resumes bit for bit."""
    m = blobs["bandmf"]
    batches = step_batches(8, m.report["clip_norm"], seed=21)
    zeta = m.report["clip_norm"]
    run = mfc.Stream(m, D, seed=SEED, shard=(5, 10))
    reference = [run.step_examples(x[:, 5:], clips=mfc.clip_factors(x, zeta)) for x in batches]
    first = mfc.Stream(m, D, seed=SEED, shard=(5, 10))
    for x in batches[:4]:
        first.step_examples(x[:, 5:], clips=mfc.clip_factors(x, zeta))
    saved = first.checkpoint()
    for other in [(1, 7), (7, 10), (4, 9)]:
        s = mfc.Stream(m, D, seed=SEED, shard=other)
        with pytest.raises(mfc.StreamError, match="dimension or shard"):
            s.restore(saved, released=4)
        assert s.steps_released == 0
    resumed = mfc.Stream(m, D, seed=SEED, shard=(5, 10))
    resumed.restore(saved, released=4)
    for x, r in zip(batches[4:], reference[4:]):
        got = resumed.step_examples(x[:, 5:], clips=mfc.clip_factors(x, zeta))
        assert np.array_equal(bits(got), bits(r))
