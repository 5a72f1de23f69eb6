//! The terminal UI's host over the harness: the same sessions, routes and policy `dsh run`,
//! the line chat and `dsh acp` get. A program embedding dsh that wants this UI passes a
//! [`HarnessHost`] to [`crate::run`]; `dsh` and `dsh chat` do exactly that.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use dsh_agent::{AgentHandle, AgentRef};
use dsh_guard::ApprovalPolicy;
use dsh_harness::{Harness, HarnessError, RouteOverrides, SessionReference, SessionRequest};
use dsh_kernel::Context;
use dsh_session::{SessionId, SessionOrigin};
use tokio_util::sync::CancellationToken;

use crate::commands::Entry;
use crate::rewind::{RewindScope, TurnEntry};
use crate::{
    ContextPart, ContextReport, HostError, HostInfo, ModelChoice, ModelEntry, Prices, SessionEntry,
    TuiHost,
};

/// A [`TuiHost`] whose sessions the harness opens in one working directory.
pub struct HarnessHost {
    harness: Harness,
    cwd: PathBuf,
    /// `--plan`: the first session the UI opens starts in plan mode.
    plan_first: AtomicBool,
}

impl HarnessHost {
    /// New sessions start in `cwd`; `harness` stays usable through [`HarnessHost::harness`]
    /// (to shut it down once the UI has returned).
    pub fn new(harness: Harness, cwd: PathBuf) -> Self {
        Self {
            harness,
            cwd,
            plan_first: AtomicBool::new(false),
        }
    }

    /// The first session the UI opens (new or resumed) starts in plan mode when `on`.
    pub fn plan_first(self, on: bool) -> Self {
        self.plan_first.store(on, Ordering::Release);
        self
    }

    /// The harness the UI's sessions live in.
    pub fn harness(&self) -> &Harness {
        &self.harness
    }
}

/// A host error in the words `dsh` prints everywhere: the error and its causes.
fn host_error(e: HarnessError) -> HostError {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    HostError(text)
}

#[async_trait]
impl TuiHost for HarnessHost {
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
        self.harness
            .slash_entries(session)
            .into_iter()
            .map(|e| Entry {
                name: e.name,
                args: e.argument_hint.unwrap_or_default(),
                what: e.description,
            })
            .collect()
    }

    async fn expand(&self, session: &SessionId, line: &str) -> Option<Result<String, HostError>> {
        Some(
            self.harness
                .expand_line(session, line)
                .await?
                .map_err(HostError),
        )
    }

    fn attach_images(
        &self,
        session: &SessionId,
        paths: &[PathBuf],
    ) -> Result<Vec<dsh_session::ContentBlock>, HostError> {
        self.harness
            .attach_image_files(session, paths)
            .map_err(host_error)
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
        dsh_harness::usage::compact_with(&self.harness, &agent, focus.as_deref(), &cancel)
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

    async fn turns(&self, agent: &AgentRef) -> Result<Vec<TurnEntry>, HostError> {
        let service = self
            .harness
            .checkpoints()
            .ok_or_else(|| HostError("checkpoints are not available".into()))?;
        Ok(service
            .turns(agent.session())
            .await
            .into_iter()
            .map(|t| TurnEntry {
                turn: t.turn,
                prompt: t.prompt,
                changed_files: t.changed_files,
            })
            .collect())
    }

    async fn rewind(
        &self,
        agent: &AgentRef,
        turn: u64,
        scope: RewindScope,
    ) -> Result<String, HostError> {
        use dsh_checkpoint::{RewindMode, RewindRequest};
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
            .map(|report| report.describe(turn).trim_end().to_owned())
            .map_err(|e| HostError(e.to_string()))
    }
}
