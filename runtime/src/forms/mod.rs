//! The decoder forms a blob can store, one stream each: how a device turns the blob's tables and
//! a noise row per step into private releases, in a workspace the caller owns.
//!
//! | form (`mfc compile --form`) | module | stream | workspace (floats) | a step |
//! |---|---|---|---|---|
//! | banded plus low rank (`banded`, decoder 0) | [`banded`] | [`Stream`] | `(h + r + 2)·d` | `O((h + r)·d)` |
//! | FFT (`fft`, decoder 1) | [`fft`] | [`FftStream`] | `(m + 3)·d + 2m + 2N·k` | `O(d·log m)` amortized |
//! | BLT (`blt`, decoder 2) | [`blt`] | [`BltStream`] | `(m + 2)·d` | `O(m·d)` |
//! | BandMF (`bandmf`, decoder 3) | [`bandmf`] | [`BandMfStream`] | `(b̂ + 2)·d` | `O(b̂·d)` |
//!
//! Each form's module states its algorithm, its state and its memory, and gives the workspace as
//! a `const fn` of the form's shape and `d` (`banded::workspace_len(h, r, d)`, …): a device can
//! size a static buffer at compile time ([`Workspace`]), and [`Shape`](crate::Shape) gathers them
//! for any blob. What every form shares lives beside them: the checks and clipping of a step
//! (`step.rs`, with [`CHUNK`]) and what a stream derives from its blob at construction — the noise
//! scale and clip norm in `f32`, rounded in the direction that keeps the privacy claim, and the
//! horizon (`setup.rs`). [`Replay`](crate::Replay) opens a blob of any form and dispatches to its
//! stream; [`checkpoint`](crate::checkpoint) saves and restores each form's state; a fifth form
//! is a module here, a variant of `Replay` and `Shape`, its checkpoint state
//! (`checkpoint/forms.rs`) and its verification (`verify/`).

pub mod banded;
pub mod bandmf;
pub mod blt;
pub mod fft;
mod setup;
mod step;

use core::ops::{Deref, DerefMut};

pub use banded::Stream;
pub use bandmf::BandMfStream;
pub use blt::BltStream;
pub use fft::FftStream;
pub(crate) use setup::{clip_norm, horizon, recorded_noise_multiplier};
pub use step::CHUNK;
pub(crate) use step::check_input;

/// A statically allocated workspace of `N` floats, for callers without a heap.
pub struct Workspace<const N: usize>([f32; N]);

impl<const N: usize> Workspace<N> {
    /// A zeroed workspace.
    pub const fn new() -> Self {
        Self([0.0; N])
    }
}

impl<const N: usize> Default for Workspace<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Deref for Workspace<N> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl<const N: usize> DerefMut for Workspace<N> {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}
