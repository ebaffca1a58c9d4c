#!/usr/bin/env bash
# The budget of the C library on bare metal (README, "The C library on bare metal"): libmfc.a
# built no_std for thumbv7em-none-eabihf with the `firmware` profile (LTO, opt-level "s", one
# codegen unit, panic = abort) for one form (`--no-default-features --features form-<form>`),
# linked by arm-none-eabi-gcc (-ffunction-sections, --gc-sections) into bench.c, and run
# under QEMU (mps2-an386, -icount shift=6) with the blobs of .ci/capi.sh (run it first): one of
# every form, d = 4. Code: the .text and .rodata input sections linked from libmfc.a (the linker
# map, mapsum.awk), so the C program, startup code and the blob are not counted. RAM: the stream
# object (MfcStreamStorage holds it), the workspace and the largest checkpoint written; stack: the
# deepest call of a step and a checkpoint (painted, 256 B margin included). Instructions: SysTick
# ticks · 40 / 64, per step and per checkpoint averaged over the horizon, once for the open (the
# verification of the blob, the library's default, with the workspace or a static scratch) and
# once for a restore.
# A second table gives libmfc's code for each build: every form with the release profile (what
# the library cost before the `firmware` profile and the form features), every form with the
# `firmware` profile, and each form alone, each linked into bench.c with a blob it replays.
# Prints Markdown; the README's tables are a copy of its output.
set -euo pipefail
cd "$(dirname "$0")/../../../.."

fw=runtime/capi/examples/firmware
out=target/capi/firmware
mkdir -p "$out"
SHIFT=6

library() { # name profile [cargo features...] -> $out/libmfc-<name>.a
  local name=$1 profile=$2
  shift 2
  cargo build --quiet --profile "$profile" -p mfc-runtime-capi --target thumbv7em-none-eabihf "$@"
  cp "target/thumbv7em-none-eabihf/$profile/libmfc.a" "$out/libmfc-$name.a"
}
link() { # elf lib blob: bench.c linked against lib with blob, and its map
  arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os -std=c11 \
    -Wall -Wextra -Werror -ffreestanding -ffunction-sections -fdata-sections -nostdlib \
    -I runtime/capi/include -DMFC_BLOB_PATH="\"$3\"" -T "$fw/link.ld" \
    "$fw/startup.c" "$fw/bench.c" "$2" -lgcc -Wl,--gc-sections -z noexecstack \
    -Wl,-Map="$out/$1.map" -o "$out/$1.elf"
}
for form in banded blt fft bandmf; do
  [ -f "target/capi/$form.mfc" ] || { echo "budget.sh: no target/capi/$form.mfc (run .ci/capi.sh)" >&2; exit 1; }
  library "$form" firmware --no-default-features --features "form-$form"
done
library all firmware
library all-release release

echo "| form (blob of .ci/capi.sh, n = 48; libmfc of this form only) | d | libmfc .text B | libmfc .rodata B | stream object B | workspace B | checkpoint B | stack B (step + checkpoint) | open (verified) | instructions / step | / checkpoint | restore |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for form in banded blt fft bandmf; do
  link "bench-$form" "$out/libmfc-$form.a" "target/capi/$form.mfc"
  line=$(timeout 120 qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
    -semihosting-config enable=on,target=native -icount shift=$SHIFT -kernel "$out/bench-$form.elf")
  [[ $line == bench* ]] || { echo "budget.sh: bench run printed: $line" >&2; exit 1; }
  field() { sed -n "s/.* $1=\([0-9a-f]*\).*/\1/p" <<<"$line"; }
  steps=$(field steps) empty=$(field empty)
  instr() { # ticks, intervals -> instructions per interval
    awk -v t="$1" -v n="$2" -v e="$empty" -v s=$SHIFT 'BEGIN { printf "%.0f", (t - n * e) * 40 / 2^s / n }'
  }
  read -r text rodata < <(awk -f "$fw/mapsum.awk" "$out/bench-$form.map")
  label=$("target/release/mfc" inspect "target/capi/$form.mfc" 2>/dev/null |
    sed -n 's/^decoder *//p' | sed 's/;.*//' | head -n 1)
  echo "| $form: $label | $(field dim) | $text | $rodata | $(field stream_bytes) | $((4 * $(field workspace_floats))) | $(field checkpoint_bytes) | $(field stack_bytes) | $(instr "$(field open)" 1) | $(instr "$(field step_total)" "$steps") | $(instr "$(field checkpoint_total)" "$steps") | $(instr "$(field restore)" 1) |"
done

echo
echo "| libmfc.a built with | linked with | libmfc .text B | libmfc .rodata B | .text + .rodata B |"
echo "|---|---|---|---|---|"
for row in "all-release:every form, release profile (no LTO):banded" \
    "all:every form (default features):banded" "banded:form-banded:banded" \
    "blt:form-blt:blt" "bandmf:form-bandmf:bandmf" "fft:form-fft:fft"; do
  IFS=: read -r name label blob <<<"$row"
  link "size-$name" "$out/libmfc-$name.a" "target/capi/$blob.mfc"
  read -r text rodata < <(awk -f "$fw/mapsum.awk" "$out/size-$name.map")
  echo "| $label | bench.c, $blob.mfc | $text | $rodata | $((text + rodata)) |"
done
