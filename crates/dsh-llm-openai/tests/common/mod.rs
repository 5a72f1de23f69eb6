//! Shared helpers of the adapter tests.
#![allow(dead_code)] // Each test file uses a different subset.

use std::time::Duration;

use dsh_llm::{
    BlockAssembler, FinishReason, GenerateOptions, Llm, LlmCallConfig, LlmFailure, LlmStream,
    StreamChunk,
};
use dsh_llm_openai::{ApiKeySource, OpenAiAdapter, OpenAiAdapterConfig};
use dsh_testkit::MockServer;
use futures::StreamExt;

/// The key every test uses; no failure message or Debug output may contain it.
pub const KEY: &str = "sk-test-SECRET-4242abcd";

pub fn deepseek_config(base_url: &str) -> OpenAiAdapterConfig {
    OpenAiAdapterConfig::deepseek(base_url, ApiKeySource::value(KEY))
}

/// An `Llm` with the DeepSeek route pointed at `server`.
pub fn deepseek(server: &MockServer) -> Llm {
    with_config(deepseek_config(&server.url()))
}

pub fn with_config(config: OpenAiAdapterConfig) -> Llm {
    let llm = Llm::new();
    OpenAiAdapter::new(config)
        .expect("valid config")
        .register(&llm)
        .expect("first registration");
    llm
}

pub fn options(model: &str) -> GenerateOptions {
    GenerateOptions::new(LlmCallConfig::new("deepseek", model))
}

/// Collects a stream, with a generous deadline so a bug hangs no test run.
pub async fn collect(stream: LlmStream) -> Vec<StreamChunk> {
    tokio::time::timeout(Duration::from_secs(60), stream.collect())
        .await
        .expect("the stream ended")
}

pub async fn run(llm: &Llm, options: GenerateOptions) -> Vec<StreamChunk> {
    collect(llm.stream(options)).await
}

/// The finish chunk's reason, asserting it is the only finish and the last chunk.
pub fn finish(chunks: &[StreamChunk]) -> FinishReason {
    let finishes = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::Finish { .. }))
        .count();
    assert_eq!(finishes, 1, "{chunks:#?}");
    match chunks.last() {
        Some(StreamChunk::Finish { reason, .. }) => reason.clone(),
        other => panic!("last chunk is not a finish: {other:?}"),
    }
}

/// The failure of an `error` finish.
pub fn error(chunks: &[StreamChunk]) -> LlmFailure {
    match finish(chunks) {
        FinishReason::Error { failure } => failure,
        other => panic!("expected an error finish, got {other:?}"),
    }
}

pub fn assemble(chunks: &[StreamChunk]) -> BlockAssembler {
    let mut a = BlockAssembler::new();
    for c in chunks {
        a.push(c);
    }
    a
}
