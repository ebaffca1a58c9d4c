/*
 * The telemetry scenario of the C examples, shared by the host program (telemetry.c) and the
 * bare-metal firmware (firmware/main.c): d = 4 counters replayed from an .mfc blob of any form
 * through libmfc, with the checkpoint protocol of mfc_runtime::checkpoint and a simulated reboot.
 *
 * Opening verifies the blob (the library's default: its recorded sensitivity is recomputed from
 * its stored coefficients, and a blob that records less, or that cannot be verified, is refused):
 * the stream's workspace serves as the verification's scratch, or, when it is too short for the
 * blob (MFC_STATUS_VERIFY_SCRATCH_TOO_SMALL: a BLT bound for every horizon needs m^2 + 3m
 * doubles), a static scratch of SCENARIO_SCRATCH_DOUBLES is lent to the open.
 *
 * The device cold-starts epoch 1 (the counter is "persisted" before the key is derived), then
 * every step runs step -> checkpoint -> count -> emit. After half the steps it "reboots": the
 * stream is closed, its workspace poisoned with NaN, the stream reopened under the persisted
 * counter; it refuses to step before a restore (MFC_STATUS_RESTORE_REQUIRED), an older checkpoint
 * is refused as stale and the newest one restored. Every release is
 * printed once, as `step` and the bit patterns of its f32 values, so the output equals, line for
 * line, the uninterrupted Rust replay (examples/examples/capi_reference.rs). Diagnostic lines
 * start with '#'. "Flash" and the monotonic counter are simulated in RAM.
 *
 * All memory is static and provided here: the stream object (MfcStreamStorage), the workspace, two
 * checkpoint slots and the verification's scratch, of sizes the build may set
 * (SCENARIO_WORKSPACE_FLOATS, SCENARIO_SLOT_BYTES, SCENARIO_SCRATCH_DOUBLES).
 * Only freestanding headers are used, so the same code runs on a host and on bare metal.
 *
 * Returns 0 on success, 2 when the library refuses a call it should accept (e.g. a corrupted
 * blob: MFC_STATUS_INVALID_BLOB), 1 when a promise is broken (a stale checkpoint accepted, a step
 * before the restore or after the close).
 */
#ifndef MFC_SCENARIO_H
#define MFC_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "mfc.h"

#define SCENARIO_DIM 4
#ifndef SCENARIO_WORKSPACE_FLOATS
#define SCENARIO_WORKSPACE_FLOATS 2048
#endif
#ifndef SCENARIO_SLOT_BYTES
#define SCENARIO_SLOT_BYTES 8192
#endif
#ifndef SCENARIO_SCRATCH_DOUBLES
#define SCENARIO_SCRATCH_DOUBLES 256
#endif

/* The device's root secret. Demo only: a real device keeps a per-device secret in OTP or a secure
 * element. 32 bytes (the string's terminating NUL is the last one). */
static const uint8_t scenario_root[32] = "mfc C firmware demo root secret";

typedef void (*scenario_emit)(const char *line);

static MfcStreamStorage scenario_storage;
static float scenario_workspace[SCENARIO_WORKSPACE_FLOATS];
static uint8_t scenario_newest[SCENARIO_SLOT_BYTES];
static uint8_t scenario_older[SCENARIO_SLOT_BYTES];
static double scenario_scratch[SCENARIO_SCRATCH_DOUBLES];

/* The inputs of `step`: every third step far above the clip norm (clipped inside the library). */
static void scenario_input(uint32_t step, float *x) {
    float big = step % 3 == 0 ? 40.0f : 0.3f;
    for (uint32_t c = 0; c < SCENARIO_DIM; c++) {
        x[c] = big * (float)((int)((step * 7 + c * 3) % 11) - 5) / 5.0f;
    }
}

static char *scenario_text(char *at, const char *text) {
    while (*text) {
        *at++ = *text++;
    }
    return at;
}

static char *scenario_decimal(char *at, uint32_t value) {
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n) {
        *at++ = digits[--n];
    }
    return at;
}

static char *scenario_hex(char *at, uint32_t value) {
    static const char hex[] = "0123456789abcdef";
    for (int shift = 28; shift >= 0; shift -= 4) {
        *at++ = hex[(value >> shift) & 0xf];
    }
    return at;
}

