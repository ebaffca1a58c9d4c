#!/usr/bin/env bash
# CI for the Python package (compiler/python): format and lints of its crate, a build with
# pip (maturin as the PEP 517 backend) into a fresh virtualenv, with the training frameworks
# (.ci/training-requirements.txt) beside it, its pytest suite (bit for bit against `mfc simulate`,
# numpy references, refusals, the framework integrations) and its examples, which check their own
# claims. Reuses the workspace's target directory, so after `cargo test --workspace` only the
# bindings and pyo3 are compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
# shellcheck source=sections.sh
source .ci/sections.sh
trap sections_summary EXIT

section "python: fmt and clippy of the bindings"
cargo fmt --manifest-path compiler/python/Cargo.toml --check
PYO3_PYTHON="$(command -v python3)" cargo clippy --release \
  --manifest-path compiler/python/Cargo.toml --all-targets -- -D warnings

section "python: the mfc binary (the reference the tests compare with)"
# The workspace's binaries and examples with the features `cargo test --release --workspace` (the
# README's test command) resolves: after it nothing is compiled again; a `-p` build would resolve
# other features and rebuild mfc-runtime, faer and mfc-compiler for them.
cargo build --release -q --workspace --bins --examples
export MFC_BINARY="$CARGO_TARGET_DIR/release/mfc"

section "python: pip install ./compiler/python into a fresh virtualenv"
venv=$(mktemp -d)
scratch=$(mktemp -d)
trap 'rm -rf "$venv" "$scratch"; sections_summary' EXIT
if ! python3 -m venv "$venv" 2>/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q "./compiler/python[test]"

section "python: the training frameworks (.ci/training-requirements.txt: torch, opacus, jax, optax, flwr, scikit-learn)"
# Into the same virtualenv (torch from PyPI brings its CUDA wheels: about 6 GB, 2-5 minutes).
"$venv/bin/pip" install -q -r .ci/training-requirements.txt

section "python: the forged-blob suite (issue 27) for the front-door tests"
export MFC_FORGED_DIR="$scratch/forged"
"$CARGO_TARGET_DIR/release/forge-blobs" "$MFC_FORGED_DIR" 2>/dev/null

section "python: pytest"
# Run from outside the source tree: the installed package is what is tested.
# CI=true: the tests of the training frameworks (tests/training) fail, not skip, when one is missing.
(cd compiler/python/tests && CI=true "$venv/bin/python" -m pytest -q -p no:cacheprovider .)

section "python: examples (each checks its own claims)"
for example in compiler/python/examples/*.py; do
  "$venv/bin/python" "$example"
done
section "python: bench/digits.py --quick (Opacus DP-SGD and mfc on load_digits: equal ε, above chance, DPFTRLOptimizer = the hand loop)"
"$venv/bin/python" compiler/python/bench/digits.py --quick

section "python: the README's Python examples (From Python, Train with mfc)"
sed -n '/^## From Python/,/^## Layout/p' README.md | awk '/^```python/{f=1;next}/^```/{f=0}f' \
  > "$scratch/readme.py"
test -s "$scratch/readme.py"
(cd "$scratch" && "$venv/bin/python" readme.py)
