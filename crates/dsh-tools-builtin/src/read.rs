//! The `read` tool: a numbered, bounded excerpt of a text file, which also records what this
//! session saw for the read-before-write policy.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_tools::{
    FileAccess, ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation,
    TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::blocking::off_thread;
use crate::excerpt::{Excerpt, ExcerptError, Window, excerpt};
use crate::observe::{FileObservations, FileVersion};
use crate::path::{display, non_empty, resolve, working_dir};
use crate::routed;

/// Lines shown when the call names no limit, and the most one call may ask for.
pub(crate) const DEFAULT_LIMIT: u64 = 2000;

const DESCRIPTION: &str = "\
Reads a text file and returns its lines numbered as `N: text`.

- `file_path` may be relative to the session's working directory or absolute.
- By default up to 2000 lines from the start; use `offset` (1-based line number) and `limit` \
to page through longer files. The footer says whether the file ended or where to continue.
- Lines longer than 2000 characters are cut; output is capped at 50 KiB per call.
- Binary files are refused; invalid UTF-8 is shown with replacement characters.
- You must read a file before you `edit` it or overwrite it with `write`.";

/// Arguments of `read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The file to read, relative to the session's working directory or absolute.
    pub file_path: String,
    /// The first line to show, 1-based (default 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// How many lines to show (default and maximum 2000).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The `read` tool. Parallel-safe: it changes nothing but the session's observation record.
#[derive(Debug, Clone)]
pub struct ReadTool {
    observations: Arc<FileObservations>,
}

impl ReadTool {
    /// A tool recording what it shows in `observations`.
    pub fn new(observations: Arc<FileObservations>) -> Self {
        Self { observations }
    }
}

fn window_of(args: &ReadArgs) -> Result<Window, ToolError> {
    let offset = match args.offset {
        None => 1,
        Some(0) => {
            return Err(ToolError::new(
                "invalid offset: expected a positive line number (lines are numbered from 1)",
            ));
        }
        Some(n) => n,
    };
    let limit = match args.limit {
        None => DEFAULT_LIMIT,
        Some(0) => return Err(ToolError::new("invalid limit: expected a positive number")),
        Some(n) => n.min(DEFAULT_LIMIT),
    };
    Ok(Window { offset, limit })
}

/// The result text: path, type, the numbered lines and a footer saying how to go on.
fn render(shown: &str, excerpt: &Excerpt) -> String {
    let mut text = format!("<path>{shown}</path>\n<type>file</type>\n<content>\n");
    for line in &excerpt.lines {
        text.push_str(line);
        text.push('\n');
    }
    if !excerpt.lines.is_empty() {
        text.push('\n');
    }
    let last = excerpt.first + excerpt.lines.len() as u64;
    let (a, b) = (excerpt.first, last.saturating_sub(1));
    let footer = match excerpt.total {
        _ if excerpt.capped => format!(
            "(Output capped at 50 KiB. Showing lines {a}-{b}. Use offset={last} to continue.)"
        ),
        Some(total) if !excerpt.lines.is_empty() && b < total => {
            format!("(Showing lines {a}-{b} of {total}. Use offset={last} to continue.)")
        }
        Some(total) => format!("(End of file - total {total} lines)"),
        None => String::new(),
    };
    text.push_str(&footer);
    text.push_str("\n</content>");
    text
}

/// Everything that touches the file system, run on a blocking thread.
fn read_blocking(
    path: &Path,
    shown: &str,
    window: Window,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Option<FileVersion>, Result<String, ToolError>), ToolError> {
    // Checked by path first: opening a FIFO would block until someone writes to it.
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok((
                None,
                Err(ToolError::new(format!("file not found: {shown}"))),
            ));
        }
        Err(e) => return Err(ToolError::new(format!("cannot read {shown}: {e}"))),
    };
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory; use glob to list it"
        } else {
            "a special file"
        };
        return Err(ToolError::new(format!(
            "{shown} is not a regular file (it is {kind})"
        )));
    }
    let io_error = |e: io::Error| ToolError::new(format!("cannot read {shown}: {e}"));
    let file = File::open(path).map_err(io_error)?;
    let meta = file.metadata().map_err(io_error)?;
    // The version comes from the handle that is read, so a change racing the read makes a
    // later write stale rather than silently accepted.
    let version = FileVersion::of(&meta);
    let outcome = rendered(excerpt(file, window, cancelled), shown, window)?;
    Ok((Some(version), outcome))
}

