//! Builders for Anthropic Messages API event streams, as the real API sends them:
//! `event: <type>` lines beside the JSON data, `message_start` with input usage, blocks opened,
//! filled by deltas and stopped, `message_delta` with the stop reason and output usage, pings.

use serde_json::{Value, json};

use crate::mock_response::{MockResponse, SseFrame};

/// Builds the frames of one streamed message.
#[derive(Clone, Debug, Default)]
pub struct MessageStream {
    frames: Vec<SseFrame>,
    next_block: u64,
}

/// One `event:` + `data:` frame.
pub fn event_frame(data: &Value) -> SseFrame {
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    SseFrame::Raw(format!("event: {kind}\ndata: {data}\n\n").into_bytes())
}

impl MessageStream {
    /// `message_start` with `input_tokens` and `cache_read` prompt tokens.
    pub fn start(input_tokens: u64, cache_read: u64) -> Self {
        Self::default().event(json!({
            "type": "message_start",
            "message": {"id": "msg_mock", "type": "message", "role": "assistant",
                "model": "claude-mock", "content": [], "stop_reason": null,
                "usage": {"input_tokens": input_tokens, "cache_read_input_tokens": cache_read,
                    "cache_creation_input_tokens": 0, "output_tokens": 1}}
        }))
    }

    /// Appends one event.
    pub fn event(mut self, data: Value) -> Self {
        self.frames.push(event_frame(&data));
        self
    }

    /// A text block, its text split in two deltas.
    pub fn text(mut self, text: &str) -> Self {
        let index = self.next_block;
        self.next_block += 1;
        let split = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        self.event(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}}))
            .event(json!({"type": "ping"}))
            .event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": &text[..split]}}))
            .event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": &text[split..]}}))
            .event(json!({"type": "content_block_stop", "index": index}))
    }

    /// A thinking block with its signature.
    pub fn thinking(mut self, thinking: &str, signature: &str) -> Self {
        let index = self.next_block;
        self.next_block += 1;
        self.event(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            .event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": thinking}}))
            .event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta", "signature": signature}}))
            .event(json!({"type": "content_block_stop", "index": index}))
    }

    /// A tool call whose input JSON arrives in pieces of `piece` bytes.
    pub fn tool_use(mut self, id: &str, name: &str, input: &str, piece: usize) -> Self {
        let index = self.next_block;
        self.next_block += 1;
        let mut s = self.event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        let bytes = input.as_bytes();
        for part in bytes.chunks(piece.max(1)) {
            let part = String::from_utf8_lossy(part).into_owned();
            s = s.event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": part}}));
        }
        s.event(json!({"type": "content_block_stop", "index": index}))
    }

    /// The provider's own web search, as the API streams it: a `server_tool_use` block whose
    /// query arrives as input JSON, then a `web_search_tool_result` block holding `results`.
    pub fn web_search(mut self, id: &str, query: &str, results: Value) -> Self {
        let (call, result) = (self.next_block, self.next_block + 1);
        self.next_block += 2;
        let input = json!({ "query": query }).to_string();
        self.event(json!({"type": "content_block_start", "index": call,
                "content_block": {"type": "server_tool_use", "id": id, "name": "web_search",
                    "input": {}}}))
            .event(json!({"type": "content_block_delta", "index": call,
                "delta": {"type": "input_json_delta", "partial_json": input}}))
            .event(json!({"type": "content_block_stop", "index": call}))
            .event(json!({"type": "content_block_start", "index": result,
                "content_block": {"type": "web_search_tool_result", "tool_use_id": id,
                    "content": results}}))
            .event(json!({"type": "content_block_stop", "index": result}))
    }

    /// `message_delta` with `stop_reason` and `output_tokens`, then `message_stop`.
    pub fn stop(self, stop_reason: &str, output_tokens: u64) -> Self {
        self.event(json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}))
            .event(json!({"type": "message_stop"}))
    }

    /// The frames.
    pub fn build(self) -> Vec<SseFrame> {
        self.frames
    }
}

impl MockResponse {
    /// A complete Anthropic text answer (`end_turn`).
    pub fn anthropic_text(text: &str) -> Self {
        Self::sse(
            MessageStream::start(10, 0)
                .text(text)
                .stop("end_turn", 5)
                .build(),
        )
    }

    /// Anthropic tool calls in order, stop reason `tool_use`.
    pub fn anthropic_tool_calls<'a>(
        calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Self {
        let mut s = MessageStream::start(10, 0);
        for (id, name, input) in calls {
            s = s.tool_use(id, name, input, 7);
        }
        Self::sse(s.stop("tool_use", 5).build())
    }

    /// An Anthropic-shaped error response (`{"type":"error","error":{...}}`).
    pub fn anthropic_error(status: u16, kind: &str, message: &str) -> Self {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        Self::error(status, body.to_string())
    }
}
