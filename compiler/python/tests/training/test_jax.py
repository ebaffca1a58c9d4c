"""mfc.jax: the optax privatizer against the numpy stream (``Stream.step_examples`` and the
difference of consecutive releases, divided by the batch size), bit for bit, eager and jitted;
a DP-FTRL (``optax.sgd``) and a BandMF momentum (``optax.sgd(momentum=β)``) training of a tiny
linear model against a hand-written numpy loop on that stream; the refusals."""

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

import mfc  # noqa: E402
from mfc.jax import matrix_factorization_privatizer  # noqa: E402

STEPS, M, SEED = 20, 6, "5a" * 32
# The parameters: a dict, so jax.tree_util's leaf order ('b' before 'w') differs from insertion
# order ('w' first): the reference flattens in the documented (tree_util) order by hand.
SHAPES = {"w": (3, 2), "b": (2,)}
DIM = 8


@pytest.fixture(scope="module")
def blobs():
    return {
        "prefix": mfc.compile(steps=STEPS, band=3, rank=2, epsilon=2.0, delta=1e-6,
                              clip_norm=0.5, progress=False),
        "bandmf-momentum": mfc.compile(steps=STEPS, form="bandmf", bands=3,
                                       workload="momentum:0.9", epsilon=2.0, delta=1e-6,
                                       clip_norm=0.5, progress=False),
    }


def per_example(rng, m=M):
    """Per-example gradients, some longer than ζ = 0.5 (clipped by the runtime)."""
    return {k: rng.standard_normal((m, *s)).astype(np.float32) for k, s in SHAPES.items()}


def rows(grads):
    """The (m, D) rows in jax.tree_util leaf order, written out: 'b' then 'w' (C order)."""
    m = grads["b"].shape[0]
    return np.concatenate([grads["b"].reshape(m, 2), grads["w"].reshape(m, 6)], axis=1)


def unflatten(vector):
    return {"b": vector[:2], "w": vector[2:].reshape(3, 2)}


class Reference:
    """ĝ_t / B from the numpy stream: the release itself (BandMF, another workload) or the
    difference of consecutive releases (prefix sums)."""

    def __init__(self, mechanism, batch):
        self.stream = mfc.Stream(mechanism, DIM, seed=SEED)
        self.previous = np.zeros(DIM, np.float32)
        self.batch = np.float32(batch)

    def noisy(self, examples):
        release = self.stream.step_examples(examples)
        if self.stream.releases_prefix_sums:
            release, self.previous = release - self.previous, release
        return release / self.batch


@pytest.mark.parametrize("blob", ["prefix", "bandmf-momentum"])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_updates_equal_the_numpy_stream(blobs, blob, jit):
    mechanism = blobs[blob]
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    tx = matrix_factorization_privatizer(privatizer, expected_batch_size=M)
    reference = Reference(mechanism, M)
    update = jax.jit(tx.update) if jit else tx.update
    state = tx.init({k: jnp.zeros(s, jnp.float32) for k, s in SHAPES.items()})
    rng = np.random.default_rng(1)
    for t in range(STEPS):
        m = 0 if t == 7 else M  # an empty batch still adds its noise
        grads = per_example(rng, m)
        out, state = update(jax.tree_util.tree_map(jnp.asarray, grads), state)
        expected = unflatten(reference.noisy(rows(grads)))
        for key in SHAPES:
            got = np.asarray(out[key])
            assert got.dtype == np.float32 and got.shape == SHAPES[key]
            assert got.tobytes() == expected[key].tobytes(), (blob, t, key)
        assert int(state.count) == t + 1
    assert privatizer.steps_released == STEPS


def linear_loss(params, x, y):
    """(1/2)(x·w + b − y)², one example: x (3,), y (2,)."""
    return 0.5 * jnp.sum((x @ params["w"] + params["b"] - y) ** 2)


per_example_grads = jax.jit(jax.vmap(jax.grad(linear_loss), in_axes=(None, 0, 0)))


