//! A step: the checks every form runs before it changes anything, and the clipping of a step's
//! examples one by one.
//!
//! Every step function of every form checks its arguments completely before it touches the
//! stream's state ([`check_step`], [`check_input`], [`check_examples`]), so a refused step leaves
//! the stream exactly as it was. An input row is clipped to `ζ` as a whole
//! ([`crate::clip::clip_factor`]); a training step's examples are clipped each by itself and then
//! summed ([`add_examples`]), so one example moves the releases by at most `ζ`. A shard sees only
//! its coordinates of each example, so its caller gives each example's whole-row factor
//! ([`Factors::Given`]); a whole row computes them itself ([`Factors::Computed`]). Both go
//! through the same [`add_examples`] (and [`scaled_examples`]), so that a shard's coordinates see
//! exactly the operations of the unsharded step.

use crate::clip::{clip_factor, clip_range_holds, largest_magnitude};
use crate::error::Error;
use crate::sum;

/// Coordinates per chunk of the fused pass of a step of the banded and BandMF forms (64 KiB per
/// row of state): the chunk of `y` and the `r` rows of `β` (updated, then read) stay in a core's
/// L2 cache within the chunk, and each row is streamed in long runs, which the hardware
/// prefetchers follow (`BENCHMARKS.md`, "What made the step fast", has the sizes tried).
pub const CHUNK: usize = 16384;

/// What a step adds to the running sum before releasing it (the banded and FFT forms).
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    /// Nothing, and only the noise is released (`step_noise`).
    NoiseOnly,
    /// The row `x` scaled by the clip factor `clip`.
    Row(&'a [f32], f32),
    /// Nothing more: the step's examples have been added already (`step_examples`).
    Added,
}

/// The checks before a step of every stream form: a step is left before the horizon
/// ([`Error::StreamFinished`]) and the output row has `dim` coordinates
/// ([`Error::DimensionMismatch`]).
pub(crate) fn check_step(step: u32, horizon: u32, dim: usize, out: &[f32]) -> Result<(), Error> {
    if step >= horizon {
        return Err(Error::StreamFinished { steps: horizon });
    }
    if out.len() != dim {
        return Err(Error::DimensionMismatch {
            expected: dim,
            found: out.len(),
        });
    }
    Ok(())
}

/// The checks of an input row of every stream form: `dim` coordinates
/// ([`Error::DimensionMismatch`]), all finite ([`Error::NonFiniteInput`], the first one that is
/// not) and within the range clipping handles exactly ([`Error::InputTooLarge`]: a magnitude
/// above `2⁹⁶·ζ`, [`crate::clip`]). Returns the row's largest magnitude, found in the same pass,
/// for [`clip_factor_with_largest`](crate::clip::clip_factor_with_largest).
pub(crate) fn check_input(dim: usize, input: &[f32], clip_norm: f32) -> Result<f32, Error> {
    if input.len() != dim {
        return Err(Error::DimensionMismatch {
            expected: dim,
            found: input.len(),
        });
    }
    let largest = largest_magnitude(input).map_err(|index| Error::NonFiniteInput { index })?;
    if !clip_range_holds(largest, clip_norm) {
        return Err(Error::InputTooLarge {
            index: position_beyond(input, clip_norm),
        });
    }
    Ok(largest)
}

/// The clip factors of a step's examples.
#[derive(Clone, Copy)]
pub(crate) enum Factors<'a> {
    /// Each example is a whole row, clipped by its own [`clip_factor`]`(row, ζ)` (`ζ` held here).
    Computed(f32),
    /// One factor per example from the caller (a shard's `step_examples_clipped`): each example's
    /// whole-row [`clip_factor`], checked to lie in `[0, 1]` ([`check_examples`]).
    Given(&'a [f32]),
}

