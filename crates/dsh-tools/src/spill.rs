//! Spill for every tool: a result too large to hand the model whole is cut to its head and
//! tail, with a line naming a file that holds all of it.
//!
//! Whatever the tool (a `grep` over a large tree, an MCP server's dump, a fetched page), the
//! model gets at most [`ResultSpill::limit`] bytes of text, so one call cannot fill the
//! context window, and loses nothing: the whole text is in a private file (`dsh_fs::PrivateDir`:
//! mode 0700 under `$DSH_HOME/scratch`, created through its descriptor) that `read` and
//! commands can open, removed when the process's scratch directory is. The pipeline applies it
//! to every final result once the tool's own finishing is done, so what the log records is
//! what the model reads.

use std::io::Write as _;
use std::path::PathBuf;

use dsh_fs::PrivateDir;
use dsh_session::ContentBlock;

/// The default limit of a result's text, in bytes.
pub const DEFAULT_SPILL_BYTES: usize = 32 * 1024;

/// Where oversized tool results go (a service on the context: `ctx.get::<ResultSpill>()`).
#[derive(Debug)]
pub struct ResultSpill {
    dir: PrivateDir,
    limit: usize,
}

impl ResultSpill {
    /// Spill files in a private directory made under `base` (`None`: `$XDG_RUNTIME_DIR/dsh`,
    /// else the temp dir), for results over [`DEFAULT_SPILL_BYTES`].
    pub fn new(base: Option<PathBuf>) -> Self {
        Self {
            dir: PrivateDir::new(base, "dsh-results"),
            limit: DEFAULT_SPILL_BYTES,
        }
    }

    /// The same spill for results over `limit` bytes of text (at least 1 KiB).
    #[must_use]
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit.max(1024);
        self
    }

    /// Removes the spill files now (the harness does at shutdown: they are the session's
    /// temporary data, and a process that ends through `exit` runs no destructors).
    pub fn clear(&self) {
        self.dir.remove();
    }

    /// The largest text a result keeps whole.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// `content` as the model should get it: unchanged when its text fits the limit; else
    /// one text block (head, a line naming the file with the whole text, tail) followed by
    /// the content's other blocks (images) in their order.
    pub fn apply(&self, tool: &str, content: Vec<ContentBlock>) -> Vec<ContentBlock> {
        let total: usize = content
            .iter()
            .filter_map(ContentBlock::as_text)
            .map(str::len)
            .sum();
        if total <= self.limit {
            return content;
        }
        let (texts, others): (Vec<ContentBlock>, Vec<ContentBlock>) =
            content.into_iter().partition(|b| b.as_text().is_some());
        let whole = texts
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n");
        let saved = self
            .dir
            .create(&format!("{}.txt", file_safe(tool)))
            .and_then(|(mut file, path)| {
                file.write_all(whole.as_bytes())?;
                Ok(path)
            });
        let head = head_of(&whole, self.limit / 2);
        let tail = tail_of(&whole, self.limit / 2);
        let cut = whole.len() - head.len() - tail.len();
        let note = match saved {
            Ok(path) => format!(
                "[… {cut} of {} bytes cut here. The whole result is in {}: read it with `read` \
                 (offset and limit) or search it with `grep`.]",
                whole.len(),
                path.display()
            ),
            Err(e) => format!(
                "[… {cut} of {} bytes cut here; the whole result could not be saved ({e}).]",
                whole.len()
            ),
        };
        let mut out = vec![ContentBlock::text(format!("{head}\n\n{note}\n\n{tail}"))];
        out.extend(others);
        out
    }
}

/// A tool name as part of a file name (MCP names may hold anything a server chose).
fn file_safe(tool: &str) -> String {
    tool.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// At most `max` bytes from the start of `text`, ending at a line break when one lies in the
/// last quarter (whole lines read better), never inside a character.
fn head_of(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    match head.rfind('\n') {
        Some(i) if i >= end - end / 4 => &head[..=i],
        _ => head,
    }
}

/// At most `max` bytes from the end of `text`, starting after a line break when one lies in
/// the first quarter, never inside a character.
fn tail_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    match tail.find('\n') {
        Some(i) if i < tail.len() / 4 => &tail[i + 1..],
        _ => tail,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn lines(n: usize) -> String {
        (0..n).map(|i| format!("line {i:05} ✓\n")).collect()
    }

    #[test]
    fn a_result_within_the_limit_is_untouched() {
        let spill = ResultSpill::new(Some(tempfile::tempdir().unwrap().keep()));
        let content = vec![ContentBlock::text("small")];
        assert_eq!(spill.apply("t", content.clone()), content);
    }

    #[test]
    fn an_oversized_result_keeps_head_and_tail_and_names_a_private_file_with_all_of_it() {
        let base = tempfile::tempdir().unwrap();
        let spill = ResultSpill::new(Some(base.path().to_path_buf())).with_limit(4096);
        let whole = lines(2_000);
        let out = spill.apply(
            "mcp__srv__dump/all",
            vec![ContentBlock::text(whole.clone())],
        );
        assert_eq!(out.len(), 1);
        let text = out[0].as_text().unwrap();
        assert!(text.len() < 4096 + 400, "{}", text.len());
        assert!(text.starts_with("line 00000 ✓\n"), "{text}");
        assert!(text.ends_with("line 01999 ✓\n"), "{text}");
        let path = text
            .split("The whole result is in ")
            .nth(1)
            .and_then(|rest| rest.split(": read it").next())
            .map(PathBuf::from)
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
        assert!(path.starts_with(base.path()));
        assert!(
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .ends_with("mcp__srv__dump_all.txt")
        );
        let file_mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!((file_mode, dir_mode), (0o600, 0o700));
        // Whole lines at both ends.
        let head_end = text.find("\n\n[…").unwrap();
        assert!(text[..head_end].ends_with('\n') || text[..head_end].ends_with('✓'));
    }

    #[test]
    fn images_stay_after_the_cut_text() {
        let spill = ResultSpill::new(Some(tempfile::tempdir().unwrap().keep())).with_limit(1024);
        let image = ContentBlock::Image {
            attachment: dsh_session::ImageRef {
                attachment_id: format!("sha256:{}", "a".repeat(64)),
                media_type: "image/png".into(),
                bytes: 10,
                width: None,
                height: None,
            },
        };
        let out = spill.apply("t", vec![ContentBlock::text(lines(500)), image.clone()]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1], image);
    }
}
