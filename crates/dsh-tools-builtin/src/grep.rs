//! The `grep` tool: lines matching a regular expression, across files, honouring ignore
//! files, with ripgrep's searcher.

use std::io;

use async_trait::async_trait;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::blocking::off_thread;
use crate::excerpt::MAX_LINE_CHARS;
use crate::path::{display, non_empty};
use crate::walk::{LINE_CUT, NamePattern, SearchRoot, is_file, relative, walk};

/// Most matching lines one call returns; past the result limit the pipeline spills the list
/// (head and tail shown, the whole in a file), so the bound is only against runaway searches.
pub(crate) const MAX_MATCHES: usize = 5_000;

/// Longest line the searcher buffers; a file with a longer line is skipped rather than
/// loaded whole.
const HEAP_LIMIT: usize = 16 * 1024 * 1024;

const DESCRIPTION: &str = "\
Searches file contents with a regular expression (Rust regex syntax, like ripgrep) and \
returns matching lines as `path:line: text`, in path order, at most 5,000 (a long list \
reaches you as its head and tail, with the whole list in a file you can `read`).

- `path` is the file or directory to search (default: the session's working directory).
- `include` limits the search to files matching a glob, e.g. `*.rs` or `*.{ts,tsx}`.
- Files ignored by `.gitignore`/`.ignore`, version-control directories and binary files are \
skipped; hidden files are included. Lines longer than 2000 characters are cut.";

/// Arguments of `grep`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// The regular expression to search for.
    pub pattern: String,
    /// The file or directory to search (default: the session's working directory).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs`.
    #[serde(default)]
    pub include: Option<String>,
}

/// The `grep` tool. Parallel-safe: it only reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

fn searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .heap_limit(Some(HEAP_LIMIT))
        .build()
}

/// The line without its terminator, cut to [`MAX_LINE_CHARS`].
fn shown_line(line: &str) -> String {
    let line = line.trim_end_matches(['\n', '\r']);
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => format!("{}{LINE_CUT}", &line[..end]),
        None => line.to_owned(),
    }
}

fn grep_blocking(
    root: &SearchRoot,
    matcher: &RegexMatcher,
    include: Option<&NamePattern>,
    cancelled: &dyn Fn() -> bool,
) -> Result<String, ToolError> {
    root.metadata()?;
    let mut searcher = searcher();
    let mut found: Vec<String> = Vec::new();
    let mut truncated = false;
    for entry in walk(&root.root) {
        if cancelled() {
            return Err(ToolError::aborted());
        }
        let Ok(entry) = entry else { continue };
        if !is_file(&entry) {
            continue;
        }
        if include.is_some_and(|p| !p.is_match(relative(&root.root, entry.path()))) {
            continue;
        }
        let shown = display(&root.base, entry.path());
        let result = searcher.search_path(
            matcher,
            entry.path(),
            Lossy(|number, line| {
                if found.len() == MAX_MATCHES {
                    truncated = true;
                    return Ok::<_, io::Error>(false);
                }
                found.push(format!("{shown}:{number}: {}", shown_line(line)));
                Ok(true)
            }),
        );
        if let Err(error) = result {
            // Unreadable files and over-long lines are skipped, as ripgrep does.
            tracing::debug!(path = %shown, %error, "grep skipped a file");
        }
        if truncated {
            break;
        }
    }
    if found.is_empty() {
        return Ok("No matches found".to_owned());
    }
    let mut text = found.join("\n");
    if truncated {
        text.push_str(&format!(
            "\n\n(Results are truncated: showing the first {MAX_MATCHES} matches. Use a more \
             specific pattern, path or include.)"
        ));
    }
    Ok(text)
}

#[async_trait]
impl TypedTool for GrepTool {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &GrepArgs) -> bool {
        true
    }

    fn effects(&self, args: &GrepArgs) -> ToolEffects {
        ToolEffects::none().reads(args.path.as_deref().unwrap_or("."))
    }

    async fn run(&self, args: GrepArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let raw = non_empty("pattern", &args.pattern)?;
        let matcher = RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(raw)
            .map_err(|e| ToolError::new(format!("invalid regex {raw:?}: {e}")))?;
        let include = match args.include.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(glob) => Some(
                NamePattern::new(glob)
                    .map_err(|e| ToolError::new(format!("invalid include glob {glob:?}: {e}")))?,
            ),
        };
        let root = SearchRoot::of(call, args.path.as_deref())?;
        let cancel = call.cancel().clone();
        let text = off_thread("grep", Some(call.cancel()), move || {
            grep_blocking(&root, &matcher, include.as_ref(), &|| cancel.is_cancelled())
        })
        .await?;
        Ok(ToolOutput::text(text))
    }

    fn present_call(&self, args: &GrepArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Search for {}", args.pattern),
            kind: ToolKind::Search,
        })
    }
}
