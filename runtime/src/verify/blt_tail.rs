//! Verification of a BLT bound for **every** horizon (`SensitivityMethod::BltTailBound`,
//! `mfc compile --horizon unbounded`, single participation): an upper bound on `sqrt(Σ_{t≥0} c_t²)`
//! (`c = 1/r`, the encoder's column 0, the longest column of every leading block `C_N`;
//! `formats/SPEC.md`, "Unbounded horizon") from the stored `f32` parameters, with the rounding of
//! the device's own `f64` arithmetic included. The compiler records this very value
//! (`mfc_compiler::toeplitz::unbounded_sensitivity` calls [`certify`]), so every blob it writes
//! verifies bit for bit, and a blob whose state matrix does not contract provably (spectral radius
//! `≥ 1`, or no contracting power within `K_MAX` steps or the budget) is
//! [`Unverifiable::IllConditioned`] or [`Unverifiable::OverBudget`], never verified.
//!
//! **The recurrence.** Solving the device's filter for the impulse gives `c_0 = 1`, `s_1 = 1`,
//! `c_t = −ωᵀ s_t` and `s_{t+1} = A s_t` for `t ≥ 1`, with `A = diag(θ) − 1ωᵀ`, and
//! `s_{T,j} = Σ_{u<T} θ_j^{T−1−u} c_u`.
//!
//! **The tail** (`k·(2m² + 2m)` operations, `m² + m` floats). `P̂_i = fl(P̂_{i−1}A)`, `P̂_0 = I`,
//! is computed in plain `f64` as `(P̂A)_{rc} = P̂_{rc}θ_c − ω_c Σ_l P̂_{rl}` (`m²` operations: `A`
//! is diagonal plus rank one), and its local residual `R_{i−1} = P̂_{i−1}A − P̂_i` with running
//! error bounds (`P̂_{i−1}` taken as exact). Then `A^i − P̂_i = Σ_{l<i} R_l A^{i−1−l}`, so with
//! `N_j ≥ ‖A^j‖_∞` and `M_{i−1} = max_{j<i} N_j`:
//! `‖A^i‖_∞ ≤ N_i := ‖P̂_i‖_∞ + M_{i−1}·Σ_{l<i} ‖R_l‖_∞`. The rounding errors never compound
//! through `|A|` (whose spectral radius may exceed 1 when `A`'s does not), only through the norms
//! of the true powers, which a contracting `A` keeps bounded. The same holds for the row vectors
//! `v̂_i ≈ ωᵀA^i`: `ρ_i := ‖v̂_i‖₁ + M_{i−1}·Σ_{l<i} ‖R^v_l‖₁ ≥ ‖ωᵀA^i‖₁` (a row vector times `A^j`
//! grows by at most `‖A^j‖_∞`). `k` is the least `i ≤ K_MAX` with `N_i ≤ ½`, `q = N_k`. Every
//! `t = T + a·k + i` (`a ≥ 0`, `i < k`) has `|c_t| =
//! |ωᵀA^i (A^k)^a s_T| ≤ ρ_i q^a ‖s_T‖_∞`, so `Σ_{t≥T} c_t² ≤ ‖s_T‖²_∞ Σ_{i<k} ρ_i² / (1 − q²) =:
//! τ`.
//!
//! **The head** (`T·m` operations, `2m` floats). `ĉ_t`, `t < T`, by the filter in plain `f64`,
//! checked a posteriori by its residual `ρ = δ − r * ĉ` with running error bounds, as for a
//! finite horizon (`super::blt_residual`): `‖c_{<T}‖₂ ≤ ‖ĉ_{<T}‖₂ / (1 − ‖ρ‖₁) =: √H`. The same
//! pass holds `S_j(ĉ) = Σ_{u<T} θ_j^{T−1−u} ĉ_u` with a bound on its rounding; and
//! `|S_j(c) − S_j(ĉ)| ≤ √T·‖c − ĉ‖₂ ≤ √T·‖ρ‖₁·√H` (Cauchy–Schwarz, `θ_j < 1`), which bounds
//! `‖s_T‖_∞`. The head runs to `T = 2, 4, 8, …` until `τ ≤ 10⁻⁷·H`; the result is
//! `sqrt(H + τ)`, rounded up, at most a relative `5·10⁻⁸` above the infinite sum beyond rounding.
//!
//! The operations are not known before the run (they depend on how fast the encoder decays):
//! [`certify`] counts them as it goes, stops at the caller's budget, and reports them.

use mfc_formats::F32Table;

use super::{Bounded, GROW, Unverifiable, UpperSum, blt_residual, larger, solve_up, sqrt_up};

/// The largest power `k` tried for `‖A^k‖_∞ ≤ ½` (the compiler's limit before this module).
pub const K_MAX: u32 = 16_384;

