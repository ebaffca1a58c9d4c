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

SHIFT=6
QEMU=(qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic
      -semihosting-config enable=on,target=native)
ELF_DIR=thumbv7em-none-eabihf/release

build() { # target-dir features bin [env...]
  local dir=$1 features=$2 bin=$3
  shift 3
  env "$@" cargo build --quiet --release --target-dir "target/$dir" --bin "$bin" \
    ${features:+--features "$features"} >&2
  echo "target/$dir/$ELF_DIR/$bin"
}

section() { # elf section -> bytes
  arm-none-eabi-size -A "$1" | awk -v s="$2" '$1 == s { print $2; found = 1 } END { if (!found) print 0 }'
}

code() { # elf -> ".text .rodata"
  [ -f "$1" ] || { echo "budget.sh: no $1" >&2; exit 1; }
  echo "$(section "$1" .text) $(section "$1" .rodata)"
}

echo "### Code size (thumbv7em-none-eabihf, opt-level \"s\", LTO, codegen-units 1; blob excluded)"
echo
echo "| runtime part | logging | .text | .rodata | .text + .rodata |"
echo "|---|---|---|---|---|"
for logging in plain defmt; do
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
  for part in stream checkpoint nonoise blt blt-checkpoint bandmf bandmf-checkpoint; do
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
    elif [ "$part" = bandmf-checkpoint ]; then
      features="${extra}size-bandmf,size-checkpoint,"
      label="... + checkpoint/restore (BandMF)"
      base_text=$bandmf_text base_rodata=$bandmf_rodata
    fi
    elf=$(build "size-$part-$logging" "${features%,}" size)
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
      awk -v t="$1" -v n="$2" -v e="$empty" -v s=$SHIFT 'BEGIN { printf "%.0f", (t - n * e) * 40 / 2^s / n }'
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

# --- Issue 33: verification code size per form (verify-budget.sh prints its own table) ---
echo
./verify-budget.sh
# --- end of issue 33 ---
