//! The durable vocabulary of a compaction (DESIGN R9, spec/edges.md §6.1).
//!
//! A compaction appends, in order: `compaction/start` (log-only; an unmatched one after the
//! latest `session/end-seed` means a compaction is in flight), `compaction/summary`, one
//! checkpoint `user/message` whose surface replace shadows the summarized range, then
//! `compaction/end` (with `error` when it failed or was cancelled). Replaying the log rebuilds
//! the compacted history with no other state, so resume, fork and `sessions show` see it.

use std::sync::Arc;

use dsh_session::{ContentBlock, Message, MessageSource, TokenUsage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The plugin name on checkpoint messages and the event type prefix.
pub const PLUGIN: &str = "dsh-compaction";
/// `compaction/start`
pub const START: &str = "compaction/start";
/// `compaction/summary`
pub const SUMMARY: &str = "compaction/summary";
/// `compaction/end`
pub const END: &str = "compaction/end";

/// Why a compaction ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The estimated next request passed the threshold at a pre-step boundary.
    Pressure,
    /// The provider refused a request as too long.
    ContextOverflow,
    /// A person asked (`/compact`).
    Manual,
}

/// `compaction/start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    /// Identifies the bracket.
    pub compaction_id: String,
    /// Why it runs.
    pub trigger: Trigger,
    /// The turn it ran in (`None` for a manual compaction between turns).
    pub turn: Option<u64>,
    /// The step it ran for (overflow repair counts its retries per step).
    pub step: Option<u64>,
    /// The estimated request size before, in tokens.
    pub tokens_before: u64,
}

/// `compaction/summary`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummary {
    /// The bracket.
    pub compaction_id: String,
    /// The summary text the model returned.
    pub summary: String,
    /// First shadowed surface node.
    pub start: u64,
    /// Last shadowed surface node.
    pub end: u64,
    /// Every shadowed surface node.
    pub shadowed_seqs: Vec<u64>,
    /// Estimated tokens of the shadowed messages.
    pub source_tokens: u64,
    /// Estimated tokens of the checkpoint replacing them.
    pub summary_tokens: u64,
    /// Route of the summary call.
    pub provider: String,
    /// Model of the summary call.
    pub model: String,
    /// What the summary call cost, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

/// `compaction/end`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEnd {
    /// The bracket.
    pub compaction_id: String,
    /// Tool results pruned (head and tail kept) without a model call.
    #[serde(default)]
    pub pruned: u64,
    /// Whether a checkpoint replaced a range.
    #[serde(default)]
    pub summarized: bool,
    /// The estimated request size after, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// Why it stopped short (`{code, message}`), absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// The fixed preamble of a checkpoint: the model continues from it without acknowledging it.
pub const CHECKPOINT_PREAMBLE: &str = "This conversation was compacted to fit the context window. \
The summary below is the established background of the work so far (it replaces the earlier \
messages); continue the task from it directly, without acknowledging or repeating it.";

/// The checkpoint `user/message` for `summary` of compaction `id`.
pub fn checkpoint_message(id: &str, summary: &str) -> Message {
    let mut extra = Map::new();
    extra.insert("form".into(), Value::from("checkpoint"));
    extra.insert("compactionId".into(), Value::from(id));
    Message::user(
        vec![ContentBlock::text(format!(
            "{CHECKPOINT_PREAMBLE}\n\n<compacted-summary>\n{}\n</compacted-summary>",
            summary.trim()
        ))],
        MessageSource::Plugin {
            plugin: PLUGIN.into(),
            extra,
        },
    )
}

/// Whether `m` is a compaction checkpoint.
pub fn is_checkpoint(m: &Arc<Message>) -> bool {
    matches!(&m.source, MessageSource::Plugin { plugin, extra }
        if plugin == PLUGIN && extra.get("form").and_then(Value::as_str) == Some("checkpoint"))
}
