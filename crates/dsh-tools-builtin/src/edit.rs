//! The `edit` tool: a literal, uniqueness-checked string replacement in a file this session
//! has read and that has not changed since.

use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_session::SessionId;
use dsh_tools::{
    FileAccess, ToolCallContext, ToolEffects, ToolError, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::blocking::off_thread;
use crate::observe::{FileObservations, FileVersion};
use crate::path::{display, non_empty, resolve, working_dir};
use crate::place::{Target, fs_error, write_place};
use crate::routed;

/// Code of an edit whose `old_string` does not occur in the file.
pub const EDIT_NO_MATCH: &str = "EDIT_NO_MATCH";
/// Code of an edit whose `old_string` occurs more than once without `replace_all`.
pub const EDIT_AMBIGUOUS: &str = "EDIT_AMBIGUOUS";

/// Largest file `edit` loads; bigger files are edited with other means rather than pulled
/// into memory whole.
const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

const DESCRIPTION: &str = "\
Replaces text in a file: `old_string` is matched literally (including whitespace and \
indentation) and replaced by `new_string`.

- `old_string` must occur exactly once unless `replace_all` is true; include enough \
surrounding lines to make it unique.
- You must have read the file with `read` in this session, and it must not have changed \
since; otherwise the call is refused and you should read it, then retry. Copy `old_string` \
from the file content without the `N: ` line-number prefix.";

/// Arguments of `edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EditArgs {
    /// The file to change, relative to the session's working directory or absolute.
    pub file_path: String,
    /// The exact text to replace (non-empty).
    pub old_string: String,
    /// The replacement text (must differ from `old_string`).
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// The `edit` tool. Exclusive: it changes files other calls may be reading.
#[derive(Debug, Clone)]
pub struct EditTool {
    observations: Arc<FileObservations>,
}

impl EditTool {
    /// A tool checking and updating `observations`.
    pub fn new(observations: Arc<FileObservations>) -> Self {
        Self { observations }
    }
}

/// `content` with `old` replaced by `new` (every occurrence, or the only one), and how many
/// were replaced.
fn replace(content: &[u8], old: &[u8], new: &[u8], all: bool) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(content.len());
    let mut last = 0;
    let mut count = 0;
    for at in memchr::memmem::find_iter(content, old) {
        out.extend_from_slice(&content[last..at]);
        out.extend_from_slice(new);
        last = at + old.len();
        count += 1;
        if !all {
            break;
        }
    }
    out.extend_from_slice(&content[last..]);
    (out, count)
}

/// The edited content and how many places changed, or the model-facing error of an
/// `old_string` that matches nowhere or (without `replace_all`) more than once. Shared by the
/// local and the routed edit.
pub(crate) fn apply(
    content: &[u8],
    args: &EditArgs,
    shown: &str,
) -> Result<(Vec<u8>, usize), ToolError> {
    let old = args.old_string.as_bytes();
    let occurrences = memchr::memmem::find_iter(content, old).count();
    match occurrences {
        0 => {
            return Err(ToolError::coded(
                "EditMatchError",
                EDIT_NO_MATCH,
                format!(
                    "old_string was not found in {shown}; it must match the file exactly, \
                     including whitespace and indentation (read the file again to see its \
                     current content)"
                ),
            ));
        }
        n if n > 1 && !args.replace_all => {
            return Err(ToolError::coded(
                "EditMatchError",
                EDIT_AMBIGUOUS,
                format!(
                    "old_string matches {n} places in {shown}; include more surrounding lines \
                     to make it unique, or set replace_all to replace every occurrence"
                ),
            ));
        }
        _ => {}
    }
    Ok(replace(
        content,
        old,
        args.new_string.as_bytes(),
        args.replace_all,
    ))
}

fn edit_blocking(
    observations: &FileObservations,
    session: Option<&SessionId>,
    path: &Path,
    shown: &str,
    args: &EditArgs,
    target: &Target,
) -> Result<String, ToolError> {
    let place = &target.place;
    let meta = match place.metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ToolError::new(format!(
                "file not found: {shown} (use write to create a file)"
            )));
        }
        Err(e) => return Err(fs_error(shown, &e)),
    };
    if !meta.is_file() {
        return Err(ToolError::new(format!("{shown} is not a regular file")));
    }
    let mut file = place.open_read().map_err(|e| fs_error(shown, &e))?;
    // Checked on the handle that is read, so the bytes edited are the version observed.
    let meta = file.metadata().map_err(|e| fs_error(shown, &e))?;
    observations
        .check(session, path, FileVersion::of(&meta))
        .map_err(|v| v.into_error(shown))?;
    if meta.len() > MAX_EDIT_BYTES {
        return Err(ToolError::new(format!(
            "{shown} is too large to edit ({} bytes; the limit is {MAX_EDIT_BYTES})",
            meta.len()
        )));
    }
    let mut content = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut content)
        .map_err(|e| fs_error(shown, &e))?;
    drop(file);
    let (updated, count) = apply(&content, args, shown)?;
    let meta = target.replace(&updated, Some(meta.permissions()), shown)?;
    observations.record(session, path, Some(FileVersion::of(&meta)));
    let plural = if count == 1 { "" } else { "s" };
    Ok(format!(
        "Edited file {shown}: replaced {count} occurrence{plural}"
    ))
}

#[async_trait]
impl TypedTool for EditTool {
    type Args = EditArgs;

    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effects(&self, args: &EditArgs) -> ToolEffects {
        ToolEffects::none().writes(args.file_path.as_str())
    }

    async fn run(&self, args: EditArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        non_empty("file_path", &args.file_path)?;
        if args.old_string.is_empty() {
            return Err(ToolError::new(
                "invalid old_string: expected a non-empty string",
            ));
        }
        if args.old_string == args.new_string {
            return Err(ToolError::new(
                "invalid new_string: it must differ from old_string",
            ));
        }
        let base = working_dir(call)?;
        let path = resolve(&base, &args.file_path);
        let shown = display(&base, &path);
        let session = call.caller().map(|c| c.agent_id.clone());
        if let Some(access) = dsh_tools::routed::<dyn FileAccess>(call.caller()) {
            let text = routed::edit(
                access.as_ref(),
                &self.observations,
                session.as_ref(),
                &path,
                &shown,
                &args,
            )
            .await?;
            return Ok(ToolOutput::text(text));
        }
        let observations = self.observations.clone();
        let scope = write_place(call);
        let text = off_thread("edit", None, move || {
            let target = Target::open(&scope, &path, &shown)?;
            edit_blocking(
                &observations,
                session.as_ref(),
                &path,
                &shown,
                &args,
                &target,
            )
        })
        .await?;
        Ok(ToolOutput::text(text))
    }

    fn present_call(&self, args: &EditArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Diff {
            path: args.file_path.clone(),
            old_text: Some(args.old_string.clone()),
            new_text: args.new_string.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_first_or_all_occurrences_literally() {
        assert_eq!(replace(b"a.b.a", b"a", b"x", false), (b"x.b.a".to_vec(), 1));
        assert_eq!(replace(b"a.b.a", b"a", b"x", true), (b"x.b.x".to_vec(), 2));
        assert_eq!(replace(b"aaa", b"aa", b"b", true), (b"ba".to_vec(), 1));
        assert_eq!(replace(b"x.*y", b".*", b"-", false), (b"x-y".to_vec(), 1));
    }
}
