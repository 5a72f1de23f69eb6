//! The answer channel of `dsh run`: stdout writes whose failure is remembered, not ignored.
//!
//! A run whose answer (or stream-json lines) could not be written has not delivered it, so it
//! must not exit 0 (`dsh run … > /dev/full`). A reader that closed the pipe early (EPIPE, e.g.
//! `| head -1`) chose to stop reading; that ends quietly, as `dsh sessions show` does.
//! Writes happen on the sink's thread and on the main task, hence one process-wide record.

use std::io::{ErrorKind, Write};
use std::sync::Mutex;

/// The first write failure other than a closed pipe.
static FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Writes `line` and a newline to stdout and flushes, remembering a failure.
pub(crate) fn write_line(line: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        record(&e);
    }
}

fn record(e: &std::io::Error) {
    if e.kind() == ErrorKind::BrokenPipe {
        return;
    }
    // A poisoned record still holds a valid Option: keep using it.
    let mut failure = FAILURE.lock().unwrap_or_else(|p| p.into_inner());
    failure.get_or_insert_with(|| e.to_string());
}

/// The first stdout write failure of this process (a closed pipe aside), if any.
pub(crate) fn failure() -> Option<String> {
    FAILURE.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