/// The head stops once the tail bound is at most this fraction of it.
const TAIL_FRACTION: f64 = 1e-7;

/// The head runs at most this many steps (`2³²`, the stream's own step limit): beyond,
/// `IllConditioned` (the tail bound is then kept large by rounding, not by the encoder).
const HEAD_MAX: u64 = 1 << 32;

/// Norms of the computed powers beyond this are taken as divergence: `IllConditioned`.
const DIVERGED: f64 = 1e30;

/// What [`certify`] found: the bound and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailCertificate {
    /// `sqrt(head + tail)`, rounded up: an upper bound on `sqrt(Σ_{t≥0} c_t²)`.
    pub value: f64,
    /// `T`: the coefficients computed one by one.
    pub head_steps: u64,
    /// `H ≥ Σ_{t<T} c_t²`, rounding included.
    pub head: f64,
    /// `τ ≥ Σ_{t≥T} c_t²`.
    pub tail: f64,
    /// `q ≥ ‖A^k‖_∞`, `q ≤ ½`.
    pub contraction: f64,
    /// `k`.
    pub power: u32,
    /// The operations spent (multiply-adds, as [`super::operations`] counts them).
    pub operations: u64,
}

/// The `f64`s of scratch [`certify`] needs for `m` buffers: `2m` for the head, `m² + m` for the
/// powers `P̂_i` and the row `v̂_i`.
pub const fn scratch_len(buffers: usize) -> usize {
    buffers * buffers + 3 * buffers
}

/// An operations budget spent as the computation goes.
struct Budget {
    spent: u64,
    max: u64,
}

impl Budget {
    /// Spends `n` operations, or reports that at least `spent + n` are needed.
    fn spend(&mut self, n: u64) -> Result<(), Unverifiable> {
        let next = self.spent.saturating_add(n);
        if next > self.max {
            return Err(Unverifiable::OverBudget { operations: next });
        }
        self.spent = next;
        Ok(())
    }
}

/// Replaces the row `x` by `fl(xA)`, `(xA)_c = x_c θ_c − ω_c Σ_l x_l`, and returns upper bounds
/// on `‖fl(xA)‖₁` and on `‖xA − fl(xA)‖₁` (`x` taken as exact).
fn times_a(theta: F32Table<'_>, omega: F32Table<'_>, x: &mut [f64]) -> (f64, f64) {
    let mut sum = Bounded::exact(0.0);
    for &v in x.iter() {
        sum = sum.add(Bounded::exact(v));
    }
    let (mut norm, mut residual) = (UpperSum::default(), UpperSum::default());
    for (c, v) in x.iter_mut().enumerate() {
        let t = Bounded::exact(f64::from(theta.get(c).unwrap_or(0.0)));
        let w = Bounded::exact(f64::from(omega.get(c).unwrap_or(0.0)));
        let y = Bounded::exact(*v).mul(t).sub(sum.mul(w));
        *v = y.v;
        norm.add(y.v.abs());
        residual.add(y.e);
    }
    (norm.value(), residual.value())
}

/// `k`, `q ≥ ‖A^k‖_∞` (`q ≤ ½`) and `Σ_{i<k} ρ_i²` with `ρ_i ≥ ‖ωᵀA^i‖₁` (the module docs).
/// `scratch` holds `m² + m` floats.
fn contraction(
    theta: F32Table<'_>,
    omega: F32Table<'_>,
    m: usize,
    scratch: &mut [f64],
    budget: &mut Budget,
) -> Result<(u32, f64, f64), Unverifiable> {
    let Some((power, row)) = scratch.split_at_mut_checked(m * m) else {
        return Err(Unverifiable::ScratchTooSmall { needed: m * m + m });
    };
    let Some(row) = row.get_mut(..m) else {
        return Err(Unverifiable::ScratchTooSmall { needed: m * m + m });
    };
    power.fill(0.0);
    // P̂_0 = I, row by row (m rows of m).
    for (r, power_row) in power.chunks_exact_mut(m).enumerate() {
        if let Some(diagonal) = power_row.get_mut(r) {
            *diagonal = 1.0;
        }
    }
    let mut rows = UpperSum::default();
    for (c, v) in row.iter_mut().enumerate() {
        *v = f64::from(omega.get(c).unwrap_or(0.0));
    }
    // ρ_0 = ‖ω‖₁ (exact inputs).
    let mut rho0 = UpperSum::default();
    for v in row.iter() {
        rho0.add(v.abs());
    }
    let rho0 = rho0.value();
    rows.add(rho0 * rho0 * GROW);
    // M_{i−1} = max_{j<i} N_j (N_0 = ‖I‖ = 1), Σ_{l<i} ‖R_l‖_∞ and Σ_{l<i} ‖R^v_l‖₁.
    let (mut largest, mut residuals, mut row_residuals) = (1.0f64, 0.0f64, 0.0f64);
    for i in 1..=K_MAX {
        // m + 1 rows (the power and ωᵀ), each a sum and a multiply-subtract per entry.
        budget.spend((2 * m * m + 2 * m) as u64)?;
        let (mut norm, mut residual) = (0.0f64, 0.0f64);
        for power_row in power.chunks_exact_mut(m) {
            let (n, e) = times_a(theta, omega, power_row);
            norm = larger(norm, n);
            residual = larger(residual, e);
        }
        let (row_norm, row_residual) = times_a(theta, omega, row);
        residuals = (residuals + residual) * GROW;
        row_residuals = (row_residuals + row_residual) * GROW;
        // N_i ≥ ‖A^i‖_∞ and ρ_i ≥ ‖ωᵀA^i‖₁, from M_{i−1}.
        let bound = (norm + largest * residuals * GROW) * GROW;
        let rho = (row_norm + largest * row_residuals * GROW) * GROW;
        if !(bound.is_finite() && bound < DIVERGED && rho.is_finite()) {
            return Err(Unverifiable::IllConditioned);
        }
        if bound <= 0.5 {
            return Ok((i, bound, rows.value()));
        }
        rows.add(rho * rho * GROW);
        largest = larger(largest, bound);
    }
    Err(Unverifiable::IllConditioned)
}

