//! Images named in a prompt: `@shot.png` (as the `@path` completion writes it) or
//! `@"My Shots/shot.png"` attaches the file, as `dsh run --image` does, when it is an image
//! file that exists; anything else stays text.
//!
//! Two ways put such a mention in the draft without typing it: a pasted path (what a terminal
//! sends when a file is dropped on it: plain, quoted, backslash-escaped or a `file://` URL)
//! and an image on the clipboard (Ctrl+V, [`crate::clipboard`]).

use std::path::{Path, PathBuf};

/// The file extensions read as images (PNG, JPEG, GIF, WebP; the bytes are checked later).
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

fn is_image_name(name: &Path) -> bool {
    name.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The `@` mentions of `text`, in order: `@word` up to whitespace, or `@"…"` up to the closing
/// quote (a name with spaces). An `@` inside a word (`me@example.png`) is not a mention.
fn mentions(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut after_space = true;
    while let Some(c) = rest.chars().next() {
        if c == '@' && after_space {
            let tail = &rest[1..];
            if let Some(quoted) = tail.strip_prefix('"')
                && let Some(end) = quoted.find('"')
            {
                found.push(&quoted[..end]);
                rest = &quoted[end + 1..];
                after_space = false;
                continue;
            }
            let end = tail.find(char::is_whitespace).unwrap_or(tail.len());
            // Sentence punctuation after a mention is not part of the name.
            found.push(tail[..end].trim_end_matches([',', '.', ';', ':', ')', '!', '?']));
            rest = &tail[end..];
            after_space = false;
            continue;
        }
        after_space = c.is_whitespace();
        rest = &rest[c.len_utf8()..];
    }
    found
}

/// The existing image files `text` mentions as `@PATH`, relative to `cwd`, in order, each once.
pub fn image_mentions(text: &str, cwd: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for name in mentions(text) {
        if name.is_empty() || !is_image_name(Path::new(name)) {
            continue;
        }
        let path = cwd.join(name);
        if path.is_file() && !found.contains(&path) {
            found.push(path);
        }
    }
    found
}

/// The mention that attaches `path`: relative to `cwd` when under it, quoted when it holds
/// whitespace. `None` for a name no mention can hold (a `"` in it, or not UTF-8).
pub fn mention_for(path: &Path, cwd: &Path) -> Option<String> {
    let shown = path.strip_prefix(cwd).unwrap_or(path).to_str()?;
    if shown.contains('"') || shown.is_empty() {
        return None;
    }
    Some(if shown.contains(char::is_whitespace) {
        format!("@\"{shown}\"")
    } else {
        format!("@{shown}")
    })
}

/// The image file a paste names, if the whole paste is one path to an existing image file:
/// what a terminal types when a file is dropped on it. Accepts the path plain, in single or
/// double quotes, with backslash-escaped spaces, or as a `file://` URL; relative to `cwd`.
pub fn pasted_image(text: &str, cwd: &Path) -> Option<PathBuf> {
    let text = text.trim();
    if text.is_empty() || text.contains('\n') {
        return None;
    }
    let unquoted = ['\'', '"']
        .iter()
        .find_map(|q| text.strip_prefix(*q)?.strip_suffix(*q))
        .map(str::to_owned)
        .unwrap_or_else(|| unescape(text));
    let name = match unquoted.strip_prefix("file://") {
        Some(url) => percent_decode(url.strip_prefix("localhost").unwrap_or(url))?,
        None => unquoted,
    };
    let path = cwd.join(name);
    (is_image_name(&path) && path.is_file()).then_some(path)
}

/// `My\ Shots/a.png` → `My Shots/a.png` (a shell-escaped path, as some terminals drop it).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(next)) => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// `%20` → ` ` in a `file://` URL's path; `None` when an escape is broken or not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_existing_image_files_mentioned_with_an_at_are_attached() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("shots")).unwrap();
        for name in ["a.png", "shots/b.JPG", "notes.txt"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let text = "compare @a.png and @shots/b.JPG, not @notes.txt, @gone.png, a.png or \
                    email@a.png; again @a.png.";
        assert_eq!(
            image_mentions(text, dir.path()),
            [dir.path().join("a.png"), dir.path().join("shots/b.JPG")]
        );
    }

    #[test]
    fn a_quoted_mention_attaches_a_name_with_spaces() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("My Shots")).unwrap();
        std::fs::write(dir.path().join("My Shots/a b.png"), b"x").unwrap();
        let text = "look at @\"My Shots/a b.png\" please, not @\"My Shots/none.png\"";
        assert_eq!(
            image_mentions(text, dir.path()),
            [dir.path().join("My Shots/a b.png")]
        );
    }

    #[test]
    fn a_mention_written_for_a_path_attaches_that_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sp ace")).unwrap();
        for name in ["plain.png", "sp ace/x.webp"] {
            let path = dir.path().join(name);
            std::fs::write(&path, b"x").unwrap();
            let mention = mention_for(&path, dir.path()).unwrap();
            assert_eq!(image_mentions(&mention, dir.path()), vec![path]);
        }
        assert_eq!(mention_for(Path::new("/x/a\"b.png"), dir.path()), None);
    }

    #[test]
    fn a_dropped_image_path_is_recognised_in_each_form_terminals_paste() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("My Shots")).unwrap();
        let file = dir.path().join("My Shots/a b.png");
        std::fs::write(&file, b"x").unwrap();
        let abs = file.to_str().unwrap();
        for pasted in [
            format!("'{abs}'"),
            format!("\"{abs}\" "),
            abs.replace(' ', "\\ "),
            format!("file://{}", abs.replace(' ', "%20")),
            "My\\ Shots/a\\ b.png".to_owned(),
        ] {
            assert_eq!(
                pasted_image(&pasted, dir.path()),
                Some(file.clone()),
                "{pasted}"
            );
        }
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        for not_an_image in ["notes.txt", "gone.png", "a.png\nb.png", "look at this", ""] {
            assert_eq!(
                pasted_image(not_an_image, dir.path()),
                None,
                "{not_an_image}"
            );
        }
    }
}
