#!/usr/bin/env bash
# The C library on bare metal: libmfc.a built no_std for thumbv7em-none-eabihf, linked into the C
# telemetry firmware (runtime/capi/examples/firmware, arm-none-eabi-gcc, no libc, all memory
# static) and run under QEMU (mps2-an386, Cortex-M4F) with a blob of every form — banded, BLT,
# FFT (optimal decoder), BandMF — and a BLT without a horizon, stepped 150 steps, past its 48
# design steps. Each run verifies the blob at open (the library's default), reboots midway
# (checkpoint; a step before the restore refused; restore, a stale checkpoint refused) and its
# releases must equal the uninterrupted Rust replay bit for bit; a build with a
# corrupted blob must report MFC_STATUS_INVALID_BLOB and exit with code 2 (not 0, not hang: 124,
# not fault: 3), and builds with an understated and an unverifiable blob must be refused at open.
# Then the library built for the banded form only (`--no-default-features --features form-banded`)
# runs the banded firmware the same way, refuses a blob of every other form at open with
# MFC_STATUS_UNSUPPORTED_DECODER (3, exit code 2, nothing released), and is smaller than the
# library of every form (its code and tables linked, from the linker map).
# Needs the blobs and references of .ci/capi.sh (run first), qemu-system-arm, gcc-arm-none-eabi
# and binutils-arm-none-eabi (.ci/run installs them) and the thumbv7em-none-eabihf target.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=sections.sh
source .ci/sections.sh
trap sections_summary EXIT

fw=runtime/capi/examples/firmware
out=target/capi/firmware
mkdir -p "$out"
qemu=(timeout 60 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic
      -semihosting-config enable=on,target=native -kernel)

# The `firmware` profile (root Cargo.toml): LTO, opt-level "s", one codegen unit, panic = abort.
section "C firmware: libmfc.a for thumbv7em-none-eabihf (no_std, every form)"
cargo build --profile firmware -p mfc-runtime-capi --target thumbv7em-none-eabihf
cp target/thumbv7em-none-eabihf/firmware/libmfc.a "$out/libmfc-all.a"
lib=$out/libmfc-all.a

build() { # name blob [cflags...]
  local name=$1 blob=$2
  shift 2
  arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os -std=c11 \
    -Wall -Wextra -Werror -ffreestanding -ffunction-sections -fdata-sections -nostdlib \
    -I runtime/capi/include -DMFC_BLOB_PATH="\"$blob\"" "$@" -T "$fw/link.ld" \
    "$fw/startup.c" "$fw/main.c" "$lib" -lgcc -Wl,--gc-sections -z noexecstack \
    -Wl,-Map="$out/$name.map" -o "$out/$name.elf"
}

for form in banded blt fft bandmf blt-unbounded; do
  # The unbounded BLT runs 150 steps, past its 48 design steps (the reboot at step 76 too).
  steps=$([ "$form" = blt-unbounded ] && echo 150u || echo 0xffffffffu)
  build "$form" "target/capi/$form.mfc" -DSCENARIO_MAX_STEPS="$steps"
  status=0
  "${qemu[@]}" "$out/$form.elf" > "$out/$form.log" || status=$?
  if [ "$status" -ne 0 ]; then
    cat "$out/$form.log"
    echo "C firmware ($form) exited with $status (expected 0)" >&2
    exit 1
  fi
  grep -q '^# stale checkpoint refused' "$out/$form.log"
  grep -v '^#' "$out/$form.log" | diff - "target/capi/$form-rust.txt"
  echo "$form: the C firmware under QEMU (rebooted, restored) equals the Rust replay on all" \
    "$(wc -l < "target/capi/$form-rust.txt") releases"
