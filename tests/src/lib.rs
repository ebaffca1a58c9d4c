//! End-to-end tests live in `tests/tests/`; this library holds what several of them share.

/// The clip factor the runtime applies to `x` for clip norm `ζ`, checked against the exact
/// `min(1, ζ/‖x‖)`: the runtime's factor is shrunk by at most `2⁻¹⁵` so that rounding can never
/// lift a clipped row above `ζ` (proven in `runtime/src/clip.rs`, tested against an `f64`
/// reference in `runtime/tests/clip.rs`). Dense references use it so that their comparisons
/// test the decoder, not that margin.
pub fn runtime_clip_factor(x: &[f32], zeta: f64) -> f64 {
    let norm = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>().sqrt();
    let exact = if norm > zeta { zeta / norm } else { 1.0 };
    let factor = f64::from(mfc_runtime::clip_factor(x, zeta as f32));
    assert!(
        factor <= exact && factor >= exact * (1.0 - 2f64.powi(-15)),
        "clip factor {factor} for exact {exact}"
    );
    factor
}
