//! `mfc_compiler::interrupt` (Python's Ctrl-C, issue 31): once the flag is set, every optimizer
//! a compile runs returns `Error::Interrupted` (not another error, not a degraded result), and
//! once cleared, the same calls succeed. One test in its own binary: the flag is process-wide.

use mfc_compiler::Error;
use mfc_compiler::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use mfc_compiler::interrupt;
use mfc_compiler::optimize::blt::optimize_blt_family;
use mfc_compiler::optimize::optimum::{OptimumOptions, optimal_gram};
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::workload::Workload;

fn interrupted<T>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::Interrupted))
}

#[test]
fn an_interrupt_stops_every_optimizer_with_its_own_error() {
    let n = 64;
    let schemas = [
        Participation::Single,
        Participation::min_separation(4, 16).unwrap(),
        Participation::fixed_epoch_order(4, 16).unwrap(),
    ];
    let general = |p: Participation| {
        compile_bandmf(
            &Workload::PrefixSum,
            n,
            &BandMfOptions {
                participation: p,
                kind: BandMfKind::General,
                bands: Bands::Fixed(8),
                ..BandMfOptions::default()
            },
            &mut |_, _| {},
        )
    };
    let gram = |p: Participation| {
        optimal_gram(
            Workload::PrefixSum.matrix(n).unwrap().as_ref(),
            &OptimumOptions {
                participation: p,
                ..OptimumOptions::default()
            },
            &mut |_| {},
        )
    };
    interrupt::interrupt();
    for p in schemas {
        assert!(
            interrupted(optimize_blt_family(n, 3, &p, &mut |_| {})),
            "BLT {p:?}"
        );
        assert!(interrupted(general(p)), "general BandMF {p:?}");
        assert!(interrupted(gram(p)), "optimum {p:?}");
    }
    interrupt::clear();
    for p in schemas {
        assert!(
            optimize_blt_family(n, 3, &p, &mut |_| {}).is_ok(),
            "BLT {p:?}"
        );
        assert!(general(p).is_ok(), "general BandMF {p:?}");
        assert!(gram(p).is_ok(), "optimum {p:?}");
    }
}
