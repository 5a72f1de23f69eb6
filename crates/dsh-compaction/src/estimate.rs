//! Token accounting: what the provider reported, and what the next request will weigh.
//!
//! The provider's own count of the last request (prompt + cache hits + output) is exact for
//! everything up to that answer; only what was added since is estimated, with the
//! `ceil(chars / 4) + 4 per block + 4 per message` heuristic scaled by how far that heuristic
//! was off for the measured request. After a compaction rewrote the surface the measurement no
//! longer describes the history, so the whole request is estimated until the next answer.

use std::sync::Arc;

use dsh_llm::ModelPrice;
use dsh_session::{
    ContentBlock, EventKind, Message, MessageSource, RequestHeader, Session, SessionEvent,
    TokenUsage,
};
use serde_json::Value;

/// Heuristic tokens of `chars` characters.
pub fn tokens_of_chars(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

fn block_chars(b: &ContentBlock) -> usize {
    match b {
        ContentBlock::Text { text } | ContentBlock::Reasoning { text } => text.chars().count(),
        ContentBlock::Image { .. } => 4 * 1_000,
        ContentBlock::ToolCall {
            name, arguments, ..
        } => name.chars().count() + arguments.chars().count(),
        ContentBlock::ToolResult { content, .. } => content.iter().map(block_chars).sum(),
    }
}

/// Heuristic tokens of one message.
pub fn message_tokens(m: &Message) -> u64 {
    let blocks: u64 = m
        .content
        .iter()
        .map(|b| tokens_of_chars(block_chars(b)) + 4)
        .sum();
    blocks + 4
}

/// Heuristic tokens of a request's envelope (system prompt and tool schemas).
pub fn header_tokens(header: Option<&RequestHeader>) -> u64 {
    let Some(h) = header else { return 0 };
    let system = h.system.as_deref().map_or(0, |s| s.chars().count());
    let tools: usize = h
        .tools
        .iter()
        .flatten()
        .map(|t| Value::to_string(t).chars().count())
        .sum();
    tokens_of_chars(system + tools)
}

/// The prompt tokens a usage report counts (cache misses plus cache hits).
pub fn prompt_tokens(u: &TokenUsage) -> u64 {
    u.input_tokens + u.cache_read_tokens.unwrap_or(0)
}

/// How full the context is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ContextUse {
    /// Estimated tokens of the next request (before any new input).
    pub tokens: u64,
    /// The routed model's window, when known.
    pub window: Option<u64>,
    /// Whether the estimate builds on a provider measurement (else pure heuristic).
    pub measured: bool,
    /// Heuristic-to-real scale learned from the last measurement (1.0 without one).
    pub calibration: f64,
}

impl ContextUse {
    /// Percent of the window used, when the window is known.
    pub fn percent(&self) -> Option<f64> {
        self.window
            .filter(|w| *w > 0)
            .map(|w| self.tokens as f64 * 100.0 / w as f64)
    }

    /// Heuristic tokens of `messages`, scaled by the calibration.
    pub fn scaled(&self, messages: &[Arc<Message>]) -> u64 {
        let raw: u64 = messages.iter().map(|m| message_tokens(m)).sum();
        (raw as f64 * self.calibration).ceil() as u64
    }
}

