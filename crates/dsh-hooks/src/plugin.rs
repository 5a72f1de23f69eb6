//! The hooks plugin: Claude Code's hook events mapped onto the loop's interception points.
//!
//! | hook | where | what it can do |
//! | --- | --- | --- |
//! | `SessionStart` | first `agent/pre-step` of an agent | add context to the first request |
//! | `UserPromptSubmit` | `agent/pre-step` with a person's prompt | refuse the step, add context |
//! | `PreToolUse` | `tools/pre-execute` | deny, ask (the approval policy), allow |
//! | `PostToolUse` | `tools/post-execute` | block the result with feedback, add context |
//! | `Stop` / `SubagentStop` | `agent/turn-stopping` | force another step (at most 3 a turn) |
//! | `Notification` | a call that needs approval; an idle root agent | tell the person |
//! | `PreCompact` | a `compaction/start` in the log (run beside it) | tell the person |
//! | `SessionStart` (`compact`) | the first step after a finished compaction | add context |
//!
//! The plugin is mounted once, globally, because a subagent's events do not reach listeners
//! scoped to its parent; each agent's hooks are those of its own workspace, loaded on first
//! use and cached.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_agent::events::{
    AgentDisposed, AgentPreStep, AgentSessionStart, AgentStatusChanged, AgentTurnStopping,
    PreStepDecision, SessionStartSource,
};
use dsh_agent::{AgentRef, AgentStatus, CancelOptions, agent_of};
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_session::{
    CancelCause, ContentBlock, EventKind, Message, MessageSource, Role, Session, SessionEventFired,
    SessionId, SessionOrigin,
};
use dsh_tools::{ExecView, PostExecute, PreExecute, ToolsPostExecute, ToolsPreExecute};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use dsh_fs::{Trust, TrustRecord};

use crate::config::{HookEvent, HookSet, default_paths};
use crate::matcher::claude_code_name;
use crate::outcome::{Decision, HookOutcome};
use crate::runner::{HookSite, run_event};
use crate::trust::{HookTrust, TrustGate};

/// The plugin name, also the `plugin` of the context messages hooks add.
pub const HOOKS_PLUGIN: &str = "hooks";

/// How many times Stop hooks may force a turn to go on before dsh lets it end anyway (Claude
/// Code has no such guard; a hook that always blocks would loop forever).
pub const MAX_FORCED_CONTINUATIONS: u32 = 3;

/// Where hooks come from.
#[derive(Clone, Debug)]
pub enum HookSource {
    /// Every agent uses this set (tests, embedders).
    Fixed(Arc<HookSet>),
    /// Each agent uses the files of its own workspace: `$DSH_HOME/hooks.json`,
    /// `<workspace>/.dsh/hooks.json`, and with `claude_code` the workspace's
    /// `.claude/settings.json` and `.claude/settings.local.json`.
    Files {
        /// dsh's home directory.
        dsh_home: PathBuf,
        /// Also read Claude Code's settings files.
        claude_code: bool,
    },
}

/// Options of [`HooksPlugin`].
#[derive(Clone, Debug)]
pub struct HooksOptions {
    /// Where hooks come from.
    pub source: HookSource,
    /// Run `Notification` hooks when a root agent goes idle (interactive front ends; a headless
    /// run ends when its agent is idle, so nobody is waiting there).
    pub idle_notifications: bool,
    /// How untrusted workspace hooks are decided about (see [`crate::HookTrust`]); `None`
    /// runs them sandboxed and says so.
    pub trust: Option<Arc<dyn HookTrust>>,
}

/// Mounts command hooks on the loop's events for every agent.
pub struct HooksPlugin {
    state: Arc<State>,
}