/// The result text of an excerpt, the model-facing error of a file that cannot be shown, or
/// (outer error) a failure of the read itself. Shared by the local and the routed read.
pub(crate) fn rendered(
    excerpt: Result<Excerpt, ExcerptError>,
    shown: &str,
    window: Window,
) -> Result<Result<String, ToolError>, ToolError> {
    let io_error = |e: io::Error| ToolError::new(format!("cannot read {shown}: {e}"));
    let outcome = match excerpt {
        Ok(excerpt) => Ok(render(shown, &excerpt)),
        Err(ExcerptError::Binary) => Err(ToolError::new(format!(
            "{shown} is a binary file (it contains NUL bytes) and cannot be shown as text; \
             inspect it with bash (e.g. `file` or `xxd | head`)"
        ))),
        Err(ExcerptError::OffsetOutOfRange { total }) => Err(ToolError::new(format!(
            "offset {} is out of range: {shown} has {total} lines",
            window.offset
        ))),
        Err(ExcerptError::Cancelled) => return Err(ToolError::aborted()),
        Err(ExcerptError::Io(e)) => return Err(io_error(e)),
    };
    Ok(outcome)
}

#[async_trait]
impl TypedTool for ReadTool {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &ReadArgs) -> bool {
        true
    }

    fn effects(&self, args: &ReadArgs) -> ToolEffects {
        ToolEffects::none().reads(args.file_path.as_str())
    }

    async fn run(&self, args: ReadArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        non_empty("file_path", &args.file_path)?;
        let window = window_of(&args)?;
        let base = working_dir(call)?;
        let path = resolve(&base, &args.file_path);
        let shown = display(&base, &path);
        if let Some(access) = dsh_tools::routed::<dyn FileAccess>(call.caller()) {
            let session = call.caller().map(|c| &c.agent_id);
            let text = routed::read(
                access.as_ref(),
                &self.observations,
                session,
                &path,
                &shown,
                window,
                call.cancel(),
            )
            .await?;
            return Ok(ToolOutput::text(text));
        }
        let cancel = call.cancel().clone();
        let (version, outcome) = {
            let (path, shown) = (path.clone(), shown.clone());
            off_thread("read", Some(call.cancel()), move || {
                read_blocking(&path, &shown, window, &|| cancel.is_cancelled())
            })
            .await?
        };
        // A file that was looked at (even one found missing, binary, or shorter than the
        // offset) is observed: the session knows what is there.
        let session = call.caller().map(|c| &c.agent_id);
        self.observations.record(session, &path, version);
        Ok(ToolOutput::text(outcome?))
    }

    fn present_call(&self, args: &ReadArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Read {}", args.file_path),
            kind: ToolKind::Read,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excerpt_of(lines: &[&str], first: u64, total: Option<u64>, capped: bool) -> Excerpt {
        Excerpt {
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            first,
            capped,
            total,
        }
    }

    #[test]
    fn footer_says_end_of_file_when_everything_was_shown() {
        let text = render("a.txt", &excerpt_of(&["1: x", "2: y"], 1, Some(2), false));
        assert_eq!(
            text,
            "<path>a.txt</path>\n<type>file</type>\n<content>\n1: x\n2: y\n\n\
             (End of file - total 2 lines)\n</content>"
        );
    }

    #[test]
    fn footer_says_where_to_continue() {
        let text = render("a.txt", &excerpt_of(&["3: x"], 3, Some(9), false));
        assert!(text.ends_with("(Showing lines 3-3 of 9. Use offset=4 to continue.)\n</content>"));
        let text = render("a.txt", &excerpt_of(&["1: x", "2: y"], 1, None, true));
        assert!(text.ends_with(
            "(Output capped at 50 KiB. Showing lines 1-2. Use offset=3 to continue.)\n</content>"
        ));
    }

    #[test]
    fn an_empty_file_reads_as_zero_lines() {
        let text = render("e", &excerpt_of(&[], 0, Some(0), false));
        assert_eq!(
            text,
            "<path>e</path>\n<type>file</type>\n<content>\n(End of file - total 0 lines)\n</content>"
        );
    }

    #[test]
    fn offset_and_limit_are_validated_and_limit_is_capped() {
        let args = |offset, limit| ReadArgs {
            file_path: "x".into(),
            offset,
            limit,
        };
        assert!(window_of(&args(Some(0), None)).is_err());
        assert!(window_of(&args(None, Some(0))).is_err());
        assert_eq!(
            window_of(&args(None, Some(99_999))).unwrap().limit,
            DEFAULT_LIMIT
        );
        assert_eq!(window_of(&args(None, None)).unwrap().offset, 1);
    }
}
