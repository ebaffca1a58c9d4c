/*
 * Startup of the bare-metal C firmware (Cortex-M4F, MPS2-AN386 under QEMU): the vector table, a
 * reset handler that enables the FPU (libmfc is built for the hard-float ABI), copies .data and
 * zeroes .bss before main, a SysTick handler counting the counter's wraps (for bench.c), and the
 * semihosting calls the firmware prints and exits with.
 */
#include <stdint.h>

#include "semihosting.h"

extern uint32_t _data_start[], _data_end[], _data_load[], _bss_start[], _bss_end[], _stack_top[];
int main(void);

void reset_handler(void) {
    /* CPACR: full access to CP10 and CP11 (the FPU) before any floating-point instruction. */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    for (uint32_t *from = _data_load, *to = _data_start; to < _data_end;) {
        *to++ = *from++;
    }
    for (uint32_t *at = _bss_start; at < _bss_end;) {
        *at++ = 0;
    }
    semihosting_exit(main());
}

/* A fault exits with code 3, so that CI sees it instead of a hang. */
static void fault_handler(void) {
    semihosting_exit(3);
}

/* SysTick wraps (bench.c enables its interrupt to time calls longer than its 24-bit counter). */
volatile uint32_t systick_wraps;

static void systick_handler(void) {
    systick_wraps++;
}

__attribute__((section(".vectors"), used)) static const void *const vectors[16] = {
    _stack_top,      /* initial stack pointer */
    reset_handler,   /* reset */
    fault_handler,   /* NMI */
    fault_handler,   /* HardFault */
    fault_handler,   /* MemManage */
    fault_handler,   /* BusFault */
    fault_handler,   /* UsageFault */
    [15] = systick_handler, /* SysTick */
};
