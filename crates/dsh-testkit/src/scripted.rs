//! The in-process scripted adapter used by loop tests.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_llm::retry::RetryPolicy;
use dsh_llm::{
    Adapter, AdapterRegistration, ChunkStream, ContentBlock, FailureCode, FinishReason,
    GenerateOptions, Llm, LlmCallConfig, LlmError, LlmFailure, Message, ModelInfo, Purpose,
    SessionId, StreamChunk, ToolSchema,
};
use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::script::{Script, Step};
use crate::validity::check_messages;

/// What the scripted adapter saw in one `stream` call (everything but the token).
#[derive(Clone, Debug)]
pub struct ScriptedRequest {
    /// Route, model and sampling configuration.
    pub config: LlmCallConfig,
    /// The history sent.
    pub messages: Vec<Arc<Message>>,
    /// The system prompt.
    pub system: Option<String>,
    /// The tools offered.
    pub tools: Vec<ToolSchema>,
    /// The session id forwarded.
    pub session_id: Option<SessionId>,
    /// Why the request was made.
    pub purpose: Purpose,
}

/// Answers a request from what it carries (for loops whose request order depends on the
/// harness, e.g. when compaction interleaves summary calls).
pub type Responder = Arc<dyn Fn(&ScriptedRequest) -> Script + Send + Sync>;

/// An [`Adapter`] that answers each request with the next queued [`Script`].
///
/// It records every request and checks each one for provider validity (every tool call in the
/// history answered by exactly one later result); a violating request is recorded in
/// [`ScriptedAdapter::violations`], fails with `INVALID_REQUEST` and consumes no script.
/// When no script is left the request finishes with an error that says so.
pub struct ScriptedAdapter {
    scripts: Mutex<VecDeque<Script>>,
    requests: Mutex<Vec<ScriptedRequest>>,
    violations: Mutex<Vec<String>>,
    model: Mutex<ModelInfo>,
    retry_policy: Mutex<Option<RetryPolicy>>,
    responder: Mutex<Option<Responder>>,
    seen: watch::Sender<usize>,
}

impl Default for ScriptedAdapter {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ScriptedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedAdapter")
            .field("scripts_left", &self.scripts.lock().len())
            .field("requests", &self.requests.lock().len())
            .finish_non_exhaustive()
    }
}

impl ScriptedAdapter {
    /// The route name tests register it under.
    pub const ROUTE: &'static str = "scripted";

    /// An adapter with no scripts, a 128k-token context window and the default retry policy.
    pub fn new() -> Self {
        Self {
            scripts: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            model: Mutex::new(ModelInfo::new("scripted").with_context_window(128_000)),
            retry_policy: Mutex::new(Some(RetryPolicy::default())),
            responder: Mutex::new(None),
            seen: watch::Sender::new(0),
        }
    }

    /// An adapter that will play `scripts` in order.
    pub fn with_scripts(scripts: impl IntoIterator<Item = Script>) -> Self {
        let adapter = Self::new();
        adapter.scripts.lock().extend(scripts);
        adapter
    }

    /// Queues a script for a later request.
    pub fn push(&self, script: Script) -> &Self {
        self.scripts.lock().push_back(script);
        self
    }

    /// Answers requests with `responder` once the queued scripts are used up.
    pub fn respond_with(
        &self,
        responder: impl Fn(&ScriptedRequest) -> Script + Send + Sync + 'static,
    ) -> &Self {
        *self.responder.lock() = Some(Arc::new(responder));
        self
    }

    /// Scripts not yet consumed.
    pub fn scripts_left(&self) -> usize {
        self.scripts.lock().len()
    }

    /// Sets the model facts every model id resolves to (the id itself is the requested one).
    pub fn set_model(&self, model: ModelInfo) -> &Self {
        *self.model.lock() = model;
        self
    }

    /// Sets the context window models report.
    pub fn set_context_window(&self, tokens: Option<u64>) -> &Self {
        self.model.lock().context_window = tokens;
        self
    }

    /// Sets the default output ceiling models report.
    pub fn set_default_max_tokens(&self, tokens: Option<u32>) -> &Self {
        self.model.lock().default_max_tokens = tokens;
        self
    }

    /// Sets the advertised reasoning efforts and default.
    pub fn set_efforts(&self, efforts: &[&str], default_effort: Option<&str>) -> &Self {
        let mut model = self.model.lock();
        *model = model
            .clone()
            .with_reasoning(efforts.iter().copied(), default_effort);
        self
    }

    /// Sets the retry policy reported at registration (`None`: never retried).
    pub fn set_retry_policy(&self, policy: Option<RetryPolicy>) -> &Self {
        *self.retry_policy.lock() = policy;
        self
    }

