#!/usr/bin/env bash
# The budget table of the README: code size of the runtime on a Cortex-M4F (opt-level "s", LTO,
# codegen-units 1, blob excluded) with and without defmt, its RAM, and instructions per step under
# `qemu -icount` for d = 1, 4, 16 and (h, r) = (4, 4), (6, 6), for the BLT form (`blt.mfc`) and
# for BandMF (`bandmf.mfc`, `bandmf-general.mfc`).
#
# Needs: rustup target thumbv7em-none-eabihf, qemu-system-arm, binutils-arm-none-eabi
# (`.ci/run` installs them). Prints Markdown; the README's numbers are a copy of its output.
#
# Code size: the `size` binary (src/bin/size.rs) runs a whole stream from the embedded blob;
# built with `size-baseline` the same skeleton runs without the runtime. The runtime's size is
# the difference of .text + .rodata, so startup code, the blob (in both) and the logger are not
# counted. A third build replaces the Gaussian sampler by a stub (`size-no-noise`, not private,
# measurement only; ChaCha20 stays for the key derivation) to show what the sampler costs. A
# fourth (`size-blt`) runs a BltStream from `blt.mfc` instead; its baseline is the skeleton built
# with the same blob. Instructions: SysTick counts core clock ticks; under `-icount shift=6` one
# instruction is 2^6 ns and the MPS2 core clock is 25 MHz, so instructions = ticks · 40 / 64.
#
# Blobs: `telemetry.mfc` and `h6r6.mfc` (commands in the top-level README.md) and `blt.mfc`, made
# from the repository root with the same horizon and ε/δ/ζ as `telemetry.mfc`:
#   cargo run --release -p mfc-cli --bin mfc -- compile --workload prefix --form blt \
#       --buffers 4 --steps 64 --epsilon 2 --delta 1e-6 --clip-norm 1 \
#       --out examples/firmware/blt.mfc   # CRC-32 0xe50283ef
# The BLT rows checkpoint every step and restore once, as the banded ones. BandMF
# (`size-bandmf`, `bandmf.mfc`: banded Toeplitz, b̂ = 8; the bench also runs
# `bandmf-general.mfc`, the general encoder with the same options), made with
#   cargo run --release -p mfc-cli --bin mfc -- compile --workload prefix --form bandmf \
#       --toeplitz --bands 8 --steps 64 --epsilon 2 --delta 1e-6 --clip-norm 1 \
#       --out examples/firmware/bandmf.mfc   # CRC-32 0xe60f20ba
# and the same without --toeplitz for bandmf-general.mfc.
set -euo pipefail
cd "$(dirname "$0")"

# `budget.sh --footprint` prints only the footprint table (no logging: what a firmware pays per
# feature), which `.ci/footprint.py` compares with the README's; `budget.sh` prints everything.
MODE=${1:-all}
SHIFT=6
# Instructions of the firmware's calibration loop (`systick::LOOP_INSTRUCTIONS`): each bench run
# prints the ticks it took on its board (`loop=`), so ticks convert to instructions on any board.
LOOP_INSTRUCTIONS=20000
QEMU=(qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic
      -semihosting-config enable=on,target=native)
# The firmware's one target directory for every build (shared with .ci/firmware.sh and
# verify-budget.sh): the dependencies are built once per target and feature set, and each
# program is copied out under its own name (target/budget/elf/NAME).
BUILD_TARGET=thumbv7em-none-eabihf

build() { # name features bin [env...]
  local name=$1 features=$2 bin=$3
  shift 3
  env "$@" cargo build --quiet --release --target "$BUILD_TARGET" \
    --bin "$bin" ${features:+--features "$features"} >&2
  mkdir -p target/budget/elf
  cp "target/$BUILD_TARGET/release/$bin" "target/budget/elf/$name"
  echo "target/budget/elf/$name"
}

section() { # elf section -> bytes
  arm-none-eabi-size -A "$1" | awk -v s="$2" '$1 == s { print $2; found = 1 } END { if (!found) print 0 }'
}

code() { # elf -> ".text .rodata"
  [ -f "$1" ] || { echo "budget.sh: no $1" >&2; exit 1; }
  echo "$(section "$1" .text) $(section "$1" .rodata)"
}