static uint32_t scenario_bits(float value) {
    union {
        float f;
        uint32_t u;
    } pun;
    pun.f = value;
    return pun.u;
}

static float scenario_float(uint32_t bits) {
    union {
        float f;
        uint32_t u;
    } pun;
    pun.u = bits;
    return pun.f;
}

static void scenario_release(scenario_emit emit, uint32_t step, const float *release) {
    char line[16 + 9 * SCENARIO_DIM];
    char *at = scenario_decimal(line, step);
    for (int c = 0; c < SCENARIO_DIM; c++) {
        *at++ = ' ';
        at = scenario_hex(at, scenario_bits(release[c]));
    }
    *at = 0;
    emit(line);
}

static void scenario_note(scenario_emit emit, const char *what, uint32_t value) {
    char line[96];
    char *at = scenario_text(line, "# ");
    at = scenario_text(at, what);
    at = scenario_decimal(at, value);
    *at = 0;
    emit(line);
}

/* A refused call: its name and status, and the scenario's exit code 2. */
static int scenario_refused(scenario_emit emit, const char *call, MfcStatus status) {
    char line[96];
    char *at = scenario_text(line, "# error: ");
    at = scenario_text(at, call);
    at = scenario_text(at, " returned status ");
    at = scenario_decimal(at, (uint32_t)status);
    *at = 0;
    emit(line);
    return 2;
}

#define SCENARIO_TRY(call, expression)                                                             \
    do {                                                                                           \
        MfcStatus scenario_status_ = (expression);                                                 \
        if (scenario_status_ != MFC_STATUS_OK) {                                                   \
            return scenario_refused(emit, call, scenario_status_);                                 \
        }                                                                                          \
    } while (0)

/* One step of the protocol before the release is emitted: step, checkpoint (into the newest
 * slot), count. */
#define SCENARIO_TRY_STEP()                                                                        \
    do {                                                                                           \
        scenario_input(step, input);                                                               \
        SCENARIO_TRY("mfc_stream_step", mfc_stream_step(stream, input, release, SCENARIO_DIM));    \
        SCENARIO_TRY("mfc_stream_checkpoint",                                                      \
                     mfc_stream_checkpoint(stream, &counter, scenario_newest,                      \
                                           SCENARIO_SLOT_BYTES, &written));                        \
        SCENARIO_TRY("mfc_counter_record", mfc_counter_record(&counter, stream));                  \
    } while (0)

/* Opens the stream of the counter's epoch in the static storage and workspace, verified with the
 * library's defaults (options NULL: the workspace as scratch, MFC_VERIFY_DEFAULT_OPERATIONS); when
 * the workspace is too short to serve as scratch, with the static scratch lent for the call. */
static MfcStatus scenario_open(const uint8_t *blob, size_t blob_len, const MfcCounter *counter,
                               MfcStream **stream) {
    size_t floats = 0;
    MfcStatus status = mfc_workspace_len(blob, blob_len, SCENARIO_DIM, &floats);
    if (status != MFC_STATUS_OK) {
        return status;
    }
    if (floats > SCENARIO_WORKSPACE_FLOATS) {
        return MFC_STATUS_WORKSPACE_TOO_SMALL;
    }
    status = mfc_stream_open_epoch(&scenario_storage, blob, blob_len, SCENARIO_DIM,
                                   scenario_workspace, floats, scenario_root, counter, NULL,
                                   stream);
    if (status == MFC_STATUS_VERIFY_SCRATCH_TOO_SMALL) {
        MfcOpenOptions options = {0};
        options.scratch = scenario_scratch;
        options.scratch_len = SCENARIO_SCRATCH_DOUBLES;
        status = mfc_stream_open_epoch(&scenario_storage, blob, blob_len, SCENARIO_DIM,
                                       scenario_workspace, floats, scenario_root, counter,
                                       &options, stream);
    }
    return status;
}

