//! Route configuration: DeepSeek defaults, thinking, unlisted models, the plain route.

mod common;

use common::*;
use dsh_llm::{FailureCode, FinishReason, GenerateOptions, LlmCallConfig, Purpose};
use dsh_llm_openai::{ApiKeySource, OpenAiAdapterConfig, ThinkingMode};
use dsh_testkit::{MockResponse, MockServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn prepare_call_materializes_deepseek_defaults_into_the_wire_request() {
    let server = MockServer::start();
    server.push(MockResponse::text("ok"));
    let llm = deepseek(&server);
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new("deepseek", "deepseek-v4-flash"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(prepared.config.max_tokens, Some(256_000));
    assert_eq!(prepared.config.reasoning_effort.as_deref(), Some("high"));
    assert!(prepared.adapter_defaults.max_tokens && prepared.adapter_defaults.reasoning_effort);
    assert_eq!(prepared.context_window, Some(1_000_000));
    let config = prepared.config.clone();
    let chunks = collect(prepared.stream(GenerateOptions::new(config))).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 256_000);
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
}

#[tokio::test]
async fn unlisted_model_ids_are_accepted_with_the_catalogs_conservative_defaults() {
    let server = MockServer::start();
    server.push(MockResponse::text("ok"));
    let llm = deepseek(&server);
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new("deepseek", "deepseek-v5-preview"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    // Nobody described this id: the catalog's conservative window and output ceiling apply.
    assert_eq!(
        prepared.context_window,
        Some(dsh_llm::catalog::DEFAULT_CONTEXT_WINDOW)
    );
    assert_eq!(
        prepared.config.max_tokens,
        Some(dsh_llm::catalog::DEFAULT_MAX_OUTPUT_TOKENS)
    );
    let config = prepared.config.clone();
    let chunks = collect(prepared.stream(GenerateOptions::new(config))).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    assert_eq!(server.requests()[0].body["model"], "deepseek-v5-preview");
}

#[tokio::test]
async fn a_thinking_disabled_deployment_rejects_enabling_efforts_before_any_request() {
    let server = MockServer::start();
    let mut config = deepseek_config(&server.url());
    config.thinking = ThinkingMode::Disabled;
    let llm = with_config(config);
    let high = LlmCallConfig {
        reasoning_effort: Some("high".into()),
        ..LlmCallConfig::new("deepseek", "deepseek-v4-pro")
    };
    let err = llm
        .prepare_call(high.clone(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), &FailureCode::UnsupportedReasoningEffort);
    // Unprepared, the adapter refuses it too, still without I/O.
    let failure = error(&run(&llm, GenerateOptions::new(high)).await);
    assert_eq!(failure.code, FailureCode::UnsupportedReasoningEffort);
    assert!(server.requests().is_empty());

    server.push(MockResponse::text("ok"));
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new("deepseek", "deepseek-v4-pro"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(prepared.config.reasoning_effort.as_deref(), Some("off"));
    let config = prepared.config.clone();
    collect(prepared.stream(GenerateOptions::new(config))).await;
    let body = &server.requests()[0].body;
    assert_eq!(body["thinking"], json!({"type": "disabled"}));
    assert!(body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn session_titles_never_think() {
    let server = MockServer::start();
    server.push(MockResponse::text("A title"));
    let llm = deepseek(&server);
    let mut opts = GenerateOptions::new(LlmCallConfig {
        reasoning_effort: Some("max".into()),
        ..LlmCallConfig::new("deepseek", "deepseek-v4-flash")
    });
    opts.purpose = Purpose::SessionTitle;
    collect(llm.stream(opts)).await;
    let body = &server.requests()[0].body;
    assert_eq!(body["thinking"], json!({"type": "disabled"}));
    assert!(body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn the_plain_route_sends_no_thinking_and_no_authorization_when_no_key_is_needed() {
    let server = MockServer::start();
    server.push(MockResponse::text("ok"));
    let llm = with_config(OpenAiAdapterConfig::openai_compatible(
        format!("{}/v1", server.url()),
        ApiKeySource::NotRequired,
    ));
    let opts = GenerateOptions::new(LlmCallConfig::new("openai-compatible", "llama3"));
    let chunks = collect(llm.stream(opts)).await;
    assert_eq!(finish(&chunks), FinishReason::Stop);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), None);
    assert!(request.body.get("thinking").is_none());
    assert!(request.body.get("reasoning_effort").is_none());
    assert!(request.body.get("max_tokens").is_none());
}
