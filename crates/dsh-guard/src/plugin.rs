//! The guard as a plugin on the tool pipeline: a `tools/pre-execute` listener that decides
//! every call (see [`crate::approval`]) and logs each decision in the caller's session as an
//! `approval/decided` event, and a `tools/result` listener that logs the user's answer to
//! every question the guard asked.
//!
//! Asking itself is the pipeline's: an `Ask` verdict becomes [`PreExecute::Ask`], which the
//! front end's [`dsh_tools::Approver`] answers (the ACP client, the chat's terminal prompt);
//! with no approver, or for a subagent no person can be asked for, the pipeline refuses with a
//! reason. So subagents inherit the guard (one executor, one listener for every agent) and
//! cannot widen it.

use std::sync::Arc;

use dsh_kernel::{Context, KernelError, Registration};
use dsh_session::ContentBlock;
use dsh_tools::{
    ExecView, PostExecute, PostExecuteInput, PreExecute, ToolCallResult, ToolResultNotice,
    ToolsPostExecute, ToolsPreExecute, ToolsResult, WriteScope,
};
use serde_json::{Value, json};

use crate::approval::{ApprovalPolicy, CallView, Decision, Guard, Verdict};
use crate::proxy::NetworkProxy;
use crate::session_policy::SessionPolicies;
use crate::writes::{AskedCalls, GuardWrites};

/// The session event type of every guard decision and every answer to its questions.
pub const DECISION_EVENT: &str = "approval/decided";

/// The session event type of a host the network proxy refused a call's command (`callId`,
/// `host`, `port`, and `line`, the text the model read): how front ends show the person.
pub const NETWORK_BLOCKED_EVENT: &str = "network/blocked";

/// Keeps the listeners registered; dropping it unregisters them.
#[must_use = "the guard is removed when this is dropped"]
#[derive(Debug)]
pub struct Installed {
    _registrations: [Registration; 3],
}

