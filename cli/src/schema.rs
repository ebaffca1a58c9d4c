//! The options that state the unit of privacy, shared by `mfc compile` and `mfc compare`: the
//! participation schema (named as jax_privacy and the BandMF/BLT papers name it) and the
//! neighbouring relation. The checks live in the library (`mfc_compiler::request`), shared with
//! Python.

use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::request::{self, OptionError};
use mfc_formats::Neighbouring;

/// Which steps one record may contribute to, and which datasets are neighbours.
#[derive(clap::Args, Debug, Clone)]
pub struct SchemaArgs {
    /// k: each record takes part in at most this many steps (single participation when absent).
    /// Needs --min-sep or --every.
    #[arg(long, visible_alias = "max-participations", value_name = "K", allow_negative_numbers = true, value_parser = crate::options::count)]
    pub epochs: Option<usize>,
    /// b-min-separation (jax_privacy's `min_sep`, federated training): any two participations of
    /// a record are AT LEAST b steps apart.
    #[arg(long, value_name = "B", conflicts_with = "every", allow_negative_numbers = true, value_parser = crate::options::count)]
    pub min_sep: Option<usize>,
    /// Fixed epoch order (Choquette-Choo et al. 2023, "(k, b)-participation"): a record's
    /// participations are EXACTLY b steps apart, e.g. one pass over the data per epoch of b steps
    /// in the same order each epoch.
    #[arg(long, value_name = "B", allow_negative_numbers = true, value_parser = crate::options::count)]
    pub every: Option<usize>,
    /// The neighbouring relation the (ε, δ) is for: `add-remove` (add or remove one record) or
    /// `replace-one` (replace one record by another; records twice the sensitivity, so twice the
    /// noise).
    #[arg(long, default_value = "add-remove", value_name = "RELATION", value_parser = crate::options::neighbouring)]
    pub neighbouring: Neighbouring,
}

impl SchemaArgs {
    /// The participation schema ([`request::participation`], which checks the combination).
    pub fn participation(&self) -> Result<Participation, OptionError> {
        request::participation(self.epochs, self.min_sep, self.every)
    }
}
