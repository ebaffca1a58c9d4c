//! The acceptance table of issue 32 (max error): the certified dense optimum `γ₂` beside the
//! square-root factorization, the shipped `(h, r)` form, BLTs finite and unbounded, BandMF and
//! FFT, every figure recomputed from the stored coefficients.
//!
//! Run: `cargo bench -p mfc-compiler --bench max_error -- dense 256 1024`.

use std::time::Instant;

use mfc_compiler::max_error::dense::{MaxErrorOptions, optimize_max_error};
use mfc_compiler::optimize::toeplitz::{square_root_coefficients, toeplitz_error};
use mfc_compiler::workload::Workload;

/// User plus system CPU seconds of this process so far (all threads), from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 1/100 s, Linux's `USER_HZ`); `NaN` elsewhere.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 2..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(f64::NAN)
}

fn dense(sizes: &[usize]) {
    println!(
        "| n | max error (primal) | dual bound | rel. gap | iterations | square root | gap to √ | seconds | CPU s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        let a = Workload::PrefixSum.matrix(n).expect("prefix");
        let (start, cpu) = (Instant::now(), cpu_seconds());
        let o = optimize_max_error(a.as_ref(), &MaxErrorOptions::default(), &mut |p| {
            eprintln!(
                "  n = {n}, iteration {}: primal {:.6} (product bound {:.6}), dual {:.6}, gap {:.2e} at {:.1} s",
                p.iteration,
                p.primal,
                p.product_bound,
                p.dual,
                p.relative_gap,
                start.elapsed().as_secs_f64()
            )
        })
        .expect("optimum");
        let (seconds, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
        let sqrt = toeplitz_error(&square_root_coefficients(n), n);
        let sqrt_max = sqrt.per_step_variance[n - 1].sqrt();
        println!(
            "| {n} | {:.6} | {:.6} | {:.1e} | {} | {sqrt_max:.6} | {:+.2}% | {seconds:.1} | {cpu:.1} |",
            o.max_error,
            o.dual_bound,
            o.relative_gap,
            o.iterations,
            100.0 * (sqrt_max / o.max_error - 1.0)
        );
    }
}

fn timing(sizes: &[usize]) {
    use faer::{Mat, Side};
    for &n in sizes {
        let m = Mat::from_fn(n, n, |i, j| {
            if j <= i {
                1.0 / (1.0 + ((i * 7 + j * 3) % 11) as f64)
            } else {
                0.0
            }
        });
        let t = Instant::now();
        let k = m.transpose() * &m;
        let t_mul = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _e = k.self_adjoint_eigen(Side::Lower).unwrap();
        let t_eig = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _s = m.thin_svd().unwrap();
        let t_svd = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _v = m.singular_values().unwrap();
        let t_sv = t.elapsed().as_secs_f64();
        println!(
            "n = {n}: matmul {t_mul:.2} s, eig {t_eig:.2} s, svd {t_svd:.2} s, singular values {t_sv:.2} s"
        );
    }
}

fn warm(sizes: &[usize]) {
    let mut previous: Option<(Vec<f64>, Vec<f64>)> = None;
    for &n in sizes {
        let a = Workload::PrefixSum.matrix(n).expect("prefix");
        let start = previous.as_ref().map(|(w, u)| {
            (
                mfc_compiler::max_error::dense::interpolate_weights(w, n),
                mfc_compiler::max_error::dense::interpolate_weights(u, n),
            )
        });
        let t = Instant::now();
        let o = optimize_max_error(
            a.as_ref(),
            &MaxErrorOptions {
                start,
                ..Default::default()
            },
            &mut |p| {
                eprintln!(
                    "  n = {n} it {} gap {:.2e} product {:.6} dual {:.6} at {:.1}",
                    p.iteration,
                    p.relative_gap,
                    p.product_bound,
                    p.dual,
                    t.elapsed().as_secs_f64()
                )
            },
        )
        .unwrap();
        println!(
            "n = {n} warm: {} iterations, {:.6} / {:.6}, {:.1} s",
            o.iterations,
            o.max_error,
            o.dual_bound,
            t.elapsed().as_secs_f64()
        );
        previous = Some((o.row_weights, o.column_weights));
    }
}

fn depth(sizes: &[usize]) {
    for &n in sizes {
        let a = Workload::PrefixSum.matrix(n).expect("prefix");
        for h in [0, 2, 5, 8, 12, 20] {
            let o = optimize_max_error(
                a.as_ref(),
                &MaxErrorOptions {
                    anderson_history: h,
                    max_iterations: 2000,
                    ..Default::default()
                },
                &mut |_| {},
            )
            .unwrap();
            println!("n = {n}, depth {h}: {} iterations", o.iterations);
        }
    }
}

fn blt(sizes: &[usize]) {
    use mfc_compiler::max_error::blt::{
        BltHorizon, compile_max_error_blt, optimize_blt_max_error_family,
    };
    use mfc_compiler::privacy::participation::Participation;
    let n = sizes.first().copied().unwrap_or(2048);
    for horizon in [BltHorizon::Finite, BltHorizon::Unbounded] {
        let t = Instant::now();
        let family =
            optimize_blt_max_error_family(n, 5, &Participation::Single, horizon, &mut |m| {
                eprintln!("  m = {m} at {:.1} s", t.elapsed().as_secs_f64())
            })
            .unwrap();
        for (m, b) in family.iter().enumerate() {
            let c = compile_max_error_blt(b, n, &Participation::Single, horizon).unwrap();
            println!(
                "{horizon:?} m = {}: max error {:.6}, sens {:.6}, growth {:?}, {:?}",
                m + 1,
                c.max_error,
                c.compiled.sensitivity,
                c.limit_growth_rate,
                b
            );
        }
    }
}

fn banded(sizes: &[usize]) {
    use mfc_compiler::max_error::banded_low_rank::BandedMaxErrorOptions;
    for &n in sizes {
        let (h, r) = match n {
            256 => (4, 4),
            512 => (5, 4),
            1024 => (5, 5),
            2048 => (6, 5),
            _ => (7, 5),
        };
        let a = Workload::PrefixSum.matrix(n).expect("prefix");
        let optimum = mfc_compiler::max_error::dense::optimize_max_error(
            a.as_ref(),
            &MaxErrorOptions::default(),
            &mut |_| {},
        )
        .unwrap();
        for (iterations, exponents) in [
            (100, vec![256.0]),
            (300, vec![256.0]),
            (300, vec![32.0, 128.0, 512.0]),
            (300, vec![16.0, 64.0, 256.0, 1024.0]),
        ] {
            let mut options = BandedMaxErrorOptions::default();
            options.compression.refine_iterations = iterations;
            options.exponents = exponents.clone();
            println!("{iterations} {exponents:?}");
            let (start, cpu) = (Instant::now(), cpu_seconds());
            let c = mfc_compiler::max_error::banded_low_rank::compile_banded_max_error_from(
                a.as_ref(),
                optimum.clone(),
                h,
                r,
                &options,
            )
            .unwrap();
            println!(
                "n = {n} ({h}, {r}): optimum {:.6} (dual {:.6}), stages {:?}, shipped {:.6} ({:+.3}%), sens {:.9}, {:.1} s, {:.1} CPU s",
                c.optimum.max_error,
                c.optimum.dual_bound,
                c.stages,
                c.measured.max_error,
                100.0 * (c.measured.max_error / c.optimum.max_error - 1.0),
                c.measured.sensitivity,
                start.elapsed().as_secs_f64(),
                cpu_seconds() - cpu
            );
        }
    }
}

fn minsep() {
    use mfc_compiler::forms::bandmf::{BandMfKind, Bands};
    use mfc_compiler::max_error::bandmf::{BandMfMaxErrorOptions, compile_bandmf_max_error};
    use mfc_compiler::max_error::blt::{
        BltHorizon, compile_max_error_blt, optimize_blt_max_error_family,
    };
    use mfc_compiler::privacy::participation::Participation;
    let n = 512;
    let p = Participation::min_separation(4, 128).unwrap();
    for kind in [BandMfKind::Toeplitz, BandMfKind::General] {
        let t = Instant::now();
        let c = compile_bandmf_max_error(
            &Workload::PrefixSum,
            n,
            &BandMfMaxErrorOptions {
                participation: p,
                kind,
                bands: Bands::Fixed(128),
                ..Default::default()
            },
        )
        .unwrap();
        println!(
            "{kind:?}: max error {:.9} (toeplitz start {:?}), sens {:.9}, {:.1} s",
            c.max_error,
            c.toeplitz_max_error,
            c.compiled.sensitivity,
            t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    let family = optimize_blt_max_error_family(n, 5, &p, BltHorizon::Finite, &mut |m| {
        eprintln!("  m = {m} at {:.1}", t.elapsed().as_secs_f64())
    })
    .unwrap();
    for (m, b) in family.iter().enumerate() {
        let c = compile_max_error_blt(b, n, &p, BltHorizon::Finite).unwrap();
        println!(
            "BLT m = {}: {:.9} ({:?})",
            m + 1,
            c.max_error,
            c.compiled.sensitivity_method
        );
    }
}

fn jaxcheck() {
    use mfc_compiler::max_error::blt::{BltHorizon, compile_max_error_blt};
    use mfc_compiler::optimize::blt::Blt;
    use mfc_compiler::privacy::participation::Participation;
    let p = Participation::min_separation(4, 128).unwrap();
    let blt = Blt {
        theta: vec![
            0.99872561417085393,
            0.90281444789071474,
            0.28129374027221421,
        ],
        omega: vec![
            -9.7990785920534884e-05,
            -0.027368238564182829,
            -0.4610495407985602,
        ],
    };
    let c = compile_max_error_blt(&blt, 512, &p, BltHorizon::Finite);
    println!(
        "jax m=3 rounded: {:?}",
        c.map(|c| (c.max_error, c.compiled.sensitivity_method, c.compiled.blt))
    );
    let e = blt.error(512, &p);
    println!("jax m=3 f64: {}", (e.per_step_variance[511]).sqrt());
    println!(
        "polish from jax: {:?}",
        mfc_compiler::max_error::blt::polish_from(&blt, 512, &p, BltHorizon::Finite)
    );
    let family = mfc_compiler::max_error::blt::optimize_blt_max_error_family(
        512,
        3,
        &p,
        BltHorizon::Finite,
        &mut |_| {},
    )
    .unwrap();
    println!("ours m=3: {:?}", family[2]);
    for scale in [0.5, 2.0] {
        let mut b = family[2].clone();
        b.theta[0] = 1.0 - (1.0 - b.theta[0]) * scale;
        println!(
            "perturbed {scale}: {:?}",
            mfc_compiler::max_error::blt::polish_from(&b, 512, &p, BltHorizon::Finite)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let section = args
        .iter()
        .find(|a| a.parse::<usize>().is_err())
        .map(String::as_str);
    match section {
        Some("dense") | None => dense(if sizes.is_empty() {
            &[256, 1024]
        } else {
            &sizes
        }),
        Some("timing") => timing(&sizes),
        Some("depth") => depth(&sizes),
        Some("warm") => warm(&sizes),
        Some("blt") => blt(&sizes),
        Some("banded") => banded(&sizes),
        Some("minsep") => minsep(),
        Some("jaxcheck") => jaxcheck(),
        Some(other) => eprintln!("unknown section {other}"),
    }
}
