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
