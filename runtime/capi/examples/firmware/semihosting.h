/*
 * Arm semihosting, as QEMU implements it (-semihosting-config enable=on): SYS_OPEN of ":tt" for
 * writing is the host's stdout, SYS_WRITE writes to it, SYS_EXIT_EXTENDED ends QEMU with an exit
 * code. (SYS_WRITE0 would print on QEMU's stderr.)
 */
#ifndef MFC_SEMIHOSTING_H
#define MFC_SEMIHOSTING_H

#include <stdint.h>

static inline uintptr_t semihosting_call(uintptr_t op, const void *arg) {
    register uintptr_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* Writes a NUL-terminated string to the host's stdout. */
static inline void semihosting_write(const char *text) {
    static uintptr_t handle = (uintptr_t)-1;
    if (handle == (uintptr_t)-1) {
        /* SYS_OPEN ":tt" with mode 4 ("w"): the console's output. */
        const uintptr_t open[3] = {(uintptr_t)":tt", 4, 3};
        handle = semihosting_call(0x01, open);
    }
    uintptr_t len = 0;
    while (text[len]) {
        len++;
    }
    const uintptr_t write[3] = {handle, (uintptr_t)text, len};
    semihosting_call(0x05, write); /* SYS_WRITE */
}

__attribute__((noreturn)) static inline void semihosting_exit(int code) {
    /* SYS_EXIT_EXTENDED: ADP_Stopped_ApplicationExit with the exit code. */
    const uint32_t block[2] = {0x20026u, (uint32_t)code};
    semihosting_call(0x20, block);
    for (;;) {
    }
}

#endif
