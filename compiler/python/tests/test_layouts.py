"""Every array the package takes is read in logical (C) order, whatever its memory layout:
column-major, transposed, strided, reversed, byte-swapped, misaligned and read-only float32
inputs each give exactly (bit for bit) the release of their C-ordered copy with the same seed,
for `step` (rows and batches) and `step_examples`; `clip_factor`, `compile(workload=A)` and
`to_dense(workload=A)` likewise. Reading a column-major batch in memory order would release
sums of the wrong entries and clip the wrong vectors (issue 27); `step_examples` is also checked
against an independent numpy reference of the clipped sum, so that "equal to the C-ordered
copy" cannot hide a wrong C path.

Byte-swapped arrays are converted (not refused): any float32 array is accepted; other dtypes
raise TypeError naming the dtype."""

import numpy as np
import pytest

import mfc
from conftest import FORMS

SEED = "6b" * 32
D = 5
M = 7  # rows of a batch: M != D, so that reading the transpose would be visible


def misaligned(x):
    """A copy of x whose data starts one byte past an aligned address (numpy's ALIGNED flag off)."""
    buffer = bytearray(x.nbytes + 1)
    y = np.frombuffer(buffer, dtype=x.dtype, offset=1, count=x.size).reshape(x.shape)
    y[...] = x
    assert not y.flags.aligned
    return y


def swapped(x):
    """x's values stored in the other byte order (big-endian on a little-endian machine)."""
    y = x.astype(x.dtype.newbyteorder("S"))
    assert not y.dtype.isnative and np.array_equal(y, x)
    return y


def read_only(x):
    """A read-only copy of x in x's own layout."""
    y = x.copy(order="K")
    y.setflags(write=False)
    return y


def layouts(x):
    """x's values (a 2-D float array) in other memory layouts, each equal to x element by
    element; none but `read-only` is C-contiguous, aligned and native."""
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
    wide[:, ::2] = x
    tall = np.zeros((2 * x.shape[0], x.shape[1]), x.dtype)
    tall[::2] = x
    out = {
        "column-major": np.asfortranarray(x),
        "transposed": np.ascontiguousarray(x.T).T,
        "strided columns": wide[:, ::2],
        "strided rows": tall[::2],
        "reversed": np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1],
        "byte-swapped": swapped(x),
        "byte-swapped column-major": np.asfortranarray(swapped(x)),
        "misaligned": misaligned(x),
        "read-only": read_only(x),
        "read-only column-major": read_only(np.asfortranarray(x)),
    }
    assert out["read-only column-major"].flags.f_contiguous and not out["read-only"].flags.writeable
    for name, y in out.items():
        assert np.array_equal(y, x), name
        assert y.shape == x.shape, name
    return out


LAYOUTS = sorted(layouts(np.zeros((M, D), np.float32)))


def batch(seed=0):
    """M rows of distinct values, some above the clip norm ζ = 1 and some below."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.1, 3.0, (M, 1))
    return (rng.standard_normal((M, D)) * scale).astype(np.float32)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ["banded", "blt", "fft", "bandmf"])
def test_step_equals_the_c_ordered_copy(name, layout, mechanisms):
    m = mechanisms[name]
    x = batch()
    y = layouts(x)[layout]
    expected = mfc.Stream(m, D, seed=SEED).step(x)
    assert same_bits(mfc.Stream(m, D, seed=SEED).step(y), expected), layout
    # Row by row: a row of a column-major array is itself strided.
    s = mfc.Stream(m, D, seed=SEED)
    rows = np.vstack([s.step(y[i]) for i in range(M)])
    assert same_bits(rows, expected), layout


@pytest.mark.parametrize("layout", LAYOUTS)
def test_step_examples_equals_the_c_ordered_copy_and_clips_each_example(layout, mechanisms):
    m = mechanisms["banded"]
    zeta = m.report["clip_norm"]
    x = batch(seed=1)
    assert (np.linalg.norm(x, axis=1) > zeta).any() and (np.linalg.norm(x, axis=1) < zeta).any()
    y = layouts(x)[layout]
    expected = mfc.Stream(m, D, seed=SEED).step_examples(x)
    got = mfc.Stream(m, D, seed=SEED).step_examples(y)
    assert same_bits(got, expected), layout
    # Independently of the C path: against a twin stream stepping zero (the same noise), the
    # release moved by the sum of the examples x[e, :], each clipped to zeta by itself.
    noise_only = mfc.Stream(m, D, seed=SEED).step(np.zeros(D, np.float32))
    x64 = x.astype(np.float64)
    norms = np.linalg.norm(x64, axis=1, keepdims=True)
    reference = (x64 * np.minimum(1.0, zeta / norms)).sum(axis=0)
    np.testing.assert_allclose(got - noise_only, reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_clip_factor_reads_the_row_in_order(layout):
    x = batch(seed=2)
    for i in range(M):
        row = layouts(x)[layout][i]
        assert mfc.clip_factor(row, 1.0) == mfc.clip_factor(np.ascontiguousarray(x[i]), 1.0)


def test_only_checked_layouts_are_read_in_place():
    """The seam the privacy bug went through: only C-contiguous, aligned, native float32 memory
    is borrowed; a column-major array is contiguous too, and must not be."""
    x = batch()
    assert mfc._mfc._reads_in_place(x)
    assert mfc._mfc._reads_in_place(x[2])  # a row of a C array is C-contiguous
    for layout, y in layouts(x).items():
        if layout == "read-only":
            assert mfc._mfc._reads_in_place(y)
        else:
            assert not mfc._mfc._reads_in_place(y), layout


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.complex64])
def test_other_dtypes_are_refused_naming_the_dtype(dtype, mechanisms):
    s = mfc.Stream(mechanisms["banded"], D, seed=SEED)
    x = np.ones((M, D), dtype)
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        s.step(x)
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        s.step_examples(x)
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        mfc.clip_factor(x[0], 1.0)
    assert s.steps_released == 0


def momentum(n, beta=0.9):
    a = np.zeros((n, n))
    for t in range(n):
        for s in range(t + 1):
            a[t, s] = (1 - beta ** (t - s + 1)) / (1 - beta)
    return a


def test_workload_matrices_are_read_in_order():
    """`compile(workload=A)` gives the same blob for every layout of A (compiling is
    deterministic), and `to_dense(workload=A)` the same matrices; A is lower triangular, so
    reading it transposed would be refused or compile another workload."""
    n = 12
    a = momentum(n)
    options = dict(band=2, rank=1, refine=5, epsilon=2.0, delta=1e-6)
    reference = mfc.compile(workload=a, **options)
    b0, c0 = mfc.Mechanism.from_bytes(reference.bytes).to_dense(workload=a)
    for layout in ["column-major", "byte-swapped", "misaligned", "reversed", "strided rows"]:
        y = layouts(a)[layout]
        assert mfc.compile(workload=y, **options).bytes == reference.bytes, layout
        b, c = mfc.Mechanism.from_bytes(reference.bytes).to_dense(workload=y)
        assert np.array_equal(b, b0) and np.array_equal(c, c0), layout
    with pytest.raises(TypeError, match="float32"):
        mfc.compile(workload=a.astype(np.float32), **options)

