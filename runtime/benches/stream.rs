//! Time per step of the runtime against the floor of drawing the noise alone, and against a dense
//! replay; peak memory of a d = 10⁶ stream.
//!
//! `cargo bench -p mfc-runtime --features insecure-simulation,parallel --bench stream` prints
//! tables (medians over timed steps, all in one run; the floor and the steps of one row of the
//! table are timed in turn, repetition by repetition, so the ratios compare like with like):
//!
//! - **floor**: one call filling `d` standard normals with the generator (`fill_standard_normal`);
//! - **(h, r)**: `Stream::step` on a banded-plus-low-rank blob of n = 512 steps with random
//!   coefficients, after the ring and `β` are warm (step ≥ h): clipping, sum, noise, release;
//! - **dense n = 64**: the O(n·d) replay a user would write without the factorization — draw
//!   `z_i`, then `(B z)_i = Σ_{j ≤ i} B[i,j] z_j` from all stored rows — at its last step;
//! - **state pass (6,6)**: the (6,6) step with a "generator" that writes a constant: the stream's
//!   own work — its passes over `(h + r + 2)·d` floats of state, input, sum and release — without
//!   drawing; at d = 10⁶ it is bound by memory bandwidth, and a step costs about floor + this;
//! - **parallel**: `ParallelStream` with 2 shards on rayon's pool (the machine's cores);
//! - **clip**: `clip_factor` of one d = 10⁶ row alone;
//! - **prefetch**: the (6,6) step with `PrefetchedNoise` (the next row drawn on a second thread
//!   during the step), against the floor, the state pass and the plain step, each over
//!   consecutive steps, in six interleaved rounds. The state pass is a lower bound for any step:
//!   it is the stream's memory traffic with no drawing at all.
//!
//! Times are printed twice: as this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), which other
//! processes on a shared machine do not inflate by preempting the benchmark, and as wall-clock
//! time. On a quiet machine the two agree.
//!
//! Peak memory is measured in a child process that builds only one d = 10⁶ stream: its VmHWM
//! from `/proc/self/status` before and after, and the peak of a counting allocator over the
//! stream's life (its workspace and release row; the input row is the caller's, allocated first).
//! `MFC_BENCH_QUICK=1` runs fewer steps; `MFC_BENCH_ONE=h,r,d,steps,g` prints one median only
//! (g: 0 ChaCha20, 1 simulation, 2 no draw), for comparing builds.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Gen, Tables};
use mfc_formats::{F32Table, Validated, Workload, encode_f32s};
use mfc_runtime::parallel::ParallelStream;
use mfc_runtime::prefetch::PrefetchedNoise;
use mfc_runtime::{ChaChaNoise, InsecureSimulationNoise, NoiseSource, Stream};

/// The system allocator, counting the bytes in use and their peak.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// Safety: every call is forwarded to `System` unchanged; the counters only observe sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // Safety: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let now = IN_USE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // Safety: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        // Safety: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const SEED: [u8; 32] = *b"mfc runtime benchmark seed, 32 b";
const STEPS: usize = 512;
const DENSE_STEPS: usize = 64;

/// The tables of a banded-plus-low-rank decoder of [`STEPS`] steps with coefficients shaped like
/// the optimized prefix-sum decoders (diagonal `k` near the Toeplitz `binom(2k, k)/4^k`, plus
/// noise; small low-rank factors). The mechanism around them is the tests' (`common::mechanism`).
fn prefix_sum_tables(h: usize, r: usize) -> Tables {
    let mut g = Gen((h * 100 + r) as u64);
    let mut toeplitz = vec![1.0f32; h];
    for k in 1..h {
        toeplitz[k] = toeplitz[k - 1] * (2 * k - 1) as f32 / (2 * k) as f32;
    }
    let diagonals = encode_f32s((0..STEPS * h).map(|idx| {
        let (i, k) = (idx / h, idx % h);
        if k > i {
            0.0
        } else {
            toeplitz[k] * (1.0 + 0.1 * g.next())
        }
    }));
    let left = encode_f32s((0..STEPS * r).map(|_| 0.3 * g.next()));
    let right = encode_f32s((0..STEPS * r).map(|_| 0.3 * g.next()));
    Tables {
        n: STEPS,
        h,
        r,
        diagonals,
        left,
        right,
    }
}

