//! A telemetry counter that never stops, compiled for continual counting's own objective: the
//! **max error**, the largest standard deviation of any released count (issue 32).
//!
//! A device counts `d = 4096` event types (a histogram) and releases every running count at every
//! step, forever. Two blobs of the same form — a BLT with 4 buffers, `(4 + 2)·d` floats of state,
//! designed for `n = 1024` steps, with a sensitivity bound that holds for every horizon
//! (`--horizon unbounded`) — differ only in their objective: `mfc compile --objective total`
//! (the default) and `--objective max`. Both are calibrated to (ε, δ) = (1, 10⁻⁶) for one event
//! of one device under single participation (each event in one step), add/remove neighbours.
//!
//! For both, the example streams `T = 8n` steps through the runtime (`Replay`, the device's code)
//! and checks that the empirical standard deviation of the released counts over the `d`
//! coordinates equals, at every 64th step, `σζ·sens·‖B̂[t,:]‖` computed from the blob's stored
//! `f32` parameters (the runtime's noise covariance), within 6% (5.4 standard errors of a χ²
//! with 4096 degrees of freedom). It then checks the objective's promise — over the design
//! horizon the max-error blob's largest per-step error is below the total blob's — prints both
//! metrics of both blobs, and draws the error of both against `t` to an SVG
//! (`examples/figures/telemetry-max-error.svg` is this example's output).
//!
//! Run: `cargo run --release -p mfc-examples --example telemetry_max_error [-- OUT.svg]`

use mfc_compiler::compile::compile;
use mfc_compiler::max_error::Objective;
use mfc_compiler::optimize::blt::Blt;
use mfc_compiler::request::{FormKind, Horizon, Options};
use mfc_formats::{Decoder, Mechanism};
use mfc_runtime::{ChaChaNoise, Replay};

const DESIGN_STEPS: usize = 1024;
const STEPS: usize = 8 * DESIGN_STEPS;
const COUNTERS: usize = 4096;

/// One blob, its stored parameters and what the example measured of it.
struct Counter {
    objective: Objective,
    bytes: Vec<u8>,
    /// `σζ·sens·‖B̂[t,:]‖` for `t < STEPS`, from the stored parameters.
    predicted: Vec<f64>,
    /// `(t, empirical stddev over the d counters)` every 64th step.
    measured: Vec<(usize, f64)>,
    sqrt_loss: f64,
}

fn compiled(objective: Objective) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let request = Options {
        steps: Some(DESIGN_STEPS),
        form: Some(FormKind::Blt),
        buffers: Some(4),
        horizon: Some(Horizon::Unbounded),
        objective: Some(objective),
        epsilon: Some(1.0),
        delta: Some(1e-6),
        ..Options::default()
    }
    .request()?;
    Ok(compile(&request, &mut |_| {})?.blob)
}

/// `σζ·sens·‖B̂[t,:]‖` for `t < steps`: `B̂ = S·T(r)` with `r` the decoder series of the stored
/// `f32` parameters, so `‖B̂[t,:]‖² = Σ_{k≤t} b_k²`, `b_k = Σ_{j≤k} r_j`.
fn predicted(mechanism: &Mechanism<'_>, steps: usize) -> Result<Vec<f64>, String> {
    let Decoder::Blt(stored) = &mechanism.decoder else {
        return Err("not a BLT blob".into());
    };
    let blt = Blt {
        theta: stored.theta.iter().map(f64::from).collect(),
        omega: stored.omega.iter().map(f64::from).collect(),
    };
    let header = &mechanism.header;
    let sigma = header
        .calibration
        .ok_or("the blob is not calibrated")?
        .noise_multiplier;
    let scale = sigma * header.clip_norm * header.sensitivity.value;
    let (mut b, mut row2) = (0.0, 0.0);
    Ok(blt
        .decoder_coefficients(steps)
        .into_iter()
        .map(|r| {
            b += r;
            row2 += b * b;
            scale * f64::sqrt(row2)
        })
        .collect())
}

fn run(objective: Objective) -> Result<Counter, Box<dyn std::error::Error>> {
    let bytes = compiled(objective)?;
    let mechanism = Mechanism::from_bytes(&bytes)?;
    let predicted = predicted(&mechanism, STEPS)?;
    let sqrt_loss = predicted[..DESIGN_STEPS]
        .iter()
        .map(|s| s * s)
        .sum::<f64>()
        .sqrt();
    let mut workspace = vec![0.0f32; Replay::workspace_len(&mechanism, COUNTERS)?];
    let mut stream = Replay::open(
        mechanism,
        COUNTERS,
        &mut workspace,
        ChaChaNoise::from_seed(*b"telemetry counter example seed!!")?,
    )?;
    // No events: every release is the noise of the running counts.
    let (events, mut release) = (vec![0.0f32; COUNTERS], vec![0.0f32; COUNTERS]);
    let mut measured = Vec::new();
    for (t, &expected) in predicted.iter().enumerate() {
        stream.step(&events, &mut release)?;
        if t % 64 == 63 {
            let variance =
                release.iter().map(|&r| f64::from(r).powi(2)).sum::<f64>() / COUNTERS as f64;
            let empirical = variance.sqrt();
            if (empirical / expected - 1.0).abs() > 0.06 {
                return Err(format!(
                    "{}: step {t}: the released counts have stddev {empirical:.4}, the blob's \
                     parameters predict {expected:.4}",
                    objective.name()
                )
                .into());
            }
            measured.push((t, empirical));
        }
    }
    Ok(Counter {
        objective,
        bytes,
        predicted,
        measured,
        sqrt_loss,
    })
}

