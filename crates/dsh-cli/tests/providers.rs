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

#[test]
fn native_web_search_is_offered_to_anthropic_and_its_results_go_back_verbatim() {
    let w = World::new();
    anthropic_config(&w);
    let config = w.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[web_search]\nprovider = \"native\"\nmax_uses = 2\n");
    std::fs::write(&config, text).unwrap();
    let results = serde_json::json!([{"type": "web_search_result", "url": "https://a.example/",
        "title": "A", "encrypted_content": "opaque", "page_age": null}]);
    w.server
        .push(MockResponse::sse(
            dsh_testkit::anthropic::MessageStream::start(10, 0)
                .web_search("srvtoolu_1", "dsh release", results.clone())
                .tool_use("toolu_1", "bash", &bash("echo checked"), 9)
                .stop("tool_use", 5)
                .build(),
        ))
        .push(MockResponse::anthropic_text("Released."));
    let out = w
        .dsh(&["run", "--provider", "claude", "is dsh out?"])
        .env("CLAUDE_TEST_KEY", "sk-ant-e2e")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "Released.\n");
    let requests = w.server.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0].body["tools"].as_array().unwrap();
    assert_eq!(
        tools.last().unwrap(),
        &serde_json::json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2})
    );
    assert!(
        !tools
            .iter()
            .any(|t| t.get("input_schema").is_some() && t["name"] == "web_search"),
        "dsh's own web_search tool is not offered beside the provider's: {tools:?}"
    );
    let assistant = &requests[1].body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    let kinds: Vec<&str> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "web_search_tool_result", "tool_use"]
    );
    assert_eq!(assistant["content"][0]["input"]["query"], "dsh release");
    assert_eq!(assistant["content"][1]["content"], results);
    let shown = stdout(&w.output(&["config", "show"]));
    assert!(
        shown.contains("web_search: native (the provider's own search, at most 2 per request"),
        "{shown}"
    );
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
}
