"""Type stubs of mfc's extension module (PyO3)."""

from os import PathLike
from typing import Any, Callable, Optional, Tuple, Union

BytesLike = Union[bytes, bytearray, memoryview]

import numpy as np
import numpy.typing as npt

class MfcError(ValueError):
    """Base class of mfc's errors: the message is the library's own."""

class CompileError(MfcError):
    """The compiler refused the options (naming the option, the value and the allowed range) or failed."""

class BlobError(MfcError):
    """A blob is malformed, corrupted (checksum mismatch), of another version or out of range."""

class StreamError(MfcError):
    """The runtime refused a stream, a step, a checkpoint or a restore; the stream is unchanged."""

class Mechanism:
    """A compiled mechanism: the .mfc blob a device replays, its report and dense matrices."""

    @staticmethod
    def from_bytes(data: BytesLike) -> "Mechanism":
        """A mechanism from a blob's bytes (``bytes``, ``bytearray`` or ``memoryview``, copied),
        checked: checksum, version, every field (``BlobError``)."""
    @staticmethod
    def load(path: Union[str, "PathLike[str]"]) -> "Mechanism":
        """A mechanism from an .mfc file: the ``OSError`` of the cause if it cannot be read
        (``FileNotFoundError``, ``PermissionError``, ... with ``filename``), ``BlobError`` if it
        is not a valid blob."""
    def save(self, path: Union[str, "PathLike[str]"]) -> None:
        """Writes the blob to ``path`` (the ``OSError`` of the cause if it cannot)."""
    @property
    def bytes(self) -> bytes:
        """The blob's bytes, as a device stores them."""
    @property
    def report(self) -> dict[str, Any]:
        """``mfc compile --json``'s report (compiled here) or the blob's header (loaded); both
        state ``privacy_unit``, ``participation`` and ``neighbouring`` next to (epsilon, delta),
        and ``participation_schema``, the stored schema as exact fields: ``kind`` (``single``,
        ``fixed-epoch-order``, ``min-separation`` or ``cyclic-poisson``) with
        ``max_participations`` (k) and ``separation`` (b: exactly b apart for fixed epoch order,
        at least b apart for min-separation), or ``cycle_length`` and ``sampling_prob``."""
    def verify(self) -> dict[str, Any]:
        """The device's check of the recorded sensitivity (as ``mfc inspect``): ``verdict`` is
        ``verified`` (with ``recorded``, ``bound``, ``operations``), ``unverifiable`` (with
        ``reason``; ``Stream`` refuses it unless ``allow_unverified=True``) or ``refused`` (with
        ``reason``; ``Stream`` refuses such a blob)."""
    @property
    def form(self) -> str:
        """``banded``, ``blt``, ``fft`` or ``bandmf``."""
    @property
    def steps(self) -> int:
        """The horizon n."""
    def to_dense(
        self, workload: Optional[npt.NDArray[np.float64]] = None
    ) -> Tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(B, C)``: decoder and encoder from the stored f32 coefficients, ``B @ C = A``;
        ``sqrt_loss = sens(C) * ||B||_F``. FFT blobs: B is n x 2n, C is 2n x n. ``workload``
        (the n x n float64 A, any layout) is needed only for a non-prefix blob not compiled in
        this process. ``MemoryError`` when the dense matrices (a few n x n float64 at once,
        about 320 GB at n = 10**5) exceed the machine's memory or cannot be allocated."""

