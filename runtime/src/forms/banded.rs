//! The stream: Algorithm 3 of 000 (App. H; printed correctly at the end of 002), in the form of
//! 004 (App. D, Alg. 1) where the low-rank update runs once per step after the band.
//!
//! For a banded-plus-low-rank decoder `B̂ = (L Rᵀ) ⊙ U⁽ʰ⁾ + D⁽ʰ⁾`, step `i` (0-based) computes
//!
//! ```text
//! β   += R[i−h,:]ᵀ z_{i−h}                       (if i ≥ h)
//! y    = Σ_{k=0}^{min(i,h−1)} D[i,k] z_{i−k} + L[i,:] β
//! s   += clip(x_i, ζ)                            (compensated: crate::sum)
//! out  = s + σ·ζ·sens·y
//! ```
//!
//! so `y = (B̂ z)_i` with `β = Σ_{j ≤ i−h} R[j,:]ᵀ z_j`. The state is the last `h` noise rows (row
//! `z_t` lives in slot `t mod h`; `z_{i−h}` is consumed just before `z_i` overwrites it), `β`
//! (`r × d`) and the running sum `s` with its compensation (two rows, `runtime/src/sum.rs`), so
//! that `s` stays within a few ulps of the exact sum (the same file): `(h + r + 2)·d` floats, all
//! in the caller's workspace.
//!
//! For training, [`Stream::step_examples`] takes the step's examples (rows of `d`) instead of one
//! row, clips each to `ζ` and adds them all: one example, not the step's whole row, is then what
//! moves the release by at most `ζ` (the unit of privacy is the example).
//!
//! Every line above acts coordinate by coordinate, so a step is one fused pass over `d` in chunks
//! of [`CHUNK`] coordinates: for each chunk, `β` is updated, `z_i` drawn, `y` accumulated and the
//! sum added while the chunk of `y` and `β` stays in a core's cache. Each row of the state is
//! then read from memory once per step (and `β`, `z_i`, `s` written once) instead of `y` being
//! re-read for each of the `h + r` terms. Each coordinate sees the same floating-point operations
//! in the same order as in whole-row passes (`runtime/tests/shards.rs` checks it bit for bit).
//! For large `d` a step is bound by memory bandwidth: `BENCHMARKS.md` has the figures.
//!
//! # Shards
//!
//! For the same reason a stream may own only coordinates `a .. b` of a wider row
//! ([`Stream::shard`]): it draws `z_t[a..b]` (a [`NoiseSource`] can start anywhere in a row), keeps
//! `(h + r + 2)·(b − a)` floats, and releases exactly the coordinates `a .. b` that an unsharded
//! stream with the same seed would. Threads, or separate workers of a distributed job, can thus
//! each run one shard. Clipping is the exception: it needs the norm of the whole input row, which a
//! shard does not see. A shard therefore refuses [`Stream::step`]; it takes the factor
//! `min(1, ζ/‖x‖)` of the whole row from its caller ([`Stream::step_clipped`], e.g. from
//! [`clip_factor`](crate::clip::clip_factor) of the whole row; one from an all-reduce of the
//! shards' squared norms must be shrunk for its rounding errors as [`clip`](crate::clip) does), or
//! releases noise only ([`Stream::step_noise`]). For training it refuses
//! [`Stream::step_examples`] likewise and takes its coordinates of each example with each whole
//! example's factor ([`Stream::step_examples_clipped`]): with the factors of
//! [`clip_factor`](crate::clip::clip_factor) its release equals coordinates `a .. b` of the
//! unsharded `step_examples`, bit for bit, since both add each example's coordinates scaled by
//! the same factor in the same order. As for `step_clipped`, the stream checks that each factor
//! lies in `[0, 1]` but cannot check that it is the whole example's: privacy (one example moves
//! the releases by at most `ζ`) rests on the caller passing the whole-row factors.

use core::ops::Range;

use mfc_formats::{BandedLowRank, Decoder, F32Table, Mechanism, Validated, Workload};

use super::setup::{dimension_supported, prepare, recorded_noise_multiplier};
use super::step::{CHUNK, Factors, Input, add_examples, check_examples, check_input, check_step};
use crate::clip::clip_factor_with_largest;
use crate::error::Error;
use crate::noise::{MAX_COORDINATES, NoiseSource};
use crate::sum;

