//! Diagnostics of one model request: with `debug`, a line when it is sent (provider, URL,
//! model, body size), when its head arrives (status, time to head) and when it ends (bytes
//! read, total time, token usage); with `trace`, the request body and each read of the
//! response as text.
//!
//! Headers are never logged (the key travels in one), and every logged body has the key
//! replaced by `***` in case a server or proxy echoes it. Every HTTP adapter logs its
//! requests through it, so `DSH_LOG=debug` reads the same on every route.

use std::time::Instant;

use dsh_llm::{StreamChunk, TokenUsage};

use crate::secret::Secret;

/// The running record of one request, from send to the end of its response.
pub struct RequestLog {
    route: String,
    endpoint: String,
    started: Instant,
    usage: Option<TokenUsage>,
}

impl RequestLog {
    /// Logs a request about to be sent.
    pub fn sent(
        route: &str,
        endpoint: &str,
        model: &str,
        body: &[u8],
        key: Option<&Secret>,
    ) -> Self {
        tracing::debug!(
            provider = route,
            url = endpoint,
            model,
            bytes = body.len(),
            "model request"
        );
        if tracing::enabled!(tracing::Level::TRACE) {
            tracing::trace!(provider = route, body = %redacted(body, key), "model request body");
        }
        Self {
            route: route.to_owned(),
            endpoint: endpoint.to_owned(),
            started: Instant::now(),
            usage: None,
        }
    }

    /// Logs the response head.
    pub fn head(&self, status: u16) {
        tracing::debug!(
            provider = %self.route,
            url = %self.endpoint,
            status,
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            "model response"
        );
    }

    /// Logs a body read (an error body, or a piece of the event stream) at trace.
    pub fn body(&self, bytes: &[u8], key: Option<&Secret>) {
        if tracing::enabled!(tracing::Level::TRACE) {
            tracing::trace!(provider = %self.route, body = %redacted(bytes, key), "model response body");
        }
    }

    /// Notes usage and logs the end of a successful stream.
    pub fn chunk(&mut self, chunk: &StreamChunk, received: u64) {
        match chunk {
            StreamChunk::Usage { usage } => self.usage = Some(usage.clone()),
            StreamChunk::Finish { .. } => {
                let usage = self.usage.as_ref();
                tracing::debug!(
                    provider = %self.route,
                    bytes = received,
                    elapsed_ms = self.started.elapsed().as_millis() as u64,
                    input_tokens = usage.map(|u| u.input_tokens),
                    cached_input_tokens = usage.and_then(|u| u.cache_read_tokens),
                    output_tokens = usage.map(|u| u.output_tokens),
                    reasoning_tokens = usage.and_then(|u| u.reasoning_tokens),
                    "model response done"
                );
            }
            _ => {}
        }
    }

    /// Logs a request that failed (before or during the stream).
    pub fn failed(&self, failure: &dsh_llm::LlmFailure) {
        tracing::debug!(
            provider = %self.route,
            url = %self.endpoint,
            code = %failure.code,
            elapsed_ms = self.started.elapsed().as_millis() as u64,
            "model request failed: {}",
            failure.message
        );
    }
}

fn redacted(bytes: &[u8], key: Option<&Secret>) -> String {
    let text = String::from_utf8_lossy(bytes);
    match key.map(Secret::expose).filter(|k| !k.is_empty()) {
        Some(key) => text.replace(key, "***"),
        None => text.into_owned(),
    }
}
