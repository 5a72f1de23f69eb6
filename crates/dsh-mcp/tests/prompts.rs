//! Servers' prompts as slash commands, against a real test-server process.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_mcp::{PromptCommand, expand_prompt, prompt_commands};

#[tokio::test]
async fn a_servers_prompt_is_a_command_whose_arguments_map_to_the_declared_ones() {
    let w = world_with(vec![test_server("t", &[])]).await;
    w.servers().settled().await;
    let servers = w.servers().ready();
    assert_eq!(
        prompt_commands(&servers),
        [PromptCommand {
            name: "mcp__t__review".to_owned(),
            description: "Asks for a review of a file.".to_owned(),
            argument_hint: Some("<file> [focus]".to_owned()),
        }]
    );
    let expanded = expand_prompt(&servers, "/mcp__t__review src/a.rs error handling")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(expanded, "Please review src/a.rs. Focus on error handling.");
    let named = expand_prompt(&servers, "/mcp__t__review focus=naming file=b.rs")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(named, "Please review b.rs. Focus on naming.");
    let missing = expand_prompt(&servers, "/mcp__t__review").await.unwrap();
    assert_eq!(
        missing.unwrap_err(),
        "/mcp__t__review: missing file (usage: /mcp__t__review <file> [focus])"
    );
    // Not a prompt of a running server: not an MCP command at all.
    assert!(expand_prompt(&servers, "/mcp__t__nope x").await.is_none());
    assert!(
        expand_prompt(&servers, "/mcp__other__review x")
            .await
            .is_none()
    );
    assert!(expand_prompt(&servers, "/review x").await.is_none());
}
