//! A telemetry counter on a Cortex-M4F: four event counters, released as differentially private
//! running totals every step by the mfc runtime, from a blob embedded in flash.
//!
//! The device follows the runtime's checkpoint rules (`mfc_runtime::checkpoint`): it cold-starts
//! epoch 1 (the release counter is persisted before the key is derived), and every step runs
//! *step → checkpoint → count → emit*. After [`REBOOT_AFTER`] steps it simulates a reboot: the
//! stream and its RAM are dropped, an older checkpoint is shown to be refused as stale, and the
//! newest one is restored; the releases that follow must equal the uninterrupted stream's, which
//! the host reference (`tests/tests/firmware.rs`) checks bit for bit. "Flash" and the monotonic
//! counter are simulated in RAM: QEMU keeps no state across runs.
//!
//! The unit of privacy is one device's events in one step (event level): the blob is for single
//! participation and `Stream::step` clips each step's row to ζ. User level (the device's events in
//! every step) needs a blob for that schema and costs far more noise (`README.md`, "On a device").
//!
//! Exit codes (through semihosting): 0 success, 2 a runtime error (e.g. the `corrupt-blob`
//! build), 3 a hard fault, 101 a panic. With the `bench` feature it prints instruction counts
//! instead (see `budget.sh`). The telemetry run replays a blob of any form through
//! `mfc_runtime::Replay` with the same protocol (`MFC_FIRMWARE_BLOB=bandmf.mfc`, `blt.mfc`, an
//! FFT blob); the bench run uses the form's own stream type (`Stream`, `BltStream`, `FftStream`,
//! `BandMfStream`), so that the figures are that form's.
#![no_std]
#![no_main]
// The bench build uses the loggers and the scenario only in part.
#![cfg_attr(feature = "bench", allow(dead_code, unused_imports))]

// cortex-m provides the critical section that defmt's logger takes.
use cortex_m as _;
use cortex_m_rt::{ExceptionFrame, entry, exception};
use mfc_runtime::{BlobFingerprint, Error, ReleaseCounter, Replay, epoch_noise};

#[allow(dead_code)]
mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}
mod log;
#[allow(dead_code)]
mod scenario;
#[cfg(feature = "bench")]
mod systick;

use config::{DIM, WORKSPACE};
use scenario::{REBOOT_AFTER, ROOT_SECRET, STALE_AFTER, events};

/// The stream of the bench run: the embedded blob's own form, so that the struct size and the
/// code measured are that form's (the telemetry run replays any form through `Replay`).
#[cfg(all(feature = "bench", mfc_form = "banded"))]
type FormStream<'m, 'w> = mfc_runtime::Stream<'m, 'w, mfc_runtime::ChaChaNoise>;
#[cfg(all(feature = "bench", mfc_form = "blt"))]
type FormStream<'m, 'w> = mfc_runtime::BltStream<'m, 'w, mfc_runtime::ChaChaNoise>;
#[cfg(all(feature = "bench", mfc_form = "fft"))]
type FormStream<'m, 'w> = mfc_runtime::FftStream<'m, 'w, mfc_runtime::ChaChaNoise>;
#[cfg(all(feature = "bench", mfc_form = "bandmf"))]
type FormStream<'m, 'w> = mfc_runtime::BandMfStream<'m, 'w, mfc_runtime::ChaChaNoise>;

/// The mechanism, in flash: `telemetry.mfc` (see `README.md` for the command that made it), or
/// the blob named by `MFC_FIRMWARE_BLOB` at build time.
static BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob.mfc"));

/// Bytes of a checkpoint slot: the runtime's `Shape::checkpoint_len` for the blob and `d`
/// (`build.rs`), `14 + 50 + 4·(floats of state) + 4`.
const SLOT: usize = config::CHECKPOINT;

/// What survives a reboot: the release counter (monotonic storage) and two checkpoint slots
/// (flash). Simulated in RAM.
struct Persistent {
    counter: ReleaseCounter,
    newest: [u8; SLOT],
    older: [u8; SLOT],
}

#[entry]
fn main() -> ! {
    // The bench run reports the stack of the whole run too: everything below this frame.
    #[cfg(feature = "bench")]
    let whole = systick::StackProbe::paint();
    #[cfg(feature = "bench")]
    let result = run(&whole);
    #[cfg(not(feature = "bench"))]
    let result = run();
    match result {
        Ok(()) => log::exit(0),
        Err(e) => {
            log::error(e);
            log::exit(2)
        }
    }
}

