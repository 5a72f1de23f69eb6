//! Arguments in a prompt file: `$ARGUMENTS` and `$1` … `$9`, as Claude Code's commands use
//! them.
//!
//! `/review src/lib.rs "be strict"` gives `$ARGUMENTS` = `src/lib.rs "be strict"` (the text as
//! typed), `$1` = `src/lib.rs` and `$2` = `be strict` (words split like a shell would, quotes
//! grouping). A placeholder with no argument becomes empty. Substitution is one pass, so an
//! argument that itself contains `$1` is never expanded again. A file that uses no
//! placeholder still gets what was typed: it is appended as an `ARGUMENTS:` line.

/// `body` with the placeholders replaced by `arguments`.
pub fn substitute(body: &str, arguments: &str) -> String {
    let arguments = arguments.trim();
    let words = split_words(arguments);
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut used = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(arguments);
            used = true;
            rest = tail;
        } else if let Some(digit) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let index = (digit as usize) - ('1' as usize);
            out.push_str(words.get(index).map_or("", String::as_str));
            used = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !used && !arguments.is_empty() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\nARGUMENTS: ");
        out.push_str(arguments);
    }
    out
}

/// Splits `text` into words at whitespace; `"…"` and `'…'` group words (the quotes are
/// dropped) and `\` escapes the next character outside single quotes.
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_positions_are_substituted_once() {
        assert_eq!(
            substitute(
                "Review $1 ($2). All: $ARGUMENTS. Missing: [$3]",
                "src/lib.rs \"be strict\""
            ),
            "Review src/lib.rs (be strict). All: src/lib.rs \"be strict\". Missing: []"
        );
        // An argument holding a placeholder is not expanded again.
        assert_eq!(substitute("echo $1", "$2 x"), "echo $2");
        // A dollar that is no placeholder stays.
        assert_eq!(substitute("costs $0 and $x", ""), "costs $0 and $x");
    }

    #[test]
    fn a_body_without_placeholders_gets_the_arguments_appended() {
        assert_eq!(
            substitute("Fix the build.\n", "  the linker fails "),
            "Fix the build.\n\nARGUMENTS: the linker fails"
        );
        assert_eq!(substitute("Fix the build.", ""), "Fix the build.");
    }

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(
            split_words(r#"a "b c" 'd e' f\ g "h\"i""#),
            ["a", "b c", "d e", "f g", "h\"i"]
        );
        assert_eq!(split_words("  "), Vec::<String>::new());
        assert_eq!(split_words(r#""""#), [""]);
    }
}
