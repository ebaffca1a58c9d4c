//! The device's verification of a blob's recorded sensitivity (`mfc_runtime::verify`), run on the
//! host with the host's budget, and the device's policy applied to it (`mfc_runtime::policy`,
//! [`Policy::host`]): `mfc inspect` and Python's `Mechanism.verify()` print the verdict; `mfc
//! simulate` and Python's `Stream` admit a blob only as a device refusing unverifiable blobs
//! would ([`Outcome::admit`]): an understated sensitivity is always refused, an unverifiable one
//! unless the caller opted in by name (`--allow-unverified`, `allow_unverified=True`).

use mfc_runtime::Validated;
use mfc_runtime::policy::Policy;
use mfc_runtime::verify::{self, Unverifiable, Verdict};
use serde_json::json;

/// The most operations the compiler spends on the check of `crate::ship::blob` of one blob (seconds on a
/// host; a device's budget is its own, `mfc_runtime::verify::operations`).
pub const VERIFY_OPERATIONS: u64 = 20_000_000_000;

/// What the verification said, for the report: JSON, one line of text, and the refusal if any.
pub struct Outcome {
    /// `{"verdict": "verified" | "unverifiable" | "refused", …}`.
    pub json: serde_json::Value,
    /// One line for the text report.
    pub text: String,
    /// The runtime's refusal of an understated sensitivity.
    pub refusal: Option<mfc_runtime::Error>,
    /// What the verification returned, for the policy ([`Outcome::admit`]).
    verdict: Result<Verdict, mfc_runtime::Error>,
}

impl Outcome {
    /// Whether the blob's sensitivity could not be checked (neither verified nor refused).
    pub fn is_unverifiable(&self) -> bool {
        matches!(self.verdict, Ok(Verdict::Unverifiable(_)))
    }

    /// The host's policy ([`Policy::host`]) on this outcome of `m`: `Ok` when the blob may be
    /// streamed, else the refusal — [`mfc_runtime::Error::SensitivityUnderstated`] whatever
    /// `allow_unverified` says, [`mfc_runtime::Error::SensitivityUnverified`] for an
    /// unverifiable blob unless `allow_unverified`.
    pub fn admit(
        &self,
        m: &Validated<'_>,
        allow_unverified: bool,
    ) -> Result<(), mfc_runtime::Error> {
        Policy::host(VERIFY_OPERATIONS, allow_unverified)
            .decide(m, self.verdict)
            .map(|_| ())
    }
}

/// Why a blob could not be checked, in words.
fn reason(why: Unverifiable) -> String {
    match why {
        Unverifiable::Form => "this decoder form has no device-side verification".into(),
        Unverifiable::Schema => {
            "no exact device-side method for this form under this participation schema".into()
        }
        Unverifiable::WorkloadNotStored => {
            "the blob does not store its custom workload A, which the sensitivity depends on".into()
        }
        Unverifiable::OverBudget { operations } => {
            format!("needs {operations} operations, above the {VERIFY_OPERATIONS} allowed here")
        }
        Unverifiable::ScratchTooSmall { needed } => format!("needs {needed} floats of scratch"),
        Unverifiable::IllConditioned => {
            "the rounding bounds of the device's arithmetic grow too large to certify it".into()
        }
        _ => "not verifiable by this runtime".into(),
    }
}

/// The operations a verified blob's check took: [`verify::operations`], or for a BLT bound for
/// every horizon, which counts its operations as it runs (`verify::blt_tail`), a second run of
/// it (quick: the blob was just verified).
fn operations(m: &Validated<'_>) -> Option<u64> {
    verify::operations(m).or_else(|| match m.decoder {
        mfc_runtime::formats::Decoder::Blt(d) => {
            let mut tail = vec![0.0; verify::blt_tail::scratch_len(d.buffers())];
            verify::blt_tail::certify(d.theta, d.omega, &mut tail, VERIFY_OPERATIONS)
                .ok()
                .map(|c| c.operations)
        }
        _ => None,
    })
}

/// Runs the verification with the host's budget.
pub fn check(m: &Validated<'_>) -> Outcome {
    let mut scratch = vec![0.0; verify::scratch_len(m)];
    let verdict = verify::verify(m, &mut scratch, VERIFY_OPERATIONS);
    match verdict {
        Ok(Verdict::Verified { recorded, bound }) => {
            let operations = operations(m);
            Outcome {
                json: json!({"verdict": "verified", "recorded": recorded, "bound": bound,
                         "operations": operations}),
                text: format!(
                    "verified: recorded {recorded:.9} ≥ {bound:.9}, the bound recomputed from the stored coefficients ({} operations)",
                    operations.unwrap_or(0)
                ),
                refusal: None,
                verdict,
            }
        }
        Ok(Verdict::Unverifiable(why)) => Outcome {
            json: json!({"verdict": "unverifiable", "reason": reason(why)}),
            text: format!("unverifiable: {}", reason(why)),
            refusal: None,
            verdict,
        },
        Err(e) => Outcome {
            json: json!({"verdict": "refused", "reason": e.to_string()}),
            text: format!("REFUSED: {e}"),
            refusal: Some(e),
            verdict,
        },
    }
}
