//! Scripts: what the scripted adapter answers to one request.

use dsh_llm::{
    BlockType, CallId, ContentBlock, FailureCode, FinishReason, LlmFailure, StreamChunk, TokenUsage,
};

use crate::gate::Gate;

/// One step of a [`Script`].
#[derive(Clone, Debug)]
pub enum Step {
    /// Emit this chunk.
    Chunk(StreamChunk),
    /// Park until the request's cancellation token fires, then finish `aborted{ABORTED}`.
    HangUntilCancelled,
    /// Park at the gate until the test releases it (or the request is cancelled, which
    /// finishes `aborted{ABORTED}`).
    WaitFor(Gate),
    /// Yield an adapter failure (an `Err` item), which ends the stream.
    Fail(LlmFailure),
}

/// The answer to one `stream` call: a list of steps played in order.
#[derive(Clone, Debug, Default)]
pub struct Script {
    steps: Vec<Step>,
}

impl Script {
    /// An empty script (the runtime reports it as a stream that ended without `finish`).
    pub fn new() -> Self {
        Self::default()
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Appends a step.
    pub fn then(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    /// Appends one chunk.
    pub fn chunk(self, chunk: StreamChunk) -> Self {
        self.then(Step::Chunk(chunk))
    }

    /// Appends chunks.
    pub fn chunks(mut self, chunks: impl IntoIterator<Item = StreamChunk>) -> Self {
        self.steps.extend(chunks.into_iter().map(Step::Chunk));
        self
    }

    /// Appends a park-until-cancelled step.
    pub fn hang_until_cancelled(self) -> Self {
        self.then(Step::HangUntilCancelled)
    }

    /// Appends a park-at-gate step.
    pub fn wait_for(self, gate: &Gate) -> Self {
        self.then(Step::WaitFor(gate.clone()))
    }

    /// Inserts a park-at-gate step before step `position` (clamped to the end), so a test can
    /// stop any built script midway: `Script::text("abc").wait_at(2, &gate)`.
    pub fn wait_at(mut self, position: usize, gate: &Gate) -> Self {
        let at = position.min(self.steps.len());
        self.steps.insert(at, Step::WaitFor(gate.clone()));
        self
    }

    /// Appends an adapter failure.
    pub fn fail(self, failure: LlmFailure) -> Self {
        self.then(Step::Fail(failure))
    }

    /// Appends `usage` then `finish{reason}`.
    pub fn finish(self, reason: FinishReason, output_tokens: u64) -> Self {
        self.chunk(StreamChunk::Usage {
            usage: usage(output_tokens),
        })
        .chunk(StreamChunk::Finish {
            reason,
            replay_state: None,
        })
    }

    /// A text answer: block-start, one text-delta per character, block-end, usage,
    /// finish(stop). Seven chunks for `"abc"`.
    pub fn text(text: &str) -> Self {
        Self::new()
            .chunks(text_block(0, text))
            .finish(FinishReason::Stop, count(text))
    }

    /// A reasoning block, then a text block, then finish(stop).
    pub fn reasoning_then_text(reasoning: &str, text: &str) -> Self {
        Self::new()
            .chunks(reasoning_block(0, reasoning))
            .chunks(text_block(1, text))
            .finish(FinishReason::Stop, count(reasoning) + count(text))
    }

    /// One tool call, then finish(tool-calls).
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Self {
        Self::tool_calls([(id, name, arguments)])
    }

    /// Several tool calls in order, then finish(tool-calls).
    pub fn tool_calls<'a>(calls: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Self {
        let mut script = Self::new();
        let mut tokens = 0;
        for (i, (id, name, args)) in calls.into_iter().enumerate() {
            script = script.chunks(tool_call_block(index(i), id, name, args));
            tokens += count(args);
        }
        script.finish(FinishReason::ToolCalls, tokens)
    }

    /// A text block, then one tool call, then finish(tool-calls).
    pub fn text_then_tool_call(text: &str, id: &str, name: &str, arguments: &str) -> Self {
        Self::new()
            .chunks(text_block(0, text))
            .chunks(tool_call_block(1, id, name, arguments))
            .finish(FinishReason::ToolCalls, count(text) + count(arguments))
    }

    /// A text block cut off by the output ceiling: finish(max-tokens).
    pub fn max_tokens(text: &str) -> Self {
        Self::new()
            .chunks(text_block(0, text))
            .finish(FinishReason::MaxTokens, count(text))
    }

    /// An open text block with `partial` streamed, then a hang until cancelled.
    pub fn partial_then_hang(partial: &str) -> Self {
        let mut chunks = text_block(0, partial);
        chunks.pop(); // no block-end: the block is still open when the stream parks
        Self::new().chunks(chunks).hang_until_cancelled()
    }

    /// A terminal `finish{error: failure}` chunk.
    pub fn error(failure: LlmFailure) -> Self {
        Self::new().chunk(StreamChunk::Finish {
            reason: FinishReason::Error { failure },
            replay_state: None,
        })
    }

    /// A terminal `finish{error}` with `code` and `message`.
    pub fn error_code(code: FailureCode, message: &str) -> Self {
        Self::error(LlmFailure::new(code, message))
    }
}

fn index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn count(text: &str) -> u64 {
    text.chars().count() as u64
}

fn usage(output_tokens: u64) -> TokenUsage {
    TokenUsage {
        input_tokens: 10,
        output_tokens,
        ..TokenUsage::default()
    }
}

/// block-start, one text-delta per character, block-end.
pub(crate) fn text_block(index: u32, text: &str) -> Vec<StreamChunk> {
    let mut chunks = vec![StreamChunk::BlockStart {
        index,
        block_type: BlockType::Text,
    }];
    chunks.extend(text.chars().map(|c| StreamChunk::TextDelta {
        index,
        text: c.to_string(),
    }));
    chunks.push(StreamChunk::BlockEnd {
        index,
        block: ContentBlock::text(text),
    });
    chunks
}

/// block-start, one reasoning-delta per character, block-end.
pub(crate) fn reasoning_block(index: u32, text: &str) -> Vec<StreamChunk> {
    let mut chunks = vec![StreamChunk::BlockStart {
        index,
        block_type: BlockType::Reasoning,
    }];
    chunks.extend(text.chars().map(|c| StreamChunk::ReasoningDelta {
        index,
        text: c.to_string(),
    }));
    chunks.push(StreamChunk::BlockEnd {
        index,
        block: ContentBlock::Reasoning {
            text: text.to_owned(),
        },
    });
    chunks
}

/// block-start, the arguments in two deltas (the first carrying id and name), block-end.
pub(crate) fn tool_call_block(index: u32, id: &str, name: &str, args: &str) -> Vec<StreamChunk> {
    let split = args
        .char_indices()
        .map(|(i, _)| i)
        .nth(args.chars().count() / 2)
        .unwrap_or(args.len());
    let (first, second) = args.split_at(split);
    vec![
        StreamChunk::BlockStart {
            index,
            block_type: BlockType::ToolCall,
        },
        StreamChunk::ToolCallDelta {
            index,
            id: CallId::new(id),
            name: Some(name.to_owned()),
            arguments_delta: first.to_owned(),
        },
        StreamChunk::ToolCallDelta {
            index,
            id: CallId::new(id),
            name: None,
            arguments_delta: second.to_owned(),
        },
        StreamChunk::BlockEnd {
            index,
            block: ContentBlock::ToolCall {
                id: CallId::new(id),
                name: name.to_owned(),
                arguments: args.to_owned(),
            },
        },
    ]
}
