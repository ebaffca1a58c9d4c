//! What each form's checkpoint holds and how its key is checked: the four implementations of
//! [`Checkpointable`], and the inherent `checkpoint`, `restore` and `checkpoint_capacity` of each
//! stream. The state's wire order is `wire.rs`'s; the key checks differ by form:
//!
//! - [`Stream`] (banded plus low rank): the newest ring row is `z_{t−1}` itself, compared with
//!   the key's regeneration;
//! - [`BandMfStream`]: the ring holds `w = C⁻¹z`; its newest row `w_{t−1}` is recomputed from the
//!   regenerated `z_{t−1}` and the `b̂ − 1` rows before it, with the step's own operations;
//! - [`BltStream`]: the buffers mix every past row, so the state ends with the first `min(d, 8)`
//!   coordinates of `z_{t−1}`, kept by the stream for this check;
//! - [`FftStream`]: the current block's noise `B̂_m z_block` is recomputed for the first two
//!   coordinates (one transform) and compared over all `m` rows.
//!
//! Each compares at most [`KEY_CHECK`] coordinates, bit for bit.

use mfc_formats::{Decoder, F32Table};

use super::counter::{ReleaseCounter, Resumable, sealed};
use super::fingerprint::BlobFingerprint;
use super::protocol::{self, Checkpointable, checkpoint_methods};
use crate::error::Error;
use crate::forms::bandmf::forward_substitution;
use crate::forms::blt::KEY_CHECK;
use crate::forms::{BandMfStream, BltStream, FftStream, Stream};
use crate::noise::NoiseSource;

/// Whether two tables are the same: the same bytes in place (a blob read from flash once), or
/// equal bytes.
fn same(a: F32Table<'_>, b: F32Table<'_>) -> bool {
    core::ptr::eq(a.as_bytes(), b.as_bytes()) || a.as_bytes() == b.as_bytes()
}

/// The first [`KEY_CHECK`] coordinates of noise row `step` of `noise` (fewer if `dim` is).
fn regenerate<N: NoiseSource>(
    noise: &mut N,
    step: usize,
    offset: u64,
    dim: usize,
) -> [f32; KEY_CHECK] {
    let mut row = [0.0f32; KEY_CHECK];
    let len = dim.min(KEY_CHECK);
    let (head, _) = row.split_at_mut(len);
    noise.fill_standard_normal(step as u64, offset, head);
    row
}

/// Whether the first `min(dim, KEY_CHECK)` coordinates of `row` equal the state floats `at + k`,
/// bit for bit.
fn tag_matches(row: &[f32; KEY_CHECK], dim: usize, at: usize, word: &dyn Fn(usize) -> f32) -> bool {
    row.iter()
        .take(dim)
        .enumerate()
        .all(|(k, z)| z.to_bits() == word(at + k).to_bits())
}

impl<N: NoiseSource> sealed::Sealed for Stream<'_, '_, N> {}
impl<N: NoiseSource> sealed::Sealed for BandMfStream<'_, '_, N> {}
impl<N: NoiseSource> sealed::Sealed for BltStream<'_, '_, N> {}
impl<N: NoiseSource> sealed::Sealed for FftStream<'_, '_, N> {}

impl<N: NoiseSource> Resumable for Stream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        Stream::steps_released(self)
    }
}

impl<N: NoiseSource> Resumable for BandMfStream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        BandMfStream::steps_released(self)
    }
}

impl<N: NoiseSource> Resumable for BltStream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        BltStream::steps_released(self)
    }
}

impl<N: NoiseSource> Resumable for FftStream<'_, '_, N> {
    fn steps_released(&self) -> u32 {
        FftStream::steps_released(self)
    }
}

impl<N: NoiseSource> Checkpointable for Stream<'_, '_, N> {
    fn same_decoder(&self, decoder: &Decoder<'_>) -> bool {
        let ours = Stream::decoder(self);
        match decoder {
            Decoder::BandedLowRank(theirs) => {
                ours.band == theirs.band
                    && ours.rank == theirs.rank
                    && same(ours.diagonals, theirs.diagonals)
                    && same(ours.left, theirs.left)
                    && same(ours.right, theirs.right)
            }
            _ => false,
        }
    }
    fn horizon(&self) -> u32 {
        Stream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        Stream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        Stream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        Stream::dim(self)
    }
    fn offset(&self) -> u64 {
        Stream::offset(self)
    }
    fn whole_row(&self) -> bool {
        Stream::whole_row(self)
    }
    fn shape(&self) -> (u32, u32) {
        let d = Stream::decoder(self);
        (d.band, d.rank)
    }
    fn state(&self) -> [&[f32]; 4] {
        Stream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        Stream::state_mut(self)
    }
    /// The newest ring row is `z_{step−1}` itself.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let (dim, offset) = (Stream::dim(self), Stream::offset(self));
        let Some(newest) = (step as usize).checked_sub(1) else {
            return false;
        };
        let band = (Stream::decoder(self).band as usize).max(1);
        let slot = newest % band;
        let row = regenerate(self.noise_mut(), newest, offset, dim);
        tag_matches(&row, dim, slot * dim, word)
    }
}

