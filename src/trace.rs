//! Phase timings on stderr when `RETRACE_TRACE=1`, for diagnosing slow captures and restores
//! on real workspaces (benchmarks measure; this explains).

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("RETRACE_TRACE").is_some_and(|v| v == "1"))
}

/// Prints `retrace trace: <what>` on stderr when tracing.
pub(crate) fn note(what: &str) {
    if enabled() {
        eprintln!("retrace trace: {what}");
    }
}

/// Notes a store commit and where it was asked for (`#[track_caller]` callers): what a
/// command's syncs are for.
pub(crate) fn commit(at: &std::panic::Location<'_>) {
    if enabled() {
        eprintln!("retrace trace: commit for {}:{}", at.file(), at.line());
    }
}

/// Times the phases of one operation.
pub(crate) struct Phases {
    what: &'static str,
    start: Instant,
    last: Instant,
}

impl Phases {
    pub(crate) fn new(what: &'static str) -> Phases {
        let now = Instant::now();
        Phases {
            what,
            start: now,
            last: now,
        }
    }

    /// Reports the time since the previous mark.
    pub(crate) fn mark(&mut self, phase: &str) {
        if enabled() {
            let now = Instant::now();
            eprintln!(
                "retrace trace: {} {phase}: {:.1} ms (total {:.1} ms, RSS {} KiB, peak {} KiB)",
                self.what,
                (now - self.last).as_secs_f64() * 1e3,
                (now - self.start).as_secs_f64() * 1e3,
                crate::platform::memory_kib(true).unwrap_or(0),
                crate::platform::memory_kib(false).unwrap_or(0),
            );
            self.last = now;
        }
    }
}

/// With `RETRACE_TRACE=1`, prints this program's peak resident memory on stderr
/// (`retrace trace: peak RSS <n> KiB`). It is the kernel's high-water mark of this program's
/// own memory (`VmHWM`), unlike `wait4`'s `ru_maxrss`, which also counts what the parent
/// process held when it started this one.
pub fn report_peak_memory() {
    if enabled()
        && let Some(kib) = crate::platform::memory_kib(false)
    {
        eprintln!("retrace trace: peak RSS {kib} KiB");
    }
}

