//! The `glob` tool: files whose name or relative path matches a glob, honouring ignore files.

use async_trait::async_trait;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::blocking::off_thread;
use crate::path::{display, non_empty};
use crate::walk::{NamePattern, SearchRoot, is_file, relative, walk};

/// Most paths one call returns; past the result limit the pipeline spills the list (head and
/// tail shown, the whole in a file), so the bound is only against runaway searches.
pub(crate) const MAX_PATHS: usize = 5_000;

const DESCRIPTION: &str = "\
Finds files by glob pattern, e.g. `*.rs` (by file name, at any depth) or `src/**/*.ts` (by \
path relative to the search directory). Returns matching paths in path order, at most \
5,000 (a long list reaches you as its head and tail, with the whole list in a file you can \
`read`).

- `path` is the directory to search (default: the session's working directory).
- Files ignored by `.gitignore`/`.ignore` and version-control directories are skipped; hidden \
files are included.";

/// Arguments of `glob`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// The glob to match, e.g. `*.rs` or `src/**/*.ts`.
    pub pattern: String,
    /// The directory to search (default: the session's working directory).
    #[serde(default)]
    pub path: Option<String>,
}

/// The `glob` tool. Parallel-safe: it only reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

fn glob_blocking(
    root: &SearchRoot,
    pattern: &NamePattern,
    cancelled: &dyn Fn() -> bool,
) -> Result<String, ToolError> {
    if !root.metadata()?.is_dir() {
        return Err(ToolError::new(format!("{} is not a directory", root.shown)));
    }
    let mut found = Vec::new();
    let mut truncated = false;
    for entry in walk(&root.root) {
        if cancelled() {
            return Err(ToolError::aborted());
        }
        // Unreadable entries (permissions, races with deletion) are skipped, as ripgrep does.
        let Ok(entry) = entry else { continue };
        if !is_file(&entry) || !pattern.is_match(relative(&root.root, entry.path())) {
            continue;
        }
        if found.len() == MAX_PATHS {
            truncated = true;
            break;
        }
        found.push(display(&root.base, entry.path()));
    }
    if found.is_empty() {
        return Ok("No files found".to_owned());
    }
    let mut text = found.join("\n");
    if truncated {
        text.push_str(&format!(
            "\n\n(Results are truncated: showing the first {MAX_PATHS} paths. Use a more \
             specific pattern or path.)"
        ));
    }
    Ok(text)
}

#[async_trait]
impl TypedTool for GlobTool {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &GlobArgs) -> bool {
        true
    }

    fn effects(&self, args: &GlobArgs) -> ToolEffects {
        ToolEffects::none().reads(args.path.as_deref().unwrap_or("."))
    }

    async fn run(&self, args: GlobArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let raw = non_empty("pattern", &args.pattern)?;
        let pattern = NamePattern::new(raw)
            .map_err(|e| ToolError::new(format!("invalid glob pattern {raw:?}: {e}")))?;
        let root = SearchRoot::of(call, args.path.as_deref())?;
        let cancel = call.cancel().clone();
        let text = off_thread("glob", Some(call.cancel()), move || {
            glob_blocking(&root, &pattern, &|| cancel.is_cancelled())
        })
        .await?;
        Ok(ToolOutput::text(text))
    }

    fn present_call(&self, args: &GlobArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Find {}", args.pattern),
            kind: ToolKind::Search,
        })
    }
}