/// The prefix-sum mechanism over `t` (clip norm 1).
fn prefix_sums(t: &Tables) -> Validated<'_> {
    common::mechanism(t, Workload::PrefixSum, 1.0)
}

/// Row `i` of the dense decoder `B̂` of `t` (columns `0 ..= i`).
fn dense_row(t: &Tables, i: usize) -> Vec<f32> {
    let f = |bytes: &[u8], idx: usize| F32Table::new(bytes).unwrap().get(idx).unwrap();
    (0..=i)
        .map(|j| {
            let k = i - j;
            if k < t.h {
                f(&t.diagonals, i * t.h + k)
            } else {
                (0..t.r)
                    .map(|q| f(&t.left, i * t.r + q) * f(&t.right, j * t.r + q))
                    .sum()
            }
        })
        .collect()
}

/// Medians in ms of this thread's CPU time (what the step costs, even while other processes
/// preempt it) and of wall-clock time.
struct Times<const K: usize> {
    cpu: [f64; K],
    wall: [f64; K],
}

/// CPU time this thread has used: unlike wall-clock time, it does not grow when the scheduler
/// runs another process (the benchmark machine is shared), so long steps are not penalized by
/// preemption more than short ones.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Safety: `ts` is a valid, writable timespec for the duration of the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Median of the durations, in milliseconds.
fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

/// Timed repetitions for dimension `d`: enough for a stable median, bounded in time.
fn repetitions(d: usize, quick: bool) -> usize {
    let budget = if quick { 2e6 } else { 3e7 };
    ((budget / d as f64) as usize).clamp(9, STEPS - 12)
}

fn input_row(d: usize) -> Vec<f32> {
    let mut g = Gen(d as u64);
    // Norm well above ζ = 1: clipping is active.
    (0..d).map(|_| g.next()).collect()
}

/// `Stream::step` after the state is warm, restarting the stream when its horizon is reached:
/// the median CPU time in ms (for `MFC_BENCH_ONE`).
fn stream<N: NoiseSource>(tables: &Tables, d: usize, reps: usize, noise: impl Fn() -> N) -> f64 {
    let m = prefix_sums(tables);
    let mut workspace = vec![0.0f32; Stream::<N>::workspace_len(&m, d).unwrap()];
    let x = input_row(d);
    let mut release = vec![0.0f32; d];
    let mut times = Vec::with_capacity(reps);
    while times.len() < reps {
        let mut s = Stream::new(m, d, &mut workspace, noise()).unwrap();
        for _ in 0..=tables.h {
            s.step(&x, &mut release).unwrap();
        }
        while times.len() < reps && s.steps_released() < s.horizon() {
            let start = thread_cpu();
            s.step(black_box(&x), black_box(&mut release)).unwrap();
            times.push(thread_cpu() - start);
        }
    }
    black_box(&release);
    median_ms(times)
}

