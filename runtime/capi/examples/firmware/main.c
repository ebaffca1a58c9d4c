/*
 * The telemetry counter in C on a Cortex-M4F (MPS2-AN386 under QEMU), linked against the no_std
 * libmfc.a (cargo build -p mfc-runtime-capi --target thumbv7em-none-eabihf): the scenario of
 * ../scenario.h — a blob of any form embedded in flash, d = 4 counters, the checkpoint protocol
 * and a simulated reboot — printed through semihosting. All memory is static (stream object,
 * workspace, checkpoint slots); nothing is allocated.
 *
 * Build-time macros: MFC_BLOB_PATH (the blob to embed, a string), SCENARIO_MAX_STEPS (default: the
 * blob's horizon), MFC_CORRUPT_BLOB (flip one bit of a RAM copy of the blob: the library must
 * refuse it and the firmware exit with code 2). Exit codes: 0 success, 2 a refused call, 1 a
 * broken promise, 3 a fault. .ci/capi-firmware.sh builds and runs it.
 */
#include <stddef.h>
#include <stdint.h>

#include "../scenario.h"
#include "blob.h"
#include "semihosting.h"

#ifndef SCENARIO_MAX_STEPS
#define SCENARIO_MAX_STEPS 0xffffffffu
#endif

static void emit(const char *line) {
    semihosting_write(line);
    semihosting_write("\n");
}

int main(void) {
    const uint8_t *blob = mfc_blob_start;
    size_t blob_len = (size_t)(mfc_blob_end - mfc_blob_start);
#ifdef MFC_CORRUPT_BLOB
    /* One flipped bit in the middle of the coefficient tables: only the checksum notices. */
    static uint8_t corrupt[1 << 16];
    if (blob_len > sizeof corrupt) {
        return 1;
    }
    for (size_t i = 0; i < blob_len; i++) {
        corrupt[i] = blob[i];
    }
    corrupt[blob_len / 2] ^= 0x10;
    blob = corrupt;
#endif
    return run_scenario(blob, blob_len, SCENARIO_MAX_STEPS, emit);
}
