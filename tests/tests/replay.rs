//! One replay for every form (issue 19): each decoder form — banded plus low rank, BLT, FFT (both
//! decoders), BandMF — opened through `mfc_runtime::Replay` releases `S x + σζ·sens·(noise)`
//! with the noise computed here in `f64` from the blob's own `f32` tables (dense decoder,
//! Toeplitz coefficients, dense forward substitution) and the same draws; a checkpoint/restore
//! round trip at any step (block boundaries included) continues the uninterrupted stream bit for
//! bit; and every form refuses stale checkpoints, other epochs, other keys, other blobs and
//! dimensions, and non-finite states, leaving the stream fresh.
#![allow(clippy::needless_range_loop)] // index loops mirror the matrix formulas

use mfc_compiler::forms::bandmf::{BandMfKind, BandMfOptions, Bands, compile_bandmf};
use mfc_compiler::forms::blt::compile_blt;
use mfc_compiler::forms::fft::{FftKind, FftMechanism, FftOptions, compile_fft, dense_decoder};
use mfc_compiler::optimize::blt::optimize_blt;
use mfc_compiler::privacy::participation::Participation;
use mfc_compiler::ship::blob::BlobOptions;
use mfc_compiler::workload::Workload;
use mfc_formats::{
    BandedLowRank, Calibration, Decoder, ErrorSummary, F32Table, Header, Mechanism, Neighbouring,
    Sensitivity, SensitivityMethod, encode_f32s,
};
use mfc_runtime::checkpoint::{BlobFingerprint, ReleaseCounter, epoch_noise};
use mfc_runtime::noise::NoiseSource;
use mfc_runtime::{ChaChaNoise, Error, Replay, Shape};

const ROOT: [u8; 32] = *b"replay test root secret, 32 byte";
const DIM: usize = 3;

/// The forms under test.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    Banded,
    Blt,
    Fft(FftKind),
    BandMf,
}

const FORMS: [Form; 5] = [
    Form::Banded,
    Form::Blt,
    Form::Fft(FftKind::Circulant),
    Form::Fft(FftKind::OptimalDecoder),
    Form::BandMf,
];

fn calibrated() -> BlobOptions {
    BlobOptions {
        clip_norm: 1.5,
        calibration: Some(Calibration {
            noise_multiplier: 0.75,
            target: None,
        }),
        ..BlobOptions::default()
    }
}

/// A banded-plus-low-rank blob (`n = 24, h = 3, r = 2`) with coefficients made up here.
fn banded_blob(salt: f32) -> Vec<u8> {
    let (n, h, r) = (24usize, 3usize, 2usize);
    let diagonals = encode_f32s((0..n * h).map(|idx| {
        let (i, k) = (idx / h, idx % h);
        if k > i {
            0.0
        } else {
            1.0 / (1.0 + k as f32) + salt
        }
    }));
    let left = encode_f32s((0..n * r).map(|j| 0.1 + 0.01 * j as f32));
    let right = encode_f32s((0..n * r).map(|j| 0.2 - 0.004 * j as f32));
    Mechanism {
        header: Header {
            workload: mfc_formats::Workload::PrefixSum,
            steps: n as u32,
            participation: mfc_formats::Participation::Single,
            neighbouring: Neighbouring::AddOrRemove,
            sensitivity: Sensitivity {
                value: 1.3,
                method: SensitivityMethod::MaxColumnNorm,
            },
            clip_norm: 1.5,
            calibration: Some(Calibration {
                noise_multiplier: 0.75,
                target: None,
            }),
            error: ErrorSummary {
                sqrt_loss: 1.0,
                optimal_sqrt_loss: None,
                max_step_stddev: 1.0,
                final_step_stddev: 1.0,
            },
            generator: "replay test",
        },
        decoder: Decoder::BandedLowRank(BandedLowRank {
            band: h as u32,
            rank: r as u32,
            diagonals: F32Table::new(&diagonals).unwrap(),
            left: F32Table::new(&left).unwrap(),
            right: F32Table::new(&right).unwrap(),
        }),
    }
    .to_vec()
    .unwrap()
}

