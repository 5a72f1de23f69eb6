//! MCP tools under the guard: one decision path (dsh-guard's rules and approval policy on
//! `tools/pre-execute`), with a real test-server process and the scripted model.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_agent::AgentRef;
use dsh_guard::{ApprovalPolicy, Guard, Installed, Rule, Rules, SandboxMode, SandboxPolicy};
use dsh_mcp::{ApprovalMode, ServerConfig};
use dsh_testkit::Script;
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver};
use parking_lot::Mutex;
use serde_json::Value;

/// Answers every question "allow once" and remembers it.
#[derive(Default)]
struct Recording {
    asked: Mutex<Vec<(String, Option<String>)>>,
}

#[async_trait::async_trait]
impl Approver for Recording {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        self.asked
            .lock()
            .push((request.tool_name.clone(), request.reason.clone()));
        ApprovalOutcome::AllowedOnce
    }
}

fn rules(list: &[String]) -> Vec<Rule> {
    list.iter().map(|r| Rule::parse(r).unwrap()).collect()
}

/// The world with server `t`, the guard under `approval` with `allow`/`deny` rules, and a
/// recording approver.
async fn guarded(
    server: ServerConfig,
    approval: ApprovalPolicy,
    allow: &[String],
    deny: &[String],
) -> (World, Installed, Arc<Recording>) {
    let w = world_with(vec![server]).await;
    let guard = Guard {
        sandbox: SandboxPolicy::new(SandboxMode::WorkspaceWrite, std::env::temp_dir()),
        approval,
        rules: Rules {
            allow: rules(allow),
            ask: Vec::new(),
            deny: rules(deny),
        },
    };
    let installed = dsh_guard::install(&w.ctx, Arc::new(guard)).unwrap();
    let approver = Arc::new(Recording::default());
    w.ctx.provide::<dyn Approver>(approver.clone()).unwrap();
    (w, installed, approver)
}

/// Runs one turn in which the model calls `mcp__t__echo`; the call's (text, is_error).
async fn call_echo(w: &World, agent: &str) -> (String, bool, AgentRef) {
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__echo", r#"{"text":"ran"}"#))
        .push(Script::text("done"));
    let handle = w.agent(agent).await;
    w.run(handle.agent(), "go").await;
    let (_, text, is_error, _) = tool_results(handle.agent()).remove(0);
    (text, is_error, handle.agent().clone())
}

/// The guard's decisions in the agent's session log.
fn decisions(agent: &AgentRef) -> Vec<Value> {
    dsh_guard::logged_decisions(agent.session())
}

#[tokio::test]
async fn an_allow_rule_runs_an_mcp_tool_without_asking() {
    for rule in ["mcp__t__*", "mcp__t", "mcp__t__echo"] {
        let (w, _guard, approver) = guarded(
            test_server("t", &[]),
            ApprovalPolicy::Ask,
            &[rule.to_owned()],
            &[],
        )
        .await;
        let (text, is_error, agent) = call_echo(&w, "a").await;
        assert_eq!((text.as_str(), is_error), ("ran", false), "{rule}");
        assert!(approver.asked.lock().is_empty(), "{rule}");
        let logged = decisions(&agent);
        assert_eq!(logged.len(), 1, "{logged:?}");
        assert_eq!(logged[0]["verdict"], "allow");
        assert_eq!(logged[0]["rule"], format!("allow {rule}"));
    }
}

#[tokio::test]
async fn without_a_rule_the_ask_policy_asks_the_approver_exactly_once() {
    let (w, _guard, approver) = guarded(test_server("t", &[]), ApprovalPolicy::Ask, &[], &[]).await;
    let (text, is_error, agent) = call_echo(&w, "a").await;
    assert_eq!((text.as_str(), is_error), ("ran", false));
    let asked = approver.asked.lock().clone();
    assert_eq!(asked.len(), 1, "one decision path, one question: {asked:?}");
    assert_eq!(asked[0].0, "mcp__t__echo");
    let reason = asked[0].1.as_deref().unwrap();
    assert!(reason.contains("MCP server `t`"), "{reason}");
    let logged = decisions(&agent);
    assert_eq!(logged[0]["verdict"], "ask");
    assert_eq!(logged[0]["by"], "policy");
    assert_eq!(logged[1]["answer"], "allowed");
}

#[tokio::test]
async fn a_deny_rule_refuses_an_mcp_tool_even_on_an_approved_server() {
    let mut server = test_server("t", &[]);
    server.approval = ApprovalMode::Approve;
    let allow = [server.approval_rule().unwrap()];
    let (w, _guard, approver) = guarded(
        server,
        ApprovalPolicy::Ask,
        &allow,
        &["mcp__t__echo".to_owned()],
    )
    .await;
    let (text, is_error, agent) = call_echo(&w, "a").await;
    assert!(is_error);
    assert!(
        text.contains("`mcp__t__echo` is denied by the rule `mcp__t__echo`"),
        "{text}"
    );
    assert!(approver.asked.lock().is_empty());
    assert_eq!(decisions(&agent)[0]["rule"], "deny mcp__t__echo");
}

#[tokio::test]
async fn the_never_policy_refuses_an_mcp_tool_no_rule_allows_with_a_reason() {
    let (w, _guard, approver) =
        guarded(test_server("t", &[]), ApprovalPolicy::Never, &[], &[]).await;
    let (text, is_error, agent) = call_echo(&w, "a").await;
    assert!(is_error);
    assert!(
        text.contains("MCP server `t`") && text.contains("never asks"),
        "{text}"
    );
    assert!(approver.asked.lock().is_empty());
    assert_eq!(decisions(&agent)[0]["verdict"], "deny");
}

#[tokio::test]
async fn an_approved_server_runs_its_tools_without_asking_even_under_never() {
    let mut server = test_server("t", &[]);
    server.approval = ApprovalMode::Approve;
    let allow = [server.approval_rule().unwrap()];
    assert_eq!(allow[0], "mcp__t__*");
    let (w, _guard, approver) = guarded(server, ApprovalPolicy::Never, &allow, &[]).await;
    let (text, is_error, _) = call_echo(&w, "a").await;
    assert_eq!((text.as_str(), is_error), ("ran", false));
    assert!(approver.asked.lock().is_empty());
}
