//! The tables of a 128-layer ziggurat for the standard normal distribution, in `f32`
//! (Marsaglia & Tsang's RNOR), and their construction.
//!
//! # Construction
//!
//! Let `f(x) = e^{−x²/2}` (the density without its constant). The region under `f` on `x ≥ 0` is
//! covered by 128 layers of equal area `v`. The base layer is the rectangle `[0, r) × [0, f(r)]`
//! together with the tail `x ≥ r`:
//!
//! `v = r·f(r) + ∫_r^∞ f(x) dx`.
//!
//! Above it lie 127 rectangles. With `x₁₂₇ = r`, layer `i` (`1 ≤ i ≤ 127`) is
//! `[0, x_i) × [f(x_i), f(x_{i−1})]`, and its area `x_i·(f(x_{i−1}) − f(x_i)) = v` gives
//!
//! `x_{i−1} = √(−2 ln(v/x_i + f(x_i)))`, from `x₁₂₆` down to `x₁`.
//!
//! The pair `r = 3.442619855899`, `v = 9.91256303526217·10⁻³` (Marsaglia & Tsang's values for
//! 128 layers) is the one for which the top layer closes: `x₁·(1 − f(x₁)) = v`, i.e. the
//! recursion would give `x₀ = 0` (`v/x₁ + f(x₁) = 1` to `5·10⁻¹¹`; the test checks both
//! equations). The base layer is drawn as
//! a rectangle of height `f(r)` and width `q = v/f(r) ≈ 3.7131`, whose points beyond `r` stand
//! for the tail.
//!
//! # Tables
//!
//! A sample takes one 32-bit word: bits 0–6 pick the layer `i`, bit 7 the sign, and bits 9–31 an
//! odd 24-bit integer `j = 2m + 1` (bit 8 is unused), so the abscissa `j·w_i` is the midpoint of
//! one of `2²³` equal cells of `[0, x_i)`. The tables, indexed by layer, are
//!
//! - `w_i = x_i·2⁻²⁴` (`w₀ = q·2⁻²⁴`), rounded to `f32`. `j < 2²⁴` is exact in `f32`, so
//!   `j·w_i` has a single rounding;
//! - `k_i = ⌈2²⁴·x_{i−1}/x_i⌉` for `i ≥ 2`, `k₁ = 0` (the top layer has no part that lies wholly
//!   under the curve) and `k₀ = ⌈2²⁴·r/q⌉`. Since `2²⁴·x_{i−1}/x_i` is never an integer (the
//!   test checks it is at least 0.01 away from one), `j < k_i ⟺ j·2⁻²⁴·x_i < x_{i−1}`: the point
//!   lies in the part of the layer under the curve (below `r` for the base layer) and is accepted
//!   at once;
//! - `f_i = f(x_i)` for `i ≥ 1` and `f₀ = f(0) = 1`, the top edge of layer 1. The wedge test of
//!   layer `i ≥ 1` accepts `x` when `f_i + u·(f_{i−1} − f_i) < f(x)`.
//!
//! The layout differs from the paper's C code, which reads a signed word `hz`, takes the layer
//! from its low 7 bits and the abscissa from `hz` itself (so the layer bits are also the
//! abscissa's low bits, a reuse Doornik 2005 criticizes) and scales `k` and `w` by `2³¹`
//! with `k` truncated. Disjoint fields, the `2²⁴` scale and the ceiling make each layer's
//! points exact, symmetric midpoints and the integer test exact.
//!
//! The constants were generated in `f64` with the `libm` crate by the construction above; the
//! test `the_tables_follow_from_r_and_v` recomputes every entry and compares it bit for bit.
//!
//! # References
//!
//! - G. Marsaglia and W. W. Tsang, "The Ziggurat Method for Generating Random Variables",
//!   *Journal of Statistical Software* 5(8), 2000, doi:10.18637/jss.v005.i08.
//! - G. Marsaglia, "Generating a Variable from the Tail of the Normal Distribution",
//!   *Technometrics* 6(1), 1964 (the tail branch).
//! - J. A. Doornik, "An Improved Ziggurat Method to Generate Normal Random Samples", Nuffield
//!   College, Oxford, 2005.