done
arm-none-eabi-size "$out"/*.elf

section "C firmware: the corrupted blob must be refused with exit code 2"
build corrupt target/capi/blt.mfc -DMFC_CORRUPT_BLOB
status=0
"${qemu[@]}" "$out/corrupt.elf" > "$out/corrupt.log" 2>&1 || status=$?
cat "$out/corrupt.log"
if [ "$status" -ne 2 ] || ! grep -q "returned status 2$" "$out/corrupt.log"; then
  echo "corrupted-blob C firmware exited with $status (expected 2 and MFC_STATUS_INVALID_BLOB)" >&2
  exit 1
fi
echo "corrupted blob refused, exit code $status"

# Issue 27: the firmware's open verifies. A blob whose recorded sensitivity was lowered by 1%
# (CRC recomputed, by .ci/capi.sh) is refused with MFC_STATUS_SENSITIVITY_UNDERSTATED (17), and an
# honest blob the device cannot verify (FFT under min separation) with MFC_STATUS_UNVERIFIABLE
# (18): exit code 2, nothing released.
for refusal in lowered/blt:17 fft-min-sep:18; do
  name=${refusal%%:*} code=${refusal#*:}
  build "refused-${name//\//-}" "target/capi/$name.mfc"
  status=0
  "${qemu[@]}" "$out/refused-${name//\//-}.elf" > "$out/refused.log" 2>&1 || status=$?
  cat "$out/refused.log"
  if [ "$status" -ne 2 ] || ! grep -q "returned status $code$" "$out/refused.log" ||
      grep -qv '^#' "$out/refused.log"; then
    echo "C firmware with $name.mfc exited with $status (expected 2 and status $code)" >&2
    exit 1
  fi
  echo "$name.mfc refused at open on the device (status $code)"
done

section "C firmware: libmfc.a for the banded form only"
cargo build --profile firmware -p mfc-runtime-capi --target thumbv7em-none-eabihf \
  --no-default-features --features form-banded
cp target/thumbv7em-none-eabihf/firmware/libmfc.a "$out/libmfc-banded.a"
lib=$out/libmfc-banded.a
build banded-only target/capi/banded.mfc
status=0
"${qemu[@]}" "$out/banded-only.elf" > "$out/banded-only.log" || status=$?
if [ "$status" -ne 0 ]; then
  cat "$out/banded-only.log"
  echo "C firmware (banded-only library) exited with $status (expected 0)" >&2
  exit 1
fi
grep -q '^# stale checkpoint refused' "$out/banded-only.log"
grep -v '^#' "$out/banded-only.log" | diff - target/capi/banded-rust.txt
echo "banded-only library: the C firmware under QEMU equals the Rust replay on all" \
  "$(wc -l < target/capi/banded-rust.txt) releases"
# A blob of a form the library leaves out: MFC_STATUS_UNSUPPORTED_DECODER at open, nothing
# released (mfc_workspace_len, which the scenario's open calls first, refuses it).
for form in blt fft bandmf blt-unbounded; do
  build "banded-only-$form" "target/capi/$form.mfc"
  status=0
  "${qemu[@]}" "$out/banded-only-$form.elf" > "$out/refused.log" 2>&1 || status=$?
  cat "$out/refused.log"
  if [ "$status" -ne 2 ] || ! grep -q "mfc_stream_open_epoch returned status 3$" "$out/refused.log" ||
      grep -qv '^#' "$out/refused.log"; then
    echo "banded-only C firmware with $form.mfc exited with $status (expected 2 and status 3)" >&2
    exit 1
  fi
  echo "$form.mfc refused at open by the banded-only library (MFC_STATUS_UNSUPPORTED_DECODER)"
done
# The selection drops the other forms' code: libmfc's .text + .rodata linked into the same
# firmware and blob, from the linker maps.
read -r text rodata < <(awk -f "$fw/mapsum.awk" "$out/banded.map")
read -r one_text one_rodata < <(awk -f "$fw/mapsum.awk" "$out/banded-only.map")
echo "libmfc linked for the banded blob: every form $((text + rodata)) B, banded only" \
  "$((one_text + one_rodata)) B (.text + .rodata)"
if [ $((one_text + one_rodata)) -ge $((text + rodata)) ]; then
  echo "the banded-only library is not smaller than the library of every form" >&2
  exit 1
fi
# The footprint budget (as .ci/footprint.py for the Rust firmware): neither may exceed the
# README's figure (its budget table, linked into bench.c) by more than 5%.
for row in "every form (default features)|$((text + rodata))" "form-banded|$((one_text + one_rodata))"; do
  label=${row%|*} measured=${row#*|}
  kept=$(awk -F'|' -v l="$label" '$2 == " " l " " && $3 ~ /bench.c, banded.mfc/ { print $6 + 0 }' README.md)
  [ -n "$kept" ] || { echo "README.md has no C library row '$label'" >&2; exit 1; }
  if [ "$measured" -gt $((kept * 105 / 100)) ]; then
    echo "libmfc ($label) is $measured B, more than 5% above the README's $kept B" >&2
    exit 1
  fi
  echo "libmfc ($label): $measured B, within 5% of the README's $kept B"
done