/// The blob of `form` (24 steps; the FFT ones in 3 blocks of 8), and the compiled FFT mechanism
/// for its dense decoder.
fn build(form: Form) -> (Vec<u8>, Option<FftMechanism>) {
    let single = Participation::Single;
    match form {
        Form::Banded => (banded_blob(0.0), None),
        Form::Blt => {
            let blt = optimize_blt(24, 3, &single).unwrap();
            let compiled = compile_blt(&blt, 24, 24, &single).unwrap();
            (
                mfc_compiler::forms::blt::encode(&compiled, &calibrated())
                    .unwrap()
                    .bytes,
                None,
            )
        }
        Form::Fft(kind) => {
            let compiled = compile_fft(&FftOptions {
                steps: 24,
                stamps: 3,
                kind,
                participation: single,
            })
            .unwrap();
            let bytes = mfc_compiler::forms::fft::encode(&compiled, &calibrated())
                .unwrap()
                .bytes;
            (bytes, Some(compiled))
        }
        Form::BandMf => {
            let options = BandMfOptions {
                participation: single,
                kind: BandMfKind::Toeplitz,
                bands: Bands::Fixed(4),
                ..BandMfOptions::default()
            };
            let compiled =
                compile_bandmf(&Workload::PrefixSum, 24, &options, &mut |_, _| {}).unwrap();
            let bytes =
                mfc_compiler::forms::bandmf::encode(&compiled, &Workload::PrefixSum, &calibrated())
                    .unwrap()
                    .bytes;
            (bytes, None)
        }
    }
}

/// Noise rows `0..n` of `dim` coordinates, in `f64`.
fn rows(seed: [u8; 32], n: usize, dim: usize) -> Vec<Vec<f64>> {
    let mut noise = ChaChaNoise::from_seed(seed).unwrap();
    (0..n)
        .map(|t| {
            let mut row = vec![0.0f32; dim];
            noise.fill_standard_normal(t as u64, 0, &mut row);
            row.into_iter().map(f64::from).collect()
        })
        .collect()
}

