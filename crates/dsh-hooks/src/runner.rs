//! Running the hooks of one event: through the session's shell executor (scrubbed environment,
//! the session's working directory and sandbox, process-group kill, a timeout), one after
//! another in configuration order, each run logged in the session.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use dsh_kernel::Context;
use dsh_session::{Persistence, Session, SessionLocation};
use dsh_shell::{ShellExecRequest, ShellExecutor};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{HookCommand, HookEvent, HookSet};
use crate::outcome::{HookExit, HookOutcome, decode};
use crate::trust::{TrustAnswer, TrustGate};

/// Event type of the log entry written before a hook runs.
pub const HOOK_INVOKED: &str = "hook/invoked";
/// Event type of the log entry written when a hook finished.
pub const HOOK_RESULT: &str = "hook/result";

/// Where one event happens: the session it belongs to and how to reach its services.
#[derive(Clone)]
pub struct HookSite {
    /// The subject agent's session (hooks are logged here).
    pub session: Arc<Session>,
    /// A context that reaches the shell executor and persistence (the agent's own).
    pub ctx: Context,
    /// The session's working directory (the hook's cwd and `cwd` input field).
    pub cwd: PathBuf,
    /// Stops the hooks when the turn is cancelled.
    pub cancel: Option<CancellationToken>,
    /// Decides about untrusted workspace hooks.
    pub trust: Arc<TrustGate>,
}

/// Runs every hook of `event` whose matcher accepts `subject`, in order, and merges their
/// verdicts most-restrictively. `fields` are the event's own input fields, added to the common
/// ones (`session_id`, `transcript_path`, `cwd`, `hook_event_name`).
pub async fn run_event(
    set: &HookSet,
    event: HookEvent,
    subject: Option<&str>,
    fields: Map<String, Value>,
    site: &HookSite,
) -> HookOutcome {
    let hooks: Vec<&HookCommand> = set.matching(event, subject).collect();
    let mut merged = HookOutcome::default();
    if hooks.is_empty() {
        return merged;
    }
    let Some(executor) = site.ctx.get::<dyn ShellExecutor>() else {
        merged.errors.push(format!(
            "{} hooks cannot run: no shell executor is available",
            event.name()
        ));
        report(event, &merged);
        return merged;
    };
    // A hook may change the workspace: whatever records it first (the turn checkpoint, taken
    // beside the first model request) is over before the hook starts.
    if let Some(fence) = site.ctx.get::<dsh_agent::WorkspaceFence>() {
        fence.pass(site.session.id()).await;
    }
    // A hook is a side effect: what it is told about (the claimed prompt, the call) is
    // durable before it runs, as a tool call is before its body. Free when nothing is pending.
    if let Some(store) = site.ctx.get::<dsh_session::SessionStore>()
        && site.session.is_attached()
        && let Err(error) = store.flush(&site.session).await
    {
        merged.errors.push(format!(
            "{} hooks did not run: the session could not be saved first: {error}",
            event.name()
        ));
        report(event, &merged);
        return merged;
    }
    let mut input = Map::new();
    input.insert("session_id".into(), json!(site.session.id().as_str()));
    input.insert(
        "transcript_path".into(),
        json!(transcript_path(site).await.map(|p| p.display().to_string())),
    );
    input.insert("cwd".into(), json!(site.cwd.display().to_string()));
    input.insert("hook_event_name".into(), json!(event.name()));
    input.extend(fields);
    let input = Value::Object(input);
    let untrusted = if hooks.iter().any(|h| !h.trusted) {
        site.trust.answer(site, set).await
    } else {
        TrustAnswer::Trust
    };
    for hook in hooks {
        if site.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            break;
        }
        let confine = !hook.trusted && untrusted == TrustAnswer::Confine;
        if !hook.trusted && untrusted == TrustAnswer::Skip {
            continue;
        }
        let outcome = run_one(executor.as_ref(), hook, &input, site, confine).await;
        merged.merge(outcome);
    }
    report(event, &merged);
    merged
}

