//! `dsh sessions show --follow ID`: a session's transcript, then each event a dsh on any
//! machine commits to it, as it is committed (PostgreSQL LISTEN/NOTIFY, see
//! `dsh_store_postgres::PostgresStore::follow`), until interrupted.
//!
//! Reads only: it takes no lease, so it can watch a session another dsh is writing.

use std::io::Write as _;

use anyhow::Context as _;

use crate::render::{Mode, Renderer};
use crate::store::Store;

/// Prints the session `reference` names and follows it. Returns when the reader of stdout
/// goes away (a closed pipe is not a failure); a lost connection is an error.
pub async fn follow(store: &Store, reference: &str) -> anyhow::Result<()> {
    let postgres = store.postgres("dsh sessions show --follow")?;
    let id = crate::session_ref::resolve(store, reference).await?;
    let stored = store.read(&id).await?;
    // Subscribed before anything is printed: events committed from here on are all delivered.
    let mut events = postgres
        .follow(&id, stored.events.len() as u64)
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
    while let Some(event) = events.recv().await {
        let event = event.with_context(|| format!("following session {id} failed"))?;
        if !emit(&renderer.event(&event))? {
            return Ok(());
        }
    }
    Ok(())
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
