//! `Stream.privacy`: the `(ε, δ)` a stream's releases satisfy, recomputed from the noise
//! multiplier it actually uses — the blob's calibrated `σ`, or the caller's `noise_multiplier` —
//! at the blob's `δ`, with the unit of privacy, the participation schema and the neighbouring
//! relation it is for.
//!
//! A stream adds noise of scale `σ·ζ·sens` to inputs clipped to `ζ`, `sens` the blob's recorded
//! sensitivity under its schema and relation, so it is exactly as private as a Gaussian mechanism
//! of sensitivity 1 and noise multiplier `σ` (Denisov et al. 2022, Thm 2.1); its tight `(ε, δ)`
//! is the analytic Gaussian relation (Balle & Wang 2018, Thm 8), computed by the runtime
//! (`mfc_runtime::privacy::epsilon_for_noise_multiplier`, rounded up, through
//! `mfc_compiler::report::epsilon_for`), and its zCDP parameter is `ρ = 1/(2σ²)`. This
//! holds when the recorded sensitivity is right: `verified` says whether the device's check
//! confirmed it. A blob under cyclic Poisson sampling (amplified BandMF) is accounted instead as
//! the composition of `⌈n/b̂⌉` Poisson-subsampled Gaussians of noise multiplier `σ`
//! (`mfc_compiler::privacy::accountant`, pessimistic: `ε` an upper bound).

use mfc_compiler::privacy::accountant::bandmf::AmplifiedBandMf;
use mfc_runtime::privacy::zcdp_rho;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What a stream's releases guarantee.
pub struct StreamPrivacy {
    /// The `σ` the stream uses.
    pub noise_multiplier: f64,
    /// The `σ` the blob was calibrated with, if any.
    pub blob_noise_multiplier: Option<f64>,
    /// The blob's `δ`, if it records a target.
    pub delta: Option<f64>,
    /// The unit of privacy, in words (the blob's report's `privacy_unit`).
    pub privacy_unit: String,
    /// The participation schema, in words.
    pub participation: String,
    /// `add-remove` or `replace-one`.
    pub neighbouring: String,
    /// The sampling scheme the blob records, if any: `ε` is then the accountant's.
    pub sampling: Option<AmplifiedBandMf>,
    /// Whether the device's check confirmed the recorded sensitivity.
    pub verified: bool,
    /// The check's verdict, in words.
    pub verification: String,
    /// `ε` of the stream's `σ` and of the blob's, computed once: the accountant takes seconds
    /// on a long sampled horizon.
    pub epsilons: std::sync::OnceLock<(Option<f64>, Option<f64>)>,
}

/// `ε` of noise multiplier `sigma` at `delta` (rounded up), by the analytic Gaussian relation
/// or, under `sampling`, by the accountant: `inf` when it is out of their range, `None` without
/// a `δ`.
pub fn epsilon(sigma: f64, delta: Option<f64>, sampling: Option<&AmplifiedBandMf>) -> Option<f64> {
    delta.map(|d| {
        mfc_compiler::report::epsilon_for(sigma, d, sampling)
            .ok()
            .filter(|e| e.is_finite())
            .unwrap_or(f64::INFINITY)
    })
}

impl StreamPrivacy {
    /// Whether the stream's `σ` is below the blob's calibrated one.
    pub fn lowered(&self) -> bool {
        self.blob_noise_multiplier
            .is_some_and(|blob| self.noise_multiplier < blob)
    }

    /// zCDP `ρ = 1/(2σ²)` of one Gaussian release; `None` under cyclic Poisson sampling (a
    /// composition of subsampled Gaussians has no such `ρ`).
    pub fn zcdp_rho(&self) -> Option<f64> {
        self.sampling
            .is_none()
            .then(|| zcdp_rho(self.noise_multiplier))
    }

    /// `ε` of the stream's `σ` and of the blob's `σ` at the blob's `δ`.
    fn epsilons(&self) -> (Option<f64>, Option<f64>) {
        *self.epsilons.get_or_init(|| {
            let at = |sigma| epsilon(sigma, self.delta, self.sampling.as_ref());
            (
                at(self.noise_multiplier),
                self.blob_noise_multiplier.and_then(at),
            )
        })
    }

    /// `ε` of the stream's `σ` at the blob's `δ`.
    pub fn epsilon(&self) -> Option<f64> {
        self.epsilons().0
    }

    /// One sentence: what holds, for whom, and how it was computed.
    pub fn statement(&self) -> String {
        let sigma = self.noise_multiplier;
        let guarantee = match (self.epsilon(), self.delta) {
            (Some(eps), Some(delta)) if eps.is_finite() => {
                format!("(ε, δ) = ({eps:.6}, {delta:e})")
            }
            (Some(_), Some(delta)) => format!("no ε ≤ 10⁴ at δ = {delta:e}"),
            _ => "no (ε, δ): the blob records no δ".to_string(),
        };
        let sensitivity = if self.verified {
            "verified"
        } else {
            "NOT verified"
        };
        let accounting = match self.sampling {
            None => "analytic Gaussian",
            Some(_) => "privacy loss distributions of the sampled scheme, an upper bound",
        };
        format!(
            "{guarantee}{}, from σ = {sigma:?} ({accounting}, recomputed at the blob's δ), {} \
             neighbours, for {}; the blob's recorded sensitivity is {sensitivity}",
            self.zcdp_rho()
                .map_or(String::new(), |rho| format!(", ρ-zCDP {rho:.4e}")),
            self.neighbouring,
            self.privacy_unit
        )
    }

    /// The Python dict of `Stream.privacy`.
    pub fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("epsilon", self.epsilon())?;
        out.set_item("delta", self.delta)?;
        out.set_item("noise_multiplier", self.noise_multiplier)?;
        out.set_item("zcdp_rho", self.zcdp_rho())?;
        out.set_item("blob_noise_multiplier", self.blob_noise_multiplier)?;
        out.set_item("blob_epsilon", self.epsilons().1)?;
        out.set_item("lowered", self.lowered())?;
        out.set_item("privacy_unit", &self.privacy_unit)?;
        out.set_item("participation", &self.participation)?;
        out.set_item("neighbouring", &self.neighbouring)?;
        out.set_item("verified", self.verified)?;
        out.set_item("verification", &self.verification)?;
        out.set_item("statement", self.statement())?;
        Ok(out)
    }
}
