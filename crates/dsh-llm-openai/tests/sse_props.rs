//! Property test: the chat-completions translator's chunks do not depend on where reads split
//! the event stream.

#![allow(clippy::unwrap_used)]

use dsh_llm::StreamChunk;
use dsh_llm_http::{SseEvent, SseParser};
use dsh_llm_openai::Translator;
use dsh_testkit::split_reads;
use proptest::prelude::*;

/// The events of `bytes` fed in pieces cut at `cuts` (positions, any order, may repeat).
fn parse_split(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    for read in split_reads(bytes, cuts) {
        parser.feed(read, &mut out).unwrap();
    }
    out
}

proptest! {
    #[test]
    fn translated_chunks_do_not_depend_on_read_boundaries(
        pieces in prop::collection::vec("[a-z \"{}:]{1,6}", 1..10),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut body = String::new();
        for (i, p) in pieces.iter().enumerate() {
            let delta = match i % 3 {
                0 => serde_json::json!({"reasoning_content": p}),
                1 => serde_json::json!({"content": p}),
                _ => serde_json::json!({"tool_calls": [{"index": i % 2, "id": format!("c{}", i % 2),
                                        "function": {"name": "t", "arguments": p}}]}),
            };
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": delta}]});
            body.push_str(&format!("data: {chunk}\r\n\r\n"));
        }
        body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
        let translate = |events: Vec<SseEvent>| {
            let mut t = Translator::new();
            let mut out: Vec<StreamChunk> = Vec::new();
            for e in events {
                t.on_event(&e.data, &mut out).unwrap();
            }
            out
        };
        let whole = translate(parse_split(body.as_bytes(), &[]));
        let split = translate(parse_split(body.as_bytes(), &cuts));
        let finished = matches!(whole.last(), Some(StreamChunk::Finish { .. }));
        prop_assert!(finished, "no finish");
        prop_assert_eq!(whole, split);
    }
}
