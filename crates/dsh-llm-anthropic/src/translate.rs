//! Translating Messages API events into dsh stream chunks.

use std::collections::HashMap;

use dsh_llm::{
    BlockType, CallId, ContentBlock, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage,
};
use serde_json::{Value, json};

use crate::errors::failure_from_body;
use crate::wire::{BlockChange, BlockStart, Event, Usage};

/// The key under which the blocks the API wants back verbatim travel in an assistant
/// message's replay state: thinking (signed), redacted thinking, and the provider's own web
/// searches with their results. (The name predates the searches; it stays for stored
/// sessions.)
pub(crate) const REPLAY_KEY: &str = "anthropicThinking";

/// Turns the `data:` payloads of one streamed message into [`StreamChunk`]s.
///
/// Each content block the API opens becomes a dsh block in the same order (text, reasoning
/// for `thinking`, tool call for `tool_use`) and ends with it. Thinking blocks, with their
/// signatures, and redacted thinking are also kept in order for the finish's `replay_state`:
/// the API requires them back verbatim in the next request of a tool loop. So are the
/// provider's own web searches (`server_tool_use` and `web_search_tool_result`): the answer's
/// citations point into them. A search is also shown as a short reasoning block naming its
/// query, so a person sees what was looked up (the adapter never sends reasoning back, so the
/// line costs no prompt tokens). `message_stop` produces the usage and the finish. Pure (no
/// I/O), so it is tested without a network.
#[derive(Debug, Default)]
pub struct Translator {
    /// Wire block index → dsh block, for the blocks that have one.
    blocks: HashMap<u64, (u32, Open)>,
    next: u32,
    /// Thinking, redacted thinking and server search blocks, in order, for the replay state.
    replay: Vec<Value>,
    /// Wire index → position in `replay` of a thinking block still streaming.
    thinking_at: HashMap<u64, usize>,
    /// Wire index → position in `replay` of a server tool call still streaming, and its input
    /// so far.
    server_at: HashMap<u64, (usize, String)>,
    usage: Usage,
    stop_reason: Option<String>,
    done: bool,
}

#[derive(Debug)]
enum Open {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
        /// `input` of the start event, used when no `input_json_delta` follows.
        initial: Value,
    },
}

