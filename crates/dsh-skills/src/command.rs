//! Custom slash commands: prompt files a person invokes as `/NAME args`.
//!
//! `<project>/.dsh/commands/NAME.md`, `<project>/.claude/commands/NAME.md` and
//! `$DSH_HOME/commands/NAME.md` (Claude Code's format): the file's body is the prompt, with
//! `$ARGUMENTS` and `$1` … `$9` replaced by what follows the name ([`crate::expand`]).
//! Frontmatter is optional: `description` (else the body's first line) and `argument-hint`
//! are shown where commands are offered; other keys (`allowed-tools`, `model`) are ignored.

use std::path::{Path, PathBuf};

use crate::error::Problem;
use crate::frontmatter;
use crate::places::Root;
use crate::skill::read_text;

/// The longest description taken from a body's first line.
const DESCRIPTION_FROM_BODY_CHARS: usize = 100;

/// A discovered custom command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomCommand {
    /// Its name (the file name without `.md`).
    pub name: String,
    /// What it does, for the command lists.
    pub description: String,
    /// What to type after the name.
    pub argument_hint: Option<String>,
    /// Its file.
    pub file: PathBuf,
    /// The root it was found in.
    pub root: Root,
}

/// Whether `name` can be typed as `/name`: ASCII letters, digits, `-` and `_`, starting with
/// a letter or digit, at most 64 characters.
pub fn valid_name(name: &str) -> bool {
    name.len() <= crate::skill::MAX_NAME_CHARS
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl CustomCommand {
    /// Reads the command in `file`, named `name`.
    pub(crate) fn read(file: &Path, name: &str, root: &Root) -> Result<Option<Self>, Problem> {
        let Some(text) = read_text(file)? else {
            return Ok(None);
        };
        let problem =
            |e: frontmatter::FrontmatterError| Problem::new(file, Some(e.line), e.message);
        let doc = frontmatter::parse(&text).map_err(problem)?;
        let description = match doc.fields.string("description").map_err(problem)? {
            Some(d) if !d.trim().is_empty() => d.split_whitespace().collect::<Vec<_>>().join(" "),
            _ => first_line(&doc.body),
        };
        Ok(Some(CustomCommand {
            name: name.to_owned(),
            description,
            argument_hint: doc.fields.string("argument-hint").map_err(problem)?,
            file: file.to_path_buf(),
            root: root.clone(),
        }))
    }

    /// The prompt for `/name arguments`, read from the file now (an edit takes effect at the
    /// next invocation).
    pub fn expand(&self, arguments: &str) -> Result<String, Problem> {
        let text = read_text(&self.file)?.ok_or_else(|| {
            Problem::new(
                &self.file,
                None,
                "is gone (the command was removed after the session started)",
            )
        })?;
        let doc = frontmatter::parse(&text)
            .map_err(|e| Problem::new(&self.file, Some(e.line), e.message))?;
        let body = doc.body.trim();
        if body.is_empty() {
            return Err(Problem::new(
                &self.file,
                None,
                "has no prompt after its frontmatter",
            ));
        }
        Ok(crate::expand::substitute(body, arguments))
    }
}

/// The body's first non-empty line, without Markdown heading marks, cut to a list's width.
fn first_line(body: &str) -> String {
    let line = body
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() > DESCRIPTION_FROM_BODY_CHARS {
        let cut: String = line.chars().take(DESCRIPTION_FROM_BODY_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_are_typeable_words() {
        for good in ["review", "fix-issue", "pr_2", "Deploy"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "-x", "a b", "a.b", "é", "a/b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_description_falls_back_to_the_first_line_without_heading_marks() {
        assert_eq!(
            first_line("\n\n## Review the diff\nmore"),
            "Review the diff"
        );
        assert_eq!(first_line(""), "");
        assert_eq!(first_line(&"x".repeat(300)).chars().count(), 100);
    }
}
