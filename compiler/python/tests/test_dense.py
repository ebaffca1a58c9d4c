"""`Mechanism.to_dense()`: numpy recomputes each blob's sensitivity (by brute force over the
participation patterns of its schema) and its sqrt(L) = sens * ||B||_F from the dense matrices,
to 1e-9 relative, independently of the compiler's structured computations."""

import itertools

import numpy as np
import pytest

from conftest import FORMS

REL = 1e-9


def patterns(n, k, separation, exact):
    """Every participation pattern of at most k steps, `separation` apart (exactly, or at least)."""
    if k == 1:
        return [(i,) for i in range(n)]
    if exact:
        return [
            tuple(range(s, n, separation))[:j]
            for s in range(n)
            for j in range(1, k + 1)
        ]
    return [
        p
        for j in range(1, k + 1)
        for p in itertools.combinations(range(n), j)
        if all(b - a >= separation for a, b in zip(p, p[1:]))
    ]


def brute_force_sensitivity(c, options):
    """(exact, absolute-Gram bound) over the schema's patterns p, X = C'C: the exact value is
    max sqrt(1' X[p, p] 1) (aligned unit contributions), valid where X is non-negative on every
    pattern (else None); the bound is max sqrt(sum |X[p, p]|). Doubled for replace-one."""
    x = c.T @ c
    k = options.get("epochs", 1)
    sep = options.get("every") or options.get("min_sep") or c.shape[1]
    exact, bound, nonnegative = 0.0, 0.0, True
    for p in patterns(c.shape[1], k, sep, exact="every" in options):
        block = x[np.ix_(p, p)]
        nonnegative &= bool((block - np.diag(np.diag(block))).min() >= 0)
        exact = max(exact, block.sum())
        bound = max(bound, np.abs(block).sum())
    factor = 2.0 if options.get("neighbouring") == "replace-one" else 1.0
    return (factor * np.sqrt(exact) if nonnegative else None), factor * np.sqrt(bound)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_numpy_recomputes_sensitivity_and_sqrt_loss(name, mechanisms):
    m = mechanisms[name]
    options = FORMS[name]
    report = m.report
    b, c = m.to_dense()
    n = m.steps
    if m.form == "fft":
        assert b.shape == (n, 2 * n) and c.shape == (2 * n, n)
    else:
        assert b.shape == c.shape == (n, n)
    if options.get("workload", "prefix") == "prefix":
        a = np.tril(np.ones((n, n)))
        np.testing.assert_allclose(b @ c, a, rtol=0, atol=1e-9 * n)
    exact, bound = brute_force_sensitivity(c, options)
    method = report["sensitivity_method"]
    if report["sensitivity_exact"]:
        assert exact == pytest.approx(report["sensitivity"], rel=REL), method
    elif "sqrt(Σ|X[π,π]|)" in method:
        assert bound == pytest.approx(report["sensitivity"], rel=REL), method
    else:
        # Another upper bound: never below the exact value or the Gram bound's floor.
        floor = exact if exact is not None else bound / np.sqrt(options.get("epochs", 1))
        assert floor <= report["sensitivity"] * (1 + REL), method
    # The optimal FFT decoder's error figures come from the exact generator's closed form, not
    # from the stored f32 one: they agree to the generator's residual ||M T - I||_1 only.
    rel = max(REL, 2 * report.get("generator_residual", 0.0))
    sqrt_loss = report["sensitivity"] * np.linalg.norm(b)
    assert sqrt_loss == pytest.approx(report["sqrt_loss"], rel=rel)
    # Per-step standard deviations: sens * ||B[i, :]||.
    stddev = report["sensitivity"] * np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(stddev, report["step_stddev"], rtol=rel)


def test_to_dense_of_a_loaded_custom_blob_needs_the_workload(mechanisms):
    import mfc

    m = mechanisms["banded-momentum"]
    loaded = mfc.Mechanism.from_bytes(m.bytes)
    with pytest.raises(mfc.MfcError, match="workload="):
        loaded.to_dense()
    # With A given, the same matrices as the compiled mechanism's.
    b, c = m.to_dense()
    a = b @ c
    b2, c2 = loaded.to_dense(workload=a)
    np.testing.assert_array_equal(b, b2)
    np.testing.assert_allclose(c, c2, rtol=1e-9, atol=1e-12)


def test_workload_given_as_an_array_compiles_like_its_name(mechanisms):
    """`compile(workload=A)` with the momentum matrix A optimizes the same problem as
    `workload="momentum:0.9"`: the same decoder and encoder, sensitivity and sqrt(L)."""
    import mfc

    named = mechanisms["banded-momentum"]
    b, c = named.to_dense()
    a = np.tril(b @ c)  # A = B C, lower triangular up to rounding
    options = {k: v for k, v in FORMS["banded-momentum"].items() if k not in ("workload", "steps")}
    given = mfc.compile(workload=a, **options)
    assert given.report["workload"] == "numpy array 24×24"
    for key in ["sensitivity", "sqrt_loss"]:
        assert given.report[key] == pytest.approx(named.report[key], rel=1e-6), key
    b2, c2 = given.to_dense()
    np.testing.assert_allclose(b2 @ c2, a, atol=1e-9)
    with pytest.raises(mfc.CompileError, match="numpy array 2×2: .*lower triangular"):
        mfc.compile(workload=np.array([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(TypeError, match="float64"):
        mfc.compile(workload=a.astype(np.float32))
