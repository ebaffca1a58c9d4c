#!/usr/bin/env bash
# The C interface: the checked-in header is what cbindgen generates, and a C program linked
# against libmfc.a releases exactly what the Rust runtime releases for the same blob and seed.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cbindgen >/dev/null || cargo install cbindgen --locked --version 0.29.4
cbindgen --config runtime/capi/cbindgen.toml --crate mfc-runtime-capi --output target/mfc.h
diff -u runtime/capi/include/mfc.h target/mfc.h

cargo build --release -p mfc-runtime-capi
cc -O2 -Wall -Wextra -Werror -I runtime/capi/include runtime/capi/examples/telemetry.c \
    target/release/libmfc.a -lpthread -ldl -lm -o target/telemetry-c
cargo run --release -q -p mfc-compiler --bin mfc -- compile --steps 48 --band 4 --rank 3 \
    --epsilon 2 --delta 1e-6 --out target/capi.mfc >/dev/null
target/telemetry-c target/capi.mfc > target/capi-c.txt
cargo run --release -q -p mfc-examples --example capi_reference -- target/capi.mfc > target/capi-rust.txt
diff target/capi-c.txt target/capi-rust.txt
echo "C and Rust agree on all $(wc -l < target/capi-rust.txt) releases"

# Issue 20: mfc_verify accepts what the compiler writes and refuses the same blob with its
# recorded sensitivity lowered by 1% (CRC recomputed), for every form it verifies.
cc -O2 -Wall -Wextra -Werror -I runtime/capi/include runtime/capi/examples/verify.c \
    target/release/libmfc.a -lpthread -ldl -lm -o target/verify-c
for spec in "banded:--steps 48 --band 4 --rank 3" \
    "blt:--form blt --steps 64 --buffers 3" \
    "blt-every:--form blt --steps 64 --buffers 3 --epochs 4 --every 16" \
    "bandmf-toeplitz:--form bandmf --toeplitz --steps 64 --bands 4 --epochs 4 --min-sep 16" \
    "bandmf-momentum:--form bandmf --steps 32 --bands 3 --workload momentum:0.9" \
    "bandmf-every:--form bandmf --steps 32 --bands 3 --epochs 2 --every 16 --neighbouring replace-one"; do
    name=${spec%%:*}
    # shellcheck disable=SC2086 # the options are words
    cargo run --release -q -p mfc-compiler --bin mfc -- compile --epsilon 2 --delta 1e-6 \
        --out "target/verify-$name.mfc" ${spec#*:} >/dev/null
    target/verify-c "target/verify-$name.mfc"
done
