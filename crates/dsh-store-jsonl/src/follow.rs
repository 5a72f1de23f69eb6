//! Following a session file another process writes (`SessionFollow` for the JSONL store).
//!
//! A writer appends whole batches and fsyncs them; nothing signals a reader in another
//! process. The follower looks at the file's length and modification time every
//! [`POLL`] and reads it again only when either changed, handing on the events past the last
//! one it gave. Polling keeps the store free of a file-watching dependency and works on every
//! file system the store works on; a watcher sees an event within a poll interval, which is
//! what a person watching a transcript needs. A torn tail (a batch being written) is left out
//! by the reader and delivered on the next look, once whole.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use dsh_session::{FollowedEvents, PersistenceError, SessionEvent, SessionId};
use futures::StreamExt as _;
use tokio::sync::mpsc;

use crate::load;

/// How often the file is looked at.
pub(crate) const POLL: Duration = Duration::from_millis(150);

/// What says the file may have changed.
type Stamp = (u64, Option<SystemTime>);

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()))
}

/// Follows the session stored at `path` from `from_seq` on.
pub(crate) fn follow(path: PathBuf, id: SessionId, from_seq: u64) -> FollowedEvents {
    let (tx, rx) = mpsc::channel::<Result<SessionEvent, PersistenceError>>(64);
    tokio::spawn(async move {
        let mut next = from_seq;
        let mut seen: Option<Stamp> = None;
        loop {
            if tx.is_closed() {
                return;
            }
            let now = stamp(&path);
            if now.is_some() && now != seen {
                let (file, who) = (path.clone(), id.clone());
                let read = tokio::task::spawn_blocking(move || load::read_file(&file, &who)).await;
                let stored = match read {
                    Ok(Ok(stored)) => stored,
                    Ok(Err(e)) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(crate::store::join_failure(e))).await;
                        return;
                    }
                };
                seen = now;
                for event in stored.events.into_iter().skip(next as usize) {
                    next = event.seq + 1;
                    if tx.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
            }
            tokio::time::sleep(POLL).await;
        }
    });
    tokio_stream_from(rx)
}

/// The receiver as a stream (without pulling in `tokio-stream` for one adapter).
fn tokio_stream_from(rx: mpsc::Receiver<Result<SessionEvent, PersistenceError>>) -> FollowedEvents {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }).boxed()
}