/// The unscaled noise of every release, `noise[t][c]`, computed from the blob's tables alone.
fn reference_noise(
    bytes: &[u8],
    fft: Option<&FftMechanism>,
    seed: [u8; 32],
    dim: usize,
) -> Vec<Vec<f64>> {
    let m = Mechanism::from_bytes(bytes).unwrap();
    let n = m.steps() as usize;
    let f = |t: F32Table<'_>, i: usize| f64::from(t.get(i).unwrap());
    // The noise row `w_u` added at step `u`, then summed (B̂ = S C⁻¹ for the Toeplitz forms).
    let prefix = |w: Vec<Vec<f64>>| -> Vec<Vec<f64>> {
        let mut acc = vec![0.0; dim];
        w.into_iter()
            .map(|row| {
                for c in 0..dim {
                    acc[c] += row[c];
                }
                acc.clone()
            })
            .collect()
    };
    match m.decoder {
        Decoder::BandedLowRank(d) => {
            let (h, r) = (d.band as usize, d.rank as usize);
            let z = rows(seed, n, dim);
            (0..n)
                .map(|t| {
                    (0..dim)
                        .map(|c| {
                            (0..=t)
                                .map(|j| {
                                    let b = if t - j < h {
                                        f(d.diagonals, t * h + t - j)
                                    } else {
                                        (0..r)
                                            .map(|q| f(d.left, t * r + q) * f(d.right, j * r + q))
                                            .sum()
                                    };
                                    b * z[j][c]
                                })
                                .sum()
                        })
                        .collect()
                })
                .collect()
        }
        Decoder::Blt(d) => {
            // r_0 = 1, r_k = Σ_j ω_j θ_j^{k−1}: the first column of C⁻¹.
            let coefficient = |k: usize| -> f64 {
                if k == 0 {
                    return 1.0;
                }
                (0..d.buffers())
                    .map(|j| f(d.omega, j) * f(d.theta, j).powi(k as i32 - 1))
                    .sum()
            };
            let z = rows(seed, n, dim);
            prefix(
                (0..n)
                    .map(|u| {
                        (0..dim)
                            .map(|c| (0..=u).map(|k| coefficient(k) * z[u - k][c]).sum())
                            .collect()
                    })
                    .collect(),
            )
        }
        Decoder::BandMf(d) => {
            // w = C⁻¹ z by dense forward substitution over the encoder's rows.
            let h = d.bands();
            let z = rows(seed, n, dim);
            let mut w = vec![vec![0.0f64; dim]; n];
            for t in 0..n {
                let row = d.row(t).unwrap();
                for c in 0..dim {
                    let past: f64 = (1..h.min(t + 1)).map(|l| f(row, l) * w[t - l][c]).sum();
                    w[t][c] = (z[t][c] - past) / f(row, 0);
                }
            }
            prefix(w)
        }
        Decoder::Fft(d) => {
            // Z: column j of block i, coordinate c, is coordinate c·2m + j of noise row i.
            let b = dense_decoder(fft.unwrap());
            let (block, stamps) = (d.block as usize, d.stamps as usize);
            let mut draws = ChaChaNoise::from_seed(seed).unwrap();
            let mut z = vec![vec![0.0f64; dim]; 2 * n];
            let mut run = vec![0.0f32; 2 * block];
            for i in 0..stamps {
                for c in 0..dim {
                    draws.fill_standard_normal(i as u64, (c * 2 * block) as u64, &mut run);
                    for (j, v) in run.iter().enumerate() {
                        z[i * 2 * block + j][c] = f64::from(*v);
                    }
                }
            }
            (0..n)
                .map(|t| {
                    (0..dim)
                        .map(|c| (0..2 * n).map(|j| b[(t, j)] * z[j][c]).sum())
                        .collect()
                })
                .collect()
        }
        _ => panic!("a form this test does not know"),
    }
}

/// An input row that sometimes exceeds the clip norm.
fn input(t: usize) -> Vec<f32> {
    (0..DIM)
        .map(|c| (((t * 31 + c * 17) % 23) as f32 - 11.0) / 6.0)
        .collect()
}

fn workspace(bytes: &[u8]) -> Vec<f32> {
    let m = Mechanism::from_bytes(bytes).unwrap();
    vec![f32::NAN; Replay::workspace_len(&m, DIM).unwrap()]
}

/// Every release of every form, through `Replay`, against its `f64` reference: within `10⁻⁴`
/// of the largest noise value.
#[test]
fn every_form_through_replay_equals_its_dense_reference() {
    let seed = epoch_noise_seed();
    for form in FORMS {
        let (bytes, fft) = build(form);
        let m = Mechanism::from_bytes(&bytes).unwrap();
        let n = m.steps() as usize;
        let scale = m.noise_stddev().unwrap();
        let zeta = m.header.clip_norm;
        let noise = reference_noise(&bytes, fft.as_ref(), seed, DIM);
        let mut ws = workspace(&bytes);
        // The forms' formulas worked out by hand for these blobs (d = 3): (h + r + 2)·d with
        // (h, r) = (3, 2); (m + 2)·d with m = 3; (m + 3)·d + 2m + 2N·k with m = 8, N = 32,
        // k = 2 or 5; (b̂ + 2)·d with b̂ = 4.
        let expected_len = match form {
            Form::Banded => 21,
            Form::Blt => 15,
            Form::Fft(FftKind::Circulant) => 33 + 16 + 128,
            Form::Fft(_) => 33 + 16 + 320,
            Form::BandMf => 18,
        };
        assert_eq!(Shape::of(&m).unwrap().workspace_len(DIM), Some(ws.len()));
        assert_eq!(ws.len(), expected_len, "{form:?}");
        let mut replay =
            Replay::open(m, DIM, &mut ws, ChaChaNoise::from_seed(seed).unwrap()).unwrap();
        assert!(replay.releases_prefix_sums());
        assert_eq!(replay.horizon() as usize, n);
        let mut sum = [0.0f64; DIM];
        let (mut worst, mut largest) = (0.0f64, 0.0f64);
        let mut release = [0.0f32; DIM];
        for t in 0..n {
            let x = input(t);
            replay.step(&x, &mut release).unwrap();
            let clip = mfc_tests::runtime_clip_factor(&x, zeta);
            for c in 0..DIM {
                sum[c] += clip * f64::from(x[c]);
                let expected = scale * noise[t][c];
                worst = worst.max((f64::from(release[c]) - sum[c] - expected).abs());
                largest = largest.max(expected.abs());
            }
        }
        eprintln!(
            "{form:?}: worst deviation {:.2e} of the noise",
            worst / largest
        );
        assert!(
            worst <= 1e-4 * largest,
            "{form:?}: {worst:e} vs {largest:e}"
        );
        assert_eq!(
            replay.step(&input(n), &mut release),
            Err(Error::StreamFinished { steps: n as u32 })
        );
    }
}

