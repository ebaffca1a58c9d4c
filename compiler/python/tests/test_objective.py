"""`objective="max"` (issue 32): the max error, the largest per-step standard deviation
sens * max_i ||B[i, :]||, recomputed here with numpy from the blob's dense matrices (test_dense.py
checks every fixture's sensitivity by brute force); a mechanism optimized for it has no larger
max error than the same form optimized for the total loss, which in turn has the smaller sqrt(L).
The keyword is refused where no optimizer of it exists, naming it."""

import numpy as np
import pytest

import mfc

from conftest import FORMS


def max_error(m):
    b, _ = m.to_dense()
    return m.report["sensitivity"] * np.linalg.norm(b, axis=1).max()


@pytest.mark.parametrize(
    "total, maximum",
    [("banded", "banded-max"), ("blt", "blt-max"), ("bandmf-toeplitz-minsep", None)],
)
def test_max_objective_lowers_the_max_error_and_says_so(total, maximum, mechanisms):
    if maximum is None:
        # The same BandMF schema as the min-separation fixture, general encoder, both objectives.
        options = {k: v for k, v in FORMS["bandmf-max-minsep"].items() if k != "objective"}
        t, m = mfc.compile(**options), mechanisms["bandmf-max-minsep"]
    else:
        t, m = mechanisms[total], mechanisms[maximum]
    assert t.report["objective"] == "total" and m.report["objective"] == "max"
    assert max_error(m) == pytest.approx(m.report["max_step_stddev"], rel=1e-9)
    assert max_error(t) == pytest.approx(t.report["max_step_stddev"], rel=1e-9)
    assert max_error(m) <= max_error(t) * (1 + 1e-9), (max_error(m), max_error(t))
    assert t.report["sqrt_loss"] <= m.report["sqrt_loss"] * (1 + 1e-6)


def test_the_banded_max_error_is_certified_within_one_percent(mechanisms):
    r = mechanisms["banded-max"].report
    assert r["max_error_dual_bound"] <= r["optimal_max_error"] <= r["max_step_stddev"]
    assert r["max_step_stddev"] <= 1.01 * r["optimal_max_error"]


def test_objective_refusals_name_the_keyword():
    with pytest.raises(mfc.CompileError, match=r"objective='maxi': expected `total`"):
        mfc.compile(steps=8, objective="maxi")
    with pytest.raises(mfc.CompileError, match=r"objective='max': with form banded needs single"):
        mfc.compile(steps=8, objective="max", epochs=2, min_sep=4)
    with pytest.raises(mfc.CompileError, match=r"stamps=2: expected 1 with objective max"):
        mfc.compile(steps=8, objective="max", stamps=2)
