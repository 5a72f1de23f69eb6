//! The `Compaction` service: measure, prune, summarize, record.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use dsh_agent::{AgentRef, AgentStatus};
use dsh_llm::{Llm, LlmCallConfig, Message};
use dsh_session::{EventDraft, EventKind, Session, SessionId, SessionStore};
use tokio_util::sync::CancellationToken;

use crate::config::CompactionConfig;
use crate::cut::choose_cut;
use crate::error::CompactionError;
use crate::estimate::{ContextUse, context_use, message_tokens};
use crate::events::{
    CompactionEnd, CompactionStart, CompactionSummary, END, START, SUMMARY, Trigger,
    checkpoint_message,
};
use crate::prune::prune_results;
use crate::summarize;

/// What one compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    /// Tool results pruned without a model call.
    pub pruned: u64,
    /// Whether a checkpoint replaced the oldest history.
    pub summarized: bool,
    /// Estimated request tokens before.
    pub tokens_before: u64,
    /// Estimated request tokens after.
    pub tokens_after: u64,
}

/// Where a compaction runs: which turn and step (for the log and the overflow budget).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct At {
    /// The turn, `None` between turns.
    pub turn: Option<u64>,
    /// The step.
    pub step: Option<u64>,
}

/// Compacts agents' histories; provided on the context by [`crate::CompactionPlugin`] so front
/// ends (`/compact`, ACP commands, the TUI) can compact on demand and read context use.
pub struct Compaction {
    llm: Arc<Llm>,
    config: CompactionConfig,
    /// Makes a session's history durable before a summary request carries it (the loop no
    /// longer flushes before `agent/pre-step`, where pressure compaction runs).
    store: Option<Arc<SessionStore>>,
    /// Sessions with a compaction in flight: one at a time per session.
    busy: Mutex<HashSet<SessionId>>,
}

/// Releases a session's busy mark however the compaction ends.
struct BusyGuard<'a>(&'a Compaction, SessionId);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.1);
    }
}

impl Compaction {
    /// A service compacting through `llm` with `config`.
    pub fn new(llm: Arc<Llm>, config: CompactionConfig) -> Self {
        Self {
            llm,
            config,
            store: None,
            busy: Mutex::default(),
        }
    }

    /// The same service flushing sessions through `store` before it summarizes them.
    pub fn with_store(mut self, store: Option<Arc<SessionStore>>) -> Self {
        self.store = store;
        self
    }

    /// The policy in force.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// The session's context use, with the configured fallback window when no request has
    /// logged one yet.
    pub fn context_use(&self, session: &Session) -> ContextUse {
        let mut u = context_use(session);
        u.window = u.window.or(self.config.fallback_window);
        u
    }

    /// Whether a request of `tokens` is over the threshold of `window`.
    fn over(&self, tokens: u64, window: u64) -> bool {
        tokens as f64 > self.config.threshold_ratio * window as f64
    }

