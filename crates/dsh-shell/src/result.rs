//! What a foreground run resolves to.

use std::path::PathBuf;
use std::time::Duration;

/// The bounded view of one output stream.
///
/// The model sees the tail (where errors and summaries usually are); the full text, when it did
/// not fit, is on disk so a tool can point at it instead of flooding the context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedOutput {
    /// The last `max_output_bytes` of the stream, decoded as lossy UTF-8 (a character cut by the
    /// tail boundary is dropped rather than shown as garbage).
    pub text: String,
    /// The stream was longer than the tail.
    pub truncated: bool,
    /// The complete stream, when it was truncated and fitted the spill cap. Private to this user
    /// (file mode 0600 in a 0700 directory).
    pub spill_path: Option<PathBuf>,
}

/// The outcome of a foreground [`run`](crate::ShellExecutor::run).
///
/// A timeout, a cancellation and a non-zero exit are all outcomes, not errors: the tool renders
/// them for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRunResult {
    /// `bash`'s exit code, when it exited rather than died by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended `bash`, e.g. `"SIGKILL"`.
    pub signal: Option<String>,
    /// The executor's own timer fired first and started the kill ladder. Stays true even if the
    /// command then trapped SIGTERM and exited 0.
    pub timed_out: bool,
    /// The request's cancellation token (or the executor's disposal) fired first and started the
    /// kill ladder. Never true together with `timed_out`: the first cause wins.
    pub aborted: bool,
    /// The timeout that applied, so the tool can render "timed out after ...".
    pub timeout: Duration,
    /// Standard output.
    pub stdout: CapturedOutput,
    /// Standard error.
    pub stderr: CapturedOutput,
    /// Processes the command left running (a `setsid` daemon, a forgotten `&`) that its
    /// supervisor killed when it ended; counted only under a supervision program.
    pub leftovers: u32,
}
