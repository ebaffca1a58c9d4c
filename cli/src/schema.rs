//! The options that state the unit of privacy, shared by `mfc compile` and `mfc compare`: the
//! participation schema (named as jax_privacy and the BandMF/BLT papers name it) and the
//! neighbouring relation. The checks live in the library ([`Schema`]), shared with Python.

use mfc_compiler::Error;
use mfc_compiler::compile::Schema;
use mfc_compiler::privacy::participation::Participation;
use mfc_formats::Neighbouring;

/// Which steps one record may contribute to, and which datasets are neighbours.
#[derive(clap::Args, Debug, Clone)]
pub struct SchemaArgs {
    /// k: each record takes part in at most this many steps (single participation when absent).
    /// Needs --min-sep or --every.
    #[arg(long, visible_alias = "max-participations", value_name = "K", allow_negative_numbers = true, value_parser = crate::options::count)]
    epochs: Option<usize>,
    /// b-min-separation (jax_privacy's `min_sep`, federated training): any two participations of
    /// a record are AT LEAST b steps apart.
    #[arg(long, value_name = "B", conflicts_with = "every", allow_negative_numbers = true, value_parser = crate::options::count)]
    min_sep: Option<usize>,
    /// Fixed epoch order (Choquette-Choo et al. 2023, "(k, b)-participation"): a record's
    /// participations are EXACTLY b steps apart, e.g. one pass over the data per epoch of b steps
    /// in the same order each epoch.
    #[arg(long, value_name = "B", allow_negative_numbers = true, value_parser = crate::options::count)]
    every: Option<usize>,
    /// The neighbouring relation the (ε, δ) is for: `add-remove` (add or remove one record) or
    /// `replace-one` (replace one record by another; records twice the sensitivity, so twice the
    /// noise).
    #[arg(long, default_value = "add-remove", value_name = "RELATION")]
    neighbouring: String,
}

impl SchemaArgs {
    /// The options as the library's [`Schema`], which checks them.
    pub fn schema(&self) -> Schema {
        Schema {
            epochs: self.epochs,
            min_sep: self.min_sep,
            every: self.every,
            neighbouring: self.neighbouring.clone(),
        }
    }

    /// The participation schema over `steps` steps ([`Schema::participation`]).
    pub fn participation(&self, steps: usize) -> Result<Participation, Error> {
        self.schema().participation(steps)
    }

    /// The neighbouring relation ([`Schema::neighbouring`]).
    pub fn neighbouring(&self) -> Result<Neighbouring, Error> {
        self.schema().neighbouring()
    }
}