/// An upper bound on `sqrt(Σ_{t≥0} c_t²)` for the stored BLT parameters `theta`, `omega` (`m`
/// values each, `θ_j ∈ (0, 1)`), with the rounding of this computation included (module docs),
/// within `max_operations` and `scratch` ([`scratch_len`] floats). A state matrix that does not
/// contract provably within [`K_MAX`] steps, or a residual too large to certify, is
/// [`Unverifiable::IllConditioned`]; a tail that is not below `10⁻⁷` of the head within the
/// budget is [`Unverifiable::OverBudget`] (with the operations reached, a lower bound on those
/// needed).
pub fn certify(
    theta: F32Table<'_>,
    omega: F32Table<'_>,
    scratch: &mut [f64],
    max_operations: u64,
) -> Result<TailCertificate, Unverifiable> {
    let m = theta.as_bytes().len() / 4;
    if m == 0 || omega.as_bytes().len() / 4 != m {
        return Err(Unverifiable::IllConditioned);
    }
    let needed = scratch_len(m);
    let Some(scratch) = scratch.get_mut(..needed) else {
        return Err(Unverifiable::ScratchTooSmall { needed });
    };
    let mut budget = Budget {
        spent: 0,
        max: max_operations,
    };
    let (state, rest) = scratch.split_at_mut(2 * m);
    let (power, contraction, rows) = contraction(theta, omega, m, rest, &mut budget)?;
    // τ = ‖s_T‖²_∞ · rows / (1 − q²): 1 − q² ≥ ¾, each operation rounded up.
    let q2 = contraction * contraction * GROW;
    let tail_factor = rows / (1.0 - q2) * GROW * GROW * GROW;
    state.fill(0.0);
    let (mut norm, mut residual) = (UpperSum::default(), UpperSum::default());
    let mut t = 0u64;
    let mut checkpoint = 2u64;
    let mut previous_tail = f64::INFINITY;
    loop {
        budget.spend((checkpoint - t).saturating_mul(m as u64))?;
        while t < checkpoint {
            let impulse = if t == 0 { 1.0 } else { 0.0 };
            let (c, r) = blt_residual(theta, omega, state, impulse);
            norm.add(c * c);
            residual.add(r);
            t += 1;
        }
        let rho = residual.value();
        let root = solve_up(sqrt_up(norm.value()), rho)?;
        let head = root * root * GROW;
        // ‖s_T‖_∞: the computed state, its rounding, and √T·‖ρ‖₁·√H for c − ĉ.
        let spread = sqrt_up(t as f64) * rho * root * GROW * GROW;
        let mut s_inf = 0.0f64;
        for j in 0..m {
            let s = Bounded::read(state, j);
            s_inf = larger(s_inf, (s.abs_upper() + spread) * GROW);
        }
        let tail = s_inf * s_inf * tail_factor * GROW;
        if !(head.is_finite() && tail.is_finite()) {
            return Err(Unverifiable::IllConditioned);
        }
        if tail <= TAIL_FRACTION * head {
            return Ok(TailCertificate {
                value: sqrt_up((head + tail) * GROW),
                head_steps: t,
                head,
                tail,
                contraction,
                power,
                operations: budget.spent,
            });
        }
        // The rounding spread grows as √T (its `ρ` and `√H` never shrink): once it dominates the
        // state and the tail has stopped shrinking, a longer head only loosens the bound, so the
        // blob is given up at once rather than after `HEAD_MAX` steps (a near-unit filter whose
        // residual settles above what its tail allows would otherwise run to the limit).
        if checkpoint >= HEAD_MAX || (tail >= previous_tail && 2.0 * spread >= s_inf) {
            return Err(Unverifiable::IllConditioned);
        }
        previous_tail = tail;
        checkpoint *= 2;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn table(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// `Σ_{t<T} c_t²` and `Σ_{T≤t<N} c_t²` summed directly in `f64`, an independent reference.
    fn direct(theta: &[f32], omega: &[f32], head: u64, steps: u64) -> (f64, f64) {
        let mut s = std::vec![0.0f64; theta.len()];
        let mut sums = [0.0, 0.0];
        for t in 0..steps {
            let mut c = if t == 0 { 1.0 } else { 0.0 };
            for (s, w) in s.iter().zip(omega) {
                c -= f64::from(*w) * s;
            }
            sums[usize::from(t >= head)] += c * c;
            for (s, th) in s.iter_mut().zip(theta) {
                *s = f64::from(*th) * *s + c;
            }
        }
        (sums[0], sums[1])
    }

    fn run(theta: &[f32], omega: &[f32]) -> Result<TailCertificate, Unverifiable> {
        let (t, w) = (table(theta), table(omega));
        let mut scratch = std::vec![0.0; scratch_len(theta.len())];
        certify(
            F32Table::new(&t).unwrap(),
            F32Table::new(&w).unwrap(),
            &mut scratch,
            u64::MAX,
        )
    }

    #[test]
    fn bounds_the_series_tightly() {
        for (theta, omega) in [
            (&[0.5f32][..], &[0.25f32][..]),
            (&[0.9, 0.99], &[0.3, 0.05]),
            (&[0.999, 0.9, 0.5, 0.1], &[0.02, 0.1, 0.2, 0.1]),
        ] {
            let cert = run(theta, omega).unwrap();
            let (head, tail) = direct(theta, omega, cert.head_steps, 200_000);
            let truth = libm::sqrt(head + tail);
            // Each part bounds its own sum, with the rounding of the reference to spare.
            assert!(cert.head >= head * (1.0 - 1e-12), "{} < {head}", cert.head);
            assert!(cert.tail >= tail, "{} < {tail}", cert.tail);
            assert!(cert.value >= truth, "{} < {truth}", cert.value);
            assert!(
                cert.value <= truth * (1.0 + 1e-7),
                "{} vs {truth}",
                cert.value
            );
            assert!(cert.contraction <= 0.5);
        }
    }

    /// θ = (0.5, 0.5), ω = (−0.3, −0.3): `A` has spectral radius 1.1, the series diverges.
    #[test]
    fn a_growing_encoder_is_not_certified() {
        assert_eq!(
            run(&[0.5, 0.5], &[-0.3, -0.3]),
            Err(Unverifiable::IllConditioned)
        );
        // Spectral radius exactly 1 (θ − ω = 1 for m = 1): no power contracts.
        assert_eq!(run(&[0.5], &[-0.5]), Err(Unverifiable::IllConditioned));
    }

    /// θ = 0.9999, ω = 1.9998 (m = 1, `a = θ − ω = −0.9999`): honest and contracting (its
    /// series sums to about 141.4²), but its residual settles above what the tail allows, so
    /// no head length certifies it. It is given up as soon as the rounding spread dominates and
    /// the tail stops shrinking — within 10⁸ operations, where running the head to `HEAD_MAX`
    /// took about a minute on a host (`OverBudget` here) and would take days on a device.
    #[test]
    fn a_filter_that_cannot_be_certified_is_given_up_early() {
        let (t, w) = (table(&[0.9999]), table(&[1.9998]));
        let mut scratch = std::vec![0.0; scratch_len(1)];
        assert_eq!(
            certify(
                F32Table::new(&t).unwrap(),
                F32Table::new(&w).unwrap(),
                &mut scratch,
                100_000_000,
            ),
            Err(Unverifiable::IllConditioned)
        );
    }

    #[test]
    fn stops_at_the_budget_and_the_scratch() {
        let (t, w) = (table(&[0.9, 0.99]), table(&[0.3, 0.05]));
        let (t, w) = (F32Table::new(&t).unwrap(), F32Table::new(&w).unwrap());
        let mut scratch = [0.0; 10];
        let spent = certify(t, w, &mut scratch, u64::MAX).unwrap().operations;
        assert!(matches!(
            certify(t, w, &mut scratch, spent - 1),
            Err(Unverifiable::OverBudget { operations }) if operations > spent - 1
        ));
        assert_eq!(
            certify(t, w, &mut scratch[..9], u64::MAX),
            Err(Unverifiable::ScratchTooSmall { needed: 10 })
        );
    }
}
