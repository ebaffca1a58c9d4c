//! Linear convolution of probability vectors, the one heavy operation of the accountant: composing
//! two privacy loss distributions on a common grid convolves their masses (Koskela, Jälkö, Honkela
//! 2020). Short vectors are convolved directly (every term non-negative, no cancellation);
//! longer ones through real FFTs of the next power of two `N ≥ len(a) + len(b) − 1`, so the
//! cyclic product equals the linear one (no wrap-around). A real transform of length `N` is a
//! complex one of length `N/2` (even and odd samples packed) and a split: a squaring costs two
//! complex FFTs of `N/2` points, a convolution three; `O(N log N)`.
//!
//! Floating point: the FFT's error on each output is about `u·log₂N` times the largest mass
//! (`u = 2⁻⁵³`), of either sign; the caller ([`super::pld`]) keeps it as it is (clamping
//! zero-mean noise to zero would bias every composition). This roundoff is not bounded a priori
//! (neither is it in `dp_accounting`); the test `fft_matches_direct_convolution` measures it
//! against the direct sum.

use core::f64::consts::PI;

/// Below this many products (`len(a)·len(b)`) the direct sum is used.
const DIRECT_LIMIT: usize = 1 << 14;

/// Whether [`convolve`] (and [`square`]) go through the FFT for these lengths.
pub(crate) fn uses_fft(a: usize, b: usize) -> bool {
    !(a.min(b) <= 8 || a.saturating_mul(b) <= DIRECT_LIMIT)
}

/// `c[i] = Σ_j a[j]·b[i−j]`, of length `len(a) + len(b) − 1` (empty if either is empty).
pub(crate) fn convolve(a: &[f64], b: &[f64]) -> Vec<f64> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let len = a.len() + b.len() - 1;
    if !uses_fft(a.len(), b.len()) {
        return direct(a, b);
    }
    let n = len.next_power_of_two();
    let fft = Fft::new(n);
    let mut x = fft.real_forward(a);
    let y = fft.real_forward(b);
    for (u, v) in x.iter_mut().zip(&y) {
        *u = mul(*u, *v);
    }
    let mut c = fft.real_inverse(&x);
    c.truncate(len);
    c
}

/// `a * a`.
pub(crate) fn square(a: &[f64]) -> Vec<f64> {
    if a.is_empty() {
        return Vec::new();
    }
    let len = 2 * a.len() - 1;
    if !uses_fft(a.len(), a.len()) {
        return direct(a, a);
    }
    let n = len.next_power_of_two();
    let fft = Fft::new(n);
    let mut x = fft.real_forward(a);
    for u in x.iter_mut() {
        *u = mul(*u, *u);
    }
    let mut c = fft.real_inverse(&x);
    c.truncate(len);
    c
}

/// The direct `O(len(a)·len(b))` convolution.
pub(crate) fn direct(a: &[f64], b: &[f64]) -> Vec<f64> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut c = vec![0.0; a.len() + b.len() - 1];
    for (i, &ai) in a.iter().enumerate() {
        if ai == 0.0 {
            continue;
        }
        for (cj, &bj) in c[i..].iter_mut().zip(b) {
            *cj += ai * bj;
        }
    }
    c
}

type Complex = (f64, f64);

