#!/usr/bin/env bash
# The telemetry firmware (examples/firmware) under QEMU (mps2-an386, Cortex-M4F), built with the
# banded blob (telemetry.mfc), the BandMF one (bandmf.mfc) and the BLT one (blt.mfc), each
# replayed through mfc_runtime::Replay with a reboot (checkpoint, restore): its releases must
# equal the host reference bit for bit, and a build with a corrupted blob must report the error
# and exit with code 2 — not 0, not hang (timeout: 124), not fault (3) or panic (101).
# The drift firmware streams 10⁶ steps (d = 1) of a BLT, a BandMF and an FFT blob: its printed
# releases and the checksum of all of them must equal the host's, whose every release is within
# 4 ulps of the exact sum (tests/tests/exact_sums.rs).
# The verify firmware recomputes eight blobs' sensitivities on the device (issue 20; banded under
# three schemas, BLT, BandMF, both FFT kinds, and a BLT bound for every horizon): each must
# verify, and each lowered by 1% (CRC recomputed on the device) must be refused. The signed firmware checks a signed
# blob's Ed25519 signature (feature signature) and refuses it with one bit flipped or under
# another key.
# The banded telemetry build and the verify firmware run on a Cortex-M0 (microbit) and a
# Cortex-M33 (mps2-an505) too: releases bit for bit with the host, a corrupted blob exits 2, and
# the verified bounds equal the M4F's; the signed firmware verifies and refuses as on the M4F.
# Leaves the logs in target/firmware/ (.ci/run hands them to the workspace tests).
# Needs qemu-system-arm and the thumbv7em-none-eabihf, thumbv6m-none-eabi and
# thumbv8m.main-none-eabihf targets (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=sections.sh
source .ci/sections.sh
trap sections_summary EXIT

fw=examples/firmware
logs=target/firmware
mkdir -p "$logs"
qemu=(timeout 60 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic
      -semihosting-config enable=on,target=native -kernel)

# Every build shares the firmware's target directory (the dependencies are built once per
# target and feature set); each program is copied out under its own name, target/elf/NAME.
mkdir -p "$fw/target/elf"
build() { # name target bin [cargo options...], in the environment given
  local name=$1 target=$2 bin=$3
  shift 3
  (cd "$fw" && cargo build --release --target "$target" --bin "$bin" "$@")
  cp "$fw/target/$target/release/$bin" "$fw/target/elf/$name"
}

section "firmware: build (thumbv7em-none-eabihf, opt-level s, LTO)"
m4=thumbv7em-none-eabihf
build telemetry $m4 telemetry
build drift $m4 drift
build verify $m4 verify
build corrupt $m4 telemetry --features corrupt-blob
build defmt $m4 telemetry --features defmt
MFC_FIRMWARE_BLOB="$PWD/$fw/bandmf.mfc" build bandmf $m4 telemetry
MFC_FIRMWARE_BLOB="$PWD/$fw/blt.mfc" build blt $m4 telemetry
elf=$fw/target/elf/telemetry
corrupt=$fw/target/elf/corrupt
bandmf=$fw/target/elf/bandmf
blt=$fw/target/elf/blt
arm-none-eabi-size "$elf" "$corrupt" "$fw/target/elf/defmt" "$bandmf" "$blt" "$fw/target/elf/drift"

section "firmware: run under QEMU"
status=0
"${qemu[@]}" "$elf" >"$logs/telemetry.log" || status=$?
head -n 3 "$logs/telemetry.log"
echo "..."
tail -n 3 "$logs/telemetry.log"
if [ "$status" -ne 0 ]; then
  echo "firmware exited with $status (expected 0)" >&2
  exit 1
fi

section "firmware: run the BandMF build under QEMU"
status=0
"${qemu[@]}" "$bandmf" >"$logs/bandmf.log" || status=$?
tail -n 2 "$logs/bandmf.log"
if [ "$status" -ne 0 ]; then
  echo "BandMF firmware exited with $status (expected 0)" >&2
  exit 1
