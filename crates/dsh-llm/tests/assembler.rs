//! Block assembly.

use dsh_llm::{
    BlockAssembler, BlockType, CallId, ContentBlock, FailureCode, FinishReason, LlmFailure,
    MessageSource, StreamChunk, TokenUsage,
};
use serde_json::json;

fn start(index: u32, block_type: BlockType) -> StreamChunk {
    StreamChunk::BlockStart { index, block_type }
}

fn text(index: u32, t: &str) -> StreamChunk {
    StreamChunk::TextDelta {
        index,
        text: t.into(),
    }
}

fn call_delta(index: u32, id: &str, name: Option<&str>, args: &str) -> StreamChunk {
    StreamChunk::ToolCallDelta {
        index,
        id: CallId::new(id),
        name: name.map(str::to_owned),
        arguments_delta: args.into(),
    }
}

fn finish(reason: FinishReason, replay_state: Option<serde_json::Value>) -> StreamChunk {
    StreamChunk::Finish {
        reason,
        replay_state,
    }
}

fn assemble(chunks: &[StreamChunk]) -> BlockAssembler {
    let mut a = BlockAssembler::new();
    for c in chunks {
        a.push(c);
    }
    a
}

#[test]
fn max_tokens_finish_drops_tool_calls_and_their_replay_entries() {
    let a = assemble(&[
        start(0, BlockType::Text),
        text(0, "hello"),
        start(1, BlockType::ToolCall),
        call_delta(1, "c1", Some("bash"), "{\"cmd\":"),
        finish(
            FinishReason::MaxTokens,
            Some(json!({"blocks": [{"sig": "t"}, {"sig": "c"}], "v": 1})),
        ),
    ]);
    assert_eq!(a.blocks(), [ContentBlock::text("hello")]);
    assert_eq!(
        a.replay_state(),
        Some(json!({"blocks": [{"sig": "t"}], "v": 1}))
    );
    let message = a.message("p", "m");
    assert!(matches!(
        message.source,
        MessageSource::Model {
            replay_state: Some(_),
            ..
        }
    ));
}

#[test]
fn misaligned_replay_state_is_dropped_when_blocks_are_pruned() {
    let a = assemble(&[
        start(0, BlockType::ToolCall),
        call_delta(0, "c1", Some("bash"), "{"),
        finish(FinishReason::MaxTokens, Some(json!({"blocks": [1, 2, 3]}))),
    ]);
    assert!(a.blocks().is_empty());
    assert_eq!(a.replay_state(), None);
}

#[test]
fn tool_calls_survive_any_other_finish() {
    let a = assemble(&[
        call_delta(0, "c1", Some("bash"), "{}"),
        finish(FinishReason::ToolCalls, None),
    ]);
    assert_eq!(
        a.blocks(),
        [ContentBlock::ToolCall {
            id: CallId::new("c1"),
            name: "bash".into(),
            arguments: "{}".into()
        }]
    );
}

#[test]
fn block_end_is_authoritative_and_freezes_the_block() {
    let a = assemble(&[
        start(0, BlockType::Text),
        text(0, "draft"),
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("final"),
        },
        text(0, " ignored"),
        start(0, BlockType::Reasoning),
        finish(FinishReason::Stop, None),
    ]);
    assert_eq!(a.blocks(), [ContentBlock::text("final")]);
}

#[test]
fn blocks_come_out_in_index_order_whatever_the_arrival_order() {
    let a = assemble(&[
        start(1, BlockType::Text),
        text(1, "second"),
        start(0, BlockType::Reasoning),
        StreamChunk::ReasoningDelta {
            index: 0,
            text: "first".into(),
        },
    ]);
    assert_eq!(
        a.blocks(),
        [
            ContentBlock::Reasoning {
                text: "first".into()
            },
            ContentBlock::text("second")
        ]
    );
}

#[test]
fn interrupted_blocks_keep_only_visible_text_and_reasoning() {
    let a = assemble(&[
        start(0, BlockType::Reasoning),
        StreamChunk::ReasoningDelta {
            index: 0,
            text: "thinking".into(),
        },
        start(1, BlockType::Text),
        text(1, "  \n"),
        start(2, BlockType::ToolCall),
        call_delta(2, "c1", Some("bash"), "{"),
        start(3, BlockType::Text),
        text(3, "partial"),
    ]);
    assert_eq!(
        a.interrupted_blocks(),
        [
            ContentBlock::Reasoning {
                text: "thinking".into()
            },
            ContentBlock::text("partial")
        ]
    );
}

#[test]
fn finish_defaults_to_stop_and_usage_is_the_last_usage_chunk() {
    let mut a = BlockAssembler::new();
    assert_eq!(a.finish(), FinishReason::Stop);
    assert!(!a.is_finished());
    for n in [1, 2] {
        a.push(&StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: n,
                ..TokenUsage::default()
            },
        });
    }
    assert_eq!(a.usage().unwrap().input_tokens, 2);
    let failure = LlmFailure::new(FailureCode::Server, "x");
    a.push(&finish(
        FinishReason::Error {
            failure: failure.clone(),
        },
        None,
    ));
    a.push(&finish(FinishReason::Stop, None));
    assert_eq!(a.finish(), FinishReason::Error { failure });
}
