//! An image from the system clipboard (Ctrl+V): a screenshot copied a moment ago, attached
//! like a dropped file.
//!
//! A terminal can only paste text, so the image is read the way Claude Code reads it on
//! Linux: through the display server's own clipboard tool (`wl-paste` under Wayland, `xclip`
//! under X11), asked for `image/png`. No clipboard library is linked: those tools are what the
//! desktop already trusts, and without a display (SSH, a container) there is no clipboard to
//! read at all, which the error says, pointing at the ways that do work there.

use std::time::Duration;

use tokio::io::AsyncReadExt;

/// The largest image accepted from the clipboard; `dsh-images` scales what it keeps.
pub const MAX_CLIPBOARD_BYTES: usize = 32 * 1024 * 1024;

/// How long a clipboard tool may take (a clipboard owner that never answers must not hang
/// the key press).
const READ_TIMEOUT: Duration = Duration::from_secs(3);

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Why no image came from the clipboard.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClipboardError {
    /// Neither `WAYLAND_DISPLAY` nor `DISPLAY` is set: no clipboard is reachable.
    #[error(
        "no clipboard here (neither WAYLAND_DISPLAY nor DISPLAY is set); drop the file into \
         the terminal or type @path"
    )]
    NoDisplay,
    /// Every tool was tried; each one's outcome, in order.
    #[error("no image on the clipboard ({0})")]
    NoImage(String),
}

/// Reads a PNG from the clipboard with the first tool that has one.
#[derive(Debug, Clone)]
pub struct ClipboardReader {
    /// Programs with their arguments, tried in order; each prints the PNG on stdout.
    commands: Vec<Vec<String>>,
}

impl ClipboardReader {
    /// The tools for the display this process runs under: `wl-paste` under Wayland, then
    /// `xclip` under X11 (XWayland sessions have both).
    pub fn from_env() -> Result<Self, ClipboardError> {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        let mut commands = Vec::new();
        if set("WAYLAND_DISPLAY") {
            commands.push(args(&["wl-paste", "--no-newline", "--type", "image/png"]));
        }
        if set("DISPLAY") {
            commands.push(args(&[
                "xclip",
                "-selection",
                "clipboard",
                "-t",
                "image/png",
                "-o",
            ]));
        }
        if commands.is_empty() {
            return Err(ClipboardError::NoDisplay);
        }
        Ok(Self { commands })
    }

    /// A reader that runs exactly `commands` (each a program and its arguments): the seam a
    /// test uses to stand in for the display server's tools.
    pub fn with_commands(commands: Vec<Vec<String>>) -> Self {
        Self { commands }
    }

    /// The clipboard's image as PNG bytes; a tool that is missing, fails, times out or
    /// prints something else (text on the clipboard) passes to the next.
    pub async fn read_png(&self) -> Result<Vec<u8>, ClipboardError> {
        let mut tried = Vec::new();
        for command in &self.commands {
            let Some((program, rest)) = command.split_first() else {
                continue;
            };
            match run(program, rest).await {
                Ok(bytes) if bytes.starts_with(PNG_SIGNATURE) => return Ok(bytes),
                Ok(bytes) if bytes.is_empty() => tried.push(format!("{program}: empty")),
                Ok(_) => tried.push(format!("{program}: not a PNG")),
                Err(why) => tried.push(format!("{program}: {why}")),
            }
        }
        Err(ClipboardError::NoImage(tried.join("; ")))
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs one tool: its stdout if it exits 0 within the timeout and the size cap.
async fn run(program: &str, rest: &[String]) -> Result<Vec<u8>, String> {
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "not installed".to_owned(),
            _ => e.to_string(),
        })?;
    let Some(stdout) = child.stdout.take() else {
        return Err("no output".to_owned());
    };
    let read = async {
        let mut bytes = Vec::new();
        // One byte past the cap tells an oversized image from one exactly at it.
        stdout
            .take(MAX_CLIPBOARD_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| e.to_string())?;
        let status = child.wait().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((bytes, status))
    };
    let (bytes, status) = tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| format!("no answer within {} s", READ_TIMEOUT.as_secs()))??;
    if bytes.len() > MAX_CLIPBOARD_BYTES {
        return Err(format!(
            "image larger than {} MiB",
            MAX_CLIPBOARD_BYTES / (1024 * 1024)
        ));
    }
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::*;

    /// An executable script standing in for a clipboard tool.
    fn tool(dir: &Path, name: &str, body: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_str().unwrap().to_owned()
    }

    #[tokio::test]
    async fn the_first_tool_with_a_png_wins_and_others_are_skipped_with_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("shot.png");
        std::fs::write(&png, dsh_testkit::TINY_PNG).unwrap();
        let text = tool(dir.path(), "text", "printf 'just words'");
        let fails = tool(dir.path(), "fails", "exit 1");
        let image = tool(dir.path(), "image", &format!("cat '{}'", png.display()));
        let reader = ClipboardReader::with_commands(vec![
            vec!["/nonexistent/wl-paste".to_owned()],
            vec![text, "ignored-arg".to_owned()],
            vec![fails],
            vec![image],
        ]);
        let bytes = dsh_testkit::bounded(reader.read_png()).await.unwrap();
        assert_eq!(bytes, dsh_testkit::TINY_PNG);
    }

    #[tokio::test]
    async fn no_image_names_what_each_tool_did() {
        let dir = tempfile::tempdir().unwrap();
        let text = tool(dir.path(), "text", "printf 'just words'");
        let empty = tool(dir.path(), "empty", "true");
        let reader = ClipboardReader::with_commands(vec![
            vec!["/nonexistent/xclip".to_owned()],
            vec![text.clone()],
            vec![empty.clone()],
        ]);
        let err = dsh_testkit::bounded(reader.read_png()).await.unwrap_err();
        assert_eq!(
            err,
            ClipboardError::NoImage(format!(
                "/nonexistent/xclip: not installed; {text}: not a PNG; {empty}: empty"
            ))
        );
    }
}