/// Per repetition, in turn: one floor row, one (4,4) step, one (6,6) step and one (6,6) step
/// without drawing; medians of each. Interleaving keeps the ratios fair when other work on the
/// machine comes and goes. Returns `[floor, (4,4), (6,6), state pass]` in ms.
fn interleaved<N: NoiseSource>(
    tables: &[Tables],
    d: usize,
    reps: usize,
    noise: impl Fn() -> N,
) -> Times<4> {
    assert!(
        reps + 8 <= STEPS,
        "one stream per shape covers all repetitions"
    );
    let (t44, t66) = (&tables[0], &tables[1]);
    let (m44, m66) = (prefix_sums(t44), prefix_sums(t66));
    let mut w44 = vec![0.0f32; Stream::<N>::workspace_len(&m44, d).unwrap()];
    let mut w66 = vec![0.0f32; Stream::<N>::workspace_len(&m66, d).unwrap()];
    let mut wpass = vec![0.0f32; Stream::<N>::workspace_len(&m66, d).unwrap()];
    let mut s44 = Stream::new(m44, d, &mut w44, noise()).unwrap();
    let mut s66 = Stream::new(m66, d, &mut w66, noise()).unwrap();
    let mut pass = Stream::new(m66, d, &mut wpass, NoDraw).unwrap();
    let mut generator = noise();
    let x = input_row(d);
    let mut release = vec![0.0f32; d];
    let mut row = vec![0.0f32; d];
    for _ in 0..=t66.h {
        s44.step(&x, &mut release).unwrap();
        s66.step(&x, &mut release).unwrap();
        pass.step(&x, &mut release).unwrap();
    }
    generator.fill_standard_normal(0, 0, &mut row);
    let mut cpu: [Vec<Duration>; 4] = Default::default();
    let mut wall: [Vec<Duration>; 4] = Default::default();
    let mut timed = |k: usize, f: &mut dyn FnMut()| {
        let (start, start_cpu) = (Instant::now(), thread_cpu());
        f();
        cpu[k].push(thread_cpu() - start_cpu);
        wall[k].push(start.elapsed());
    };
    for t in 0..reps {
        timed(0, &mut || {
            generator.fill_standard_normal(t as u64 + 1, 0, black_box(&mut row))
        });
        timed(1, &mut || {
            s44.step(black_box(&x), black_box(&mut release)).unwrap()
        });
        timed(2, &mut || {
            s66.step(black_box(&x), black_box(&mut release)).unwrap()
        });
        timed(3, &mut || {
            pass.step(black_box(&x), black_box(&mut release)).unwrap()
        });
    }
    black_box((&row, &release));
    Times {
        cpu: cpu.map(median_ms),
        wall: wall.map(median_ms),
    }
}

/// `ParallelStream` steps with 1 and 2 shards, interleaved; medians in ms.
fn parallel_pair<N: NoiseSource + Send>(
    tables: &Tables,
    d: usize,
    reps: usize,
    noise: impl Fn() -> N,
) -> [f64; 2] {
    assert!(reps + 8 <= STEPS);
    let m = prefix_sums(tables);
    let len = Stream::<N>::workspace_len(&m, d).unwrap();
    let (mut w1, mut w2) = (vec![0.0f32; len], vec![0.0f32; len]);
    let mut one = ParallelStream::new(m, d, 1, &mut w1, || Ok(noise())).unwrap();
    let mut two = ParallelStream::new(m, d, 2, &mut w2, || Ok(noise())).unwrap();
    let x = input_row(d);
    let mut release = vec![0.0f32; d];
    for _ in 0..=tables.h {
        one.step(&x, &mut release).unwrap();
        two.step(&x, &mut release).unwrap();
    }
    let mut times: [Vec<Duration>; 2] = Default::default();
    for _ in 0..reps {
        let start = Instant::now();
        one.step(black_box(&x), black_box(&mut release)).unwrap();
        times[0].push(start.elapsed());
        let start = Instant::now();
        two.step(black_box(&x), black_box(&mut release)).unwrap();
        times[1].push(start.elapsed());
    }
    black_box(&release);
    times.map(median_ms)
}

/// Rounds of [`prefetch_quartet`]: more rounds follow the machine's drift more closely.
const PREFETCH_ROUNDS: usize = 6;

