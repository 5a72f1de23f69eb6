//! Servers' `instructions` (from their `initialize` answers) as a section of the system
//! prompt, so the model knows how each server wants to be used.
//!
//! The section is part of the stable prefix: it is built from the started servers in config
//! order and a server's instructions never change after its handshake, so every step of a
//! session renders the same bytes (a provider's prompt cache keeps hitting). Each server's
//! text is bounded and named by server; `{{` is broken up so a server's text can never be
//! read as a prompt variable (which would fail the turn).

use std::sync::Arc;

use dsh_prompt::AssembledSection;

use crate::server::McpServer;

/// The section's name in the assembly.
pub const SECTION: &str = "mcp-instructions";

/// The most of one server's instructions that reaches the prompt, in bytes.
pub const MAX_INSTRUCTIONS: usize = 4096;

/// The section for `servers`' instructions; `None` when none gave any.
pub(crate) fn section(servers: &[Arc<McpServer>]) -> Option<AssembledSection> {
    let parts: Vec<String> = servers
        .iter()
        .filter_map(|server| {
            let text = server.instructions()?.trim();
            Some(format!(
                "## MCP server `{}`\n{}",
                server.config().name,
                bounded(text).replace("{{", "{ {")
            ))
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(AssembledSection {
        name: SECTION.to_owned(),
        text: format!(
            "# MCP server instructions\n\nWhat the MCP servers whose tools you have say about \
             using them (their words, not the user's):\n\n{}",
            parts.join("\n\n")
        ),
        complete: false,
    })
}

/// `text` cut to [`MAX_INSTRUCTIONS`] bytes at a character boundary, saying so.
fn bounded(text: &str) -> String {
    if text.len() <= MAX_INSTRUCTIONS {
        return text.to_owned();
    }
    let mut end = MAX_INSTRUCTIONS;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… cut at {MAX_INSTRUCTIONS} bytes]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_instructions_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_INSTRUCTIONS);
        let cut = bounded(&long);
        assert!(cut.len() < MAX_INSTRUCTIONS + 40);
        assert!(cut.ends_with("[… cut at 4096 bytes]"));
        assert_eq!(bounded("short"), "short");
    }
}
