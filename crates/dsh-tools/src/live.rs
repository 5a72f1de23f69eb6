//! Publishing a running call's work on the live feed (`session/live`, see
//! [`dsh_session::live`]).
//!
//! A tool body that produces output over time (a command) hands its bytes to a
//! [`LiveOutputFeed`]; the feed publishes them as [`LiveUpdate::ToolOutput`]s at most every
//! [`LIVE_INTERVAL`], keeping at most [`LIVE_PENDING_MAX`] bytes waiting (the tail: a flood
//! shows its latest part and says how much it skipped). The first chunk after a quiet spell
//! goes out at once, so `echo tick; sleep 1` shows each tick when it is printed. Batching here,
//! at the producer, keeps every front end's work bounded (about 20 updates a second per
//! running command) whatever the command prints.

use std::sync::Arc;
use std::time::Duration;

use dsh_session::{CallId, LiveNotice, LiveUpdate, SessionLiveFired};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::call_context::ToolCallContext;
use crate::caller::ToolCaller;

/// Live output is published at most this often per call.
pub const LIVE_INTERVAL: Duration = Duration::from_millis(50);
/// Bytes waiting to be published at most; older ones are skipped (counted, not shown).
pub const LIVE_PENDING_MAX: usize = 16 * 1024;

impl ToolCallContext {
    /// Publishes `update` on the calling agent's live feed (nothing when no agent calls).
    pub fn publish_live(&self, update: LiveUpdate) {
        if let Some(caller) = self.caller() {
            publish(caller, update);
        }
    }

    /// A handle that publishes this call's live updates from anywhere and at any time (an MCP
    /// server's progress reports arrive on the client's own task), when an agent calls it.
    pub fn live_publisher(&self) -> Option<LivePublisher> {
        Some(LivePublisher {
            caller: self.caller()?.clone(),
            call_id: self.call_id().clone(),
        })
    }

    /// A batched live feed for this call's output, when an agent calls it inside a tokio
    /// runtime (the feed publishes from a task of its own).
    pub fn live_output(&self) -> Option<LiveOutputFeed> {
        let caller = self.caller()?.clone();
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let shared = Arc::new(Shared::default());
        let call_id = self.call_id().clone();
        let task = runtime.spawn(run(shared.clone(), caller, call_id));
        Some(LiveOutputFeed {
            shared,
            task: Some(task),
        })
    }
}

/// Publishes one call's live updates (see [`ToolCallContext::live_publisher`]).
#[derive(Clone, Debug)]
pub struct LivePublisher {
    caller: ToolCaller,
    call_id: CallId,
}

impl LivePublisher {
    /// The call the updates belong to.
    pub fn call_id(&self) -> &CallId {
        &self.call_id
    }

    /// A progress report: `progress` of `total` (when known), doing `message`.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        publish(
            &self.caller,
            LiveUpdate::ToolProgress {
                call_id: self.call_id.clone(),
                progress,
                total,
                message,
            },
        );
    }
}

fn publish(caller: &ToolCaller, update: LiveUpdate) {
    caller.ctx.emit::<SessionLiveFired>(&LiveNotice {
        session: caller.session.clone(),
        update,
    });
}

#[derive(Default)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    skipped: u64,
    closed: bool,
}

/// The producer's end of a call's live output; see the module documentation. Dropping it
/// without [`finish`](Self::finish) still publishes what is waiting, just without waiting
/// for that.
pub struct LiveOutputFeed {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

/// A cheap handle that feeds bytes into a [`LiveOutputFeed`] from anywhere (an output pump).
#[derive(Clone)]
pub struct LivePusher(Arc<Shared>);

impl LivePusher {
    /// Adds output; never blocks beyond a short lock.
    pub fn push(&self, bytes: &[u8]) {
        {
            let mut pending = self.0.pending.lock();
            pending.bytes.extend_from_slice(bytes);
            let excess = pending.bytes.len().saturating_sub(LIVE_PENDING_MAX);
            if excess > 0 {
                // Keep whole characters: the cut moves past a split one.
                let cut = excess
                    + pending.bytes[excess..]
                        .iter()
                        .take(3)
                        .take_while(|b| **b & 0b1100_0000 == 0b1000_0000)
                        .count();
                pending.bytes.drain(..cut);
                pending.skipped += cut as u64;
            }
        }
        self.0.wake.notify_one();
    }
}

impl LiveOutputFeed {
    /// A handle for the code that reads the output.
    pub fn pusher(&self) -> LivePusher {
        LivePusher(self.shared.clone())
    }

    /// Publishes what is still waiting and stops; every update is out when this returns, so
    /// they all precede the call's result on any listener.
    pub async fn finish(mut self) {
        self.close();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn close(&self) {
        self.shared.pending.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

impl Drop for LiveOutputFeed {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for LiveOutputFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveOutputFeed(..)")
    }
}

/// The publishing task: wakes on output, waits out the interval since its last update, then
/// publishes whole characters (a split one waits for its rest, until the stream closes).
async fn run(shared: Arc<Shared>, caller: ToolCaller, call_id: CallId) {
    let mut last: Option<Instant> = None;
    loop {
        shared.wake.notified().await;
        if let Some(at) = last {
            // Batch until the interval is over, but never make the call's end wait for it:
            // `finish` is awaited before the tool returns, so a close publishes at once (a
            // 50 ms wait there was 50 ms added to every command that printed anything).
            let deadline = at + LIVE_INTERVAL;
            while !shared.pending.lock().closed {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => break,
                    () = shared.wake.notified() => {}
                }
            }
        }
        let (text, skipped, closed) = {
            let mut pending = shared.pending.lock();
            let take = if pending.closed {
                pending.bytes.len()
            } else {
                complete_prefix(&pending.bytes)
            };
            let bytes: Vec<u8> = pending.bytes.drain(..take).collect();
            let skipped = std::mem::take(&mut pending.skipped);
            (
                String::from_utf8_lossy(&bytes).into_owned(),
                skipped,
                pending.closed,
            )
        };
        if !text.is_empty() || skipped > 0 {
            publish(
                &caller,
                LiveUpdate::ToolOutput {
                    call_id: call_id.clone(),
                    text,
                    skipped,
                },
            );
            last = Some(Instant::now());
        }
        if closed {
            return;
        }
    }
}

/// The length of `bytes` without an incomplete UTF-8 sequence at its end (invalid bytes
/// count as complete: they are shown as replacement characters).
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => {
            // An invalid sequence inside; only a trailing incomplete one is held back.
            let tail = bytes.len().saturating_sub(3);
            (tail..bytes.len())
                .find(|&i| {
                    let lead = bytes[i];
                    let need = match lead {
                        0xC0..=0xDF => 2,
                        0xE0..=0xEF => 3,
                        0xF0..=0xF7 => 4,
                        _ => return false,
                    };
                    bytes.len() - i < need
                })
                .unwrap_or(bytes.len())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_split_character_waits_for_its_rest() {
        let snow = "a☃".as_bytes();
        assert_eq!(complete_prefix(snow), 4);
        assert_eq!(complete_prefix(&snow[..3]), 1);
        assert_eq!(complete_prefix(&[b'x', 0xFF, b'y']), 3);
        assert_eq!(complete_prefix(&[0xFF, 0xE2, 0x98]), 1);
    }
}