    /// Registers `self` under [`ScriptedAdapter::ROUTE`].
    pub fn register(self: &Arc<Self>, llm: &Llm) -> Result<AdapterRegistration, LlmError> {
        llm.register_adapter(&[Self::ROUTE], self.clone())
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ScriptedRequest> {
        self.requests.lock().clone()
    }

    /// The history of the `n`th request, one line per message, for assertions that compare
    /// what the model saw: text as is, a tool call as `call:<id>`, a tool result as
    /// `result:<id>:<text>`, anything else as its debug form; a message's blocks joined by `|`.
    ///
    /// # Panics
    ///
    /// When fewer than `n + 1` requests arrived (a test helper: the panic is the report).
    pub fn request_texts(&self, n: usize) -> Vec<String> {
        self.requests.lock()[n]
            .messages
            .iter()
            .map(|m| {
                m.content
                    .iter()
                    .map(|b| match b {
                        ContentBlock::Text { text } => text.clone(),
                        ContentBlock::ToolCall { id, .. } => format!("call:{id}"),
                        ContentBlock::ToolResult {
                            tool_call_id,
                            content,
                            ..
                        } => format!(
                            "result:{tool_call_id}:{}",
                            content
                                .iter()
                                .filter_map(ContentBlock::as_text)
                                .collect::<String>()
                        ),
                        other => format!("{other:?}"),
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect()
    }

    /// Provider-validity violations found so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().clone()
    }

    /// Resolves once at least `n` requests have been received.
    pub async fn wait_for_requests(&self, n: usize) {
        let mut rx = self.seen.subscribe();
        // The sender lives as long as `self`, so `wait_for` cannot fail while we borrow it.
        let _ = rx.wait_for(|seen| *seen >= n).await;
    }
}

#[async_trait]
impl Adapter for ScriptedAdapter {
    fn retry_policy(&self, _provider: &str) -> Option<RetryPolicy> {
        self.retry_policy.lock().clone()
    }

    fn list_models(&self, _provider: &str) -> Vec<ModelInfo> {
        vec![self.model.lock().clone()]
    }

    async fn resolve_model(
        &self,
        _provider: &str,
        model: &str,
        _cancel: &CancellationToken,
    ) -> Result<ModelInfo, LlmFailure> {
        let mut info = self.model.lock().clone();
        info.id = model.to_owned();
        info.name = model.to_owned();
        Ok(info)
    }

    fn stream(&self, options: GenerateOptions) -> ChunkStream {
        let request = ScriptedRequest {
            config: options.config.clone(),
            messages: options.messages.clone(),
            system: options.system.clone(),
            tools: options.tools.clone(),
            session_id: options.session_id.clone(),
            purpose: options.purpose,
        };
        let n = {
            let mut requests = self.requests.lock();
            requests.push(request.clone());
            requests.len()
        };
        self.seen.send_replace(n);
        let violations = check_messages(&options.messages);
        if !violations.is_empty() {
            let message = format!(
                "scripted adapter: request #{n} is not provider-valid: {}",
                violations.join("; ")
            );
            self.violations.lock().extend(violations);
            let failure = LlmFailure::new(FailureCode::InvalidRequest, message);
            return futures::stream::iter([Err(failure)]).boxed();
        }
        let queued = self.scripts.lock().pop_front();
        let responder = self.responder.lock().clone();
        let Some(script) = queued.or_else(|| responder.map(|r| r(&request))) else {
            let failure = LlmFailure::new(
                FailureCode::Unknown,
                format!(
                    "scripted adapter: no script left for request #{n} (model `{}`)",
                    options.config.model
                ),
            );
            return futures::stream::iter([Ok(finish_error(failure))]).boxed();
        };
        play(script, options.cancel)
    }
}

fn finish_error(failure: LlmFailure) -> StreamChunk {
    StreamChunk::Finish {
        reason: FinishReason::Error { failure },
        replay_state: None,
    }
}

fn aborted() -> StreamChunk {
    StreamChunk::Finish {
        reason: FinishReason::Aborted {
            failure: LlmFailure::new(FailureCode::Aborted, "the request was cancelled"),
        },
        replay_state: None,
    }
}

/// Plays the steps in order; a parked step ends the stream `aborted` when cancelled.
fn play(script: Script, cancel: CancellationToken) -> ChunkStream {
    let steps: VecDeque<Step> = script.steps().iter().cloned().collect();
    futures::stream::unfold(Some(steps), move |state| {
        let cancel = cancel.clone();
        async move {
            let mut steps = state?;
            loop {
                match steps.pop_front()? {
                    Step::Chunk(chunk) => {
                        let last = matches!(chunk, StreamChunk::Finish { .. });
                        return Some((Ok(chunk), (!last).then_some(steps)));
                    }
                    Step::HangUntilCancelled => {
                        cancel.cancelled().await;
                        return Some((Ok(aborted()), None));
                    }
                    Step::WaitFor(gate) => {
                        tokio::select! {
                            _ = gate.pass() => {}
                            _ = cancel.cancelled() => return Some((Ok(aborted()), None)),
                        }
                    }
                    Step::Fail(failure) => return Some((Err(failure), None)),
                }
            }
        }
    })
    .boxed()
}
