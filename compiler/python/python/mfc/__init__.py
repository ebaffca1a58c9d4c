"""mfc: differentially private continual release with optimal matrix-factorization mechanisms.

Compile a mechanism (``compile``), ship its blob (``Mechanism.bytes``) and replay it on any host
(``Stream``) exactly as the ``no_std`` runtime replays it on a device: for the same blob and seed
the releases are those of ``mfc simulate`` and of the device, bit for bit.

Every ``(epsilon, delta)`` is for one *record* (its input rows, each clipped to the blob's
``clip_norm``) under the blob's participation schema and neighbouring relation; a mechanism's
``report`` states both (``privacy_unit``, ``participation``, ``neighbouring``).

``CyclicPoissonSampling`` (pure Python, ``mfc.sampling``) draws the batches of amplified BandMF
and DP-SGD exactly as the accountant assumes them (Choquette-Choo et al., NeurIPS 2023,
Algorithm 2), and refuses a blob that records another sampling scheme (``check``).

``GradientPrivatizer`` (``mfc.training``) turns each training step's per-example gradients into
the noisy gradient of DP-FTRL or BandMF, for any optimizer; ``mfc.torch``, ``mfc.jax`` and
``mfc.flower`` (imported on their own, each needing its framework) build on it.
"""

from ._mfc import (
    BlobError,
    CompileError,
    Mechanism,
    MfcError,
    Stream,
    StreamError,
    calibrate,
    clip_factor,
    clip_factors,
    compile,
)
from .sampling import CyclicPoissonSampling
from .training import GradientPrivatizer

__all__ = [
    "BlobError",
    "CompileError",
    "CyclicPoissonSampling",
    "GradientPrivatizer",
    "Mechanism",
    "MfcError",
    "Stream",
    "StreamError",
    "calibrate",
    "clip_factor",
    "clip_factors",
    "compile",
]
