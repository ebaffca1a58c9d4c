//! The properties the fuzz targets check, shared by the targets in `fuzz_targets/` and by the
//! workspace test `tests/tests/fuzz_regressions.rs`, which replays the seed corpus and every saved
//! crashing input through them on stable Rust.
//!
//! A check panics — the fuzzer's crash signal — only when the formats or runtime crates break a
//! promise: a panic inside them, a blob that parses but does not survive re-encoding, a framing
//! error for a correctly framed blob, a stream that changes state on a refused call, or one that
//! does not end after exactly `n` steps. Refusing an input with an error is always fine.

#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod signed;

use mfc_formats::{
    CHECKSUM_LEN, Error as BlobError, FORMAT_VERSION, MAGIC, Mechanism, PREFIX_LEN,
    SensitivityMethod, Validated,
};
use mfc_runtime::formats::{Decoder, Workload};
use mfc_runtime::{BandMfStream, BltStream, ChaChaNoise, Error, FftStream, Stream};

/// The dimension `d` blobs are replayed with: more than one coordinate, not a power of two.
pub const DIM: usize = 3;

/// The noise seed of every replay (any seed but the all-zero one, which is refused).
pub const SEED: [u8; 32] = [0x5a; 32];

/// Arbitrary bytes as a blob: parse; if the blob is accepted, re-encode it and replay it.
pub fn blob(bytes: &[u8]) {
    if let Ok(mechanism) = Mechanism::from_bytes(bytes) {
        round_trip(bytes, &mechanism);
        let _replayed = replay(&mechanism);
    }
}

/// A blob whose frame (magic, version, flags, length, CRC) is rewritten before parsing, so that
/// every mutation of a valid blob reaches the postcard decoder and `validate()`.
///
/// The bytes between the 16-byte prefix and the 4-byte checksum are the payload (inputs shorter
/// than a frame are a payload as a whole), so seeds are ordinary `.mfc` files and a crashing
/// input's [`reframe`] is a crashing input of [`blob`] too.
pub fn blob_payload(bytes: &[u8]) {
    let framed = reframe(bytes);
    match Mechanism::from_bytes(&framed) {
        Ok(mechanism) => {
            round_trip(&framed, &mechanism);
            let _replayed = replay(&mechanism);
        }
        Err(
            e @ (BlobError::Truncated
            | BlobError::BadMagic
            | BlobError::UnsupportedVersion { .. }
            | BlobError::UnsupportedFlags { .. }
            | BlobError::TrailingBytes
            | BlobError::ChecksumMismatch { .. }),
        ) => panic!("a correctly framed blob was refused by its frame: {e:?}"),
        Err(_) => {}
    }
}

/// The payload of `bytes` (see [`blob_payload`]) in a valid frame: magic, version 1, flags 0,
/// its length and its CRC-32.
pub fn reframe(bytes: &[u8]) -> Vec<u8> {
    let payload = if bytes.len() >= PREFIX_LEN + CHECKSUM_LEN {
        &bytes[PREFIX_LEN..bytes.len() - CHECKSUM_LEN]
    } else {
        bytes
    };
    let declared = u32::try_from(payload.len()).expect("fuzz inputs are far below 4 GiB");
    let mut framed = Vec::with_capacity(payload.len() + PREFIX_LEN + CHECKSUM_LEN);
    framed.extend_from_slice(&MAGIC);
    framed.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    framed.extend_from_slice(&0u16.to_le_bytes());
    framed.extend_from_slice(&declared.to_le_bytes());
    framed.extend_from_slice(payload);
    let crc = mfc_formats::checksum(&framed);
    framed.extend_from_slice(&crc.to_le_bytes());
    framed
}

/// An accepted blob re-encodes to exactly its own bytes, which parse to the same mechanism: a
/// mechanism has one accepted encoding (overlong varints are refused since finding 1 was fixed,
/// `tests/fuzz/README.md`).
pub fn round_trip(bytes: &[u8], mechanism: &Mechanism<'_>) {
    let canonical = mechanism
        .to_vec()
        .expect("a mechanism that passed validation must re-encode");
    let again = Mechanism::from_bytes(&canonical).expect("a re-encoded blob must parse");
    assert_eq!(&again, mechanism, "re-encoding changed the mechanism");
    assert!(
        bytes == canonical.as_slice(),
        "an accepted blob is not byte-identical to its re-encoding"
    );
}

