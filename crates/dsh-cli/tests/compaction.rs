#![allow(clippy::unwrap_used)]
//! `dsh run` carries a session longer than the model's window: the real binary against the
//! mock server, with the window set in config.toml.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{World, bash, json_lines, stderr};
use dsh_testkit::MockResponse;
use dsh_testkit::sse::{ChatStream, usage_deepseek};
use parking_lot::Mutex;
use serde_json::Value;

const WINDOW: u64 = 24_000;
const STEPS: usize = 40;

/// The mock model's token count of a request: a token per 4 bytes of its JSON body.
fn tokens(body: &Value) -> u64 {
    (body.to_string().len() as u64).div_ceil(4)
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|t| t.contains("write a checkpoint of this conversation"))
}

/// The mock model runs a loop of `steps` ~6 KB `bash` results, then answers "All done.";
/// returns the step counter and the sizes of requests that were over the window.
fn serve_loop(w: &World, steps: usize) -> (Arc<AtomicUsize>, Arc<Mutex<Vec<u64>>>) {
    let counter = Arc::new(AtomicUsize::new(0));
    let over: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (n, too_big) = (counter.clone(), over.clone());
    w.server.respond_with(move |request| {
        let size = tokens(&request.body);
        if size > WINDOW {
            too_big.lock().push(size);
            return MockResponse::error_json(
                400,
                &format!("This model's maximum context length is {WINDOW} tokens"),
                "invalid_request_error",
                Some("context_length_exceeded"),
            );
        }
        // Everything but the newest ~2k tokens was a cache hit.
        let usage = usage_deepseek(size, 20, size.saturating_sub(2_000), None);
        let stream = ChatStream::new("deepseek-v4-flash").role();
        let stream = if is_summary_request(&request.body) {
            stream
                .text("## Request and intent\nPrint the lines.\n## Next step\nContinue.")
                .finish("stop")
        } else {
            let step = n.fetch_add(1, Ordering::SeqCst);
            if step < steps {
                let command = format!(
                    "yes 'output line {step} of the compaction test, padded to sixty chars' \
                     | head -n 100"
                );
                stream
                    .tool_call(0, &format!("call_{step}"), "bash", &bash(&command), 64)
                    .finish("tool_calls")
            } else {
                stream.text("All forty done.").finish("stop")
            }
        };
        MockResponse::sse(stream.usage_value(usage).done().build())
    });
    (counter, over)
}

fn summaries(w: &World, id: &str) -> usize {
    w.load(id)
        .iter()
        .filter(|e| e.type_name() == "compaction/summary")
        .count()
}

#[test]
fn the_compaction_table_moves_the_threshold_of_dsh_run() {
    let w = World::new();
    // Eight ~1.6k-token steps reach ~13k tokens: past 30% of the window, short of 80%.
    std::fs::write(
        w.home.path().join("config.toml"),
        format!(
            "[models.\"deepseek-v4-flash\"]\ncontext_window = {WINDOW}\n\n\
             [compaction]\nthreshold = 0.3\nkeep_recent = 0.1\n"
        ),
    )
    .unwrap();
    let (steps, over) = serve_loop(&w, 8);
    let out = w.output(&["run", "--output-format", "json", "print", "eight", "times"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(over.lock().is_empty());
    assert_eq!(steps.load(Ordering::SeqCst), 9);
    let result = &json_lines(&out)[0];
    let id = result["sessionId"].as_str().unwrap();
    assert!(summaries(&w, id) >= 1, "the configured threshold compacted");
}

#[test]
fn run_finishes_a_40_step_loop_of_6kb_results_under_a_24k_window() {
    let w = World::new();
    std::fs::write(
        w.home.path().join("config.toml"),
        format!("[models.\"deepseek-v4-flash\"]\ncontext_window = {WINDOW}\n"),
    )
    .unwrap();
    let (steps, over) = serve_loop(&w, STEPS);

    let out = w.output(&["run", "--output-format", "json", "print", "forty", "times"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(
        over.lock().is_empty(),
        "requests over the window: {:?}",
        over.lock()
    );
    assert!(
        w.server.violations().is_empty(),
        "{:?}",
        w.server.violations()
    );
    // `json` prints exactly one object: the result, with usage, cost and duration.
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let result = &lines[0];
    assert_eq!(result["type"], "result");
    assert_eq!(result["text"], "All forty done.");
    let usage = &result["usage"];
    assert!(usage["cachedInputTokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["inputTokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["outputTokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(usage["reasoningTokens"], 0);
    assert!(result["costUsd"].as_f64().unwrap() > 0.0, "{result}");
    assert!(result["durationMs"].is_u64());
    // The loop really outgrew the window: compactions are in the log.
    let id = result["sessionId"].as_str().unwrap();
    let compactions = summaries(&w, id);
    assert!(compactions >= 2, "{compactions} compactions");
    dsh_session::check_balanced(&w.load(id)).unwrap();
    assert_eq!(steps.load(Ordering::SeqCst), STEPS + 1);
}