if [ "$MODE" = --footprint ]; then
  loggings=(plain)
else
  loggings=(plain defmt)
fi
echo "### Code size (thumbv7em-none-eabihf, opt-level \"s\", LTO, codegen-units 1; blob excluded)"
echo
echo "| runtime part | logging | .text | .rodata | .text + .rodata |"
echo "|---|---|---|---|---|"
for logging in "${loggings[@]}"; do
  extra=""
  [ "$logging" = defmt ] && extra="defmt,"
  elf=$(build "size-base-$logging" "${extra}size-baseline" size)
  sizes=$(code "$elf")
  read -r banded_text banded_rodata <<<"$sizes"
  elf=$(build "size-base-blt-$logging" "${extra}size-baseline,size-blt" size)
  sizes=$(code "$elf")
  read -r blt_text blt_rodata <<<"$sizes"
  elf=$(build "size-base-bandmf-$logging" "${extra}size-baseline,size-bandmf" size)
  sizes=$(code "$elf")
  read -r bandmf_text bandmf_rodata <<<"$sizes"
  elf=$(build "size-base-signed-$logging" "${extra}size-baseline,size-signed" size)
  sizes=$(code "$elf")
  read -r signed_text signed_rodata <<<"$sizes"
  for part in stream checkpoint nonoise blt blt-checkpoint bandmf bandmf-checkpoint signed; do
    features="$extra"
    label="blob check + stream (banded)"
    base_text=$banded_text base_rodata=$banded_rodata
    if [ "$part" = checkpoint ]; then
      features="${extra}size-checkpoint,"
      label="... + checkpoint/restore"
    elif [ "$part" = nonoise ]; then
      features="${extra}size-no-noise,"
      label="blob check + stream, Gaussian sampler stubbed out"
    elif [ "$part" = blt ]; then
      features="${extra}size-blt,"
      label="blob check + stream (BLT)"
      base_text=$blt_text base_rodata=$blt_rodata
    elif [ "$part" = blt-checkpoint ]; then
      features="${extra}size-blt,size-checkpoint,"
      label="... + checkpoint/restore (BLT)"
      base_text=$blt_text base_rodata=$blt_rodata
    elif [ "$part" = bandmf ]; then
      features="${extra}size-bandmf,"
      label="blob check + stream (BandMF)"
      base_text=$bandmf_text base_rodata=$bandmf_rodata
    elif [ "$part" = signed ]; then
      features="${extra}size-checkpoint,size-signed,"
      label="signature check + banded verifier + stream + checkpoint/restore (signed blob)"
      base_text=$signed_text base_rodata=$signed_rodata
    elif [ "$part" = bandmf-checkpoint ]; then
      features="${extra}size-bandmf,size-checkpoint,"
      label="... + checkpoint/restore (BandMF)"
      base_text=$bandmf_text base_rodata=$bandmf_rodata
    fi
    elf=$(build "size-$part-$logging" "${features%,}" size)
    if [ "$part" = signed ]; then
      # The signed device must check, verify and stream its blob (exit 0), not just build.
      timeout 120 "${QEMU[@]}" -kernel "$elf" ||
        { echo "budget.sh: the signed, verified device exited with $?" >&2; exit 1; }
    fi
    sizes=$(code "$elf")
    read -r text rodata <<<"$sizes"
    dt=$((text - base_text))
    dr=$((rodata - base_rodata))
    echo "| $label | $logging | $dt | $dr | $((dt + dr)) ($(awk -v b=$((dt + dr)) 'BEGIN { printf "%.1f", b / 1024 }') KiB) |"
    if [ "$part" = stream ] && [ "$logging" = defmt ]; then
      largest="$elf"
    fi
  done
done
echo

# Verification of the recorded sensitivity, per form (its own script, also run by --footprint).
./verify-budget.sh "$MODE"
echo