impl Translator {
    /// A translator for a fresh response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `message_stop` arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Handles one event's data, appending the chunks it produces to `out`.
    pub fn on_event(
        &mut self,
        data: &str,
        out: &mut impl Extend<StreamChunk>,
    ) -> Result<(), LlmFailure> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let event: Event = serde_json::from_str(data).map_err(|e| {
            LlmFailure::new(
                FailureCode::MalformedResponse,
                format!("the provider sent an event that is not a Messages API event: {e}"),
            )
        })?;
        match event {
            Event::MessageStart { message } => {
                if let Some(u) = message.usage {
                    self.merge_usage(&u);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block, out),
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out),
            Event::ContentBlockStop { index } => self.stop(index, out),
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                if let Some(u) = usage {
                    self.merge_usage(&u);
                }
            }
            Event::MessageStop => self.finish(out),
            Event::Ping | Event::Unknown => {}
            Event::Error { error } => return Err(failure_from_body(None, &error)),
        }
        Ok(())
    }

    /// The failure for a stream that ended before `message_stop`.
    pub fn ended_early(&self) -> LlmFailure {
        LlmFailure::new(
            FailureCode::StreamClosed,
            "the provider closed the stream before message_stop",
        )
    }

    fn open(&mut self, wire: u64, open: Open, kind: BlockType, out: &mut impl Extend<StreamChunk>) {
        let index = self.next;
        self.next += 1;
        out.extend([StreamChunk::BlockStart {
            index,
            block_type: kind,
        }]);
        self.blocks.insert(wire, (index, open));
    }

    fn start(&mut self, wire: u64, block: BlockStart, out: &mut impl Extend<StreamChunk>) {
        match block {
            BlockStart::Text { text } => {
                self.open(wire, Open::Text(String::new()), BlockType::Text, out);
                self.delta(wire, BlockChange::TextDelta { text }, out);
            }
            BlockStart::Thinking {
                thinking,
                signature,
            } => {
                self.thinking_at.insert(wire, self.replay.len());
                self.replay.push(json!({
                    "type": "thinking", "thinking": "", "signature": signature,
                }));
                self.open(
                    wire,
                    Open::Reasoning(String::new()),
                    BlockType::Reasoning,
                    out,
                );
                self.delta(wire, BlockChange::ThinkingDelta { thinking }, out);
            }
            BlockStart::RedactedThinking { data } => {
                self.replay
                    .push(json!({ "type": "redacted_thinking", "data": data }));
            }
            BlockStart::ToolUse { id, name, input } => {
                let index = self.next;
                self.open(
                    wire,
                    Open::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: String::new(),
                        initial: input,
                    },
                    BlockType::ToolCall,
                    out,
                );
                out.extend([StreamChunk::ToolCallDelta {
                    index,
                    id: CallId::new(id),
                    name: Some(name),
                    arguments_delta: String::new(),
                }]);
            }
            BlockStart::ServerToolUse { id, name, input } => {
                self.server_at
                    .insert(wire, (self.replay.len(), String::new()));
                self.replay.push(json!({
                    "type": "server_tool_use", "id": id, "name": name, "input": input,
                }));
            }
            BlockStart::WebSearchToolResult {
                tool_use_id,
                content,
            } => {
                self.replay.push(json!({
                    "type": "web_search_tool_result", "tool_use_id": tool_use_id,
                    "content": content,
                }));
            }
            BlockStart::Unknown => {}
        }
    }

    /// Completes a server tool call's input and shows what it searched for.
    fn stop_server_tool(&mut self, at: usize, partial: String, out: &mut impl Extend<StreamChunk>) {
        let Some(block) = self.replay.get_mut(at) else {
            return;
        };
        if !partial.is_empty() {
            // Input the API streamed whole is valid JSON; anything else keeps the start's.
            if let Ok(input) = serde_json::from_str::<Value>(&partial) {
                block["input"] = input;
            }
        }
        let query = block["input"]["query"].as_str().unwrap_or("").to_owned();
        let name = block["name"].as_str().unwrap_or("server tool").to_owned();
        let text = if query.is_empty() {
            format!("{name} (run by the provider)")
        } else {
            format!("{name} (run by the provider): {query}")
        };
        let index = self.next;
        self.next += 1;
        out.extend([
            StreamChunk::BlockStart {
                index,
                block_type: BlockType::Reasoning,
            },
            StreamChunk::ReasoningDelta {
                index,
                text: text.clone(),
            },
            StreamChunk::BlockEnd {
                index,
                block: ContentBlock::Reasoning { text },
            },
        ]);
    }

    fn delta(&mut self, wire: u64, delta: BlockChange, out: &mut impl Extend<StreamChunk>) {
        if let BlockChange::SignatureDelta { signature } = &delta {
            if let Some(block) = self
                .thinking_at
                .get(&wire)
                .and_then(|&at| self.replay.get_mut(at))
                && let Some(sig) = block.get_mut("signature")
            {
                let joined = format!("{}{signature}", sig.as_str().unwrap_or(""));
                *sig = Value::String(joined);
            }
            return;
        }
        if let (Some((_, input)), BlockChange::InputJsonDelta { partial_json }) =
            (self.server_at.get_mut(&wire), &delta)
        {
            input.push_str(partial_json);
            return;
        }
        let Some((index, open)) = self.blocks.get_mut(&wire) else {
            return;
        };
        let index = *index;
        match (open, delta) {
            (Open::Text(acc), BlockChange::TextDelta { text }) if !text.is_empty() => {
                acc.push_str(&text);
                out.extend([StreamChunk::TextDelta { index, text }]);
            }
            (Open::Reasoning(acc), BlockChange::ThinkingDelta { thinking })
                if !thinking.is_empty() =>
            {
                acc.push_str(&thinking);
                if let Some(block) = self
                    .thinking_at
                    .get(&wire)
                    .and_then(|&at| self.replay.get_mut(at))
                {
                    block["thinking"] = Value::String(acc.clone());
                }
                out.extend([StreamChunk::ReasoningDelta {
                    index,
                    text: thinking,
                }]);
            }
            (
                Open::ToolCall { id, arguments, .. },
                BlockChange::InputJsonDelta { partial_json },
            ) if !partial_json.is_empty() => {
                arguments.push_str(&partial_json);
                out.extend([StreamChunk::ToolCallDelta {
                    index,
                    id: CallId::new(id.clone()),
                    name: None,
                    arguments_delta: partial_json,
                }]);
            }
            _ => {}
        }
    }

    fn stop(&mut self, wire: u64, out: &mut impl Extend<StreamChunk>) {
        self.thinking_at.remove(&wire);
        if let Some((at, partial)) = self.server_at.remove(&wire) {
            self.stop_server_tool(at, partial, out);
            return;
        }
        let Some((index, open)) = self.blocks.remove(&wire) else {
            return;
        };
        let block = match open {
            Open::Text(text) => ContentBlock::Text { text },
            Open::Reasoning(text) => ContentBlock::Reasoning { text },
            Open::ToolCall {
                id,
                name,
                arguments,
                initial,
            } => {
                // A call whose input arrived whole in the start event (no deltas) keeps it.
                let arguments = if arguments.is_empty() {
                    match initial {
                        Value::Null => "{}".to_owned(),
                        v => v.to_string(),
                    }
                } else {
                    arguments
                };
                ContentBlock::ToolCall {
                    id: CallId::new(id),
                    name,
                    arguments,
                }
            }
        };
        out.extend([StreamChunk::BlockEnd { index, block }]);
    }

    fn merge_usage(&mut self, u: &Usage) {
        let keep = |new: Option<u64>, old: Option<u64>| new.or(old);
        self.usage = Usage {
            input_tokens: keep(u.input_tokens, self.usage.input_tokens),
            output_tokens: keep(u.output_tokens, self.usage.output_tokens),
            cache_creation_input_tokens: keep(
                u.cache_creation_input_tokens,
                self.usage.cache_creation_input_tokens,
            ),
            cache_read_input_tokens: keep(
                u.cache_read_input_tokens,
                self.usage.cache_read_input_tokens,
            ),
        };
    }

    fn finish(&mut self, out: &mut impl Extend<StreamChunk>) {
        if self.done {
            return;
        }
        self.done = true;
        // Blocks the server never stopped end here, in order.
        let mut open: Vec<u64> = self.blocks.keys().copied().collect();
        open.sort_by_key(|w| self.blocks.get(w).map(|(i, _)| *i));
        for wire in open {
            self.stop(wire, out);
        }
        let u = &self.usage;
        let written = u.cache_creation_input_tokens.unwrap_or(0);
        out.extend([StreamChunk::Usage {
            usage: TokenUsage {
                // dsh counts the uncached part of the prompt as input; a cache write was
                // processed in full, so it is part of it.
                input_tokens: u.input_tokens.unwrap_or(0).saturating_add(written),
                output_tokens: u.output_tokens.unwrap_or(0),
                cache_read_tokens: u.cache_read_input_tokens,
                cache_write_tokens: u.cache_creation_input_tokens,
                reasoning_tokens: None,
            },
        }]);
        let reason = match self.stop_reason.as_deref() {
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens") => FinishReason::MaxTokens,
            Some("refusal") => FinishReason::Error {
                failure: LlmFailure::new(
                    FailureCode::InvalidRequest,
                    "the model refused to answer (stop_reason refusal)",
                ),
            },
            _ => FinishReason::Stop,
        };
        let replay_state =
            (!self.replay.is_empty()).then(|| json!({ REPLAY_KEY: self.replay.clone() }));
        out.extend([StreamChunk::Finish {
            reason,
            replay_state,
        }]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[Value]) -> Vec<StreamChunk> {
        let mut t = Translator::new();
        let mut out = Vec::new();
        for e in events {
            t.on_event(&e.to_string(), &mut out).unwrap();
        }
        assert!(t.is_done());
        out
    }

    fn finish(out: &[StreamChunk]) -> (&FinishReason, Option<&Value>) {
        match out.last() {
            Some(StreamChunk::Finish {
                reason,
                replay_state,
            }) => (reason, replay_state.as_ref()),
            other => panic!("no finish: {other:?}"),
        }
    }

    #[test]
    fn text_streams_and_usage_counts_cache_reads_apart() {
        let out = run(&[
            json!({"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}),
            json!({"type":"message_stop"}),
        ]);
        assert!(out.contains(&StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("Hello")
        }));
        assert!(out.contains(&StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: 15,
                output_tokens: 7,
                cache_read_tokens: Some(90),
                cache_write_tokens: Some(5),
                reasoning_tokens: None,
            }
        }));
        assert_eq!(finish(&out), (&FinishReason::Stop, None));
    }

    #[test]
    fn parallel_tool_calls_keep_their_ids_and_arguments() {
        let out = run(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_a","name":"bash","input":{}}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"ls\"}"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"read","input":{"path":"x"}}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"}}),
            json!({"type":"message_stop"}),
        ]);
        let calls: Vec<_> = out
            .iter()
            .filter_map(|c| match c {
                StreamChunk::BlockEnd {
                    block: ContentBlock::ToolCall { id, arguments, .. },
                    ..
                } => Some((id.as_str().to_owned(), arguments.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("toolu_a".to_owned(), r#"{"command":"ls"}"#.to_owned()),
                ("toolu_b".to_owned(), r#"{"path":"x"}"#.to_owned())
            ]
        );
        assert_eq!(finish(&out).0, &FinishReason::ToolCalls);
    }

    #[test]
    fn thinking_with_its_signature_is_kept_for_replay() {
        let out = run(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me "}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think"}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig=="}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"text","text":"ok"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"message_stop"}),
        ]);
        assert!(out.contains(&StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::Reasoning {
                text: "let me think".into()
            }
        }));
        assert!(out.contains(&StreamChunk::BlockEnd {
            index: 1,
            block: ContentBlock::text("ok")
        }));
        let replay = finish(&out).1.unwrap();
        assert_eq!(
            replay[REPLAY_KEY],
            json!([
                {"type":"thinking","thinking":"let me think","signature":"sig=="},
                {"type":"redacted_thinking","data":"opaque"}
            ])
        );
    }

    #[test]
    fn a_provider_web_search_is_kept_for_replay_and_shown_by_its_query() {
        let results = json!([{"type":"web_search_result","url":"https://a.example/","title":"A",
                              "encrypted_content":"enc","page_age":null}]);
        let out = run(&[
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Let me look."}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"rust "}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"2026\"}"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":results}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"content_block_start","index":3,"content_block":{"type":"text","text":"","citations":[]}}),
            json!({"type":"content_block_delta","index":3,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://a.example/"}}}),
            json!({"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"It is out."}}),
            json!({"type":"content_block_stop","index":3}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9,"server_tool_use":{"web_search_requests":1}}}),
            json!({"type":"message_stop"}),
        ]);
        let ends: Vec<&ContentBlock> = out
            .iter()
            .filter_map(|c| match c {
                StreamChunk::BlockEnd { block, .. } => Some(block),
                _ => None,
            })
            .collect();
        assert_eq!(
            ends,
            [
                &ContentBlock::text("Let me look."),
                &ContentBlock::Reasoning {
                    text: "web_search (run by the provider): rust 2026".into()
                },
                &ContentBlock::text("It is out."),
            ]
        );
        let (reason, replay) = finish(&out);
        assert_eq!(reason, &FinishReason::Stop);
        assert_eq!(
            replay.unwrap()[REPLAY_KEY],
            json!([
                {"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"rust 2026"}},
                {"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":results},
            ])
        );
    }

    #[test]
    fn a_mid_stream_error_event_is_classified() {
        let mut t = Translator::new();
        let err = t
            .on_event(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err.code, FailureCode::Server);
    }

    #[test]
    fn garbage_is_malformed() {
        let err = Translator::new()
            .on_event("{not json", &mut Vec::new())
            .unwrap_err();
        assert_eq!(err.code, FailureCode::MalformedResponse);
    }
}