/// Row `i` of the input replayed into a stream clipping to `ζ`: one ordinary coordinate, one far
/// above the clip norm (`2^40·ζ`, so clipping scales it) yet within the `2^96·ζ` the runtime
/// clips exactly (beyond it a row is refused, `Error::InputTooLarge`), and one tiny one.
pub fn input_row(i: u32, clip_norm: f32) -> [f32; DIM] {
    let sign = if i.is_multiple_of(2) { 1.0 } else { -1.0 };
    [0.25 * i as f32, sign * clip_norm * 2f32.powi(40), 1e-30]
}

/// One step of `stream`: `step` when it takes inputs for this workload (a prefix sum, or any
/// workload for BandMF), `step_noise` otherwise (where `step` must be refused). Returns the
/// release, or `None` when the stream refuses the step as [`Error::NonFiniteRelease`] — a BandMF
/// encoder whose inverse grows (arbitrary coefficients make them), refused with the stream
/// unchanged — after which no step can succeed.
pub fn advance(stream: &mut (impl Replay + ?Sized), prefix_sum: bool) -> Option<[f32; DIM]> {
    let i = stream.steps_released();
    let mut out = [0.0f32; DIM];
    if stream.takes_inputs(prefix_sum) {
        match stream.step(&input_row(i, stream.clip_norm()), &mut out) {
            Ok(()) => {}
            Err(Error::NonFiniteRelease { step, .. }) => {
                assert_eq!(
                    (step, stream.steps_released()),
                    (i, i),
                    "refused, unchanged"
                );
                return None;
            }
            Err(e) => panic!("a step before the horizon succeeds: {e:?}"),
        }
    } else {
        assert_eq!(
            stream.step(&input_row(i, stream.clip_norm()), &mut out),
            Err(Error::WorkloadNotStreamable)
        );
        assert_eq!(stream.steps_released(), i);
        stream
            .step_noise(&mut out)
            .expect("a stream of another workload releases noise only")
            .expect("a noise step before the horizon succeeds");
    }
    assert_eq!(stream.steps_released(), i + 1);
    Some(out)
}

/// The next step of a stream at its horizon: [`Error::StreamFinished`] whether it takes inputs
/// or releases noise only.
pub fn step_past_horizon(
    stream: &mut (impl Replay + ?Sized),
    prefix_sum: bool,
) -> Result<(), Error> {
    let mut out = [0.0f32; DIM];
    if stream.takes_inputs(prefix_sum) {
        stream.step(
            &input_row(stream.steps_released(), stream.clip_norm()),
            &mut out,
        )
    } else {
        stream
            .step_noise(&mut out)
            .expect("noise-only streams have step_noise")
    }
}

/// Calls that every stream must refuse without changing anything: rows of the wrong length and a
/// non-finite input.
pub fn refused_calls(stream: &mut impl Replay, prefix_sum: bool) {
    let i = stream.steps_released();
    let mut out = [0.0f32; DIM];
    let mut short = [0.0f32; DIM - 1];
    let row = input_row(i, stream.clip_norm());
    if stream.takes_inputs(prefix_sum) {
        assert!(stream.step(&row[..DIM - 1], &mut out).is_err());
        assert!(stream.step(&row, &mut short).is_err());
        assert_eq!(
            stream.step(&[1.0, f32::NAN, 0.0], &mut out),
            Err(Error::NonFiniteInput { index: 1 })
        );
        assert_eq!(
            stream.step_examples(&row[..DIM - 1], &mut out),
            Err(Error::ExamplesShape {
                dim: DIM,
                len: DIM - 1
            })
        );
        let mut examples = [0.0f32; 2 * DIM];
        examples[..DIM].copy_from_slice(&row);
        examples[DIM + 2] = f32::INFINITY;
        assert_eq!(
            stream.step_examples(&examples, &mut out),
            Err(Error::NonFiniteExample {
                example: 1,
                index: 2
            })
        );
    }
    if let Some(refused) = stream.step_noise(&mut short) {
        assert!(refused.is_err());
    }
    assert_eq!(stream.steps_released(), i);
}

/// Steps replayed at most per blob: the horizon of an FFT or BLT blob is not bounded by its size.
pub const MAX_REPLAY_STEPS: u32 = 256;

