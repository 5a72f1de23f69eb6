//! Property test: however reads split an Anthropic event stream, the translated chunks are
//! the same.

#![allow(clippy::unwrap_used)]

use dsh_llm::StreamChunk;
use dsh_llm_anthropic::Translator;
use dsh_llm_http::SseParser;
use dsh_testkit::anthropic::MessageStream;
use dsh_testkit::{SseFrame, split_reads};
use proptest::prelude::*;

fn stream_bytes() -> Vec<u8> {
    MessageStream::start(12, 3)
        .thinking("pondering ünïcödé", "sig")
        .text("Hello, wörld — split me anywhere")
        .tool_use("toolu_1", "bash", r#"{"command":"echo \"hi\""}"#, 5)
        .stop("tool_use", 11)
        .build()
        .iter()
        .flat_map(SseFrame::to_bytes)
        .collect()
}

fn translate(bytes: &[u8], cuts: &[usize]) -> Vec<StreamChunk> {
    let mut parser = SseParser::new();
    let mut translator = Translator::new();
    let mut events = Vec::new();
    let mut out = Vec::new();
    for read in split_reads(bytes, cuts) {
        parser.feed(read, &mut events).unwrap();
        for e in events.drain(..) {
            translator.on_event(&e.data, &mut out).unwrap();
        }
    }
    assert!(translator.is_done());
    out
}

proptest! {
    #[test]
    fn read_boundaries_do_not_change_the_chunks(cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        let bytes = stream_bytes();
        let whole = translate(&bytes, &[]);
        prop_assert_eq!(translate(&bytes, &cuts), whole);
    }
}
