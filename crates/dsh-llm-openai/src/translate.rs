//! Translating chat-completion SSE events into dsh stream chunks.

use std::collections::{HashMap, HashSet};

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
/// call of `tool_calls`. On `[DONE]` every block ends in order, then the last usage seen, then
/// the finish. The translator is pure (no I/O), so it is tested and benchmarked without a
/// network.
///
/// Tool-call deltas are matched to calls by wire `index`, as OpenAI sends them. Servers that
/// deviate are handled without merging two calls into one (which would run a call with the
/// concatenated arguments of both and leave the other unanswered): a delta whose id differs
/// from the id its index already carries starts a new call (some servers number every call
/// 0); a delta without an index belongs to the call its id names, or, without an id, to the
/// latest call. Ids are unique within a response: a call without one is named
/// `call_<nonce>_<block>` (the nonce is random per response, so such names never repeat across
/// the steps of a session, where the log, crash repair and editors tell calls apart by id), and
/// a repeated id gets `_<block>` appended, so every call can be answered exactly once.
#[derive(Debug, Default)]
pub struct Translator {
    blocks: Vec<Open>,
    text: Option<u32>,
    reasoning: Option<u32>,
    /// Block of the latest call seen under each wire index.
    tool_indices: HashMap<u64, u32>,
    /// Block of each tool-call id seen.
    tool_ids: HashMap<String, u32>,
    /// The block of the latest tool-call delta.
    last_tool: Option<u32>,
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
        // An event without a payload (a lone `data:` line, say) carries nothing to translate.
        if data.is_empty() {
            return Ok(Progress::Continue);
        }
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
                for call in delta.tool_calls.into_iter().flatten() {
                    self.tool_call(call, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
        }
        Ok(Progress::Continue)
    }

