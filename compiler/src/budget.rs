//! What a dense compile will cost, known from `n` before any `O(n³)` work: the estimate behind
//! `mfc compile`'s honest limits.
//!
//! The dense path (the certified optimum, the streaming factorization, the fit and the
//! sensitivity of what ships) holds a few `n × n` `f64` matrices at once and runs a few dozen
//! `O(n³)` factorizations and products. Its peak memory is `MATRICES_AT_PEAK · 8n²` bytes plus
//! the process's base, and its time `SECONDS_PER_CUBE · n³` for single participation (the
//! optimum dominates); both constants were measured on the repository's 2-core machine
//! (BENCHMARKS.md, "Honest limits"), so the time is a rough guide elsewhere, while the memory,
//! a count of matrices, holds on any machine. The multi-epoch optimizer (fixed epoch order)
//! holds more matrices on its block and runs longer: [`Estimate`] uses its own measured
//! constants for the block. Under min-separation the optimum is the general banded optimizer's
//! (up to its deterministic budget) and the banded form then refines its fit against pattern
//! searches, with a measured constant of its own.

use crate::optimize::banded::general::{self, GeneralOptions, SECONDS_BUDGET};
use crate::privacy::participation::Participation;
use crate::workload::Workload;

/// `n × n` `f64` matrices alive at the peak of a dense compile: the whole compile at n = 4096
/// peaked at 1 364 448 kB resident (BENCHMARKS.md), 9.7 matrices of 134 MB over the base (a
/// later run of `mfc compile --steps 4096 --band 7 --rank 5`: 1 180 536 kB, 8.5); the optimum
/// alone at n = 8192 peaked at 4 060 316 kB, 7.6 matrices of 537 MB.
pub const MATRICES_AT_PEAK: f64 = 10.0;

/// Bytes of the process besides the matrices (binary, allocator, small vectors).
pub const BASE_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

/// Seconds per `n³` of a whole single-participation compile on the repository's machine when
/// it is quiet (the certified optimum alone: 155 s at n = 4096, 2.3e-9·n³). At n = 8192 the
/// optimum took 1 551 s of CPU on a loaded machine (13 iterations, BENCHMARKS.md), against the
/// 1 374 s of quiet 2-core wall clock this gives.
pub const SECONDS_PER_CUBE: f64 = 2.5e-9;

/// How much longer than a single-participation compile the fixed-epoch optimizer (Newton's
/// method on the dual) takes on the same block: its slowest measured case, the StackOverflow
/// setting (momentum with a cooldown, n = 2052, (6, 342)), took 193 s of CPU for the whole
/// compile, against 22 s of quiet wall clock for a single-participation optimum of that size
/// (BENCHMARKS.md; the prefix sum at n = 2000, (20, 100), takes about a fifth of that).
pub const FIXED_EPOCH_FACTOR: f64 = 6.0;

/// `m × m` `f64` matrices alive at the fixed-epoch optimizer's peak on a block of `m` steps:
/// `cargo bench --bench multi_epoch -- 2000` (n = 2000, (20, 100), the workload and its copy
/// included) peaked at 612 428 kB resident (BENCHMARKS.md), 17.5 matrices of 32 MB over the base.
pub const FIXED_EPOCH_MATRICES: f64 = 18.0;

/// Seconds per `n^2.4` of the banded form's shipped-loss refinement under min-separation
/// ([`refine_for_shipped_loss`](crate::forms::banded::refine_for_shipped_loss): rounds of
/// pattern searches and of `O(n²·(h + r))` surrogate evaluations), fitted to `mfc compare`'s
/// `(h, r)` rows less their optimum on the repository's machine: 8 s at n = 512, (4, 128),
/// (4, 4) and 208 s at n = 2000, (20, 100), (4, 4) on the prefix sum, 184 s at n = 2052,
/// (6, 342), (6, 6) on momentum with a cooldown (BENCHMARKS, "General BandMF at training
/// scale").
pub const MIN_SEPARATION_REFINEMENT: f64 = 2.5e-6;

/// The estimated cost of a dense compile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Steps of the workload.
    pub steps: usize,
    /// Peak resident memory, bytes.
    pub bytes: f64,
    /// Wall-clock seconds on the repository's 2-core machine.
    pub seconds: f64,
}