/// Registers the guard on `ctx` (untagged: it hears every agent's calls, subagents included)
/// and provides [`SessionPolicies`] there unless the context already has them.
pub fn install(ctx: &Context, guard: Arc<Guard>) -> Result<Installed, KernelError> {
    let policies = match ctx.get::<SessionPolicies>() {
        Some(p) => p,
        None => {
            let p = Arc::new(SessionPolicies::default());
            ctx.provide(p.clone())?;
            p
        }
    };
    let guard_for_notes = guard.clone();
    let asked: Arc<AskedCalls> = Arc::default();
    // The file tools resolve their writes beneath the roots this policy allows.
    if ctx.get::<dyn WriteScope>().is_none() {
        ctx.provide::<dyn WriteScope>(Arc::new(GuardWrites {
            guard: guard.clone(),
            asked: asked.clone(),
        }))?;
    }
    let pre = ctx.on_waterfall::<ToolsPreExecute, _>({
        let asked = asked.clone();
        move |call, next| {
            let guard = guard.clone();
            let asked = asked.clone();
            let policies = policies.clone();
            async move {
                let cwd = call.caller.as_ref().and_then(|c| c.cwd.clone());
                // A session narrowed to a stricter mode (plan mode) is decided under it, as
                // its commands run under it: a command confined read-only needs no question
                // even where the configured mode would run it unconfined.
                let guard = match call
                    .caller
                    .as_ref()
                    .and_then(|c| policies.sandbox_for(c.session.header()))
                {
                    Some(mode) if guard.sandbox.mode.narrowed_to(mode) != guard.sandbox.mode => {
                        let mut narrowed = (*guard).clone();
                        narrowed.sandbox.mode = guard.sandbox.mode.narrowed_to(mode);
                        Arc::new(narrowed)
                    }
                    _ => guard,
                };
                let view = CallView {
                    tool: &call.name,
                    effects: call.effects(),
                    cwd: cwd.as_deref(),
                };
                let mut decision = guard.decide(&view);
                // A session's own policy (an editor's "auto") replaces the configured one
                // only where that policy asked: an `ask` rule the user wrote still asks.
                let chosen = call
                    .caller
                    .as_ref()
                    .and_then(|c| policies.for_session(c.session.header()))
                    .filter(|p| *p != guard.approval);
                let guard = match chosen {
                    Some(approval)
                        if matches!(decision.verdict, Verdict::Ask { .. })
                            && decision.by != "rule" =>
                    {
                        let session_guard = Arc::new(Guard {
                            approval,
                            ..(*guard).clone()
                        });
                        decision = session_guard.decide(&view);
                        session_guard
                    }
                    _ => guard,
                };
                log(&call, &guard, &decision);
                match decision.verdict {
                    Verdict::Deny { reason } => Ok(PreExecute::Deny { reason }),
                    Verdict::Allow => next.run(call).await,
                    Verdict::Ask { reason } => {
                        let call_id = call.call_id.clone();
                        let caller = call.caller.clone();
                        match next.run(call).await? {
                            PreExecute::Deny { reason } => Ok(PreExecute::Deny { reason }),
                            PreExecute::Allow | PreExecute::Ask { .. } => {
                                asked.insert(caller.as_ref(), &call_id);
                                Ok(PreExecute::Ask {
                                    reason: Some(reason),
                                })
                            }
                        }
                    }
                }
            }
        }
    })?;
    let noted = ctx.on_waterfall::<ToolsPostExecute, _>({
        let guard = guard_for_notes;
        move |input: PostExecuteInput, next| {
            let mut notes: Vec<String> = sandbox_note(&guard, &input).into_iter().collect();
            notes.extend(network_report(input.exec()));
            async move {
                let inner = next.run(input.clone()).await?;
                Ok(match inner {
                    PostExecute::Accept { content, contexts } if !notes.is_empty() => {
                        let mut content = content.unwrap_or_else(|| input.result().content.clone());
                        content.extend(notes.into_iter().map(ContentBlock::text));
                        PostExecute::Accept {
                            content: Some(content),
                            contexts,
                        }
                    }
                    inner => inner,
                })
            }
        }
    })?;
    let answered = ctx.on::<ToolsResult>(move |notice: &ToolResultNotice| {
        if asked.remove(notice.exec.caller.as_ref(), &notice.exec.call_id) {
            log_answer(&notice.exec, &notice.result);
        }
    })?;
    Ok(Installed {
        _registrations: [pre, noted, answered],
    })
}

/// One actionable line for a confined `bash` result that shows a denial the sandbox likely
/// caused (spec/guard.md §6): paths outside the writable roots named in a `Permission
/// denied` line, or a refused connection while the network is off. The output is kept.
fn sandbox_note(guard: &Guard, input: &PostExecuteInput) -> Option<String> {
    let call = input.exec();
    let runs_confined = call
        .effects()
        .command()
        .is_some_and(|c| c.escalation.is_none());
    if !runs_confined || !guard.sandbox.mode.confines() {
        return None;
    }
    let text = input.result().text();
    let denials: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("Permission denied")
                || l.contains("Operation not permitted")
                || l.contains("Read-only file system")
        })
        .collect();
    if denials.is_empty() {
        return None;
    }
    let cwd = call.caller.as_ref().and_then(|c| c.cwd.clone());
    let policy = guard.sandbox.for_workspace(cwd.as_deref());
    let blocked: Vec<String> = denials
        .iter()
        .flat_map(|l| l.split([' ', ':', '\'', '"', '`']))
        .filter(|token| token.starts_with('/'))
        .filter(|token| !policy.allows_write(std::path::Path::new(token)))
        .map(str::to_owned)
        .collect();
    let roots: Vec<String> = policy
        .write_roots()
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    let escalate = if guard.approval == ApprovalPolicy::Ask {
        ", or escalate with `escalate: true` and a justification"
    } else {
        ""
    };
    if let Some(path) = blocked.first() {
        return Some(format!(
            "[sandbox] write to {path} blocked: outside the writable roots ({}). Write inside \
             the workspace{escalate}.",
            roots.join(", ")
        ));
    }
    if !policy.network && (text.contains("connect") || text.contains("socket")) {
        return Some(format!(
            "[sandbox] the network is off for commands (`[sandbox] network = false`){escalate}."
        ));
    }
    None
}