/// The key of epoch 1 of [`ROOT`], which `epoch_noise` keys ChaCha20 with.
fn epoch_noise_seed() -> [u8; 32] {
    mfc_runtime::checkpoint::stream_key(&ROOT, 1)
}

/// A fresh replay of epoch `counter.epoch()` of `root`.
fn open<'a>(
    mechanism: mfc_formats::Validated<'a>,
    ws: &'a mut [f32],
    root: &[u8; 32],
    counter: &ReleaseCounter,
) -> Replay<'a> {
    Replay::open(mechanism, DIM, ws, epoch_noise(root, counter).unwrap()).unwrap()
}

/// The releases of the uninterrupted stream of epoch 1.
fn uninterrupted(bytes: &[u8]) -> Vec<[f32; DIM]> {
    let (m, _) = BlobFingerprint::load(bytes).unwrap();
    let mut ws = workspace(bytes);
    let counter = ReleaseCounter::new(1, 0);
    let mut replay = open(m, &mut ws, &ROOT, &counter);
    (0..replay.horizon() as usize)
        .map(|t| {
            let mut out = [0.0f32; DIM];
            replay.step(&input(t), &mut out).unwrap();
            out
        })
        .collect()
}

/// Runs epoch 1 for `steps` steps with the protocol (step → checkpoint → count) and returns the
/// newest checkpoint and the counter.
fn run_until(bytes: &[u8], steps: usize) -> (Vec<u8>, ReleaseCounter) {
    let (m, fp) = BlobFingerprint::load(bytes).unwrap();
    let mut ws = workspace(bytes);
    let mut counter = ReleaseCounter::new(1, 0);
    let mut replay = open(m, &mut ws, &ROOT, &counter);
    let mut slot = vec![0u8; replay.checkpoint_capacity()];
    let mut len = replay.checkpoint(&fp, &counter, &mut slot).unwrap();
    for t in 0..steps {
        let mut out = [0.0f32; DIM];
        replay.step(&input(t), &mut out).unwrap();
        len = replay.checkpoint(&fp, &counter, &mut slot).unwrap();
        counter.record(&replay).unwrap();
    }
    slot.truncate(len);
    (slot, counter)
}

/// A checkpoint/restore at every step of every form (FFT block boundaries included) continues
/// the uninterrupted stream bit for bit; the restored stream starts at the checkpoint's step.
#[test]
fn a_checkpoint_round_trip_equals_the_uninterrupted_stream_in_every_form() {
    for form in FORMS {
        let (bytes, _) = build(form);
        let reference = uninterrupted(&bytes);
        let n = reference.len();
        for cut in 0..=n {
            let (slot, counter) = run_until(&bytes, cut);
            let (m, fp) = BlobFingerprint::load(&bytes).unwrap();
            let mut ws = workspace(&bytes);
            let mut resumed = open(m, &mut ws, &ROOT, &counter);
            resumed.restore(&fp, &slot, &counter).unwrap();
            assert_eq!(resumed.steps_released() as usize, cut);
            for t in cut..n {
                let mut out = [0.0f32; DIM];
                resumed.step(&input(t), &mut out).unwrap();
                let same = out
                    .iter()
                    .zip(&reference[t])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{form:?} cut {cut} step {t}: {out:?} vs {:?}",
                    reference[t]
                );
            }
            assert!(matches!(
                resumed.step(&input(n), &mut [0.0; DIM]),
                Err(Error::StreamFinished { .. })
            ));
        }
    }
}

