//! One table over the mechanism families at equal privacy, for one workload (the BLT, FFT,
//! square-root and tree rows for the prefix sum only) and one participation schema: what `mfc
//! compare` prints. Every loss is `sens²·‖B‖_F²` with the sensitivity computed under the same
//! participation schema by [`participation::sensitivity`](crate::privacy::participation::sensitivity)
//! from the encoder itself (exact where 001 Eq. 3 applies, else an upper bound, as reported).
//!
//! The device costs are per coordinate of the stream: "RAM" counts the floats of state a
//! streaming implementation keeps (noise rows, buffers, tree nodes, the running sum — for the
//! forms the runtime replays, banded + low rank, BLT and FFT, with its compensation), "flops"
//! the multiply-adds per step, both for the form named (dense rows for the optimum and the
//! square root; the forward substitution `w_t = (z_t − Σ c_l w_{t−l})/c_0` for BandMF; `m`
//! geometric buffers for BLT; one partial sum per level for the tree; for FFT, the block's noise
//! (`n` values) and the amortized `N log₂ N` per complex FFT of size `N ≥ 3n − 1`, a rough
//! count).

pub mod tree;

use std::time::Instant;

use faer::{Mat, MatRef};
use mfc_formats::SensitivityMethod;
use serde::Serialize;

use crate::Result;
use crate::compare::tree::Tree;
use crate::forms::banded::{CompileOptions, compile_from_optimum};
use crate::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use crate::forms::fft::{FftKind, FftOptions, compile_fft};
use crate::max_error::banded_low_rank::{BandedMaxErrorOptions, compile_banded_max_error_from};
use crate::max_error::bandmf::{BandMfMaxErrorOptions, compile_bandmf_max_error};
use crate::max_error::blt::{BltHorizon, optimize_blt_max_error_family};
use crate::max_error::dense::{MaxErrorOptions, optimize_max_error};
use crate::max_error::{Objective, measure_decoder};
use crate::optimize::blt::optimize_blt_family;
use crate::optimize::optimum::{
    OptimumOptions, STAMP_CANDIDATES, certificate_holds, optimal_gram, stamped_optima,
};
use crate::optimize::single::{Optimum, Progress};
use crate::optimize::stamp::{Evaluated, evaluate_gram};
use crate::optimize::toeplitz::{inverse_series, square_root_coefficients};
use crate::privacy::participation::{Participation, sensitivity};
use crate::ship::blob::BlobOptions;
use crate::workload::Workload;

/// One mechanism's row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The mechanism.
    pub mechanism: String,
    /// `sqrt(L)`, `L = sens²‖B‖_F²`.
    pub sqrt_loss: f64,
    /// The largest per-step standard deviation `sens·max_i ‖B[i,:]‖` (units of `σζ`).
    pub max_step_stddev: f64,
    /// What the row was optimized for: `total` (`sqrt(L)`) or `max` (the max error); `none`
    /// for the mechanisms with nothing to optimize (the square root, the trees, FFT).
    pub objective: &'static str,
    /// How the sensitivity was computed (`NonnegativeGram` and `MaxColumnNorm` are exact).
    pub sensitivity_method: String,
    /// Floats of device state per coordinate.
    pub ram_floats: usize,
    /// Multiply-adds per step and coordinate (average over the horizon).
    pub flops_per_step: usize,
    /// Size of the `.mfc` blob, when mfc has a blob form for this mechanism.
    pub blob_bytes: Option<usize>,
    /// Whether the decoder is causal (output `i` uses noise rows `≤ i` only).
    pub streaming: bool,
    /// Whether the row is a lower bound on the loss of a class of mechanisms, not a mechanism
    /// (the fixed-epoch floor printed under min-separation).
    pub lower_bound: bool,
    /// `sens·‖B[i,:]‖` for every step `i` (units of `σζ`): the error profile (001 Fig. 4).
    pub per_step_stddev: Vec<f64>,
    /// For BLT rows: `(N, √L_N, sens_N)` at `N = n, 2n, 4n, 8n` steps with the parameters
    /// optimized for `n` (BLT has no horizon; see [`Blt::beyond_horizon`]).
    ///
    /// [`Blt::beyond_horizon`]: crate::optimize::blt::Blt::beyond_horizon
    pub beyond_horizon: Vec<(usize, f64, f64)>,
    /// Wall-clock seconds this row took to optimize, compile and evaluate.
    pub seconds: f64,
}

/// What to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The workload `A`; the Toeplitz, BLT, FFT and tree rows need the prefix sum.
    pub workload: Workload,
    /// The horizon `n`.
    pub steps: usize,
    /// The schema every row is evaluated under (and the optimum optimized for).
    pub participation: Participation,
    /// `(h, r)` of the banded-plus-low-rank row.
    pub band: usize,
    /// See `band`.
    pub rank: usize,
    /// BLT rows for `1..=max_buffers` buffers.
    pub max_buffers: usize,
    /// `b̂` of the BandMF rows (banded Toeplitz and general), or how to choose it.
    pub bands: Bands,
    /// L-BFGS iterations of the `(h, r)` row's shipped-loss refinement.
    pub refine_iterations: usize,
    /// The neighbouring relation: replace-one doubles every sensitivity and noise figure.
    pub neighbouring: mfc_formats::Neighbouring,
    /// With [`Objective::Max`], the table adds rows optimized for the max error (the certified
    /// max-error optimum and its `(h, r)` compression under single participation, BLTs, BandMF).
    pub objective: Objective,
    /// Parts of the table computed at once, each on a thread of its own (`0`: as many as the
    /// machine has cores). The peak memory is that of the parts running together; with `1`
    /// each row's seconds are its own, not shared with the others.
    pub threads: usize,
}

