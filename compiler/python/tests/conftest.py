"""Shared fixtures: one small mechanism of every form, compiled once per session, and the `mfc`
binary (for the bit-for-bit comparison with `mfc simulate`). The fixtures the device's check
cannot verify (UNVERIFIABLE) are streamed only with the opt-in, `open_stream`."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import mfc

REPO = Path(__file__).resolve().parents[3]

# Small mechanisms of every form, with their compile options (the CLI's, as keywords).
FORMS = {
    "banded": dict(steps=24, band=3, rank=2, epsilon=2.0, delta=1e-6),
    "banded-momentum": dict(
        steps=24, workload="momentum:0.9", band=3, rank=2, epsilon=2.0, delta=1e-6
    ),
    "banded-every": dict(steps=24, band=3, rank=2, epochs=3, every=8, epsilon=2.0, delta=1e-6),
    "blt": dict(steps=24, form="blt", buffers=2, epsilon=2.0, delta=1e-6),
    "fft": dict(steps=24, form="fft", stamps=2, epsilon=2.0, delta=1e-6),
    "fft-optimal": dict(steps=24, form="fft-optimal", epsilon=2.0, delta=1e-6),
    "bandmf": dict(steps=24, form="bandmf", bands=3, epsilon=2.0, delta=1e-6),
    "bandmf-toeplitz-minsep": dict(
        steps=24, form="bandmf", bands=4, toeplitz=True, epochs=3, min_sep=6,
        neighbouring="replace-one", epsilon=2.0, delta=1e-6,
    ),
    "bandmf-momentum": dict(
        steps=24, form="bandmf", bands=2, workload="momentum:0.9", epsilon=2.0, delta=1e-6
    ),
    # Optimized for the max error (issue 32): every check above holds for them as well.
    "banded-max": dict(steps=24, band=3, rank=2, objective="max", epsilon=2.0, delta=1e-6),
    "blt-max": dict(steps=24, form="blt", buffers=2, objective="max", epsilon=2.0, delta=1e-6),
    "bandmf-max-minsep": dict(
        steps=24, form="bandmf", bands=4, epochs=3, min_sep=6, objective="max",
        epsilon=2.0, delta=1e-6,
    ),
}


# The fixtures whose recorded sensitivity the device's check cannot verify (a banded blob stores
# only the label of its custom workload A): `Stream` refuses them unless allow_unverified=True.
UNVERIFIABLE = {"banded-momentum"}


def open_stream(name, mechanism, *args, **kwargs):
    """`mfc.Stream` of the fixture `name`: an unverifiable one opts in by name, and warns."""
    if name in UNVERIFIABLE:
        with pytest.warns(UserWarning, match="sensitivity unverified"):
            return mfc.Stream(mechanism, *args, allow_unverified=True, **kwargs)
    return mfc.Stream(mechanism, *args, **kwargs)


@pytest.fixture(scope="session")
def mechanisms():
    return {name: mfc.compile(**options) for name, options in FORMS.items()}


@pytest.fixture(scope="session")
def mfc_binary():
    """The CLI, built by the workspace (`cargo build --release`), or MFC_BINARY."""
    given = os.environ.get("MFC_BINARY")
    if given:
        return given
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    binary = target / "release" / "mfc"
    if not binary.exists():
        cargo = shutil.which("cargo")
        if cargo is None:
            pytest.fail("the mfc binary is needed (set MFC_BINARY or install cargo)")
        subprocess.run(
            [cargo, "build", "--release", "-q", "-p", "mfc-cli", "--bin", "mfc"],
            cwd=REPO,
            check=True,
        )
    return str(binary)


@pytest.fixture(scope="session")
def forged_blobs(tmp_path_factory):
    """The forged-blob suite of issue 27 (`tests/src/forge.rs`): `[(name, expected, path)]`, from
    MFC_FORGED_DIR (written by `.ci/python.sh`) or written here with `cargo run -p mfc-tests --bin
    forge-blobs`."""
    given = os.environ.get("MFC_FORGED_DIR")
    if given:
        directory = Path(given)
    else:
        cargo = shutil.which("cargo")
        if cargo is None:
            pytest.fail("the forged blobs are needed (set MFC_FORGED_DIR or install cargo)")
        directory = tmp_path_factory.mktemp("forged")
        subprocess.run(
            [cargo, "run", "--release", "-q", "-p", "mfc-tests", "--bin", "forge-blobs", "--",
             str(directory)],
            cwd=REPO,
            check=True,
        )
    rows = [line.split("\t") for line in (directory / "index.tsv").read_text().splitlines()]
    return [(name, expected, directory / f"{name}.mfc") for name, expected, _ in rows]