/// (6,6) at `d`: the floor, the state pass (`Stream::step` with [`NoDraw`]), `Stream::step`, and
/// `Stream::step` with `PrefetchedNoise`, in turn, in [`PREFETCH_ROUNDS`] rounds of `per_round`
/// timed consecutive calls each, after one untimed call: within a round nothing runs between the
/// steps, so the prefetching worker gets only the head start a real loop gives it, and the call
/// before is not timed because the worker had the other measurements' time to draw it.
/// Wall-clock medians in ms.
fn prefetch_quartet<N: NoiseSource + Send + 'static>(
    tables: &Tables,
    d: usize,
    per_round: usize,
    noise: impl Fn() -> N + Copy,
) -> [f64; 4] {
    assert!(PREFETCH_ROUNDS * (per_round + 1) + 8 <= STEPS);
    let m = prefix_sums(tables);
    let len = Stream::<N>::workspace_len(&m, d).unwrap();
    let mut workspaces = [(); 3].map(|_| vec![0.0f32; len]);
    let [w0, w1, w2] = &mut workspaces;
    let mut state = Stream::new(m, d, w0, NoDraw).unwrap();
    let mut plain = Stream::new(m, d, w1, noise()).unwrap();
    let ahead = PrefetchedNoise::new(noise, 0, d);
    let mut prefetched = Stream::new(m, d, w2, ahead).unwrap();
    let mut generator = noise();
    let x = input_row(d);
    let (mut release, mut row) = (vec![0.0f32; d], vec![0.0f32; d]);
    for _ in 0..=tables.h {
        state.step(&x, &mut release).unwrap();
        plain.step(&x, &mut release).unwrap();
        prefetched.step(&x, &mut release).unwrap();
    }
    let mut times: [Vec<Duration>; 4] = Default::default();
    for round in 0..PREFETCH_ROUNDS {
        let mut t = (round * (per_round + 1)) as u64;
        time_each(&mut times[0], per_round, || {
            generator.fill_standard_normal(t, 0, black_box(&mut row));
            t += 1;
        });
        time_each(&mut times[1], per_round, || {
            state.step(black_box(&x), black_box(&mut release)).unwrap()
        });
        time_each(&mut times[2], per_round, || {
            plain.step(black_box(&x), black_box(&mut release)).unwrap()
        });
        time_each(&mut times[3], per_round, || {
            prefetched
                .step(black_box(&x), black_box(&mut release))
                .unwrap()
        });
    }
    black_box((&row, &release));
    times.map(median_ms)
}

/// Calls `run` once, then appends the wall-clock time of each of `reps` more calls to `times`.
fn time_each(times: &mut Vec<Duration>, reps: usize, mut run: impl FnMut()) {
    run();
    for _ in 0..reps {
        let start = Instant::now();
        run();
        times.push(start.elapsed());
    }
}

/// Dense replay at its last step `i = n − 1`: draw `z_i`, then `Σ_{j ≤ i} B[i,j] z_j` over all
/// `n` stored rows, then clip, sum and add, as the stream does.
fn dense<N: NoiseSource>(tables: &Tables, noise: &mut N, d: usize, reps: usize) -> Times<1> {
    let n = DENSE_STEPS;
    let mut rows = vec![0.0f32; n * d];
    for (j, row) in rows.chunks_exact_mut(d).enumerate() {
        noise.fill_standard_normal(j as u64, 0, row);
    }
    let b = dense_row(tables, n - 1);
    let x = input_row(d);
    let mut sum = vec![0.0f32; d];
    let mut release = vec![0.0f32; d];
    let reps = reps.div_ceil(4).max(5);
    let mut cpu = Vec::with_capacity(reps);
    let wall = (0..reps)
        .map(|_| {
            let (start, start_cpu) = (Instant::now(), thread_cpu());
            let (earlier, last) = rows.split_at_mut((n - 1) * d);
            noise.fill_standard_normal((n - 1) as u64, 0, last);
            let y = black_box(&mut release);
            for (out, &z) in y.iter_mut().zip(last.iter()) {
                *out = b[n - 1] * z;
            }
            for (row, &c) in earlier.chunks_exact(d).zip(&b) {
                for (out, &z) in y.iter_mut().zip(row) {
                    *out += c * z;
                }
            }
            let clip = mfc_runtime::clip_factor(&x, 1.0);
            for ((s, &v), out) in sum.iter_mut().zip(&x).zip(y.iter_mut()) {
                *s += clip * v;
                *out += *s;
            }
            cpu.push(thread_cpu() - start_cpu);
            start.elapsed()
        })
        .collect();
    black_box(&release);
    Times {
        cpu: [median_ms(cpu)],
        wall: [median_ms(wall)],
    }
}

