//! DP-FTRL-style training on a small synthetic problem, with the unit of privacy stated: **a
//! record is one training example**, and the printed `(ε, δ)` is for adding or removing one
//! example under the participation schema the data loader actually follows.
//!
//! The model is linear regression in d = 20 dimensions on 2 048 examples. Each of the 256 steps
//! takes a minibatch of 32 examples in a fixed order repeated every epoch (64 steps), so each
//! example takes part in exactly 4 steps, exactly 64 apart: **fixed epoch order `(k, b) = (4,
//! 64)`** (Choquette-Choo et al. 2023). Every mechanism below is calibrated for `(ε, δ) = (4,
//! 10⁻⁵)` with its sensitivity computed for that schema, and each example's gradient is clipped to
//! `ζ = 1` by itself, so removing one example moves each of its 4 steps' rows by at most `ζ`.
//! (Full-batch training, every example in every step, would be `k = 256` participations at least
//! 1 apart — the schema an earlier version of this example left unstated.)
//!
//! Part 1 — the same clipped minibatch sums and the same privacy, three ways of adding the noise
//! to SGD with momentum (β = 0.9): the optimal factorization of the momentum workload `M` for
//! `(4, 64)`, shipped as an `(h, r) = (4, 4)` blob and replayed by the runtime (`step_noise`);
//! the tree (Honaker online estimator) post-processed into momentum (003 Table 1); independent
//! noise per step (`C = I`). The iterates are `θ_t = −(η/B)·((M G)_t + σ·sens·(B Z)_t)`.
//!
//! Part 2 — per-example clipping in the runtime against whole-row clipping, at equal privacy: a
//! prefix-sum blob for `(4, 64)` replayed by the runtime, DP-FTRL without momentum (`θ_t =
//! −(η/B)·released prefix sum`). `step_examples` clips each example to ζ inside the runtime and
//! sums; `step` clips the step's whole row (the sum of the 32 examples, each first clipped by the
//! caller) to ζ. Both are private for the same `(ε, δ)` — one example moves the row by at most ζ
//! either way — but the whole-row clip scales the batch's sum down to norm ζ.
//!
//! Run: `cargo run --release -p mfc-examples --example dp_ftrl`

use faer::Mat;
use mfc_compiler::compare::tree::Tree;
use mfc_compiler::forms::banded::{CompileOptions, compile};
use mfc_compiler::optimize::optimum::OptimumOptions;
use mfc_compiler::privacy::calibrate::noise_multiplier_for;
use mfc_compiler::privacy::participation::{Participation, sensitivity};
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::{Schedule, Workload};
use mfc_formats::{Calibration, Mechanism, PrivacyTarget};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{ChaChaNoise, Stream, clip_to_norm};

const STEPS: usize = 256;
const DIM: usize = 20;
const EXAMPLES: usize = 2048;
const BATCH: usize = 32;
/// Steps per epoch: every example once.
const EPOCH: usize = EXAMPLES / BATCH;
const MOMENTUM: f64 = 0.9;
const SEEDS: u8 = 5;

/// A fixed regression problem: targets from a planted θ* plus noise.
struct Problem {
    features: Vec<[f32; DIM]>,
    targets: Vec<f32>,
}

impl Problem {
    fn new() -> Self {
        let mut state = 0x2545f4914f6cdd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let planted: [f32; DIM] = core::array::from_fn(|k| (k as f32 - 9.5) / 10.0);
        let features: Vec<[f32; DIM]> = (0..EXAMPLES)
            .map(|_| core::array::from_fn(|_| next()))
            .collect();
        let targets = features
            .iter()
            .map(|x| x.iter().zip(&planted).map(|(a, b)| a * b).sum::<f32>() + 0.05 * next())
            .collect();
        Self { features, targets }
    }

