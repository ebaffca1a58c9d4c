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
        """A mechanism from a blob's bytes, checked as a device checks it: checksum, version, every
        field (``BlobError``).

        Args:
            data: the blob, ``bytes``, ``bytearray``, ``memoryview`` or any buffer of bytes (copied)."""
    @staticmethod
    def load(path: Union[str, "PathLike[str]"]) -> "Mechanism":
        """A mechanism from an .mfc file. A file that cannot be read raises the ``OSError`` of its
        cause (``FileNotFoundError``, ``PermissionError``, ... with ``filename``); one that is not a
        valid blob raises ``BlobError``.

        Args:
            path: the file, a ``str`` or ``os.PathLike``."""
    def save(self, path: Union[str, "PathLike[str]"]) -> None:
        """Writes the blob to a file (the ``OSError`` of the cause if it cannot).

        Args:
            path: the file, a ``str`` or ``os.PathLike`` (overwritten if it exists)."""
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
        """``(B, C)``: the decoder B̂ and the encoder Ĉ as float64 arrays, from the f32 coefficients
        the blob stores, with B̂ Ĉ = A. sqrt(L) = sens(Ĉ)·‖B̂‖_F, and the sensitivity under the blob's
        participation schema is a function of Ĉ (single participation: its largest column norm). FFT
        blobs: B̂ is n x 2n, Ĉ 2n x n. ``MemoryError`` when the dense matrices (a few n x n float64 at
        once: about 320 GB at n = 10⁵) exceed the machine's memory or cannot be allocated.

        Args:
            workload: the n x n float64 workload matrix A (any layout; read in logical order), needed
                only for a blob of a workload other than the prefix sum that was not compiled in this
                process. Default None."""

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
        """A private stream of a mechanism for rows of ``dim`` coordinates, as the device's runtime
        replays it.

        The blob's recorded sensitivity is checked first as a device checks it (``Mechanism.verify``):
        ``StreamError`` if it is understated, and ``StreamError`` too if it cannot be checked (e.g. a
        custom workload, or an FFT blob under min-separation) unless ``allow_unverified=True``. The
        workspace ((h + r + 2)·dim floats for a banded blob) is allocated fallibly: ``MemoryError``
        when it exceeds the machine's memory.

        Args:
            mechanism: the ``Mechanism`` whose blob the stream replays. Required.
            dim: d, the coordinates of each row, an integer in 1..=2⁵¹ (``ValueError`` naming it
                otherwise). Required.
            seed: the noise's key, 32 bytes (``bytes``, ``bytearray``, ``memoryview``) or 64 hex digits
                as ``mfc simulate --seed`` takes them, for reproducible simulations only (whoever knows
                it knows the noise). Default None: OS entropy.
            shard: ``(start, end)``, 0 <= start < end <= dim: only coordinates start..end of each row
                (banded and bandmf blobs), whose releases equal those coordinates of the unsharded
                stream with the same seed; its ``step`` then needs the whole row's ``clip`` factor.
                Default None (the whole row).
            noise_multiplier: replaces the blob's calibrated σ, a finite number > 0. At or above it
                nothing more is needed; below it, ``StreamError`` (a ``ValueError``) unless
                ``allow_lower_noise=True``. ``privacy`` reports the (ε, δ) recomputed from the stream's
                σ at the blob's δ. Default None: the blob's σ.
            allow_lower_noise: stream a ``noise_multiplier`` below the blob's, with a ``UserWarning``
                stating the weaker (ε, δ). Default False.
            allow_unverified: stream a blob whose sensitivity cannot be verified, with a
                ``UserWarning``. Default False (refused). An understated blob is refused regardless.
            sampler: the ``CyclicPoissonSampling`` the training loop draws its batches with; its
                ``check`` refuses (``ValueError``) a blob of another scheme. Default None; a blob under
                cyclic Poisson sampling streamed without one gives a ``UserWarning``."""
    def step(
        self, x: npt.NDArray[np.float32], clip: Optional[float] = None
    ) -> npt.NDArray[np.float32]:
        """Steps ``x`` through the stream: a float32 row ``(d,)`` gives one release, an ``(m, d)``
        batch m consecutive releases (same shape). A refused call leaves the stream unchanged.

        Args:
            x: the input, float32 of shape ``(d,)`` or ``(m, d)``, any layout: C-contiguous, aligned,
                native-endian ``x`` is read in place with the GIL released (do not write to it from
                another thread meanwhile); column-major, transposed, strided, byte-swapped or
                misaligned ``x`` is copied once in logical order first, so each release is that of
                ``x``'s C-ordered copy. Another dtype: ``TypeError``; a wrong shape, a non-finite value
                or too few steps left: ``MfcError``; the runtime's refusals: ``StreamError``.
            clip: the whole row's clip factor (``mfc.clip_factor``), a number in [0, 1], required by a
                shard (which steps one row at a time) and refused by an unsharded stream, which clips
                each row itself. Default None."""
    def step_examples(
        self,
        examples: npt.NDArray[np.float32],
        *,
        clips: Optional[npt.NDArray[np.float32]] = None,
    ) -> npt.NDArray[np.float32]:
        """A training step: the step's m examples, each clipped to ζ by itself (the unit of privacy
        is the example), their sum entering the stream; returns the step's release ``(d,)``. A
        non-finite value is refused (``StreamError``) naming the example and the coordinate, the
        stream unchanged.

        Args:
            examples: ``(m, d)`` float32 (any layout, as ``step``; another dtype: ``TypeError``);
                for a shard (``shard=(start, end)``, not the whole row) ``(m, end - start)``, its
                columns of the step's examples.
            clips: keyword only, default None: required by a shard and refused by an unsharded
                stream (which clips each example itself). The m whole examples' factors,
                ``clip_factors(whole_examples, stream.clip_norm)``, a 1-D float32 array (any
                layout; another dtype: ``TypeError``), each in [0, 1]. The shard's release then
                equals coordinates start..end of the unsharded ``step_examples``, bit for bit. The
                stream cannot check that the factors are the whole examples' (privacy rests on
                the caller)."""
    def step_noise(self) -> npt.NDArray[np.float32]:
        """One step's noise only (banded and fft blobs), for workloads the caller applies. blt
        and bandmf streams refuse it: their ``step`` of an all-zero row releases the noise."""
    def checkpoint(self) -> bytes:
        """The stream's state (every form)."""
    def restore(self, checkpoint: BytesLike, *, released: int) -> None:
        """Loads a checkpoint into this fresh stream (same mechanism, ``dim``, shard and seed as the
        stream that wrote it). Raises ``StreamError`` with the stream unchanged.

        Args:
            checkpoint: the state ``checkpoint`` returned, ``bytes``, ``bytearray`` or ``memoryview``.
            released: the steps already released, as the caller keeps them in durable storage, an
                integer in 0..2³² (keyword only, required); a checkpoint behind it is refused, since
                computing its later steps again would release them twice."""
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
    """Optimizes, compresses and calibrates a mechanism: ``mfc compile`` with its options as
    keywords (``--min-sep`` is ``min_sep``), returning the ``Mechanism`` (its blob and report).

    Every keyword is optional; the options of one form are refused for another (``band``, ``rank``,
    ``refine``, ``gap``: ``form="banded"``; ``stamps``: banded and fft; ``buffers``, ``horizon``:
    ``blt``; ``bands``, ``max_bands``, ``toeplitz``: ``bandmf``). A refusal is a ``CompileError`` (a
    ``ValueError``) naming the keyword, the value and what is allowed (``min_sep=0: expected an
    integer in 1..=4294967295``). Releases the GIL while it runs; Ctrl-C stops it within an
    optimizer iteration (``KeyboardInterrupt``); the estimated memory and time of a long compile
    arrive as a ``UserWarning`` before the work.

    Args:
        steps: the horizon n, an integer in 1..=2³²−1. Required, except with an ``npy:`` or array
            ``workload``, whose size it must then match.
        workload: the workload A: ``"prefix"`` (prefix sums, the default), ``"momentum:BETA"``
            (heavy-ball momentum SGD iterates, BETA in [0, 1), learning rates from ``cooldown``),
            ``"npy:PATH"`` (a square lower-triangular float64 or float32 .npy matrix, as
            ``numpy.save`` writes it) or the n x n float64 numpy matrix A itself (any layout, read
            in logical order).
        cooldown: ``"STEPS:FINAL"``: the momentum workload's learning rate falls linearly from 1 to
            FINAL in (0, 1] over the last STEPS >= 1 steps. Default None (a constant rate);
            refused for another workload.
        epochs: k: each record takes part in at most k steps, an integer in 1..=2³²−1; needs
            ``min_sep`` or ``every``. Default None: single participation.
        min_sep: b-min-separation (jax_privacy's ``min_sep``, federated training): any two
            participations of a record are at least b steps apart, an integer in 1..=steps; needs
            ``epochs``; excludes ``every``. Default None.
        every: fixed epoch order ((k, b)-participation, Choquette-Choo et al. 2023): a record's
            participations are exactly b steps apart, an integer in 1..=steps; needs ``epochs``.
            Default None.
        neighbouring: the neighbouring relation the (ε, δ) is for: ``"add-remove"`` (the default:
            add or remove one record) or ``"replace-one"`` (replace one record: twice the
            sensitivity, so twice the noise).
        form: the decoder form: ``"banded"`` (banded plus low rank, any workload; the default),
            ``"blt"`` (buffered linear Toeplitz, prefix sums), ``"fft"`` or ``"fft-optimal"`` (the
            FFT mechanism or its optimal decoder, prefix sums, no optimization) or ``"bandmf"``
            (BandMF, prefix sums or momentum; the default with ``sampling_prob`` or
            ``dataset_size``).
        stamps: banded and fft forms: repeat an encoder optimized for n/S steps S times, S an
            integer dividing ``steps``, or ``"auto"`` (banded only: S among 1, 2, 4, 5, 8, 10, 16,
            20 by the loss). Default 1.
        band: banded form: h, the decoder's diagonals kept exactly, an integer >= 1. Default 4.
        rank: banded form: r, the rank of the decoder's part below the band, an integer >= 0.
            Default 4.
        refine: banded form: L-BFGS iterations of the refinement after the fit, an integer in
            0..=1000000 (0 ships the fit). Default 50.
        gap: banded form: stop optimizing at this relative duality gap, a number in (0, 1)
            (ignored by the min-separation optimizer, which has no dual bound). Default 1e-6.
        objective: ``"total"`` (the default: the total squared error, sqrt(L)) or ``"max"`` (the
            largest per-step standard deviation, continual counting's objective; every form, the
            banded one under single participation only). ``report["objective"]`` says what was
            optimized (``"none"`` for fft).
        bands: bandmf form: b̂, the encoder's bands, an integer in 1..=min(b, steps) under
            ``min_sep``/``every`` b (1..=steps otherwise), or ``"auto"`` (the default): the fewest
            bands among 1, 2, 4, ... (at most ``max_bands``) within 1% of the best sqrt(L); with
            ``dataset_size``, the bands minimizing the expected error for (ε, δ).
        max_bands: bandmf form with ``bands="auto"``: the most bands tried, an integer >= 1 (the
            device keeps (b̂ + 2)·d floats). Default 256.
        toeplitz: bandmf form: a banded Toeplitz encoder (b̂ coefficients, any horizon) instead of
            a general one (n x b̂ coefficients). Default False.
        buffers: blt form: buffers per coordinate, an integer in 1..=64. Default 4.
        horizon: blt form: the horizon the sensitivity covers and the runtime stops at, an integer
            in steps..=2³²−1, or ``"unbounded"`` (a bound valid for every horizon; single
            participation). Default None: ``steps``.
        clip_norm: ζ, the L2 norm the runtime clips every input row to, a number in [2⁻⁶⁴, 2⁶⁴].
            Default 1.0.
        epsilon: calibrate σ for this ε, a number in (0, 1000); needs ``delta``; excludes
            ``noise_multiplier``. Default None.
        delta: δ of the privacy target, a number in (0, 1). Default None.
        noise_multiplier: record this σ instead of calibrating one, a number in (0, 10⁶); with
            ``delta`` its ε is reported. Default None (with neither ``epsilon`` nor
            ``noise_multiplier`` the blob is uncalibrated).
        sampling_prob: amplified BandMF under cyclic Poisson sampling (Choquette-Choo et al. 2023b):
            the records in ``bands`` groups, step i samples each record of group i mod bands with
            probability q in (0, 1) (``bands=1`` is DP-SGD); σ is calibrated by the accountant and
            the scheme recorded in the blob (``report["sampling"]``; draw batches with
            ``CyclicPoissonSampling``). Implies ``form="bandmf"``; needs a fixed ``bands``;
            add-remove neighbours. Default None.
        dataset_size: instead of ``sampling_prob``: the records N, an integer >= 1, with
            ``batch_size`` (q = batch_size·bands/N); with ``bands="auto"`` and (ε, δ), the bands
            are chosen. Default None.
        batch_size: the expected batch size B, a number > 0, with ``dataset_size``. Default None.
        force: run a compile refused for its estimated memory (the dense banded compile, a BandMF
            one with n x n matrices). Default False.
        progress: None or True (the default): a compile longer than a second writes a progress
            line to ``sys.stderr`` once a second; False silences it; a callable receives the latest
            line (a ``str``) at most every 50 ms instead, and an exception it raises stops the
            compile."""

