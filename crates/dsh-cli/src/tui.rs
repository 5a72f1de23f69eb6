//! The full-screen UI, composed: `dsh` and `dsh chat` on a terminal (unless `--plain`).
//!
//! `dsh-tui` drives agents through the [`TuiHost`] seam; this module is that host over the
//! harness (the same sessions, routes and policy `dsh run` and the line chat get).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use dsh_agent::{AgentHandle, AgentRef};
use dsh_guard::ApprovalPolicy;
use dsh_harness::config::{Overrides, Settings, process_env};
use dsh_harness::{
    DRAIN, FrontEnd, Harness, HarnessError, HarnessOptions, RouteOverrides, SessionReference,
    SessionRequest, workspace_dir,
};
use dsh_kernel::Context;
use dsh_session::{SessionId, SessionOrigin};
use dsh_tui::commands::Entry;
use dsh_tui::runner::TuiOptions;
use dsh_tui::{
    ContextPart, ContextReport, HostError, HostInfo, ModelChoice, ModelEntry, Prices, SessionEntry,
    TuiHost,
};
use tokio_util::sync::CancellationToken;

use crate::signals::Signals;

/// Whether `dsh`/`dsh chat` should start the full-screen UI: both ends are terminals, the
/// terminal is not `dumb` and `--plain` was not given.
pub fn wanted(plain: bool) -> bool {
    !plain
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// The interactive front end for `dsh`, `dsh chat` and `dsh sessions resume`: the full-screen
/// UI when [`wanted`], else the line chat. `plan` opens the first session in plan mode.
pub fn interactive(
    settings: Settings,
    flags: Overrides,
    cwd: Option<PathBuf>,
    reference: SessionReference,
    plain: bool,
    plan: bool,
) -> i32 {
    if wanted(plain) {
        main(settings, flags, cwd, reference, plan)
    } else {
        crate::chat::main(settings, flags, cwd, reference, plan)
    }
}

struct Host {
    harness: Harness,
    cwd: PathBuf,
    /// `--plan`: the first session the UI opens starts in plan mode.
    plan_first: AtomicBool,
}

/// A host error in the words `dsh` prints everywhere: the error and its causes.
fn host_error(e: HarnessError) -> HostError {
    HostError(format!("{:#}", anyhow::Error::new(e)))
}

#[async_trait]
impl TuiHost for Host {
    fn ctx(&self) -> &Context {
        self.harness.context()
    }

    fn info(&self, session: Option<&SessionId>) -> HostInfo {
        // Without a session: what a new one runs under (no session has that empty id).
        let policy = self.harness.policy(session.unwrap_or(&SessionId::new("")));
        let models = self
            .harness
            .models()
            .into_iter()
            .map(|m| ModelEntry {
                id: m.facts.id,
                provider: m.provider,
                context_window: Some(m.facts.context_window).filter(|w| *w > 0),
                prices: m.facts.price.map(|p| Prices {
                    input: p.input,
                    cache_read: p.cached_input,
                    output: p.output,
                }),
            })
            .collect();
        HostInfo {
            model: policy.model.id.clone(),
            provider: policy.provider.clone(),
            cwd: self.cwd.clone(),
            mode: policy.describe(),
            models,
        }
    }

    async fn create(&self) -> Result<AgentHandle, HostError> {
        let mut request = SessionRequest::new(SessionReference::New).in_dir(&self.cwd);
        request.plan = self.plan_first.swap(false, Ordering::AcqRel);
        Ok(self.harness.open(request).await.map_err(host_error)?.handle)
    }

    async fn locate(&self, reference: &str) -> Result<SessionId, HostError> {
        let request = SessionRequest::new(SessionReference::Resume(reference.to_owned()));
        Ok(self.harness.locate(&request).await.map_err(host_error)?.id)
    }

    async fn resume(&self, id: SessionId) -> Result<AgentHandle, HostError> {
        let mut request = SessionRequest::new(SessionReference::Resume(id.to_string()));
        request.plan = self.plan_first.swap(false, Ordering::AcqRel);
        Ok(self.harness.open(request).await.map_err(host_error)?.handle)
    }

    fn commands(&self, session: &SessionId) -> Vec<Entry> {
        let Some(catalog) = self.harness.catalog(session) else {
            return Vec::new();
        };
        catalog
            .slash_entries()
            .into_iter()
            .map(|e| Entry {
                name: e.name,
                args: e.argument_hint.unwrap_or_default(),
                what: e.description,
            })
            .collect()
    }

    fn expand(&self, session: &SessionId, line: &str) -> Option<Result<String, HostError>> {
        Some(
            self.harness
                .expand(session, line)?
                .map(|expansion| expansion.prompt)
                .map_err(|problem| HostError(problem.to_string())),
        )
    }

    fn set_plan(&self, agent: &AgentHandle, on: bool) -> Result<(), HostError> {
        self.harness
            .set_plan(agent.agent(), on)
            .map(|_| ())
            .map_err(host_error)
    }

    async fn sessions(&self) -> Result<Vec<SessionEntry>, HostError> {
        let listings = self
            .harness
            .store()
            .listings()
            .await
            .map_err(|e| HostError(e.to_string()))?;
        Ok(listings
            .into_iter()
            // Subagent sessions belong to their parent's conversation.
            .filter(|l| l.header.origin != Some(SessionOrigin::Subagent))
            .map(|l| SessionEntry {
                id: l.header.id,
                first_prompt: l.first_prompt,
                last_activity: l.last_activity,
                turns: l.turns,
            })
            .collect())
    }

    async fn compact(
        &self,
        agent: AgentRef,
        focus: Option<String>,
        cancel: CancellationToken,
    ) -> Result<String, HostError> {
        // The same words as the line chat's `/compact`.
        crate::usage::compact_with(&self.harness, &agent, focus.as_deref(), &cancel)
            .await
            .map_err(HostError)
    }

    fn context(&self, agent: &AgentRef) -> Result<ContextReport, HostError> {
        let compaction = self.harness.compaction().ok_or_else(|| {
            HostError("context use is not available (compaction is not mounted)".into())
        })?;
        let session = agent.session();
        let used = compaction.context_use(session);
        let parts = dsh_compaction::context_breakdown(session, used.calibration, 5);
        let part = |label: String, tokens| ContextPart { label, tokens };
        Ok(ContextReport {
            tokens: used.tokens,
            window: used.window,
            measured: used.measured,
            parts: vec![
                part("system prompt".into(), parts.system),
                part(format!("tools ({})", parts.tool_count), parts.tools),
                part("conversation".into(), parts.history),
            ],
            largest: parts
                .largest
                .into_iter()
                .map(|(label, tokens)| part(label, tokens))
                .collect(),
        })
    }

    async fn switch_model(&self, agent: &AgentRef, choice: ModelChoice) -> Result<(), HostError> {
        let route = RouteOverrides {
            provider: choice.provider,
            model: choice.model,
        };
        self.harness
            .switch_route(agent, route)
            .await
            .map(drop)
            .map_err(host_error)
    }

    fn set_approval(&self, session: &SessionId, policy: Option<&str>) -> Result<(), HostError> {
        let policy = policy
            .map(str::parse::<ApprovalPolicy>)
            .transpose()
            .map_err(|e| HostError(e.to_string()))?;
        self.harness.set_approval(session, policy);
        Ok(())
    }

    async fn turns(
        &self,
        agent: &dsh_agent::AgentRef,
    ) -> Result<Vec<dsh_tui::rewind::TurnEntry>, HostError> {
        let service = self
            .harness
            .checkpoints()
            .ok_or_else(|| HostError("checkpoints are not available".into()))?;
        Ok(service
            .turns(agent.session())
            .await
            .into_iter()
            .map(|t| dsh_tui::rewind::TurnEntry {
                turn: t.turn,
                prompt: t.prompt,
                changed_files: t.changed_files,
            })
            .collect())
    }

    async fn rewind(
        &self,
        agent: &dsh_agent::AgentRef,
        turn: u64,
        scope: dsh_tui::rewind::RewindScope,
    ) -> Result<String, HostError> {
        use dsh_checkpoint::{RewindMode, RewindRequest};
        use dsh_tui::rewind::RewindScope;
        let service = self
            .harness
            .checkpoints()
            .ok_or_else(|| HostError("checkpoints are not available".into()))?;
        let mode = match scope {
            RewindScope::Both => RewindMode::Both,
            RewindScope::Files => RewindMode::FilesOnly,
            RewindScope::Conversation => RewindMode::ConversationOnly,
        };
        let request = RewindRequest {
            to_turn: turn,
            mode,
            force: false,
        };
        service
            .rewind(agent.session(), request)
            .await
            .map(|report| {
                crate::sessions::describe_rewind(turn, &report)
                    .trim_end()
                    .to_owned()
            })
            .map_err(|e| HostError(e.to_string()))
    }
}

/// Runs the full-screen UI; returns the exit status.
pub fn main(
    settings: Settings,
    flags: Overrides,
    cwd: Option<PathBuf>,
    reference: SessionReference,
    plan: bool,
) -> i32 {
    let first = reference.clone();
    start(settings, cwd, &reference, |settings, cwd, signals| {
        tui(settings, flags, cwd, first, signals, plan)
    })
}

/// The start every interactive front end shares: credentials checked (for a new session: a
/// resumed one keeps its own route, checked when it opens), the working directory resolved,
/// the runtime built, then `body` run on it; its error is printed. Returns the exit status.
pub fn start<F>(
    settings: Settings,
    cwd: Option<PathBuf>,
    reference: &SessionReference,
    body: impl FnOnce(Settings, PathBuf, Signals) -> F,
) -> i32
where
    F: Future<Output = anyhow::Result<()>>,
{
    if *reference == SessionReference::New
        && let Err(e) = settings.check_credentials(&process_env)
    {
        eprintln!("dsh: {e}");
        return 1;
    }
    let cwd = match workspace_dir(cwd) {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("dsh: {e}");
            return 1;
        }
    };
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let ran = runtime.block_on(async move {
        // Until the front end takes Ctrl-C over, a signal ends a start-up at once.
        let signals = Signals::install()
            .map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
        body(settings, cwd, signals).await
    });
    match ran {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("dsh: {e:#}");
            1
        }
    }
}

