//! Tests that go red when privacy breaks: the Gaussian sampler, the correlation of the released
//! noise, and a likelihood-ratio audit of neighbouring streams. Each detector is also run against
//! deliberately broken mechanisms (mutants) and must fire on them.
//!
//! Seeds are fixed, so every statistic is deterministic; the thresholds are set for a false-alarm
//! probability of 1e-6 per detector under a correct mechanism. `MFC_AUDIT_SCALE=10` multiplies the
//! sample sizes for a longer run (`cargo test --release -p mfc-tests --test privacy_audit`).
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use mfc_compiler::forms::banded::compile_banded;
use mfc_compiler::forms::banded::compress::CompressOptions;
use mfc_compiler::optimize::single::OptimizeOptions;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::Workload;
use mfc_formats::{Calibration, Decoder, F32Table, Mechanism, encode_f32s};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{ChaChaNoise, Stream};

fn scale() -> usize {
    std::env::var("MFC_AUDIT_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn seed(tag: u64) -> [u8; 32] {
    let mut s = *b"mfc privacy audit seed ........!";
    s[24..32].copy_from_slice(&tag.to_le_bytes());
    s
}

/// Φ, the standard normal distribution function.
fn phi(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// erfc with relative error < 1.2e-7 everywhere (Numerical Recipes' Chebyshev fit), independent of
/// the code under test.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// z such that P(N(0,1) > z) = p, by bisection on `phi`.
fn normal_quantile_upper(p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 40.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if 1.0 - phi(mid) > p {
            lo = mid
        } else {
            hi = mid
        }
    }
    hi
}

// ---------------------------------------------------------------------------------------------
// 1. The sampler.

struct SamplerVerdict {
    mean_z: f64,
    variance_z: f64,
    ks_statistic: f64,
    ks_critical: f64,
    tail_count: u64,
    tail_interval: (f64, f64),
}

impl SamplerVerdict {
    fn passes(&self, z: f64) -> bool {
        self.mean_z.abs() <= z
            && self.variance_z.abs() <= z
            && self.ks_statistic <= self.ks_critical
            && (self.tail_interval.0..=self.tail_interval.1).contains(&(self.tail_count as f64))
    }
}

fn audit_sampler(samples: &mut [f64]) -> SamplerVerdict {
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let tail_count = samples.iter().filter(|x| x.abs() > 4.0).count() as u64;
    samples.sort_by(f64::total_cmp);
    let ks_statistic = samples
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = phi(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max);
    // Two-sided KS at α = 1e-6: sqrt(−ln(α/2)/2)/sqrt(n).
    let ks_critical = (-(0.5e-6f64).ln() / 2.0).sqrt() / n.sqrt();
    let p_tail = 2.0 * (1.0 - phi(4.0));
    let (mu, sd) = (n * p_tail, (n * p_tail * (1.0 - p_tail)).sqrt());
    let z = normal_quantile_upper(0.5e-6 / 4.0);
    SamplerVerdict {
        mean_z: mean / (1.0 / n.sqrt()),
        variance_z: (var - 1.0) / (2.0 / n).sqrt(),
        ks_statistic,
        ks_critical,
        tail_count,
        tail_interval: (mu - z * sd, mu + z * sd),
    }
}

fn sampler_threshold() -> f64 {
    // Four detectors share α = 1e-6.
    normal_quantile_upper(0.25e-6 / 2.0)
}

fn draw(noise: &mut impl NoiseSource, count: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(count);
    let mut row = vec![0.0f32; 4096];
    let mut step = 0;
    while out.len() < count {
        noise.fill_standard_normal(step, 0, &mut row);
        out.extend(row.iter().map(|&x| f64::from(x)));
        step += 1;
    }
    out.truncate(count);
    out
}

#[test]
fn sampler_is_standard_normal() {
    let mut samples = draw(
        &mut ChaChaNoise::from_seed(seed(1)).unwrap(),
        1_000_000 * scale(),
    );
    let v = audit_sampler(&mut samples);
    assert!(
        v.passes(sampler_threshold()),
        "mean z {:.2}, variance z {:.2}, KS {:.2e} (critical {:.2e}), |x|>4: {} in {:?}",
        v.mean_z,
        v.variance_z,
        v.ks_statistic,
        v.ks_critical,
        v.tail_count,
        v.tail_interval
    );
}

/// Mutants of the sampler: a 2% narrower deviation, and tails truncated at 3.5σ.
#[test]
fn sampler_audit_catches_mutants() {
    let base = draw(&mut ChaChaNoise::from_seed(seed(2)).unwrap(), 1_000_000);
    let mut narrow: Vec<f64> = base.iter().map(|x| 0.98 * x).collect();
    assert!(!audit_sampler(&mut narrow).passes(sampler_threshold()));
    let mut truncated: Vec<f64> = base.iter().map(|x| x.clamp(-3.5, 3.5)).collect();
    assert!(!audit_sampler(&mut truncated).passes(sampler_threshold()));
}

// ---------------------------------------------------------------------------------------------
// 2. Correlated noise: whitened with B̂⁻¹, the released noise must be N(0, σ²ζ²sens²·I).

const STEPS: usize = 64;

/// A compiled prefix-sum blob for `steps` steps, compressed to `(band, rank)`, calibrated at `sigma`.
fn prefix_blob(steps: usize, band: usize, rank: usize, sigma: f64) -> Vec<u8> {
    let a = Workload::PrefixSum.matrix(steps).unwrap();
    let compiled = compile_banded(
        a.as_ref(),
        band,
        rank,
        &OptimizeOptions::default(),
        &CompressOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    let options = BlobOptions {
        clip_norm: 1.0,
        calibration: Some(Calibration {
            noise_multiplier: sigma,
            target: None,
        }),
        ..BlobOptions::default()
    };
    mfc_compiler::forms::banded::encode(&compiled, &Workload::PrefixSum, &options)
        .unwrap()
        .bytes
}

fn compiled_blob() -> Vec<u8> {
    prefix_blob(STEPS, 4, 4, 1.0)
}

fn banded<'a>(m: &Mechanism<'a>) -> mfc_formats::BandedLowRank<'a> {
    match m.decoder {
        Decoder::BandedLowRank(b) => b,
        _ => unreachable!(),
    }
}

