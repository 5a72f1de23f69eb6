//! One skill: a folder holding a `SKILL.md` whose frontmatter names and describes it.
//!
//! The cross-vendor format (Agent Skills, Claude Code): `name` (kebab-case, the folder's own
//! name when given or not), `description` (what it is for and when to use it: the model reads
//! only this until it loads the skill), and optionally `argument-hint`,
//! `disable-model-invocation` (only the person can invoke it, as `/name`) and `user-invocable`
//! (`false`: only the model loads it). Other keys (`license`, `metadata`, `allowed-tools`, …)
//! are accepted and ignored. Only the frontmatter is kept at discovery; the body is read again
//! when the skill is loaded, so editing it takes effect at once while the list of skills stays
//! fixed for the session.

use std::path::{Path, PathBuf};

use crate::error::Problem;
use crate::frontmatter::{self, FrontmatterError};
use crate::places::Root;

/// The file of a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// How much of a skill or command file dsh reads (a skill's instructions are meant to be a
/// few hundred lines; a larger file is refused rather than half-read).
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The longest description shown to the model (the Agent Skills limit).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// The longest name.
pub const MAX_NAME_CHARS: usize = 64;

/// A discovered skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// Its name (`/name`, and the `skill` tool's argument).
    pub name: String,
    /// What it is for (one paragraph).
    pub description: String,
    /// What to type after `/name`, when it takes arguments.
    pub argument_hint: Option<String>,
    /// The model sees it and may load it.
    pub model_invocable: bool,
    /// The person may invoke it as `/name`.
    pub user_invocable: bool,
    /// Its folder (its other files are there).
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub file: PathBuf,
    /// The root it was found in.
    pub root: Root,
}

/// What a skill's `SKILL.md` says now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// The instructions (the file without its frontmatter).
    pub body: String,
}

/// Whether `name` is a valid skill name: lowercase letters and digits in words joined by
/// single hyphens, at most [`MAX_NAME_CHARS`].
pub fn valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME_CHARS
        && !name.is_empty()
        && name.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Reads one file found by its place, as text: through [`dsh_fs::read_placed`] (never
/// blocking on a FIFO, bounded, regular files only). `Ok(None)` when nothing is there.
pub(crate) fn read_text(path: &Path) -> Result<Option<String>, Problem> {
    let file = match dsh_fs::read_placed(path, MAX_FILE_BYTES, dsh_fs::Oversize::Refuse) {
        Ok(Some(file)) => file,
        Ok(None) => return Ok(None),
        Err(e) => return Err(Problem::new(path, None, e.to_string())),
    };
    String::from_utf8(file.bytes)
        .map(Some)
        .map_err(|_| Problem::new(path, None, "is not UTF-8 text"))
}

impl Skill {
    /// Reads the skill in `dir` (its `SKILL.md`); `Ok(None)` when the folder has none.
    pub(crate) fn read(dir: &Path, root: &Root) -> Result<Option<Skill>, Problem> {
        let file = dir.join(SKILL_FILE);
        let Some(text) = read_text(&file)? else {
            return Ok(None);
        };
        let folder = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::parse(&text, &folder)
            .map(|parsed| {
                Some(Skill {
                    dir: dir.to_path_buf(),
                    file: file.clone(),
                    root: root.clone(),
                    ..parsed
                })
            })
            .map_err(|e| Problem::new(&file, Some(e.line), e.message))
    }

    /// The skill `text` describes, for a folder named `folder` (paths left empty).
    fn parse(text: &str, folder: &str) -> Result<Skill, FrontmatterError> {
        let doc = frontmatter::parse(text)?;
        let fields = &doc.fields;
        if fields.is_empty() {
            return Err(fields.error(
                "name",
                "no frontmatter: a SKILL.md starts with `---`, `name:` and `description:` lines \
                 and a closing `---`",
            ));
        }
        let name = fields.string("name")?.unwrap_or_else(|| folder.to_owned());
        if !valid_name(&name) {
            return Err(fields.error(
                "name",
                format!(
                    "`{name}` is not a valid skill name (lowercase letters, digits and single \
                     hyphens, at most {MAX_NAME_CHARS} characters)"
                ),
            ));
        }
        if name != folder {
            return Err(fields.error(
                "name",
                format!("the name `{name}` differs from its folder `{folder}`; make them the same"),
            ));
        }
        let description = fields
            .string("description")?
            .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|d| !d.is_empty())
            .ok_or_else(|| {
                fields.error(
                    "description",
                    "`description` is missing or empty: say what the skill is for and when to \
                     use it",
                )
            })?;
        let description = if description.chars().count() > MAX_DESCRIPTION_CHARS {
            let cut: String = description
                .chars()
                .take(MAX_DESCRIPTION_CHARS - 1)
                .collect();
            format!("{cut}…")
        } else {
            description
        };
        Ok(Skill {
            name,
            description,
            argument_hint: fields.string("argument-hint")?,
            model_invocable: !fields.boolean("disable-model-invocation")?.unwrap_or(false),
            user_invocable: fields.boolean("user-invocable")?.unwrap_or(true),
            dir: PathBuf::new(),
            file: PathBuf::new(),
            root: Root {
                dir: PathBuf::new(),
                scope: crate::places::Scope::Project,
            },
        })
    }

    /// Reads the skill's instructions now. The file must still describe this skill (a skill
    /// renamed or broken since the session started is reported, not half-used).
    pub fn load(&self) -> Result<Loaded, Problem> {
        let text = read_text(&self.file)?.ok_or_else(|| {
            Problem::new(
                &self.file,
                None,
                "is gone (the skill was removed after the session started)",
            )
        })?;
        let folder = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Self::parse(&text, &folder)
            .map_err(|e| Problem::new(&self.file, Some(e.line), e.message))?;
        let body = frontmatter::parse(&text)
            .map_err(|e| Problem::new(&self.file, Some(e.line), e.message))?
            .body;
        Ok(Loaded {
            body: body.trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn names_are_kebab_case() {
        for good in ["pdf", "a-b", "x2", "a1-b2-c3"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "PDF", "a_b", "a--b", "-a", "a-", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn frontmatter_is_validated_with_lines() {
        let ok = Skill::parse(
            "---\nname: pdf\ndescription: |\n  Reads PDFs.\n  Use for forms.\nuser-invocable: false\n---\nbody",
            "pdf",
        )
        .unwrap();
        assert_eq!(ok.description, "Reads PDFs. Use for forms.");
        assert!(!ok.user_invocable && ok.model_invocable);
        let missing = Skill::parse("---\nname: pdf\n---\n", "pdf").unwrap_err();
        assert_eq!(missing.line, 1);
        assert!(missing.message.contains("description"), "{missing}");
        let bad_name =
            Skill::parse("---\nname: Pdf Tools\ndescription: x\n---\n", "pdf").unwrap_err();
        assert_eq!(bad_name.line, 2);
        let other_folder =
            Skill::parse("---\nname: pdf\ndescription: x\n---\n", "docs").unwrap_err();
        assert!(other_folder.message.contains("folder"), "{other_folder}");
        let flag = Skill::parse(
            "---\ndescription: x\ndisable-model-invocation: sometimes\n---\n",
            "pdf",
        )
        .unwrap_err();
        assert_eq!(flag.line, 3);
        // Without `name`, the folder names it.
        assert_eq!(
            Skill::parse("---\ndescription: x\n---\n", "pdf")
                .unwrap()
                .name,
            "pdf"
        );
        assert!(Skill::parse("# no frontmatter\n", "pdf").is_err());
    }
}
