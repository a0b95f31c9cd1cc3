//! The progress line of long work done without the dashboard — `spawn` of a batch of lanes,
//! `verify`, `gc` — drawn with indicatif, on a terminal only: never in JSON mode and never when
//! stdout is not a terminal (then not one byte of it is written).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::OutputFormat;

/// A progress line, or nothing where none may be drawn.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// `done`/`total` with a bar: `gc ━━━━━━━━━━───── 3/5 lanes checked · alpha`.
    pub fn bar(format: OutputFormat, total: u64, template: &str) -> Self {
        Self::made(format, || {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stdout()).with_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("━━─"),
            )
        })
    }

    /// A turning spinner with `message` and the time taken, for work of unknown length.
    pub fn spinner(format: OutputFormat, message: String) -> Self {
        let progress = Self::made(format, || {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout())
                .with_style(
                    ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                )
                .with_message(message)
        });
        if let Some(bar) = &progress.0 {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        progress
    }

    /// No line at all (the caller knows it may not draw one).
    pub fn none() -> Self {
        Self(None)
    }

    fn made(format: OutputFormat, make: impl FnOnce() -> ProgressBar) -> Self {
        let shown = format == OutputFormat::Text && std::io::stdout().is_terminal();
        Self(shown.then(make))
    }

    /// Moves the bar to `done`, saying `message`.
    pub fn set(&self, done: u64, message: String) {
        if let Some(bar) = &self.0 {
            bar.set_position(done);
            bar.set_message(message);
        }
    }

    /// Runs `print` with the line out of the way (it is drawn again below what was printed).
    pub fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// Removes the line: the work is done, and its outcome printed next.
    pub fn clear(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}
