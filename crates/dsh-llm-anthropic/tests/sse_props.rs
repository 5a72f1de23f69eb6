//! Property test: however reads split an Anthropic event stream, the translated chunks are
//! the same.

#![allow(clippy::unwrap_used)]

use dsh_llm::StreamChunk;
use dsh_llm_anthropic::Translator;
use dsh_llm_openai::sse::SseParser;
use dsh_testkit::SseFrame;
use dsh_testkit::anthropic::MessageStream;
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
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut parser = SseParser::new();
    let mut translator = Translator::new();
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut from = 0;
    for to in points.into_iter().chain([bytes.len()]) {
        parser.feed(&bytes[from..to], &mut events).unwrap();
        for e in events.drain(..) {
            translator.on_event(&e.data, &mut out).unwrap();
        }
        from = to;
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