/// The harness of an interactive front end: configured agents started, and the provider
/// checked now (a chat is long-lived: a bad provider setting shows at start, not at the first
/// message).
pub async fn start_harness(settings: Settings, flags: Overrides) -> anyhow::Result<Harness> {
    let options = HarnessOptions::new(FrontEnd::Interactive).with_flags(flags);
    let harness = Harness::start(settings, options).await?;
    if let Err(e) = harness.ready().await {
        harness.shutdown().await;
        return Err(e.into());
    }
    for notice in harness.notices() {
        eprintln!("dsh: {notice}");
    }
    Ok(harness)
}

async fn tui(
    settings: Settings,
    flags: Overrides,
    cwd: PathBuf,
    reference: SessionReference,
    signals: Signals,
    plan: bool,
) -> anyhow::Result<()> {
    let history = settings.home.value.join("tui-history.jsonl");
    let harness = start_harness(settings, flags).await?;
    // `-c` is found before the UI starts; an id (or a prefix of one) is resolved as the UI
    // resumes it, so a bad one is reported in the UI.
    let resume = match &reference {
        SessionReference::New => None,
        SessionReference::Resume(reference) => Some(reference.clone()),
        other => {
            let request = SessionRequest::new(other.clone()).in_dir(&cwd);
            match harness.locate(&request).await {
                Ok(located) => Some(located.id.to_string()),
                Err(e) => {
                    harness.shutdown().await;
                    return Err(e.into());
                }
            }
        }
    };
    let host = Arc::new(Host {
        harness,
        cwd,
        plan_first: AtomicBool::new(plan),
    });
    let options = TuiOptions {
        resume,
        history: Some(history),
        keyboard_protocol: std::env::var("DSH_TUI_KEYBOARD_PROTOCOL").map_or(true, |v| v != "0"),
    };
    // The UI reads Ctrl-C as a key; SIGTERM still ends dsh.
    signals.interactive();
    let result = dsh_tui::run(host.clone(), options).await;
    host.harness
        .shutdown_by(tokio::time::Instant::now() + DRAIN)
        .await;
    let exit = result?;
    if let Some(answer) = &exit.last_answer {
        println!("{}", answer.trim_end());
    }
    if let Some(id) = &exit.session {
        println!("session {id} (dsh chat --resume {id})");
    }
    Ok(())
}