/// The session's context use now: see the module documentation.
pub fn context_use(session: &Session) -> ContextUse {
    let nodes = session.surface_nodes();
    let header = session.request_header();
    let window = session.request_context().and_then(|c| c.context_window);
    session.with_events(|events| {
        let messages: Vec<Option<&Arc<Message>>> = nodes
            .iter()
            .map(|seq| {
                events
                    .get(*seq as usize)
                    .and_then(|e| e.kind.surface_message())
            })
            .collect();
        let est = |ms: &[Option<&Arc<Message>>]| -> u64 {
            ms.iter().flatten().map(|m| message_tokens(m)).sum()
        };
        // The latest answer with a usage report whose prefix no later replacement rewrote.
        let last_replace = nodes
            .iter()
            .filter(|seq| {
                events.get(**seq as usize).is_some_and(|e| {
                    matches!(e.surface_op, Some(dsh_session::SurfaceOp::Replace { .. }))
                })
            })
            .max()
            .copied();
        let measured = nodes.iter().enumerate().rev().find_map(|(i, seq)| {
            let e = events.get(*seq as usize)?;
            let EventKind::AssistantMessage(a) = &e.kind else {
                return None;
            };
            let usage = a.usage.as_ref().filter(|u| prompt_tokens(u) > 0)?;
            (!a.interrupted && last_replace.is_none_or(|r| r < *seq)).then_some((i, usage))
        });
        match measured {
            Some((i, usage)) => {
                let heuristic = header_tokens(header.as_deref()) + est(&messages[..i]);
                let calibration =
                    (prompt_tokens(usage) as f64 / heuristic.max(1) as f64).clamp(0.25, 4.0);
                let added = (est(&messages[i + 1..]) as f64 * calibration).ceil() as u64;
                ContextUse {
                    tokens: prompt_tokens(usage) + usage.output_tokens + added,
                    window,
                    measured: true,
                    calibration,
                }
            }
            None => ContextUse {
                tokens: header_tokens(header.as_deref()) + est(&messages),
                window,
                measured: false,
                calibration: 1.0,
            },
        }
    })
}

/// Everything a session's provider calls reported, summed: conversation steps and compaction
/// summaries alike (both are billed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUsage {
    /// Prompt tokens the cache did not serve.
    pub input_tokens: u64,
    /// Prompt tokens served from the cache.
    pub cached_input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: u64,
    /// Provider calls that reported usage.
    pub requests: u64,
}

impl SessionUsage {
    /// Adds one report.
    pub fn add(&mut self, u: &TokenUsage) {
        self.input_tokens += u.input_tokens;
        self.cached_input_tokens += u.cache_read_tokens.unwrap_or(0);
        self.output_tokens += u.output_tokens;
        self.reasoning_tokens += u.reasoning_tokens.unwrap_or(0);
        self.requests += 1;
    }

    /// The totals as one [`TokenUsage`] (for pricing).
    pub fn as_token_usage(&self) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: Some(self.cached_input_tokens),
            reasoning_tokens: Some(self.reasoning_tokens),
            ..TokenUsage::default()
        }
    }

    /// The usage `events` record, from `from_seq` on.
    pub fn of(events: &[Arc<SessionEvent>], from_seq: u64) -> Self {
        let mut total = Self::default();
        for (_, u) in usage_reports(events, from_seq) {
            total.add(&u);
        }
        total
    }
}

/// Every usage report in `events` from `from_seq` on, with the model that produced it:
/// conversation answers and compaction summaries.
pub fn usage_reports(events: &[Arc<SessionEvent>], from_seq: u64) -> Vec<(String, TokenUsage)> {
    events
        .iter()
        .filter(|e| e.seq >= from_seq)
        .filter_map(|e| usage_report(e))
        .collect()
}

/// The model and usage one event reports: an assistant message's own, or a compaction
/// summary call's (billed like any other request). For front ends that follow a session
/// event by event and keep a running total.
pub fn usage_report(event: &SessionEvent) -> Option<(String, TokenUsage)> {
    match &event.kind {
        EventKind::AssistantMessage(a) => match (&a.usage, &a.message.source) {
            (Some(u), MessageSource::Model { model, .. }) => Some((model.clone(), u.clone())),
            _ => None,
        },
        EventKind::Other { type_name, data } if type_name == crate::events::SUMMARY => {
            let usage = data
                .get("usage")
                .and_then(|u| serde_json::from_value::<TokenUsage>(u.clone()).ok())?;
            let model = data
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Some((model.to_owned(), usage))
        }
        _ => None,
    }
}

/// What the reports of `events` from `from_seq` on cost in US dollars, each priced by its own
/// model; `None` when any billed model has no known price (a partial sum would mislead).
pub fn cost_usd(
    events: &[Arc<SessionEvent>],
    from_seq: u64,
    price_of: impl Fn(&str) -> Option<ModelPrice>,
) -> Option<f64> {
    usage_reports(events, from_seq)
        .iter()
        .map(|(model, u)| price_of(model).map(|p| p.cost(u)))
        .sum()
}