#[cfg(not(feature = "bench"))]
fn run() -> Result<(), Error> {
    let (mechanism, blob) = BlobFingerprint::load(BLOB)?;
    let mut storage = Persistent {
        counter: ReleaseCounter::FACTORY,
        newest: [0; SLOT],
        older: [0; SLOT],
    };
    // Cold start: a new epoch, persisted before its key exists.
    storage.counter = storage.counter.cold_start()?;
    log::banner(
        blob.crc32(),
        mechanism.steps(),
        DIM,
        storage.counter.epoch(),
    );

    let mut workspace = [0.0f32; WORKSPACE];
    let mut input = [0.0f32; DIM];
    let mut release = [0.0f32; DIM];
    let mut step = 0;
    {
        let noise = epoch_noise(&ROOT_SECRET, &storage.counter)?;
        let mut stream = Replay::open(mechanism, DIM, &mut workspace, noise)?;
        while step < REBOOT_AFTER {
            events(step, &mut input);
            stream.step(&input, &mut release)?;
            stream.checkpoint(&blob, &storage.counter, &mut storage.newest)?;
            storage.counter.record(&stream)?;
            if step + 1 == STALE_AFTER {
                storage.older = storage.newest;
            }
            log::release(step, &release);
            step += 1;
        }
    }
    // Reboot: RAM is gone (poisoned here), the counter and the slots remain.
    workspace.fill(f32::NAN);
    let (mechanism, blob) = BlobFingerprint::load(BLOB)?;
    let noise = epoch_noise(&ROOT_SECRET, &storage.counter)?;
    let mut stream = Replay::open(mechanism, DIM, &mut workspace, noise)?;
    match stream.restore(&blob, &storage.older, &storage.counter) {
        Err(e @ Error::StaleCheckpoint { .. }) => log::refused(e),
        Err(e) => return Err(e),
        Ok(()) => return Err(Error::StreamAlreadyStarted), // a stale checkpoint must not load
    }
    stream.restore(&blob, &storage.newest, &storage.counter)?;
    // The step to continue from comes from the checkpoint, not from RAM.
    let mut step = stream.steps_released();
    log::restored(step);
    while step < stream.horizon() {
        events(step, &mut input);
        stream.step(&input, &mut release)?;
        stream.checkpoint(&blob, &storage.counter, &mut storage.newest)?;
        storage.counter.record(&stream)?;
        log::release(step, &release);
        step += 1;
    }
    log::done(step);
    Ok(())
}

/// The budget run: instructions (SysTick under `qemu -icount`) for loading the blob, a step, a
/// checkpoint and a restore; nothing is printed between the marks.
#[cfg(feature = "bench")]
#[inline(never)]
fn run(whole: &systick::StackProbe) -> Result<(), Error> {
    use core::hint::black_box;
    let timer = systick::Timer::start();
    let t = timer.now();
    let (mechanism, blob) = BlobFingerprint::load(black_box(BLOB))?;
    let load = timer.since(t);
    let mut counter = ReleaseCounter::FACTORY.cold_start()?;
    let mut workspace = [0.0f32; WORKSPACE];
    let mut slot = [0u8; SLOT];
    let mut input = [0.0f32; DIM];
    let mut release = [0.0f32; DIM];
    let noise = epoch_noise(&ROOT_SECRET, &counter)?;
    let mut stream = FormStream::new(mechanism, DIM, &mut workspace, noise)?;
    let steps = stream.horizon();
    let (mut stepping, mut checkpointing, mut checksum) = (0u64, 0u64, 0u32);
    // The probe below repaints what the loading used: read the whole run's mark first.
    let loading_stack = whole.used();
    let stack = systick::StackProbe::paint();
    for step in 0..steps {
        events(step, &mut input);
        let t = timer.now();
        stream.step(black_box(&input), &mut release)?;
        stepping += timer.since(t);
        let t = timer.now();
        stream.checkpoint(&blob, &counter, &mut slot)?;
        checkpointing += timer.since(t);
        counter.record(&stream)?;
        checksum = scenario::fold_checksum(checksum, &release);
    }
    let stack_bytes = stack.used();
    drop(stream);
    let noise = epoch_noise(&ROOT_SECRET, &counter)?;
    let mut stream = FormStream::new(mechanism, DIM, &mut workspace, noise)?;
    let t = timer.now();
    stream.restore(&blob, black_box(&slot), &counter)?;
    let restoring = timer.since(t);
    let empty = timer.overhead();
    let loop_ticks = timer.loop_ticks();
    log::bench(&log::Bench {
        steps,
        dim: DIM,
        #[cfg(mfc_form = "banded")]
        form: log::Form::Banded {
            band_rank: config::BAND_RANK,
        },
        #[cfg(mfc_form = "bandmf")]
        form: log::Form::BandMf {
            bands: config::BANDS,
            toeplitz: config::TOEPLITZ,
        },
        #[cfg(mfc_form = "blt")]
        form: log::Form::Blt {
            buffers: config::BUFFERS,
        },
        #[cfg(mfc_form = "fft")]
        form: log::Form::Fft {
            block: config::BLOCK,
        },
        workspace_floats: WORKSPACE,
        stream_bytes: core::mem::size_of::<FormStream<'_, '_>>(),
        load,
        stepping,
        checkpointing,
        restoring,
        empty,
        loop_ticks,
        stack_bytes,
        whole_stack_bytes: loading_stack.max(whole.used()),
        checksum,
    });
    Ok(())
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("panic: {info}");
    log::exit(101)
}

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    log::exit(3)
}