@pytest.mark.parametrize("blob,momentum", [("prefix", None), ("bandmf-momentum", 0.9)])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_training_equals_a_numpy_loop(blobs, blob, momentum, jit):
    """DP-FTRL (optax.sgd) / BandMF momentum (optax.sgd(momentum=0.9)) chained after the
    privatizer, against the same arithmetic written in float32 numpy on the numpy stream
    (eager), or the numpy stream's noisy gradients through a separately jitted optax.sgd (jit);
    the per-example gradients of the reference are numpy's, from its own parameters."""
    lr = 0.05
    mechanism = blobs[blob]
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    tx = optax.chain(
        matrix_factorization_privatizer(privatizer, expected_batch_size=M),
        optax.sgd(lr, momentum=momentum),
    )
    params = {k: jnp.zeros(s, jnp.float32) for k, s in SHAPES.items()}
    state = tx.init(params)

    def step(params, state, x, y):
        updates, state = tx.update(per_example_grads(params, x, y), state, params)
        return optax.apply_updates(params, updates), state

    step = jax.jit(step) if jit else step
    reference = Reference(mechanism, M)
    ref = {k: np.zeros(s, np.float32) for k, s in SHAPES.items()}
    trace = {k: np.zeros(s, np.float32) for k, s in SHAPES.items()}
    sgd = optax.sgd(lr, momentum=momentum)
    sgd_state = sgd.init(ref)

    @jax.jit
    def sgd_step(params, state, noisy):
        updates, state = sgd.update(noisy, state, params)
        return optax.apply_updates(params, updates), state

    rng = np.random.default_rng(2)
    w_true = rng.standard_normal((3, 2)).astype(np.float32)
    for t in range(STEPS):
        x = rng.standard_normal((M, 3)).astype(np.float32)
        y = (x @ w_true).astype(np.float32)
        # The reference's per-example gradients, written out: r = x·w + b − y; ∂w = x rᵀ, ∂b = r.
        r = x @ ref["w"] + ref["b"] - y
        grads = {"w": x[:, :, None] * r[:, None, :], "b": r}
        noisy = unflatten(reference.noisy(rows(grads)))
        if jit:
            # XLA fuses p + (−lr)·g into one FMA under jit, which numpy cannot round alike: the
            # reference applies optax.sgd, jitted, to its own noisy gradients.
            ref, sgd_state = sgd_step(ref, sgd_state, noisy)
            ref = {k: np.asarray(v) for k, v in ref.items()}
        else:
            for k in SHAPES:
                if momentum is None:
                    ref[k] = ref[k] + np.float32(-lr) * noisy[k]
                else:
                    trace[k] = noisy[k] + np.float32(momentum) * trace[k]
                    ref[k] = ref[k] + np.float32(-lr) * trace[k]
        params, state = step(params, state, jnp.asarray(x), jnp.asarray(y))
        for k in SHAPES:
            assert np.asarray(params[k]).tobytes() == ref[k].tobytes(), (blob, t, k)
    assert privatizer.steps_released == STEPS


def test_refusals(blobs):
    mechanism = blobs["prefix"]
    privatizer = mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED))
    tx = matrix_factorization_privatizer(privatizer, expected_batch_size=M)
    state = tx.init(None)
    grads = {k: jnp.zeros((M, *s), jnp.float32) for k, s in SHAPES.items()}
    with pytest.raises(TypeError, match=r"leaf \['b'\] is bfloat16.*astype\(jnp.float32\)"):
        tx.update({**grads, "b": grads["b"].astype(jnp.bfloat16)}, state)
    with pytest.raises(ValueError, match="D=9 coordinates per example, the privatizer dim=8"):
        tx.update({**grads, "b": jnp.zeros((M, 3), jnp.float32)}, state)
    with pytest.raises(ValueError,
                       match=r"leaf \['w'\] has 5 examples, the first leaf 6; pass per-"):
        tx.update({**grads, "w": jnp.zeros((5, 3, 2), jnp.float32)}, state)
    with pytest.raises(ValueError, match="Cannot `vmap` ordered IO callback"):
        jax.vmap(tx.update, in_axes=(0, None))(
            jax.tree_util.tree_map(lambda g: g[None], grads), state
        )
    assert privatizer.steps_released == 0  # nothing refused reached the stream
    with pytest.raises(ValueError, match=r"expected_batch_size=0.0: expected a finite number > 0"):
        matrix_factorization_privatizer(privatizer, expected_batch_size=0)
    with pytest.raises(ValueError, match=r"shard \(0, 4\)"):
        matrix_factorization_privatizer(
            mfc.GradientPrivatizer(mfc.Stream(mechanism, DIM, seed=SEED, shard=(0, 4))),
            expected_batch_size=M,
        )
    # A stale optax state (count behind the privatizer) is refused by the host, stream untouched.
    _, later = tx.update(grads, state)
    with pytest.raises(Exception, match="count=0 differs from the privatizer's steps_released=1"):
        jax.block_until_ready(tx.update(grads, state))
    assert privatizer.steps_released == 1 and int(later.count) == 1
    # jax.pmap is not refused by JAX (the module says so): on one device, one step per call.
    if jax.local_device_count() == 1:
        jax.pmap(lambda g: tx.update(g, later)[0])(jax.tree_util.tree_map(lambda g: g[None], grads))
        assert privatizer.steps_released == 2
