//! Turning an assembly into text.

use std::collections::BTreeMap;

use crate::assembly::PromptAssembly;
use crate::error::PromptError;
use crate::service::is_variable_name;

/// The first line of every runtime-context snapshot. A new snapshot supersedes the previous
/// ones in history, and saying so stops the model from reconciling stale facts.
pub const CONTEXT_PREAMBLE: &str =
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.";

/// Renders the system prompt: strict `{{name}}` interpolation per section, empty sections
/// dropped, the rest joined by a blank line.
///
/// Strict because a prompt that silently renders `{{cwd}}` or an empty string misleads the
/// model: an unknown name, a registered variable without a value, or a malformed `{{` group
/// is an error naming the section. A lone `{{` with no later `}}` is literal prose, and
/// substituted values are never scanned again.
pub fn render(assembly: &PromptAssembly) -> Result<String, PromptError> {
    let mut parts = Vec::with_capacity(assembly.sections.len());
    for section in &assembly.sections {
        let text = interpolate(&section.name, &section.text, &assembly.variables)?;
        if !text.is_empty() {
            parts.push(text);
        }
    }
    Ok(parts.join("\n\n"))
}

/// Renders the runtime-context snapshot: [`CONTEXT_PREAMBLE`], a blank line, then the
/// non-empty context bodies joined by blank lines; `""` when there is no context.
///
/// Context bodies are literal (not interpolated): they carry live data such as file excerpts
/// or task lists, where `{{` may legitimately occur and must not fail a turn.
pub fn render_context(assembly: &PromptAssembly) -> String {
    let bodies: Vec<&str> = assembly
        .contexts
        .iter()
        .map(|c| c.text.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    if bodies.is_empty() {
        return String::new();
    }
    format!("{CONTEXT_PREAMBLE}\n\n{}", bodies.join("\n\n"))
}

fn interpolate(
    section: &str,
    text: &str,
    variables: &BTreeMap<String, Option<String>>,
) -> Result<String, PromptError> {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    while let Some(found) = text[last..].find("{{") {
        let open = last + found;
        let after = &text[open + 2..];
        // A group is `{{` + no braces + `}}`.
        let inner_len = after.find(['{', '}']).unwrap_or(after.len());
        let closed = after[inner_len..].starts_with("}}");
        if !closed {
            if after.contains("}}") {
                return Err(malformed(section, &text[open..]));
            }
            out.push_str(&text[last..open + 2]);
            last = open + 2;
            continue;
        }
        let name = &after[..inner_len];
        if !is_variable_name(name) {
            return Err(malformed(section, &text[open..]));
        }
        let value = match variables.get(name) {
            None => {
                return Err(PromptError::UnknownVariable {
                    section: section.to_owned(),
                    name: name.to_owned(),
                    known: variables.keys().cloned().collect(),
                });
            }
            Some(None) => {
                return Err(PromptError::MissingValue {
                    section: section.to_owned(),
                    name: name.to_owned(),
                });
            }
            Some(Some(v)) => v,
        };
        out.push_str(&text[last..open]);
        out.push_str(value);
        last = open + 2 + inner_len + 2;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

fn malformed(section: &str, at: &str) -> PromptError {
    let mut reference: String = at.chars().take(16).collect();
    if reference.len() < at.len() {
        reference.push('…');
    }
    PromptError::MalformedReference {
        section: section.to_owned(),
        reference,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::{AssembledContext, AssembledSection};

    fn assembly(texts: &[&str], vars: &[(&str, Option<&str>)]) -> PromptAssembly {
        PromptAssembly {
            sections: texts
                .iter()
                .enumerate()
                .map(|(i, t)| AssembledSection {
                    name: format!("s{i}"),
                    text: (*t).to_owned(),
                    complete: false,
                })
                .collect(),
            variables: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
                .collect(),
            ..PromptAssembly::default()
        }
    }

    #[test]
    fn interpolates_and_joins_non_empty_sections() {
        let a = assembly(
            &["Hello {{name}}.", "", "cwd={{cwd}}"],
            &[("name", Some("dsh")), ("cwd", Some("/w"))],
        );
        assert_eq!(render(&a).unwrap(), "Hello dsh.\n\ncwd=/w");
    }

    #[test]
    fn substituted_values_are_not_scanned_again() {
        let a = assembly(&["{{a}}"], &[("a", Some("{{b}}"))]);
        assert_eq!(render(&a).unwrap(), "{{b}}");
    }

    #[test]
    fn a_lone_open_group_is_literal_prose() {
        let a = assembly(&["use {{ to open"], &[]);
        assert_eq!(render(&a).unwrap(), "use {{ to open");
    }

    #[test]
    fn strict_rendering_names_the_section_and_variable() {
        let unknown = render(&assembly(&["{{nope}}"], &[("x", Some("1"))])).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "unknown prompt variable `{{nope}}` in section `s0`; registered variables: x"
        );
        let missing = render(&assembly(&["a {{x}}"], &[("x", None)])).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "prompt variable `{{x}}` has no value for this assembly (section `s0`)"
        );
        for bad in ["{{Bad}}", "{{}}", "{{a {b}}", "{{ x }}"] {
            let err = render(&assembly(&[bad], &[("x", Some("1"))])).unwrap_err();
            assert!(
                matches!(&err, PromptError::MalformedReference { section, .. } if section == "s0"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn runtime_context_has_a_preamble_or_is_empty() {
        let mut a = PromptAssembly::default();
        assert_eq!(render_context(&a), "");
        a.contexts = vec![
            AssembledContext {
                name: "date".into(),
                text: "Today is {{not a var}}.".into(),
            },
            AssembledContext {
                name: "empty".into(),
                text: String::new(),
            },
            AssembledContext {
                name: "git".into(),
                text: "branch main".into(),
            },
        ];
        assert_eq!(
            render_context(&a),
            format!("{CONTEXT_PREAMBLE}\n\nToday is {{{{not a var}}}}.\n\nbranch main")
        );
    }
}