/// The errors a validated blob may meet when a stream is built for it: a noise scale `σ·ζ·sens`
/// that is not a positive normal `f32`, a clip norm outside `[2⁻⁶⁴, 2⁶⁴]` (where the runtime's
/// `f32` clipping is proven), an FFT block beyond this build's FFT size, a BLT form of a workload
/// other than prefix sums. Anything else is a crash.
fn refusal_is_expected(e: Error, mechanism: &Mechanism<'_>) -> bool {
    match e {
        Error::InvalidNoiseMultiplier | Error::FftBlockTooLarge { .. } => true,
        Error::UnsupportedClipNorm => {
            !(2f64.powi(-64)..=2f64.powi(64)).contains(&mechanism.header.clip_norm)
        }
        Error::WorkloadNotStreamable => {
            matches!(mechanism.decoder, Decoder::Blt(_))
                && !matches!(mechanism.header.workload, Workload::PrefixSum)
        }
        _ => false,
    }
}

/// The body of [`replay`] for one stream type (`Stream`, `FftStream`, `BltStream`,
/// `BandMfStream`, which share their constructors' signatures).
macro_rules! replay_as {
    ($stream:ident, $mechanism:expr) => {{
        let mechanism: &Validated<'_> = $mechanism;
        let needed = match $stream::<ChaChaNoise>::workspace_len(mechanism, DIM) {
            Ok(needed) => needed,
            Err(e) if refusal_is_expected(e, mechanism) => return false,
            Err(e) => panic!("no workspace size for a validated blob: {e:?}"),
        };
        let noise = || ChaChaNoise::from_seed(SEED).expect("a non-zero seed is accepted");
        let mut short = vec![0.0f32; needed - 1];
        let refused = $stream::with_noise_multiplier(*mechanism, DIM, &mut short, noise(), 1.0);
        match refused {
            Err(Error::WorkspaceTooSmall { .. }) => {}
            Err(e) if refusal_is_expected(e, mechanism) => return false,
            other => panic!("a short workspace was not refused: {:?}", other.err()),
        }
        let mut clean_workspace = vec![0.0f32; needed];
        let mut disturbed_workspace = vec![f32::NAN; needed];
        let (clean, disturbed) = match mechanism.header.calibration {
            Some(_) => (
                $stream::new(*mechanism, DIM, &mut clean_workspace, noise()),
                $stream::new(*mechanism, DIM, &mut disturbed_workspace, noise()),
            ),
            None => {
                let uncalibrated = $stream::new(*mechanism, DIM, &mut clean_workspace, noise());
                assert!(matches!(uncalibrated, Err(Error::NotCalibrated)));
                (
                    $stream::with_noise_multiplier(
                        *mechanism,
                        DIM,
                        &mut clean_workspace,
                        noise(),
                        1.0,
                    ),
                    $stream::with_noise_multiplier(
                        *mechanism,
                        DIM,
                        &mut disturbed_workspace,
                        noise(),
                        1.0,
                    ),
                )
            }
        };
        let (mut clean, mut disturbed) = match (clean, disturbed) {
            (Ok(clean), Ok(disturbed)) => (clean, disturbed),
            (Err(e), Err(f)) if e == f && refusal_is_expected(e, mechanism) => return false,
            (clean, disturbed) => panic!(
                "a validated blob was refused by the runtime: {:?}, {:?}",
                clean.err(),
                disturbed.err()
            ),
        };
        replay_streams(&mut clean, &mut disturbed, mechanism);
        true
    }};
}

