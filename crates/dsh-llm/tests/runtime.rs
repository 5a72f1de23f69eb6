//! The `Llm` runtime: registry, prepared calls and failure normalization.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_llm::{
    Adapter, ChunkStream, ContentBlock, FailureCode, FinishReason, GenerateOptions, Llm,
    LlmCallConfig, LlmFailure, LlmStream, Message, MessageSource, ModelInfo, StreamChunk,
};
use dsh_testkit::{Script, ScriptedAdapter};
use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn collect(stream: LlmStream) -> Vec<StreamChunk> {
    stream.collect().await
}

/// The single finish of `chunks`, asserting it is the last chunk and the only one.
fn terminal(chunks: &[StreamChunk]) -> FinishReason {
    let finishes = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::Finish { .. }))
        .count();
    assert_eq!(finishes, 1, "exactly one finish in {chunks:?}");
    match chunks.last() {
        Some(StreamChunk::Finish { reason, .. }) => reason.clone(),
        other => panic!("the last chunk is not a finish: {other:?}"),
    }
}

fn scripted() -> (Llm, Arc<ScriptedAdapter>) {
    let llm = Llm::new();
    let adapter = Arc::new(ScriptedAdapter::new());
    adapter.register(&llm).expect("first registration");
    (llm, adapter)
}

fn options(provider: &str) -> GenerateOptions {
    GenerateOptions::new(LlmCallConfig::new(provider, "m"))
}

#[tokio::test]
async fn unknown_provider_is_one_no_adapter_finish_and_a_prepare_error() {
    let (llm, _) = scripted();
    let chunks = collect(llm.stream(options("nowhere"))).await;
    assert_eq!(chunks.len(), 1);
    let failure = terminal(&chunks).failure().cloned().unwrap();
    assert_eq!(failure.code, FailureCode::NoAdapter);
    assert!(failure.message.contains("nowhere") && failure.message.contains("scripted"));
    let err = llm
        .prepare_call(
            LlmCallConfig::new("nowhere", "m"),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), &FailureCode::NoAdapter);
}

#[test]
fn duplicate_route_registers_nothing_all_or_nothing() {
    let llm = Llm::new();
    let a = Arc::new(ScriptedAdapter::new());
    let b = Arc::new(ScriptedAdapter::new());
    llm.register_adapter(&["x"], a.clone()).unwrap();
    let err = llm.register_adapter(&["y", "x"], b.clone()).unwrap_err();
    assert_eq!(err.code(), &FailureCode::DuplicateAdapter);
    assert_eq!(llm.providers(), ["x"]);
    let err = llm.register_adapter(&["z", "z"], b).unwrap_err();
    assert_eq!(err.code(), &FailureCode::DuplicateAdapter);
    assert_eq!(llm.providers(), ["x"]);
}

#[test]
fn unregister_removes_exactly_its_own_routes_and_is_idempotent() {
    let llm = Llm::new();
    let a: Arc<dyn Adapter> = Arc::new(ScriptedAdapter::new());
    let b: Arc<dyn Adapter> = Arc::new(ScriptedAdapter::new());
    let reg_a = llm.register_adapter(&["x", "y"], a).unwrap();
    reg_a.unregister();
    assert!(llm.providers().is_empty());
    let _reg_b = llm.register_adapter(&["x"], b.clone()).unwrap();
    reg_a.unregister();
    assert_eq!(llm.providers(), ["x"]);
    assert!(Arc::ptr_eq(&llm.adapter("x").unwrap(), &b));
}