/// Dense B̂ from the blob's tables.
fn dense_decoder(m: &Mechanism<'_>) -> Vec<Vec<f64>> {
    let d = banded(m);
    let (n, h, r) = (m.steps() as usize, d.band as usize, d.rank as usize);
    let at = |t: F32Table<'_>, i: usize| f64::from(t.get(i).unwrap());
    (0..n)
        .map(|i: usize| {
            (0..n)
                .map(|j| match i.checked_sub(j) {
                    Some(k) if k < h => at(d.diagonals, i * h + k),
                    Some(_) => (0..r)
                        .map(|q| at(d.left, i * r + q) * at(d.right, j * r + q))
                        .sum(),
                    None => 0.0,
                })
                .collect()
        })
        .collect()
}

/// Solves B̂ w = y in place (forward substitution).
fn whiten(b: &[Vec<f64>], y: &mut [f64]) {
    for i in 0..y.len() {
        let s: f64 = (0..i).map(|k| b[i][k] * y[k]).sum();
        y[i] = (y[i] - s) / b[i][i];
    }
}

/// A noise source that hands out step t−1's row again at odd steps: reused noise.
struct ReusingNoise(ChaChaNoise);

impl NoiseSource for ReusingNoise {
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
        self.0.fill_standard_normal(step & !1, offset, out);
    }
}