/// The tables of a 128-layer ziggurat (see the module documentation).
pub(crate) struct Ziggurat {
    /// `k_i`: an odd `j < k_i` lies under the curve and is accepted at once.
    pub(crate) k: [u32; 128],
    /// `w_i = x_i·2⁻²⁴`: the abscissa of `j` in layer `i` is `j·w_i`.
    pub(crate) w: [f32; 128],
    /// `f_i = e^{−x_i²/2}` (`f₀ = 1`): the heights for the wedge test.
    pub(crate) f: [f32; 128],
    /// `r`, where the tail starts.
    pub(crate) r: f32,
    /// `1/r`, for the tail's exponential draw.
    pub(crate) r_inv: f32,
}

impl Ziggurat {
    /// `(k_i, w_i)` of layer `i & 127`, the low seven bits of a word.
    #[inline(always)]
    pub(crate) fn layer(&self, i: u32) -> (u32, f32) {
        let i = (i & 0x7f) as usize;
        match (self.k.get(i), self.w.get(i)) {
            (Some(&k), Some(&w)) => (k, w),
            // Not reached: the tables have 128 layers. `k = 0` accepts nothing.
            _ => (0, 0.0),
        }
    }

    /// `(f_i, f_{i−1})`, the heights of the wedge of layer `i & 127` (`≥ 1`: layer 0 has a tail
    /// instead).
    #[inline(always)]
    pub(crate) fn heights(&self, i: u32) -> (f32, f32) {
        let i = (i & 0x7f) as usize;
        match (
            self.f.get(i),
            i.checked_sub(1).and_then(|above| self.f.get(above)),
        ) {
            (Some(&below), Some(&above)) => (below, above),
            // Not reached for a layer ≥ 1; a test against 1 rejects every point.
            _ => (1.0, 1.0),
        }
    }
}

