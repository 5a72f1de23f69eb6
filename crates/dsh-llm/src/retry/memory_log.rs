//! An in-memory [`RetryLog`], for tests and for embedders without a session.

use parking_lot::Mutex;

use super::events::{LlmRetry, LlmRetryStarted};
use super::executor::RetryLog;
use crate::error::BoxError;

/// One record in a [`MemoryRetryLog`].
#[derive(Clone, Debug, PartialEq)]
pub enum RetryLogEntry {
    /// An `llm/retry` record.
    Retry(LlmRetry),
    /// An `llm/retry-started` record.
    Started(LlmRetryStarted),
}

/// A [`RetryLog`] kept in memory, in append order.
#[derive(Debug, Default)]
pub struct MemoryRetryLog {
    entries: Mutex<Vec<RetryLogEntry>>,
}

impl MemoryRetryLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record so far, in append order.
    pub fn entries(&self) -> Vec<RetryLogEntry> {
        self.entries.lock().clone()
    }
}

impl RetryLog for MemoryRetryLog {
    fn previous(
        &self,
        turn: u64,
        step: u64,
        provider: &str,
        policy_key: &str,
    ) -> Option<(String, u32)> {
        self.entries.lock().iter().rev().find_map(|e| match e {
            RetryLogEntry::Retry(r) if r.matches(turn, step, provider, policy_key) => {
                Some((r.retry_id.clone(), r.retry))
            }
            _ => None,
        })
    }

    fn append_retry(&self, retry: &LlmRetry) -> Result<(), BoxError> {
        self.entries
            .lock()
            .push(RetryLogEntry::Retry(retry.clone()));
        Ok(())
    }

    fn append_retry_started(&self, started: &LlmRetryStarted) -> Result<(), BoxError> {
        self.entries
            .lock()
            .push(RetryLogEntry::Started(started.clone()));
        Ok(())
    }
}
