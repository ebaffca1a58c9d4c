//! The program whose code size the budget table reports (`budget.sh`): it loads the embedded
//! blob, runs the whole stream on deterministic inputs (with `size-checkpoint`: checkpointing
//! every step and restoring once) and reports an error by exit code, or through defmt with the
//! `defmt` feature. With `size-blt` the blob is `blt.mfc` and a `BltStream` runs instead of the
//! banded `Stream`; with `size-bandmf` the blob is `bandmf.mfc` and a `BandMfStream` runs (with
//! `size-checkpoint`, either is checkpointed as the banded one). With
//! `size-baseline` the same skeleton runs without the runtime (and with the same blob); the
//! runtime's size is the difference, so startup code, the blob and the logger are not counted.
//!
//! With `size-signed` (and `size-checkpoint`, banded) it is the device of issue 33: the signed
//! blob's signature is checked (the runtime's `signature` feature), its sensitivity verified
//! with the banded verifier only, then the stream runs with checkpoints; its baseline is
//! `size-baseline` with the same signed blob.
//!
//! Its panic handler only exits: the runtime's panic paths (there should be none reachable) are
//! counted by their code, not by a formatter.
#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::{ExceptionFrame, entry, exception};

#[allow(dead_code)]
mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}
#[allow(dead_code)]
#[path = "../scenario.rs"]
mod scenario;

// cortex-m provides the critical section that defmt's logger takes.
use cortex_m as _;
#[cfg(feature = "defmt")]
use defmt_semihosting as _;

use config::DIM;

#[cfg(not(feature = "size-signed"))]
static BLOB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/blob.mfc"));
/// With `size-signed`: `telemetry.mfc` signed (`verify-banded.signed.mfc`, the same blob with
/// the 72-byte trailer of `mfc sign`, key of RFC 8032 TEST 1, as the `signed` firmware's).
#[cfg(feature = "size-signed")]
static BLOB: &[u8] = include_bytes!("../../verify-banded.signed.mfc");

/// The public key of RFC 8032, TEST 1, which signed `verify-banded.signed.mfc`.
#[cfg(all(feature = "size-signed", not(feature = "size-baseline")))]
const PUBLIC: [u8; 32] = [
    0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
    0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
];

/// With `size-signed`: the signature checked, then the blob's sensitivity verified on the device
/// with the banded single-participation verifier only, before the stream is opened.
#[cfg(all(feature = "size-signed", not(feature = "size-baseline")))]
fn load_signed_and_verified(
    bytes: &'static [u8],
) -> Result<
    (
        mfc_runtime::Validated<'static>,
        mfc_runtime::BlobFingerprint<'static>,
    ),
    mfc_runtime::Error,
> {
    use mfc_runtime::verify::{self, forms};
    let signed = mfc_runtime::formats::signature::split_signed(bytes)
        .ok_or(mfc_runtime::Error::NotSigned)?;
    mfc_runtime::signature::from_signed_bytes(bytes, &PUBLIC)?;
    let (mechanism, blob) = mfc_runtime::BlobFingerprint::load(signed.blob)?;
    let mut scratch = [0.0f64; 16];
    // Only a verified sensitivity streams: an unverifiable verdict (over budget, scratch too
    // small) is refused as an understated one is.
    match verify::verify_only::<{ forms::BANDED | forms::SINGLE }>(
        &mechanism,
        &mut scratch,
        1 << 24,
    )? {
        verify::Verdict::Verified { .. } => Ok((mechanism, blob)),
        verify::Verdict::Unverifiable(_) => Err(mfc_runtime::Error::SensitivityUnverified),
    }
}

#[cfg(all(
    mfc_form = "blt",
    not(feature = "size-blt"),
    not(feature = "size-baseline")
))]
compile_error!("a BLT blob is run by the `size-blt` build");
#[cfg(all(
    mfc_form = "bandmf",
    not(feature = "size-bandmf"),
    not(feature = "size-baseline")
))]
compile_error!("a BandMF blob is run by the `size-bandmf` build");

/// The stream of the blob's form: banded plus low rank, BLT (`size-blt`) or BandMF
/// (`size-bandmf`); each has checkpoints.
#[cfg(all(not(feature = "size-baseline"), feature = "size-bandmf"))]
type Checkpointed<'m, 'w, N> = mfc_runtime::BandMfStream<'m, 'w, N>;
#[cfg(all(not(feature = "size-baseline"), feature = "size-blt"))]
type Checkpointed<'m, 'w, N> = mfc_runtime::BltStream<'m, 'w, N>;
#[cfg(all(
    not(feature = "size-baseline"),
    not(feature = "size-bandmf"),
    not(feature = "size-blt")
))]
type Checkpointed<'m, 'w, N> = mfc_runtime::Stream<'m, 'w, N>;

