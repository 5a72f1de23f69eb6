//! Shared harness: the real core services, the compaction plugin, the scripted adapter playing
//! a model whose "real" tokenizer is denser than the estimator's heuristic, and a tool that
//! returns ~6 KB per call.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use dsh_agent::*;
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_compaction::{CompactionConfig, CompactionPlugin};
use dsh_kernel::{Context, PluginHandle};
use dsh_llm::{ContentBlock, Purpose, StreamChunk, TokenUsage};
use dsh_session::*;
use dsh_store_jsonl::{JsonlPersistencePlugin, JsonlStore};
use dsh_testkit::{Script, ScriptedAdapter, ScriptedRequest, Step};
use dsh_tools::{Tool, ToolCallContext, ToolError, ToolOutput};
use parking_lot::Mutex;
use serde_json::{Value, json};

pub struct H {
    pub ctx: Context,
    pub core: Core,
    pub adapter: Arc<ScriptedAdapter>,
    pub store: Arc<JsonlStore>,
    pub persistence: PluginHandle,
    pub compaction: PluginHandle,
    /// Requests the fake model found over its window, with their real size.
    pub over_window: Arc<Mutex<Vec<u64>>>,
}

/// Characters per token of the fake model's tokenizer in tests: denser than the estimator's
/// 4, so the estimate only stays under the window if it calibrates.
pub const TEST_CHARS_PER_TOKEN: u64 = 3;

/// The fake model's tokenizer: a token per `chars_per_token` characters plus 4 per block and
/// per message.
pub fn real_tokens(r: &ScriptedRequest, chars_per_token: u64) -> u64 {
    let chars = |b: &ContentBlock| -> usize {
        match b {
            ContentBlock::Text { text } | ContentBlock::Reasoning { text } => text.len(),
            ContentBlock::ToolCall {
                name, arguments, ..
            } => name.len() + arguments.len(),
            ContentBlock::ToolResult { content, .. } => content
                .iter()
                .filter_map(ContentBlock::as_text)
                .map(str::len)
                .sum(),
            ContentBlock::Image { .. } => 0,
        }
    };
    let system = r.system.as_deref().map_or(0, str::len);
    let tools: usize = r
        .tools
        .iter()
        .map(|t| serde_json::to_string(t).unwrap().len())
        .sum();
    let mut tokens = ((system + tools) as u64).div_ceil(chars_per_token);
    for m in &r.messages {
        tokens += 4;
        for b in &m.content {
            tokens += (chars(b) as u64).div_ceil(chars_per_token) + 4;
        }
    }
    tokens
}

/// `script` with its usage report replaced by a realistic one.
pub fn with_usage(script: Script, prompt: u64, output: u64) -> Script {
    let mut out = Script::new();
    for step in script.steps() {
        out = match step {
            Step::Chunk(StreamChunk::Usage { .. }) => out.chunk(StreamChunk::Usage {
                usage: TokenUsage {
                    input_tokens: prompt / 10,
                    cache_read_tokens: Some(prompt - prompt / 10),
                    output_tokens: output,
                    ..TokenUsage::default()
                },
            }),
            other => out.then(other.clone()),
        };
    }
    out
}

pub const SUMMARY_TEXT: &str = "## Request and intent\nRun the dump loop.\n## Next step\nContinue.";

/// A model that calls `dump` `steps` times in its first turn, then answers "done"; later
/// turns answer "ok". Summary requests get a short summary. A request over `window` real
/// tokens fails with DeepSeek's context-length error and is recorded.
pub fn loop_model(h: &H, window: u64, steps: usize) {
    loop_model_with(h, window, steps, TEST_CHARS_PER_TOKEN);
}