fn mul(a: Complex, b: Complex) -> Complex {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn conj(a: Complex) -> Complex {
    (a.0, -a.1)
}

/// Real transforms of length `n` (a power of two) through complex ones of length `n/2`, with an
/// iterative radix-2 FFT. The twiddle factors are laid out by stage, `w[h + k] = e^{−iπk/h}` for
/// `k < h`, each computed directly by `sin`/`cos` (no error growth with `k`), so a stage reads
/// them contiguously; the stage `h = n/2` holds the `e^{−2πik/n}` the real-to-complex step needs.
struct Fft {
    n: usize,
    twiddles: Vec<Complex>,
}

impl Fft {
    fn new(n: usize) -> Self {
        debug_assert!(n.is_power_of_two() && n >= 4);
        let mut twiddles = vec![(1.0, 0.0); n];
        let mut h = 1;
        while h < n {
            for k in 0..h {
                let angle = -PI * k as f64 / h as f64;
                twiddles[h + k] = (angle.cos(), angle.sin());
            }
            h <<= 1;
        }
        Fft { n, twiddles }
    }

    /// `X_k = Σ_j x_j e^{−2πijk/n}` for `k = 0 … n/2` (the rest is Hermitian), `x` zero-padded
    /// to `n`: the even and odd samples as one complex sequence of length `n/2`, then split.
    fn real_forward(&self, x: &[f64]) -> Vec<Complex> {
        let m = self.n / 2;
        let mut z: Vec<Complex> = (0..m)
            .map(|j| {
                (
                    x.get(2 * j).copied().unwrap_or(0.0),
                    x.get(2 * j + 1).copied().unwrap_or(0.0),
                )
            })
            .collect();
        self.complex(&mut z, false);
        let mut out = vec![(0.0, 0.0); m + 1];
        for k in 0..=m {
            let zk = z[k % m];
            let zc = conj(z[(m - k) % m]);
            let even = (0.5 * (zk.0 + zc.0), 0.5 * (zk.1 + zc.1));
            // (Z_k − conj Z_{m−k})/(2i)
            let d = (zk.0 - zc.0, zk.1 - zc.1);
            let odd = (0.5 * d.1, -0.5 * d.0);
            let w = if k < m {
                self.twiddles[m + k]
            } else {
                (-1.0, 0.0)
            };
            let t = mul(w, odd);
            out[k] = (even.0 + t.0, even.1 + t.1);
        }
        out
    }

    /// The inverse of [`Fft::real_forward`] (with the `1/n`), for a Hermitian spectrum given by
    /// its first `n/2 + 1` terms.
    fn real_inverse(&self, spectrum: &[Complex]) -> Vec<f64> {
        let m = self.n / 2;
        let mut z = vec![(0.0, 0.0); m];
        for (k, zk) in z.iter_mut().enumerate() {
            let xk = spectrum[k];
            let xc = conj(spectrum[m - k]);
            let even = (0.5 * (xk.0 + xc.0), 0.5 * (xk.1 + xc.1));
            let w = conj(self.twiddles[m + k]);
            let odd = mul(w, (0.5 * (xk.0 - xc.0), 0.5 * (xk.1 - xc.1)));
            // Z_k = E_k + i·O_k
            *zk = (even.0 - odd.1, even.1 + odd.0);
        }
        self.complex(&mut z, true);
        let mut out = Vec::with_capacity(self.n);
        for v in z {
            out.push(v.0);
            out.push(v.1);
        }
        out
    }

    /// In-place complex FFT of length `a.len() ≤ n/2` (a power of two); the inverse includes
    /// the `1/len`, which with the halves of the split makes [`Fft::real_inverse`]'s `1/n`.
    fn complex(&self, a: &mut [Complex], inverse: bool) {
        let n = a.len();
        let mut j = 0;
        for i in 1..n {
            let mut bit = n >> 1;
            while j & bit != 0 {
                j ^= bit;
                bit >>= 1;
            }
            j |= bit;
            if i < j {
                a.swap(i, j);
            }
        }
        let mut h = 1;
        while h < n {
            let w = &self.twiddles[h..2 * h];
            for block in a.chunks_exact_mut(2 * h) {
                let (lo, hi) = block.split_at_mut(h);
                for ((u, v), &(wr, wi)) in lo.iter_mut().zip(hi.iter_mut()).zip(w) {
                    let wi = if inverse { -wi } else { wi };
                    let (tr, ti) = (v.0 * wr - v.1 * wi, v.0 * wi + v.1 * wr);
                    *v = (u.0 - tr, u.1 - ti);
                    *u = (u.0 + tr, u.1 + ti);
                }
            }
            h <<= 1;
        }
        if inverse {
            let scale = 1.0 / n as f64;
            for v in a.iter_mut() {
                *v = (v.0 * scale, v.1 * scale);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random probability-like vector (xorshift), with a few tiny masses
    /// as in the tails of a privacy loss distribution.
    fn vector(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let u = (s >> 11) as f64 / (1u64 << 53) as f64;
                if i % 17 == 0 { u * 1e-12 } else { u }
            })
            .collect()
    }

    /// The FFT path against the direct sum over a sweep of sizes: the error on each output is at
    /// most a few `u·log₂N` times the largest output.
    #[test]
    fn fft_matches_direct_convolution() {
        for (la, lb) in [(129, 300), (1000, 1000), (4097, 33), (3000, 5000)] {
            let (a, b) = (vector(la, la as u64), vector(lb, lb as u64 + 7));
            let slow = direct(&a, &b);
            let fast = convolve(&a, &b);
            assert_eq!(slow.len(), fast.len());
            let scale = slow.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
            let n = (la + lb - 1).next_power_of_two() as f64;
            let bound = 8.0 * f64::EPSILON * n.log2() * scale;
            let worst = slow
                .iter()
                .zip(&fast)
                .fold(0.0_f64, |m, (s, f)| m.max((s - f).abs()));
            assert!(worst <= bound, "({la}, {lb}): {worst:e} > {bound:e}");
            let sq = square(&a);
            let slow_sq = direct(&a, &a);
            let worst = slow_sq
                .iter()
                .zip(&sq)
                .fold(0.0_f64, |m, (s, f)| m.max((s - f).abs()));
            let scale = slow_sq.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
            assert!(worst <= 8.0 * f64::EPSILON * n.log2() * scale);
        }
    }
}