/// Releases of `STEPS` steps with zero input, `dim` independent coordinates, from `blob` with
/// noise multiplier `sigma`, whitened with the decoder and scale of `reference` (what the
/// mechanism claims): returns w[step][coordinate].
fn whitened_releases(
    blob: &[u8],
    reference: &[u8],
    sigma: f64,
    noise: impl NoiseSource,
    dim: usize,
) -> Vec<Vec<f64>> {
    let m = Mechanism::from_bytes(blob).unwrap();
    let claimed = Mechanism::from_bytes(reference).unwrap();
    let b = dense_decoder(&claimed);
    let claimed_scale = claimed.noise_stddev().unwrap();
    let mut workspace = vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&m, dim).unwrap()];
    let mut stream = Stream::with_noise_multiplier(m, dim, &mut workspace, noise, sigma).unwrap();
    let zeros = vec![0.0f32; dim];
    let mut out = vec![0.0f32; dim];
    let mut y = vec![vec![0.0f64; STEPS]; dim];
    for i in 0..STEPS {
        stream.step(&zeros, &mut out).unwrap();
        for c in 0..dim {
            y[c][i] = f64::from(out[c]) / claimed_scale;
        }
    }
    for col in &mut y {
        whiten(&b, col);
    }
    y
}

/// Four tests of `Cov(w) = I` sharing α = 1e-6 (Bonferroni): the Gaussian likelihood-ratio
/// statistic `N(tr S − ln det S − p)` against its χ² law with p(p+1)/2 degrees of freedom, the
/// trace, the largest standardized variance deviation, and the largest standardized covariance.
fn covariance_is_identity(w: &[Vec<f64>]) -> Result<(), String> {
    let (runs, p) = (w.len() as f64, w[0].len());
    let mut s = vec![vec![0.0f64; p]; p];
    for run in w {
        for i in 0..p {
            for j in 0..=i {
                s[i][j] += run[i] * run[j] / runs;
            }
        }
    }
    let alpha = 1e-6 / 4.0;
    // ln det S by Cholesky.
    let mut l = vec![vec![0.0f64; p]; p];
    let mut log_det = 0.0;
    for i in 0..p {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = s[i][i] - dot;
                if d <= 0.0 {
                    return Err("sample covariance is singular".into());
                }
                l[i][i] = d.sqrt();
                log_det += d.ln();
            } else {
                l[i][j] = (s[i][j] - dot) / l[j][j];
            }
        }
    }
    let trace: f64 = (0..p).map(|i| s[i][i]).sum();
    let lr = runs * (trace - log_det - p as f64);
    let dof = (p * (p + 1) / 2) as f64;
    // Wilson–Hilferty: (X/k)^(1/3) ≈ N(1 − 2/(9k), 2/(9k)).
    let z_lr = ((lr / dof).cbrt() - (1.0 - 2.0 / (9.0 * dof))) / (2.0 / (9.0 * dof)).sqrt();
    let z_one_sided = normal_quantile_upper(alpha);
    let z_two_sided = normal_quantile_upper(alpha / 2.0);
    if z_lr > z_one_sided {
        return Err(format!(
            "likelihood ratio {lr:.1} (z = {z_lr:.2}) for {dof} dof"
        ));
    }
    let z_trace = (trace / p as f64 - 1.0) / (2.0 / (runs * p as f64)).sqrt();
    if z_trace.abs() > z_two_sided {
        return Err(format!(
            "mean variance {:.4} (z = {z_trace:.2})",
            trace / p as f64
        ));
    }
    let z_var = normal_quantile_upper(alpha / (2.0 * p as f64));
    for i in 0..p {
        let z = (s[i][i] - 1.0) / (2.0 / runs).sqrt();
        if z.abs() > z_var {
            return Err(format!(
                "variance of step {i} is {:.4} (z = {z:.2})",
                s[i][i]
            ));
        }
    }
    let z_cov = normal_quantile_upper(alpha / (p * (p - 1)) as f64);
    for i in 0..p {
        for j in 0..i {
            let z = s[i][j] * runs.sqrt();
            if z.abs() > z_cov {
                return Err(format!(
                    "covariance of steps ({i}, {j}) is {:.4} (z = {z:.2})",
                    s[i][j]
                ));
            }
        }
    }
    Ok(())
}