/// Floats of workspace of a banded stream (band `h`, rank `r`) of `dim` coordinates:
/// `(h + r + 2)·d` — the last `h` noise rows, `β` (`r` rows), the running sum and its
/// compensation — all of which a checkpoint carries. `None` when `dim` is 0 or more than a noise
/// row can address, or the size overflows `usize`.
pub const fn workspace_len(band: u32, rank: u32, dim: usize) -> Option<usize> {
    if !dimension_supported(dim) {
        return None;
    }
    let Some(rows) = (band as usize).checked_add(rank as usize) else {
        return None;
    };
    let Some(rows) = rows.checked_add(2) else {
        return None;
    };
    rows.checked_mul(dim)
}

/// A stream releasing one private prefix sum (or noise row) per step.
pub struct Stream<'m, 'w, N: NoiseSource> {
    decoder: BandedLowRank<'m>,
    prefix_sum: bool,
    horizon: u32,
    dim: usize,
    clip_norm: f32,
    noise_scale: f32,
    ring: &'w mut [f32],
    beta: &'w mut [f32],
    sum: &'w mut [f32],
    /// What rounding took from `sum` ([`crate::sum`]).
    compensation: &'w mut [f32],
    step: u32,
    noise: N,
    /// The first coordinate of the row this stream owns (0 unless a shard).
    offset: u64,
    /// Whether the stream owns the whole row, so that it can clip inputs itself.
    whole_row: bool,
}

/// Coordinates `start .. end` of row `index` of a row-major buffer with rows of `dim` floats
/// (empty if out of range, which the stream's construction rules out).
fn part(buffer: &[f32], index: usize, dim: usize, start: usize, end: usize) -> &[f32] {
    buffer
        .get(index * dim + start..index * dim + end)
        .unwrap_or(&[])
}

fn part_mut(buffer: &mut [f32], index: usize, dim: usize, start: usize, end: usize) -> &mut [f32] {
    buffer
        .get_mut(index * dim + start..index * dim + end)
        .unwrap_or(&mut [])
}

impl<'m, 'w, N: NoiseSource> Stream<'m, 'w, N> {
    /// Floats of workspace a stream of dimension `dim` needs: [`workspace_len`]`(h, r, dim)`,
    /// `(h + r + 2)·d`. Errors: [`Error::UnsupportedDecoder`] for a blob of another form,
    /// [`Error::InvalidDimension`] for a `dim` out of range.
    pub fn workspace_len(mechanism: &Validated<'_>, dim: usize) -> Result<usize, Error> {
        let d = banded(mechanism)?;
        workspace_len(d.band, d.rank, dim).ok_or(Error::InvalidDimension)
    }

    /// A stream using the noise multiplier recorded in the blob.
    pub fn new(
        mechanism: Validated<'m>,
        dim: usize,
        workspace: &'w mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = recorded_noise_multiplier(&mechanism)?;
        Self::with_noise_multiplier(mechanism, dim, workspace, noise, sigma)
    }

    /// A stream with an explicit noise multiplier `σ` (for example from
    /// [`noise_multiplier_for`](crate::privacy::noise_multiplier_for)).
    pub fn with_noise_multiplier(
        mechanism: Validated<'m>,
        dim: usize,
        workspace: &'w mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        let decoder = banded(&mechanism)?;
        let needed = Self::workspace_len(&mechanism, dim)?;
        let (scales, workspace) = prepare(&mechanism, noise_multiplier, workspace, needed)?;
        let h = mechanism.header;
        let (ring, rest) = workspace.split_at_mut(decoder.band as usize * dim);
        let (beta, rest) = rest.split_at_mut(decoder.rank as usize * dim);
        let (sum, compensation) = rest.split_at_mut(dim);
        Ok(Self {
            decoder,
            prefix_sum: matches!(h.workload, Workload::PrefixSum),
            horizon: h.steps,
            dim,
            clip_norm: scales.clip_norm,
            noise_scale: scales.noise,
            ring,
            beta,
            sum,
            compensation,
            step: 0,
            noise,
            offset: 0,
            whole_row: true,
        })
    }

    /// A shard: the stream of coordinates `range` of rows of `row_dim` coordinates, with the
    /// noise multiplier recorded in the blob. Its workspace is
    /// [`workspace_len`](Self::workspace_len)`(mechanism, range.len())`; with the same seed its
    /// releases equal coordinates `range` of an unsharded stream's, bit for bit. Inputs and
    /// releases have `range.len()` coordinates. See the [module docs](self) on clipping.
    pub fn shard(
        mechanism: Validated<'m>,
        row_dim: usize,
        range: Range<usize>,
        workspace: &'w mut [f32],
        noise: N,
    ) -> Result<Self, Error> {
        let sigma = recorded_noise_multiplier(&mechanism)?;
        Self::shard_with_noise_multiplier(mechanism, row_dim, range, workspace, noise, sigma)
    }