/// The two curves (predicted, solid) with the measured points, `t` on a log axis.
fn svg(counters: &[Counter]) -> String {
    let (width, height, left, bottom, top, right) = (760.0, 440.0, 70.0, 50.0, 40.0, 20.0);
    let ymax = counters
        .iter()
        .flat_map(|c| c.predicted.iter().copied())
        .fold(0.0, f64::max)
        * 1.05;
    let x = |t: usize| left + (width - left - right) * ((t + 1) as f64).ln() / (STEPS as f64).ln();
    let y = |s: f64| height - bottom - (height - bottom - top) * s / ymax;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">A \
         counter that never stops: BLT, 4 buffers, n = {DESIGN_STEPS}, (ε, δ) = (1, 1e-6)</text>\n",
        width / 2.0
    );
    out.push_str(&format!(
        "<line x1=\"{left}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"black\"/>\n<line \
         x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{0}\" stroke=\"black\"/>\n",
        height - bottom,
        width - right
    ));
    for t in [1, 10, 100, 1000, DESIGN_STEPS, STEPS] {
        out.push_str(&format!(
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#ddd\"/>\n<text \
             x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{t}</text>\n",
            x(t - 1),
            height - bottom,
            height - bottom + 18.0
        ));
    }
    for k in 0..=4 {
        let s = ymax * f64::from(k) / 4.0;
        out.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{s:.0}</text>\n",
            left - 6.0,
            y(s) + 4.0
        ));
    }
    out.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step t (log scale; the design horizon \
         n = {DESIGN_STEPS} marked)</text>\n<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 \
         {})\" text-anchor=\"middle\">stddev of every released count (units of ζ)</text>\n",
        (left + width - right) / 2.0,
        height - 10.0,
        height / 2.0,
        height / 2.0
    ));
    for (c, color) in counters.iter().zip(["#1f77b4", "#d62728"]) {
        let points: Vec<String> = c
            .predicted
            .iter()
            .enumerate()
            .map(|(t, &s)| format!("{:.1},{:.1}", x(t), y(s)))
            .collect();
        out.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n",
            points.join(" ")
        ));
        for &(t, s) in &c.measured {
            out.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{color}\"/>\n",
                x(t),
                y(s)
            ));
        }
    }
    for (k, (c, color)) in counters.iter().zip(["#1f77b4", "#d62728"]).enumerate() {
        let max = c.predicted[..DESIGN_STEPS]
            .iter()
            .copied()
            .fold(0.0, f64::max);
        out.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" fill=\"{color}\">--objective {}: max over n {max:.2}, \
             √L {:.1}; dots: measured on the runtime, d = {COUNTERS}</text>\n",
            left + 12.0,
            top + 18.0 + 18.0 * k as f64,
            c.objective.name(),
            c.sqrt_loss
        ));
    }
    out.push_str("</svg>\n");
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/telemetry-max-error.svg".into());
    let counters = [run(Objective::Total)?, run(Objective::Max)?];
    println!(
        "A counter of {COUNTERS} events that never stops: BLT, 4 buffers, designed for n = \
         {DESIGN_STEPS}, sensitivity for every horizon; (ε, δ) = (1, 1e-6) for one event of one \
         device (single participation, add/remove). Stddev of a released count, units of ζ:\n"
    );
    println!(
        "| objective | blob bytes | max over t ≤ n | √L over n | t = 2n | t = 4n | t = 8n | worst ∣measured/predicted − 1∣ |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for c in &counters {
        let worst = c
            .measured
            .iter()
            .map(|&(t, s)| (s / c.predicted[t] - 1.0).abs())
            .fold(0.0, f64::max);
        println!(
            "| {} | {} | {:.4} | {:.2} | {:.4} | {:.4} | {:.4} | {worst:.4} |",
            c.objective.name(),
            c.bytes.len(),
            c.predicted[..DESIGN_STEPS]
                .iter()
                .copied()
                .fold(0.0, f64::max),
            c.sqrt_loss,
            c.predicted[2 * DESIGN_STEPS - 1],
            c.predicted[4 * DESIGN_STEPS - 1],
            c.predicted[STEPS - 1],
        );
    }
    let max_of = |c: &Counter| {
        c.predicted[..DESIGN_STEPS]
            .iter()
            .copied()
            .fold(0.0, f64::max)
    };
    let (total, max) = (max_of(&counters[0]), max_of(&counters[1]));
    if max >= total {
        return Err(format!(
            "the max-error blob's largest per-step error {max} is not below the total blob's {total}"
        )
        .into());
    }
    if counters[1].sqrt_loss < counters[0].sqrt_loss {
        return Err("the total blob does not have the smaller √L".into());
    }
    println!(
        "\nOver the design horizon the max-error blob's worst count is {:.2}% below the total \
         blob's; its √L is {:.2}% above.",
        100.0 * (1.0 - max / total),
        100.0 * (counters[1].sqrt_loss / counters[0].sqrt_loss - 1.0)
    );
    std::fs::write(&out, svg(&counters))?;
    println!("SVG: {out}");
    Ok(())
}
