//! Shards of one stream stepped in parallel on rayon's thread pool (feature `parallel`, host
//! only).
//!
//! [`ParallelStream`] splits rows of `d` coordinates into contiguous shards
//! ([`shard_ranges`]: multiples of the noise [`BLOCK`] where possible), runs one
//! [`Stream::shard`] per range over its part of one workspace of `(h + r + 2)·d` floats, and
//! steps them concurrently. Each shard draws its own coordinates of the noise rows from its own
//! copy of the generator, so with the same seed the releases equal those of one unsharded
//! [`Stream`] bit for bit. Clipping uses the whole row: `step` computes
//! [`clip_factor`](crate::clip_factor) of the whole input once (its largest entry from the
//! shards' input checks) and hands it to every shard ([`Stream::step_clipped`]). Every check
//! runs before any shard moves, so an error leaves all of them as they were.

use core::ops::Range;
use std::vec::Vec;

use mfc_formats::Validated;
use rayon::prelude::*;

use crate::clip::clip_factor_with_largest;
use crate::error::Error;
use crate::forms::Stream;
use crate::noise::{BLOCK, NoiseSource};

/// `shards` contiguous ranges covering `0 .. dim`, of nearly equal lengths that are multiples of
/// [`BLOCK`] (except the last), so that no shard starts inside a noise block. Fewer ranges are
/// returned when `dim` is too small to give each at least one block; none when `dim` is 0.
pub fn shard_ranges(dim: usize, shards: usize) -> Vec<Range<usize>> {
    let block = BLOCK as usize;
    let blocks = dim.div_ceil(block);
    let shards = shards.clamp(1, blocks.max(1));
    let per_shard = blocks.div_ceil(shards).max(1) * block;
    (0..dim)
        .step_by(per_shard)
        .map(|start| start..dim.min(start + per_shard))
        .collect()
}

/// One stream of rows of `d` coordinates, run as shards on rayon's thread pool.
pub struct ParallelStream<'m, 'w, N: NoiseSource> {
    shards: Vec<Stream<'m, 'w, N>>,
    ranges: Vec<Range<usize>>,
    dim: usize,
}

impl<'m, 'w, N: NoiseSource + Send> ParallelStream<'m, 'w, N> {
    /// A stream of dimension `dim` in (up to) `shards` shards ([`shard_ranges`]), with the noise
    /// multiplier recorded in the blob. `workspace` needs
    /// [`Stream::workspace_len`]`(mechanism, dim)` floats, as for one stream; `noise` is called
    /// once per shard and must return the same generator (same seed) every time, or the
    /// releases will not equal an unsharded stream's.
    pub fn new(
        mechanism: Validated<'m>,
        dim: usize,
        shards: usize,
        workspace: &'w mut [f32],
        mut noise: impl FnMut() -> Result<N, Error>,
    ) -> Result<Self, Error> {
        let needed = Stream::<N>::workspace_len(&mechanism, dim)?;
        if workspace.len() < needed {
            return Err(Error::WorkspaceTooSmall {
                needed,
                found: workspace.len(),
            });
        }
        let ranges = shard_ranges(dim, shards);
        let mut streams = Vec::with_capacity(ranges.len());
        let mut rest = workspace.get_mut(..needed).unwrap_or(&mut []);
        for range in &ranges {
            let len = Stream::<N>::workspace_len(&mechanism, range.len())?;
            let (mine, others) = rest.split_at_mut(len.min(rest.len()));
            rest = others;
            streams.push(Stream::shard(
                mechanism,
                dim,
                range.clone(),
                mine,
                noise()?,
            )?);
        }
        Ok(Self {
            shards: streams,
            ranges,
            dim,
        })
    }

    /// [`Stream::step`] for the whole row: checks everything, computes the clip factor of the
    /// whole `input`, then steps every shard on its part of `input` and `release` in parallel.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        self.check_len(input)?;
        self.check_len(release)?;
        // The whole row's largest magnitude is the largest of its parts', found by the checks.
        let mut largest = 0.0f32;
        for (shard, range) in self.shards.iter().zip(&self.ranges) {
            let x = input.get(range.clone()).unwrap_or(&[]);
            let out = release.get(range.clone()).unwrap_or(&[]);
            let part = shard.check_input(x, out).map_err(|e| match e {
                Error::NonFiniteInput { index } => Error::NonFiniteInput {
                    index: index + range.start,
                },
                e => e,
            })?;
            largest = largest.max(part);
        }
        let Some(first) = self.shards.first() else {
            return Ok(()); // unreachable: a stream has at least one shard
        };
        let clip = clip_factor_with_largest(input, first.clip_norm(), largest);
        self.pieces(release)
            .into_par_iter()
            .try_for_each(|(shard, range, out)| {
                shard.step_clipped(input.get(range).unwrap_or(&[]), clip, out)
            })
    }

    /// [`Stream::step_noise`] for the whole row, the shards in parallel.
    pub fn step_noise(&mut self, noise_out: &mut [f32]) -> Result<(), Error> {
        self.check_len(noise_out)?;
        for (shard, range) in self.shards.iter().zip(&self.ranges) {
            shard.check_step(noise_out.get(range.clone()).unwrap_or(&[]))?;
        }
        self.pieces(noise_out)
            .into_par_iter()
            .try_for_each(|(shard, _, out)| shard.step_noise(out))
    }

    /// Steps released so far.
    pub fn steps_released(&self) -> u32 {
        self.shards.first().map_or(0, Stream::steps_released)
    }

    /// The horizon `n`.
    pub fn horizon(&self) -> u32 {
        self.shards.first().map_or(0, Stream::horizon)
    }

    /// The dimension `d` of the whole row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The coordinate ranges of the shards, in order.
    pub fn shard_ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    fn check_len(&self, row: &[f32]) -> Result<(), Error> {
        if row.len() == self.dim {
            Ok(())
        } else {
            Err(Error::DimensionMismatch {
                expected: self.dim,
                found: row.len(),
            })
        }
    }

    /// Each shard with its range and its part of `out` (whose length has been checked).
    #[allow(clippy::type_complexity)]
    fn pieces<'a>(
        &'a mut self,
        out: &'a mut [f32],
    ) -> Vec<(&'a mut Stream<'m, 'w, N>, Range<usize>, &'a mut [f32])> {
        let mut rest = out;
        let mut pieces = Vec::with_capacity(self.shards.len());
        for (shard, range) in self.shards.iter_mut().zip(&self.ranges) {
            let (mine, others) = rest.split_at_mut(range.len().min(rest.len()));
            rest = others;
            pieces.push((shard, range.clone(), mine));
        }
        pieces
    }
}