/// Restores `slot` into a fresh stream of `bytes` keyed by `root` under `counter`; on refusal,
/// checks that the stream is still fresh (its first release is the uninterrupted stream's).
fn restore(
    bytes: &[u8],
    slot: &[u8],
    root: &[u8; 32],
    counter: &ReleaseCounter,
) -> Result<u32, Error> {
    let (m, fp) = BlobFingerprint::load(bytes).unwrap();
    let mut ws = workspace(bytes);
    let mut replay = open(m, &mut ws, root, counter);
    match replay.restore(&fp, slot, counter) {
        Ok(()) => Ok(replay.steps_released()),
        Err(e) => {
            assert_eq!(replay.steps_released(), 0);
            if root == &ROOT && counter.epoch() == 1 {
                let mut out = [0.0f32; DIM];
                replay.step(&input(0), &mut out).unwrap();
                assert_eq!(out, uninterrupted(bytes)[0], "a refusal changed the stream");
            }
            Err(e)
        }
    }
}

/// `slot` with the state float at `index` set to `value`, reframed with a valid CRC (forged).
fn forge(slot: &[u8], index_from_end: usize, value: f32) -> Vec<u8> {
    let end = 14 + u32::from_le_bytes(slot[10..14].try_into().unwrap()) as usize;
    let mut forged = slot[..end].to_vec();
    let at = end - 4 * (index_from_end + 1);
    forged[at..at + 4].copy_from_slice(&value.to_le_bytes());
    let crc = mfc_runtime::formats::checksum(&forged);
    forged.extend_from_slice(&crc.to_le_bytes());
    forged
}

/// The checkpoint rules hold in every form: stale checkpoints, other epochs, other keys, other
/// blobs, other dimensions, started streams and non-finite states are refused, the stream left
/// fresh; the same checkpoint restores under the right conditions.
#[test]
fn every_form_refuses_the_checkpoints_the_rules_refuse() {
    for form in FORMS {
        let (bytes, _) = build(form);
        let (slot, counter) = run_until(&bytes, 10);
        assert_eq!(restore(&bytes, &slot, &ROOT, &counter), Ok(10), "{form:?}");
        // Stale: the counter says more was released than the checkpoint computed.
        let ahead = ReleaseCounter::new(1, 12);
        assert_eq!(
            restore(&bytes, &slot, &ROOT, &ahead),
            Err(Error::StaleCheckpoint {
                step: 10,
                released: 12
            }),
            "{form:?}"
        );
        // A checkpoint ahead of the counter is accepted (those steps were never emitted).
        assert_eq!(
            restore(&bytes, &slot, &ROOT, &ReleaseCounter::new(1, 4)),
            Ok(10)
        );
        // Another epoch; another key for the same epoch.
        assert_eq!(
            restore(&bytes, &slot, &ROOT, &ReleaseCounter::new(2, 0)),
            Err(Error::CheckpointEpochMismatch {
                checkpoint: 1,
                counter: 2
            }),
            "{form:?}"
        );
        assert_eq!(
            restore(&bytes, &slot, &[0x33; 32], &counter),
            Err(Error::CheckpointKeyMismatch),
            "{form:?}"
        );
        // A non-finite value anywhere in the state (the last float, and one in the middle).
        for value in [f32::NAN, f32::INFINITY] {
            for index in [0, 5] {
                assert_eq!(
                    restore(&bytes, &forge(&slot, index, value), &ROOT, &counter),
                    Err(Error::MalformedCheckpoint),
                    "{form:?} {value} at {index} from the end"
                );
            }
        }
        // Another blob of every form (the same form's other blob for the banded one).
        for other in FORMS.iter().filter(|&&f| f != form) {
            let (other_bytes, _) = build(*other);
            assert!(
                matches!(
                    restore(&other_bytes, &slot, &ROOT, &counter),
                    Err(Error::CheckpointMismatch { .. })
                ),
                "{form:?} into {other:?}"
            );
        }
        // Another dimension.
        let (m, fp) = BlobFingerprint::load(&bytes).unwrap();
        let mut ws = vec![0.0f32; Replay::workspace_len(&m, DIM + 1).unwrap()];
        let noise = epoch_noise(&ROOT, &counter).unwrap();
        let mut wide = Replay::open(m, DIM + 1, &mut ws, noise).unwrap();
        assert_eq!(
            wide.restore(&fp, &slot, &counter),
            Err(Error::CheckpointMismatch {
                field: "dimension or shard"
            }),
            "{form:?}"
        );
        // A started stream.
        let mut ws = workspace(&bytes);
        let mut started = open(m, &mut ws, &ROOT, &counter);
        started.step(&input(0), &mut [0.0; DIM]).unwrap();
        assert_eq!(
            started.restore(&fp, &slot, &counter),
            Err(Error::StreamAlreadyStarted)
        );
    }
    // A banded blob with other coefficients refuses the banded checkpoint.
    let (slot, counter) = run_until(&banded_blob(0.0), 10);
    assert!(matches!(
        restore(&banded_blob(0.01), &slot, &ROOT, &counter),
        Err(Error::CheckpointMismatch { field: "blob" })
    ));
}

