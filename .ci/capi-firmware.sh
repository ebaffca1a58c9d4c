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
# Needs the blobs and references of .ci/capi.sh (run first), qemu-system-arm, gcc-arm-none-eabi
# and binutils-arm-none-eabi (.ci/run installs them) and the thumbv7em-none-eabihf target.
set -euo pipefail
cd "$(dirname "$0")/.."

fw=runtime/capi/examples/firmware
out=target/capi/firmware
mkdir -p "$out"
qemu=(timeout 60 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic
      -semihosting-config enable=on,target=native -kernel)

echo "-- libmfc.a for thumbv7em-none-eabihf (no_std)"
cargo build --release -p mfc-runtime-capi --target thumbv7em-none-eabihf
lib=target/thumbv7em-none-eabihf/release/libmfc.a

build() { # name blob [cflags...]
  local name=$1 blob=$2
  shift 2
  arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os -std=c11 \
    -Wall -Wextra -Werror -ffreestanding -ffunction-sections -fdata-sections -nostdlib \
    -I runtime/capi/include -DMFC_BLOB_PATH="\"$blob\"" "$@" -T "$fw/link.ld" \
    "$fw/startup.c" "$fw/main.c" "$lib" -lgcc -Wl,--gc-sections -z noexecstack \
    -o "$out/$name.elf"
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

echo "-- the corrupted blob must be refused with exit code 2"
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