# The signature check: the `signed` firmware (a 3 271-byte signed blob) with a verifier, minus
# the same program that only splits and parses the blob; stack painted, instructions under
# -icount (the M4F's 25 MHz SysTick: ticks · 40 / 64). The firmware also checks that a flipped
# bit, another key, S + l and a small-order key are refused (about 0.2 KB of the figure).
echo "### Signature check (\`signed\` firmware, thumbv7em-none-eabihf; parser and blob excluded)"
echo
echo "| verifier (firmware feature) | .text added | .rodata added | stack B | instructions per verification (incl. parsing the blob) |"
echo "|---|---|---|---|---|"
verifiers=(signature)
[ "$MODE" = --footprint ] || verifiers+=(compact dalek)
read -r base_text base_rodata <<<"$(code "$(build signed-base "" signed)")"
for verifier in "${verifiers[@]}"; do
  elf=$(build "signed-$verifier" "$verifier" signed)
  read -r text rodata <<<"$(code "$elf")"
  line=$(timeout 120 "${QEMU[@]}" -icount shift=$SHIFT -kernel "$elf" | head -n 1)
  [[ $line == *" verified; "* ]] || { echo "budget.sh: signed ($verifier) printed: $line" >&2; exit 1; }
  case $verifier in
    signature) label="salty 0.3 + strict checks (signature: the runtime's)" ;;
    compact) label="ed25519-compact 2.6, opt_size (compact: comparison)" ;;
    dalek) label="ed25519-dalek 2.2, verify_strict (dalek: comparison)" ;;
  esac
  echo "| $label | $((text - base_text)) | $((rodata - base_rodata)) | $(
    sed -n 's/.*instructions, \([0-9]*\) bytes of stack.*/\1/p' <<<"$line") | $(
    sed -n 's/.*; \([0-9]*\) instructions.*/\1/p' <<<"$line") |"
done
echo
if [ "$MODE" = --footprint ]; then
  exit 0
fi
echo "Largest symbols of the stream build with defmt (\`arm-none-eabi-nm --size-sort -S\`, bytes):"
echo
echo '```text'
arm-none-eabi-nm --size-sort -S -C "$largest" | tail -n 14 | tac |
  while read -r _ size kind name; do printf '%6d %s %s\n' "$((16#$size))" "$kind" "$name"; done
echo '```'
echo

rows=() horizons=()
for blob in telemetry.mfc h6r6.mfc blt.mfc bandmf.mfc bandmf-general.mfc; do
  for d in 1 4 16; do
    elf=$(build "bench-${blob%.mfc}-$d" bench telemetry MFC_FIRMWARE_BLOB="$PWD/$blob" MFC_FIRMWARE_DIM=$d)
    line=$(timeout 60 "${QEMU[@]}" -icount shift=$SHIFT -kernel "$elf")
    [[ $line == bench* ]] || { echo "budget.sh: bench run printed: $line" >&2; exit 1; }
    field() { sed -n "s/.* $1=\([0-9a-f]*\).*/\1/p" <<<"$line"; }
    steps=$(field steps) empty=$(field empty)
    horizons+=("$steps")
    instr() { # ticks, intervals -> instructions per interval
      awk -v t="$1" -v n="$2" -v e="$empty" -v l="$(field loop)" -v i=$LOOP_INSTRUCTIONS \
        'BEGIN { printf "%.0f", (t - n * e) * i / l / n }'
    }
    [ "$(field d)" = "$d" ] || { echo "budget.sh: bench run with d = $(field d), not $d" >&2; exit 1; }
    ws=$(( $(field workspace_floats) * 4 ))
    if [[ $line == "bench blt "* ]]; then
      m=$(field m)
      [ "$ws" -eq $(( (m + 2) * d * 4 )) ] || { echo "workspace $ws != formula" >&2; exit 1; }
      rows+=("| BLT m = $m | $d | $ws | $(field stream_bytes) | $(field stack_bytes) | $(
        instr "$(field step_total)" "$steps") | $(instr "$(field checkpoint_total)" "$steps") | $(
        instr "$(field restore)" 1) | $(instr "$(field load)" 1) |")
    elif [[ $line == "bench bandmf "* ]]; then
      b=$(field b) kind=$(sed -n 's/.* kind=\([a-z]*\).*/\1/p' <<<"$line")
      [ "$ws" -eq $(( (b + 2) * d * 4 )) ] || { echo "workspace $ws != formula" >&2; exit 1; }
      rows+=("| BandMF $kind b̂ = $b | $d | $ws | $(field stream_bytes) | $(field stack_bytes) | $(
        instr "$(field step_total)" "$steps") | $(instr "$(field checkpoint_total)" "$steps") | $(
        instr "$(field restore)" 1) | $(instr "$(field load)" 1) |")
    else
      h=$(field h) r=$(field r)
      [ "$ws" -eq $(( (h + r + 2) * d * 4 )) ] || { echo "workspace $ws != formula" >&2; exit 1; }
      rows+=("| ($h, $r) | $d | $ws | $(field stream_bytes) | $(field stack_bytes) | $(
        instr "$(field step_total)" "$steps") | $(instr "$(field checkpoint_total)" "$steps") | $(
        instr "$(field restore)" 1) | $(instr "$(field load)" 1) |")
    fi
  done