/// The BLT checkpoint's key tag and the FFT checkpoint's block noise are what restore checks
/// the key on: changing one of their values (reframed) is refused as another key.
#[test]
fn the_key_check_reads_the_noise_a_checkpoint_carries() {
    // BLT: the state ends with the first min(d, 8) coordinates of z_{t−1}.
    let (bytes, _) = build(Form::Blt);
    let (slot, counter) = run_until(&bytes, 7);
    for index in 0..DIM {
        assert_eq!(
            restore(&bytes, &forge(&slot, index, 0.25), &ROOT, &counter),
            Err(Error::CheckpointKeyMismatch)
        );
    }
    // FFT: the block noise (m·d floats) comes first, then carry, sum and compensation (3·d).
    let (bytes, _) = build(Form::Fft(FftKind::OptimalDecoder));
    for steps in [7, 8, 9] {
        let (slot, counter) = run_until(&bytes, steps);
        let block_noise_end = 3 * DIM;
        // The first coordinate of the block's last row, and the second of its first row.
        let m = 8;
        for index in [block_noise_end + DIM - 1, block_noise_end + m * DIM - 2] {
            assert_eq!(
                restore(&bytes, &forge(&slot, index, 0.25), &ROOT, &counter),
                Err(Error::CheckpointKeyMismatch),
                "{steps} steps, float {index} from the end"
            );
        }
    }
}