fn runs() -> usize {
    10_000 * scale()
}

#[test]
fn whitened_noise_is_white() {
    let blob = compiled_blob();
    let noise = ChaChaNoise::from_seed(seed(3)).unwrap();
    let w = whitened_releases(&blob, &blob, 1.0, noise, runs());
    covariance_is_identity(&w).unwrap();
}

#[test]
fn whitening_catches_a_smaller_sigma() {
    let blob = compiled_blob();
    let noise = ChaChaNoise::from_seed(seed(4)).unwrap();
    let w = whitened_releases(&blob, &blob, 0.98, noise, runs());
    assert!(covariance_is_identity(&w).is_err());
}

/// The mutant shrinks the largest coefficient (step 0's diagonal) by 5%: step 0's whitened
/// variance is `0.95² = 0.9025`, a standard score of `−0.0975/√(2/runs)`. At `runs()` = 10⁴ that
/// is −6.9 against the threshold 5.9, so the detector often misses it (6 of 20 seeds in a trial):
/// a pass depended on the seed. At 4·10⁴ runs it is −13.8, about 9 standard deviations past the
/// threshold.
#[test]
fn whitening_catches_one_decoder_coefficient_off_by_5_percent() {
    let blob = compiled_blob();
    let m = Mechanism::from_bytes(&blob).unwrap();
    let d = banded(&m);
    // The largest coefficient of the band, 5% smaller.
    let mut diagonals: Vec<f32> = d.diagonals.iter().collect();
    let (at, _) = diagonals
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .unwrap();
    diagonals[at] *= 0.95;
    let bytes = encode_f32s(diagonals);
    let mut mutant = m.into_inner();
    mutant.decoder = Decoder::BandedLowRank(mfc_formats::BandedLowRank {
        diagonals: F32Table::new(&bytes).unwrap(),
        ..d
    });
    let mutant_blob = mutant.to_vec().unwrap();
    let noise = ChaChaNoise::from_seed(seed(5)).unwrap();
    let w = whitened_releases(&mutant_blob, &blob, 1.0, noise, 4 * runs());
    assert!(covariance_is_identity(&w).is_err());
}

#[test]
fn whitening_catches_reused_noise_rows() {
    let blob = compiled_blob();
    let noise = ReusingNoise(ChaChaNoise::from_seed(seed(6)).unwrap());
    let w = whitened_releases(&blob, &blob, 1.0, noise, runs());
    assert!(covariance_is_identity(&w).is_err());
}

// ---------------------------------------------------------------------------------------------
// 3. Likelihood-ratio audit: neighbouring streams that differ at the worst-case step.

const AUDIT_STEPS: usize = 16;
const AUDIT_SIGMA: f64 = 1.0;