impl HooksPlugin {
    /// A plugin reading hooks as `options` say.
    pub fn new(options: HooksOptions) -> Self {
        let record = match &options.source {
            HookSource::Files { dsh_home, .. } => Some(TrustRecord::new(dsh_home)),
            HookSource::Fixed(_) => None,
        };
        let trust = Arc::new(TrustGate::new(record, options.trust.clone()));
        Self {
            state: Arc::new(State {
                options,
                loaded: Mutex::new(HashMap::new()),
                agents: Mutex::new(HashMap::new()),
                trust,
            }),
        }
    }
}

/// A workspace's hooks, or why they could not be read.
type Loaded = Arc<Result<HookSet, String>>;

struct State {
    options: HooksOptions,
    /// Per workspace directory.
    loaded: Mutex<HashMap<PathBuf, Loaded>>,
    /// Per live agent.
    agents: Mutex<HashMap<SessionId, AgentHooks>>,
    /// Decides about untrusted workspace hooks.
    trust: Arc<TrustGate>,
}

#[derive(Default)]
struct AgentHooks {
    /// `SessionStart` still owed (run at the agent's first step).
    pending_start: Option<&'static str>,
    /// Forced continuations per turn.
    forced: HashMap<u64, u32>,
}

impl State {
    fn hooks_for(&self, cwd: &Path) -> Loaded {
        match &self.options.source {
            HookSource::Fixed(set) => self
                .loaded
                .lock()
                .entry(PathBuf::new())
                .or_insert_with(|| Arc::new(Ok(HookSet::clone(set))))
                .clone(),
            HookSource::Files {
                dsh_home,
                claude_code,
            } => self
                .loaded
                .lock()
                .entry(cwd.to_path_buf())
                .or_insert_with(|| {
                    // The user's own file needs no trust; the workspace's need the record's.
                    let own = dsh_home.join("hooks.json");
                    let record = TrustRecord::new(dsh_home);
                    let trust = |path: &Path, content: &[u8]| {
                        if path == own {
                            return Trust::Trusted;
                        }
                        record.check(path, content).unwrap_or_else(|error| {
                            tracing::warn!("{error}; workspace hooks count as untrusted");
                            Trust::Unknown
                        })
                    };
                    let paths = default_paths(dsh_home, cwd, *claude_code);
                    let loaded = HookSet::load_trusted(&paths, &trust).map_err(|e| e.to_string());
                    if let Err(e) = &loaded {
                        tracing::error!("{e}; every tool call of this workspace is refused");
                    }
                    Arc::new(loaded)
                })
                .clone(),
        }
    }

    fn site(
        &self,
        agent: &AgentRef,
        cancel: Option<tokio_util::sync::CancellationToken>,
    ) -> (HookSite, Loaded) {
        let cwd = workspace_of(agent);
        let loaded = self.hooks_for(&cwd);
        (
            HookSite {
                session: agent.session().clone(),
                ctx: agent.ctx().clone(),
                cwd,
                cancel,
                trust: self.trust.clone(),
            },
            loaded,
        )
    }
}

