//! Measuring on the emulator: SysTick clocked from the core counts executed instructions under
//! `qemu -icount shift=N` (mps2-an386: 25 MHz, so instructions = ticks · 40 / 2^N; every board is
//! calibrated by [`Timer::loop_ticks`]), and the stack high-water mark by painting. Intervals
//! longer than `2²⁴` ticks (about 10⁷ instructions at `shift=6`) need the wraps counted
//! ([`Timer::start_counting_wraps`], [`Timer::ticks`]).

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::{SYST, syst::SystClkSource};
use cortex_m_rt::exception;

/// SysTick's wraps (one per `2²⁴` ticks) since [`Timer::start_counting_wraps`].
static WRAPS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    // Only this handler writes: a load and a store (ARMv6-M has no atomic read-modify-write).
    WRAPS.store(WRAPS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// SysTick as a free-running 24-bit down-counter of core clock ticks.
pub struct Timer(SYST);

const MASK: u32 = 0x00ff_ffff;

/// Turns of the calibration loop ([`Timer::loop_ticks`]).
const LOOP_TURNS: u32 = 10_000;
/// Instructions of the calibration loop's difference: two per turn.
pub const LOOP_INSTRUCTIONS: u64 = 2 * LOOP_TURNS as u64;

impl Timer {
    /// Takes SysTick and starts it from the core clock, without interrupts.
    pub fn start() -> Self {
        let Some(peripherals) = cortex_m::Peripherals::take() else {
            crate::log::exit(4)
        };
        let mut syst = peripherals.SYST;
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(MASK);
        syst.clear_current();
        syst.enable_counter();
        Self(syst)
    }

    /// As [`start`](Self::start), with SysTick's interrupt counting the counter's wraps, for
    /// [`ticks`](Self::ticks).
    #[allow(dead_code)] // the telemetry firmware's intervals are short
    pub fn start_counting_wraps() -> Self {
        let mut timer = Self::start();
        timer.0.enable_interrupt();
        timer
    }

    /// Ticks since [`start_counting_wraps`](Self::start_counting_wraps): the 24-bit counter
    /// plus its counted wraps.
    #[allow(dead_code)]
    pub fn ticks(&self) -> u64 {
        loop {
            let wraps = WRAPS.load(Ordering::Relaxed);
            let now = SYST::get_current();
            if WRAPS.load(Ordering::Relaxed) == wraps {
                return u64::from(wraps) * (1 << 24) + u64::from(MASK - now);
            }
        }
    }

    /// The counter now.
    #[inline(always)]
    pub fn now(&self) -> u32 {
        SYST::get_current()
    }

    /// Ticks since `start` (one interval must stay below 2^24 ticks).
    #[inline(always)]
    pub fn since(&self, start: u32) -> u64 {
        u64::from(start.wrapping_sub(SYST::get_current()) & MASK)
    }

    /// Ticks of [`LOOP_INSTRUCTIONS`] instructions: a count-down loop of two instructions per
    /// turn (`subs`, `bne`), timed for `2L` and for `L` turns, the difference. Each board clocks
    /// SysTick differently (mps2-an386 25 MHz, microbit 16 MHz, mps2-an505 20 MHz), so the bench
    /// reports its clock in instructions and `budget.sh` converts with it.
    pub fn loop_ticks(&self) -> u64 {
        let turns = |n: u32| {
            let t = self.now();
            // Safety: a register-only loop; it touches no memory and no stack.
            unsafe {
                core::arch::asm!(
                    "2:",
                    "subs {n}, #1",
                    "bne 2b",
                    n = inout(reg) n => _,
                    options(nomem, nostack),
                );
            }
            self.since(t)
        };
        // At least one tick: the callers divide by it.
        turns(2 * LOOP_TURNS)
            .saturating_sub(turns(LOOP_TURNS))
            .max(1)
    }

    /// Ticks of an empty measurement (to subtract per measured interval).
    pub fn overhead(&self) -> u64 {
        let t = self.now();
        self.since(t)
    }
}

unsafe extern "C" {
    /// End of `.bss`/`.data`/`.uninit` (cortex-m-rt's heap start): the stack may grow down to it.
    static __sheap: u32;
}

/// The stack below the current frame, painted with a pattern to find how deep it went.
pub struct StackProbe {
    bottom: usize,
    top: usize,
}

const PAINT: u32 = 0xa5a5_5a5a;
/// Bytes painted below the current stack pointer (the runtime needs far less).
const DEPTH: usize = 32 * 1024;

impl StackProbe {
    /// Paints `DEPTH` bytes below the current stack pointer (keeping 256 bytes for this frame).
    #[inline(never)]
    pub fn paint() -> Self {
        let sp = cortex_m::register::msp::read() as usize;
        let top = (sp - 256) & !3;
        let heap = core::ptr::addr_of!(__sheap) as usize; // the address only; never read
        let bottom = top.saturating_sub(DEPTH).max(heap);
        let mut at = bottom;
        while at < top {
            // Safety: `bottom..top` lies between the end of the static data and the live stack
            // frames, so it is unused stack memory, word aligned.
            unsafe { core::ptr::write_volatile(at as *mut u32, PAINT) };
            at += 4;
        }
        Self { bottom, top }
    }

    /// Bytes of painted stack overwritten since [`paint`](Self::paint), plus the 256 kept.
    pub fn used(&self) -> usize {
        let mut at = self.bottom;
        // Safety: reading back the words painted above, in the same range.
        while at < self.top && unsafe { core::ptr::read_volatile(at as *const u32) } == PAINT {
            at += 4;
        }
        self.top - at + 256
    }
}
