/*
 * The budget run of the C library on bare metal (budget.sh): the embedded blob's stream is opened
 * through libmfc with all memory static (verified: the library's default), stepped over its
 * horizon with a checkpoint after every step, then reopened and restored once; SysTick, clocked
 * from the core, counts the ticks of each call (under `qemu -icount shift=6` on mps2-an386,
 * instructions = ticks · 40 / 64; its wraps counted by an interrupt for the open, whose
 * verification outlasts the 24-bit counter), and the stack below main's frame is painted to find
 * the deepest call. Prints one line:
 *   bench steps=… dim=… workspace_floats=… stream_bytes=… checkpoint_bytes=… stack_bytes=…
 *         ticks: open=… step_total=… checkpoint_total=… restore=… empty=… checksum=…
 */
#include <stddef.h>
#include <stdint.h>

#include "../scenario.h"
#include "blob.h"
#include "semihosting.h"

extern uint32_t _bss_end[];
extern volatile uint32_t systick_wraps;

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define MASK 0x00ffffffu
#define PAINT 0xa5a55a5au
#define DEPTH (32u * 1024u)

static inline uint32_t now(void) {
    return SYST_CVR;
}

static inline uint32_t since(uint32_t start) {
    return (start - SYST_CVR) & MASK;
}

/* Ticks since reset, wraps included (the counter counts down from MASK). */
static uint64_t ticks(void) {
    uint32_t wraps, value;
    do {
        wraps = systick_wraps;
        value = SYST_CVR;
    } while (wraps != systick_wraps);
    return ((uint64_t)wraps << 24) + (MASK - value);
}

static char *field(char *at, const char *name, uint32_t value) {
    at = scenario_text(at, name);
    return scenario_decimal(at, value);
}

static void emit_line(const char *line);

static void fail(const char *call, MfcStatus status) {
    scenario_refused(emit_line, call, status);
    semihosting_exit(2);
}

#define CHECK(call, expression)                                                                    \
    do {                                                                                           \
        MfcStatus status_ = (expression);                                                          \
        if (status_ != MFC_STATUS_OK) {                                                            \
            fail(call, status_);                                                                   \
        }                                                                                          \
    } while (0)

static void emit_line(const char *line) {
    semihosting_write(line);
    semihosting_write("\n");
}

/* The stack below this frame, painted; returns the painted range. */
__attribute__((noinline)) static void paint(uint32_t **bottom, uint32_t **top) {
    uint32_t marker;
    uint32_t *sp = (uint32_t *)(((uintptr_t)&marker - 256u) & ~(uintptr_t)3u);
    uint32_t *low = (uint32_t *)((uintptr_t)sp - DEPTH);
    if (low < _bss_end) {
        low = _bss_end;
    }
    for (volatile uint32_t *at = low; at < sp; at++) {
        *at = PAINT;
    }
    *bottom = low;
    *top = sp;
}

static uint32_t used(uint32_t *bottom, uint32_t *top) {
    volatile uint32_t *at = bottom;
    while (at < top && *at == PAINT) {
        at++;
    }
    return (uint32_t)((uintptr_t)top - (uintptr_t)at) + 256u;
}

int main(void) {
    const uint8_t *blob = mfc_blob_start;
    size_t blob_len = (size_t)(mfc_blob_end - mfc_blob_start);
    SYST_RVR = MASK;
    SYST_CVR = 0;
    SYST_CSR = 7; /* enable, core clock, interrupt on every wrap */
    MfcCounter counter = {0, 0};
    CHECK("mfc_counter_cold_start", mfc_counter_cold_start(&counter));
    MfcStream *stream = NULL;
    uint64_t opened = ticks();
    CHECK("mfc_stream_open_epoch", scenario_open(blob, blob_len, &counter, &stream));
    opened = ticks() - opened;
    size_t floats = 0;
    CHECK("mfc_workspace_len", mfc_workspace_len(blob, blob_len, SCENARIO_DIM, &floats));
    uint32_t steps = mfc_stream_horizon(stream);
    if (steps > 1024) {
        steps = 1024; /* a blob without a horizon: the first 1024 steps */
    }
    float input[SCENARIO_DIM], release[SCENARIO_DIM];
    size_t written = 0;
    uint32_t stepping = 0, checkpointing = 0, checksum = 0;
    uint32_t *bottom, *top;
    paint(&bottom, &top);
    for (uint32_t step = 0; step < steps; step++) {
        scenario_input(step, input);
        uint32_t t = now();
        CHECK("mfc_stream_step", mfc_stream_step(stream, input, release, SCENARIO_DIM));
        stepping += since(t);
        t = now();
        CHECK("mfc_stream_checkpoint",
              mfc_stream_checkpoint(stream, &counter, scenario_newest, SCENARIO_SLOT_BYTES,
                                    &written));
        checkpointing += since(t);
        CHECK("mfc_counter_record", mfc_counter_record(&counter, stream));
        for (int c = 0; c < SCENARIO_DIM; c++) {
            checksum = (checksum << 5 | checksum >> 27) ^ scenario_bits(release[c]);
        }
    }
    uint32_t stack = used(bottom, top);
    CHECK("mfc_stream_close", mfc_stream_close(stream));
    CHECK("mfc_stream_open_epoch", scenario_open(blob, blob_len, &counter, &stream));
    uint32_t t = now();
    CHECK("mfc_stream_restore", mfc_stream_restore(stream, scenario_newest, written, &counter));
    uint32_t restoring = since(t);
    t = now();
    uint32_t empty = since(t);
    char line[512];
    char *at = scenario_text(line, "bench");
    at = field(at, " steps=", steps);
    at = field(at, " dim=", SCENARIO_DIM);
    at = field(at, " workspace_floats=", (uint32_t)floats);
    at = field(at, " stream_bytes=", (uint32_t)mfc_stream_size());
    at = field(at, " checkpoint_bytes=", (uint32_t)written);
    at = field(at, " stack_bytes=", stack);
    at = field(at, " ticks: open=", (uint32_t)opened);
    at = field(at, " step_total=", stepping);
    at = field(at, " checkpoint_total=", checkpointing);
    at = field(at, " restore=", restoring);
    at = field(at, " empty=", empty);
    at = scenario_text(at, " checksum=");
    at = scenario_hex(at, checksum);
    *at = 0;
    emit_line(line);
    return 0;
}