fn workspace_of(agent: &AgentRef) -> PathBuf {
    agent
        .session()
        .header()
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn is_subagent(agent: &AgentRef) -> bool {
    agent.session().header().origin == Some(SessionOrigin::Subagent)
}

fn context_message(text: String) -> Arc<Message> {
    Arc::new(Message::plugin_text(HOOKS_PLUGIN, text))
}

/// `continue: false`: the agent stops, as Claude Code stops after such a hook.
fn stop_agent(agent: &AgentRef, outcome: &HookOutcome) {
    if let Some(reason) = &outcome.stop {
        tracing::warn!("hook stopped the agent: {reason}");
        agent.cancel(
            CancelCause::Hook {
                reason: reason.clone(),
            },
            CancelOptions { keep_inbox: true },
        );
    }
}

impl Plugin for HooksPlugin {
    fn name(&self) -> &str {
        HOOKS_PLUGIN
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let state = self.state.clone();
        let _ = ctx.on::<AgentSessionStart>(move |notice| {
            let source = match notice.source {
                SessionStartSource::Startup => "startup",
                SessionStartSource::Resume => "resume",
            };
            state
                .agents
                .lock()
                .entry(notice.agent.id().clone())
                .or_default()
                .pending_start = Some(source);
        })?;

        let state = self.state.clone();
        let _ = ctx.on::<AgentDisposed>(move |agent| {
            state.agents.lock().remove(agent.id());
        })?;

        let state = self.state.clone();
        let _ = ctx.on_waterfall::<AgentPreStep, _>(move |mut request, next| {
            let state = state.clone();
            async move {
                let agent = request.agent.clone();
                let (site, loaded) = state.site(&agent, Some(request.cancel.clone()));
                let Ok(set) = loaded.as_ref() else {
                    return next.run(request).await;
                };
                let pending = state
                    .agents
                    .lock()
                    .get_mut(agent.id())
                    .and_then(|a| a.pending_start.take());
                let mut added = Vec::new();
                if let Some(source) = pending {
                    let outcome = run_event(
                        set,
                        HookEvent::SessionStart,
                        Some(source),
                        fields([("source", json!(source))]),
                        &site,
                    )
                    .await;
                    added.extend(outcome.contexts);
                }
                let prompt = prompt_text(&request.messages);
                if let Some(prompt) = prompt.filter(|_| set.has(HookEvent::UserPromptSubmit)) {
                    let outcome = run_event(
                        set,
                        HookEvent::UserPromptSubmit,
                        None,
                        fields([("prompt", json!(prompt))]),
                        &site,
                    )
                    .await;
                    if outcome.blocks() || outcome.stop.is_some() {
                        let reason = outcome
                            .stop
                            .clone()
                            .unwrap_or_else(|| outcome.reason_text("blocked by a hook"));
                        tracing::warn!("prompt blocked by a UserPromptSubmit hook: {reason}");
                        return Ok(PreStepDecision::Reject);
                    }
                    added.extend(outcome.contexts);
                }
                request
                    .messages
                    .extend(added.into_iter().map(context_message));
                next.run(request).await
            }
        })?;

        let state = self.state.clone();
        let _ = ctx.on_waterfall::<ToolsPreExecute, _>(move |exec, next| {
            let state = state.clone();
            async move {
                let Some(agent) = exec.caller.as_ref().and_then(|c| agent_of(&c.ctx)) else {
                    return next.run(exec).await;
                };
                let (site, loaded) = state.site(&agent, Some(exec.cancel.clone()));
                let set = match loaded.as_ref() {
                    Ok(set) => set,
                    Err(e) => {
                        return Ok(PreExecute::Deny {
                            reason: format!("refused: the workspace's hooks cannot be read ({e})"),
                        });
                    }
                };
                let outcome = if set.has(HookEvent::PreToolUse) {
                    run_event(
                        set,
                        HookEvent::PreToolUse,
                        Some(&exec.name),
                        tool_fields(&exec),
                        &site,
                    )
                    .await
                } else {
                    HookOutcome::default()
                };
                stop_agent(&agent, &outcome);
                if outcome.blocks() || outcome.stop.is_some() {
                    let reason = outcome
                        .stop
                        .clone()
                        .unwrap_or_else(|| outcome.reason_text("denied by a PreToolUse hook"));
                    return Ok(PreExecute::Deny { reason });
                }
                // An `allow` is not a bypass: the rest of the policy still decides, and the
                // stricter answer wins.
                let inner = next.run(exec.clone()).await?;
                let decided = match (inner, outcome.decision) {
                    (deny @ PreExecute::Deny { .. }, _) => deny,
                    (PreExecute::Ask { reason }, Decision::Ask) => PreExecute::Ask {
                        reason: Some(outcome.reason_text(reason.as_deref().unwrap_or(""))),
                    },
                    (ask @ PreExecute::Ask { .. }, _) => ask,
                    (PreExecute::Allow, Decision::Ask) => PreExecute::Ask {
                        reason: Some(outcome.reason_text("a PreToolUse hook asks")),
                    },
                    (allow, _) => allow,
                };
                if let PreExecute::Ask { reason } = &decided {
                    notify(
                        &state,
                        &agent,
                        "permission_prompt",
                        format!(
                            "dsh needs your permission to use {}{}",
                            exec.name,
                            reason
                                .as_deref()
                                .map(|r| format!(": {r}"))
                                .unwrap_or_default()
                        ),
                    );
                }
                Ok(decided)
            }
        })?;

        let state = self.state.clone();
        let _ = ctx.on_waterfall::<ToolsPostExecute, _>(move |input, next| {
            let state = state.clone();
            async move {
                let exec = input.exec().clone();
                let result = input.result().clone();
                let inner = next.run(input).await?;
                let Some(agent) = exec.caller.as_ref().and_then(|c| agent_of(&c.ctx)) else {
                    return Ok(inner);
                };
                let (site, loaded) = state.site(&agent, Some(exec.cancel.clone()));
                let Ok(set) = loaded.as_ref() else {
                    return Ok(inner);
                };
                if !set.has(HookEvent::PostToolUse) {
                    return Ok(inner);
                }
                let mut fields = tool_fields(&exec);
                fields.insert(
                    "tool_response".into(),
                    json!({ "output": result.text(), "is_error": result.is_error }),
                );
                let outcome =
                    run_event(set, HookEvent::PostToolUse, Some(&exec.name), fields, &site).await;
                stop_agent(&agent, &outcome);
                let extra: Vec<Message> = outcome
                    .contexts
                    .iter()
                    .map(|c| Message::plugin_text(HOOKS_PLUGIN, c.clone()))
                    .collect();
                Ok(match inner {
                    PostExecute::Block {
                        mut feedback,
                        mut contexts,
                    } => {
                        if outcome.blocks() {
                            feedback.push(ContentBlock::text(outcome.reason_text("")));
                        }
                        contexts.extend(extra);
                        PostExecute::Block { feedback, contexts }
                    }
                    PostExecute::Accept { .. } if outcome.blocks() => PostExecute::Block {
                        feedback: vec![ContentBlock::text(format!(
                            "PostToolUse hook feedback:\n{}",
                            outcome.reason_text("blocked by a PostToolUse hook")
                        ))],
                        contexts: extra,
                    },
                    PostExecute::Accept {
                        content,
                        mut contexts,
                    } => {
                        contexts.extend(extra);
                        PostExecute::Accept { content, contexts }
                    }
                })
            }
        })?;

        let state = self.state.clone();
        let _ = ctx.on_serial::<AgentTurnStopping, _>(move |stopping| {
            let state = state.clone();
            async move {
                let agent = stopping.agent.clone();
                let event = if is_subagent(&agent) {
                    HookEvent::SubagentStop
                } else {
                    HookEvent::Stop
                };
                let (site, loaded) = state.site(&agent, Some(stopping.cancel.clone()));
                let Ok(set) = loaded.as_ref() else {
                    return Ok(());
                };
                if !set.has(event) {
                    return Ok(());
                }
                let forced = state
                    .agents
                    .lock()
                    .get(agent.id())
                    .and_then(|a| a.forced.get(&stopping.turn).copied())
                    .unwrap_or(0);
                let outcome = run_event(
                    set,
                    event,
                    None,
                    fields([("stop_hook_active", json!(forced > 0))]),
                    &site,
                )
                .await;
                if !outcome.blocks() || outcome.stop.is_some() {
                    return Ok(());
                }
                if forced >= MAX_FORCED_CONTINUATIONS {
                    tracing::warn!(
                        "{} hook blocked the end of turn {} again; it already forced \
                         {MAX_FORCED_CONTINUATIONS} more steps, so the turn ends",
                        event.name(),
                        stopping.turn
                    );
                    return Ok(());
                }
                state
                    .agents
                    .lock()
                    .entry(agent.id().clone())
                    .or_default()
                    .forced
                    .insert(stopping.turn, forced + 1);
                let reason = outcome.reason_text("a Stop hook asked you to continue");
                agent.steer(Message::plugin_text(
                    HOOKS_PLUGIN,
                    format!("{} hook feedback:\n{reason}", event.name()),
                ))?;
                Ok(())
            }
        })?;

        // Compactions are read off the log (`compaction/start` / `compaction/end`, written by
        // dsh-compaction), so hooks need no dependency on the compaction plugin.
        let state = self.state.clone();
        let root = ctx.clone();
        let _ = ctx.on::<SessionEventFired>(move |notice| {
            let EventKind::Other { type_name, data } = &notice.event.kind else {
                return;
            };
            match type_name.as_str() {
                "compaction/start" => {
                    let trigger = if data["trigger"] == "manual" {
                        "manual"
                    } else {
                        "auto"
                    };
                    pre_compact(&state, &root, &notice.session, trigger);
                }
                "compaction/end" if data.get("error").is_none_or(Value::is_null) => {
                    state
                        .agents
                        .lock()
                        .entry(notice.session.id().clone())
                        .or_default()
                        .pending_start = Some("compact");
                }
                _ => {}
            }
        })?;

        if self.state.options.idle_notifications {
            let state = self.state.clone();
            let _ = ctx.on::<AgentStatusChanged>(move |change| {
                if change.status == AgentStatus::Idle && !is_subagent(&change.agent) {
                    notify(
                        &state,
                        &change.agent,
                        "idle_prompt",
                        "dsh is waiting for your input".into(),
                    );
                }
            })?;
        }
        Ok(())
    }
}

/// Fires `PreCompact` hooks beside the compaction that just started (they cannot block it, in
/// Claude Code either; nothing waits for them).
fn pre_compact(state: &Arc<State>, ctx: &Context, session: &Arc<Session>, trigger: &'static str) {
    let cwd = session
        .header()
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let loaded = state.hooks_for(&cwd);
    let Ok(set) = loaded.as_ref() else {
        return;
    };
    if !set.has(HookEvent::PreCompact) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let site = HookSite {
        session: session.clone(),
        ctx: ctx.clone(),
        cwd,
        cancel: None,
        trust: state.trust.clone(),
    };
    let set = set.clone();
    runtime.spawn(async move {
        let _ = run_event(
            &set,
            HookEvent::PreCompact,
            Some(trigger),
            fields([
                ("trigger", json!(trigger)),
                ("custom_instructions", json!("")),
            ]),
            &site,
        )
        .await;
    });
}

/// Fires `Notification` hooks without waiting for them (nothing waits on a notification).
fn notify(state: &Arc<State>, agent: &AgentRef, kind: &'static str, message: String) {
    let (site, loaded) = state.site(agent, None);
    let Ok(set) = loaded.as_ref() else {
        return;
    };
    if !set.has(HookEvent::Notification) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let set = set.clone();
    runtime.spawn(async move {
        let _ = run_event(
            &set,
            HookEvent::Notification,
            Some(kind),
            fields([
                ("message", json!(message)),
                ("notification_type", json!(kind)),
            ]),
            &site,
        )
        .await;
    });
}

fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The tool fields of the hook input: `tool_name` in Claude Code's spelling (so existing
/// scripts that test `tool_name == "Bash"` work), `dsh_tool_name` in dsh's.
fn tool_fields(exec: &ExecView) -> Map<String, Value> {
    fields([
        ("tool_name", json!(claude_code_name(&exec.name))),
        ("dsh_tool_name", json!(exec.name)),
        ("tool_input", Value::clone(&exec.arguments)),
        ("tool_use_id", json!(exec.call_id.as_str())),
    ])
}

/// The text of the person's own messages in a step's claimed batch, if it has any (the first
/// step of a turn, or steering).
fn prompt_text(messages: &[Arc<Message>]) -> Option<String> {
    let texts: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::User && m.source == MessageSource::User)
        .map(|m| m.text())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}
