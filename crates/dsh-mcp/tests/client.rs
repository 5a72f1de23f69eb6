//! What dsh answers a server's own requests: elicitation, roots and sampling, against a real
//! test-server process.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::*;
use dsh_testkit::Script;
use dsh_tools::{QuestionOutcome, QuestionRequest, Questioner, Reply};
use parking_lot::Mutex;

/// A person who answers every question with the next of `replies` (a test double behind
/// the question seam).
struct Person {
    replies: Vec<Reply>,
    asked: Mutex<Vec<QuestionRequest>>,
}

#[async_trait]
impl Questioner for Person {
    async fn ask(&self, request: QuestionRequest) -> QuestionOutcome {
        self.asked.lock().push(request);
        QuestionOutcome::Answered(self.replies.clone())
    }
}

async fn ask_once(person: Option<Arc<Person>>) -> serde_json::Value {
    let w = world_with(vec![test_server("t", &[])]).await;
    if let Some(person) = person {
        w.ctx.provide::<dyn Questioner>(person).unwrap();
    }
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__ask", "{}"))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let text = tool_results(handle.agent()).remove(0).1;
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("not a result: {text}"))
}

#[tokio::test]
async fn a_servers_form_elicitation_asks_the_person_of_the_running_call_and_types_the_answers() {
    let person = Arc::new(Person {
        // In the schema's property order: name, color, sure.
        replies: vec![
            Reply::Text("Ada".into()),
            Reply::Chosen("blue".into()),
            Reply::Chosen("yes".into()),
        ],
        asked: Mutex::default(),
    });
    let result = ask_once(Some(person.clone())).await;
    assert_eq!(result["action"], "accept");
    assert_eq!(
        result["content"],
        serde_json::json!({"name": "Ada", "color": "blue", "sure": true})
    );
    let asked = person.asked.lock();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].call_id.as_str(), "c1");
    assert_eq!(asked[0].agent_id.as_str(), "a");
    let labels: Vec<&str> = asked[0].questions[1]
        .options
        .iter()
        .map(|o| o.label.as_str())
        .collect();
    assert_eq!(labels, ["red", "blue"]);
    assert!(asked[0].questions[0].question.starts_with("About you"));
}

#[tokio::test]
async fn where_nobody_can_be_asked_an_elicitation_is_declined_with_the_reason() {
    let result = ask_once(None).await;
    assert_eq!(result["action"], "decline");
    assert!(
        result["_meta"]["dsh/reason"]
            .as_str()
            .unwrap()
            .contains("nobody can be asked"),
        "{result}"
    );
}

#[tokio::test]
async fn the_root_offered_is_the_sessions_workspace_and_sampling_is_refused() {
    let workspace = scratch();
    let w = world_with_options(
        vec![test_server("t", &[])],
        dsh_mcp::McpOptions::new(workspace.path()),
    )
    .await;
    w.adapter
        .push(Script::tool_calls([
            ("c1", "mcp__t__roots", "{}"),
            ("c2", "mcp__t__sample", "{}"),
        ]))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let results = tool_results(handle.agent());
    let roots: serde_json::Value = serde_json::from_str(&results[0].1).unwrap();
    let expected = format!("file://{}", workspace.path().display());
    assert_eq!(roots[0]["uri"].as_str(), Some(expected.as_str()), "{roots}");
    assert!(
        results[1].1.starts_with("sampling failed:")
            && results[1].1.contains("does not let MCP servers sample"),
        "{}",
        results[1].1
    );
}