/// Writes a constant instead of drawing: a step with it is the stream's own work (its passes
/// over the state in memory and its arithmetic) without the generator.
struct NoDraw;
impl NoiseSource for NoDraw {
    fn fill_standard_normal(&mut self, _: u64, _: u64, out: &mut [f32]) {
        out.fill(0.5);
    }
}

/// CPU model and cores available to this process.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores")
}

/// The 1-, 5- and 15-minute load averages (other work on the machine skews timings).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// VmHWM (peak resident set) of this process, in MiB.
fn vm_hwm_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Child mode: one d = 10⁶ stream of (h, r), a few steps, then its peak memory.
fn peak_memory_child(h: usize, r: usize) {
    let d = 1_000_000;
    let tables = prefix_sum_tables(h, r);
    // The input row is the caller's data, not the stream's: allocated and touched before.
    let x = input_row(d);
    let before = vm_hwm_mib().unwrap_or(0.0);
    let base = IN_USE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    {
        let m = prefix_sums(&tables);
        let mut workspace = vec![0.0f32; Stream::<ChaChaNoise>::workspace_len(&m, d).unwrap()];
        let mut release = vec![0.0f32; d];
        let mut s =
            Stream::new(m, d, &mut workspace, ChaChaNoise::from_seed(SEED).unwrap()).unwrap();
        for _ in 0..2 * h + 2 {
            s.step(&x, &mut release).unwrap();
        }
        black_box(&release);
    }
    let heap = (PEAK.load(Ordering::Relaxed) - base) as f64 / (1 << 20) as f64;
    let after = vm_hwm_mib().unwrap_or(f64::NAN);
    println!("{before:.1} {after:.1} {heap:.1}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--peak-memory-child") {
        let h = args[i + 1].parse().unwrap();
        let r = args[i + 2].parse().unwrap();
        peak_memory_child(h, r);
        return;
    }
    if let Ok(spec) = std::env::var("MFC_BENCH_ONE") {
        // h,r,d,steps,generator (0 ChaCha20, 1 simulation, 2 no draw): one median, for A/B runs.
        let v: Vec<usize> = spec.split(',').map(|s| s.parse().unwrap()).collect();
        let t = prefix_sum_tables(v[0], v[1]);
        let ms = match v[4] {
            0 => stream(&t, v[2], v[3], || ChaChaNoise::from_seed(SEED).unwrap()),
            1 => stream(&t, v[2], v[3], || {
                InsecureSimulationNoise::from_seed(SEED).unwrap()
            }),
            _ => stream(&t, v[2], v[3], || NoDraw),
        };
        println!("{ms:.4}");
        return;
    }
    let quick = std::env::var_os("MFC_BENCH_QUICK").is_some();
    let chacha = || ChaChaNoise::from_seed(SEED).unwrap();
    let simulation = || InsecureSimulationNoise::from_seed(SEED).unwrap();
    let shapes = [(4, 4), (6, 6)];
    let tables: Vec<Tables> = shapes
        .iter()
        .map(|&(h, r)| prefix_sum_tables(h, r))
        .collect();
    println!(
        "mfc-runtime: time per step in ms (median), f32, blob n = {STEPS}; ratio = time / floor"
    );
    println!(
        "machine: {}; load average at start: {}",
        machine(),
        load_average()
    );
    let mut rows = Vec::new();
    for d in [10_000, 100_000, 1_000_000] {
        let reps = repetitions(d, quick);
        for generator in ["ChaCha20", "Xoshiro256++ (insecure-simulation)"] {
            let (times, dn) = if generator.starts_with("ChaCha") {
                let t = interleaved(&tables, d, reps, chacha);
                (t, dense(&tables[1], &mut chacha(), d, reps))
            } else {
                let t = interleaved(&tables, d, reps, simulation);
                (t, dense(&tables[1], &mut simulation(), d, reps))
            };
            rows.push((generator, d, times, dn));
        }
    }
    for (clock, title) in [
        (0, "this thread's CPU time"),
        (
            1,
            "wall-clock time (inflated by preemption while other processes run)",
        ),
    ] {
        println!();
        println!("{title}:");
        println!();
        println!(
            "| generator | d | floor: d Gaussians | (4,4) step | (4,4) / floor | (6,6) step | (6,6) / floor | state pass (6,6) | dense n={DENSE_STEPS} step | dense / floor |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for (generator, d, times, dn) in &rows {
            let ([f, s44, s66, pass], [dn]) = if clock == 0 {
                (times.cpu, dn.cpu)
            } else {
                (times.wall, dn.wall)
            };
            println!(
                "| {generator} | {d} | {f:.3} | {s44:.3} | {:.2} | {s66:.3} | {:.2} | {pass:.3} | {dn:.3} | {:.2} |",
                s44 / f,
                s66 / f,
                dn / f
            );
        }
    }

    println!();
    println!(
        "parallel: ParallelStream, (6,6), d = 1000000, 2 shards on rayon's pool (wall-clock time)"
    );
    println!();
    println!("| generator | 1 shard step | 2 shards step | speed-up |");
    println!("|---|---|---|---|");
    let d = 1_000_000;
    let reps = repetitions(d, quick);
    let [one, two] = parallel_pair(&tables[1], d, reps, chacha);
    println!("| ChaCha20 | {one:.3} | {two:.3} | {:.2} |", one / two);
    let [one, two] = parallel_pair(&tables[1], d, reps, simulation);
    println!(
        "| Xoshiro256++ (insecure-simulation) | {one:.3} | {two:.3} | {:.2} |",
        one / two
    );
    println!();
    let x = input_row(1_000_000);
    let clip: Vec<Duration> = (0..repetitions(1_000_000, quick))
        .map(|_| {
            let start = Instant::now();
            black_box(mfc_runtime::clip_factor(black_box(&x), 1.0));
            start.elapsed()
        })
        .collect();
    println!(
        "clip_factor of one d = 1000000 row (part of every step above): {:.3} ms (wall-clock median)",
        median_ms(clip)
    );
    println!();
    println!(
        "prefetch: (6,6), d = 1000000, noise drawn one step ahead on a second thread (PrefetchedNoise), consecutive steps (wall-clock time)"
    );
    println!();
    println!(
        "| generator | floor | state pass | state pass / floor | step | step / floor | prefetched step | prefetched / floor |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let per_round = (2 * repetitions(d, quick)).div_ceil(PREFETCH_ROUNDS);
    for (generator, [floor, pass, step, ahead]) in [
        (
            "ChaCha20",
            prefetch_quartet(&tables[1], d, per_round, chacha),
        ),
        (
            "Xoshiro256++ (insecure-simulation)",
            prefetch_quartet(&tables[1], d, per_round, simulation),
        ),
    ] {
        println!(
            "| {generator} | {floor:.3} | {pass:.3} | {:.2} | {step:.3} | {:.2} | {ahead:.3} | {:.2} |",
            pass / floor,
            step / floor,
            ahead / floor
        );
    }
    println!();
    println!("load average after the timings: {}", load_average());
    println!();
    println!("peak memory of one d = 1000000 stream (separate process, ChaCha20, Stream::step)");
    println!();
    println!(
        "| (h, r) | (h+r+2)·4 MB | heap peak: workspace + release | VmHWM before | VmHWM after | VmHWM growth |"
    );
    println!("|---|---|---|---|---|---|");
    let exe = std::env::current_exe().unwrap();
    for (h, r) in shapes {
        let out = Command::new(&exe)
            .args(["--peak-memory-child", &h.to_string(), &r.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<f64> = text
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        let mib = |mb: f64| mb * 1e6 / (1 << 20) as f64;
        println!(
            "| ({h},{r}) | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB |",
            mib(((h + r + 2) * 4) as f64),
            v[2],
            v[0],
            v[1],
            v[1] - v[0]
        );
    }
}
