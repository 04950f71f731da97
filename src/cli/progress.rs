//! An indicatif bar on stderr for long captures and restores: it appears only when stderr is
//! a terminal and the command has been at work for more than a second (counted from the
//! bar's creation, not from each phase: a restore of many short phases shows it too).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

const DELAY: Duration = Duration::from_secs(1);

/// The bar; [`Progress`] for the library's long operations.
pub struct Bar {
    inner: ProgressBar,
    tty: bool,
    started: Instant,
}

impl Bar {
    #[must_use]
    pub fn new() -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        Bar {
            inner: bar,
            tty: std::io::stderr().is_terminal(),
            started: Instant::now(),
        }
    }
}

impl Progress for Bar {
    fn start(&self, phase: &str, total: u64) {
        self.inner.set_length(total);
        self.inner.set_position(0);
        self.inner.set_style(
            ProgressStyle::with_template("{msg:>8} [{bar:30}] {pos}/{len} ({eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        self.inner.set_message(phase.to_string());
    }

    fn advance(&self, n: u64) {
        self.inner.inc(n);
        if self.tty && self.inner.is_hidden() && self.started.elapsed() > DELAY {
            self.inner.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    fn finish(&self) {
        self.inner.finish_and_clear();
        self.inner.set_draw_target(ProgressDrawTarget::hidden());
    }
}