    /// A shard ([`shard`](Self::shard)) with an explicit noise multiplier `σ`.
    pub fn shard_with_noise_multiplier(
        mechanism: Validated<'m>,
        row_dim: usize,
        range: Range<usize>,
        workspace: &'w mut [f32],
        noise: N,
        noise_multiplier: f64,
    ) -> Result<Self, Error> {
        if range.start >= range.end || range.end > row_dim || row_dim as u64 > MAX_COORDINATES {
            return Err(Error::InvalidShard {
                start: range.start,
                end: range.end,
                row: row_dim,
            });
        }
        let dim = range.end - range.start;
        let mut stream =
            Self::with_noise_multiplier(mechanism, dim, workspace, noise, noise_multiplier)?;
        stream.offset = range.start as u64;
        stream.whole_row = dim == row_dim;
        Ok(stream)
    }

    /// Consumes `input` (clipped to `ζ`) and writes the private prefix sum of step `i` into
    /// `release`. On error nothing changes: not the step, not the sum, not the noise.
    ///
    /// A shard refuses this ([`Error::ClipFactorRequired`]): it cannot see the whole row's norm.
    pub fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        let largest = self.check_input(input, release)?;
        if !self.whole_row {
            return Err(Error::ClipFactorRequired);
        }
        let clip = clip_factor_with_largest(input, self.clip_norm, largest);
        self.advance(release, Input::Row(input, clip));
        Ok(())
    }

    /// A training step: `examples` holds the step's examples, rows of `d` coordinates one after
    /// the other (`m·d` floats for `m ≥ 0` examples). Each example is clipped to `ζ` by itself,
    /// their sum is added to the running sum, and the private prefix sum is written into
    /// `release`. Removing one example moves every later release by at most `ζ` (its clipped
    /// row), whatever the others are: the runtime keeps the guarantee for a unit of privacy of
    /// one example, where [`step`](Self::step) clips the whole row (one record per step, e.g. a
    /// telemetry device). Allocation-free: the examples are read in place, twice (checks, then
    /// clipping and summing).
    ///
    /// Errors, with nothing changed: [`Error::ExamplesShape`] if the length is not a multiple of
    /// `d`, [`Error::NonFiniteExample`] and [`Error::ExampleTooLarge`] (the example and its
    /// coordinate), the checks of `step`; a shard refuses it ([`Error::ClipFactorRequired`]: use
    /// [`step_examples_clipped`](Self::step_examples_clipped)).
    pub fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        let factors = Factors::Computed(self.clip_norm);
        self.check_examples(examples, factors, release)?;
        if !self.whole_row {
            return Err(Error::ClipFactorRequired);
        }
        self.add_examples(examples, factors, release);
        Ok(())
    }

    /// [`step_examples`](Self::step_examples) with each example's clip factor given by the
    /// caller, for a shard: `examples` holds this shard's coordinates of each of the step's `m`
    /// examples (`m` rows of [`dim`](Self::dim), one after the other), `clips` the `m` factors
    /// `min(1, ζ/‖x_e‖)` of the **whole** examples ([`clip_factor`](crate::clip::clip_factor)`(x_e,
    /// ζ)`, ζ from [`clip_norm`](Self::clip_norm)). With those factors the release equals this
    /// shard's coordinates of the unsharded `step_examples`, bit for bit (see the
    /// [module docs](self)); a whole-row stream takes it too, and with the factors of
    /// `clip_factor` releases what `step_examples` does. The stream checks that each factor lies
    /// in `[0, 1]` but cannot check that it is the whole example's: privacy rests on the caller
    /// here, as for [`step_clipped`](Self::step_clipped).
    ///
    /// Errors, with nothing changed: those of `step_examples` (but not
    /// [`Error::ClipFactorRequired`]), [`Error::ClipFactorsShape`] unless there is one factor per
    /// example, [`Error::InvalidClipFactor`] for a factor outside `[0, 1]` (NaN included).
    pub fn step_examples_clipped(
        &mut self,
        examples: &[f32],
        clips: &[f32],
        release: &mut [f32],
    ) -> Result<(), Error> {
        let factors = Factors::Given(clips);
        self.check_examples(examples, factors, release)?;
        self.add_examples(examples, factors, release);
        Ok(())
    }

    /// [`step`](Self::step) with the clip factor given by the caller: `clip` must be
    /// `min(1, ζ/‖x‖)` for the **whole** input row `x`
    /// ([`clip_factor`](crate::clip::clip_factor)`(x, ζ)`, with ζ from
    /// [`clip_norm`](Self::clip_norm)), of which `input` is this shard's part. The stream checks
    /// that `clip` lies in `[0, 1]` but cannot check that it is the whole row's: privacy rests on
    /// the caller here. With the factor of [`clip_factor`](crate::clip::clip_factor) the release
    /// equals that of `step`.
    pub fn step_clipped(
        &mut self,
        input: &[f32],
        clip: f32,
        release: &mut [f32],
    ) -> Result<(), Error> {
        self.check_input(input, release)?;
        if !(0.0..=1.0).contains(&clip) {
            return Err(Error::InvalidClipFactor);
        }
        self.advance(release, Input::Row(input, clip));
        Ok(())
    }

    /// Advances one step and writes only the noise `σ·ζ·sens·(B̂ z)_i` into `noise_out`: for
    /// workloads whose `(A x)_i` the caller computes itself (from inputs it clipped to `ζ`).
    pub fn step_noise(&mut self, noise_out: &mut [f32]) -> Result<(), Error> {
        self.check_step(noise_out)?;
        self.advance(noise_out, Input::NoiseOnly);
        Ok(())
    }

    /// Whether [`step`](Self::step) releases prefix sums (else only
    /// [`step_noise`](Self::step_noise) is available).
    pub fn releases_prefix_sums(&self) -> bool {
        self.prefix_sum
    }

    /// Steps released so far.
    pub fn steps_released(&self) -> u32 {
        self.step
    }

    /// The horizon `n`.
    pub fn horizon(&self) -> u32 {
        self.horizon
    }

    /// The dimension `d` (of a shard: its number of coordinates).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The first coordinate of the row this stream owns: 0 unless it is a shard.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The clip norm `ζ` recorded in the blob, as the stream applies it: rounded down to `f32`.
    pub fn clip_norm(&self) -> f32 {
        self.clip_norm
    }

    /// The checks of a prefix-sum step with input `input` and output `release`; returns the
    /// input's largest magnitude ([`check_input`]).
    pub(crate) fn check_input(&self, input: &[f32], release: &[f32]) -> Result<f32, Error> {
        if !self.prefix_sum {
            return Err(Error::WorkloadNotStreamable);
        }
        self.check_step(release)?;
        check_input(self.dim, input, self.clip_norm)
    }

    /// The checks of a training step of `examples` with `factors` and output `release`.
    fn check_examples(
        &self,
        examples: &[f32],
        factors: Factors<'_>,
        release: &[f32],
    ) -> Result<(), Error> {
        if !self.prefix_sum {
            return Err(Error::WorkloadNotStreamable);
        }
        self.check_step(release)?;
        check_examples(self.dim, examples, factors, self.clip_norm)?;
        Ok(())
    }

    /// A training step of checked `examples`: their sum, each scaled by its factor, enters the
    /// running sum, and the step's release is written.
    fn add_examples(&mut self, examples: &[f32], factors: Factors<'_>, release: &mut [f32]) {
        add_examples(examples, factors, self.sum, self.compensation);
        self.advance(release, Input::Added);
    }

    pub(crate) fn check_step(&self, out: &[f32]) -> Result<(), Error> {
        check_step(self.step, self.horizon, self.dim, out)?;
        self.check_state()
    }

    /// What [`advance`](Self::advance) reads, present at the sizes construction gave: the state's
    /// rows in the workspace ([`Error::WorkspaceTooSmall`]) and the decoder's rows for this
    /// step (a step the blob has no row for is past its horizon, [`Error::StreamFinished`]).
    /// Construction and validation make both hold; checked anyway before every step, so that a
    /// broken invariant fails closed — a refusal — and never releases a row without its noise.
    fn check_state(&self) -> Result<(), Error> {
        let (i, d) = (self.step as usize, self.dim);
        let (h, r) = (self.decoder.band as usize, self.decoder.rank as usize);
        let state = [
            (self.ring.len(), h * d),
            (self.beta.len(), r * d),
            (self.sum.len(), d),
            (self.compensation.len(), d),
        ];
        if state.iter().any(|&(found, needed)| found < needed) {
            return Err(Error::WorkspaceTooSmall {
                needed: workspace_len(self.decoder.band, self.decoder.rank, d)
                    .unwrap_or(usize::MAX),
                found: state.iter().map(|&(found, _)| found).sum(),
            });
        }
        let rows = self.decoder.diagonal_row(i).is_some_and(|b| b.len() == h)
            && self.decoder.left_row(i).is_some_and(|l| l.len() == r)
            && (i < h || self.decoder.right_row(i - h).is_some_and(|l| l.len() == r));
        if !rows {
            return Err(Error::StreamFinished { steps: self.step });
        }
        Ok(())
    }

    /// Algorithm 3 for the current step: writes `σζ·sens·(B̂ z)_i` into `y` — plus the running
    /// sum, after adding `clip·x` for `Input::Row(x, clip)`, unless the input is
    /// `Input::NoiseOnly` — and moves to the next step. One fused pass over the coordinates in
    /// chunks of [`CHUNK`]. Only called after every check has passed.
    fn advance(&mut self, y: &mut [f32], input: Input<'_>) {
        let (i, d) = (self.step as usize, self.dim);
        let (h, r) = (self.decoder.band as usize, self.decoder.rank as usize);
        let slot = i % h;
        // The noise scale is folded into the coefficients, so each term is one multiply-add.
        let scale = self.noise_scale;
        let right = if i >= h {
            self.decoder.right_row(i - h)
        } else {
            None
        };
        // Rows exist for every i < n (the blob was validated); empty ones would add nothing.
        let band = self.decoder.diagonal_row(i).unwrap_or(F32Table::empty());
        let left = self.decoder.left_row(i).unwrap_or(F32Table::empty());
        let mut start = 0;
        while start < d {
            let end = d.min(start + CHUNK);
            // β += R[i−h,:]ᵀ z_{i−h}, before z_i overwrites z_{i−h} in the same slot.
            if let Some(right) = right {
                let oldest = part(self.ring, slot, d, start, end);
                let rows = self
                    .beta
                    .chunks_exact_mut(d)
                    .zip(right.iter())
                    .map(|(row, c)| (c, row.get_mut(start..end).unwrap_or(&mut [])));
                scatter(oldest, rows);
            }
            let current = part_mut(self.ring, slot, d, start, end);
            self.noise
                .fill_standard_normal(i as u64, self.offset + start as u64, current);
            // y = Σ_k D[i,k] z_{i−k} + L[i,:] β: the main diagonal (k = 0, never absent) writes y,
            // every other term adds to it.
            let y = y.get_mut(start..end).unwrap_or(&mut []);
            let mut band = band.iter();
            let main = band.next().unwrap_or(0.0) * scale;
            for (out, &z) in y.iter_mut().zip(part(self.ring, slot, d, start, end)) {
                *out = main * z;
            }
            let ring = &*self.ring;
            let beta = &*self.beta;
            let band_terms = (1..=i.min(h - 1))
                .zip(band)
                .map(|(k, c)| (c * scale, part(ring, (i - k) % h, d, start, end)));
            let left_terms = left
                .iter()
                .take(r)
                .enumerate()
                .map(|(q, c)| (c * scale, part(beta, q, d, start, end)));
            gather(y, band_terms.chain(left_terms));
            let sum = self.sum.get_mut(start..end).unwrap_or(&mut []);
            let compensation = self.compensation.get_mut(start..end).unwrap_or(&mut []);
            let sums = sum.iter_mut().zip(compensation.iter_mut());
            match input {
                Input::NoiseOnly => {}
                Input::Row(input, clip) => {
                    let x = input.get(start..end).unwrap_or(&[]);
                    for (((s, c), &x), out) in sums.zip(x).zip(y.iter_mut()) {
                        sum::add(s, c, clip * x);
                        *out += sum::value(*s, *c);
                    }
                }
                Input::Added => {
                    for ((s, c), out) in sums.zip(y.iter_mut()) {
                        *out += sum::value(*s, *c);
                    }
                }
            }
            start = end;
        }
        self.step += 1;
    }
}

