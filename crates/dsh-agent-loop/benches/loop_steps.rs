//! Harness overhead per step: 1,000 steps in one turn, each step one parallel-safe no-op tool
//! call, against an in-process adapter with zero latency. Prints the per-step harness time
//! around steps 10, 100 and 1,000 and the peak resident memory.
//!
//! Run with `cargo bench -p dsh-agent-loop --bench loop_steps`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dsh_agent::{AgentOptions, CreateAgentOptions};
use dsh_agent_loop::{CoreConfig, mount_core};
use dsh_kernel::Context;
use dsh_llm::{
    Adapter, BlockType, CallId, ChunkStream, ContentBlock, FinishReason, GenerateOptions,
    LlmFailure, ModelInfo, StreamChunk,
};
use dsh_session::{EventKind, Message, SessionEventFired};
use dsh_tools::{Tool, ToolCallContext, ToolError, ToolOutput};
use parking_lot::Mutex;
use serde_json::{Value, json};

const STEPS: usize = 1000;

/// Answers `STEPS` requests with one tool call each, then a final text.
struct Instant0 {
    served: AtomicUsize,
}

#[async_trait]
impl Adapter for Instant0 {
    async fn resolve_model(
        &self,
        _provider: &str,
        model: &str,
        _cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<ModelInfo, LlmFailure> {
        Ok(ModelInfo {
            id: model.into(),
            name: model.into(),
            input_modalities: vec!["text".into()],
            context_window: Some(1_000_000),
            default_max_tokens: Some(4096),
            reasoning: None,
        })
    }

    fn stream(&self, _options: GenerateOptions) -> ChunkStream {
        let n = self.served.fetch_add(1, Ordering::Relaxed);
        let chunks = if n < STEPS {
            let id = CallId::new(format!("c{n}"));
            vec![
                StreamChunk::BlockStart {
                    index: 0,
                    block_type: BlockType::ToolCall,
                },
                StreamChunk::ToolCallDelta {
                    index: 0,
                    id: id.clone(),
                    name: Some("noop".into()),
                    arguments_delta: "{}".into(),
                },
                StreamChunk::BlockEnd {
                    index: 0,
                    block: ContentBlock::ToolCall {
                        id,
                        name: "noop".into(),
                        arguments: "{}".into(),
                    },
                },
                StreamChunk::Finish {
                    reason: FinishReason::ToolCalls,
                    replay_state: None,
                },
            ]
        } else {
            vec![
                StreamChunk::BlockStart {
                    index: 0,
                    block_type: BlockType::Text,
                },
                StreamChunk::TextDelta {
                    index: 0,
                    text: "done".into(),
                },
                StreamChunk::BlockEnd {
                    index: 0,
                    block: ContentBlock::text("done"),
                },
                StreamChunk::Finish {
                    reason: FinishReason::Stop,
                    replay_state: None,
                },
            ]
        };
        Box::pin(futures::stream::iter(chunks.into_iter().map(Ok)))
    }
}

struct Noop;

#[async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        true
    }
    async fn execute(&self, _: Value, _: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Median step interval in a window of 21 steps around `around` (medians resist the noise of
/// a shared machine).
fn window(starts: &[Instant], around: usize) -> Duration {
    let lo = around.saturating_sub(10).max(1);
    let hi = (around + 10).min(starts.len() - 1);
    let mut d: Vec<Duration> = (lo..=hi).map(|i| starts[i] - starts[i - 1]).collect();
    d.sort();
    d[d.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ctx = Context::new();
        let core = mount_core(
            &ctx,
            CoreConfig {
                retry: false,
                ..CoreConfig::default()
            },
        )
        .await
        .unwrap();
        let _reg = core
            .llm
            .register_adapter(
                &["bench"],
                Arc::new(Instant0 {
                    served: AtomicUsize::new(0),
                }),
            )
            .unwrap();
        let _ = core.tools.register(&ctx, Arc::new(Noop)).unwrap();
        let step_starts: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let s = step_starts.clone();
        let _ = ctx
            .on::<SessionEventFired>(move |n| {
                if matches!(n.event.kind, EventKind::StepStart(_)) {
                    s.lock().push(Instant::now());
                }
            })
            .unwrap();
        let handle = core
            .registry
            .create(
                &ctx,
                CreateAgentOptions {
                    agent_options: AgentOptions::route("bench", "m"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap();
        let began = Instant::now();
        handle.agent().followup(Message::user_text("go")).unwrap();
        handle.agent().when_idle().await;
        let total = began.elapsed();
        let starts = step_starts.lock().clone();
        println!(
            "steps: {} (events in log: {})",
            starts.len(),
            handle.agent().session().len()
        );
        for at in [10, 100, STEPS] {
            println!(
                "per-step harness time around step {at:>4} (median): {:?}",
                window(&starts, at)
            );
        }
        println!("total: {total:?} ({:?}/step)", total / starts.len() as u32);
        println!("peak RSS: {} KiB", peak_rss_kib());
        handle.dispose().await;
    });
}
