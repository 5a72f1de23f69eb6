//! The guard on the real tool pipeline: decisions reach the model as reasons, questions reach
//! the front end's approver, and every decision and answer lands in the session.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-tools/tests/common/mod.rs"]
mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{Recorder, agent, entries, exec, log, runtime};
use dsh_guard::{
    ApprovalPolicy, Guard, Rule, Rules, SandboxMode, SandboxPolicy, install, logged_decisions,
};
use dsh_tools::{ApprovalOutcome, ApprovalRequest, Approver, ToolCaller};
use parking_lot::Mutex;
use serde_json::Value;

struct Scripted {
    answer: ApprovalOutcome,
    asked: Arc<Mutex<Vec<ApprovalRequest>>>,
}

#[async_trait]
impl Approver for Scripted {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        self.asked.lock().push(request);
        self.answer
    }
}

fn guard(mode: SandboxMode, approval: ApprovalPolicy, rules: Rules) -> Arc<Guard> {
    Arc::new(Guard {
        sandbox: SandboxPolicy::new(mode, "/ws"),
        approval,
        rules,
    })
}

/// Provides `approver` on `ctx` and installs a guard with the `ask` policy and no rules.
fn asking(
    ctx: &dsh_kernel::Context,
    approver: Arc<dyn Approver>,
    mode: SandboxMode,
) -> dsh_guard::Installed {
    ctx.provide::<dyn Approver>(approver).unwrap();
    install(ctx, guard(mode, ApprovalPolicy::Ask, Rules::default())).unwrap()
}

fn decisions(caller: &ToolCaller) -> Vec<Value> {
    logged_decisions(&caller.session)
}

#[tokio::test]
async fn never_refuses_a_write_outside_the_roots_with_a_reason_and_logs_it() {
    let (ctx, rt) = runtime();
    let out = log();
    let _tool = rt.register(&ctx, Recorder::new("write", &out)).unwrap();
    let g = guard(
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::Never,
        Rules::default(),
    );
    let _guard = install(&ctx, g).unwrap();
    let a = agent(&ctx, "a");
    let result = rt
        .run(&exec(
            "write",
            r#"{"file_path":"/etc/x","content":""}"#,
            Some(&a),
        ))
        .await;
    assert!(result.is_error);
    assert!(
        result.text().contains("outside the writable roots"),
        "{}",
        result.text()
    );
    assert!(entries(&out).is_empty());
    let logged = decisions(&a);
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["verdict"], "deny");
    assert_eq!(logged[0]["by"], "mode");
    assert_eq!(logged[0]["sandbox"], "workspace-write");
}