/// The standard normal ziggurat for `r = 3.442619855899`, `v = 9.91256303526217·10⁻³`.
#[rustfmt::skip]
pub(crate) static NORMAL: Ziggurat = Ziggurat {
    k: [
        15555141, 0, 12590647, 14272656, 14988942, 15384587, 15635012, 15807564,
        15933580, 16029597, 16105158, 16166150, 16216402, 16258511, 16294298, 16325081,
        16351834, 16375294, 16396029, 16414482, 16431005, 16445883, 16459346, 16471581,
        16482747, 16492974, 16502372, 16511034, 16519042, 16526462, 16533356, 16539772,
        16545758, 16551351, 16556587, 16561496, 16566104, 16570437, 16574515, 16578357,
        16581980, 16585401, 16588633, 16591688, 16594579, 16597314, 16599905, 16602358,
        16604682, 16606885, 16608972, 16610949, 16612822, 16614597, 16616276, 16617865,
        16619367, 16620786, 16622125, 16623387, 16624575, 16625690, 16626735, 16627713,
        16628624, 16629470, 16630253, 16630974, 16631634, 16632233, 16632773, 16633254,
        16633677, 16634041, 16634346, 16634593, 16634781, 16634910, 16634979, 16634987,
        16634934, 16634817, 16634637, 16634390, 16634075, 16633689, 16633231, 16632698,
        16632085, 16631390, 16630609, 16629737, 16628768, 16627698, 16626520, 16625226,
        16623808, 16622257, 16620563, 16618714, 16616696, 16614494, 16612091, 16609465,
        16606593, 16603449, 16599999, 16596206, 16592025, 16587402, 16582273, 16576559,
        16570163, 16562965, 16554812, 16545511, 16534809, 16522368, 16507733, 16490265,
        16469045, 16442690, 16409026, 16364394, 16302111, 16208408, 16049219, 15707338,
    ],
    w: [
        2.2131718e-7, 1.6231589e-8, 2.1628823e-8, 2.542424e-8, 2.8457512e-8, 3.103352e-8,
        3.3300648e-8, 3.5343344e-8, 3.7214672e-8, 3.895036e-8, 4.057574e-8, 4.2109466e-8,
        4.3565745e-8, 4.495565e-8, 4.628801e-8, 4.7569994e-8, 4.8807497e-8, 5.000545e-8,
        5.1168016e-8, 5.2298752e-8, 5.3400715e-8, 5.4476573e-8, 5.5528652e-8, 5.6559003e-8,
        5.7569448e-8, 5.856161e-8, 5.9536948e-8, 6.0496774e-8, 6.144227e-8, 6.2374525e-8,
        6.329453e-8, 6.420318e-8, 6.510132e-8, 6.598971e-8, 6.686908e-8, 6.7740075e-8,
        6.860333e-8, 6.945942e-8, 7.0308886e-8, 7.115225e-8, 7.199e-8, 7.282259e-8,
        7.365045e-8, 7.447401e-8, 7.5293656e-8, 7.6109785e-8, 7.692275e-8, 7.773291e-8,
        7.854061e-8, 7.934618e-8, 8.014993e-8, 8.09522e-8, 8.1753264e-8, 8.255345e-8,
        8.335304e-8, 8.4152326e-8, 8.4951594e-8, 8.575113e-8, 8.6551225e-8, 8.7352156e-8,
        8.8154195e-8, 8.8957634e-8, 8.976275e-8, 9.056983e-8, 9.137916e-8, 9.219103e-8,
        9.300573e-8, 9.3823566e-8, 9.464484e-8, 9.546986e-8, 9.629894e-8, 9.7132414e-8,
        9.797061e-8, 9.8813885e-8, 9.9662586e-8, 1.00517084e-7, 1.01377765e-7, 1.0224502e-7,
        1.0311926e-7, 1.0400093e-7, 1.0489048e-7, 1.05788374e-7, 1.0669511e-7, 1.0761123e-7,
        1.0853726e-7, 1.09473795e-7, 1.10421446e-7, 1.11380885e-7, 1.12352794e-7, 1.1333791e-7,
        1.1433705e-7, 1.15351035e-7, 1.163808e-7, 1.17427305e-7, 1.1849163e-7, 1.1957489e-7,
        1.2067837e-7, 1.2180338e-7, 1.229514e-7, 1.2412407e-7, 1.2532313e-7, 1.2655053e-7,
        1.2780846e-7, 1.2909929e-7, 1.3042572e-7, 1.3179073e-7, 1.3319769e-7, 1.3465045e-7,
        1.3615335e-7, 1.3771138e-7, 1.3933034e-7, 1.4101693e-7, 1.4277902e-7, 1.4462594e-7,
        1.4656891e-7, 1.4862147e-7, 1.5080033e-7, 1.5312634e-7, 1.5562607e-7, 1.5833416e-7,
        1.6129694e-7, 1.6457852e-7, 1.6827138e-7, 1.7251635e-7, 1.7754414e-7, 1.8377476e-7,
        1.9211083e-7, 2.0519613e-7,
    ],
    f: [
        1.0, 0.9635997, 0.9362827, 0.9130436, 0.89228165, 0.87324303, 0.8555006, 0.8387836,
        0.8229072, 0.8077383, 0.793177, 0.7791461, 0.7655842, 0.7524416, 0.73967725, 0.7272569,
        0.7151515, 0.7033361, 0.69178915, 0.68049186, 0.6694277, 0.658582, 0.6479418, 0.63749546,
        0.6272325, 0.6171434, 0.6072195, 0.5974532, 0.58783704, 0.5783647, 0.56903, 0.5598274,
        0.5507518, 0.54179835, 0.5329627, 0.52424055, 0.5156282, 0.50712204, 0.49871865, 0.49041483,
        0.48220766, 0.4740943, 0.46607214, 0.4581387, 0.45029163, 0.44252872, 0.43484783, 0.427247,
        0.41972435, 0.41227803, 0.40490642, 0.39760786, 0.3903808, 0.3832238, 0.37613547, 0.36911446,
        0.3621595, 0.35526937, 0.34844297, 0.34167916, 0.33497685, 0.3283351, 0.3217529, 0.3152294,
        0.30876362, 0.30235484, 0.29600215, 0.28970486, 0.2834622, 0.2772735, 0.27113807, 0.2650553,
        0.25902456, 0.2530453, 0.24711695, 0.241239, 0.23541094, 0.22963232, 0.2239027, 0.21822165,
        0.21258877, 0.20700371, 0.20146611, 0.19597565, 0.19053204, 0.18513499, 0.17978427, 0.17447963,
        0.1692209, 0.16400786, 0.15884037, 0.15371831, 0.14864157, 0.14361008, 0.13862377, 0.13368265,
        0.12878671, 0.12393598, 0.119130544, 0.11437051, 0.10965602, 0.104987256, 0.10036444, 0.095787846,
        0.0912578, 0.08677467, 0.0823389, 0.077950984, 0.073611505, 0.06932112, 0.06508058, 0.06089077,
        0.056752663, 0.0526674, 0.048636295, 0.044660863, 0.040742867, 0.03688439, 0.033087887, 0.029356318,
        0.025693292, 0.022103304, 0.018592102, 0.015167298, 0.011839478, 0.008624485, 0.005548995, 0.0026696292,
    ],
    r: 3.442_619_8,
    r_inv: 0.290_476_44,
};

