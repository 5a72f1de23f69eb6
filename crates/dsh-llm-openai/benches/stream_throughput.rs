//! Throughput of the streaming pipeline: SSE parser -> chunk translator -> block assembler.
//!
//! Builds a ~1 MB DeepSeek-shaped response (reasoning, text, a tool call, usage, `[DONE]`)
//! in small deltas, as real streams arrive, then pushes it through the pipeline in 16 KiB
//! reads (and, for comparison, 1 KiB reads) and prints MB/s. Run with
//! `cargo bench -p dsh-llm-openai --bench stream_throughput`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use dsh_llm::{BlockAssembler, StreamChunk};
use dsh_llm_http::SseParser;
use dsh_llm_openai::Translator;
use serde_json::json;

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    let c = json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "deepseek-v4-flash", "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    format!("data: {c}\n\n")
}

/// A response of at least `target` bytes.
fn response(target: usize) -> Vec<u8> {
    let words = "the quick brown fox jumps over the lazy dog; \"quoted\" text\n";
    let mut body = chunk(
        json!({"role": "assistant", "content": null, "reasoning_content": ""}),
        None,
    );
    let mut i = 0usize;
    while body.len() < target / 4 {
        let piece = &words[i % 40..i % 40 + 12];
        body.push_str(&chunk(json!({"reasoning_content": piece}), None));
        i += 1;
    }
    while body.len() < target * 3 / 4 {
        let piece = &words[i % 40..i % 40 + 12];
        body.push_str(&chunk(json!({"content": piece}), None));
        i += 1;
    }
    body.push_str(&chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "write", "arguments": ""}}]}),
        None,
    ));
    while body.len() < target {
        let piece = &words[i % 40..i % 40 + 12];
        let arg = serde_json::to_string(piece).unwrap_or_default();
        body.push_str(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": arg}}]}),
            None,
        ));
        i += 1;
    }
    body.push_str(&chunk(json!({}), Some("tool_calls")));
    body.push_str(&format!(
        "data: {}\n\n",
        json!({"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 50_000,
               "prompt_cache_hit_tokens": 900}})
    ));
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// One full pass; returns the number of chunks produced.
fn pipeline(body: &[u8], read_size: usize) -> usize {
    let mut parser = SseParser::new();
    let mut translator = Translator::new();
    let mut assembler = BlockAssembler::new();
    let mut events = Vec::new();
    let mut chunks: Vec<StreamChunk> = Vec::new();
    let mut produced = 0;
    for read in body.chunks(read_size) {
        parser
            .feed(read, &mut events)
            .unwrap_or_else(|e| panic!("{e}"));
        for event in events.drain(..) {
            translator
                .on_event(&event.data, &mut chunks)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        for c in chunks.drain(..) {
            assembler.push(&c);
            produced += 1;
        }
    }
    let blocks = assembler.blocks();
    assert_eq!(blocks.len(), 3, "reasoning, text and one tool call");
    black_box(blocks);
    produced
}

fn measure(body: &[u8], read_size: usize) {
    // Warm up, then run for at least two seconds.
    pipeline(body, read_size);
    let start = Instant::now();
    let mut runs = 0u32;
    let mut chunks = 0;
    while start.elapsed() < Duration::from_secs(2) {
        chunks = pipeline(black_box(body), read_size);
        runs += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let mb = body.len() as f64 * f64::from(runs) / 1e6;
    println!(
        "sse+translate+assemble, {:>5} B reads: {:>7.1} MB/s ({runs} runs of {:.2} MB, {chunks} chunks each, {:.2} ms per response)",
        read_size,
        mb / secs,
        body.len() as f64 / 1e6,
        secs * 1e3 / f64::from(runs)
    );
}

fn main() {
    let body = response(1 << 20);
    measure(&body, 16 * 1024);
    measure(&body, 1024);
}