#[tokio::test]
async fn deny_rules_beat_allow_rules_on_the_pipeline() {
    let (ctx, rt) = runtime();
    let out = log();
    let _tool = rt.register(&ctx, Recorder::new("bash", &out)).unwrap();
    let rules = Rules {
        allow: vec![Rule::parse("bash(git *)").unwrap()],
        deny: vec![Rule::parse("bash(git push *)").unwrap()],
        ask: Vec::new(),
    };
    let _guard = install(
        &ctx,
        guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Auto, rules),
    )
    .unwrap();
    let a = agent(&ctx, "a");
    let result = rt
        .run(&exec("bash", r#"{"command":"git push origin"}"#, Some(&a)))
        .await;
    assert!(
        result
            .text()
            .contains("denied by the rule `bash(git push *)`")
    );
    assert!(entries(&out).is_empty());
    assert_eq!(decisions(&a)[0]["rule"], "deny bash(git push *)");
}

#[tokio::test]
async fn ask_reaches_the_approver_and_the_answer_is_logged() {
    for (answer, ran, expected) in [
        (ApprovalOutcome::AllowedOnce, true, "allowed"),
        (ApprovalOutcome::Rejected, false, "rejected"),
    ] {
        let (ctx, rt) = runtime();
        let out = log();
        let _tool = rt.register(&ctx, Recorder::new("write", &out)).unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let approver: Arc<dyn Approver> = Arc::new(Scripted {
            answer,
            asked: asked.clone(),
        });
        let _guard = asking(&ctx, approver, SandboxMode::WorkspaceWrite);
        let a = agent(&ctx, "a");
        let _ = rt
            .run(&exec(
                "write",
                r#"{"file_path":"/etc/x","content":""}"#,
                Some(&a),
            ))
            .await;
        assert_eq!(entries(&out).len(), usize::from(ran));
        let asked = asked.lock();
        assert_eq!(asked.len(), 1);
        assert!(asked[0].reason.as_deref().unwrap().contains("/etc/x"));
        let logged = decisions(&a);
        assert_eq!(logged.len(), 2, "{logged:?}");
        assert_eq!(logged[0]["verdict"], "ask");
        assert_eq!(logged[1]["by"], "user");
        assert_eq!(logged[1]["answer"], expected);
    }
}

#[tokio::test]
async fn a_blocked_write_in_a_bash_result_is_explained() {
    let (ctx, rt) = runtime();
    let tool = common::fn_tool("bash", |_, _| {
        Ok(dsh_tools::ToolOutput::text(
            "bash: line 1: /etc/pwned: Permission denied\n[exit code: 1]",
        ))
    });
    let _tool = rt.register(&ctx, tool).unwrap();
    let g = guard(
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::Ask,
        Rules::default(),
    );
    let _guard = install(&ctx, g).unwrap();
    let a = agent(&ctx, "a");
    let result = rt
        .run(&exec(
            "bash",
            r#"{"command":"echo > /etc/pwned"}"#,
            Some(&a),
        ))
        .await;
    let text = result.text();
    assert!(text.contains("Permission denied"), "{text}");
    assert!(
        text.contains("[sandbox] write to /etc/pwned blocked: outside the writable roots"),
        "{text}"
    );
    assert!(text.contains("escalate"), "{text}");
}

/// Answers only for the agent its front end shows, as every front end's approver does.
struct OnlyFor(&'static str);

#[async_trait]
impl Approver for OnlyFor {
    async fn request(&self, request: ApprovalRequest) -> ApprovalOutcome {
        if request.agent_id == self.0 {
            ApprovalOutcome::AllowedOnce
        } else {
            ApprovalOutcome::Unavailable
        }
    }
}

#[tokio::test]
async fn a_subagent_keeps_its_parents_sandbox_and_cannot_ask() {
    let (ctx, rt) = runtime();
    let out = log();
    let _write = rt.register(&ctx, Recorder::new("write", &out)).unwrap();
    let _bash = rt.register(&ctx, Recorder::new("bash", &out)).unwrap();
    let _guard = asking(&ctx, Arc::new(OnlyFor("parent")), SandboxMode::ReadOnly);
    let parent = agent(&ctx, "parent");
    let child = common::agent_with_tag(
        &ctx,
        "child",
        dsh_kernel::ScopeTag::child_of(parent.tag().unwrap(), "child"),
    );
    let write = r#"{"file_path":"/ws/a.txt","content":""}"#;
    let escalate = r#"{"command":"touch /x","escalate":true,"justification":"needed"}"#;
    // The parent, asked, may; the child, under the same read-only sandbox, cannot ask.
    assert!(!rt.run(&exec("write", write, Some(&parent))).await.is_error);
    for args in [write, escalate] {
        let tool = if args == write { "write" } else { "bash" };
        let result = rt.run(&exec(tool, args, Some(&child))).await;
        assert!(result.is_error);
        assert!(
            result.text().contains("no approval channel"),
            "{}",
            result.text()
        );
    }
    assert_eq!(entries(&out).len(), 1, "only the parent's write ran");
    let child_log = decisions(&child);
    assert_eq!(child_log[0]["sandbox"], "read-only");
    assert_eq!(child_log[1]["answer"], "unavailable");
}

#[tokio::test]
async fn a_subagent_runs_under_its_parents_session_policy() {
    let (ctx, rt) = runtime();
    let out = log();
    let _tool = rt
        .register(&ctx, Recorder::new("mcp__srv__echo", &out))
        .unwrap();
    let _guard = asking(
        &ctx,
        Arc::new(OnlyFor("parent")),
        SandboxMode::WorkspaceWrite,
    );
    let parent = agent(&ctx, "parent");
    let mut child = common::agent_with_tag(
        &ctx,
        "child",
        dsh_kernel::ScopeTag::child_of(parent.tag().unwrap(), "child"),
    );
    child.session = dsh_session::Session::new(
        dsh_session::SessionHeader::new(
            child.agent_id.clone(),
            0,
            dsh_session::SessionMeta {
                parent_session: Some(parent.agent_id.clone()),
                origin: Some(dsh_session::SessionOrigin::Subagent),
                ..dsh_session::SessionMeta::default()
            },
        ),
        None,
    )
    .unwrap();
    let call = r#"{"text":"hi"}"#;
    // Under the configured `ask`, the subagent cannot ask anyone: refused.
    let refused = rt.run(&exec("mcp__srv__echo", call, Some(&child))).await;
    assert!(refused.is_error, "{}", refused.text());
    // The person put the parent's session in `auto` (an editor's mode): the delegation
    // runs under it, without a question.
    let policies = ctx.get::<dsh_guard::SessionPolicies>().unwrap();
    policies.set(&parent.agent_id, Some(ApprovalPolicy::Auto));
    let ran = rt.run(&exec("mcp__srv__echo", call, Some(&child))).await;
    assert!(!ran.is_error, "{}", ran.text());
    assert_eq!(entries(&out).len(), 1);
    let logged = decisions(&child);
    assert_eq!(logged.last().unwrap()["approval"], "auto");
}

/// A tool the guard has never heard of, written the way a third party would: its effects are
/// whatever `declare` says for the arguments (`None`: it declares nothing), and its body
/// records that it ran.
struct Foreign {
    name: &'static str,
    declare: fn(&Value) -> Option<dsh_tools::ToolEffects>,
    ran: common::Log,
}

#[async_trait]
impl dsh_tools::Tool for Foreign {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        "a third party's tool"
    }

    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object"})
    }

    fn effects(&self, args: &Value) -> dsh_tools::ToolEffects {
        (self.declare)(args).unwrap_or_else(dsh_tools::ToolEffects::undeclared)
    }

    async fn execute(
        &self,
        args: Value,
        _call: &dsh_tools::ToolCallContext,
    ) -> Result<dsh_tools::ToolOutput, dsh_tools::ToolError> {
        self.ran.lock().push(format!("{} {args}", self.name));
        Ok(dsh_tools::ToolOutput::text("ok"))
    }
}