/// `row += c·z` for every `(c, row)` of `rows`: the `β` update of a chunk. On hosts up to three
/// rows per pass over `z` (fewer passes over memory); on bare-metal targets, where `d` is small
/// and flash is scarce, one row per pass. Each coordinate sees the same operations either way.
#[cfg(not(target_os = "none"))]
fn scatter<'a>(z: &[f32], rows: impl Iterator<Item = (f32, &'a mut [f32])>) {
    let mut rows = rows.fuse();
    loop {
        match (rows.next(), rows.next(), rows.next()) {
            (Some((a, x)), Some((b, w)), Some((c, v))) => {
                for (((x, w), v), &z) in x.iter_mut().zip(w.iter_mut()).zip(v.iter_mut()).zip(z) {
                    *x += a * z;
                    *w += b * z;
                    *v += c * z;
                }
            }
            (Some((a, x)), Some((b, w)), None) => {
                for ((x, w), &z) in x.iter_mut().zip(w.iter_mut()).zip(z) {
                    *x += a * z;
                    *w += b * z;
                }
            }
            (Some((a, x)), None, _) => {
                for (x, &z) in x.iter_mut().zip(z) {
                    *x += a * z;
                }
            }
            _ => break,
        }
    }
}

#[cfg(target_os = "none")]
fn scatter<'a>(z: &[f32], rows: impl Iterator<Item = (f32, &'a mut [f32])>) {
    for (a, x) in rows {
        for (x, &z) in x.iter_mut().zip(z) {
            *x += a * z;
        }
    }
}

