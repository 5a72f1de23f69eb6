//! The model-facing text of shell results: the exact contract of `spec/edges.md` §2.5 for
//! foreground runs and the seed-era status lines of `bash_output` / `bash_kill` (§2.8).
//!
//! Every marker sits on its own line, and the exit marker (`[exit code: N]` or
//! `[killed by signal: SIG]`) is always last, so a front end can parse it back with a regex
//! anchored to a preceding newline and the end of the text; no marker means exit code 0.

use std::path::PathBuf;

use dsh_shell::{CapturedOutput, ShellRunResult, TaskOutput, TaskStatus};
use dsh_tools::ToolError;

/// Shown instead of an empty body, so "printed nothing" is never confused with a lost result.
pub(crate) const NO_OUTPUT: &str = "(no output)";

/// Appends `line` to `text` on a line of its own.
fn push_line(text: &mut String, line: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
}

/// The stream's text plus, when it was cut, where the whole of it is.
fn push_stream(text: &mut String, stream: &CapturedOutput) {
    text.push_str(&stream.text);
    if stream.truncated {
        let path = stream
            .spill_path
            .as_ref()
            .map_or_else(|| "(unavailable)".to_owned(), |p| p.display().to_string());
        push_line(text, &format!("[output truncated; full output: {path}]"));
    }
}

/// What a run printed: stdout, then a `[stderr]` section when stderr is not empty. Empty when
/// the run printed nothing.
fn render_streams(result: &ShellRunResult) -> String {
    let mut text = String::new();
    push_stream(&mut text, &result.stdout);
    if !result.stderr.text.is_empty() || result.stderr.truncated {
        push_line(&mut text, "[stderr]\n");
        push_stream(&mut text, &result.stderr);
    }
    text
}

/// The failure of a foreground run that was stopped before it ended: `error`, followed by
/// what the command had printed by then, so the model (and the user reading the transcript)
/// still sees how far it got instead of only "aborted".
pub(crate) fn stopped_run(error: ToolError, result: &ShellRunResult) -> ToolError {
    let partial = render_streams(result);
    if partial.is_empty() {
        return error;
    }
    ToolError {
        message: format!("{}\n\noutput before it stopped:\n{partial}", error.message),
        ..error
    }
}

/// The result text of a foreground `bash` run that was not aborted.
pub(crate) fn render_run(result: &ShellRunResult) -> String {
    let mut text = render_streams(result);
    if text.is_empty() {
        text.push_str(NO_OUTPUT);
    }
    if result.leftovers > 0 {
        push_line(
            &mut text,
            &format!(
                "[stopped {} leftover process(es) the command left running; start servers and \
                 watchers with run_in_background]",
                result.leftovers
            ),
        );
    }
    if result.timed_out {
        push_line(
            &mut text,
            &format!("[timed out after {}ms]", result.timeout.as_millis()),
        );
    }
    match (&result.signal, result.exit_code) {
        (Some(signal), _) => push_line(&mut text, &format!("[killed by signal: {signal}]")),
        (None, Some(0)) => {}
        (None, Some(code)) => push_line(&mut text, &format!("[exit code: {code}]")),
        // The status could not be collected; claiming exit 0 (no marker) would be a lie.
        (None, None) => push_line(&mut text, "[killed by signal: unknown]"),
    }
    text
}

/// The exit code a front end should show for a rendered result: the number in a trailing
/// `[exit code: N]`, nothing after a signal death, 0 when no marker is present.
pub(crate) fn exit_of(text: &str) -> Option<i32> {
    let last = text.rsplit('\n').next().unwrap_or(text);
    if let Some(code) = last
        .strip_prefix("[exit code: ")
        .and_then(|rest| rest.strip_suffix(']'))
    {
        return code.parse().ok();
    }
    if last.starts_with("[killed by signal: ") {
        return None;
    }
    Some(0)
}

/// `[status: …]` for a background task.
pub(crate) fn render_status(status: &TaskStatus) -> String {
    match status {
        TaskStatus::Running => "[status: running]".to_owned(),
        TaskStatus::Completed { exit_code } => {
            format!("[status: completed, exit code: {exit_code}]")
        }
        TaskStatus::Killed {
            signal: Some(signal),
        } => format!("[status: killed by {signal}]"),
        TaskStatus::Killed { signal: None } => "[status: killed before exit]".to_owned(),
    }
}

