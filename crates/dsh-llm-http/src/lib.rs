//! The provider-neutral HTTP plumbing every dsh model adapter shares.
//!
//! A provider adapter (`dsh-llm-openai`, `dsh-llm-anthropic`, …) is a request builder, a
//! [`WireTranslator`] for its event payloads and a classifier for its error bodies; everything
//! else lives here, so no adapter imports another and every route behaves the same at the
//! edges: [`stream_sse`] sends one request and reads its server-sent events (idle timeout on
//! every read, prompt cancellation, a size cap, the key redacted from every failure),
//! [`ApiKeySource`] resolves the key and [`key_header`] sends it, [`RequestLog`] traces the
//! request, and [`classify_failure`], [`readable_error`] and [`retry_after_ms`] give every
//! provider's failures the same codes and the same cleaned-up messages.
//!
//! A wire format is a translator and a request builder:
//!
//! ```no_run
//! use std::collections::VecDeque;
//! use std::time::Duration;
//!
//! use dsh_llm::{ChunkStream, FailureCode, FinishReason, LlmFailure, StreamChunk};
//! use dsh_llm_http::{
//!     ApiKeySource, RequestLog, SseRequest, WireTranslator, endpoint_url, http_client,
//!     key_header, stream_prepared,
//! };
//! use tokio_util::sync::CancellationToken;
//!
//! /// Each event is a piece of text; `[END]` finishes.
//! struct Plain;
//!
//! impl WireTranslator for Plain {
//!     fn on_event(&mut self, data: &str, out: &mut VecDeque<StreamChunk>)
//!     -> Result<bool, LlmFailure> {
//!         if data == "[END]" {
//!             let reason = FinishReason::Stop;
//!             out.push_back(StreamChunk::Finish { reason, replay_state: None });
//!             return Ok(true);
//!         }
//!         out.push_back(StreamChunk::TextDelta { index: 0, text: data.to_owned() });
//!         Ok(false)
//!     }
//!
//!     fn ended_early(&self) -> LlmFailure {
//!         LlmFailure::new(FailureCode::StreamClosed, "the stream ended before [END]")
//!     }
//! }
//!
//! fn prepare(keys: &ApiKeySource, body: Vec<u8>) -> Result<SseRequest, LlmFailure> {
//!     // Adapters check the URL and build the client once, in their constructor.
//!     let endpoint = endpoint_url("plain", "http://127.0.0.1:8080", "/stream")?;
//!     let key = keys.resolve()?;
//!     let log = RequestLog::sent("plain", &endpoint, "m", &body, key.as_ref());
//!     let mut request = http_client()?.post(&endpoint).body(body);
//!     if let Some(key) = &key {
//!         request = request.header("authorization", key_header("Bearer ", key)?);
//!     }
//!     Ok(SseRequest {
//!         request,
//!         endpoint,
//!         key,
//!         idle: Duration::from_secs(300),
//!         max_bytes: 64 << 20,
//!         cancel: CancellationToken::new(),
//!         classify: Box::new(|status, _headers, body| {
//!             let text = dsh_llm_http::readable_error(&String::from_utf8_lossy(body));
//!             LlmFailure::new(dsh_llm_http::classify_failure(Some(status), &text), text)
//!         }),
//!         log,
//!     })
//! }
//!
//! // In `Adapter::stream`: one request, read as it arrives.
//! let keys = ApiKeySource::Env("PLAIN_API_KEY".into());
//! let stream: ChunkStream = stream_prepared(prepare(&keys, b"{}".to_vec()), Plain);
//! ```
//!
//! Layers, one file each: `client` prepares the client, the endpoint and the key header;
//! `exchange` sends a request and reads its head; `driver` reads the event stream, which `sse`
//! turns into events; `failure` classifies errors; `secret` holds keys; `request_log` writes
//! the diagnostics.

mod client;
mod driver;
mod exchange;
mod failure;
mod request_log;
mod secret;
pub mod sse;

pub use client::{endpoint_url, http_client, key_header};
pub use driver::{ErrorClassifier, SseRequest, WireTranslator, stream_prepared, stream_sse};
pub use failure::{classify_failure, readable_error, retry_after_ms};
pub use request_log::RequestLog;
pub use secret::{ApiKeySource, Secret};
pub use sse::{SseError, SseEvent, SseParser};