/// `sens(C)` under the schema, the per-step variances of `B` and the resulting row.
fn evaluate(
    name: String,
    encoder: &Mat<f64>,
    decoder_row_norms: &[f64],
    participation: &Participation,
    ram_floats: usize,
    flops_per_step: usize,
    streaming: bool,
) -> Result<Row> {
    let s = sensitivity(encoder.as_ref(), participation)?;
    let s2 = s.value * s.value;
    let max = decoder_row_norms.iter().copied().fold(0.0, f64::max);
    Ok(Row {
        mechanism: name,
        sqrt_loss: (s2 * decoder_row_norms.iter().sum::<f64>()).sqrt(),
        max_step_stddev: (s2 * max).sqrt(),
        objective: "none",
        sensitivity_method: format!("{:?}", s.method),
        ram_floats,
        flops_per_step,
        blob_bytes: None,
        streaming,
        lower_bound: false,
        per_step_stddev: decoder_row_norms.iter().map(|r| (s2 * r).sqrt()).collect(),
        beyond_horizon: Vec::new(),
        seconds: 0.0,
    })
}

fn toeplitz(c: &[f64], n: usize) -> Mat<f64> {
    Mat::from_fn(n, n, |i, j| {
        if j <= i {
            c.get(i - j).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    })
}

/// Row norms² of `B = S T(r)` (Toeplitz with coefficients the prefix sums of `r`).
fn prefix_decoder_row_norms(r: &[f64]) -> Vec<f64> {
    let (mut b, mut row) = (0.0, 0.0);
    r.iter()
        .map(|rk| {
            b += rk;
            row += b * b;
            row
        })
        .collect()
}

/// Times the rows of one part of the table: each records the seconds since the part started or
/// its previous row was pushed.
struct Clock(Instant);

impl Clock {
    fn start() -> Self {
        Self(Instant::now())
    }

    /// `row` with its seconds set; the clock restarts.
    fn lap(&mut self, mut row: Row) -> Row {
        row.seconds = self.0.elapsed().as_secs_f64();
        self.0 = Instant::now();
        row
    }

    fn push(&mut self, rows: &mut Vec<Row>, row: Row) {
        rows.push(self.lap(row));
    }
}

/// A row of a mechanism given by its encoder and its decoder's row norms, with the sensitivity
/// that ships for it (computed once by its compile path) instead of a recomputation.
fn shipped_row(
    name: String,
    sensitivity: f64,
    method: SensitivityMethod,
    decoder_row_norms: &[f64],
    ram_floats: usize,
    flops_per_step: usize,
) -> Row {
    let s2 = sensitivity * sensitivity;
    let max = decoder_row_norms.iter().copied().fold(0.0, f64::max);
    Row {
        mechanism: name,
        sqrt_loss: (s2 * decoder_row_norms.iter().sum::<f64>()).sqrt(),
        max_step_stddev: (s2 * max).sqrt(),
        objective: "total",
        sensitivity_method: format!("{method:?}"),
        ram_floats,
        flops_per_step,
        blob_bytes: None,
        streaming: true,
        lower_bound: false,
        per_step_stddev: decoder_row_norms.iter().map(|r| (s2 * r).sqrt()).collect(),
        beyond_horizon: Vec::new(),
        seconds: 0.0,
    }
}

/// The optimum row under `participation`: the certified optimum for single participation and
/// fixed epoch order, the optimum over banded encoders with `b` bands for min-separation.
fn optimum_row(
    a: MatRef<'_, f64>,
    compile_options: &CompileOptions,
    prefix: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<(Row, (Optimum, Mat<f64>))> {
    let n = a.nrows();
    let participation = &compile_options.optimum.participation;
    let name = match participation {
        Participation::MinSeparation { min_separation, .. } => {
            progress("the optimum over banded encoders (BandMF)");
            format!(
                "BandMF, {} bands (the min-separation optimum over banded encoders)",
                (*min_separation).min(n)
            )
        }
        _ => {
            progress("optimal factorization");
            "optimal (dense B), certified".into()
        }
    };
    let (optimum, x) = optimal_gram(a, &compile_options.optimum, &mut |_: &Progress| {})?;
    let dense = evaluate_gram(a, x.as_ref(), participation)?;
    let norms: Vec<f64> = (0..n)
        .map(|i| dense.decoder.row(i).squared_norm_l2())
        .collect();
    // Under min-separation the optimum is a BandMF encoder with b̂ = b bands: the device keeps
    // b̂ rows of w, and for the prefix sum the running sum and its compensation (b̂ + 2 floats,
    // as the BandMF rows and `mfc compile`).
    let ram = match participation {
        Participation::MinSeparation { min_separation, .. } => {
            (*min_separation).min(n) + 2 * usize::from(prefix)
        }
        _ => n,
    };
    let row = shipped_row(
        name,
        dense.sensitivity.value,
        dense.sensitivity.method,
        &norms,
        ram,
        ram,
    );
    Ok((row, (optimum, x)))
}

/// Compares, for the prefix sum under one participation schema, every family optimized for
/// that schema: the optimum (for min-separation, over banded encoders, next to the certified
/// fixed-epoch floor), the compressed `(h, r)` mechanism, stamping, BLT with
/// `1..=max_buffers` buffers, FFT, BandMF (banded Toeplitz and general, for any workload), the
/// square root and the Honaker tree estimators.
///
/// The table is computed in parts (the optimum and its compression, the floor, BandMF, FFT,
/// BLT, stamping, the square root and the trees) on up to
/// [`threads`](CompareOptions::threads) threads; the rows do not depend on the schedule, their
/// seconds do (parts running together share the cores). `progress` gets a line when a part
/// starts, fails or is done, and the parts' own lines.
pub fn compare(options: &CompareOptions, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>> {
    let factor = options.neighbouring.sensitivity_factor();
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |t| t.get()),
        t => t,
    };
    let mut rows = compare_add_remove(options, threads, progress)?;
    // Replace-one: every row's sensitivity and noise is twice that of add/remove.
    for row in &mut rows {
        row.sqrt_loss *= factor;
        row.max_step_stddev *= factor;
        row.per_step_stddev.iter_mut().for_each(|s| *s *= factor);
        for (_, sqrt_loss, sensitivity) in &mut row.beyond_horizon {
            *sqrt_loss *= factor;
            *sensitivity *= factor;
        }
    }
    Ok(rows)
}

/// The relative duality gap the fixed-epoch floor of a min-separation comparison is optimized
/// to: its dual bound is the floor printed, a lower bound at any gap.
const FLOOR_GAP: f64 = 1e-4;

/// One part of the table, computed on a thread of its own: its rows, each with the position
/// ([`Slot`]) it takes in the table. `say` reports progress.
type Part<'a> = Box<dyn FnOnce(&dyn Fn(&str)) -> PartRows + Send + 'a>;

/// What a part computes: its rows, each with its place in the table.
type PartRows = Result<Vec<(Slot, Row)>>;

/// Where a row goes in the table: the order of the papers, whichever part finished first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Optimum,
    Floor,
    Compressed,
    Stamped,
    BandMf,
    Blt,
    MaxError,
    Fft,
    SquareRoot,
    Tree,
}

