//! Builders for OpenAI Responses API event streams (`response.*` events with `event:` lines).

use serde_json::{Value, json};

use crate::anthropic::event_frame;
use crate::mock_response::{MockResponse, SseFrame};

/// Builds the frames of one streamed response.
#[derive(Clone, Debug, Default)]
pub struct ResponseStream {
    frames: Vec<SseFrame>,
    next_output: u64,
}

impl ResponseStream {
    /// `response.created`.
    pub fn start() -> Self {
        Self::default().event(json!({"type": "response.created",
            "response": {"id": "resp_mock", "status": "in_progress", "output": []}}))
    }

    /// Appends one event.
    pub fn event(mut self, data: Value) -> Self {
        self.frames.push(event_frame(&data));
        self
    }

    fn output(&mut self) -> u64 {
        let at = self.next_output;
        self.next_output += 1;
        at
    }

    /// A reasoning item with a summary and encrypted content.
    pub fn reasoning(mut self, id: &str, summary: &str, encrypted: &str) -> Self {
        let at = self.output();
        self.event(
            json!({"type": "response.output_item.added", "output_index": at,
                "item": {"type": "reasoning", "id": id, "summary": []}}),
        )
        .event(
            json!({"type": "response.reasoning_summary_text.delta", "output_index": at,
                "item_id": id, "summary_index": 0, "delta": summary}),
        )
        .event(
            json!({"type": "response.output_item.done", "output_index": at,
                "item": {"type": "reasoning", "id": id, "encrypted_content": encrypted,
                    "summary": [{"type": "summary_text", "text": summary}]}}),
        )
    }

    /// An assistant message item, its text in two deltas.
    pub fn text(mut self, text: &str) -> Self {
        let at = self.output();
        let split = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        self.event(
            json!({"type": "response.output_item.added", "output_index": at,
                "item": {"type": "message", "id": "msg_mock", "role": "assistant", "content": []}}),
        )
        .event(
            json!({"type": "response.output_text.delta", "output_index": at,
                "content_index": 0, "delta": &text[..split]}),
        )
        .event(
            json!({"type": "response.output_text.delta", "output_index": at,
                "content_index": 0, "delta": &text[split..]}),
        )
        .event(
            json!({"type": "response.output_item.done", "output_index": at,
                "item": {"type": "message"}}),
        )
    }

    /// A function call whose arguments arrive in pieces of `piece` bytes.
    pub fn function_call(
        mut self,
        call_id: &str,
        name: &str,
        arguments: &str,
        piece: usize,
    ) -> Self {
        let at = self.output();
        let mut s = self.event(
            json!({"type": "response.output_item.added", "output_index": at,
            "item": {"type": "function_call", "id": "fc_mock", "call_id": call_id, "name": name,
                "arguments": ""}}),
        );
        for part in arguments.as_bytes().chunks(piece.max(1)) {
            s = s.event(json!({"type": "response.function_call_arguments.delta",
                "output_index": at, "delta": String::from_utf8_lossy(part)}));
        }
        s.event(
            json!({"type": "response.output_item.done", "output_index": at,
            "item": {"type": "function_call", "call_id": call_id, "name": name,
                "arguments": arguments}}),
        )
    }

    /// `response.completed` with usage.
    pub fn completed(self, input_tokens: u64, cached: u64, output_tokens: u64) -> Self {
        self.event(
            json!({"type": "response.completed", "response": {"id": "resp_mock",
            "status": "completed", "usage": {"input_tokens": input_tokens,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0}}}}),
        )
    }

    /// The frames.
    pub fn build(self) -> Vec<SseFrame> {
        self.frames
    }
}

impl MockResponse {
    /// A complete Responses API text answer.
    pub fn responses_text(text: &str) -> Self {
        Self::sse(
            ResponseStream::start()
                .text(text)
                .completed(10, 0, 5)
                .build(),
        )
    }

    /// Responses API function calls in order.
    pub fn responses_calls<'a>(
        calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Self {
        let mut s = ResponseStream::start();
        for (id, name, args) in calls {
            s = s.function_call(id, name, args, 6);
        }
        Self::sse(s.completed(10, 0, 5).build())
    }
}