    /// Mean squared error over all examples.
    fn loss(&self, theta: &[f32; DIM]) -> f32 {
        let total: f32 = self
            .features
            .iter()
            .zip(&self.targets)
            .map(|(x, y)| (x.iter().zip(theta).map(|(a, b)| a * b).sum::<f32>() - y).powi(2))
            .sum();
        total / EXAMPLES as f32
    }

    /// The per-example gradients of step `t`'s minibatch (fixed epoch order: examples
    /// `(t mod 64)·32 ..` of every epoch), as rows of `DIM` one after the other.
    fn minibatch_gradients(&self, t: usize, theta: &[f32; DIM]) -> Vec<f32> {
        let first = (t % EPOCH) * BATCH;
        let mut rows = Vec::with_capacity(BATCH * DIM);
        for e in first..first + BATCH {
            let (x, y) = (&self.features[e], self.targets[e]);
            let residual = x.iter().zip(theta).map(|(a, b)| a * b).sum::<f32>() - y;
            rows.extend(x.iter().map(|a| 2.0 * residual * a));
        }
        rows
    }
}

/// The sum of the minibatch's gradients, each clipped to norm 1 by the caller.
fn clipped_sum(gradients: &[f32]) -> [f32; DIM] {
    let mut sum = [0.0f32; DIM];
    for row in gradients.chunks_exact(DIM) {
        let mut g: [f32; DIM] = row.try_into().expect("rows of DIM");
        clip_to_norm(&mut g, 1.0);
        sum.iter_mut().zip(&g).for_each(|(s, x)| *s += x);
    }
    sum
}

/// The noise of one mechanism at every step: σ·sens·(B z)_t with z from a fixed seed.
trait NoiseRows {
    fn next(&mut self, out: &mut [f32; DIM]);
}

/// A dense decoder (rows of `B`) with its own Gaussian rows.
struct Dense {
    b: Mat<f64>,
    scale: f64,
    z: Vec<[f32; DIM]>,
    step: usize,
}

impl Dense {
    fn new(b: Mat<f64>, scale: f64, seed: u8) -> Self {
        let mut noise = ChaChaNoise::from_seed([seed; 32]).expect("non-zero seed");
        let z = (0..b.ncols())
            .map(|j| {
                let mut row = [0.0f32; DIM];
                noise.fill_standard_normal(j as u64, 0, &mut row);
                row
            })
            .collect();
        Self {
            b,
            scale,
            z,
            step: 0,
        }
    }
}

impl NoiseRows for Dense {
    fn next(&mut self, out: &mut [f32; DIM]) {
        let t = self.step;
        for (k, o) in out.iter_mut().enumerate() {
            let total: f64 = (0..self.b.ncols())
                .map(|j| self.b[(t, j)] * f64::from(self.z[j][k]))
                .sum();
            *o = (self.scale * total) as f32;
        }
        self.step += 1;
    }
}

/// The runtime replaying the compiled blob.
struct Runtime<'m, 'w>(Stream<'m, 'w, ChaChaNoise>);

impl NoiseRows for Runtime<'_, '_> {
    fn next(&mut self, out: &mut [f32; DIM]) {
        self.0.step_noise(out).expect("within the horizon");
    }
}

/// Part 1: SGD with momentum on clipped minibatch sums, the noise from `noise`; returns the final
/// training loss.
fn train_momentum(problem: &Problem, noise: &mut dyn NoiseRows, rate: f32) -> f32 {
    let mut theta = [0.0f32; DIM];
    let mut velocity = [0.0f32; DIM];
    let mut clean = [0.0f32; DIM]; // −(M G)_t without the learning rate
    for t in 0..STEPS {
        let g = clipped_sum(&problem.minibatch_gradients(t, &theta));
        for k in 0..DIM {
            velocity[k] = MOMENTUM as f32 * velocity[k] + g[k];
            clean[k] -= velocity[k];
        }
        let mut z = [0.0f32; DIM];
        noise.next(&mut z);
        // θ_t = −(η/B) ((M G)_t + (B Z)_t): the noise term is released per step.
        for k in 0..DIM {
            theta[k] = rate / BATCH as f32 * (clean[k] - z[k]);
        }
    }
    problem.loss(&theta)
}