def calibrate(
    *,
    delta: float,
    epsilon: Optional[float] = None,
    noise_multiplier: Optional[float] = None,
    sampling_prob: Optional[float] = None,
    steps: Optional[int] = None,
    bands: Optional[int] = None,
) -> dict[str, Union[float, int, str]]:
    """σ for (ε, δ), or ε for (σ, δ), of a mechanism normalized to sensitivity 1 (the exact
    analytic Gaussian calibration of ``mfc calibrate``), with zCDP ρ = 1/(2σ²) and what the (ε, δ)
    is for (``privacy_unit``: per record, under the participation schema and neighbouring relation
    of the blob the σ goes into).

    With ``sampling_prob`` and ``steps`` (and ``bands``): DP-SGD (``bands=1``) or amplified BandMF
    (the data in ``bands`` groups, step i Poisson-samples group i mod bands), by the accountant
    (privacy loss distributions, pessimistic: the ε is an upper bound), add-remove neighbours, one
    example the unit; the result then has ``sampling_prob``, ``steps``, ``bands`` and
    ``participations`` instead of ``zcdp_rho``, and ``privacy_unit`` states the scheme.

    Args:
        delta: δ, a number in (0, 1). Required.
        epsilon: the target ε, a finite number > 0: the result's ``noise_multiplier`` is the σ
            reaching it. Give ``epsilon`` or ``noise_multiplier``, not both. Default None.
        noise_multiplier: σ, a finite number > 0: the result's ``epsilon`` is its ε at ``delta``
            (refused beyond ε = 10⁴). Default None.
        sampling_prob: q, the probability that a step samples each record of its group, in
            (0, 1]; needs ``steps``. Default None: no sampling (the analytic Gaussian relation).
        steps: the training steps n, an integer >= 1; with ``sampling_prob`` only. Default None.
        bands: b̂, the groups of cyclic Poisson sampling (BandMF's bands), an integer in
            1..=steps; with ``sampling_prob`` only. Default None, meaning 1 (DP-SGD).

    A refusal is a ``CompileError`` (a ``ValueError``) naming the keyword, its value and the range."""