fi

section "firmware: run the BLT build under QEMU (checkpoint and restore of a BltStream)"
status=0
"${qemu[@]}" "$blt" >"$logs/blt.log" || status=$?
tail -n 2 "$logs/blt.log"
if [ "$status" -ne 0 ]; then
  echo "BLT firmware exited with $status (expected 0)" >&2
  exit 1
fi

section "firmware: the drift firmware: 10^6 steps of BLT, BandMF and FFT under QEMU"
drift=$fw/target/elf/drift
status=0
started=$(date +%s.%N)
# The banner and the last line of each blob, stamped with the seconds since the start: the
# wall time of each form.
timeout 300 "${qemu[@]:2}" "$drift" | tee "$logs/drift.log" \
  | while IFS= read -r line; do
      case $line in
        "mfc drift"* | done:*) awk -v s="$started" -v e="$(date +%s.%N)" -v l="$line" \
                                 'BEGIN { printf "%6.1f s  %s\n", e - s, l }' ;;
      esac
    done || status=$?
if [ "$status" -ne 0 ]; then
  echo "drift firmware exited with $status (expected 0)" >&2
  exit 1
fi

section "firmware: the device verifies each blob's sensitivity and refuses it lowered by 1% (issue 20)"
status=0
timeout 120 "${qemu[@]:2:8}" -icount shift=6 -kernel "$fw/target/elf/verify" \
  >"$logs/verify.log" || status=$?
cat "$logs/verify.log"
if [ "$status" -ne 0 ] || [ "$(grep -c ': verified, ' "$logs/verify.log")" -ne 8 ] \
  || [ "$(grep -c 'lowered 1%: refused' "$logs/verify.log")" -ne 8 ]; then
  echo "verify firmware exited with $status (expected 0, eight verified, eight refused)" >&2
  exit 1
fi

section "firmware: a signed blob verifies on the device; one bit flipped and another key are refused"
build signed $m4 signed --features signature
status=0
timeout 120 "${qemu[@]:2:8}" -icount shift=6 -kernel \
  "$fw/target/elf/signed" >"$logs/signed.log" || status=$?
cat "$logs/signed.log"
if [ "$status" -ne 0 ] || ! grep -q "bytes verified" "$logs/signed.log"; then
  echo "signed firmware exited with $status (expected 0: verified, flipped and other key refused)" >&2
  exit 1
fi