/// `y += Σ c·row` over `terms`, in order: the band and low-rank terms of a chunk. On hosts up to
/// four terms per pass over `y` (a few memory streams at once use the memory system better than
/// one; more would contend for cache sets); on bare-metal targets one. Each coordinate adds its
/// terms one by one, in order, either way.
#[cfg(not(target_os = "none"))]
fn gather<'a>(y: &mut [f32], terms: impl Iterator<Item = (f32, &'a [f32])>) {
    let mut terms = terms.fuse();
    loop {
        match (terms.next(), terms.next(), terms.next(), terms.next()) {
            (Some((a, x)), Some((b, w)), Some((c, v)), Some((e, u))) => {
                for ((((out, &x), &w), &v), &u) in y.iter_mut().zip(x).zip(w).zip(v).zip(u) {
                    *out = (((*out + a * x) + b * w) + c * v) + e * u;
                }
            }
            (Some((a, x)), Some((b, w)), Some((c, v)), None) => {
                for (((out, &x), &w), &v) in y.iter_mut().zip(x).zip(w).zip(v) {
                    *out = ((*out + a * x) + b * w) + c * v;
                }
            }
            (Some((a, x)), Some((b, w)), None, _) => {
                for ((out, &x), &w) in y.iter_mut().zip(x).zip(w) {
                    *out = (*out + a * x) + b * w;
                }
            }
            (Some((a, x)), None, _, _) => {
                for (out, &x) in y.iter_mut().zip(x) {
                    *out += a * x;
                }
            }
            _ => break,
        }
    }
}