done
# The heading's n is the runs' horizon, printed once all runs agree on it.
n=$(printf '%s\n' "${horizons[@]}" | sort -u)
[ "$(wc -l <<<"$n")" -eq 1 ] || { echo "budget.sh: the blobs' horizons differ: $n" >&2; exit 1; }
echo "### RAM and instructions per step (QEMU mps2-an386, -icount shift=$SHIFT, n = $n)"
echo
echo "| (h, r), BLT m or BandMF b̂ | d | workspace (h + r + 2)·d·4 B, (m + 2)·d·4 B or (b̂ + 2)·d·4 B | stream struct B | stack B (step + checkpoint) | instructions / step | / checkpoint | restore | blob check |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo

# The same banded telemetry bench (telemetry.mfc, d = 4) on the three cores QEMU runs: its RAM
# (.data + .bss + .uninit, and the stack of the whole run, painted from `main`: workspace,
# checkpoint slot, stream and step), and the flash of the telemetry firmware, which replays any
# form through `Replay` (text logger included).
echo "### Cores (telemetry.mfc, (h, r) = (4, 4), d = 4, QEMU -icount shift=$SHIFT)"
echo
echo "| core (QEMU machine, target) | instructions / step | / checkpoint | restore | blob check | stack B (step + checkpoint) | RAM B (whole run) | telemetry firmware flash B (.text + .rodata, every form) |"
echo "|---|---|---|---|---|---|---|---|"
for board in m4f m0 m33; do
  case $board in
    m4f) BUILD_TARGET=thumbv7em-none-eabihf machine=(-machine mps2-an386 -cpu cortex-m4)
         label="Cortex-M4F (mps2-an386, thumbv7em-none-eabihf)" ;;
    m0) BUILD_TARGET=thumbv6m-none-eabi machine=(-machine microbit -cpu cortex-m0)
        label="Cortex-M0 (microbit, thumbv6m-none-eabi)" ;;
    m33) BUILD_TARGET=thumbv8m.main-none-eabihf machine=(-machine mps2-an505 -cpu cortex-m33)
         label="Cortex-M33 (mps2-an505, thumbv8m.main-none-eabihf)" ;;
  esac
  elf=$(build "bench-core-$board" bench telemetry MFC_FIRMWARE_BLOB="$PWD/telemetry.mfc" MFC_FIRMWARE_DIM=4)
  line=$(timeout 120 qemu-system-arm "${machine[@]}" -nographic \
    -semihosting-config enable=on,target=native -icount shift=$SHIFT -kernel "$elf")
  [[ $line == bench* ]] || { echo "budget.sh: $board bench run printed: $line" >&2; exit 1; }
  field() { sed -n "s/.* $1=\([0-9a-f]*\).*/\1/p" <<<"$line"; }
  steps=$(field steps) empty=$(field empty)
  instr() {
    awk -v t="$1" -v n="$2" -v e="$empty" -v l="$(field loop)" -v i=$LOOP_INSTRUCTIONS \
      'BEGIN { printf "%.0f", (t - n * e) * i / l / n }'
  }
  firmware=$(build "telemetry-$board" "" telemetry)
  ram=$(( $(section "$elf" .data) + $(section "$elf" .bss) + $(section "$elf" .uninit)
          + $(field whole_stack_bytes) ))
  echo "| $label | $(instr "$(field step_total)" "$steps") | $(instr "$(field checkpoint_total)" "$steps") | $(
    instr "$(field restore)" 1) | $(instr "$(field load)" 1) | $(field stack_bytes) | $ram | $((
    $(section "$firmware" .text) + $(section "$firmware" .rodata) )) |"
done