/// [`loop_model`] with the fake tokenizer's density.
pub fn loop_model_with(h: &H, window: u64, steps: usize, chars_per_token: u64) {
    let calls = Arc::new(AtomicUsize::new(0));
    let over = h.over_window.clone();
    h.adapter.respond_with(move |r| {
        let real = real_tokens(r, chars_per_token);
        if real > window {
            over.lock().push(real);
            return Script::error_code(
                FailureCode::ContextWindowExceeded,
                &format!("This model's maximum context length is {window} tokens. However, you requested {real} tokens"),
            );
        }
        if r.purpose == Purpose::Compaction {
            return with_usage(Script::text(SUMMARY_TEXT), real, 20);
        }
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let script = if n < steps {
            Script::tool_call(&format!("c{n}"), "dump", &format!(r#"{{"n":{n}}}"#))
        } else if n == steps {
            Script::text("done")
        } else {
            Script::text("ok")
        };
        with_usage(script, real, 10)
    });
}

pub async fn harness(window: u64, home: &Path) -> H {
    harness_with(window, home, CompactionConfig::default()).await
}

pub async fn harness_with(window: u64, home: &Path, config: CompactionConfig) -> H {
    let ctx = Context::new();
    let store = JsonlStore::new(home.join("sessions"));
    let persistence = ctx
        .plugin(JsonlPersistencePlugin::new(store.clone()))
        .await
        .unwrap();
    let core = mount_core(
        &ctx,
        CoreConfig {
            retry: false,
            ..CoreConfig::default()
        },
    )
    .await
    .unwrap();
    let adapter = Arc::new(ScriptedAdapter::new());
    adapter.set_context_window(Some(window));
    std::mem::forget(adapter.register(&core.llm).unwrap());
    let compaction = ctx.plugin(CompactionPlugin::new(config)).await.unwrap();
    let _ = core.tools.register(&ctx, Arc::new(Dump)).unwrap();
    let _ = ctx
        .on::<SessionCreated>(|s| {
            s.add_validator(relational_validator());
        })
        .unwrap();
    H {
        ctx,
        core,
        adapter,
        store,
        persistence,
        compaction,
        over_window: Arc::default(),
    }
}

impl H {
    pub async fn agent(&self, id: &str) -> AgentHandle {
        self.core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    session_id: Some(id.into()),
                    agent_options: AgentOptions::route("scripted", "test-model"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap()
    }

    pub async fn resume(&self, id: &str) -> AgentHandle {
        let mut options = ResumeAgentOptions::new(id.into());
        options.agent_options = AgentOptions::route("scripted", "test-model");
        self.core.registry.resume(&self.ctx, options).await.unwrap()
    }

    pub fn compaction(&self) -> Arc<dsh_compaction::Compaction> {
        self.ctx.require::<dsh_compaction::Compaction>().unwrap()
    }

    pub async fn shutdown(&self) {
        self.core.agent_loop.shutdown().await;
        self.compaction.dispose().await;
        self.core.shutdown().await;
        self.store.close().await.unwrap();
        self.persistence.dispose().await;
    }
}

/// Event types of a log with `type_name`.
pub fn count(session: &Session, type_name: &str) -> usize {
    session
        .events()
        .iter()
        .filter(|e| e.type_name() == type_name)
        .count()
}

pub fn turn_ends(session: &Session) -> Vec<TurnEndReason> {
    session
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::TurnEnd(t) => Some(t.reason.clone()),
            _ => None,
        })
        .collect()
}

/// ~6 KB of deterministic output per call.
pub fn dump_text(n: u64) -> String {
    let line = format!("line of dump output number {n}, padding padding padding padding\n");
    let mut out = String::new();
    while out.len() < 6_000 {
        out.push_str(&line);
    }
    out
}

/// Returns ~6 KB per call.
pub struct Dump;

#[async_trait]
impl Tool for Dump {
    fn name(&self) -> &str {
        "dump"
    }
    fn description(&self) -> &str {
        "prints a lot"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    async fn execute(&self, args: Value, _call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        let n = args.get("n").and_then(Value::as_u64).unwrap_or(0);
        Ok(ToolOutput::text(dump_text(n)))
    }
}
