//! Builders for OpenAI/DeepSeek-shaped chat-completions SSE streams.
//!
//! The chunks look like what the real APIs send (`chat.completion.chunk` objects, a first
//! delta with only the role and empty content, tool calls split over several chunks keyed by
//! `index`, usage either on the finish chunk or in a trailing chunk with no choices).

use serde_json::{Value, json};

use crate::mock_response::SseFrame;

/// Builds the frames of one streamed chat completion.
#[derive(Clone, Debug)]
pub struct ChatStream {
    model: String,
    frames: Vec<SseFrame>,
}

impl ChatStream {
    /// An empty stream for `model`.
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            frames: Vec::new(),
        }
    }

    /// A raw chunk object with the given `choices` and optional `usage`.
    pub fn chunk_value(&self, choices: Value, usage: Option<Value>) -> Value {
        let mut chunk = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": self.model,
            "system_fingerprint": "fp_mock",
            "choices": choices,
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        chunk
    }

    /// Appends a chunk whose only choice has `delta` and `finish_reason`.
    pub fn delta(self, delta: Value, finish_reason: Option<&str>) -> Self {
        let choices = json!([{
            "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason,
        }]);
        let chunk = self.chunk_value(choices, None);
        self.frame(SseFrame::json(&chunk))
    }

    /// Appends any frame.
    pub fn frame(mut self, frame: SseFrame) -> Self {
        self.frames.push(frame);
        self
    }

    /// The usual first chunk: the role and an empty content (which must open no block).
    pub fn role(self) -> Self {
        self.delta(json!({"role": "assistant", "content": ""}), None)
    }

    /// DeepSeek's first chunk in thinking mode: empty content and empty reasoning.
    pub fn role_with_empty_reasoning(self) -> Self {
        self.delta(
            json!({"role": "assistant", "content": null, "reasoning_content": ""}),
            None,
        )
    }

    /// `text` as content deltas of up to four characters each.
    pub fn text(self, text: &str) -> Self {
        pieces(text, 4)
            .into_iter()
            .fold(self, |s, p| s.delta(json!({"content": p}), None))
    }

    /// `text` as `reasoning_content` deltas of up to four characters each.
    pub fn reasoning(self, text: &str) -> Self {
        pieces(text, 4).into_iter().fold(self, |s, p| {
            s.delta(json!({"content": null, "reasoning_content": p}), None)
        })
    }

    /// The opening chunk of tool call `index`: id, name and the first argument fragment.
    pub fn tool_call_start(self, index: u32, id: &str, name: &str, args: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": args}}]}),
            None,
        )
    }

    /// A further argument fragment of tool call `index`.
    pub fn tool_call_args(self, index: u32, args: &str) -> Self {
        self.delta(
            json!({"tool_calls": [{"index": index, "function": {"arguments": args}}]}),
            None,
        )
    }

    /// A whole tool call, its arguments split into fragments of up to `piece` characters.
    pub fn tool_call(self, index: u32, id: &str, name: &str, args: &str, piece: usize) -> Self {
        let mut parts = pieces(args, piece).into_iter();
        let first = parts.next().unwrap_or_default();
        let s = self.tool_call_start(index, id, name, &first);
        parts.fold(s, |s, p| s.tool_call_args(index, &p))
    }

    /// The finish chunk: empty delta with `finish_reason`.
    pub fn finish(self, reason: &str) -> Self {
        self.delta(json!({}), Some(reason))
    }

    /// The finish chunk carrying `usage` too.
    pub fn finish_with_usage(self, reason: &str, usage: Value) -> Self {
        let choices = json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": reason}]);
        let chunk = self.chunk_value(choices, Some(usage));
        self.frame(SseFrame::json(&chunk))
    }

    /// A trailing usage-only chunk (`choices: []`), OpenAI's `include_usage` shape.
    pub fn usage(self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage_value(usage_openai(prompt_tokens, completion_tokens, None, None))
    }

    /// A trailing usage-only chunk with an arbitrary usage object.
    pub fn usage_value(self, usage: Value) -> Self {
        let chunk = self.chunk_value(json!([]), Some(usage));
        self.frame(SseFrame::json(&chunk))
    }

    /// A `: keep-alive` comment.
    pub fn comment(self, text: &str) -> Self {
        self.frame(SseFrame::Comment(text.to_owned()))
    }

    /// `data: [DONE]`.
    pub fn done(self) -> Self {
        self.frame(SseFrame::Done)
    }

    /// The frames built.
    pub fn build(self) -> Vec<SseFrame> {
        self.frames
    }
}

/// An OpenAI usage object (`prompt_tokens_details.cached_tokens`,
/// `completion_tokens_details.reasoning_tokens` when given).
pub fn usage_openai(
    prompt_tokens: u64,
    completion_tokens: u64,
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    });
    if let Some(cached) = cached_tokens {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    if let Some(reasoning) = reasoning_tokens {
        usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
    }
    usage
}

/// A DeepSeek usage object (`prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`).
pub fn usage_deepseek(
    prompt_tokens: u64,
    completion_tokens: u64,
    cache_hit_tokens: u64,
    reasoning_tokens: Option<u64>,
) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_cache_hit_tokens": cache_hit_tokens,
        "prompt_cache_miss_tokens": prompt_tokens.saturating_sub(cache_hit_tokens),
    });
    if let Some(reasoning) = reasoning_tokens {
        usage["completion_tokens_details"] = json!({"reasoning_tokens": reasoning});
    }
    usage
}

/// `text` cut into pieces of at most `size` characters (at least one piece, possibly empty).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}