section "firmware: the smallest and the newest cores: Cortex-M0 (microbit, 16 KiB RAM) and M33 (mps2-an505)"
# The banded telemetry firmware, bit for bit with the host (compared below); a corrupted blob
# exits 2; the verify firmware's bounds have the M4F's bits (the M0 keeps 4 KiB of scratch and
# skips the one blob that needs more).
for board in m0 m33; do
  case $board in
    m0) target=thumbv6m-none-eabi machine=(-machine microbit -cpu cortex-m0) verified=7 ;;
    m33) target=thumbv8m.main-none-eabihf machine=(-machine mps2-an505 -cpu cortex-m33) verified=8 ;;
  esac
  build "telemetry-$board" "$target" telemetry
  build "verify-$board" "$target" verify
  build "corrupt-$board" "$target" telemetry --features corrupt-blob
  board_qemu=(timeout 300 qemu-system-arm "${machine[@]}" -nographic
              -semihosting-config enable=on,target=native)
  status=0
  "${board_qemu[@]}" -kernel "$fw/target/elf/telemetry-$board" >"$logs/telemetry-$board.log" \
    || status=$?
  tail -n 1 "$logs/telemetry-$board.log"
  if [ "$status" -ne 0 ]; then
    echo "$board firmware exited with $status (expected 0)" >&2
    exit 1
  fi
  status=0
  "${board_qemu[@]}" -kernel "$fw/target/elf/corrupt-$board" \
    >"$logs/corrupt-$board.log" 2>&1 || status=$?
  if [ "$status" -ne 2 ] || ! grep -q "blob checksum mismatch" "$logs/corrupt-$board.log"; then
    cat "$logs/corrupt-$board.log"
    echo "$board: corrupted-blob firmware exited with $status (expected 2 and a checksum error)" >&2
    exit 1
  fi
  echo "$board: corrupted blob refused, exit code 2"
  status=0
  "${board_qemu[@]}" -icount shift=6 -kernel "$fw/target/elf/verify-$board" \
    >"$logs/verify-$board.log" || status=$?
  grep -v 'lowered 1%' "$logs/verify-$board.log" | cut -d';' -f1 || true
  # Each verdict and bound, without the board's instructions and stack, is one of the M4F's.
  missing=$(grep ': verified, ' "$logs/verify-$board.log" | cut -d';' -f1 \
    | grep -vxF -f <(grep ': verified, ' "$logs/verify.log" | cut -d';' -f1) || true)
  if [ "$status" -ne 0 ] || [ -n "$missing" ] \
    || [ "$(grep -c ': verified, ' "$logs/verify-$board.log")" -ne "$verified" ] \
    || [ "$(grep -c 'lowered 1%: refused' "$logs/verify-$board.log")" -ne "$verified" ]; then
    echo "$board verify firmware exited with $status (expected 0, $verified verified with the" \
      "M4F's bounds, $verified refused); differing: $missing" >&2
    exit 1
  fi
  # The signature check: salty's assembly on the M33 (as on the M4F), its portable Rust on the M0.
  build "signed-$board" "$target" signed --features signature
  status=0
  "${board_qemu[@]}" -icount shift=6 -kernel "$fw/target/elf/signed-$board" \
    >"$logs/signed-$board.log" || status=$?
  cat "$logs/signed-$board.log"
  if [ "$status" -ne 0 ] || ! grep -q "bytes verified" "$logs/signed-$board.log"; then
    echo "$board signed firmware exited with $status (expected 0: verified, forgeries refused)" >&2
    exit 1
  fi
done

section "firmware: compare with the host reference"
# `--workspace`: the features of the whole workspace, as `cargo test --release --workspace` (the
# README's command, .ci/run's next step) resolves them, so the host side built here (mfc-tests,
# mfc-compiler, faer, ...) is what that step runs, not built a second time for `-p mfc-tests`'s.
MFC_FIRMWARE_LOG="$PWD/$logs/telemetry.log" MFC_FIRMWARE_DRIFT_LOG="$PWD/$logs/drift.log" \
  MFC_FIRMWARE_BANDMF_LOG="$PWD/$logs/bandmf.log" MFC_FIRMWARE_BLT_LOG="$PWD/$logs/blt.log" \
  MFC_FIRMWARE_M0_LOG="$PWD/$logs/telemetry-m0.log" MFC_FIRMWARE_M33_LOG="$PWD/$logs/telemetry-m33.log" \
  cargo test --release --workspace --test firmware -- --include-ignored --nocapture

section "firmware: the corrupted blob must be refused with exit code 2"
status=0
"${qemu[@]}" "$corrupt" >"$logs/corrupt.log" 2>&1 || status=$?
cat "$logs/corrupt.log"
if [ "$status" -ne 2 ] || ! grep -q "blob checksum mismatch" "$logs/corrupt.log"; then
  echo "corrupted-blob firmware exited with $status (expected 2 and a checksum error)" >&2
  exit 1
fi
echo "corrupted blob refused, exit code $status"

section "firmware: the defmt build, if defmt-print is installed (cargo install defmt-print --locked)"
if command -v defmt-print >/dev/null; then
  defmt_elf=$fw/target/elf/defmt
  ( set -o pipefail; "${qemu[@]}" "$defmt_elf" | defmt-print -e "$defmt_elf" >"$logs/defmt.log" )
  tail -n 1 "$logs/defmt.log"
  grep -q "done: 64 steps released" "$logs/defmt.log"
else
  echo "defmt-print not installed: the defmt build was built, not run"
fi
