//! The correctly rounded square root of an `f64` in integer arithmetic, for the verification's
//! bounds (the module docs of [`super`] need `√x` correctly rounded: host and device then compute
//! the same bits). `libm::sqrt` is also correctly rounded but brings a 256-byte reciprocal table
//! and 0.5 KB of code to a Cortex-M4F, which has no `f64` square root; this is the classic
//! digit-by-digit method (one result bit per step, as fdlibm's `e_sqrt.c`) in about a fifth of
//! that.
//!
//! **Method.** Write `x = M·2^e` with the integer `M ∈ [2⁵², 2⁵³)` (subnormals normalised) and
//! make `e` even by doubling `M` when it is odd, so `M < 2⁵⁴`. Then `q = ⌊√(M·2⁵⁴)⌋` has 54 bits
//! (`2⁵³ ≤ q < 2⁵⁴`): the 53 of the result and one more; the remainder `M·2⁵⁴ − q²` says whether
//! anything lies below. Digit by digit, the radicand enters two bits per step and
//! `q ← 2q + 1` when `4r + bits ≥ 4q + 1` (with `r` the remainder so far, `r ≤ 2q`, so `r < 2⁵⁵`
//! and every value fits a `u64`). The result `√x = (q/2)·2^(e/2 − 26)` is rounded to nearest, ties
//! to even, on its last bit and the remainder (an exact tie cannot occur for a square root, but
//! the rule costs nothing). `√±0 = ±0`, `√∞ = ∞`, and a negative `x` or NaN gives NaN, as
//! IEEE 754 (and `libm::sqrt`) do.

/// `√x`, correctly rounded (module docs).
pub(super) fn sqrt(x: f64) -> f64 {
    // The special cases on the bits (no `f64` comparison to link).
    let bits = x.to_bits();
    let (negative, magnitude) = (bits >> 63 == 1, bits & !(1 << 63));
    let infinity = f64::INFINITY.to_bits();
    if magnitude == 0 || (magnitude == infinity && !negative) {
        return x;
    }
    if negative || magnitude > infinity {
        return f64::NAN;
    }
    let fraction = bits & ((1 << 52) - 1);
    let biased = (bits >> 52) as i32;
    // x = mantissa · 2^exponent, mantissa in [2⁵², 2⁵³).
    let (mut mantissa, mut exponent) = if biased == 0 {
        let shift = fraction.leading_zeros() - 11;
        (fraction << shift, -1074 - shift as i32)
    } else {
        (fraction | 1 << 52, biased - 1075)
    };
    if exponent & 1 != 0 {
        mantissa <<= 1;
        exponent -= 1;
    }
    // q = ⌊√(mantissa · 2⁵⁴)⌋: the radicand's 54 bit pairs from the top, the mantissa's 27
    // (shifted to the top of `radicand`, which shifts them out two by two) and 27 zero pairs.
    let (mut q, mut r, mut radicand) = (0u64, 0u64, mantissa << 10);
    for _ in 0..54 {
        r = (r << 2) | (radicand >> 62);
        radicand <<= 2;
        let trial = (q << 2) | 1;
        q <<= 1;
        if r >= trial {
            r -= trial;
            q |= 1;
        }
    }
    let (guard, mut q) = (q & 1, q >> 1);
    if guard == 1 && (r != 0 || q & 1 == 1) {
        q += 1;
    }
    // √x = q · 2^(exponent/2 − 26), q ∈ [2⁵², 2⁵³]; q's leading bit adds 1 to the biased
    // exponent field (and q = 2⁵³ carries into it).
    let field = (exponent / 2 + 26 + 1022) as u64;
    f64::from_bits((field << 52) + q)
}

#[cfg(test)]
mod tests {
    use super::sqrt;

    /// The bits of `libm::sqrt` (correctly rounded) for special values, subnormals, every power
    /// of two's neighbours, perfect squares and their neighbours, and a million random bit
    /// patterns (a fixed xorshift seed).
    #[test]
    fn the_square_root_is_correctly_rounded() {
        let check = |x: f64| {
            let (ours, theirs) = (sqrt(x), libm::sqrt(x));
            assert!(
                ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
                "sqrt({x:e}) = {ours:e}, libm {theirs:e}"
            );
        };
        for x in [
            0.0,
            -0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::from_bits(1),
            f64::from_bits(2),
            f64::from_bits(3),
            f64::from_bits((1 << 52) - 1),
            2.0,
            0.5,
            1.0,
        ] {
            check(x);
        }
        for e in -1074..1024 {
            let p = libm::ldexp(1.0, e);
            for x in [
                p,
                f64::from_bits(p.to_bits() + 1),
                f64::from_bits(p.to_bits() - 1),
            ] {
                check(x);
            }
        }
        for n in (1u64..1 << 26).step_by(9973) {
            let square = (n * n) as f64;
            for x in [
                square,
                f64::from_bits(square.to_bits() + 1),
                f64::from_bits(square.to_bits() - 1),
            ] {
                check(x);
            }
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1_000_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            check(f64::from_bits(state >> 1));
            // Subnormal and small normal inputs, whose mantissa is normalised first.
            check(f64::from_bits(state >> 11));
        }
    }
}
