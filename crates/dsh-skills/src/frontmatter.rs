//! Frontmatter: the YAML block between `---` lines at the top of a skill or command file.
//!
//! Skills (`SKILL.md`) and custom commands (`NAME.md`) are both Markdown files whose first
//! lines may be a YAML mapping fenced by `---`. This module splits the file and reads the
//! mapping; what each kind of file requires of it is the caller's. Every error carries the
//! 1-based line *of the file*, so a person can jump to it.

use yaml_rust2::{Yaml, YamlLoader};

/// The fence line.
const FENCE: &str = "---";

/// A file split into its frontmatter and body.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The mapping, empty when the file has no frontmatter.
    pub fields: Fields,
    /// Everything after the closing fence (the whole file without frontmatter).
    pub body: String,
}

/// The top-level keys of a frontmatter mapping, with the file line each is written on.
#[derive(Clone, Debug, PartialEq)]
pub struct Fields {
    entries: Vec<(String, Yaml, usize)>,
    /// The line of the opening fence (1 when there is frontmatter), where a missing key is
    /// reported.
    start: usize,
}

/// A frontmatter problem, at a line of the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FrontmatterError {
    /// The 1-based line of the file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl FrontmatterError {
    fn at(line: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }
}

/// Splits `text` into frontmatter and body and parses the frontmatter. A file that does not
/// start with a `---` line has none (its whole text is the body); one that opens the fence
/// and never closes it is an error, as is YAML that is not a mapping.
pub fn parse(text: &str) -> Result<Document, FrontmatterError> {
    // A BOM is an editor's, not the author's.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != FENCE {
        return Ok(Document {
            fields: Fields {
                entries: Vec::new(),
                start: 1,
            },
            body: text.to_owned(),
        });
    }
    let mut yaml = String::new();
    let mut consumed = first.len();
    let mut closed = false;
    for line in lines {
        consumed += line.len();
        if line.trim_end() == FENCE {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(FrontmatterError::at(
            1,
            "the frontmatter opened with `---` is never closed (add a `---` line after it)",
        ));
    }
    let fields = mapping(&yaml)?;
    Ok(Document {
        fields,
        body: text[consumed..].to_owned(),
    })
}

/// The YAML between the fences (which starts on file line 2) as top-level fields.
fn mapping(yaml: &str) -> Result<Fields, FrontmatterError> {
    // File line of the YAML's first line.
    const OFFSET: usize = 1;
    let docs = YamlLoader::load_from_str(yaml).map_err(|e| {
        FrontmatterError::at(
            e.marker().line() + OFFSET,
            format!("the frontmatter is not valid YAML: {}", e.info()),
        )
    })?;
    let mut fields = Fields {
        entries: Vec::new(),
        start: 1,
    };
    let hash = match docs.into_iter().next() {
        None | Some(Yaml::Null) => return Ok(fields),
        Some(Yaml::Hash(hash)) => hash,
        Some(_) => {
            return Err(FrontmatterError::at(
                1 + OFFSET,
                "the frontmatter must be a mapping of `key: value` lines",
            ));
        }
    };
    for (key, value) in hash {
        let Yaml::String(key) = key else {
            continue;
        };
        let line = key_line(yaml, &key).map_or(1 + OFFSET, |l| l + OFFSET);
        fields.entries.push((key, value, line));
    }
    Ok(fields)
}

/// The 1-based line (within `yaml`) where top-level `key` is written: a line starting with
/// the key (bare or quoted) followed by `:`.
fn key_line(yaml: &str, key: &str) -> Option<usize> {
    yaml.lines()
        .position(|line| {
            [key.to_owned(), format!("\"{key}\""), format!("'{key}'")]
                .iter()
                .any(|k| {
                    line.strip_prefix(k.as_str())
                        .is_some_and(|rest| rest.trim_start().starts_with(':'))
                })
        })
        .map(|i| i + 1)
}