/* Runs the scenario for min(horizon, max_steps) steps, printing through `emit`. */
static inline int run_scenario(const uint8_t *blob, size_t blob_len, uint32_t max_steps,
                               scenario_emit emit) {
    MfcCounter counter = {0, 0}; /* the factory state, read from "monotonic storage" */
    SCENARIO_TRY("mfc_counter_cold_start", mfc_counter_cold_start(&counter));
    MfcStream *stream = NULL;
    SCENARIO_TRY("mfc_stream_open_epoch", scenario_open(blob, blob_len, &counter, &stream));
    uint32_t steps = mfc_stream_horizon(stream);
    if (steps > max_steps) {
        steps = max_steps;
    }
    uint32_t reboot_after = steps / 2 + 1 < steps ? steps / 2 + 1 : steps;
    uint32_t stale_after = reboot_after / 2;
    size_t capacity = mfc_stream_checkpoint_capacity(stream);
    if (capacity > SCENARIO_SLOT_BYTES) {
        return scenario_refused(emit, "mfc_stream_checkpoint_capacity", MFC_STATUS_BUFFER_TOO_SMALL);
    }
    scenario_note(emit, "epoch ", (uint32_t)counter.epoch);
    scenario_note(emit, "verdict (0: verified) ", (uint32_t)mfc_stream_verdict(stream));
    scenario_note(emit, "steps ", steps);
    scenario_note(emit, "checkpoint bytes at most ", (uint32_t)capacity);
    float input[SCENARIO_DIM], release[SCENARIO_DIM];
    size_t written = 0;
    uint32_t step = 0;
    while (step < reboot_after) {
        SCENARIO_TRY_STEP();
        if (step + 1 == stale_after) {
            for (size_t i = 0; i < SCENARIO_SLOT_BYTES; i++) {
                scenario_older[i] = scenario_newest[i];
            }
        }
        scenario_release(emit, step, release); /* emit */
        step++;
    }

    /* Reboot: RAM is gone (the workspace poisoned), the counter and the slots remain. */
    SCENARIO_TRY("mfc_stream_close", mfc_stream_close(stream));
    for (size_t i = 0; i < SCENARIO_WORKSPACE_FLOATS; i++) {
        scenario_workspace[i] = scenario_float(0x7fc00000u);
    }
    SCENARIO_TRY("mfc_stream_open_epoch", scenario_open(blob, blob_len, &counter, &stream));
    /* Stepping from 0 would release the first steps again under this epoch's key. */
    if (counter.released > 0) {
        scenario_input(0, input);
        MfcStatus early = mfc_stream_step(stream, input, release, SCENARIO_DIM);
        if (early != MFC_STATUS_RESTORE_REQUIRED) {
            scenario_note(emit, "a step before the restore was not refused: status ",
                          (uint32_t)early);
            return 1;
        }
        scenario_note(emit, "step before the restore refused: released ", counter.released);
    }
    if (stale_after > 0) {
        MfcStatus stale = mfc_stream_restore(stream, scenario_older, SCENARIO_SLOT_BYTES, &counter);
        if (stale != MFC_STATUS_STALE_CHECKPOINT) {
            scenario_note(emit, "a stale checkpoint was not refused: status ", (uint32_t)stale);
            return 1;
        }
        scenario_note(emit, "stale checkpoint refused: its step ", stale_after);
    }
    if (reboot_after > 0) {
        SCENARIO_TRY("mfc_stream_restore",
                     mfc_stream_restore(stream, scenario_newest, written, &counter));
    }
    /* The step to continue from comes from the checkpoint, not from RAM. */
    step = mfc_stream_steps_released(stream);
    scenario_note(emit, "restored at step ", step);
    while (step < steps) {
        SCENARIO_TRY_STEP();
        scenario_release(emit, step, release);
        step++;
    }
    /* A non-finite input and one buffer as both input and release are refused, not a crash. */
    input[0] = scenario_float(0x7fc00000u);
    if (mfc_stream_step(stream, input, release, SCENARIO_DIM) == MFC_STATUS_OK ||
        mfc_stream_step(stream, release, release, SCENARIO_DIM) != MFC_STATUS_OVERLAP) {
        scenario_note(emit, "a bad step was accepted at step ", step);
        return 1;
    }
    scenario_note(emit, "done: steps released ", mfc_stream_steps_released(stream));
    SCENARIO_TRY("mfc_stream_close", mfc_stream_close(stream));
    /* The closed handle is refused, not used. */
    if (mfc_stream_step(stream, input, release, SCENARIO_DIM) != MFC_STATUS_STREAM_CLOSED ||
        mfc_stream_close(stream) != MFC_STATUS_STREAM_CLOSED) {
        scenario_note(emit, "a closed stream was used: steps ", steps);
        return 1;
    }
    return 0;
}

#endif
