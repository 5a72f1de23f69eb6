//! Model-facing tool names: `mcp__<server>__<tool>`, within what providers accept.
//!
//! OpenAI-compatible APIs accept function names matching `^[a-zA-Z0-9_-]{1,64}$`; MCP tool names
//! may hold dots, slashes or spaces and run longer. A name is kept as it is when it fits;
//! otherwise every other character becomes `_` and an over-long name is cut and suffixed with a
//! short hash of the original, so two long names that share a prefix stay distinct and the
//! same server tool always gets the same name (the prompt prefix stays stable across runs).

use std::collections::HashSet;

/// Every MCP tool name starts with this (what approval rules match: `mcp__github__*`).
pub const PREFIX: &str = "mcp__";

/// The separator between server and tool.
pub const SEPARATOR: &str = "__";

/// Longest name providers accept.
pub const MAX_NAME: usize = 64;

/// The model-facing name of `tool` on `server`, unique among `taken` (which it is added to).
pub fn tool_name(server: &str, tool: &str, taken: &mut HashSet<String>) -> String {
    let raw = format!("{PREFIX}{server}{SEPARATOR}{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = if clean == raw && clean.len() <= MAX_NAME {
        clean.clone()
    } else {
        suffixed(&clean, &raw, 0)
    };
    let mut salt = 1;
    while taken.contains(&name) {
        name = suffixed(&clean, &raw, salt);
        salt += 1;
    }
    taken.insert(name.clone());
    name
}

/// `clean`, cut to leave room for `_` and eight hex digits of a hash of `raw` (and `salt`).
fn suffixed(clean: &str, raw: &str, salt: u32) -> String {
    let hash = format!("{:08x}", fnv1a(raw, salt));
    let keep = clean.len().min(MAX_NAME - hash.len() - 1);
    format!("{}_{hash}", &clean[..keep])
}

/// FNV-1a (32 bit): stable across builds and platforms, unlike `std`'s hasher.
fn fnv1a(text: &str, salt: u32) -> u32 {
    let mut hash: u32 = 0x811c_9dc5 ^ salt;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_are_kept_verbatim() {
        let mut taken = HashSet::new();
        assert_eq!(
            tool_name("github", "list_issues", &mut taken),
            "mcp__github__list_issues"
        );
    }

    #[test]
    fn odd_and_long_names_become_valid_stable_and_distinct() {
        let mut taken = HashSet::new();
        let long_a = format!("{}a", "x".repeat(80));
        let long_b = format!("{}b", "x".repeat(80));
        let a = tool_name("srv", &long_a, &mut taken);
        let b = tool_name("srv", &long_b, &mut taken);
        let dotted = tool_name("srv", "files.read/all", &mut taken);
        for name in [&a, &b, &dotted] {
            assert!(valid(name), "{name}");
        }
        assert_ne!(a, b);
        assert_eq!(a, tool_name("srv", &long_a, &mut HashSet::new()));
        assert!(dotted.starts_with("mcp__srv__files_read_all_"));
    }

    #[test]
    fn a_clash_after_cleaning_gets_a_different_name() {
        let mut taken = HashSet::new();
        let a = tool_name("s", "a.b", &mut taken);
        let b = tool_name("s", "a_b", &mut taken);
        assert_ne!(a, b);
        assert!(valid(&a) && valid(&b));
    }
}
