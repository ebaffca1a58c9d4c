//! `mfc calibrate`: the noise multiplier for a privacy target, or the privacy of a multiplier —
//! for one Gaussian release of sensitivity 1 (a blob's calibration), or, with `--sampling-prob`,
//! for amplified BandMF under Poisson sampling (Choquette-Choo et al. 2023b; `b̂ = 1` is DP-SGD),
//! accounted by `mfc_compiler::privacy::accountant` (PLD, pessimistic: ε an upper bound).

use mfc_compiler::privacy::accountant::PldOptions;
use mfc_compiler::privacy::accountant::bandmf::AmplifiedBandMf;
use mfc_compiler::privacy::calibrate::{
    PRIVACY_UNIT, epsilon_for_noise_multiplier, noise_multiplier_for, zcdp_rho,
};
use mfc_compiler::request::Spelling;
use serde::Serialize;

/// Exact analytic-Gaussian calibration of a mechanism normalized to sensitivity 1.
#[derive(clap::Args)]
pub struct Args {
    /// Target ε (give ε and δ to get σ).
    #[arg(long, conflicts_with = "noise_multiplier", allow_negative_numbers = true, value_parser = crate::options::epsilon)]
    epsilon: Option<f64>,
    /// Target δ.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::options::delta)]
    delta: f64,
    /// Noise multiplier σ (give σ and δ to get ε).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::options::noise_multiplier)]
    noise_multiplier: Option<f64>,
    /// Amplified BandMF: the probability q with which each example of the step's group is
    /// Poisson-sampled (the data split into b̂ groups, step i samples group i mod b̂). Needs
    /// --steps; --bands 1 (the default) is DP-SGD. Add-remove neighbours, one example the unit.
    #[arg(long, requires = "steps", allow_negative_numbers = true, value_parser = crate::options::sampling_prob)]
    sampling_prob: Option<f64>,
    /// Amplified BandMF: the number of training steps n.
    #[arg(long, requires = "sampling_prob", value_parser = crate::options::steps)]
    steps: Option<usize>,
    /// Amplified BandMF: the encoder's bands b̂ (each example in at most ⌈n/b̂⌉ steps, at least
    /// b̂ apart) [default: 1, DP-SGD].
    #[arg(long, requires = "sampling_prob", value_parser = clap::value_parser!(u64).range(1..))]
    bands: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Calibration {
    epsilon: f64,
    delta: f64,
    noise_multiplier: f64,
    zcdp_rho: f64,
    /// What the `(ε, δ)` is for: the same sentence as the text output.
    privacy_unit: &'static str,
}

#[derive(Serialize)]
struct AmplifiedCalibration {
    epsilon: f64,
    delta: f64,
    noise_multiplier: f64,
    sampling_prob: f64,
    steps: usize,
    bands: usize,
    /// `⌈n/b̂⌉`: the subsampled Gaussians composed.
    participations: u64,
    /// The sampling scheme, the unit of privacy and the neighbouring relation, in words.
    privacy_unit: String,
}

/// `--sampling-prob`: σ for `(ε, δ)`, or ε for σ, by the accountant.
fn run_amplified(args: &Args, q: f64, steps: usize) -> Result<(), Box<dyn std::error::Error>> {
    let refusal = |e: mfc_compiler::privacy::accountant::AccountantError| {
        crate::options::Refusal(e.option_error().render(Spelling::Cli))
    };
    let bands = usize::try_from(args.bands.unwrap_or(1)).unwrap_or(usize::MAX);
    let scheme = AmplifiedBandMf::new(steps, bands, q).map_err(refusal)?;
    let options = PldOptions::default();
    let (epsilon, sigma) = match (args.epsilon, args.noise_multiplier) {
        (Some(eps), None) => (
            eps,
            scheme
                .noise_multiplier(eps, args.delta, &options)
                .map_err(refusal)?,
        ),
        (None, Some(sigma)) => (
            scheme
                .epsilon(sigma, args.delta, &options)
                .map_err(refusal)?,
            sigma,
        ),
        _ => {
            return Err(crate::options::Refusal(
                "give either --epsilon or --noise-multiplier (with --delta)".into(),
            )
            .into());
        }
    };
    let c = AmplifiedCalibration {
        epsilon,
        delta: args.delta,
        noise_multiplier: sigma,
        sampling_prob: q,
        steps,
        bands,
        participations: scheme.participations(),
        privacy_unit: scheme.describe(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        println!(
            "σ = {:.6} gives (ε, δ) = ({}, {:e}) over {} steps",
            c.noise_multiplier,
            mfc_compiler::request::epsilon_text(c.epsilon),
            c.delta,
            c.steps
        );
        println!("{}", c.privacy_unit);
    }
    Ok(())
}

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if let (Some(q), Some(steps)) = (args.sampling_prob, args.steps) {
        return run_amplified(&args, q, steps);
    }
    let (epsilon, sigma) = match (args.epsilon, args.noise_multiplier) {
        (Some(eps), None) => {
            let sigma = noise_multiplier_for(eps, args.delta).ok_or_else(|| {
                crate::options::Refusal(format!(
                    "--epsilon {eps:?} --delta {:?}: no noise multiplier in (0, 10^6] reaches it",
                    args.delta
                ))
            })?;
            (eps, sigma)
        }
        (None, Some(sigma)) => {
            let eps = epsilon_for_noise_multiplier(sigma, args.delta).ok_or_else(|| {
                crate::options::Refusal(format!(
                    "--noise-multiplier {sigma:?} --delta {:?}: no finite ε (σ too small for δ)",
                    args.delta
                ))
            })?;
            (eps, sigma)
        }
        _ => {
            return Err(crate::options::Refusal(
                "give either --epsilon or --noise-multiplier (with --delta)".into(),
            )
            .into());
        }
    };
    let c = Calibration {
        epsilon,
        delta: args.delta,
        noise_multiplier: sigma,
        zcdp_rho: zcdp_rho(sigma),
        privacy_unit: PRIVACY_UNIT,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        println!(
            "σ = {:.6} gives (ε, δ) = ({:.6}, {:e}); ρ-zCDP = {:.6e}",
            c.noise_multiplier, c.epsilon, c.delta, c.zcdp_rho
        );
        println!("{PRIVACY_UNIT}");
    }
    Ok(())
}