/// How part 2 clips: each example in the runtime, or the step's whole row.
#[derive(Clone, Copy, PartialEq)]
enum Clipping {
    PerExample,
    WholeRow,
}

/// Part 2: DP-FTRL without momentum, `θ_t = −(η/B)·(released prefix sum)_t`, the runtime
/// clipping per example or the whole row; returns the final training loss.
fn train_ftrl(problem: &Problem, stream: &mut Stream<'_, '_, ChaChaNoise>, clip: Clipping) -> f32 {
    let rate = 0.05f32;
    let mut theta = [0.0f32; DIM];
    let mut release = [0.0f32; DIM];
    for t in 0..STEPS {
        let gradients = problem.minibatch_gradients(t, &theta);
        match clip {
            Clipping::PerExample => stream.step_examples(&gradients, &mut release),
            Clipping::WholeRow => stream.step(&clipped_sum(&gradients), &mut release),
        }
        .expect("within the horizon");
        for k in 0..DIM {
            theta[k] = -rate / BATCH as f32 * release[k];
        }
    }
    problem.loss(&theta)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (epsilon, delta) = (4.0, 1e-5);
    let schema = Participation::fixed_epoch_order(4, EPOCH)?;
    let sigma = noise_multiplier_for(epsilon, delta).ok_or("calibration failed")?;
    let options = CompileOptions {
        optimum: OptimumOptions {
            participation: schema,
            ..OptimumOptions::default()
        },
        ..CompileOptions::default()
    };
    let calibrated = |workload: &Workload, compiled| {
        mfc_compiler::forms::banded::encode(
            compiled,
            workload,
            &BlobOptions {
                clip_norm: 1.0,
                calibration: Some(Calibration {
                    noise_multiplier: sigma,
                    target: Some(PrivacyTarget { epsilon, delta }),
                }),
                ..BlobOptions::default()
            },
        )
        .map(|written| written.bytes)
    };
    println!(
        "record: one training example of {EXAMPLES}, its gradient clipped to ζ = 1; {}; \
         neighbouring datasets differ by adding or removing one example",
        schema.describe()
    );
    println!(
        "(ε, δ) = ({epsilon}, {delta:e}) for that unit and schema: σ = {sigma:.4}; n = {STEPS} steps of {BATCH} examples, d = {DIM}\n"
    );
    let problem = Problem::new();

    // Part 1: the momentum workload, three mechanisms at equal privacy.
    let workload = Workload::Momentum {
        momentum: MOMENTUM,
        schedule: Schedule::Constant,
    };
    let m = workload.matrix(STEPS)?;
    let compiled = compile(m.as_ref(), 4, 4, &options, &mut |_| {})?;
    let bytes = calibrated(&workload, &compiled)?;
    let mechanism = Mechanism::from_bytes(&bytes)?;
    // Tree: Honaker online prefix sums post-processed into momentum, B = M S⁻¹ B_tree, with the
    // tree encoder's sensitivity under the same schema.
    let tree = Tree::new(STEPS)?;
    let b_tree = tree.honaker_online_decoder();
    let s_inverse_b = Mat::from_fn(STEPS, b_tree.ncols(), |i, j| {
        b_tree[(i, j)] - if i > 0 { b_tree[(i - 1, j)] } else { 0.0 }
    });
    let b_momentum_tree = &m * &s_inverse_b;
    let tree_sens = sensitivity(tree.encoder().as_ref(), &schema)?.value;
    let identity = Mat::<f64>::identity(STEPS, STEPS);
    let independent_sens = sensitivity(identity.as_ref(), &schema)?.value;
    let rate = 0.02f32;
    let noiseless = train_momentum(
        &problem,
        &mut Dense::new(Mat::zeros(STEPS, 1), 0.0, 1),
        rate,
    );
    println!("Part 1: SGD with momentum {MOMENTUM}; training loss without noise: {noiseless:.5}\n");
    println!(
        "| mechanism | sensitivity under (4, {EPOCH}) | expected noise in the iterates √L | training loss (mean of {SEEDS} seeds) |"
    );
    println!("|---|---|---|---|");
    let rows: [(&str, f64, f64); 3] = [
        (
            "optimal MF (4, 4), runtime",
            compiled.sensitivity,
            compiled.sqrt_loss,
        ),
        (
            "tree (Honaker online) + post-processing",
            tree_sens,
            tree_sens * b_momentum_tree.norm_l2(),
        ),
        (
            "independent noise per step",
            independent_sens,
            independent_sens * m.norm_l2(),
        ),
    ];
    let mut results = Vec::new();
    for (index, (name, sens, sqrt_loss)) in rows.iter().enumerate() {
        let mut total = 0.0;
        for seed in 1..=SEEDS {
            total += match index {
                0 => {
                    let mut ws =
                        vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&mechanism, DIM)?];
                    let stream =
                        Stream::new(mechanism, DIM, &mut ws, ChaChaNoise::from_seed([seed; 32])?)?;
                    train_momentum(&problem, &mut Runtime(stream), rate)
                }
                1 => train_momentum(
                    &problem,
                    &mut Dense::new(b_momentum_tree.clone(), sigma * tree_sens, seed),
                    rate,
                ),
                _ => train_momentum(
                    &problem,
                    &mut Dense::new(m.clone(), sigma * independent_sens, seed),
                    rate,
                ),
            };
        }
        let mean = total / f32::from(SEEDS);
        results.push(mean);
        println!("| {name} | {sens:.4} | {sqrt_loss:.2} | {mean:.5} |");
    }
    println!(
        "\nThe optimal factorization adds the least noise ({:.2} against {:.2} and {:.2}) and trains best.\n",
        rows[0].2, rows[1].2, rows[2].2
    );
    let least_noise = rows[0].2 < rows[1].2 && rows[0].2 < rows[2].2;
    let trains_best = results[0] < results[1] && results[0] < results[2];
    if !(least_noise && trains_best) {
        return Err("the optimal factorization should add the least noise and train best".into());
    }

    // Part 2: a prefix-sum blob for the same schema; the runtime clips per example or per row.
    let prefix = Workload::PrefixSum.matrix(STEPS)?;
    let compiled = compile(prefix.as_ref(), 4, 4, &options, &mut |_| {})?;
    let bytes = calibrated(&Workload::PrefixSum, &compiled)?;
    let mechanism = Mechanism::from_bytes(&bytes)?;
    println!(
        "Part 2: DP-FTRL on private prefix sums (sensitivity {:.4} under (4, {EPOCH})), the same blob and σ\n",
        compiled.sensitivity
    );
    println!("| clipping | training loss (mean of {SEEDS} seeds) |");
    println!("|---|---|");
    let mut losses = Vec::new();
    for (name, clip) in [
        (
            "per example, in the runtime (step_examples)",
            Clipping::PerExample,
        ),
        (
            "whole row: the sum of the clipped examples clipped again (step)",
            Clipping::WholeRow,
        ),
    ] {
        let mut total = 0.0;
        for seed in 1..=SEEDS {
            let mut ws = vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&mechanism, DIM)?];
            let mut stream =
                Stream::new(mechanism, DIM, &mut ws, ChaChaNoise::from_seed([seed; 32])?)?;
            total += train_ftrl(&problem, &mut stream, clip);
        }
        let mean = total / f32::from(SEEDS);
        losses.push(mean);
        println!("| {name} | {mean:.5} |");
    }
    println!(
        "\nAt equal privacy, per-example clipping keeps the batch's signal ({:.5} against {:.5}).",
        losses[0], losses[1]
    );
    if losses[0] >= losses[1] {
        return Err("per-example clipping should train better than whole-row clipping".into());
    }
    Ok(())
}
