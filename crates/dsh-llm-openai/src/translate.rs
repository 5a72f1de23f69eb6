//! Translating chat-completion SSE events into dsh stream chunks.

use dsh_llm::{
    BlockType, CallId, ContentBlock, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage,
};

use crate::http_error::failure_from_body;
use crate::usage::map_usage;
use crate::wire::{Chunk, ToolCallDelta};

/// Whether the stream goes on after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More events are expected.
    Continue,
    /// `[DONE]` arrived; the terminal chunks have been produced.
    Done,
}

/// Turns the `data:` payloads of one streamed chat completion into [`StreamChunk`]s.
///
/// Blocks open in order of first appearance: a reasoning block on the first non-empty
/// `reasoning_content`, a text block on the first non-empty `content`, a tool-call block per
/// wire `index` of `tool_calls`. On `[DONE]` every block ends in order, then the last usage
/// seen, then the finish. The translator is pure (no I/O), so it is tested and benchmarked
/// without a network.
#[derive(Debug, Default)]
pub struct Translator {
    blocks: Vec<Open>,
    text: Option<u32>,
    reasoning: Option<u32>,
    /// `(wire index, block index)` of the tool calls seen.
    tools: Vec<(u64, u32)>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
}

#[derive(Debug)]
enum Open {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

impl Translator {
    /// A translator for a fresh response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one event's data, appending the chunks it produces to `out`.
    ///
    /// Invalid JSON is `MALFORMED_RESPONSE`; an `{error: ...}` object sent mid-stream is
    /// classified like an error response.
    pub fn on_event(
        &mut self,
        data: &str,
        out: &mut impl Extend<StreamChunk>,
    ) -> Result<Progress, LlmFailure> {
        let data = data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return Ok(Progress::Done);
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|e| {
            LlmFailure::new(
                FailureCode::MalformedResponse,
                format!("the provider sent an event that is not a chat-completion chunk: {e}"),
            )
        })?;
        if let Some(error) = chunk.error {
            return Err(failure_from_body(None, error));
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(map_usage(usage));
        }
        for choice in chunk.choices.into_iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                    let index = self.reasoning_block(out);
                    if let Some(Open::Reasoning(acc)) = self.blocks.get_mut(index as usize) {
                        acc.push_str(&text);
                    }
                    out.extend([StreamChunk::ReasoningDelta {
                        index,
                        text: text.into_owned(),
                    }]);
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    let index = self.text_block(out);
                    if let Some(Open::Text(acc)) = self.blocks.get_mut(index as usize) {
                        acc.push_str(&text);
                    }
                    out.extend([StreamChunk::TextDelta {
                        index,
                        text: text.into_owned(),
                    }]);
                }
                for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    self.tool_call(position as u64, call, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        Ok(Progress::Continue)
    }

    /// The failure for a stream that ended before `[DONE]`.
    pub fn ended_early(&self) -> LlmFailure {
        LlmFailure::new(
            FailureCode::StreamClosed,
            "the provider closed the stream before [DONE]",
        )
    }

    fn next_index(&self) -> u32 {
        u32::try_from(self.blocks.len()).unwrap_or(u32::MAX)
    }

    fn open(
        &mut self,
        block: Open,
        block_type: BlockType,
        out: &mut impl Extend<StreamChunk>,
    ) -> u32 {
        let index = self.next_index();
        self.blocks.push(block);
        out.extend([StreamChunk::BlockStart { index, block_type }]);
        index
    }

    fn text_block(&mut self, out: &mut impl Extend<StreamChunk>) -> u32 {
        if let Some(i) = self.text {
            return i;
        }
        let i = self.open(Open::Text(String::new()), BlockType::Text, out);
        self.text = Some(i);
        i
    }

    fn reasoning_block(&mut self, out: &mut impl Extend<StreamChunk>) -> u32 {
        if let Some(i) = self.reasoning {
            return i;
        }
        let i = self.open(Open::Reasoning(String::new()), BlockType::Reasoning, out);
        self.reasoning = Some(i);
        i
    }

    fn tool_call(
        &mut self,
        position: u64,
        call: ToolCallDelta<'_>,
        out: &mut impl Extend<StreamChunk>,
    ) {
        let wire = call.index.unwrap_or(position);
        let index = match self.tools.iter().find(|(w, _)| *w == wire) {
            Some((_, i)) => *i,
            None => {
                let open = Open::ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                };
                let i = self.open(open, BlockType::ToolCall, out);
                self.tools.push((wire, i));
                i
            }
        };
        let (name_delta, args_delta) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        let Some(Open::ToolCall {
            id,
            name,
            arguments,
        }) = self.blocks.get_mut(index as usize)
        else {
            return;
        };
        if let Some(new_id) = call.id.filter(|i| !i.is_empty()) {
            *id = new_id.into_owned();
        }
        let name_delta = name_delta.filter(|n| !n.is_empty()).map(|n| {
            *name = n.clone().into_owned();
            n.into_owned()
        });
        let args_delta = args_delta.map(|a| a.into_owned()).unwrap_or_default();
        arguments.push_str(&args_delta);
        out.extend([StreamChunk::ToolCallDelta {
            index,
            id: CallId::new(id.as_str()),
            name: name_delta,
            arguments_delta: args_delta,
        }]);
    }

    fn finish(&mut self, out: &mut impl Extend<StreamChunk>) {
        let blocks = std::mem::take(&mut self.blocks);
        let empty = blocks.is_empty();
        for (i, block) in blocks.into_iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let block = match block {
                Open::Text(text) => ContentBlock::Text { text },
                Open::Reasoning(text) => ContentBlock::Reasoning { text },
                Open::ToolCall {
                    id,
                    name,
                    arguments,
                } => ContentBlock::ToolCall {
                    // A call without an id could never be answered; give it a stable one.
                    id: if id.is_empty() {
                        CallId::new(format!("call_{index}"))
                    } else {
                        CallId::new(id)
                    },
                    name,
                    arguments,
                },
            };
            out.extend([StreamChunk::BlockEnd { index, block }]);
        }
        if let Some(usage) = self.usage.take() {
            out.extend([StreamChunk::Usage { usage }]);
        }
        let reason = match self.finish_reason.as_deref() {
            None | Some("stop") if empty => FinishReason::Error {
                failure: LlmFailure::new(
                    FailureCode::EmptyResponse,
                    "the provider finished without producing any content",
                ),
            },
            None | Some("stop") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            Some("length") => FinishReason::MaxTokens,
            Some(other) => {
                let code = other.to_ascii_uppercase();
                FinishReason::Error {
                    failure: LlmFailure::new(
                        code.parse().unwrap_or(FailureCode::Unknown),
                        format!("the provider finished with reason `{other}`"),
                    ),
                }
            }
        };
        out.extend([StreamChunk::Finish {
            reason,
            replay_state: None,
        }]);
    }
}