/// The ziggurat for `(r, v)`, computed in `f64` by the module's construction and rounded as the
/// checked-in tables are: the reference for [`NORMAL`], and a way to build wrong tables (mutants)
/// that the statistical tests must reject.
#[cfg(test)]
pub(crate) fn build(r: f64, v: f64) -> (Ziggurat, [f64; 128]) {
    let pdf = |x: f64| libm::exp(-0.5 * x * x);
    let mut x = [0.0f64; 128];
    x[127] = r;
    for i in (1..127).rev() {
        x[i] = libm::sqrt(-2.0 * libm::log(v / x[i + 1] + pdf(x[i + 1])));
    }
    x[0] = v / pdf(r);
    let scale = 16_777_216.0; // 2²⁴
    let mut table = Ziggurat {
        k: [0; 128],
        w: [0.0; 128],
        f: [0.0; 128],
        r: r as f32,
        r_inv: (1.0 / r) as f32,
    };
    table.k[0] = libm::ceil(scale * r / x[0]) as u32;
    for i in 2..128 {
        table.k[i] = libm::ceil(scale * x[i - 1] / x[i]) as u32;
    }
    table.w = x.map(|x| (x / scale) as f32);
    table.f = x.map(|x| pdf(x) as f32);
    table.f[0] = 1.0; // f(0), the top edge of layer 1 (not f(q))
    (table, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: f64 = 3.442_619_855_899;
    const V: f64 = 9.912_563_035_262_17e-3;

    #[test]
    fn the_tables_follow_from_r_and_v() {
        let (table, _) = build(R, V);
        for i in 0..128 {
            assert_eq!(NORMAL.k[i], table.k[i], "k[{i}]");
            assert_eq!(NORMAL.w[i].to_bits(), table.w[i].to_bits(), "w[{i}]");
            assert_eq!(NORMAL.f[i].to_bits(), table.f[i].to_bits(), "f[{i}]");
        }
        assert_eq!(NORMAL.r.to_bits(), table.r.to_bits());
        assert_eq!(NORMAL.r_inv.to_bits(), table.r_inv.to_bits());
    }

    /// `r` and `v` satisfy both defining equations: the base layer has area `v`, and the top
    /// layer closes (`x₀ = 0`).
    #[test]
    fn r_and_v_close_the_ziggurat() {
        let (_, x) = build(R, V);
        let tail =
            libm::sqrt(core::f64::consts::FRAC_PI_2) * libm::erfc(R / core::f64::consts::SQRT_2);
        assert!((R * libm::exp(-0.5 * R * R) + tail - V).abs() < 1e-15);
        assert!((V / x[1] + libm::exp(-0.5 * x[1] * x[1]) - 1.0).abs() < 1e-10);
        assert!((1..127).all(|i| x[i] < x[i + 1]) && x[1] > 0.0);
    }

    /// The ceilings are exact: `2²⁴·x_{i−1}/x_i` is far from an integer, so `j < k_i` is the
    /// real comparison `j·2⁻²⁴ < x_{i−1}/x_i`. A layer's points are below `2²⁴`.
    #[test]
    fn the_integer_thresholds_are_exact() {
        let (_, x) = build(R, V);
        let scale = 16_777_216.0;
        let ratio = |i: usize| {
            if i == 0 {
                scale * R / x[0]
            } else {
                scale * x[i - 1] / x[i]
            }
        };
        for i in (0..128).filter(|&i| i != 1) {
            let t = ratio(i);
            let gap = (t - libm::floor(t)).min(libm::ceil(t) - t);
            assert!(gap > 0.01, "layer {i}: {t}");
            assert!(t < scale);
        }
        assert_eq!(NORMAL.k[1], 0);
    }
}
