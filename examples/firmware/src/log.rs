//! The one logging shim of the firmware: semihosting text (the default, compared with the host
//! reference line by line) or defmt (`defmt` feature, decoded by `defmt-print`). Nothing else in
//! the firmware prints, and the runtime itself never logs.

use mfc_runtime::Error;

/// Ends the program with `code` as QEMU's exit status.
pub fn exit(code: i32) -> ! {
    semihosting::process::exit(code)
}

/// The form of the benched stream and its parameters.
#[cfg(feature = "bench")]
pub enum Form {
    /// Banded plus low rank, `(h, r)`: `Stream`, with checkpoint and restore.
    Banded { band_rank: (u32, u32) },
    /// BLT with `m` buffers per coordinate: `BltStream`, with checkpoint and restore.
    Blt { buffers: usize },
    /// FFT with blocks of `m` steps: `FftStream`, with checkpoint and restore.
    Fft { block: u32 },
    /// BandMF with `b̂` bands, banded Toeplitz or general: `BandMfStream`, with checkpoint and
    /// restore.
    BandMf { bands: u32, toeplitz: bool },
}

/// The figures of a `bench` run; times are SysTick ticks (see `budget.sh` for instructions).
#[cfg(feature = "bench")]
pub struct Bench {
    pub steps: u32,
    pub dim: usize,
    pub form: Form,
    pub workspace_floats: usize,
    pub stream_bytes: usize,
    pub load: u64,
    pub stepping: u64,
    pub checkpointing: u64,
    pub restoring: u64,
    pub empty: u64,
    /// Ticks of [`crate::systick::LOOP_INSTRUCTIONS`] instructions: the clock of this board.
    pub loop_ticks: u64,
    pub stack_bytes: usize,
    /// Stack of the whole run (its arrays: workspace, checkpoint slot, stream), from `main`.
    pub whole_stack_bytes: usize,
    pub checksum: u32,
}

#[cfg(not(feature = "defmt"))]
mod text {
    use core::fmt::{self, Write};

    use super::Error;
    use crate::scenario::write_release;

    /// A line assembled on the stack (no allocator on the device).
    struct Line {
        buffer: [u8; 256],
        len: usize,
    }

    impl Write for Line {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            let room = self.buffer.get_mut(self.len..end).ok_or(fmt::Error)?;
            room.copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    pub fn error(e: Error) {
        semihosting::eprintln!("error: {e}");
    }

    pub fn banner(crc: u32, steps: u32, dim: usize, epoch: u64) {
        semihosting::println!(
            "mfc telemetry firmware: blob CRC-32 {crc:#010x}, n = {steps}, d = {dim}, epoch {epoch}"
        );
    }

    pub fn release(step: u32, release: &[f32]) {
        let mut line = Line {
            buffer: [0; 256],
            len: 0,
        };
        if write_release(&mut line, step, release).is_ok() {
            let text = core::str::from_utf8(&line.buffer[..line.len]).unwrap_or("");
            semihosting::println!("{text}");
        } else {
            semihosting::println!("release {step}: line too long");
        }
    }

    pub fn refused(e: Error) {
        semihosting::println!("reboot: older checkpoint refused: {e}");
    }

    pub fn restored(step: u32) {
        semihosting::println!("reboot: restored the newest checkpoint at step {step}");
    }

    pub fn done(steps: u32) {
        semihosting::println!("done: {steps} steps released");
    }