/// `rows`, each to go at `slot` in the table.
fn in_slot(slot: Slot, rows: Vec<Row>) -> Vec<(Slot, Row)> {
    rows.into_iter().map(|row| (slot, row)).collect()
}

/// Runs `parts` (named for progress) on up to `threads` threads, taken in the order listed
/// (the longest first), and returns their rows in table order, or the first error in list
/// order: after an error or a panic the parts not started are skipped (a panic is resumed on
/// this thread once the running parts end). Every part is computed the same way on any number
/// of threads, so the rows do not depend on the schedule (their `seconds` do). `progress` is
/// called on this thread with a "started", then a "done" or "failed" line for every part run,
/// and the parts' own lines.
fn run_parts(
    parts: Vec<(String, Part<'_>)>,
    threads: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Row>> {
    use std::panic::AssertUnwindSafe;
    use std::sync::{Mutex, PoisonError, mpsc};
    let threads = threads.clamp(1, parts.len().max(1));
    let count = parts.len();
    let queue = Mutex::new(parts.into_iter().enumerate().collect::<Vec<_>>());
    let results: Mutex<Vec<Option<PartRows>>> = Mutex::new((0..count).map(|_| None).collect());
    let (sender, messages) = mpsc::channel::<String>();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (queue, results, sender) = (&queue, &results, sender.clone());
            scope.spawn(move || {
                loop {
                    let next = {
                        let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
                        (!queue.is_empty()).then(|| queue.remove(0))
                    };
                    let Some((index, (name, part))) = next else {
                        break;
                    };
                    let started = Instant::now();
                    let _ = sender.send(format!("started: {name}"));
                    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        part(&|line: &str| {
                            let _ = sender.send(format!("{name}: {line}"));
                        })
                    }));
                    let seconds = started.elapsed().as_secs_f64();
                    if !matches!(outcome, Ok(Ok(_))) {
                        // The table fails with the first error (or panic): the parts not started
                        // are not run.
                        queue.lock().unwrap_or_else(PoisonError::into_inner).clear();
                    }
                    let result = match outcome {
                        Ok(result) => result,
                        Err(panic) => {
                            let _ = sender.send(format!("failed: {name} ({seconds:.1} s)"));
                            std::panic::resume_unwind(panic);
                        }
                    };
                    let _ = sender.send(match &result {
                        Ok(_) => format!("done: {name} ({seconds:.1} s)"),
                        Err(e) => format!("failed: {name} ({seconds:.1} s): {e}"),
                    });
                    results.lock().unwrap_or_else(PoisonError::into_inner)[index] = Some(result);
                }
            });
        }
        drop(sender);
        for message in messages {
            progress(&message);
        }
    });
    let mut rows = Vec::new();
    for result in results.into_inner().unwrap_or_else(PoisonError::into_inner) {
        // A part without a result was skipped after another part failed: that error returns.
        rows.extend(result.unwrap_or_else(|| Ok(Vec::new()))?);
    }
    rows.sort_by_key(|(slot, _)| *slot);
    Ok(rows.into_iter().map(|(_, row)| row).collect())
}

