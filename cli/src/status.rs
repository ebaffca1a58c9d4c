//! Progress on stderr for the long commands (`mfc compile`, `mfc compare`): a spinner on a
//! terminal, lines with the elapsed seconds in logs.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Progress on stderr: a spinner on a terminal, otherwise (logs of CI or cluster jobs) a line
/// every [`PROGRESS_EVERY`], the first as soon as there is something to say.
pub struct Status {
    command: &'static str,
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Option<Instant>,
}

/// How often a non-terminal stderr gets a progress line.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl Status {
    /// `command` prefixes every line; `started` is when the command began.
    pub fn new(
        command: &'static str,
        started: Instant,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let bar = if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}")?);
            bar.enable_steady_tick(Duration::from_millis(200));
            Some(bar)
        } else {
            None
        };
        Ok(Self {
            command,
            bar,
            started,
            last_line: None,
        })
    }

    /// Shows `message`: on the spinner, or as a line if none was written in the last
    /// [`PROGRESS_EVERY`].
    pub fn say(&mut self, message: &str) {
        self.show(message, false);
    }

    /// Shows `message`: on the spinner, or as a line whatever the last one (for events, such as
    /// a part of `mfc compare` starting or ending).
    pub fn line(&mut self, message: &str) {
        self.show(message, true);
    }

    /// Prints a warning line (`mfc: …`) without the spinner drawing over it.
    pub fn warn(&self, message: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("mfc: {message}")),
            None => eprintln!("mfc: {message}"),
        }
    }

    fn show(&mut self, message: &str, always: bool) {
        match &self.bar {
            Some(bar) => {
                bar.set_message(message.to_string());
                bar.tick();
            }
            None => {
                if always || self.last_line.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                    eprintln!(
                        "{}: {:.0} s: {message}",
                        self.command,
                        self.started.elapsed().as_secs_f64()
                    );
                    self.last_line = Some(Instant::now());
                }
            }
        }
    }

    /// Clears the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
