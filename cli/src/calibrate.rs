//! `mfc calibrate`: the noise multiplier for a privacy target, or the privacy of a multiplier.

use mfc_compiler::privacy::calibrate::{
    PRIVACY_UNIT, epsilon_for_noise_multiplier, noise_multiplier_for, zcdp_rho,
};
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

pub fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
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
