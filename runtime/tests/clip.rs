//! `clip_factor` against an `f64` reference: the clipped row's norm never exceeds `ζ`, rows within
//! `ζ(1 − 2⁻¹⁵)` are untouched, clipped rows keep at least `ζ(1 − 2⁻¹⁵)`, over the whole exponent
//! range and right at the boundary (the proof is in `runtime/src/clip.rs`).

use mfc_runtime::{clip_factor, clip_to_norm};
use proptest::prelude::*;

/// The norm of a row of `f32`s, in `f64` (relative error below `d·2⁻⁵³`, far under the margins).
fn norm(row: &[f32]) -> f64 {
    row.iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

const TIGHT: f64 = 1.0 - 1.0 / 32768.0;

/// Every property of the factor of `row` for `ζ = clip_norm`.
fn check(row: &[f32], clip_norm: f32) -> Result<(), TestCaseError> {
    let factor = clip_factor(row, clip_norm);
    let zeta = f64::from(clip_norm);
    let before = norm(row);
    let largest = row.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    let clipped: Vec<f32> = row.iter().map(|&x| x * factor).collect();
    let after = norm(&clipped);
    prop_assert!((0.0..=1.0).contains(&factor), "factor {factor}");
    prop_assert!(
        after <= zeta,
        "‖clip(x)‖ = {after:e} > ζ = {zeta:e} (factor {factor:e})"
    );
    if before <= zeta * TIGHT {
        prop_assert_eq!(factor, 1.0, "‖x‖ = {:e} within ζ = {:e}", before, zeta);
    } else if largest > zeta * 2f64.powi(96) {
        prop_assert_eq!(factor, 0.0);
    } else {
        prop_assert!(
            after >= zeta * TIGHT,
            "clipped to {after:e}, ζ = {zeta:e}, from {before:e}"
        );
    }
    Ok(())
}

/// Rows of mixed magnitudes around `2^base`, and a clip norm of any supported size.
fn rows() -> impl Strategy<Value = (Vec<f32>, f32)> {
    let len = prop_oneof![4 => 1usize..200, 1 => 1000usize..9000];
    (len, -100i32..100, -64i32..64).prop_flat_map(|(len, base, zeta_exp)| {
        let entry =
            (-1.0f64..1.0, -30i32..=0).prop_map(move |(m, e)| (m * 2f64.powi(base + e)) as f32);
        (
            prop::collection::vec(entry, len),
            (1.0f32..2.0).prop_map(move |m| m * 2f32.powi(zeta_exp)),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn any_row_any_clip_norm((row, zeta) in rows()) {
        check(&row, zeta)?;
    }

    /// Rows rescaled to `ζ·t` with `t` within a few `2⁻¹⁶` of 1, where rounding decides.
    #[test]
    fn rows_at_the_boundary((row, zeta) in rows(), t in prop_oneof![
        1.0 - 1e-4..1.0 + 1e-4,
        1.0 - 1e-6..1.0 + 1e-6,
    ]) {
        let n = norm(&row);
        prop_assume!(n > 0.0);
        let target = f64::from(zeta) * t;
        let scaled: Vec<f32> = row.iter().map(|&x| (f64::from(x) * target / n) as f32).collect();
        prop_assume!(scaled.iter().all(|x| x.is_finite()));
        check(&scaled, zeta)?;
    }
}

#[test]
fn huge_rows_keep_their_direction_or_are_zeroed() {
    let huge = [1e30f32, -1e30, f32::MAX, -f32::MAX];
    // ‖x‖/ζ ≈ 2¹²⁸/2⁴⁰: clipped in its direction.
    let mut row = huge;
    let zeta = 2f32.powi(40);
    clip_to_norm(&mut row, zeta);
    let n = norm(&row);
    assert!(
        n <= f64::from(zeta) && n >= f64::from(zeta) * TIGHT,
        "{row:?}"
    );
    assert!(row[0] > 0.0 && row[1] < 0.0 && row[2] > row[0] && row[3] < 0.0);
    // The largest entry beyond 2⁹⁶ζ: zeroed.
    assert_eq!(clip_factor(&huge, 2.0), 0.0);
}

#[test]
fn small_rows_and_unsupported_clip_norms() {
    assert_eq!(clip_factor(&[0.3, 0.4], 1.0), 1.0);
    assert_eq!(clip_factor(&[0.0, 0.0], 1.0), 1.0);
    assert_eq!(clip_factor(&[], 1.0), 1.0);
    assert_eq!(clip_factor(&[f32::MIN_POSITIVE / 4.0; 3], 1e-19), 1.0);
    let f = clip_factor(&[3.0, 4.0], 1.0);
    assert!((f64::from(f) - 0.2).abs() <= 0.2 / 32768.0, "{f}");
    for zeta in [0.0, -1.0, f32::NAN, f32::INFINITY, 1e-20, 1e20] {
        let mut row = [1.0f32, 2.0];
        clip_to_norm(&mut row, zeta);
        assert_eq!(row, [0.0, 0.0], "ζ = {zeta}");
    }
}

/// A long row (many carries of the pairwise sum) whose terms vary over 40 binary orders.
#[test]
fn a_long_row_is_clipped_to_within_the_margin() {
    let row: Vec<f32> = (0..(1 << 20) + 123)
        .map(|i: u32| {
            let x = i.wrapping_mul(2_654_435_761) as f32 / u32::MAX as f32 - 0.5;
            x * 2f32.powi((i % 41) as i32 - 20)
        })
        .collect();
    for zeta in [1.0f32, 7.5, 1e3] {
        check(&row, zeta).unwrap();
    }
}

/// A row with an entry that is not finite gets the factor 0 (zeroing is safe), wherever the entry
/// sits among the scan's 8 lanes and its tail, and whatever the other entries are.
#[test]
fn rows_with_a_non_finite_entry_get_zero() {
    for bad in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        for len in [1, 7, 8, 9, 17, 300] {
            for at in [0, len / 2, len - 1] {
                for fill in [0.0, 1e-3, 1e30] {
                    let mut row = vec![fill; len];
                    row[at] = bad;
                    assert_eq!(
                        clip_factor(&row, 1.0).to_bits(),
                        0.0f32.to_bits(),
                        "{bad} at {at} of {len}"
                    );
                }
            }
        }
    }
}