/// Each form's memory is its `Shape`'s: the workspace `Replay::workspace_len` asks for (one float
/// less is refused), the shape of the opened stream, and the checkpoint bytes it reserves, which a
/// checkpoint never exceeds — for every form and several dimensions.
#[test]
fn every_form_takes_the_memory_its_shape_gives() {
    for form in FORMS {
        let (bytes, _) = build(form);
        let (m, fp) = BlobFingerprint::load(&bytes).unwrap();
        let shape = Shape::of(&m).unwrap();
        assert_eq!(
            shape.name(),
            match form {
                Form::Banded => "banded",
                Form::Blt => "blt",
                Form::Fft(_) => "fft",
                Form::BandMf => "bandmf",
            }
        );
        for d in [1, 2, 7, 8, 9, 40] {
            let len = Replay::workspace_len(&m, d).unwrap();
            assert_eq!(shape.workspace_len(d), Some(len), "{form:?} d = {d}");
            let mut short = vec![0.0f32; len - 1];
            let noise = ChaChaNoise::from_seed([7; 32]).unwrap();
            assert!(matches!(
                Replay::open(m, d, &mut short, noise),
                Err(Error::WorkspaceTooSmall { needed, found }) if needed == len && found == len - 1
            ));
            let mut ws = vec![f32::NAN; len];
            let counter = ReleaseCounter::new(1, 0);
            let mut replay =
                Replay::open(m, d, &mut ws, epoch_noise(&ROOT, &counter).unwrap()).unwrap();
            assert_eq!(replay.shape(), shape);
            assert_eq!(replay.dim(), d);
            assert!(replay.takes_inputs());
            let capacity = replay.checkpoint_capacity();
            assert_eq!(shape.checkpoint_len(d), Some(capacity), "{form:?} d = {d}");
            let x: Vec<f32> = (0..d).map(|c| c as f32 - 1.5).collect();
            let mut out = vec![0.0f32; d];
            for _ in 0..9 {
                replay.step(&x, &mut out).unwrap();
            }
            let mut slot = vec![0u8; capacity];
            let written = replay.checkpoint(&fp, &counter, &mut slot).unwrap();
            // The head's varints take at most 50 bytes; here they take fewer.
            assert!(written <= capacity && written + 50 > capacity, "{form:?}");
        }
    }
}

/// A shard of a banded or BandMF blob, opened through `Replay` with the whole row's clip factor,
/// releases the unsharded stream's coordinates bit for bit; the BLT and FFT forms have no shards
/// and open only as the whole row.
#[test]
fn replay_shards_release_the_unsharded_coordinates() {
    const ROW: usize = 5;
    for form in FORMS {
        let (bytes, _) = build(form);
        let m = Mechanism::from_bytes(&bytes).unwrap();
        let shape = Shape::of(&m).unwrap();
        let noise = || ChaChaNoise::from_seed([9; 32]).unwrap();
        let row = |t: usize| -> Vec<f32> {
            (0..ROW)
                .map(|c| (((t * 7 + c * 3) % 11) as f32 - 5.0) / 2.0)
                .collect()
        };
        let mut ws = vec![0.0f32; Replay::workspace_len(&m, ROW).unwrap()];
        let mut whole = Replay::open(m, ROW, &mut ws, noise()).unwrap();
        let n = whole.horizon() as usize;
        let reference: Vec<Vec<f32>> = (0..n)
            .map(|t| {
                let mut out = vec![0.0f32; ROW];
                whole.step(&row(t), &mut out).unwrap();
                out
            })
            .collect();
        for range in [0..2, 2..5, 1..4, 0..5] {
            let mut ws = vec![0.0f32; Replay::workspace_len(&m, range.len()).unwrap()];
            let shard = Replay::shard(m, ROW, range.clone(), &mut ws, noise());
            if !shape.shardable() && range != (0..ROW) {
                assert!(
                    matches!(shard, Err(Error::UnsupportedDecoder)),
                    "{form:?} {range:?}"
                );
                continue;
            }
            let mut shard = shard.unwrap();
            assert_eq!(shard.offset(), range.start as u64);
            for (t, expected) in reference.iter().enumerate() {
                let x = row(t);
                let clip = mfc_runtime::clip_factor(&x, shard.clip_norm());
                let mut out = vec![0.0f32; range.len()];
                let part = &x[range.clone()];
                if range == (0..ROW) {
                    shard.step(part, &mut out).unwrap();
                } else {
                    assert_eq!(
                        shard.step(part, &mut out),
                        Err(Error::ClipFactorRequired),
                        "{form:?}"
                    );
                    shard.step_clipped(part, clip, &mut out).unwrap();
                }
                let same = out
                    .iter()
                    .zip(&expected[range.clone()])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{form:?} {range:?} step {t}");
            }
        }
        let mut ws = vec![0.0f32; Replay::workspace_len(&m, ROW).unwrap()];
        assert!(matches!(
            Replay::shard(m, ROW, 3..3, &mut ws, noise()),
            Err(Error::InvalidShard {
                start: 3,
                end: 3,
                row: ROW
            })
        ));
    }
}