/// The hosts the network proxy refused this call's commands, one line each, taken from the
/// proxy (so each is reported once) and logged in the session for the person's front end.
/// Called as the call's result is settled: the proxy records a refusal before it answers
/// the command, so every refusal the command saw is in it.
fn network_report(call: &ExecView) -> Vec<String> {
    let Some(caller) = &call.caller else {
        return Vec::new();
    };
    let Some(proxy) = caller.ctx.get::<dyn NetworkProxy>() else {
        return Vec::new();
    };
    let blocked = proxy.take_blocked(caller.agent_id.as_str(), call.call_id.as_str());
    for b in &blocked {
        let data = json!({
            "callId": call.call_id,
            "host": b.host,
            "port": b.port,
            "line": b.line,
        });
        if let Err(error) = caller.session.append_plugin(NETWORK_BLOCKED_EVENT, &data) {
            tracing::warn!(%error, "cannot log a blocked host");
        }
    }
    blocked.into_iter().map(|b| b.line).collect()
}

fn log(call: &ExecView, guard: &Guard, decision: &Decision) {
    let Some(caller) = &call.caller else {
        return;
    };
    let mut data = json!({
        "callId": call.call_id,
        "tool": call.name,
        "sandbox": guard.sandbox.mode.as_str(),
        "network": guard.sandbox.network,
        "approval": guard.approval.as_str(),
    });
    if let (Value::Object(map), Ok(Value::Object(decision))) =
        (&mut data, serde_json::to_value(decision))
    {
        map.extend(decision);
    }
    if let Err(error) = caller.session.append_plugin(DECISION_EVENT, &data) {
        tracing::warn!(%error, "cannot log the guard's decision");
    }
}

/// The answer to a question, told apart by the pipeline's denial texts (it runs, or it is
/// denied as rejected, cancelled, or with nobody to ask).
fn log_answer(call: &ExecView, result: &ToolCallResult) {
    let Some(caller) = &call.caller else {
        return;
    };
    let text = result.text();
    let answer = if !text.starts_with("Error: ") || result.error.is_some() {
        "allowed"
    } else if text.contains("the user rejected") {
        "rejected"
    } else if text.contains("was cancelled") {
        "cancelled"
    } else {
        "unavailable"
    };
    let data = json!({
        "callId": call.call_id,
        "tool": call.name,
        "by": "user",
        "answer": answer,
    });
    if let Err(error) = caller.session.append_plugin(DECISION_EVENT, &data) {
        tracing::warn!(%error, "cannot log the user's answer");
    }
}

/// The data of every guard decision and answer logged in `session`, oldest first: the audit
/// trail a front end or a test reads back.
pub fn logged_decisions(session: &dsh_session::Session) -> Vec<Value> {
    session
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            dsh_session::EventKind::Other { type_name, data } if type_name == DECISION_EVENT => {
                Some(data.clone())
            }
            _ => None,
        })
        .collect()
}

/// One line for a transcript (`dsh sessions show`) from an `approval/decided` event's data.
pub fn describe_decision(data: &Value) -> String {
    let get = |key| data.get(key).and_then(Value::as_str).unwrap_or("");
    if get("by") == "user" {
        return format!(
            "[guard] {}: the user answered {}",
            get("tool"),
            get("answer")
        );
    }
    let mut line = format!(
        "[guard] {}: {} by {}",
        get("tool"),
        get("verdict"),
        get("by")
    );
    if let Some(rule) = data.get("rule").and_then(Value::as_str) {
        line.push_str(&format!(" ({rule})"));
    }
    line.push_str(&format!(
        " [sandbox {}, approval {}]",
        get("sandbox"),
        get("approval")
    ));
    if let Some(reason) = data.get("reason").and_then(Value::as_str) {
        line.push_str(&format!(": {}", reason.lines().next().unwrap_or("")));
    }
    line
}
