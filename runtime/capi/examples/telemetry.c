/*
 * A C program replaying an .mfc blob of any form through libmfc on a host: the telemetry scenario
 * of scenario.h (d = 4 counters, checkpoint protocol, a simulated reboot), printed line by line.
 * Release lines equal those of the Rust replay (examples/examples/capi_reference.rs); lines
 * starting with '#' are diagnostics.
 *
 *   cargo build --release -p mfc-runtime-capi
 *   cc -O2 -I runtime/capi/include runtime/capi/examples/telemetry.c target/release/libmfc.a \
 *      -lpthread -ldl -lm -o target/telemetry
 *   target/telemetry mech.mfc [MAX_STEPS]
 *
 * Exit code: 0 success, 2 a refused call (e.g. a corrupted blob), 1 a broken promise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "scenario.h"

static void emit(const char *line) {
    puts(line);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s BLOB [MAX_STEPS]\n", argv[0]);
        return 2;
    }
    FILE *file = fopen(argv[1], "rb");
    if (!file) {
        perror(argv[1]);
        return 2;
    }
    static uint8_t blob[1 << 20];
    size_t blob_len = fread(blob, 1, sizeof blob, file);
    fclose(file);
    uint32_t max_steps = argc == 3 ? (uint32_t)strtoul(argv[2], NULL, 10) : UINT32_MAX;
    return run_scenario(blob, blob_len, max_steps, emit);
}