#[tokio::test]
async fn prepare_call_fills_absent_defaults_and_marks_them() {
    let (llm, adapter) = scripted();
    adapter
        .set_default_max_tokens(Some(4096))
        .set_efforts(&["low", "high"], Some("high"))
        .set_context_window(Some(64_000));
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new("scripted", "m"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(prepared.config.max_tokens, Some(4096));
    assert_eq!(prepared.config.reasoning_effort.as_deref(), Some("high"));
    assert!(prepared.adapter_defaults.max_tokens && prepared.adapter_defaults.reasoning_effort);
    assert_eq!(prepared.context_window, Some(64_000));
    assert!(prepared.retry_policy.is_some());
    assert_eq!(
        serde_json::to_value(prepared.adapter_defaults).unwrap(),
        json!({"reasoningEffort": true, "maxTokens": true})
    );

    let explicit = LlmCallConfig {
        max_tokens: Some(10),
        reasoning_effort: Some("low".into()),
        ..LlmCallConfig::new("scripted", "m")
    };
    let prepared = llm
        .prepare_call(explicit.clone(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(prepared.config, explicit);
    assert!(prepared.adapter_defaults.is_empty());
}

#[tokio::test]
async fn unsupported_effort_fails_before_any_request() {
    let (llm, adapter) = scripted();
    adapter
        .set_efforts(&["low", "high"], None)
        .push(Script::text("x"));
    let config = LlmCallConfig {
        reasoning_effort: Some("max".into()),
        ..LlmCallConfig::new("scripted", "m")
    };
    let err = llm
        .prepare_call(config, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), &FailureCode::UnsupportedReasoningEffort);
    assert!(adapter.requests().is_empty());
    assert_eq!(adapter.scripts_left(), 1);
}

#[tokio::test]
async fn prepared_call_with_a_changed_config_is_invalid_and_sends_nothing() {
    let (llm, adapter) = scripted();
    adapter.push(Script::text("x"));
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new("scripted", "m"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let mut options = options("scripted");
    options.config.temperature = Some(0.1);
    let chunks = collect(prepared.stream(options)).await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        terminal(&chunks).failure().unwrap().code,
        FailureCode::InvalidPreparedCall
    );
    assert!(adapter.requests().is_empty());
}

#[tokio::test]
async fn prepared_call_dispatches_to_the_adapter_that_resolved_it() {
    let llm = Llm::new();
    let first = Arc::new(ScriptedAdapter::with_scripts([Script::text("first")]));
    let second = Arc::new(ScriptedAdapter::with_scripts([Script::text("second")]));
    let reg = first.register(&llm).unwrap();
    let prepared = llm
        .prepare_call(
            LlmCallConfig::new("scripted", "m"),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    reg.unregister();
    second.register(&llm).unwrap();
    let config = prepared.config.clone();
    let chunks = collect(prepared.stream(GenerateOptions::new(config))).await;
    assert_eq!(terminal(&chunks), FinishReason::Stop);
    assert_eq!(first.requests().len(), 1);
    assert!(second.requests().is_empty());
}

/// An adapter failing in one chosen way.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    ErrAfterAChunk,
    ErrAbortedCode,
    ErrWhileCancelled,
    EndsWithoutFinish,
    ChunksAfterFinish,
    PanicsWhilePolled,
    PanicsWhenStarted,
    FinishErrorWithAbortedCode,
    IgnoresCancellation,
}

struct Misbehaving(Misbehaviour);

fn delta(text: &str) -> StreamChunk {
    StreamChunk::TextDelta {
        index: 0,
        text: text.into(),
    }
}

#[async_trait]
impl Adapter for Misbehaving {
    async fn resolve_model(
        &self,
        _: &str,
        model: &str,
        _: &CancellationToken,
    ) -> Result<ModelInfo, LlmFailure> {
        Ok(ModelInfo::new(model))
    }

    fn stream(&self, options: GenerateOptions) -> ChunkStream {
        use Misbehaviour::*;
        let server = |m: &str| LlmFailure::new(FailureCode::Server, m);
        let items: Vec<Result<StreamChunk, LlmFailure>> = match self.0 {
            ErrAfterAChunk => vec![Ok(delta("a")), Err(server("boom")), Ok(delta("late"))],
            ErrAbortedCode => vec![Err(LlmFailure::new(FailureCode::Aborted, "stop"))],
            ErrWhileCancelled => {
                options.cancel.cancel();
                vec![Err(LlmFailure::new(FailureCode::Timeout, "slow"))]
            }
            EndsWithoutFinish => vec![Ok(delta("a"))],
            ChunksAfterFinish => vec![
                Ok(StreamChunk::Finish {
                    reason: FinishReason::Stop,
                    replay_state: None,
                }),
                Ok(delta("late")),
                Err(server("late")),
            ],
            PanicsWhilePolled => {
                return futures::stream::iter([Ok(delta("a"))])
                    .chain(futures::stream::poll_fn(|_| panic!("adapter bug")))
                    .boxed();
            }
            PanicsWhenStarted => panic!("cannot start"),
            IgnoresCancellation => {
                return futures::stream::iter([Ok(delta("a"))])
                    .chain(futures::stream::pending())
                    .boxed();
            }
            FinishErrorWithAbortedCode => vec![Ok(StreamChunk::Finish {
                reason: FinishReason::Error {
                    failure: LlmFailure::new(FailureCode::Aborted, "stop"),
                },
                replay_state: None,
            })],
        };
        futures::stream::iter(items).boxed()
    }
}

#[tokio::test]
async fn every_adapter_failure_form_becomes_exactly_one_terminal_finish() {
    use Misbehaviour::*;
    let cases = [
        (ErrAfterAChunk, "error", FailureCode::Server),
        (ErrAbortedCode, "aborted", FailureCode::Aborted),
        (ErrWhileCancelled, "aborted", FailureCode::Timeout),
        (EndsWithoutFinish, "error", FailureCode::StreamClosed),
        (PanicsWhilePolled, "error", FailureCode::Unknown),
        (PanicsWhenStarted, "error", FailureCode::Unknown),
        (FinishErrorWithAbortedCode, "aborted", FailureCode::Aborted),
    ];
    for (mode, kind, code) in cases {
        let llm = Llm::new();
        llm.register_adapter(&["bad"], Arc::new(Misbehaving(mode)))
            .unwrap();
        let chunks = collect(llm.stream(options("bad"))).await;
        let reason = terminal(&chunks);
        let failure = reason
            .failure()
            .unwrap_or_else(|| panic!("{mode:?}: {reason:?}"));
        assert_eq!(failure.code, code, "{mode:?}");
        let is_aborted = matches!(reason, FinishReason::Aborted { .. });
        assert_eq!(is_aborted, kind == "aborted", "{mode:?}: {reason:?}");
        assert!(
            !chunks.contains(&delta("late")),
            "{mode:?}: chunk after finish"
        );
    }
    let llm = Llm::new();
    llm.register_adapter(&["bad"], Arc::new(Misbehaving(ChunksAfterFinish)))
        .unwrap();
    let chunks = collect(llm.stream(options("bad"))).await;
    assert_eq!(terminal(&chunks), FinishReason::Stop);
    assert_eq!(chunks.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_request_finishes_aborted_even_when_the_adapter_ignores_the_cancel() {
    let llm = Llm::new();
    llm.register_adapter(
        &["deaf"],
        Arc::new(Misbehaving(Misbehaviour::IgnoresCancellation)),
    )
    .unwrap();
    let opts = options("deaf");
    let cancel = opts.cancel.clone();
    let mut stream = llm.stream(opts);
    assert_eq!(stream.next().await, Some(delta("a")));
    cancel.cancel();
    // Paused time: if the stream never ends, the deadline fires at once instead of hanging.
    let rest = tokio::time::timeout(std::time::Duration::from_secs(3600), collect(stream))
        .await
        .expect("the stream ended after the cancel");
    match terminal(&rest) {
        FinishReason::Aborted { failure } => assert_eq!(failure.code, FailureCode::Aborted),
        other => panic!("expected aborted, got {other:?}"),
    }
    assert_eq!(rest.len(), 1);
}

#[tokio::test]
async fn replay_state_reaches_only_the_adapter_instance_that_produced_it() {
    let llm = Llm::new();
    let owner = Arc::new(ScriptedAdapter::with_scripts([Script::text("a")]));
    let other = Arc::new(ScriptedAdapter::with_scripts([Script::text("b")]));
    llm.register_adapter(&["owner", "owner-alias"], owner.clone())
        .unwrap();
    llm.register_adapter(&["other"], other.clone()).unwrap();
    let mut message = Message::assistant(vec![ContentBlock::text("hi")], "owner", "m");
    message.source = MessageSource::Model {
        provider: "owner".into(),
        model: "m".into(),
        replay_state: Some(json!({"opaque": 1})),
    };
    let history = vec![Arc::new(message)];
    let replay = |m: &Arc<Message>| match &m.source {
        MessageSource::Model { replay_state, .. } => replay_state.clone(),
        _ => None,
    };
    for (route, adapter, kept) in [("owner-alias", &owner, true), ("other", &other, false)] {
        let mut opts = options(route);
        opts.messages = history.clone();
        let _ = collect(llm.stream(opts)).await;
        let seen = adapter.requests().pop().unwrap();
        assert_eq!(replay(&seen.messages[0]).is_some(), kept, "{route}");
    }
}