/// The checks of a step's examples ([`Stream::step_examples`](super::Stream::step_examples)): whole
/// rows of `dim` coordinates ([`Error::ExamplesShape`]), one factor per example if the caller
/// gives them ([`Error::ClipFactorsShape`]), each example finite ([`Error::NonFiniteExample`])
/// and within the range clipping handles exactly ([`Error::ExampleTooLarge`]), the first
/// offending example and coordinate named, and each given factor in `[0, 1]`
/// ([`Error::InvalidClipFactor`]).
///
/// Returns a bound on the magnitude of every coordinate of the examples' clipped sum (before
/// rounding, which [`crate::sum`]'s callers allow for by a factor 2): `m·ζ` with factors
/// computed here (each clipped row has norm at most `ζ`, [`clip_factor`]); with given factors
/// the larger of that and `Σ_e f_e·max_k |x_e[k]|`, which holds whatever the caller's factors
/// are. The BandMF stream checks its release against this bound, so that wrong factors cannot
/// make a BandMF release overflow unseen; the banded stream does not yet (a banded shard given
/// wrong factors for rows near `f32::MAX` can release a non-finite value, as its `step_clipped`
/// can).
pub(crate) fn check_examples(
    dim: usize,
    examples: &[f32],
    factors: Factors<'_>,
    clip_norm: f32,
) -> Result<f32, Error> {
    if dim == 0 || examples.len() % dim != 0 {
        return Err(Error::ExamplesShape {
            dim,
            len: examples.len(),
        });
    }
    let count = examples.len() / dim;
    if let Factors::Given(given) = factors
        && given.len() != count
    {
        return Err(Error::ClipFactorsShape {
            examples: count,
            factors: given.len(),
        });
    }
    let mut given_bound = 0.0f32;
    for (example, row) in examples.chunks_exact(dim).enumerate() {
        let largest =
            largest_magnitude(row).map_err(|index| Error::NonFiniteExample { example, index })?;
        if !clip_range_holds(largest, clip_norm) {
            return Err(Error::ExampleTooLarge {
                example,
                index: position_beyond(row, clip_norm),
            });
        }
        if let Factors::Given(given) = factors {
            let factor = given.get(example).copied().unwrap_or(f32::NAN);
            if !(0.0..=1.0).contains(&factor) {
                return Err(Error::InvalidClipFactor);
            }
            given_bound += factor * largest;
        }
    }
    Ok((clip_norm * count as f32).max(given_bound))
}

/// The first coordinate of `row` whose magnitude is beyond [`clip_range_holds`].
fn position_beyond(row: &[f32], clip_norm: f32) -> usize {
    row.iter()
        .position(|x| !clip_range_holds(x.abs(), clip_norm))
        .unwrap_or(0)
}

/// `(factor, row)` for each example (row of `dim` coordinates) of checked `examples`: the factor
/// [`clip_factor`]`(row, ζ)` of a whole row, or the caller's. The one place the factors come
/// from, for every form's per-example step.
pub(crate) fn scaled_examples<'e>(
    examples: &'e [f32],
    dim: usize,
    factors: Factors<'e>,
) -> impl Iterator<Item = (f32, &'e [f32])> {
    examples
        .chunks_exact(dim.max(1))
        .enumerate()
        .map(move |(example, row)| {
            let factor = match factors {
                Factors::Computed(clip_norm) => clip_factor(row, clip_norm),
                // Checked: one factor per example. A missing one adds nothing (fails closed).
                Factors::Given(given) => given.get(example).copied().unwrap_or(0.0),
            };
            (factor, row)
        })
}

/// Adds each example (row of `sum.len()` coordinates) of checked `examples`, scaled by its clip
/// factor ([`scaled_examples`]), to the compensated sum `(sum, compensation)`.
pub(crate) fn add_examples(
    examples: &[f32],
    factors: Factors<'_>,
    sum: &mut [f32],
    compensation: &mut [f32],
) {
    for (factor, row) in scaled_examples(examples, sum.len(), factors) {
        for ((s, c), &x) in sum.iter_mut().zip(compensation.iter_mut()).zip(row) {
            sum::add(s, c, factor * x);
        }
    }
}