/// For `runs` independent d = 1 streams per side, the optimal test statistic T = ⟨u, w⟩ with
/// w the release whitened with the *claimed* decoder and scale, and u the unit direction of the
/// worst column of Ĉ = B̂⁻¹A, under the data x = 0 and under x' = ζ·e_j*. Returns the separation
/// (mean T' − mean T)/sd and its standard error. For a correct mechanism with multiplier σ the
/// two laws are N(0, 1) and N(1/σ, 1): the separation is 1/σ, whatever B̂ is.
fn likelihood_ratio_separation(blob: &[u8], claimed: &[u8], sigma: f64, runs: usize) -> (f64, f64) {
    let m = Mechanism::from_bytes(blob).unwrap();
    let c_m = Mechanism::from_bytes(claimed).unwrap();
    let b = dense_decoder(&c_m);
    let n = AUDIT_STEPS;
    let zeta = c_m.header.clip_norm;
    let claimed_scale = c_m.noise_stddev().unwrap();
    // Worst column of Ĉ = B̂⁻¹ S (prefix sum): solve B̂ c = S e_j for each j.
    let (worst, column) = (0..n)
        .map(|j| {
            let mut col: Vec<f64> = (0..n).map(|i| f64::from(u8::from(i >= j))).collect();
            whiten(&b, &mut col);
            (j, col)
        })
        .max_by(|a, b| {
            let na: f64 = a.1.iter().map(|x| x * x).sum();
            let nb: f64 = b.1.iter().map(|x| x * x).sum();
            na.total_cmp(&nb)
        })
        .unwrap();
    let norm = column.iter().map(|x| x * x).sum::<f64>().sqrt();
    let u: Vec<f64> = column.iter().map(|x| x / norm).collect();
    let mut stats = [Vec::with_capacity(runs), Vec::with_capacity(runs)];
    let mut workspace = vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&m, 1).unwrap()];
    for run in 0..runs {
        for (side, stat) in stats.iter_mut().enumerate() {
            let noise = ChaChaNoise::from_seed(seed(1_000_000 + (2 * run + side) as u64)).unwrap();
            let mut stream =
                Stream::with_noise_multiplier(m, 1, &mut workspace, noise, sigma).unwrap();
            let mut y = vec![0.0f64; n];
            for (i, yi) in y.iter_mut().enumerate() {
                // The neighbour contributes at the worst step; 10ζ is clipped to ζ by the runtime.
                let x = if side == 1 && i == worst {
                    10.0 * zeta as f32
                } else {
                    0.0
                };
                let mut out = [0.0f32];
                stream.step(&[x], &mut out).unwrap();
                *yi = f64::from(out[0]) / claimed_scale;
            }
            whiten(&b, &mut y);
            stat.push(u.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>());
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var =
        |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0);
    let (m0, m1) = (mean(&stats[0]), mean(&stats[1]));
    let sd = (0.5 * (var(&stats[0], m0) + var(&stats[1], m1))).sqrt();
    let separation = (m1 - m0) / sd;
    let runs = runs as f64;
    let standard_error = (2.0 / runs + separation * separation / (4.0 * runs)).sqrt();
    (separation, standard_error)
}

fn audit_runs() -> usize {
    100_000 * scale()
}

fn audit_blob() -> Vec<u8> {
    prefix_blob(AUDIT_STEPS, 2, 2, AUDIT_SIGMA)
}

#[test]
fn likelihood_ratio_separation_is_at_most_one_over_sigma() {
    let blob = audit_blob();
    let (sep, se) = likelihood_ratio_separation(&blob, &blob, AUDIT_SIGMA, audit_runs());
    assert!(
        sep <= 1.0 / AUDIT_SIGMA + 4.5 * se,
        "separation {sep:.4} ± {se:.4}"
    );
    // and the audit has power: it sees the mechanism's real separation.
    assert!(
        sep >= 1.0 / AUDIT_SIGMA - 4.5 * se,
        "separation {sep:.4} ± {se:.4}"
    );
}

#[test]
fn likelihood_ratio_audit_catches_a_smaller_sigma() {
    let blob = audit_blob();
    let (sep, se) = likelihood_ratio_separation(&blob, &blob, 0.95 * AUDIT_SIGMA, audit_runs());
    assert!(
        sep > 1.0 / AUDIT_SIGMA + 4.5 * se,
        "separation {sep:.4} ± {se:.4}"
    );
}

#[test]
fn likelihood_ratio_audit_catches_an_understated_sensitivity() {
    let blob = audit_blob();
    let mut m = Mechanism::from_bytes(&blob).unwrap().into_inner();
    m.header.sensitivity.value *= 0.95;
    let mutant = m.to_vec().unwrap();
    let (sep, se) = likelihood_ratio_separation(&mutant, &blob, AUDIT_SIGMA, audit_runs());
    assert!(
        sep > 1.0 / AUDIT_SIGMA + 4.5 * se,
        "separation {sep:.4} ± {se:.4}"
    );
}
