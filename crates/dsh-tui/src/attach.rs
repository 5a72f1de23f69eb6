//! Images named in a prompt: `@shot.png` (as the `@path` completion writes it) attaches the
//! file, as `dsh run --image` does, when it is an image file that exists; anything else
//! stays text.

use std::path::{Path, PathBuf};

/// The file extensions read as images (PNG, JPEG, GIF, WebP; the bytes are checked later).
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

/// The existing image files `text` mentions as `@PATH`, relative to `cwd`, in order, each once.
pub fn image_mentions(text: &str, cwd: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for word in text.split_whitespace() {
        let Some(name) = word.strip_prefix('@') else {
            continue;
        };
        // Sentence punctuation after a mention is not part of the name.
        let name = name.trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
        let is_image = Path::new(name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if !is_image {
            continue;
        }
        let path = cwd.join(name);
        if path.is_file() && !found.contains(&path) {
            found.push(path);
        }
    }
    found
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
}
