//! Rebuilding the model requests a log records, from the log alone.
//!
//! The loop logs everything a request carries: the history is derived from surface events and
//! the envelope (configuration with materialized defaults, system prompt, tool schemas) is the
//! latest `request/header`. This module replays a log and returns each dispatched request, so
//! audits and tests can check that what was sent equals what the log says was sent.

use std::sync::Arc;

use dsh_session::{
    EventDraft, EventKind, Message, RequestHeader, Session, SessionHeader, SessionMeta, StreamChunk,
};
use serde_json::Value;

/// One request as reconstructed from a log (its history with the same role-alternating
/// projection the loop applies when it sends).
#[derive(Clone, Debug, PartialEq)]
pub struct RebuiltRequest {
    /// Seq of the first `assistant/chunk` of the attempt (the dispatch point).
    pub at_seq: u64,
    /// The call configuration, as logged.
    pub config: Value,
    /// The system prompt.
    pub system: Option<String>,
    /// The tool schemas, in order.
    pub tools: Vec<Value>,
    /// The history at dispatch.
    pub messages: Vec<Arc<Message>>,
}

/// Replays `events` and returns one [`RebuiltRequest`] per attempt that streamed at least one
/// chunk (an attempt cancelled before its first chunk left no trace of its dispatch).
pub fn rebuild_requests(events: &[Arc<dsh_session::SessionEvent>]) -> Vec<RebuiltRequest> {
    let scratch = match Session::new(
        SessionHeader::new("rebuild".into(), 0, SessionMeta::default()),
        None,
    ) {
        Ok(s) => s,
        Err(_) => return Vec::new(),
    };
    let mut out = Vec::new();
    let mut header: Option<RequestHeader> = None;
    let mut attempt_open = false;
    for event in events {
        match &event.kind {
            EventKind::RequestHeader(h) => header = Some(h.header.clone()),
            EventKind::StepStart(_) => attempt_open = false,
            EventKind::AssistantChunk(c) => {
                if !attempt_open && let Some(h) = &header {
                    out.push(RebuiltRequest {
                        at_seq: event.seq,
                        config: h.config.clone(),
                        system: h.system.clone(),
                        tools: h.tools.clone().unwrap_or_default(),
                        messages: crate::alternate::alternate_roles(scratch.derive_messages()),
                    });
                }
                attempt_open = !matches!(c.chunk, StreamChunk::Finish { .. });
            }
            _ => {}
        }
        let draft = EventDraft {
            kind: event.kind.clone(),
            ignorable: event.ignorable,
            source_event_seqs: event.source_event_seqs.clone(),
            surface_op: event.surface_op,
        };
        // A log the session accepted replays; should one event not, stop rather than guess.
        if scratch.append_draft(draft).is_err() {
            break;
        }
    }
    out
}
