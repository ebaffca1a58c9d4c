//! Noise drawn one step ahead on a second thread (feature `parallel`, host only).
//!
//! A step at large `d` is the draw of `z_i` plus a memory-bound pass over the stream's state
//! (`BENCHMARKS.md`), and one thread does them one after the other. A [`NoiseSource`] is a pure
//! function of (seed, step, coordinate), so the next row can be drawn while the current step
//! runs. [`PrefetchedNoise`] keeps one copy of a source on a worker thread and serves the rows
//! of one coordinate range (a stream's) from a buffer: when the stream asks for row `t`, the
//! worker has been drawing it during step `t − 1`, and as soon as it is handed over the worker
//! starts on `t + 1`. Any other request (another range or length), and every request should the
//! worker be gone, is drawn by a second copy of the source on the caller's thread. Either way
//! the values are those of the source: a stream releases exactly what it releases with the
//! source itself (`runtime/tests/shards.rs` checks it bit for bit). It costs two rows of memory
//! and one copy of each row.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::{self, JoinHandle};
use std::vec;
use std::vec::Vec;

use crate::noise::NoiseSource;

/// A row to draw (step and buffer), or a drawn one.
type Row = (u64, Vec<f32>);

/// A [`NoiseSource`] whose rows of coordinates `offset .. offset + len` are drawn one step
/// ahead on a worker thread (module docs).
pub struct PrefetchedNoise<N: NoiseSource> {
    offset: u64,
    len: usize,
    /// The row served now.
    current: Option<Row>,
    /// The step the worker is drawing, if any.
    pending: Option<u64>,
    /// Buffers not in use (two rows in all between `current`, `spare` and the worker).
    spare: Vec<Vec<f32>>,
    jobs: Option<Sender<Row>>,
    done: Receiver<Row>,
    worker: Option<JoinHandle<()>>,
    /// The same source on this thread, for requests the worker does not serve.
    local: N,
}

impl<N: NoiseSource + Send + 'static> PrefetchedNoise<N> {
    /// Serves rows of coordinates `offset .. offset + len` (a stream's [`offset`] and [`dim`])
    /// of the source `make` returns; `make` is called twice (worker and caller's thread) and must
    /// return the same source (same seed) both times, or the rows will differ from the source's.
    ///
    /// [`offset`]: crate::Stream::offset
    /// [`dim`]: crate::Stream::dim
    pub fn new(mut make: impl FnMut() -> N, offset: u64, len: usize) -> Self {
        let mut source = make();
        let (jobs, inbox) = channel::<Row>();
        let (outbox, done) = channel::<Row>();
        let worker = thread::Builder::new()
            .name("mfc-noise-prefetch".into())
            .spawn(move || {
                for (step, mut row) in inbox {
                    source.fill_standard_normal(step, offset, &mut row);
                    if outbox.send((step, row)).is_err() {
                        break;
                    }
                }
            })
            // Without a thread (the OS refused one) every row is drawn on the caller's thread.
            .ok();
        Self {
            offset,
            len,
            current: None,
            pending: None,
            spare: vec![vec![0.0; len], vec![0.0; len]],
            jobs: worker.is_some().then_some(jobs),
            done,
            worker,
            local: make(),
        }
    }

    /// Asks the worker for row `step` in a spare buffer.
    fn request(&mut self, step: u64) {
        let (Some(jobs), Some(row)) = (&self.jobs, self.spare.pop()) else {
            return;
        };
        match jobs.send((step, row)) {
            Ok(()) => self.pending = Some(step),
            Err(back) => self.spare.push(back.0.1),
        }
    }

    /// Makes the row the worker is drawing the current one (the old one becomes a spare).
    fn receive(&mut self) {
        if self.pending.take().is_none() {
            return;
        }
        match self.done.recv() {
            Ok(row) => {
                if let Some((_, old)) = self.current.replace(row) {
                    self.spare.push(old);
                }
            }
            // The worker is gone (with a buffer): from now on every row is drawn here.
            Err(_) => self.jobs = None,
        }
    }

    /// Row `step`, from the worker: the prefetched one, or asked for now.
    fn fetch(&mut self, step: u64) -> Option<&[f32]> {
        if self.current.as_ref().is_none_or(|(t, _)| *t != step) {
            if self.pending != Some(step) {
                self.receive();
                self.request(step);
            }
            self.receive();
            self.request(step.wrapping_add(1));
        }
        match &self.current {
            Some((t, row)) if *t == step => Some(row),
            _ => None,
        }
    }
}

impl<N: NoiseSource + Send + 'static> NoiseSource for PrefetchedNoise<N> {
    fn fill_standard_normal(&mut self, step: u64, offset: u64, out: &mut [f32]) {
        let range = usize::try_from(offset.wrapping_sub(self.offset))
            .ok()
            .and_then(|start| Some(start..start.checked_add(out.len())?))
            .filter(|r| r.end <= self.len);
        if let Some(range) = range {
            if let Some(row) = self.fetch(step).and_then(|row| row.get(range)) {
                out.copy_from_slice(row);
                return;
            }
        }
        self.local.fill_standard_normal(step, offset, out);
    }
}

impl<N: NoiseSource> Drop for PrefetchedNoise<N> {
    fn drop(&mut self) {
        // Closing the job channel ends the worker's loop once its current row is drawn.
        self.jobs = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