impl Fields {
    /// Whether the file had no frontmatter keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn get(&self, key: &str) -> Option<(&Yaml, usize)> {
        self.entries
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, line)| (v, *line))
    }

    /// The line `key` is written on, else the frontmatter's first line.
    pub fn line_of(&self, key: &str) -> usize {
        self.get(key).map_or(self.start, |(_, line)| line)
    }

    /// `key` as text, `None` when absent or null. Numbers and booleans are refused: a
    /// description of `yes` is more likely a slip than a description.
    pub fn string(&self, key: &str) -> Result<Option<String>, FrontmatterError> {
        match self.get(key) {
            None | Some((Yaml::Null, _)) => Ok(None),
            Some((Yaml::String(s), _)) => Ok(Some(s.clone())),
            Some((other, line)) => Err(FrontmatterError::at(
                line,
                format!("`{key}` must be text, not {}", kind(other)),
            )),
        }
    }

    /// `key` as a boolean, `None` when absent.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, FrontmatterError> {
        match self.get(key) {
            None | Some((Yaml::Null, _)) => Ok(None),
            Some((Yaml::Boolean(b), _)) => Ok(Some(*b)),
            Some((other, line)) => Err(FrontmatterError::at(
                line,
                format!("`{key}` must be true or false, not {}", kind(other)),
            )),
        }
    }

    /// An error at `key`'s line (the frontmatter's start when it is absent).
    pub fn error(&self, key: &str, message: impl Into<String>) -> FrontmatterError {
        FrontmatterError::at(self.line_of(key), message)
    }
}

fn kind(value: &Yaml) -> &'static str {
    match value {
        Yaml::Real(_) | Yaml::Integer(_) => "a number",
        Yaml::Boolean(_) => "true/false",
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        Yaml::String(_) => "text",
        Yaml::Alias(_) => "an alias",
        Yaml::Null | Yaml::BadValue => "nothing",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_fenced_mapping_is_split_from_the_body_and_keys_know_their_lines() {
        let doc = parse(
            "---\nname: pdf\ndescription: >\n  Reads PDFs\n  and forms.\nmetadata:\n  a: 1\n---\n# Body\n",
        )
        .unwrap();
        assert_eq!(doc.fields.string("name").unwrap().as_deref(), Some("pdf"));
        assert_eq!(
            doc.fields.string("description").unwrap().as_deref(),
            Some("Reads PDFs and forms.\n")
        );
        assert_eq!(doc.fields.line_of("name"), 2);
        assert_eq!(doc.fields.line_of("description"), 3);
        assert_eq!(doc.body, "# Body\n");
    }

    #[test]
    fn a_file_without_a_fence_is_all_body() {
        let doc = parse("Review $ARGUMENTS\n---\n").unwrap();
        assert!(doc.fields.is_empty());
        assert_eq!(doc.body, "Review $ARGUMENTS\n---\n");
    }

    #[test]
    fn errors_name_the_line_of_the_file() {
        let unclosed = parse("---\nname: x\n").unwrap_err();
        assert_eq!(unclosed.line, 1);
        let bad = parse("---\nname: x\ndescription: [oops\n---\n").unwrap_err();
        assert!(bad.line >= 3, "{bad}");
        assert!(bad.message.contains("not valid YAML"), "{bad}");
        let list = parse("---\n- a\n---\n").unwrap_err();
        assert!(list.message.contains("mapping"), "{list}");
        let typed = parse("---\nname: x\ndescription: 12\n---\n").unwrap();
        let e = typed.fields.string("description").unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (3, "`description` must be text, not a number")
        );
    }

    #[test]
    fn a_bom_and_crlf_line_ends_are_accepted() {
        let doc = parse("\u{feff}---\r\nname: x\r\n---\r\nbody\r\n").unwrap();
        assert_eq!(doc.fields.string("name").unwrap().as_deref(), Some("x"));
        assert_eq!(doc.body, "body\r\n");
    }
}