/// The result text of one consuming `bash_output` read: the new output (or a note that there
/// is none), a note when some of it only survives on disk, then the status line.
pub(crate) fn render_task_read(out: &TaskOutput) -> String {
    let mut text = if out.delta.is_empty() {
        "(no new output)".to_owned()
    } else {
        out.delta.clone()
    };
    if out.lossy {
        let paths: Vec<String> = [&out.stdout_spill, &out.stderr_spill]
            .into_iter()
            .flatten()
            .map(|p: &PathBuf| p.display().to_string())
            .collect();
        let paths = if paths.is_empty() {
            "(unavailable)".to_owned()
        } else {
            paths.join(", ")
        };
        push_line(
            &mut text,
            &format!("[some output was dropped from memory; full output: {paths}]"),
        );
    }
    push_line(&mut text, &render_status(&out.status));
    text
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn stream(text: &str) -> CapturedOutput {
        CapturedOutput {
            text: text.to_owned(),
            truncated: false,
            spill_path: None,
        }
    }

    fn run(stdout: &str, stderr: &str, exit_code: Option<i32>) -> ShellRunResult {
        ShellRunResult {
            exit_code,
            signal: None,
            timed_out: false,
            aborted: false,
            timeout: Duration::from_millis(1500),
            stdout: stream(stdout),
            stderr: stream(stderr),
            leftovers: 0,
        }
    }

    #[test]
    fn leftovers_are_named_before_the_exit_marker() {
        let mut result = run("hi\n", "", Some(3));
        result.leftovers = 2;
        let text = render_run(&result);
        assert!(text.contains("[stopped 2 leftover process(es)"), "{text}");
        assert_eq!(exit_of(&text), Some(3));
    }

    #[test]
    fn stdout_alone_is_returned_verbatim() {
        assert_eq!(render_run(&run("hi\n", "", Some(0))), "hi\n");
    }

    #[test]
    fn empty_output_says_so_and_markers_follow_on_their_own_lines() {
        assert_eq!(render_run(&run("", "", Some(0))), "(no output)");
        assert_eq!(
            render_run(&run("", "", Some(2))),
            "(no output)\n[exit code: 2]"
        );
    }

    #[test]
    fn stderr_section_starts_on_its_own_line() {
        assert_eq!(
            render_run(&run("out", "err\n", Some(1))),
            "out\n[stderr]\nerr\n[exit code: 1]"
        );
        assert_eq!(render_run(&run("", "err", Some(0))), "[stderr]\nerr");
    }

    #[test]
    fn timeout_marker_precedes_the_exit_marker() {
        let mut result = run("x\n", "", None);
        result.timed_out = true;
        result.signal = Some("SIGTERM".into());
        assert_eq!(
            render_run(&result),
            "x\n[timed out after 1500ms]\n[killed by signal: SIGTERM]"
        );
    }

    #[test]
    fn truncation_names_the_spill_file_or_says_it_is_unavailable() {
        let mut result = run("", "", Some(0));
        result.stdout = CapturedOutput {
            text: "tail\n".into(),
            truncated: true,
            spill_path: Some("/tmp/spill.log".into()),
        };
        result.stderr = CapturedOutput {
            text: "etail".into(),
            truncated: true,
            spill_path: None,
        };
        assert_eq!(
            render_run(&result),
            "tail\n[output truncated; full output: /tmp/spill.log]\n[stderr]\netail\n\
             [output truncated; full output: (unavailable)]"
        );
    }

    #[test]
    fn exit_marker_parses_back() {
        assert_eq!(exit_of("a\n[exit code: 3]"), Some(3));
        assert_eq!(exit_of("a\n[killed by signal: SIGKILL]"), None);
        assert_eq!(exit_of("a\n"), Some(0));
        // A command cannot spoof the marker into the middle of its output.
        assert_eq!(exit_of("[exit code: 9]\nlater"), Some(0));
    }

    #[test]
    fn status_lines_match_the_seed_contract() {
        assert_eq!(render_status(&TaskStatus::Running), "[status: running]");
        assert_eq!(
            render_status(&TaskStatus::Completed { exit_code: 0 }),
            "[status: completed, exit code: 0]"
        );
        assert_eq!(
            render_status(&TaskStatus::Killed {
                signal: Some("SIGTERM".into())
            }),
            "[status: killed by SIGTERM]"
        );
    }

    #[test]
    fn task_read_shows_delta_lossy_note_and_status() {
        let out = TaskOutput {
            delta: "line\n".into(),
            status: TaskStatus::Running,
            lossy: true,
            stdout_spill: Some("/tmp/o.log".into()),
            stderr_spill: None,
        };
        assert_eq!(
            render_task_read(&out),
            "line\n[some output was dropped from memory; full output: /tmp/o.log]\n\
             [status: running]"
        );
        let empty = TaskOutput {
            delta: String::new(),
            status: TaskStatus::Completed { exit_code: 1 },
            lossy: false,
            stdout_spill: None,
            stderr_spill: None,
        };
        assert_eq!(
            render_task_read(&empty),
            "(no new output)\n[status: completed, exit code: 1]"
        );
    }
}