impl<N: NoiseSource> Checkpointable for BandMfStream<'_, '_, N> {
    fn same_decoder(&self, decoder: &Decoder<'_>) -> bool {
        let ours = BandMfStream::decoder(self);
        match decoder {
            Decoder::BandMf(theirs) => {
                ours.kind == theirs.kind
                    && ours.bands == theirs.bands
                    && same(ours.encoder, theirs.encoder)
            }
            _ => false,
        }
    }
    fn horizon(&self) -> u32 {
        BandMfStream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        BandMfStream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        BandMfStream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        BandMfStream::dim(self)
    }
    fn offset(&self) -> u64 {
        BandMfStream::offset(self)
    }
    fn whole_row(&self) -> bool {
        BandMfStream::whole_row(self)
    }
    fn shape(&self) -> (u32, u32) {
        (BandMfStream::decoder(self).bands, 0)
    }
    fn state(&self) -> [&[f32]; 4] {
        BandMfStream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        BandMfStream::state_mut(self)
    }
    /// The newest ring row is `w_{step−1}`: recomputed from the regenerated `z_{step−1}` and the
    /// ring's `b̂ − 1` rows before it, with the step's own operations.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let decoder = *BandMfStream::decoder(self);
        let (dim, bands) = (BandMfStream::dim(self), decoder.bands().max(1));
        let Some(newest) = (step as usize).checked_sub(1) else {
            return false;
        };
        let offset = BandMfStream::offset(self);
        let z = regenerate(self.noise_mut(), newest, offset, dim);
        let Some(row) = decoder.row(newest) else {
            return false;
        };
        z.iter().take(dim).enumerate().all(|(k, &z)| {
            let at = |t: usize| word((t % bands) * dim + k);
            let w = forward_substitution(z, row, newest, |l| at(newest - l));
            w.to_bits() == at(newest).to_bits()
        })
    }
}

impl<N: NoiseSource> Checkpointable for BltStream<'_, '_, N> {
    fn same_decoder(&self, decoder: &Decoder<'_>) -> bool {
        let ours = BltStream::decoder(self);
        match decoder {
            Decoder::Blt(theirs) => {
                same(ours.theta, theirs.theta) && same(ours.omega, theirs.omega)
            }
            _ => false,
        }
    }
    fn horizon(&self) -> u32 {
        BltStream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        BltStream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        BltStream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        BltStream::dim(self)
    }
    fn offset(&self) -> u64 {
        0
    }
    fn whole_row(&self) -> bool {
        true
    }
    fn shape(&self) -> (u32, u32) {
        (BltStream::buffers(self), 0)
    }
    fn state(&self) -> [&[f32]; 4] {
        BltStream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        BltStream::state_mut(self)
    }
    /// The buffers mix every past row, so the state ends with the first coordinates of
    /// `z_{step−1}` itself (after `(m + 2)·d` floats), regenerated here.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        let dim = BltStream::dim(self);
        let Some(newest) = (step as usize).checked_sub(1) else {
            return false;
        };
        let Some(at) = (BltStream::buffers(self) as usize + 2).checked_mul(dim) else {
            return false;
        };
        let row = regenerate(self.noise_mut(), newest, 0, dim);
        tag_matches(&row, dim, at, word)
    }
}

impl<N: NoiseSource> Checkpointable for FftStream<'_, '_, N> {
    fn same_decoder(&self, decoder: &Decoder<'_>) -> bool {
        let ours = FftStream::decoder(self);
        match decoder {
            Decoder::Fft(theirs) => {
                ours.kind == theirs.kind
                    && ours.block == theirs.block
                    && ours.stamps == theirs.stamps
                    && same(ours.kernel, theirs.kernel)
                    && same(ours.generator, theirs.generator)
            }
            _ => false,
        }
    }
    fn horizon(&self) -> u32 {
        FftStream::horizon(self)
    }
    fn clip_norm(&self) -> f32 {
        FftStream::clip_norm(self)
    }
    fn noise_scale(&self) -> f32 {
        FftStream::noise_scale(self)
    }
    fn dim(&self) -> usize {
        FftStream::dim(self)
    }
    fn offset(&self) -> u64 {
        0
    }
    fn whole_row(&self) -> bool {
        true
    }
    fn shape(&self) -> (u32, u32) {
        (FftStream::decoder(self).block, 0)
    }
    fn state(&self) -> [&[f32]; 4] {
        FftStream::state(self)
    }
    fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        FftStream::state_mut(self)
    }
    /// The block noise is `B̂_m` of the block's draws: the first two coordinates of the block of
    /// `step − 1` are recomputed and compared.
    fn key_matches(&mut self, step: u32, word: &dyn Fn(usize) -> f32) -> bool {
        FftStream::key_matches(self, step, word)
    }
}

checkpoint_methods!(Stream, "(h + r + 2)·d");
checkpoint_methods!(BandMfStream, "(b̂ + 2)·d");
checkpoint_methods!(BltStream, "((m + 2)·d + min(d, 8))");
checkpoint_methods!(FftStream, "(m + 3)·d");