fn foreign(
    name: &'static str,
    declare: fn(&Value) -> Option<dsh_tools::ToolEffects>,
) -> (Arc<Foreign>, common::Log) {
    let ran = log();
    let tool = Arc::new(Foreign {
        name,
        declare,
        ran: ran.clone(),
    });
    (tool, ran)
}

#[tokio::test]
async fn a_new_file_writing_tool_meets_the_write_root_check_through_its_declared_effects() {
    let (ctx, rt) = runtime();
    let (tool, ran) = foreign("scribble", |args| {
        Some(dsh_tools::ToolEffects::none().writes(args["target"].as_str().unwrap_or("")))
    });
    let _tool = rt.register(&ctx, tool).unwrap();
    let g = guard(
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::Never,
        Rules::default(),
    );
    let _guard = install(&ctx, g).unwrap();
    let a = agent(&ctx, "a");
    let outside = rt
        .run(&exec("scribble", r#"{"target":"/etc/cron.d/x"}"#, Some(&a)))
        .await;
    assert!(outside.is_error);
    assert!(
        outside
            .text()
            .contains("`scribble` may not write /etc/cron.d/x"),
        "{}",
        outside.text()
    );
    assert!(
        entries(&ran).is_empty(),
        "the body ran: {:?}",
        entries(&ran)
    );
    let inside = rt
        .run(&exec("scribble", r#"{"target":"notes/a.md"}"#, Some(&a)))
        .await;
    assert!(!inside.is_error, "{}", inside.text());
    assert_eq!(entries(&ran), [r#"scribble {"target":"notes/a.md"}"#]);
}

#[tokio::test]
async fn a_tool_that_declares_nothing_is_asked_about() {
    let (ctx, rt) = runtime();
    let (tool, ran) = foreign("mystery", |_| None);
    let _tool = rt.register(&ctx, tool).unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let _guard = asking(
        &ctx,
        Arc::new(Scripted {
            answer: ApprovalOutcome::Rejected,
            asked: asked.clone(),
        }),
        SandboxMode::WorkspaceWrite,
    );
    let a = agent(&ctx, "a");
    let result = rt.run(&exec("mystery", "{}", Some(&a))).await;
    assert!(result.is_error, "{}", result.text());
    assert!(entries(&ran).is_empty());
    let asked = asked.lock();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("does not declare what it does")),
        "{:?}",
        asked[0].reason
    );
}

#[tokio::test]
async fn a_tool_reaching_the_network_is_refused_while_the_network_is_off() {
    let (ctx, rt) = runtime();
    let (tool, ran) = foreign("fetch_page", |args| {
        Some(dsh_tools::ToolEffects::none().reaches(args["url"].as_str().unwrap_or("")))
    });
    let _tool = rt.register(&ctx, tool).unwrap();
    let mut sandbox = SandboxPolicy::new(SandboxMode::WorkspaceWrite, "/ws");
    sandbox.network = false;
    let _guard = install(
        &ctx,
        Arc::new(Guard {
            sandbox,
            approval: ApprovalPolicy::Never,
            rules: Rules::default(),
        }),
    )
    .unwrap();
    let a = agent(&ctx, "a");
    let off = rt
        .run(&exec(
            "fetch_page",
            r#"{"url":"https://example.org/"}"#,
            Some(&a),
        ))
        .await;
    assert!(off.is_error);
    assert!(off.text().contains("the network is off"), "{}", off.text());
    assert!(entries(&ran).is_empty());
}