    /// Banded: `bench h=… r=… d=… … checkpoint_total=… restore=… …`; BLT: `bench blt m=… d=…`,
    /// FFT: `bench fft m=… d=…`, BandMF: `bench bandmf b=… kind=toeplitz|general d=…`, each
    /// followed by the banded fields.
    #[cfg(feature = "bench")]
    pub fn bench(b: &super::Bench) {
        match b.form {
            super::Form::Banded { band_rank } => semihosting::println!(
                "bench h={} r={} d={} steps={} workspace_floats={} stream_bytes={} stack_bytes={} whole_stack_bytes={} ticks: load={} step_total={} checkpoint_total={} restore={} empty={} loop={} checksum={:08x}",
                band_rank.0,
                band_rank.1,
                b.dim,
                b.steps,
                b.workspace_floats,
                b.stream_bytes,
                b.stack_bytes,
                b.whole_stack_bytes,
                b.load,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks,
                b.checksum
            ),
            super::Form::BandMf { bands, toeplitz } => semihosting::println!(
                "bench bandmf b={} kind={} d={} steps={} workspace_floats={} stream_bytes={} stack_bytes={} whole_stack_bytes={} ticks: load={} step_total={} checkpoint_total={} restore={} empty={} loop={} checksum={:08x}",
                bands,
                if toeplitz { "toeplitz" } else { "general" },
                b.dim,
                b.steps,
                b.workspace_floats,
                b.stream_bytes,
                b.stack_bytes,
                b.whole_stack_bytes,
                b.load,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks,
                b.checksum
            ),
            super::Form::Blt { buffers } => semihosting::println!(
                "bench blt m={} d={} steps={} workspace_floats={} stream_bytes={} stack_bytes={} whole_stack_bytes={} ticks: load={} step_total={} checkpoint_total={} restore={} empty={} loop={} checksum={:08x}",
                buffers,
                b.dim,
                b.steps,
                b.workspace_floats,
                b.stream_bytes,
                b.stack_bytes,
                b.whole_stack_bytes,
                b.load,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks,
                b.checksum
            ),
            super::Form::Fft { block } => semihosting::println!(
                "bench fft m={} d={} steps={} workspace_floats={} stream_bytes={} stack_bytes={} whole_stack_bytes={} ticks: load={} step_total={} checkpoint_total={} restore={} empty={} loop={} checksum={:08x}",
                block,
                b.dim,
                b.steps,
                b.workspace_floats,
                b.stream_bytes,
                b.stack_bytes,
                b.whole_stack_bytes,
                b.load,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks,
                b.checksum
            ),
        }
    }
}

#[cfg(feature = "defmt")]
mod text {
    use super::Error;
    use defmt_semihosting as _;

    pub fn error(e: Error) {
        defmt::error!("{}", e);
    }

    pub fn banner(crc: u32, steps: u32, dim: usize, epoch: u64) {
        defmt::info!(
            "mfc telemetry firmware: blob CRC-32 {=u32:#x}, n = {=u32}, d = {=usize}, epoch {=u64}",
            crc,
            steps,
            dim,
            epoch
        );
    }

    pub fn release(step: u32, release: &[f32]) {
        defmt::info!("release {=u32}: {=[?]}", step, release);
    }

    pub fn refused(e: Error) {
        defmt::info!("reboot: older checkpoint refused: {}", e);
    }

    pub fn restored(step: u32) {
        defmt::info!(
            "reboot: restored the newest checkpoint at step {=u32}",
            step
        );
    }

    pub fn done(steps: u32) {
        defmt::info!("done: {=u32} steps released", steps);
    }

    #[cfg(feature = "bench")]
    pub fn bench(b: &super::Bench) {
        match b.form {
            super::Form::Banded { band_rank } => defmt::info!(
                "bench h={=u32} r={=u32} d={=usize} steps={=u32} stack_bytes={=usize} ticks: step_total={=u64} checkpoint_total={=u64} restore={=u64} empty={=u64} loop={=u64}",
                band_rank.0,
                band_rank.1,
                b.dim,
                b.steps,
                b.stack_bytes,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks
            ),
            super::Form::BandMf { bands, toeplitz } => defmt::info!(
                "bench bandmf b={=u32} toeplitz={=bool} d={=usize} steps={=u32} stack_bytes={=usize} ticks: step_total={=u64} checkpoint_total={=u64} restore={=u64} empty={=u64} loop={=u64}",
                bands,
                toeplitz,
                b.dim,
                b.steps,
                b.stack_bytes,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks
            ),
            super::Form::Blt { buffers } => defmt::info!(
                "bench blt m={=usize} d={=usize} steps={=u32} stack_bytes={=usize} ticks: step_total={=u64} checkpoint_total={=u64} restore={=u64} empty={=u64} loop={=u64}",
                buffers,
                b.dim,
                b.steps,
                b.stack_bytes,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks
            ),
            super::Form::Fft { block } => defmt::info!(
                "bench fft m={=u32} d={=usize} steps={=u32} stack_bytes={=usize} ticks: step_total={=u64} checkpoint_total={=u64} restore={=u64} empty={=u64} loop={=u64}",
                block,
                b.dim,
                b.steps,
                b.stack_bytes,
                b.stepping,
                b.checkpointing,
                b.restoring,
                b.empty,
                b.loop_ticks
            ),
        }
    }
}

pub use text::*;
