#![allow(clippy::unwrap_used)]
//! Provider kinds end to end: `dsh run` against the mock server speaking each wire format, and
//! a session that switches provider between turns.

mod common;

use common::{World, bash, stderr, stdout};
use dsh_testkit::MockResponse;
use serde_json::Value;

/// A config with a provider `claude` of kind `anthropic` pointed at the mock server.
fn anthropic_config(w: &World) {
    std::fs::write(
        w.home.path().join("config.toml"),
        format!(
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
             api_key_env = \"CLAUDE_TEST_KEY\"\nmodels = [\"claude-sonnet-4-5\"]\n",
            w.server.url()
        ),
    )
    .unwrap();
}

#[test]
fn an_anthropic_provider_runs_a_multi_step_bash_loop() {
    let w = World::new();
    anthropic_config(&w);
    w.server
        .push(MockResponse::anthropic_tool_calls([(
            "toolu_1",
            "bash",
            bash("echo one").as_str(),
        )]))
        .push(MockResponse::anthropic_tool_calls([(
            "toolu_2",
            "bash",
            bash("echo two").as_str(),
        )]))
        .push(MockResponse::anthropic_text("All done."));
    let out = w
        .dsh(&["run", "--provider", "claude", "print two words"])
        .env("CLAUDE_TEST_KEY", "sk-ant-e2e")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "All done.\n");
    let requests = w.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
    assert!(requests[0].path.ends_with("/v1/messages"));
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-e2e"));
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-5");
    let last = serde_json::to_string(&requests[2].body["messages"]).unwrap();
    assert!(last.contains("one") && last.contains("two"), "{last}");
    // The system prompt is cached, and so is the newest block of every step.
    for r in &requests {
        assert_eq!(r.body["system"][0]["cache_control"]["type"], "ephemeral");
    }
}

#[test]
fn a_session_switching_provider_between_turns_stays_valid_for_each() {
    let w = World::new();
    anthropic_config(&w);
    // Turn 1 on DeepSeek: reasoning, a tool call, an answer.
    w.server
        .push(MockResponse::tool_call(
            "call_a",
            "bash",
            &bash("echo first"),
        ))
        .push(MockResponse::reasoning_then_text(
            "deepseek thoughts",
            "first answer",
        ));
    let out = w.output(&["run", "start"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let id = w.only_session_id();
    // Turn 2 on the anthropic provider.
    w.server
        .push(MockResponse::anthropic_tool_calls([(
            "toolu_b",
            "bash",
            bash("echo second").as_str(),
        )]))
        .push(MockResponse::anthropic_text("second answer"));
    let out = w
        .dsh(&["run", "--resume", &id, "--provider", "claude", "go on"])
        .env("CLAUDE_TEST_KEY", "sk-ant-e2e")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "second answer\n");
    // Turn 3 back on DeepSeek.
    w.server.push(MockResponse::text("third answer"));
    let out = w.output(&[
        "run",
        "--resume",
        &id,
        "--provider",
        "deepseek",
        "and again",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
    let requests = w.server.requests();
    assert_eq!(requests.len(), 5);
    // The Anthropic requests carry the DeepSeek turn without its reasoning, ids kept.
    let claude = serde_json::to_string(&requests[2].body["messages"]).unwrap();
    assert!(!claude.contains("deepseek thoughts"), "{claude}");
    assert!(claude.contains("call_a"), "{claude}");
    let roles: Vec<&Value> = requests[3].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["role"])
        .collect();
    assert!(
        roles.windows(2).all(|p| p[0] != p[1]),
        "roles alternate for the Messages API: {roles:?}"
    );
    // The last DeepSeek request carries the Anthropic tool call and its result.
    let back = serde_json::to_string(requests[4].messages()).unwrap();
    assert!(
        back.contains("toolu_b") && back.contains("second"),
        "{back}"
    );
}

#[test]
fn an_openai_responses_provider_runs_a_multi_step_bash_loop() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        format!(
            "[providers.oai]\nkind = \"openai-responses\"\nbase_url = \"{}\"\n\
             api_key_env = \"OAI_TEST_KEY\"\nmodels = [\"o4-mini\"]\n",
            w.server.url()
        ),
    )
    .unwrap();
    w.server
        .push(MockResponse::responses_calls([(
            "call_1",
            "bash",
            bash("echo one").as_str(),
        )]))
        .push(MockResponse::responses_calls([(
            "call_2",
            "bash",
            bash("echo two").as_str(),
        )]))
        .push(MockResponse::responses_text("All done."));
    let out = w
        .dsh(&["run", "--provider", "oai", "print two words"])
        .env("OAI_TEST_KEY", "sk-oai-e2e")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "All done.\n");
    let requests = w.server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
    assert!(requests[0].path.ends_with("/responses"));
    assert_eq!(requests[0].body["store"], false);
    let last = serde_json::to_string(&requests[2].body["input"]).unwrap();
    assert!(last.contains("one") && last.contains("two"), "{last}");
}