/// [`compare`] for add/remove neighbours, its parts on up to `threads` threads.
fn compare_add_remove(
    options: &CompareOptions,
    threads: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Row>> {
    let n = options.steps;
    let participation = &options.participation;
    crate::request::check_separation(participation, n)?;
    let workload = &options.workload;
    let a = workload.matrix(n)?;
    let a = a.as_ref();
    let compile_options = CompileOptions {
        optimum: OptimumOptions {
            participation: *participation,
            ..OptimumOptions::default()
        },
        compression: crate::forms::banded::compress::CompressOptions {
            refine_iterations: options.refine_iterations,
            ..Default::default()
        },
    };
    let compile_options = &compile_options;
    let prefix = matches!(workload, Workload::PrefixSum);

    // The parts, the longest first (at n = 2000 under (20, 100): the optimum and its
    // compression about 4 min, the floor 2 min, FFT 1 min).
    let mut parts: Vec<(String, Part<'_>)> = Vec::new();
    parts.push((
        "the optimum and its banded-plus-low-rank compression".into(),
        Box::new(move |say| {
            let mut clock = Clock::start();
            let (row, (optimum, x)) =
                optimum_row(a, compile_options, prefix, &mut |line| say(line))?;
            let optimum_row = clock.lap(row);
            say("banded-plus-low-rank compression");
            let compressed = compressed_row(a, options, compile_options, optimum, x)?;
            Ok(vec![
                (Slot::Optimum, optimum_row),
                (Slot::Compressed, clock.lap(compressed)),
            ])
        }),
    ));
    if let Some(fixed) = floor_schema(participation)? {
        parts.push((
            "the certified fixed-epoch optimum (a floor)".into(),
            Box::new(move |_| Ok(vec![(Slot::Floor, floor_row(a, compile_options, fixed)?)])),
        ));
    }
    parts.push((
        "BandMF (banded Toeplitz, then general)".into(),
        Box::new(move |say| Ok(in_slot(Slot::BandMf, bandmf_rows(options, say)?))),
    ));
    if prefix {
        parts.push((
            "FFT".into(),
            Box::new(move |_| Ok(in_slot(Slot::Fft, fft_rows(options)?))),
        ));
        parts.push((
            "BLT".into(),
            Box::new(move |_| Ok(in_slot(Slot::Blt, blt_rows(options)?))),
        ));
    }
    if options.objective == Objective::Max {
        parts.push((
            "the rows optimized for the max error".into(),
            Box::new(move |say| Ok(in_slot(Slot::MaxError, max_error_rows(a, options, say)?))),
        ));
    }
    if participation.max_participations() > 1 {
        parts.push((
            "stamping".into(),
            Box::new(move |_| {
                Ok(stamped_row(a, compile_options)?
                    .map(|row| (Slot::Stamped, row))
                    .into_iter()
                    .collect())
            }),
        ));
    }
    if prefix {
        parts.push((
            "the square root and the trees".into(),
            Box::new(move |_| {
                let mut rows = vec![(Slot::SquareRoot, square_root_row(options)?)];
                rows.extend(in_slot(Slot::Tree, tree_rows(options)?));
                Ok(rows)
            }),
        ));
    }
    run_parts(parts, threads, progress)
}

/// The fixed-epoch schema whose certified optimum floors a min-separation comparison, where its
/// certificate holds (every `k` since issue 18).
fn floor_schema(participation: &Participation) -> Result<Option<Participation>> {
    Ok(match *participation {
        Participation::MinSeparation {
            max_participations,
            min_separation,
        } => Some(Participation::fixed_epoch_order(
            max_participations,
            min_separation,
        )?),
        _ => None,
    }
    .filter(certificate_holds))
}

/// The floor row: the dual bound of the certified fixed-epoch optimum.
fn floor_row(
    a: MatRef<'_, f64>,
    compile_options: &CompileOptions,
    fixed: Participation,
) -> Result<Row> {
    let started = Instant::now();
    let (max_participations, min_separation) = (
        fixed.max_participations(),
        fixed.separation().unwrap_or(a.nrows()),
    );
    // A floor needs the dual bound only, valid at any gap: 1e-4 spares the last Newton
    // iterations (minutes at n = 2052 under (6, 342)).
    let options = OptimumOptions {
        participation: fixed,
        multi_epoch: crate::optimize::multi_epoch::MultiEpochOptions {
            relative_gap: FLOOR_GAP,
            ..compile_options.optimum.multi_epoch.clone()
        },
        ..compile_options.optimum.clone()
    };
    let (optimum, _) = optimal_gram(a, &options, &mut |_: &Progress| {})?;
    Ok(Row {
        mechanism: format!(
            "floor: certified fixed-epoch ({max_participations}, {min_separation}) optimum (dual bound; holds for encoders orthogonal on fixed-epoch patterns, BandMF included)"
        ),
        sqrt_loss: optimum.dual_bound.max(0.0).sqrt(),
        max_step_stddev: 0.0,
        objective: "total",
        sensitivity_method: "—".into(),
        ram_floats: 0,
        flops_per_step: 0,
        blob_bytes: None,
        streaming: false,
        lower_bound: true,
        per_step_stddev: Vec::new(),
        beyond_horizon: Vec::new(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The `(h, r)` row: the optimum the first row printed, compressed and shipped in f32.
fn compressed_row(
    a: MatRef<'_, f64>,
    options: &CompareOptions,
    compile_options: &CompileOptions,
    optimum: Optimum,
    x: Mat<f64>,
) -> Result<Row> {
    let compiled =
        compile_from_optimum(a, options.band, options.rank, compile_options, optimum, x)?;
    let bytes =
        crate::forms::banded::encode(&compiled, &options.workload, &BlobOptions::default())?.bytes;
    let stored = compiled.compressed.to_dense();
    let norms: Vec<f64> = (0..options.steps)
        .map(|i| stored.row(i).squared_norm_l2())
        .collect();
    let (h, r) = (options.band, options.rank);
    let mut row = shipped_row(
        format!("banded + low rank (h, r) = ({h}, {r}), f32"),
        compiled.sensitivity,
        compiled.sensitivity_method,
        &norms,
        h + r + 2,
        h + 2 * r + 1,
    );
    row.blob_bytes = Some(bytes.len());
    Ok(row)
}

/// The stamping row: the best by loss of the stamp counts above 1 that divide `n` (001 App.
/// D.4, as [`choose_stamps`](crate::optimize::optimum::choose_stamps) without its `s = 1`, the
/// optimum row itself); `None` when no count above 1 divides `n`.
fn stamped_row(a: MatRef<'_, f64>, compile_options: &CompileOptions) -> Result<Option<Row>> {
    let started = Instant::now();
    let n = a.nrows();
    let mut best: Option<(usize, Evaluated)> = None;
    let candidates: Vec<usize> = STAMP_CANDIDATES.into_iter().filter(|&s| s > 1).collect();
    stamped_optima(
        a,
        &compile_options.optimum,
        &candidates,
        &mut |s, evaluated| {
            // Ties and NaN as `choose_stamps` orders them: the first of equal losses, NaN last.
            if best
                .as_ref()
                .is_none_or(|(_, b)| evaluated.loss.total_cmp(&b.loss).is_lt())
            {
                best = Some((s, evaluated));
            }
        },
    )?;
    let Some((stamps, dense)) = best else {
        return Ok(None);
    };
    let norms: Vec<f64> = (0..n)
        .map(|i| dense.decoder.row(i).squared_norm_l2())
        .collect();
    let mut row = shipped_row(
        format!("optimum of n/{stamps} steps stamped ×{stamps} (dense B)"),
        dense.sensitivity.value,
        dense.sensitivity.method,
        &norms,
        n,
        n / 2,
    );
    row.seconds = started.elapsed().as_secs_f64();
    Ok(Some(row))
}

/// The BandMF rows, as shipped in f32: the banded Toeplitz optimum picks b̂ (for auto), and the
/// general optimizer starts from it.
fn bandmf_rows(options: &CompareOptions, say: &dyn Fn(&str)) -> Result<Vec<Row>> {
    let (n, workload, participation) = (options.steps, &options.workload, &options.participation);
    let mut clock = Clock::start();
    let mut rows = Vec::new();
    let mut bands = options.bands;
    for kind in [BandMfKind::Toeplitz, BandMfKind::General] {
        say(&format!("{kind:?}"));
        let compiled = compile_bandmf(
            workload,
            n,
            &BandMfOptions {
                participation: *participation,
                kind,
                bands,
                general: crate::optimize::banded::general::GeneralOptions {
                    seconds_budget: Some(crate::optimize::banded::general::SECONDS_BUDGET),
                    ..Default::default()
                },
                ..BandMfOptions::default()
            },
            &mut |_, _| {},
        )?;
        bands = Bands::Fixed(compiled.bands);
        let bytes =
            crate::forms::bandmf::encode(&compiled, workload, &BlobOptions::default())?.bytes;
        let prefix = matches!(workload, Workload::PrefixSum);
        let s2 = compiled.sensitivity * compiled.sensitivity;
        let norms: Vec<f64> = compiled.per_step_variance.iter().map(|v| v / s2).collect();
        let mut row = shipped_row(
            format!(
                "BandMF, {}, b̂ = {}, f32",
                match kind {
                    BandMfKind::General => "general banded",
                    BandMfKind::Toeplitz => "banded Toeplitz",
                },
                compiled.bands
            ),
            compiled.sensitivity,
            compiled.sensitivity_method,
            &norms,
            compiled.bands + 2 * usize::from(prefix),
            compiled.bands,
        );
        row.blob_bytes = Some(bytes.len());
        clock.push(&mut rows, row);
    }
    Ok(rows)
}

/// The BLT rows for `1..=max_buffers` buffers (prefix sum). Buffers `m` are fitted from the fit
/// with `m − 1`: each row's time is that of its own fit.
fn blt_rows(options: &CompareOptions) -> Result<Vec<Row>> {
    let (n, participation) = (options.steps, &options.participation);
    let mut fit_seconds = Vec::new();
    let mut fit_clock = Instant::now();
    let family = optimize_blt_family(n, options.max_buffers, participation, &mut |_| {
        fit_seconds.push(fit_clock.elapsed().as_secs_f64());
        fit_clock = Instant::now();
    })?;
    let mut rows = Vec::new();
    for ((blt, m), seconds) in family.iter().zip(1..).zip(fit_seconds) {
        let stored = crate::forms::blt::compile_blt(blt, n, n, participation)?;
        let norms = prefix_decoder_row_norms(&stored.blt.decoder_coefficients(n));
        let mut row = shipped_row(
            format!("BLT, {m} buffers, f32"),
            stored.sensitivity,
            stored.sensitivity_method,
            &norms,
            m + 2,
            3 * m + 1,
        );
        row.beyond_horizon = stored.blt.beyond_horizon(n, participation);
        row.blob_bytes = Some(
            crate::forms::blt::encode(&stored, &BlobOptions::default())?
                .bytes
                .len(),
        );
        row.seconds = seconds;
        rows.push(row);
    }
    Ok(rows)
}

/// The rows optimized for the max error ([`crate::max_error`]), each measured from what ships:
/// under single participation the certified max-error optimum `γ₂` (its dual bound in the
/// name) and its `(h, r)` compression; for the prefix sum the BLTs with `1..=max_buffers`
/// buffers; BandMF with the table's `b̂`, banded Toeplitz and (up to
/// [`MAX_ERROR_GENERAL_STEPS`] steps) general.
fn max_error_rows(
    a: MatRef<'_, f64>,
    options: &CompareOptions,
    say: &dyn Fn(&str),
) -> Result<Vec<Row>> {
    let (n, participation) = (options.steps, &options.participation);
    let mut clock = Clock::start();
    let mut rows = Vec::new();
    let with_objective = |mut row: Row| {
        row.objective = Objective::Max.name();
        row
    };
    if *participation == Participation::Single {
        say("the certified max-error optimum");
        let optimum = optimize_max_error(a, &MaxErrorOptions::default(), &mut |_| {})?;
        let dense = crate::optimize::factorize::streaming_factorization(a, optimum.x.as_ref())?;
        let measured = measure_decoder(a, dense.decoder.as_ref(), participation)?;
        let norms: Vec<f64> = (0..n)
            .map(|i| dense.decoder.row(i).squared_norm_l2())
            .collect();
        let mut row = shipped_row(
            format!(
                "max-error optimum γ₂ (certified: dual bound {:.4}, f64)",
                // The rows are scaled for replace-one by `compare`; the name here.
                options.neighbouring.sensitivity_factor() * optimum.dual_bound
            ),
            measured.sensitivity,
            measured.method,
            &norms,
            n,
            n,
        );
        row.streaming = true;
        clock.push(&mut rows, with_objective(row));
        say("its banded-plus-low-rank compression");
        let compiled = compile_banded_max_error_from(
            a,
            optimum,
            options.band,
            options.rank,
            &BandedMaxErrorOptions {
                compression: crate::forms::banded::compress::CompressOptions {
                    refine_iterations: options.refine_iterations,
                    ..Default::default()
                },
                ..BandedMaxErrorOptions::default()
            },
        )?;
        let c = &compiled.compressed;
        let norms = crate::max_error::banded_low_rank::row_norms(c);
        let mut row = shipped_row(
            format!(
                "banded (h, r) = ({}, {}) for max error, f32",
                c.band, c.rank
            ),
            compiled.measured.sensitivity,
            compiled.measured.method,
            &norms,
            c.band + c.rank + 2,
            c.band + 2 * c.rank + 1,
        );
        let measured = &compiled.measured;
        let shipped = crate::ship::blob::Shipped {
            participation,
            sensitivity: measured.sensitivity,
            method: measured.method,
            sqrt_loss: measured.sqrt_loss,
            optimal_sqrt_loss: None,
            step_stddev: crate::ship::blob::step_stddev(&measured.per_step_variance),
        };
        let blob = crate::forms::banded::encode_decoder(
            c,
            shipped,
            &options.workload,
            &BlobOptions::default(),
        )?;
        row.blob_bytes = Some(blob.bytes.len());
        clock.push(&mut rows, with_objective(row));
    }
    if matches!(options.workload, Workload::PrefixSum) && n >= 2 {
        say("BLTs for max error");
        let mut fit_seconds = Vec::new();
        let mut fit_clock = Instant::now();
        let family = optimize_blt_max_error_family(
            n,
            options.max_buffers,
            participation,
            BltHorizon::Finite,
            &mut |_| {
                fit_seconds.push(fit_clock.elapsed().as_secs_f64());
                fit_clock = Instant::now();
            },
        )?;
        for ((blt, m), seconds) in family.iter().zip(1..).zip(fit_seconds) {
            let stored = crate::forms::blt::compile_blt(blt, n, n, participation)?;
            let norms = prefix_decoder_row_norms(&stored.blt.decoder_coefficients(n));
            let mut row = shipped_row(
                format!("BLT, {m} buffers, for max error, f32"),
                stored.sensitivity,
                stored.sensitivity_method,
                &norms,
                m + 2,
                3 * m + 1,
            );
            row.blob_bytes = Some(
                crate::forms::blt::encode(&stored, &BlobOptions::default())?
                    .bytes
                    .len(),
            );
            row.seconds = seconds;
            rows.push(with_objective(row));
        }
        clock = Clock::start();
    }
    // The general optimizer costs O(n²·b̂) per evaluation, up to thousands of them: its row
    // up to MAX_ERROR_GENERAL_STEPS steps (`mfc compile --form bandmf --objective max` beyond).
    let kinds: &[BandMfKind] = if n <= MAX_ERROR_GENERAL_STEPS {
        &[BandMfKind::Toeplitz, BandMfKind::General]
    } else {
        say(&format!(
            "the general BandMF row for max error is left out above n = {MAX_ERROR_GENERAL_STEPS} \
             (O(n²·b̂) per evaluation)"
        ));
        &[BandMfKind::Toeplitz]
    };
    for &kind in kinds {
        say(&format!("BandMF ({kind:?}) for max error"));
        let fitted = compile_bandmf_max_error(
            &options.workload,
            n,
            &BandMfMaxErrorOptions {
                participation: *participation,
                kind,
                bands: options.bands,
                ..BandMfMaxErrorOptions::default()
            },
        )?;
        let c = &fitted.compiled;
        let norms: Vec<f64> = c
            .per_step_variance
            .iter()
            .map(|v| v / (c.sensitivity * c.sensitivity))
            .collect();
        let prefix = usize::from(matches!(options.workload, Workload::PrefixSum));
        let mut row = shipped_row(
            format!(
                "BandMF, {}, b̂ = {}, for max error, f32",
                match kind {
                    BandMfKind::Toeplitz => "banded Toeplitz",
                    BandMfKind::General => "general banded",
                },
                c.bands
            ),
            c.sensitivity,
            c.sensitivity_method,
            &norms,
            c.bands + 2 * prefix,
            c.bands,
        );
        row.blob_bytes = Some(
            crate::forms::bandmf::encode(c, &options.workload, &BlobOptions::default())?
                .bytes
                .len(),
        );
        clock.push(&mut rows, with_objective(row));
    }
    Ok(rows)
}

/// The most steps at which `compare --objective max` fits the general BandMF encoder for the
/// max error (`O(n²·b̂)` per evaluation: 231 s of CPU at n = 512 with 128 bands, BENCHMARKS.md).
const MAX_ERROR_GENERAL_STEPS: usize = 512;

/// The two FFT rows (prefix sum).
fn fft_rows(options: &CompareOptions) -> Result<Vec<Row>> {
    let n = options.steps;
    let mut clock = Clock::start();
    let mut rows = Vec::new();
    for kind in [FftKind::Circulant, FftKind::OptimalDecoder] {
        let fft = compile_fft(&FftOptions {
            steps: n,
            stamps: 1,
            kind,
            participation: options.participation,
        })?;
        let bytes = crate::forms::fft::encode(&fft, &BlobOptions::default())?.bytes;
        let size = (3 * n - 1).next_power_of_two();
        // Complex FFTs of size N per coordinate and block of n steps (2 per pair of coordinates
        // for Mechanism 1, 8 for Mechanism 2), about N log₂N operations each.
        let ffts = if kind == FftKind::Circulant { 1 } else { 4 };
        clock.push(
            &mut rows,
            Row {
                mechanism: format!("FFT, {kind:?}"),
                sqrt_loss: fft.sqrt_loss,
                max_step_stddev: fft
                    .per_step_variance
                    .iter()
                    .copied()
                    .fold(0.0, f64::max)
                    .sqrt(),
                objective: "none",
                sensitivity_method: format!("{:?}", fft.sensitivity_method),
                ram_floats: n + 3,
                flops_per_step: ffts * size * size.trailing_zeros() as usize / n,
                blob_bytes: Some(bytes.len()),
                streaming: true,
                lower_bound: false,
                per_step_stddev: fft.per_step_variance.iter().map(|v| v.sqrt()).collect(),
                beyond_horizon: Vec::new(),
                seconds: 0.0,
            },
        );
    }
    Ok(rows)
}

/// The square root factorization's row (prefix sum).
fn square_root_row(options: &CompareOptions) -> Result<Row> {
    let started = Instant::now();
    let n = options.steps;
    let c = square_root_coefficients(n);
    let mut row = evaluate(
        "square root S^1/2 (Toeplitz)".into(),
        &toeplitz(&c, n),
        &prefix_decoder_row_norms(&inverse_series(&c, n)),
        &options.participation,
        n,
        n / 2,
        true,
    )?;
    row.seconds = started.elapsed().as_secs_f64();
    Ok(row)
}

/// The Honaker tree rows (prefix sum): the online estimator and the full one.
fn tree_rows(options: &CompareOptions) -> Result<Vec<Row>> {
    let participation = &options.participation;
    let mut clock = Clock::start();
    let mut rows = Vec::new();
    let tree = Tree::new(options.steps)?;
    let encoder = tree.encoder();
    let levels = tree.levels();
    clock.push(
        &mut rows,
        evaluate(
            "Honaker online (tree, estimator from below)".into(),
            &encoder,
            &tree.honaker_online_row_norms(),
            participation,
            levels + 1,
            2 * levels,
            true,
        )?,
    );
    clock.push(
        &mut rows,
        evaluate(
            "Honaker full (tree, S C⁺; not streaming)".into(),
            &encoder,
            &tree.honaker_full_row_norms()?,
            participation,
            tree.nodes(),
            tree.nodes(),
            false,
        )?,
    );
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ordering the papers report: the optimum is best, the compressed mechanism close to
    /// it, BLT and the square root in between, the online tree last; every row's loss is at
    /// least the optimum's (it is certified optimal for the schema). Under min-separation the
    /// first row is BandMF with b bands and the second the fixed-epoch floor, below every
    /// encoder orthogonal on fixed-epoch patterns (the banded ones).
    #[test]
    fn rows_are_ordered_as_in_the_papers() {
        for participation in [
            Participation::Single,
            Participation::fixed_epoch_order(4, 16).unwrap(),
            Participation::min_separation(4, 16).unwrap(),
        ] {
            let rows = compare(
                &CompareOptions {
                    workload: Workload::PrefixSum,
                    steps: 64,
                    participation,
                    band: 4,
                    rank: 2,
                    max_buffers: 2,
                    bands: Bands::Fixed(8),
                    refine_iterations: 50,
                    neighbouring: mfc_formats::Neighbouring::AddOrRemove,
                    objective: Objective::Max,
                    threads: 0,
                },
                &mut |_| {},
            )
            .unwrap();
            let optimum = rows[0].sqrt_loss;
            if let Participation::MinSeparation { .. } = participation {
                let floor = &rows[1];
                assert!(floor.lower_bound && floor.sqrt_loss <= optimum, "{floor:?}");
                for row in rows
                    .iter()
                    .filter(|r| r.sensitivity_method == "OrthogonalColumns")
                {
                    assert!(row.sqrt_loss >= floor.sqrt_loss, "{row:?} < {floor:?}");
                }
            } else {
                for row in &rows {
                    assert!(
                        row.sqrt_loss >= optimum * (1.0 - 1e-6),
                        "{row:?} < {optimum}"
                    );
                }
            }
            let find = |prefix: &str| {
                rows.iter()
                    .find(|r| r.mechanism.starts_with(prefix))
                    .unwrap()
                    .sqrt_loss
            };
            assert!(find("banded + low rank") < find("Honaker online"));
            assert!(find("BLT, 2") < find("Honaker online"));
            assert!(find("Honaker full") < find("Honaker online"));
            // The general BandMF optimum starts from the Toeplitz one and never ends above it.
            let general = find("BandMF, general banded, b̂ = 8");
            assert!(general <= find("BandMF, banded Toeplitz, b̂ = 8") * (1.0 + 1e-6));
            // The rows optimized for the max error: none has a larger max error than the row
            // of its family optimized for the total loss, and under single participation none
            // (nor any other row) is below the certified max-error optimum's dual bound.
            let max_of = |name: &str| {
                rows.iter()
                    .find(|r| r.mechanism == name)
                    .unwrap_or_else(|| panic!("{name}: {rows:#?}"))
                    .max_step_stddev
            };
            for m in 1..=2 {
                let (total, max) = (
                    max_of(&format!("BLT, {m} buffers, f32")),
                    max_of(&format!("BLT, {m} buffers, for max error, f32")),
                );
                assert!(max <= total * (1.0 + 1e-9), "{participation:?}, m = {m}");
            }
            let bandmf = (
                max_of("BandMF, banded Toeplitz, b̂ = 8, f32"),
                max_of("BandMF, banded Toeplitz, b̂ = 8, for max error, f32"),
            );
            assert!(bandmf.1 <= bandmf.0 * (1.0 + 1e-9), "{participation:?}");
            let general = (
                max_of("BandMF, general banded, b̂ = 8, f32"),
                max_of("BandMF, general banded, b̂ = 8, for max error, f32"),
            );
            assert!(general.1 <= general.0 * (1.0 + 1e-9), "{participation:?}");
            if participation == Participation::Single {
                let optimum = rows
                    .iter()
                    .find(|r| r.mechanism.starts_with("max-error optimum"))
                    .unwrap();
                assert_eq!(optimum.objective, "max");
                for row in rows.iter().filter(|r| !r.lower_bound) {
                    assert!(
                        row.max_step_stddev >= optimum.max_step_stddev * (1.0 - 1e-5),
                        "{row:?}"
                    );
                }
                let banded = max_of("banded (h, r) = (4, 2) for max error, f32");
                assert!(banded <= 1.01 * optimum.max_step_stddev);
                assert!(banded < max_of("banded + low rank (h, r) = (4, 2), f32"));
            }
        }
    }

    /// The table does not depend on how its parts are scheduled: one thread and three give the
    /// same rows (all but their seconds), in the same order.
    #[test]
    fn the_table_does_not_depend_on_the_threads() {
        let options = CompareOptions {
            workload: Workload::PrefixSum,
            steps: 48,
            participation: Participation::min_separation(3, 16).unwrap(),
            band: 3,
            rank: 2,
            max_buffers: 2,
            bands: Bands::Fixed(4),
            refine_iterations: 20,
            neighbouring: mfc_formats::Neighbouring::AddOrRemove,
            objective: Objective::Max,
            threads: 0,
        };
        let table = |threads: usize| {
            let mut lines = Vec::new();
            let rows =
                compare_add_remove(&options, threads, &mut |line| lines.push(line.to_string()))
                    .unwrap();
            // Every part reports its start and its end.
            assert_eq!(
                lines.iter().filter(|l| l.starts_with("started: ")).count(),
                lines.iter().filter(|l| l.starts_with("done: ")).count()
            );
            rows.into_iter()
                .map(|row| {
                    format!(
                        "{:?}",
                        Row {
                            seconds: 0.0,
                            ..row
                        }
                    )
                })
                .collect::<Vec<_>>()
        };
        let serial = table(1);
        assert!(serial.len() > 10, "{serial:?}");
        assert_eq!(serial, table(3));
    }

    /// A failing part fails the table with its error, after the parts listed before it; on one
    /// thread the parts listed after it never start, and every part run says when it started
    /// and how it ended.
    #[test]
    fn a_failing_part_fails_the_table_and_skips_the_rest() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let ran = AtomicUsize::new(0);
        let ran = &ran;
        let ok = |slot: Slot| -> Part<'_> {
            Box::new(move |_| {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(vec![(
                    slot,
                    Row {
                        mechanism: format!("{slot:?}"),
                        sqrt_loss: 1.0,
                        max_step_stddev: 1.0,
                        objective: "total",
                        sensitivity_method: String::new(),
                        ram_floats: 0,
                        flops_per_step: 0,
                        blob_bytes: None,
                        streaming: true,
                        lower_bound: false,
                        per_step_stddev: Vec::new(),
                        beyond_horizon: Vec::new(),
                        seconds: 0.0,
                    },
                )])
            })
        };
        let failing: Part<'_> = Box::new(|_| Err(crate::Error::Numerical("part 1".into())));
        let mut lines = Vec::new();
        let result = run_parts(
            vec![
                ("zero".into(), ok(Slot::Tree)),
                ("one".into(), failing),
                ("two".into(), ok(Slot::Optimum)),
                ("three".into(), ok(Slot::Fft)),
            ],
            1,
            &mut |line| lines.push(line.to_string()),
        );
        assert!(
            matches!(&result, Err(crate::Error::Numerical(m)) if m == "part 1"),
            "{result:?}"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with("failed: one")),
            "{lines:?}"
        );
        assert!(!lines.iter().any(|l| l.contains("two")), "{lines:?}");
        // Without a failure the rows come back in table order, whatever the list order.
        let rows = run_parts(
            vec![
                ("zero".into(), ok(Slot::Tree)),
                ("two".into(), ok(Slot::Optimum)),
                ("three".into(), ok(Slot::Fft)),
            ],
            2,
            &mut |_| {},
        )
        .unwrap();
        let names: Vec<_> = rows.iter().map(|r| r.mechanism.as_str()).collect();
        assert_eq!(names, ["Optimum", "Fft", "Tree"]);
    }
}
