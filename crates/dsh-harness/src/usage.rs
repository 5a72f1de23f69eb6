//! What a session used and cost, for people and scripts: the one-line summary `dsh run` prints
//! on a terminal and `/context` prints in the chat, the `usage`/`costUsd` of `dsh run`'s result
//! object, and what `/compact` says in every front end. Token counts are the provider's own
//! reports; prices come from the model catalog. One module, so the front ends say the same.

use std::sync::Arc;

use dsh_agent::AgentRef;
use dsh_compaction::{ContextUse, SessionUsage, cost_usd};
use dsh_llm::ModelCatalog;
use dsh_session::{Session, SessionEvent};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::Harness;

/// `1234567` as `1,234,567`: counts people read at a glance (pasted characters, tokens in
/// the usage line and the terminal UI).
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The `usage` object of the result line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageFields {
    /// Prompt tokens the provider's cache did not serve.
    pub input_tokens: u64,
    /// Prompt tokens served from the cache.
    pub cached_input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: u64,
}

impl From<SessionUsage> for UsageFields {
    fn from(u: SessionUsage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            cached_input_tokens: u.cached_input_tokens,
            output_tokens: u.output_tokens,
            reasoning_tokens: u.reasoning_tokens,
        }
    }
}

/// Usage and cost of `events` from `from_seq` on.
pub fn of(
    events: &[Arc<SessionEvent>],
    from_seq: u64,
    catalog: &ModelCatalog,
) -> (UsageFields, Option<f64>) {
    let usage = SessionUsage::of(events, from_seq);
    let cost = cost_usd(events, from_seq, |model| catalog.facts(model).price);
    (usage.into(), cost)
}

/// `context 42% of 24k · 123,456 tokens in (91% cached) · 2,345 out · $0.0123`: the context
/// the next request will use and what the whole session cost.
pub fn summary_line(session: &Session, context: &ContextUse, catalog: &ModelCatalog) -> String {
    let events = session.events();
    let (usage, cost) = of(&events, 0, catalog);
    let mut parts = Vec::new();
    match (context.percent(), context.window) {
        (Some(p), Some(w)) => parts.push(format!("context {p:.0}% of {}", group_thousands(w))),
        _ => parts.push(format!(
            "context {} tokens",
            group_thousands(context.tokens)
        )),
    }
    let input = usage.input_tokens + usage.cached_input_tokens;
    let cached = if input > 0 {
        format!(
            " ({:.0}% cached)",
            usage.cached_input_tokens as f64 * 100.0 / input as f64
        )
    } else {
        String::new()
    };
    parts.push(format!("{} tokens in{cached}", group_thousands(input)));
    parts.push(format!("{} out", group_thousands(usage.output_tokens)));
    if let Some(cost) = cost {
        parts.push(format!("${cost:.4}"));
    }
    parts.join(" · ")
}

/// `/context`: the summary line of `agent`'s session.
pub fn context(harness: &Harness, agent: &AgentRef) -> String {
    match harness.compaction() {
        Some(c) => summary_line(
            agent.session(),
            &c.context_use(agent.session()),
            &harness.settings().catalog,
        ),
        None => "context use is not available (compaction is not mounted)".to_owned(),
    }
}

/// `/compact [focus]`: compacts `agent`'s history now (it must be idle) and says what
/// changed. The chat waits for it; the summary's output ceiling bounds how long.
pub async fn compact(harness: &Harness, agent: &AgentRef, focus: Option<&str>) -> String {
    match compact_with(harness, agent, focus, &CancellationToken::new()).await {
        Ok(text) => text,
        Err(text) => text,
    }
}

/// [`compact`], stopped early when `cancel` fires (the terminal UI's Esc): `Err` says why
/// nothing was compacted.
pub async fn compact_with(
    harness: &Harness,
    agent: &AgentRef,
    focus: Option<&str>,
    cancel: &CancellationToken,
) -> Result<String, String> {
    let Some(service) = harness.compaction() else {
        return Err("compaction is not mounted".to_owned());
    };
    match service.compact_now(agent, focus, cancel).await {
        // Its `compaction/end` says it stopped.
        _ if cancel.is_cancelled() => Ok("not compacted: stopped".to_owned()),
        Ok(o) => Ok(format!(
            "compacted: ~{} → ~{} tokens{}",
            group_thousands(o.tokens_before),
            group_thousands(o.tokens_after),
            if o.summarized {
                ""
            } else {
                " (nothing summarized)"
            }
        )),
        Err(e) => Err(format!("not compacted: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_session::{
        AssistantMessage, EventKind, Message, SessionHeader, SessionMeta, TokenUsage,
    };

    #[test]
    fn the_summary_line_shows_context_share_cache_hits_and_cost() {
        let session = Session::new(
            SessionHeader::new("u".into(), 0, SessionMeta::default()),
            None,
        )
        .unwrap();
        session
            .append(EventKind::AssistantMessage(AssistantMessage {
                turn: 1,
                step: 1,
                message: Arc::new(Message::assistant(
                    vec![dsh_session::ContentBlock::text("hi")],
                    "deepseek",
                    "deepseek-v4-flash",
                )),
                usage: Some(TokenUsage {
                    input_tokens: 1_000,
                    cache_read_tokens: Some(9_000),
                    output_tokens: 500,
                    ..TokenUsage::default()
                }),
                interrupted: false,
            }))
            .unwrap();
        let context = ContextUse {
            tokens: 12_000,
            window: Some(24_000),
            measured: true,
            calibration: 1.0,
        };
        let line = summary_line(&session, &context, &ModelCatalog::builtin());
        assert!(line.starts_with("context 50% of 24,000"), "{line}");
        assert!(line.contains("10,000 tokens in (90% cached)"), "{line}");
        assert!(line.contains("500 out"), "{line}");
        assert!(line.contains('$'), "{line}");
        // An unpriced model shows no cost rather than a wrong one.
        let (_, cost) = of(&session.events(), 0, &ModelCatalog::builtin());
        assert!(cost.is_some());
        let (_, none) = of(&session.events(), 5, &ModelCatalog::builtin());
        assert_eq!(none, Some(0.0));
    }
}