    /// The failure for a stream that ended before `[DONE]`. When none of the answer was
    /// passed on yet it is `TRANSPORT` (retryable by default): asking again then neither
    /// loses nor repeats anything the user saw. After part of the answer it is
    /// `STREAM_CLOSED`, which is not retried by default.
    pub fn ended_early(&self) -> LlmFailure {
        if self.blocks.is_empty() {
            return LlmFailure::new(
                FailureCode::Transport,
                "the provider closed the stream before [DONE], before sending any of the answer",
            );
        }
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

    /// The block an existing call's delta continues, if any (see [`Translator`]).
    fn tool_block(&self, wire: Option<u64>, id: Option<&str>) -> Option<u32> {
        let block = match (wire, id) {
            (Some(wire), _) => self.tool_indices.get(&wire).copied(),
            (None, Some(id)) => return self.tool_ids.get(id).copied(),
            (None, None) => return self.last_tool,
        }?;
        match (id, self.blocks.get(block as usize)) {
            (Some(new), Some(Open::ToolCall { id: old, .. })) if !old.is_empty() && old != new => {
                None
            }
            _ => Some(block),
        }
    }

    fn tool_call(&mut self, call: ToolCallDelta<'_>, out: &mut impl Extend<StreamChunk>) {
        let call_id = call.id.filter(|i| !i.is_empty());
        let index = match self.tool_block(call.index, call_id.as_deref()) {
            Some(i) => i,
            None => {
                let open = Open::ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                };
                let i = self.open(open, BlockType::ToolCall, out);
                if let Some(wire) = call.index {
                    self.tool_indices.insert(wire, i);
                }
                i
            }
        };
        self.last_tool = Some(index);
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
        if let Some(new_id) = call_id
            && id.is_empty()
        {
            *id = new_id.into_owned();
            self.tool_ids.entry(id.clone()).or_insert(index);
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
        let mut call_ids = HashSet::new();
        let mut nonce: Option<String> = None;
        for (i, block) in blocks.into_iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let block = match block {
                Open::Text(text) => ContentBlock::Text { text },
                Open::Reasoning(text) => ContentBlock::Reasoning { text },
                Open::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    // A call without an id, or with another call's id, could never be answered
                    // on its own; give it a stable, unique one.
                    let mut id = if id.is_empty() {
                        let nonce = nonce.get_or_insert_with(|| {
                            let random = dsh_llm::MessageId::generate();
                            random.as_str().replace('-', "")[..12].to_owned()
                        });
                        format!("call_{nonce}_{index}")
                    } else {
                        id
                    };
                    while !call_ids.insert(id.clone()) {
                        id = format!("{id}_{index}");
                    }
                    ContentBlock::ToolCall {
                        id: CallId::new(id),
                        name,
                        arguments,
                    }
                }
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

#[cfg(test)]
mod tests {
    use dsh_llm::BlockAssembler;
    use serde_json::{Value, json};

    use super::*;

    /// The blocks and finish of a stream whose chunks carry these `tool_calls` deltas.
    fn calls(deltas: &[Value]) -> (Vec<ContentBlock>, FinishReason) {
        let mut translator = Translator::new();
        let mut chunks: Vec<StreamChunk> = Vec::new();
        for delta in deltas {
            let event = json!({"choices": [{"index": 0, "delta": {"tool_calls": delta}}]});
            translator
                .on_event(&event.to_string(), &mut chunks)
                .unwrap();
        }
        let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
        translator
            .on_event(&finish.to_string(), &mut chunks)
            .unwrap();
        assert_eq!(
            translator.on_event("[DONE]", &mut chunks).unwrap(),
            Progress::Done
        );
        let mut assembler = BlockAssembler::new();
        for chunk in &chunks {
            assembler.push(chunk);
        }
        (assembler.blocks(), assembler.finish())
    }

    fn call(id: &str, name: &str, arguments: &str) -> ContentBlock {
        ContentBlock::ToolCall {
            id: CallId::new(id),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn a_new_id_under_a_used_index_is_a_new_call_not_a_continuation() {
        let (blocks, finish) = calls(&[
            json!([{"index": 0, "id": "a", "function": {"name": "read", "arguments": "{\"p\":1}"}}]),
            json!([{"index": 0, "id": "b", "function": {"name": "bash", "arguments": "{\"c\""}}]),
            json!([{"index": 0, "function": {"arguments": ":2}"}}]),
        ]);
        assert_eq!(finish, FinishReason::ToolCalls);
        assert_eq!(
            blocks,
            [
                call("a", "read", "{\"p\":1}"),
                call("b", "bash", "{\"c\":2}")
            ]
        );
    }

    #[test]
    fn deltas_without_an_index_belong_to_the_call_their_id_names_else_the_latest() {
        let (blocks, _) = calls(&[
            json!([{"id": "a", "function": {"name": "read", "arguments": "{"}}]),
            json!([{"function": {"arguments": "}"}}]),
            json!([{"id": "b", "function": {"name": "bash", "arguments": "[1"}}]),
            json!([{"id": "a", "function": {"arguments": ""}}]),
            json!([{"id": "b", "function": {"arguments": "]"}}]),
        ]);
        assert_eq!(blocks, [call("a", "read", "{}"), call("b", "bash", "[1]")]);
    }

    #[test]
    fn every_call_of_a_response_gets_a_distinct_id() {
        let (blocks, _) = calls(&[
            json!([{"index": 0, "id": "x", "function": {"name": "t", "arguments": "1"}}]),
            json!([{"index": 1, "id": "x", "function": {"name": "t", "arguments": "2"}}]),
            json!([{"index": 2, "function": {"name": "t", "arguments": "3"}}]),
            json!([{"index": 3, "id": "call_2", "function": {"name": "t", "arguments": "4"}}]),
        ]);
        let ContentBlock::ToolCall { id: unnamed, .. } = &blocks[2] else {
            panic!("{blocks:?}");
        };
        let unnamed = unnamed.as_str().to_owned();
        assert!(
            unnamed.starts_with("call_") && unnamed.ends_with("_2"),
            "{unnamed}"
        );
        assert_eq!(
            blocks,
            [
                call("x", "t", "1"),
                call("x_1", "t", "2"),
                call(&unnamed, "t", "3"),
                call("call_2", "t", "4"),
            ]
        );
    }

    #[test]
    fn calls_without_ids_get_names_no_other_response_uses() {
        let unnamed = || {
            let (blocks, _) =
                calls(&[json!([{"index": 0, "function": {"name": "t", "arguments": "1"}}])]);
            match &blocks[0] {
                ContentBlock::ToolCall { id, .. } => id.as_str().to_owned(),
                other => panic!("{other:?}"),
            }
        };
        let (first, second) = (unnamed(), unnamed());
        assert!(first.starts_with("call_"), "{first}");
        assert_ne!(first, second, "two responses named their calls alike");
    }
}