#[cfg(target_os = "none")]
fn gather<'a>(y: &mut [f32], terms: impl Iterator<Item = (f32, &'a [f32])>) {
    for (a, x) in terms {
        for (out, &x) in y.iter_mut().zip(x) {
            *out += a * x;
        }
    }
}

/// The raw state, for [`checkpoint`](crate::checkpoint) and [`Replay`](crate::Replay) only.
impl<'m, N: NoiseSource> Stream<'m, '_, N> {
    pub(crate) fn decoder(&self) -> &BandedLowRank<'m> {
        &self.decoder
    }

    /// `σ·ζ·sens`, as the stream applies it (`f32`).
    pub(crate) fn noise_scale(&self) -> f32 {
        self.noise_scale
    }

    pub(crate) fn whole_row(&self) -> bool {
        self.whole_row
    }

    /// The ring of the last `h` noise rows, `β`, the running sum and its compensation.
    pub(crate) fn state(&self) -> [&[f32]; 4] {
        [self.ring, self.beta, self.sum, self.compensation]
    }

    /// The step and the state of [`state`](Self::state), to restore.
    pub(crate) fn state_mut(&mut self) -> (&mut u32, [&mut [f32]; 4]) {
        (
            &mut self.step,
            [self.ring, self.beta, self.sum, self.compensation],
        )
    }

    pub(crate) fn noise_mut(&mut self) -> &mut N {
        &mut self.noise
    }
}

fn banded<'m>(mechanism: &Mechanism<'m>) -> Result<BandedLowRank<'m>, Error> {
    match mechanism.decoder {
        Decoder::BandedLowRank(d) => Ok(d),
        #[allow(unreachable_patterns)]
        _ => Err(Error::UnsupportedDecoder),
    }
}