#[entry]
fn main() -> ! {
    let code = match run() {
        Ok(checksum) => {
            black_box(checksum);
            0
        }
        Err(e) => {
            #[cfg(feature = "defmt")]
            defmt::error!("{}", e);
            #[cfg(not(feature = "defmt"))]
            black_box(&e);
            2
        }
    };
    semihosting::process::exit(code)
}

#[cfg(not(feature = "size-baseline"))]
type Failure = mfc_runtime::Error;
#[cfg(feature = "size-baseline")]
type Failure = u32;

#[cfg(not(feature = "size-baseline"))]
fn run() -> Result<u32, Failure> {
    use mfc_runtime::{ReleaseCounter, epoch_noise};
    #[cfg(feature = "size-signed")]
    let (mechanism, blob) = load_signed_and_verified(black_box(BLOB))?;
    #[cfg(all(feature = "size-checkpoint", not(feature = "size-signed")))]
    let (mechanism, blob) = mfc_runtime::BlobFingerprint::load(black_box(BLOB))?;
    #[cfg(not(feature = "size-checkpoint"))]
    let mechanism = mfc_runtime::Mechanism::from_bytes(black_box(BLOB))?;
    let counter = ReleaseCounter::FACTORY.cold_start()?;
    let mut workspace = [0.0f32; config::WORKSPACE];
    let noise = epoch_noise(&scenario::ROOT_SECRET, &counter)?;
    #[cfg(feature = "size-no-noise")]
    let noise = NoSampler(black_box(noise).is_some_key());
    let mut stream = Checkpointed::new(mechanism, DIM, &mut workspace, noise)?;
    #[cfg(feature = "size-checkpoint")]
    // `Shape::checkpoint_len` bytes (`build.rs`): 14 + 50 + 4·(floats of state) + 4.
    let (mut counter, mut slot) = (counter, [0u8; config::CHECKPOINT]);
    let mut input = [0.0f32; DIM];
    let mut release = [0.0f32; DIM];
    let mut checksum = 0u32;
    for step in 0..stream.horizon() {
        scenario::events(step, &mut input);
        stream.step(black_box(&input), &mut release)?;
        #[cfg(feature = "size-checkpoint")]
        {
            stream.checkpoint(&blob, &counter, &mut slot)?;
            counter.record(&stream)?;
        }
        checksum = scenario::fold_checksum(checksum, &release);
    }
    #[cfg(feature = "size-checkpoint")]
    {
        drop(stream);
        let noise = epoch_noise(&scenario::ROOT_SECRET, &counter)?;
        let mut stream = Checkpointed::new(mechanism, DIM, &mut workspace, noise)?;
        stream.restore(&blob, black_box(&slot), &counter)?;
        checksum ^= stream.steps_released();
    }
    Ok(checksum)
}

/// The same skeleton without the runtime: the blob is read (so it stays in flash), the inputs
/// are made and folded into the checksum.
#[cfg(feature = "size-baseline")]
fn run() -> Result<u32, Failure> {
    let blob = black_box(BLOB);
    let mut checksum = blob
        .iter()
        .fold(0u32, |c, &b| c.rotate_left(3) ^ u32::from(b));
    let mut input = [0.0f32; DIM];
    for step in 0..config::STEPS {
        scenario::events(step, &mut input);
        checksum = scenario::fold_checksum(checksum, black_box(&input));
    }
    if black_box(checksum) == 0 {
        return Err(black_box(1));
    }
    Ok(checksum)
}

/// Measurement only (`size-no-noise`): a "noise source" without a sampler or a generator, so
/// that the size difference to the real build is the noise path. Its output is not noise.
#[cfg(feature = "size-no-noise")]
struct NoSampler(bool);

#[cfg(feature = "size-no-noise")]
trait IsSomeKey {
    fn is_some_key(&self) -> bool;
}

#[cfg(feature = "size-no-noise")]
impl IsSomeKey for mfc_runtime::ChaChaNoise {
    fn is_some_key(&self) -> bool {
        true
    }
}

#[cfg(feature = "size-no-noise")]
impl mfc_runtime::NoiseSource for NoSampler {
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
        for (k, x) in out.iter_mut().enumerate() {
            *x = black_box((step + offset + k as u64) as u32 as f32 * f32::from(u8::from(self.0)));
        }
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::process::exit(101)
}

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    semihosting::process::exit(3)
}