/// Replays a validated blob through the runtime at dimension [`DIM`], with the stream of its
/// decoder form: a stream that sees refused calls before every step releases bit-for-bit what an
/// undisturbed stream releases, both end after exactly `n` steps (for `n ≤` [`MAX_REPLAY_STEPS`];
/// longer streams are replayed that far), and a workspace one float short is refused. Returns
/// whether the blob was replayed: `false` if the runtime refused it with an expected error.
pub fn replay(mechanism: &Validated<'_>) -> bool {
    match mechanism.decoder {
        Decoder::BandedLowRank(_) => replay_as!(Stream, mechanism),
        Decoder::Fft(_) => replay_as!(FftStream, mechanism),
        Decoder::Blt(_) => replay_as!(BltStream, mechanism),
        Decoder::BandMf(_) => replay_as!(BandMfStream, mechanism),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// The lockstep replay of [`replay`].
fn replay_streams(clean: &mut impl Replay, disturbed: &mut impl Replay, mechanism: &Mechanism<'_>) {
    let prefix_sum = matches!(mechanism.header.workload, Workload::PrefixSum);
    let n = mechanism.steps();
    for _ in 0..n.min(MAX_REPLAY_STEPS) {
        refused_calls(disturbed, prefix_sum);
        let expected = advance(clean, prefix_sum).map(|r| r.map(f32::to_bits));
        let released = advance(disturbed, prefix_sum).map(|r| r.map(f32::to_bits));
        assert_eq!(expected, released, "a refused call changed the stream");
        if expected.is_none() {
            // An unstable encoder: every later step is refused the same way.
            return;
        }
    }
    // A BLT whose bound holds for every horizon (`BltTailBound`) has no end to step past.
    let unbounded = mechanism.header.sensitivity.method == SensitivityMethod::BltTailBound;
    if n <= MAX_REPLAY_STEPS && !unbounded {
        for stream in [clean as &mut dyn Replay, disturbed as &mut dyn Replay] {
            let finished = step_past_horizon(stream, prefix_sum);
            assert_eq!(finished, Err(Error::StreamFinished { steps: n }));
            assert_eq!(stream.steps_released(), n);
        }
    }
}

/// The calls the checks make on a runtime stream, for every decoder form's stream type.
pub trait Replay {
    /// `step`: clip, sum, noise, release.
    fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error>;
    /// `step_examples`: clip each example, sum, noise, release.
    fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error>;
    /// `step_noise`, the noise only; `None` for a stream type without it.
    fn step_noise(&mut self, out: &mut [f32]) -> Option<Result<(), Error>>;
    /// `steps_released`.
    fn steps_released(&self) -> u32;
    /// `clip_norm`: `ζ` as the stream applies it.
    fn clip_norm(&self) -> f32;
    /// Whether `step` takes inputs for a blob of this workload: for a prefix sum (every form),
    /// or for any workload (BandMF, which releases the noised inputs).
    fn takes_inputs(&self, prefix_sum: bool) -> bool {
        prefix_sum
    }
}

macro_rules! impl_replay {
    ($($stream:ident),*) => {$(
        impl Replay for $stream<'_, '_, ChaChaNoise> {
            fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
                $stream::step(self, input, release)
            }
            fn step_examples(
                &mut self,
                examples: &[f32],
                release: &mut [f32],
            ) -> Result<(), Error> {
                $stream::step_examples(self, examples, release)
            }
            fn step_noise(&mut self, out: &mut [f32]) -> Option<Result<(), Error>> {
                Some($stream::step_noise(self, out))
            }
            fn steps_released(&self) -> u32 {
                $stream::steps_released(self)
            }
            fn clip_norm(&self) -> f32 {
                $stream::clip_norm(self)
            }
        }
    )*};
}
impl_replay!(Stream, FftStream);

/// BandMF steps with inputs for every workload (prefix sums, or the noised inputs of another
/// workload) and has no noise-only step.
impl Replay for BandMfStream<'_, '_, ChaChaNoise> {
    fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        BandMfStream::step(self, input, release)
    }
    fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        BandMfStream::step_examples(self, examples, release)
    }
    fn step_noise(&mut self, _: &mut [f32]) -> Option<Result<(), Error>> {
        None
    }
    fn steps_released(&self) -> u32 {
        BandMfStream::steps_released(self)
    }
    fn clip_norm(&self) -> f32 {
        BandMfStream::clip_norm(self)
    }
    fn takes_inputs(&self, _: bool) -> bool {
        true
    }
}

/// The BLT form streams prefix sums only (it refuses other workloads when built).
impl Replay for BltStream<'_, '_, ChaChaNoise> {
    fn step(&mut self, input: &[f32], release: &mut [f32]) -> Result<(), Error> {
        BltStream::step(self, input, release)
    }
    fn step_examples(&mut self, examples: &[f32], release: &mut [f32]) -> Result<(), Error> {
        BltStream::step_examples(self, examples, release)
    }
    fn step_noise(&mut self, _: &mut [f32]) -> Option<Result<(), Error>> {
        None
    }
    fn steps_released(&self) -> u32 {
        BltStream::steps_released(self)
    }
    fn clip_norm(&self) -> f32 {
        BltStream::clip_norm(self)
    }
}
