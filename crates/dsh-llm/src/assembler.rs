//! Assembling streamed chunks into the blocks of one assistant message.

use std::collections::BTreeMap;

use dsh_session::{
    BlockType, CallId, ContentBlock, FinishReason, Message, MessageSource, StreamChunk, TokenUsage,
};
use serde_json::Value;

/// Accumulates one response's chunks into content blocks.
///
/// The loop feeds it every chunk it logs, then builds the assistant message from
/// [`BlockAssembler::blocks`] (or, when the stream was cancelled, from
/// [`BlockAssembler::interrupted_blocks`]). `block-end` is authoritative: it replaces what the
/// deltas built and freezes the block, so later deltas for that index are ignored.
#[derive(Debug, Default)]
pub struct BlockAssembler {
    blocks: BTreeMap<u32, Slot>,
    usage: Option<TokenUsage>,
    finish: Option<FinishReason>,
    replay_state: Option<Value>,
}

#[derive(Debug)]
enum Slot {
    Building(Partial),
    Frozen(ContentBlock),
}

#[derive(Debug)]
enum Partial {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// Images only arrive whole, in `block-end`.
    Image,
}

impl Partial {
    fn new(block_type: BlockType) -> Self {
        match block_type {
            BlockType::Text => Self::Text(String::new()),
            BlockType::Reasoning => Self::Reasoning(String::new()),
            BlockType::ToolCall => Self::ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            },
            BlockType::Image => Self::Image,
        }
    }

    fn to_block(&self) -> Option<ContentBlock> {
        match self {
            Self::Text(text) => Some(ContentBlock::Text { text: text.clone() }),
            Self::Reasoning(text) => Some(ContentBlock::Reasoning { text: text.clone() }),
            Self::ToolCall {
                id,
                name,
                arguments,
            } => Some(ContentBlock::ToolCall {
                id: CallId::new(id.as_str()),
                name: name.clone(),
                arguments: arguments.clone(),
            }),
            Self::Image => None,
        }
    }
}

impl Slot {
    fn block(&self) -> Option<ContentBlock> {
        match self {
            Self::Building(p) => p.to_block(),
            Self::Frozen(b) => Some(b.clone()),
        }
    }
}

impl BlockAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one chunk. Chunks after a `finish` are ignored (the runtime never sends any).
    pub fn push(&mut self, chunk: &StreamChunk) {
        if self.finish.is_some() {
            return;
        }
        match chunk {
            StreamChunk::BlockStart { index, block_type } => {
                self.blocks
                    .entry(*index)
                    .or_insert_with(|| Slot::Building(Partial::new(*block_type)));
            }
            StreamChunk::TextDelta { index, text } => {
                if let Slot::Building(Partial::Text(acc)) = self.open(*index, BlockType::Text) {
                    acc.push_str(text);
                }
            }
            StreamChunk::ReasoningDelta { index, text } => {
                if let Slot::Building(Partial::Reasoning(acc)) =
                    self.open(*index, BlockType::Reasoning)
                {
                    acc.push_str(text);
                }
            }
            StreamChunk::ToolCallDelta {
                index,
                id: call_id,
                name: call_name,
                arguments_delta,
            } => {
                if let Slot::Building(Partial::ToolCall {
                    id,
                    name,
                    arguments,
                }) = self.open(*index, BlockType::ToolCall)
                {
                    if !call_id.as_str().is_empty() {
                        *id = call_id.as_str().to_owned();
                    }
                    if let Some(n) = call_name.as_deref().filter(|n| !n.is_empty()) {
                        *name = n.to_owned();
                    }
                    arguments.push_str(arguments_delta);
                }
            }
            StreamChunk::BlockEnd { index, block } => {
                self.blocks.insert(*index, Slot::Frozen(block.clone()));
            }
            StreamChunk::Usage { usage } => self.usage = Some(usage.clone()),
            StreamChunk::Finish {
                reason,
                replay_state,
            } => {
                self.finish = Some(reason.clone());
                self.replay_state = replay_state.clone();
            }
        }
    }

    /// The slot at `index`, opened as `block_type` when a delta arrives without a start.
    fn open(&mut self, index: u32, block_type: BlockType) -> &mut Slot {
        self.blocks
            .entry(index)
            .or_insert_with(|| Slot::Building(Partial::new(block_type)))
    }

    /// How the response ended; `stop` until a `finish` arrives.
    pub fn finish(&self) -> FinishReason {
        self.finish.clone().unwrap_or(FinishReason::Stop)
    }

    /// Whether a `finish` chunk has been seen.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The last usage chunk.
    pub fn usage(&self) -> Option<&TokenUsage> {
        self.usage.as_ref()
    }

    fn truncated(&self) -> bool {
        matches!(self.finish, Some(FinishReason::MaxTokens))
    }

    /// The blocks in index order. When the response hit the output ceiling its tool calls may
    /// be cut off mid-argument, so they are dropped: a truncated call must never run.
    pub fn blocks(&self) -> Vec<ContentBlock> {
        let drop_calls = self.truncated();
        self.blocks
            .values()
            .filter_map(Slot::block)
            .filter(|b| !(drop_calls && matches!(b, ContentBlock::ToolCall { .. })))
            .collect()
    }

    /// The replay state for the blocks of [`BlockAssembler::blocks`].
    ///
    /// A replay state with a `blocks` array is aligned with the message's blocks; when tool
    /// calls are dropped their entries are dropped with them, and a state whose array does
    /// not line up with the blocks is discarded rather than replayed against the wrong block.
    pub fn replay_state(&self) -> Option<Value> {
        let state = self.replay_state.as_ref()?;
        if !self.truncated() {
            return Some(state.clone());
        }
        let all: Vec<ContentBlock> = self.blocks.values().filter_map(Slot::block).collect();
        let Some(entries) = state.get("blocks").and_then(Value::as_array) else {
            return Some(state.clone());
        };
        if entries.len() != all.len() {
            return None;
        }
        let kept: Vec<Value> = entries
            .iter()
            .zip(&all)
            .filter(|(_, b)| !matches!(b, ContentBlock::ToolCall { .. }))
            .map(|(e, _)| e.clone())
            .collect();
        let mut pruned = state.clone();
        pruned["blocks"] = Value::Array(kept);
        Some(pruned)
    }

    /// The prefix worth keeping when the stream was cancelled: text and reasoning blocks with
    /// visible content. Tool calls are left out because an interrupted call never ran.
    pub fn interrupted_blocks(&self) -> Vec<ContentBlock> {
        self.blocks
            .values()
            .filter_map(Slot::block)
            .filter(|b| match b {
                ContentBlock::Text { text } | ContentBlock::Reasoning { text } => {
                    !text.trim().is_empty()
                }
                _ => false,
            })
            .collect()
    }

    /// The assistant message for the assembled blocks, carrying the (pruned) replay state.
    pub fn message(&self, provider: impl Into<String>, model: impl Into<String>) -> Message {
        let mut message = Message::assistant(self.blocks(), provider, model);
        if let MessageSource::Model { replay_state, .. } = &mut message.source {
            *replay_state = self.replay_state();
        }
        message
    }
}
