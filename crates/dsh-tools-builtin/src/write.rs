//! The `write` tool: creates a file, or replaces one this session has read and that has not
//! changed since.

use std::io;
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

const DESCRIPTION: &str = "\
Writes a file with the given content, creating it (and missing parent directories) or \
replacing it entirely.

- `file_path` may be relative to the session's working directory or absolute.
- To replace an existing file you must have read it with `read` in this session, and it must \
not have changed since; otherwise the call is refused and you should read it, then retry.
- Prefer `edit` for changing part of an existing file.";

/// Arguments of `write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// The file to write, relative to the session's working directory or absolute.
    pub file_path: String,
    /// The complete new content of the file.
    pub content: String,
}

/// The `write` tool. Exclusive: it changes files other calls may be reading.
#[derive(Debug, Clone)]
pub struct WriteTool {
    observations: Arc<FileObservations>,
}

impl WriteTool {
    /// A tool checking and updating `observations`.
    pub fn new(observations: Arc<FileObservations>) -> Self {
        Self { observations }
    }
}

fn write_blocking(
    observations: &FileObservations,
    session: Option<&SessionId>,
    path: &Path,
    shown: &str,
    content: &[u8],
    target: &Target,
) -> Result<String, ToolError> {
    let place = &target.place;
    let (created, meta) = match place.metadata() {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::new(format!("{shown} is a directory")));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(ToolError::new(format!("{shown} is not a regular file")));
        }
        Ok(meta) => {
            observations
                .check(session, path, FileVersion::of(&meta))
                .map_err(|v| v.into_error(shown))?;
            // Through a symlink, the file it points at is replaced, not the link.
            let written = target.replace(content, Some(meta.permissions()), shown)?;
            (false, written)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if place.is_dangling_symlink() {
                return Err(ToolError::new(format!(
                    "{shown} is a symbolic link to a missing file; write to its target instead"
                )));
            }
            place
                .create_parent_dirs()
                .map_err(|e| fs_error(shown, &e))?;
            let written = target.replace(content, None, shown)?;
            (true, written)
        }
        Err(e) => return Err(fs_error(shown, &e)),
    };
    // The session wrote this version, so it may go on editing it without another read.
    observations.record(session, path, Some(FileVersion::of(&meta)));
    let verb = if created { "Created" } else { "Updated" };
    Ok(format!("{verb} file {shown} ({} bytes)", content.len()))
}

#[async_trait]
impl TypedTool for WriteTool {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn effects(&self, args: &WriteArgs) -> ToolEffects {
        ToolEffects::none().writes(args.file_path.as_str())
    }

    async fn run(&self, args: WriteArgs, call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        non_empty("file_path", &args.file_path)?;
        let base = working_dir(call)?;
        let path = resolve(&base, &args.file_path);
        let shown = display(&base, &path);
        let session = call.caller().map(|c| c.agent_id.clone());
        if let Some(access) = dsh_tools::routed::<dyn FileAccess>(call.caller()) {
            let text = routed::write(
                access.as_ref(),
                &self.observations,
                session.as_ref(),
                &path,
                &shown,
                &args.content,
            )
            .await?;
            return Ok(ToolOutput::text(text));
        }
        let observations = self.observations.clone();
        let scope = write_place(call);
        let text = off_thread("write", None, move || {
            let target = Target::open(&scope, &path, &shown)?;
            write_blocking(
                &observations,
                session.as_ref(),
                &path,
                &shown,
                args.content.as_bytes(),
                &target,
            )
        })
        .await?;
        Ok(ToolOutput::text(text))
    }

    fn present_call(&self, args: &WriteArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Diff {
            path: args.file_path.clone(),
            old_text: None,
            new_text: args.content.clone(),
        })
    }
}
