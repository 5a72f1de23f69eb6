//! The system-prompt section listing a session's skills.
//!
//! Names and descriptions only, sorted by name, rendered once when the session starts: the
//! section is part of the prompt's stable prefix (every request of the session repeats it byte
//! for byte, so the provider's cache holds). A skill added or edited mid-session shows up in
//! the next session.

use crate::catalog::Catalog;

/// The section's name.
pub const SECTION: &str = "skills:available";

/// Where it goes: after the tool guidance of the built-in tools (100–119).
pub const ORDER: i32 = 130;

/// The section text for `catalog`, or `None` when the model has no skill to load.
pub fn render(catalog: &Catalog) -> Option<String> {
    let mut skills = catalog.model_skills().peekable();
    skills.peek()?;
    let mut out = String::from(
        "Skills are instructions for particular kinds of task, each in a folder that may hold \
         more files. Only their descriptions are listed here. When a task matches one, call the \
         `skill` tool with its name before you start, and follow the instructions it returns.\n\
         <available_skills>",
    );
    for skill in skills {
        out.push_str(&format!(
            "\n<skill name=\"{}\">{}</skill>",
            escape(&skill.name),
            escape(&skill.description)
        ));
    }
    out.push_str("\n</available_skills>");
    Some(out)
}

/// `text` safe between XML tags and in attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_a_description_cannot_close_the_list() {
        assert_eq!(
            escape("a</skill> & \"b\""),
            "a&lt;/skill&gt; &amp; &quot;b&quot;"
        );
    }
}
