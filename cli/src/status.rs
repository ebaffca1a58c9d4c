//! Progress on stderr for the long commands (`mfc compile`, `mfc compare`): a spinner on a
//! terminal, lines with the elapsed seconds in logs.

use std::io::IsTerminal;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Progress on stderr: a spinner on a terminal, otherwise (logs of CI or cluster jobs) lines:
/// the first as soon as there is something to say, then at most one per [`PROGRESS_EVERY`] and,
/// with a heartbeat, at least one (the latest message, repeated if the work has not reported
/// since: a phase without progress events of its own still shows).
pub struct Status {
    command: &'static str,
    bar: Option<ProgressBar>,
    started: Instant,
    log: Arc<(Mutex<Log>, Condvar)>,
    heartbeat: Option<JoinHandle<()>>,
}

/// What the log's heartbeat shares with the command's thread.
#[derive(Default)]
struct Log {
    latest: Option<String>,
    last_line: Option<Instant>,
    finished: bool,
}

/// How often a non-terminal stderr gets a progress line.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl Status {
    /// `command` prefixes every line; `started` is when the command began. With `heartbeat`, a
    /// log gets the latest message again when no line was written for [`PROGRESS_EVERY`] (for
    /// work whose phases report their start only); without, only the lines said.
    pub fn new(
        command: &'static str,
        started: Instant,
        heartbeat: bool,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let log = Arc::new((Mutex::new(Log::default()), Condvar::new()));
        let (bar, heartbeat) = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
            bar.enable_steady_tick(Duration::from_millis(200));
            (Some(bar), None)
        } else if !heartbeat {
            (None, None)
        } else {
            let log = Arc::clone(&log);
            let heartbeat = std::thread::spawn(move || {
                let (state, wake) = &*log;
                let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                while !state.finished {
                    let due = state.last_line.map_or(PROGRESS_EVERY, |t| {
                        PROGRESS_EVERY.saturating_sub(t.elapsed())
                    });
                    if due.is_zero() {
                        if let Some(message) = &state.latest {
                            print_line(command, started, message);
                        }
                        state.last_line = Some(Instant::now());
                        continue;
                    }
                    state = wake
                        .wait_timeout(state, due)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            });
            (None, Some(heartbeat))
        };
        Ok(Self {
            command,
            bar,
            started,
            log,
            heartbeat,
        })
    }

    /// Shows `message`: on the spinner, or in the log at once if no line was written in the
    /// last [`PROGRESS_EVERY`] (else with the next line the heartbeat writes).
    pub fn say(&mut self, message: &str) {
        self.show(message, false);
    }

    /// Shows `message`: on the spinner, or as a line whatever the last one (for events, such as
    /// a part of `mfc compare` starting or ending).
    pub fn line(&mut self, message: &str) {
        self.show(message, true);
    }

    /// Prints a warning line (`mfc: warning: …`) without the spinner drawing over it.
    pub fn warn(&self, message: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("mfc: warning: {message}")),
            None => eprintln!("mfc: warning: {message}"),
        }
    }

    fn show(&mut self, message: &str, always: bool) {
        match &self.bar {
            Some(bar) => {
                bar.set_message(message.to_string());
                bar.tick();
            }
            None => {
                let mut state = self.log.0.lock().unwrap_or_else(PoisonError::into_inner);
                if always
                    || state
                        .last_line
                        .is_none_or(|t| t.elapsed() >= PROGRESS_EVERY)
                {
                    print_line(self.command, self.started, message);
                    state.last_line = Some(Instant::now());
                }
                state.latest = Some(message.to_string());
            }
        }
    }

    /// Clears the spinner, or stops the log's heartbeat.
    pub fn finish(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        self.stop_heartbeat();
    }

    fn stop_heartbeat(&mut self) {
        if let Some(heartbeat) = self.heartbeat.take() {
            self.log
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .finished = true;
            self.log.1.notify_all();
            let _ = heartbeat.join();
        }
    }
}

impl Drop for Status {
    /// A command that fails stops the heartbeat too (before its error is printed).
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

/// One progress line of a log: `command: seconds since it began: message`.
fn print_line(command: &str, started: Instant, message: &str) {
    eprintln!(
        "{command}: {:.0} s: {message}",
        started.elapsed().as_secs_f64()
    );
}
