//! `dsh sessions show --follow ID`: a session's transcript, then each event a dsh on any
//! machine commits to it, as it is committed (PostgreSQL LISTEN/NOTIFY, see
//! `dsh_store_postgres::PostgresStore::follow`), until interrupted.
//!
//! Reads only: it takes no lease, so it can watch a session another dsh is writing. A lost
//! connection (the server restarted, a network blip) is reconnected, continuing after the last
//! event shown, for up to [`RECONNECT_FOR`].

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use dsh_session::SessionId;
use dsh_store_postgres::{Followed, PostgresStore};
use tokio::sync::mpsc::Receiver;
use tokio::time::Instant;

use crate::render::{Mode, Renderer};
use dsh_harness::Store;

/// Prints the session `reference` names and follows it. Returns when the reader of stdout
/// goes away (a closed pipe is not a failure); a lost connection is an error.
pub async fn follow(store: &Store, reference: &str) -> anyhow::Result<()> {
    let postgres = store.postgres("dsh sessions show --follow")?;
    let id = store.resolve(reference).await?;
    let stored = store.read(&id).await?;
    // Subscribed before anything is printed: events committed from here on are all delivered.
    let mut next = stored.events.len() as u64;
    let mut events = postgres
        .follow(&id, next)
        .await
        .with_context(|| format!("cannot follow session {id}"))?;
    let mut renderer = Renderer::new(Mode::Transcript);
    let mut text = crate::sessions::heading(store, &stored).await;
    for event in &stored.events {
        text.push_str(&renderer.event(event));
    }
    if !emit(&text)? {
        return Ok(());
    }
    loop {
        let lost = match events.recv().await {
            Some(Ok(event)) => {
                next = event.seq + 1;
                if !emit(&renderer.event(&event))? {
                    return Ok(());
                }
                continue;
            }
            Some(Err(e)) => anyhow::Error::new(e),
            None => anyhow::anyhow!("the follower stopped"),
        };
        eprintln!("dsh: following session {id}: {lost:#}; reconnecting");
        events = reconnect(postgres, &id, next)
            .await
            .with_context(|| format!("following session {id} failed: {lost:#}"))?;
    }
}

/// How long a follower keeps trying to get its connection back.
const RECONNECT_FOR: Duration = Duration::from_secs(60);

/// Follows `id` again from `next`, retrying with a growing pause until [`RECONNECT_FOR`] is
/// spent.
async fn reconnect(
    store: &PostgresStore,
    id: &SessionId,
    next: u64,
) -> anyhow::Result<Receiver<Followed>> {
    let deadline = Instant::now() + RECONNECT_FOR;
    let mut pause = Duration::from_millis(100);
    loop {
        match store.follow(id, next).await {
            Ok(events) => return Ok(events),
            Err(e) if Instant::now() + pause >= deadline => {
                return Err(e).context("cannot reconnect to the session database");
            }
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Writes and flushes `text`, so a watcher sees each event as it comes; `false` once the
/// reader has gone away.
fn emit(text: &str) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("cannot write to stdout"),
    }
}
