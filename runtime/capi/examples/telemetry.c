/*
 * A C program replaying an .mfc blob through libmfc: d = 4 counters, one release per step, each
 * printed as the bit patterns of its f32 values (so the output can be compared exactly with the
 * Rust runtime: examples/examples/capi_reference.rs prints the same lines).
 *
 *   cargo build --release -p mfc-runtime-capi
 *   cc -O2 -I runtime/capi/include runtime/capi/examples/telemetry.c target/release/libmfc.a \
 *      -lpthread -ldl -lm -o target/telemetry
 *   target/telemetry mech.mfc
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfc.h"

#define DIM 4

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BLOB\n", argv[0]);
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

    size_t floats = 0;
    MfcStatus status = mfc_workspace_len(blob, blob_len, DIM, &floats);
    if (status != MFC_STATUS_OK) {
        fprintf(stderr, "mfc_workspace_len: status %d\n", (int)status);
        return 1;
    }
    float *workspace = calloc(floats, sizeof(float));
    uint8_t seed[32];
    memset(seed, 0x5a, sizeof seed); /* a device would read 32 bytes from its hardware RNG */
    MfcStream *stream = NULL;
    status = mfc_stream_new(blob, blob_len, DIM, workspace, floats, seed, &stream);
    if (status != MFC_STATUS_OK) {
        fprintf(stderr, "mfc_stream_new: status %d\n", (int)status);
        return 1;
    }
    float input[DIM], release[DIM];
    for (uint32_t step = 0;; step++) {
        for (int c = 0; c < DIM; c++) {
            float big = step % 3 == 0 ? 40.0f : 0.3f;
            input[c] = big * (float)((int)((step * 7 + c * 3) % 11) - 5) / 5.0f;
        }
        status = mfc_stream_step(stream, input, release, DIM);
        if (status == MFC_STATUS_STREAM_FINISHED) {
            break;
        }
        if (status != MFC_STATUS_OK) {
            fprintf(stderr, "mfc_stream_step: status %d\n", (int)status);
            return 1;
        }
        printf("%u", step);
        for (int c = 0; c < DIM; c++) {
            uint32_t bits;
            memcpy(&bits, &release[c], sizeof bits);
            printf(" %08x", bits);
        }
        printf("\n");
    }
    /* A non-finite input after the end is refused with a status, not a crash. */
    input[0] = 0.0f / 0.0f;
    if (mfc_stream_step(stream, input, release, DIM) == MFC_STATUS_OK) {
        return 1;
    }
    /* So is one buffer passed as both input and release (it would alias in the runtime). */
    if (mfc_stream_step(stream, release, release, DIM) != MFC_STATUS_OVERLAP) {
        return 1;
    }
    fprintf(stderr, "%u steps released\n", mfc_stream_steps_released(stream));
    mfc_stream_free(stream);
    free(workspace);
    return 0;
}