/// The estimate for `n` steps of `workload` whose optimum is computed on blocks of `block`
/// steps (`n / stamps`) under `participation`; `refine` says whether the fit is refined on the
/// shipped loss (`--refine` above 0).
pub fn estimate(
    steps: usize,
    block: usize,
    participation: &Participation,
    workload: &Workload,
    refine: bool,
) -> Estimate {
    let n = steps as f64;
    let block = block.clamp(1, steps.max(1));
    let m = block as f64;
    // The optimum's seconds and the m × m matrices it holds at its peak.
    let (optimum, matrices) = match *participation {
        // The optimum over banded encoders with b̂ = b bands (`optimal_gram` takes it when
        // b < m), up to its iteration budget, then the refinement against pattern searches.
        Participation::MinSeparation { min_separation, .. } if min_separation < block => {
            let options = GeneralOptions {
                seconds_budget: Some(SECONDS_BUDGET),
                ..GeneralOptions::default()
            };
            let (_, per_evaluation) = general::estimate(workload, block, min_separation, &options);
            let iterations = general::iteration_cap(&options, participation, block, per_evaluation);
            let refinement = if refine {
                MIN_SEPARATION_REFINEMENT * n.powf(2.4)
            } else {
                0.0
            };
            (per_evaluation * iterations as f64 + refinement, 0.0)
        }
        Participation::FixedEpochOrder { separation, .. } if separation < block => (
            SECONDS_PER_CUBE * FIXED_EPOCH_FACTOR * m * m * m,
            FIXED_EPOCH_MATRICES,
        ),
        _ => (SECONDS_PER_CUBE * m * m * m, 0.0),
    };
    // The factorization, fit and sensitivity of the whole mechanism are a few O(n³) products
    // (about a quarter of a single-participation compile of n steps).
    Estimate {
        steps,
        bytes: BASE_BYTES + 8.0 * (MATRICES_AT_PEAK * n * n).max(matrices * m * m),
        seconds: optimum + SECONDS_PER_CUBE * 0.25 * n * n * n,
    }
}

/// The largest `n` whose estimated memory fits in `bytes`.
pub fn largest_steps_within(bytes: f64) -> usize {
    let room = (bytes - BASE_BYTES).max(0.0);
    (room / (MATRICES_AT_PEAK * 8.0)).sqrt().floor() as usize
}

/// The memory this machine can give a new process now: `MemAvailable` of `/proc/meminfo`
/// (Linux), in bytes; `None` where it cannot be read.
pub fn available_memory() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<f64>().ok())
        .map(|kb| kb * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory grows as `n²`, time as `n³`; the inverse of the memory estimate is consistent
    /// with it.
    #[test]
    fn scales_and_inverts() {
        let small = estimate(
            1000,
            1000,
            &Participation::Single,
            &Workload::PrefixSum,
            true,
        );
        let large = estimate(
            2000,
            2000,
            &Participation::Single,
            &Workload::PrefixSum,
            true,
        );
        let ratio = (large.bytes - BASE_BYTES) / (small.bytes - BASE_BYTES);
        assert!((ratio - 4.0).abs() < 1e-9);
        assert!((large.seconds / small.seconds - 8.0).abs() < 1e-9);
        let n = largest_steps_within(small.bytes);
        assert!(n == 1000 || n == 999, "{n}");
        assert!(
            estimate(
                n + 1,
                n + 1,
                &Participation::Single,
                &Workload::PrefixSum,
                true
            )
            .bytes
                > small.bytes
        );
        // A stamped compile optimizes smaller blocks: cheaper in time, not in memory.
        let stamped = estimate(
            2000,
            500,
            &Participation::Single,
            &Workload::PrefixSum,
            true,
        );
        assert!(stamped.seconds < large.seconds && stamped.bytes == large.bytes);
        let fixed = estimate(
            2000,
            2000,
            &Participation::fixed_epoch_order(20, 100).unwrap(),
            &Workload::PrefixSum,
            true,
        );
        assert!(fixed.seconds > large.seconds && fixed.bytes > large.bytes);
        // Stamped to blocks of a quarter, the optimizer's block no longer sets the peak.
        let stamped_fixed = estimate(
            2000,
            500,
            &Participation::fixed_epoch_order(5, 100).unwrap(),
            &Workload::PrefixSum,
            true,
        );
        assert!(stamped_fixed.bytes == large.bytes);
    }

    /// Under min-separation the time is the banded optimizer's budgeted time (more for a custom
    /// workload, held as its matrix) plus the refinement, when it runs; with `b` at least the
    /// block the dense optimizer runs and the estimate is single participation's.
    #[test]
    fn min_separation_is_estimated_by_what_runs() {
        let schema = Participation::min_separation(20, 100).unwrap();
        let custom = Workload::Custom {
            matrix: faer::Mat::identity(2000, 2000),
            label: "custom".into(),
        };
        let at =
            |workload: &Workload, refine: bool| estimate(2000, 2000, &schema, workload, refine);
        let prefix = at(&Workload::PrefixSum, true);
        assert!(at(&Workload::PrefixSum, false).seconds < prefix.seconds);
        assert!(at(&custom, true).seconds > prefix.seconds);
        let wide = Participation::min_separation(2, 2000).unwrap();
        let single = estimate(
            2000,
            2000,
            &Participation::Single,
            &Workload::PrefixSum,
            true,
        );
        assert_eq!(
            estimate(2000, 2000, &wide, &Workload::PrefixSum, true).seconds,
            single.seconds
        );
    }

    #[test]
    fn reads_this_machine() {
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available_memory().is_some_and(|b| b > 0.0));
        }
    }
}
