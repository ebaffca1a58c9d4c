//! The options that state the unit of privacy, shared by `mfc compile` and `mfc compare`: the
//! participation schema (named as jax_privacy and the BandMF/BLT papers name it) and the
//! neighbouring relation.

use mfc_compiler::Error;
use mfc_compiler::participation::Participation;
use mfc_formats::Neighbouring;

/// Which steps one record may contribute to, and which datasets are neighbours.
#[derive(clap::Args, Debug, Clone)]
pub struct SchemaArgs {
    /// k: each record takes part in at most this many steps (single participation when absent).
    /// Needs --min-sep or --every.
    #[arg(long, visible_alias = "max-participations", value_name = "K")]
    epochs: Option<usize>,
    /// b-min-separation (jax_privacy's `min_sep`, federated training): any two participations of
    /// a record are AT LEAST b steps apart.
    #[arg(long, value_name = "B", conflicts_with = "every")]
    min_sep: Option<usize>,
    /// Fixed epoch order (Choquette-Choo et al. 2023, "(k, b)-participation"): a record's
    /// participations are EXACTLY b steps apart, e.g. one pass over the data per epoch of b steps
    /// in the same order each epoch.
    #[arg(long, value_name = "B")]
    every: Option<usize>,
    /// The neighbouring relation the (ε, δ) is for: `add-remove` (add or remove one record) or
    /// `replace-one` (replace one record by another; records twice the sensitivity, so twice the
    /// noise).
    #[arg(long, default_value = "add-remove", value_name = "RELATION")]
    neighbouring: String,
}

impl SchemaArgs {
    /// The participation schema over `steps` steps; a refusal names the option, the value and
    /// what is allowed, before any work is done.
    pub fn participation(&self, steps: usize) -> Result<Participation, Error> {
        let refuse = |why: String| Err(Error::InvalidOption(why));
        let limit = u32::MAX as usize;
        if let Some(k) = self.epochs.filter(|&k| k > limit) {
            return refuse(format!("--epochs {k}: at most {limit}"));
        }
        for (option, b) in [("--min-sep", self.min_sep), ("--every", self.every)] {
            if let Some(b) = b.filter(|&b| b > steps) {
                return refuse(format!(
                    "{option} {b}: the separation must be at most the number of steps, {steps}"
                ));
            }
        }
        match (self.epochs, self.min_sep, self.every) {
            (None, None, None) => Ok(Participation::Single),
            (Some(0), ..) => refuse("--epochs 0: a record takes part in at least 1 step".into()),
            (_, Some(0), _) => refuse("--min-sep 0: the separation must be at least 1".into()),
            (.., Some(0)) => refuse("--every 0: the separation must be at least 1".into()),
            (Some(k), Some(b), None) => Participation::min_separation(k, b),
            (Some(k), None, Some(b)) => Participation::fixed_epoch_order(k, b),
            (Some(k), None, None) => refuse(format!(
                "--epochs {k} needs --min-sep B (participations at least B steps apart) or --every B (exactly B apart)"
            )),
            (None, Some(b), _) => refuse(format!(
                "--min-sep {b} needs --epochs K, the most steps one record takes part in"
            )),
            (None, None, Some(b)) => refuse(format!(
                "--every {b} needs --epochs K, the most steps one record takes part in"
            )),
            (Some(_), Some(_), Some(_)) => {
                refuse("--min-sep and --every exclude each other".into())
            }
        }
    }

    /// The neighbouring relation.
    pub fn neighbouring(&self) -> Result<Neighbouring, Error> {
        match self.neighbouring.as_str() {
            "add-remove" => Ok(Neighbouring::AddOrRemove),
            "replace-one" => Ok(Neighbouring::ReplaceOne),
            other => Err(Error::InvalidOption(format!(
                "--neighbouring {other}: expected `add-remove` or `replace-one`"
            ))),
        }
    }
}
