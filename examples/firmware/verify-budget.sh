#!/usr/bin/env bash
# Issue 33: the code size of the sensitivity's verification (`mfc_runtime::verify`) per form on a
# Cortex-M4F (thumbv7em-none-eabihf, opt-level "s", LTO, codegen-units 1; blob excluded), as a
# Markdown table (`budget.sh` prints it last; the README's figures are a copy of its output).
#
# The `size-verify` binary (src/bin/size_verify.rs) parses the embedded blob and verifies it,
# linking only the verifier of the blob's form (`verify::verify_only`); with `size-verify-all` it
# links every form's verifier (`verify::verify`); with `size-baseline` it only parses the blob.
# A form's cost is the difference of .text + .rodata to the baseline built with the same blob, as
# in budget.sh. Each verifying build also runs under QEMU and must verify its blob (exit 0).
#
# Needs what budget.sh needs (thumbv7em-none-eabihf, qemu-system-arm, binutils-arm-none-eabi).
set -euo pipefail
cd "$(dirname "$0")"

# `--footprint` (from `budget.sh --footprint`): only the first column, the one CI checks.
MODE=${1:-all}

QEMU=(qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic
      -semihosting-config enable=on,target=native -icount shift=6)
# The firmware's target directory, shared with budget.sh and .ci/firmware.sh.
ELF=target/thumbv7em-none-eabihf/release/size-verify

# build blob features -> ".text .rodata" of the built ELF
build() {
  MFC_FIRMWARE_BLOB="$PWD/$1" cargo build --quiet --release --target thumbv7em-none-eabihf \
    --bin size-verify ${2:+--features "$2"} >&2
  arm-none-eabi-size -A "$ELF" |
    awk '$1 == ".text" { t = $2 } $1 == ".rodata" { r = $2 } END { print t + 0, r + 0 }'
}

# run: the verifying build just made must verify its blob under QEMU
run() {
  local code=0
  timeout 120 "${QEMU[@]}" -kernel "$ELF" </dev/null || code=$?
  [ "$code" -eq 0 ] || { echo "verify-budget.sh: $1 not verified (exit $code)" >&2; exit 1; }
}

kib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1024 }'; }

echo "### Verification code size per form (thumbv7em-none-eabihf, opt-level \"s\", LTO; blob and parser excluded)"
echo
echo "| form, schema | blob | only its form's verifier: .text + .rodata | every form's verifier (\`verify::verify\`) |"
echo "|---|---|---|---|"
while IFS='|' read -r -u 3 label blob; do
  read -r bt br <<<"$(build "$blob" size-baseline)"
  read -r t r <<<"$(build "$blob" "")"
  run "$blob"
  one=$((t + r - bt - br))
  if [ "$MODE" = --footprint ]; then
    echo "| $label | \`$blob\` | $one ($(kib $one) KiB) |"
    continue
  fi
  read -r t r <<<"$(build "$blob" size-verify-all)"
  run "$blob"
  all=$((t + r - bt - br))
  echo "| $label | \`$blob\` | $one ($(kib $one) KiB) | $all ($(kib $all) KiB) |"
done 3<<'BLOBS'
banded + low rank, single|verify-banded.mfc
banded + low rank, fixed epoch order|verify-banded-every.mfc
banded + low rank, min separation|verify-banded-min-sep.mfc
BLT, finite horizon, min separation|verify-blt.mfc
BLT, every horizon (BltTailBound)|verify-blt-unbounded.mfc
BandMF Toeplitz, single|bandmf.mfc
BandMF general, single|bandmf-general.mfc
BandMF general, min separation|verify-bandmf.mfc
FFT Circulant, single|verify-fft.mfc
FFT OptimalDecoder, single|verify-fft-optimal.mfc
BLOBS