class Stream:
    """A private stream of a mechanism: one release per step, as the device's runtime computes it."""

    def __init__(
        self,
        mechanism: Mechanism,
        dim: int,
        seed: Union[bytes, str, None] = None,
        *,
        shard: Optional[Tuple[int, int]] = None,
        noise_multiplier: Optional[float] = None,
        allow_lower_noise: bool = False,
        allow_unverified: bool = False,
        sampler: Optional[Any] = None,
    ) -> None:
        """``dim``: 1 <= dim <= 2**51 (``ValueError`` naming it otherwise; ``MemoryError`` if
        the workspace exceeds the machine's memory). ``seed``: 32 bytes or 64 hex digits
        (reproducible simulations only), OS entropy when absent. ``shard=(start, end)``: only
        those coordinates, 0 <= start < end <= dim (banded and bandmf blobs).

        The blob is verified first (``Mechanism.verify``): ``StreamError`` if its recorded
        sensitivity is understated, ``StreamError`` too if it cannot be checked unless
        ``allow_unverified=True`` (then a ``UserWarning``).

        ``noise_multiplier``: replaces the blob's calibrated sigma. Below it, ``StreamError``
        (a ``ValueError``) unless ``allow_lower_noise=True`` (then a ``UserWarning`` stating the
        weaker (epsilon, delta)); at or above it, nothing needed. ``privacy`` reports the
        (epsilon, delta) recomputed from the stream's sigma at the blob's delta.

        ``sampler``: the ``CyclicPoissonSampling`` the training loop draws its batches with;
        its ``check`` refuses (``ValueError``) a blob of another scheme. A blob under cyclic
        Poisson sampling streamed without one gives a ``UserWarning``."""
    def step(
        self, x: npt.NDArray[np.float32], clip: Optional[float] = None
    ) -> npt.NDArray[np.float32]:
        """One row ``(d,)`` -> one release; a batch ``(m, d)`` -> m consecutive releases.
        ``clip``: the whole row's clip factor (required by a shard, one row at a time; refused
        by an unsharded stream, which clips each row itself). A refused call leaves the
        stream unchanged. Any float32 layout gives the release of ``x``'s C-ordered copy:
        C-contiguous, aligned, native-endian ``x`` is read in place with the GIL released (do
        not write to it from another thread meanwhile); column-major, transposed, strided,
        byte-swapped or misaligned ``x`` is copied once in logical order first. Another dtype:
        ``TypeError``."""
    def step_examples(
        self,
        examples: npt.NDArray[np.float32],
        *,
        clips: Optional[npt.NDArray[np.float32]] = None,
    ) -> npt.NDArray[np.float32]:
        """One training step from ``(m, d)`` float32 examples (any layout, as ``step``), each
        clipped by itself; a non-finite value is refused naming the example and coordinate.

        A shard (``shard=(start, end)``, not the whole row) takes ``(m, end - start)``, its
        columns of the examples, and requires ``clips``: the m whole examples' factors,
        ``clip_factors(whole_examples, stream.clip_norm)``, a 1-D float32 array (any layout;
        another dtype: ``TypeError``), each in [0, 1]. Its release then equals coordinates
        start..end of the unsharded ``step_examples``, bit for bit. The stream cannot check
        that the factors are the whole examples' (privacy rests on the caller). An unsharded
        stream refuses ``clips``."""
    def step_noise(self) -> npt.NDArray[np.float32]:
        """One step's noise only (banded and fft blobs), for workloads the caller applies. blt
        and bandmf streams refuse it: their ``step`` of an all-zero row releases the noise."""
    def checkpoint(self) -> bytes:
        """The stream's state (every form)."""
    def restore(self, checkpoint: BytesLike, *, released: int) -> None:
        """Loads a checkpoint into this fresh stream; refuses one behind ``released``
        (0 <= released < 2**32)."""
    @property
    def privacy(self) -> dict[str, Any]:
        """What the releases guarantee, recomputed from the stream's noise multiplier at the
        blob's delta: ``epsilon`` (inf beyond 1e4; None without a delta), ``delta``,
        ``noise_multiplier``, ``zcdp_rho``, ``blob_noise_multiplier``, ``blob_epsilon``,
        ``lowered``, ``privacy_unit``, ``participation``, ``neighbouring``, ``verified``,
        ``verification`` and ``statement`` (one sentence)."""
    @property
    def steps_released(self) -> int: ...
    @property
    def horizon(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def row_dim(self) -> int: ...
    @property
    def shard(self) -> Optional[Tuple[int, int]]: ...
    @property
    def form(self) -> str: ...
    @property
    def releases_prefix_sums(self) -> bool:
        """Whether ``step`` releases private prefix sums; otherwise a bandmf stream releases
        the noised input ``x_t + noise`` (the caller applies the workload) and a banded or fft
        stream only its noise (``step_noise``)."""
    @property
    def clip_norm(self) -> float: ...

def compile(
    *,
    steps: Optional[int] = None,
    workload: Union[str, npt.NDArray[np.float64], None] = None,
    cooldown: Optional[str] = None,
    epochs: Optional[int] = None,
    min_sep: Optional[int] = None,
    every: Optional[int] = None,
    neighbouring: str = "add-remove",
    form: Optional[str] = None,
    stamps: Union[int, str, None] = None,
    band: Optional[int] = None,
    rank: Optional[int] = None,
    refine: Optional[int] = None,
    gap: Optional[float] = None,
    objective: Optional[str] = None,
    bands: Union[int, str, None] = None,
    max_bands: Optional[int] = None,
    toeplitz: bool = False,
    buffers: Optional[int] = None,
    horizon: Union[int, str, None] = None,
    clip_norm: float = 1.0,
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    noise_multiplier: Optional[float] = None,
    sampling_prob: Optional[float] = None,
    dataset_size: Optional[int] = None,
    batch_size: Optional[float] = None,
    force: bool = False,
    progress: Union[bool, Callable[[str], object], None] = None,
) -> Mechanism:
    """``mfc compile`` with its options as keywords (``--min-sep`` is ``min_sep``); ``workload``
    is ``prefix`` (the default), ``momentum:BETA``, ``npy:PATH`` or the n x n float64 matrix A
    (any layout). The options of one form are refused for another: ``band`` (default 4),
    ``rank`` (4), ``refine`` (50), ``gap`` (1e-6) and ``stamps`` (1 or ``"auto"``) for
    ``form="banded"`` (``stamps`` also for ``fft``/``fft-optimal``); ``buffers`` (4) and
    ``horizon`` (an int or ``"unbounded"``) for ``blt``; ``bands`` (an int or ``"auto"``),
    ``max_bands`` (256) and ``toeplitz`` for ``bandmf``. ``objective``: ``"total"`` (the default:
    the total squared error sqrt(L)) or ``"max"`` (the largest per-step standard deviation,
    continual counting's objective; every form, ``banded`` under single participation only;
    ``fft`` has nothing to choose); ``report["objective"]`` says what was optimized (``"none"``
    for ``fft``). ``form`` defaults to ``banded``, or
    ``bandmf`` with ``sampling_prob``: amplified BandMF under cyclic Poisson sampling (the
    records in ``bands`` groups, step i samples group i mod bands with probability
    ``sampling_prob``; ``bands=1`` is DP-SGD), sigma calibrated by the accountant and the scheme
    recorded in the blob (``report["sampling"]``; draw batches with ``CyclicPoissonSampling``).
    Instead of ``sampling_prob``, ``dataset_size`` and ``batch_size`` give q = batch*bands/dataset,
    and with ``bands="auto"`` and (epsilon, delta) choose the bands minimizing the expected error.
    A refusal (``CompileError``) names the keyword, the value and what is allowed
    (``min_sep=0: expected an integer in 1..=4294967295``). ``force`` runs a compile refused for
    its estimated memory; that estimate, and the time of a long compile, arrive as a
    ``UserWarning`` before the work. ``progress``: by default a compile longer than a second
    writes a progress line to ``sys.stderr`` once a second; ``False`` silences it; a callable
    receives the latest line (a ``str``) at most every 50 ms instead. Ctrl-C stops the compile
    within an optimizer iteration (``KeyboardInterrupt``)."""

def calibrate(
    *,
    delta: float,
    epsilon: Optional[float] = None,
    noise_multiplier: Optional[float] = None,
    sampling_prob: Optional[float] = None,
    steps: Optional[int] = None,
    bands: Optional[int] = None,
) -> dict[str, Union[float, int, str]]:
    """sigma for (epsilon, delta) or epsilon for (sigma, delta), sensitivity 1, with zCDP rho and
    ``privacy_unit``: what the (epsilon, delta) is for (per record under the schema and relation
    of the blob the sigma goes into).

    With ``sampling_prob`` and ``steps`` (and ``bands``, default 1): DP-SGD (``bands=1``) or
    amplified BandMF (the data in ``bands`` groups, step i Poisson-samples group i mod bands with
    probability ``sampling_prob``), by the accountant (privacy loss distributions, pessimistic:
    epsilon an upper bound), add-remove neighbours, one example the unit; the result then has
    ``sampling_prob``, ``steps``, ``bands`` and ``participations`` instead of ``zcdp_rho``."""

def clip_factor(row: npt.NDArray[np.float32], clip_norm: float) -> float:
    """The runtime's clip factor min(1, clip_norm/||row||) of a whole 1-D float32 row (any
    layout); ``clip_norm`` rounded down to float32 as a stream rounds the blob's."""

def clip_factors(
    examples: npt.NDArray[np.float32], clip_norm: float
) -> npt.NDArray[np.float32]:
    """The runtime's clip factor of each row of ``(m, d)`` float32 ``examples`` (any layout):
    the ``(m,)`` float32 ``clips`` a shard's ``Stream.step_examples`` needs, exactly as an
    unsharded stream computes them; ``clip_norm`` rounded down to float32 as in
    ``clip_factor``."""