    /// `/compact [focus]`: summarizes the agent's history now. The agent must be idle (a
    /// manual compaction between turns records `turn: null`).
    pub async fn compact_now(
        &self,
        agent: &AgentRef,
        focus: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<CompactionOutcome, CompactionError> {
        if agent.status() != AgentStatus::Idle {
            return Err(CompactionError::Busy);
        }
        self.compact(
            agent.session(),
            Trigger::Manual,
            focus,
            At::default(),
            &[],
            cancel,
        )
        .await
    }

    /// The pre-step pressure check: compacts when the next request (history plus `entering`)
    /// is estimated over the threshold. `Ok(None)` when there was no pressure.
    pub async fn relieve_pressure(
        &self,
        session: &Arc<Session>,
        at: At,
        entering: &[Arc<Message>],
        cancel: &CancellationToken,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        let now = self.context_use(session);
        let Some(window) = now.window else {
            return Ok(None);
        };
        if !self.over(now.tokens + now.scaled(entering), window) {
            return Ok(None);
        }
        // Everything the summary request will carry is durable first, as before a model
        // request of the loop's own.
        if let Some(store) = &self.store
            && session.is_attached()
        {
            store.flush(session).await?;
        }
        self.compact(session, Trigger::Pressure, None, at, entering, cancel)
            .await
            .map(Some)
    }

    /// Reduces `session`'s history: prunes oversized old tool results, then (unless that
    /// cleared a pressure trigger) summarizes the oldest whole units into a checkpoint.
    /// Recorded as a `compaction/start` … `compaction/end` bracket whatever the outcome.
    pub async fn compact(
        &self,
        session: &Arc<Session>,
        trigger: Trigger,
        focus: Option<&str>,
        at: At,
        entering: &[Arc<Message>],
        cancel: &CancellationToken,
    ) -> Result<CompactionOutcome, CompactionError> {
        let id = session.id().clone();
        if !self
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone())
        {
            return Err(CompactionError::Busy);
        }
        let _guard = BusyGuard(self, id);
        let before = self.context_use(session);
        let tokens_before = before.tokens + before.scaled(entering);
        let compaction_id = uuid::Uuid::new_v4().to_string();
        session.append_plugin(
            START,
            &CompactionStart {
                compaction_id: compaction_id.clone(),
                trigger,
                turn: at.turn,
                step: at.step,
                tokens_before,
            },
        )?;
        let mut outcome = CompactionOutcome {
            tokens_before,
            tokens_after: tokens_before,
            ..CompactionOutcome::default()
        };
        let result = self
            .reduce(
                session,
                trigger,
                focus,
                &before,
                entering,
                &compaction_id,
                &mut outcome,
                cancel,
            )
            .await;
        let end = CompactionEnd {
            compaction_id,
            pruned: outcome.pruned,
            summarized: outcome.summarized,
            tokens_after: Some(outcome.tokens_after),
            error: result.as_ref().err().map(CompactionError::to_json),
        };
        session.append_plugin(END, &end)?;
        // Pruning alone is a reduction even when summarizing then failed.
        match result {
            Err(e) if outcome.pruned == 0 => Err(e),
            _ => Ok(outcome),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn reduce(
        &self,
        session: &Arc<Session>,
        trigger: Trigger,
        focus: Option<&str>,
        before: &ContextUse,
        entering: &[Arc<Message>],
        compaction_id: &str,
        outcome: &mut CompactionOutcome,
        cancel: &CancellationToken,
    ) -> Result<(), CompactionError> {
        let window = before
            .window
            .or(self.config.fallback_window)
            .unwrap_or(dsh_llm::catalog::DEFAULT_CONTEXT_WINDOW);
        // Pressure keeps a share of the window. An overflow proved the window wrong and a manual
        // compaction wants the history short whatever the window: both keep a share of what the
        // request weighs now.
        let budget = match trigger {
            Trigger::Pressure => window,
            Trigger::ContextOverflow | Trigger::Manual => window.min(before.tokens),
        };
        let retain = (self.config.retain_ratio * budget as f64) as u64;
        let calibration = before.calibration;
        let scale = |m: &Message| (message_tokens(m) as f64 * calibration).ceil() as u64;

        let (nodes, messages) = surface(session);
        let tokens: Vec<u64> = messages
            .iter()
            .map(|m| m.as_deref().map_or(0, scale))
            .collect();

        if trigger != Trigger::Manual {
            // Results older than the retained tail are fair game for pruning.
            let mut tail = 0;
            let mut tail_start = nodes.len();
            while tail_start > 0 && tail + tokens[tail_start - 1] <= retain {
                tail_start -= 1;
                tail += tokens[tail_start];
            }
            let (pruned, saved) = prune_results(session, &nodes[..tail_start], &self.config)?;
            outcome.pruned = pruned;
            outcome.tokens_after = outcome
                .tokens_after
                .saturating_sub((saved as f64 * calibration) as u64);
            if trigger == Trigger::Pressure
                && pruned > 0
                && !self.over(outcome.tokens_after, window)
            {
                return Ok(());
            }
        }

        let (nodes, messages) = surface(session);
        let tokens: Vec<u64> = messages
            .iter()
            .map(|m| m.as_deref().map_or(0, scale))
            .collect();
        let retain_now = retain.saturating_sub(entering.iter().map(|m| scale(m)).sum());
        let cut =
            choose_cut(&messages, &tokens, retain_now).ok_or(CompactionError::NothingToCompact)?;
        let prefix: Vec<Arc<Message>> = messages[..cut].iter().flatten().cloned().collect();
        let source_tokens: u64 = tokens[..cut].iter().sum();
        let header = session.request_header().unwrap_or_else(|| {
            Arc::new(dsh_session::RequestHeader {
                config: serde_json::Value::Null,
                adapter_defaults: None,
                system: None,
                tools: None,
            })
        });
        let fallback = session
            .request_context()
            .map(|c| LlmCallConfig::new(c.provider, c.model))
            .unwrap_or_default();
        let options = summarize::request(
            &header,
            &fallback,
            prefix,
            focus,
            self.config.summary_max_tokens,
            session.id().clone(),
            cancel.clone(),
        );
        let summary = summarize::call(&self.llm, options).await?;
        if cancel.is_cancelled() {
            return Err(CompactionError::Cancelled);
        }
        let checkpoint = checkpoint_message(compaction_id, &summary.text);
        let summary_tokens = scale(&checkpoint);
        if summary_tokens >= source_tokens {
            return Err(CompactionError::Rejected(format!(
                "the summary ({summary_tokens} tokens) is no shorter than what it replaces \
                 ({source_tokens} tokens)"
            )));
        }
        let shadowed: Vec<u64> = nodes[..cut].to_vec();
        let (start, end) = (shadowed[0], shadowed[cut - 1]);
        session.append_plugin(
            SUMMARY,
            &CompactionSummary {
                compaction_id: compaction_id.to_owned(),
                summary: summary.text,
                start,
                end,
                shadowed_seqs: shadowed.clone(),
                source_tokens,
                summary_tokens,
                provider: summary.provider,
                model: summary.model,
                usage: summary.usage,
            },
        )?;
        session.append_draft(
            EventDraft::new(EventKind::UserMessage(Arc::new(checkpoint)))
                .with_sources(shadowed)
                .replacing(start, end),
        )?;
        outcome.summarized = true;
        outcome.tokens_after = outcome
            .tokens_after
            .saturating_sub(source_tokens)
            .saturating_add(summary_tokens);
        Ok(())
    }
}

/// The current surface: node seqs and what each projects to.
fn surface(session: &Session) -> (Vec<u64>, Vec<Option<Arc<Message>>>) {
    let nodes = session.surface_nodes();
    let messages = session.with_events(|events| {
        nodes
            .iter()
            .map(|seq| {
                events
                    .get(*seq as usize)
                    .and_then(|e| e.kind.surface_message())
                    .cloned()
            })
            .collect()
    });
    (nodes, messages)
}