def clip_factor(row: npt.NDArray[np.float32], clip_norm: float) -> float:
    """The runtime's clip factor min(1, ζ/‖row‖) of a whole float32 row, exactly as a stream
    computes it: what a shard's ``step(x, clip=...)`` needs from the whole row.

    Args:
        row: the whole row, a 1-D float32 numpy array of any layout (another dtype: ``TypeError``;
            another number of dimensions: ``MfcError``).
        clip_norm: ζ, the clip norm (the blob's ``clip_norm``), a number in [2⁻⁶⁴, 2⁶⁴], the
            clip norms the runtime clips exactly; rounded down to float32 as a stream rounds the
            blob's, so ``stream.clip_norm`` gives the stream's own factor.

    Returns the factor, a float in [0, 1]: 0 for a ζ outside that range or a non-finite row
    (which a stream refuses)."""

def clip_factors(
    examples: npt.NDArray[np.float32], clip_norm: float
) -> npt.NDArray[np.float32]:
    """The runtime's clip factor of each row of ``examples``, exactly as an unsharded stream's
    ``step_examples`` computes them: the ``(m,)`` float32 ``clips`` a shard's
    ``Stream.step_examples`` needs.

    Args:
        examples: ``(m, d)`` float32 (any layout; another dtype: ``TypeError``), the whole
            examples.
        clip_norm: ζ, as for ``clip_factor`` (rounded down to float32 as a stream rounds it)."""
