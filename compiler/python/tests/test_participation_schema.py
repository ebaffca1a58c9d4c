"""``Mechanism.report["participation_schema"]``: the stored participation schema as exact fields
(what ``mfc.flower``'s sampler enforces), for each schema the compiler takes, from the compile
report and from the loaded blob's header alike, against the options it was compiled with."""

import pytest

import mfc

CASES = [
    (dict(), {"kind": "single", "max_participations": 1}),
    (dict(epochs=4, min_sep=5),
     {"kind": "min-separation", "max_participations": 4, "separation": 5}),
    (dict(epochs=3, every=8),
     {"kind": "fixed-epoch-order", "max_participations": 3, "separation": 8}),
    (dict(sampling_prob=0.25, bands=4),
     {"kind": "cyclic-poisson", "cycle_length": 4, "sampling_prob": 0.25}),
]


@pytest.mark.parametrize("options,expected", CASES, ids=[c[1]["kind"] for c in CASES])
def test_participation_schema(options, expected):
    m = mfc.compile(steps=24, form="bandmf", epsilon=2.0, delta=1e-6, progress=False,
                    **({"bands": 3} | options))
    assert m.report["participation_schema"] == expected
    assert mfc.Mechanism.from_bytes(m.bytes).report["participation_schema"] == expected