/// Non-blocking errors and `systemMessage`s go to the person (stderr through tracing).
fn report(event: HookEvent, outcome: &HookOutcome) {
    for error in &outcome.errors {
        tracing::warn!("{} hook: {error}", event.name());
    }
    for message in &outcome.messages {
        tracing::warn!("{} hook says: {message}", event.name());
    }
}

async fn transcript_path(site: &HookSite) -> Option<PathBuf> {
    let persistence = site.ctx.get::<dyn Persistence>()?;
    match persistence.locate(site.session.id()).await {
        Ok(SessionLocation::File(path)) => Some(path),
        _ => None,
    }
}

async fn run_one(
    executor: &dyn ShellExecutor,
    hook: &HookCommand,
    input: &Value,
    site: &HookSite,
    confine: bool,
) -> HookOutcome {
    let event = hook.event;
    log(
        event,
        &site.session,
        HOOK_INVOKED,
        json!({
            "event": event.name(),
            "command": hook.command,
            "source": hook.source.display().to_string(),
            "trusted": hook.trusted,
        }),
    );
    let started = Instant::now();
    let exit = execute(executor, hook, input, site, confine).await;
    let outcome = match &exit {
        Ok(exit) => decode(event, &hook.command, exit),
        Err(message) => HookOutcome {
            errors: vec![format!("hook `{}` could not run: {message}", hook.command)],
            ..HookOutcome::default()
        },
    };
    let (code, timed_out, aborted) = match &exit {
        Ok(e) => (e.code, e.timed_out, e.aborted),
        Err(_) => (None, false, false),
    };
    log(
        event,
        &site.session,
        HOOK_RESULT,
        json!({
            "event": event.name(),
            "command": hook.command,
            "exitCode": code,
            "timedOut": timed_out,
            "aborted": aborted,
            "durationMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "outcome": outcome,
        }),
    );
    outcome
}

/// Runs the command with the event JSON on its standard input, through a pipe (as Claude
/// Code does): nothing of it is ever on disk, where a background command could rewrite it
/// before the hook reads it.
async fn execute(
    executor: &dyn ShellExecutor,
    hook: &HookCommand,
    input: &Value,
    site: &HookSite,
    untrusted: bool,
) -> Result<HookExit, String> {
    let input = serde_json::to_vec(input).map_err(|e| format!("cannot encode its input: {e}"))?;
    let project = site.cwd.display().to_string();
    let request = ShellExecRequest {
        command: hook.command.clone(),
        workdir: Some(site.cwd.clone()),
        timeout: Some(hook.timeout),
        env: vec![
            ("DSH_PROJECT_DIR".into(), project.clone()),
            ("CLAUDE_PROJECT_DIR".into(), project),
            (
                "DSH_SESSION_ID".into(),
                site.session.id().as_str().to_owned(),
            ),
        ],
        owner: None,
        cancel: site.cancel.clone(),
        // Hooks run in the session's sandbox like the agent's commands (dsh-guard), writable
        // workspace being the session's directory.
        unconfined: false,
        workspace: Some(site.cwd.clone()),
        // A hook is the person's own program, not the model's: a session's narrowing (plan
        // mode) is about what the model may do, so hooks keep the configured sandbox.
        session: None,
        stdin: Some(input),
        // An untrusted workspace's hook is sandboxed whatever the session's mode.
        untrusted,
        live: None,
    };
    let spec = executor.resolve(request).map_err(|e| e.to_string())?;
    let result = executor.run(spec).await.map_err(|e| e.to_string())?;
    Ok(HookExit {
        code: result.exit_code,
        timed_out: result.timed_out,
        aborted: result.aborted,
        stdout: result.stdout.text,
        stderr: result.stderr.text,
    })
}

/// Hook runs are logged only inside an open turn (where the log relates them to the work they
/// judged); runs outside a turn (idle notifications) are traced instead, and so are
/// `PreCompact` runs, which overlap a compaction whose events must stay one bracket.
fn log(event: HookEvent, session: &Session, kind: &str, data: Value) {
    if session.open_turn().is_none() || event == HookEvent::PreCompact {
        tracing::debug!(kind, %data, "hook run outside a turn");
        return;
    }
    if let Err(e) = session.append_plugin(kind, &data) {
        tracing::warn!("cannot log {kind}: {e}");
    }
}
