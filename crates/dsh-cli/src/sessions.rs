//! `dsh sessions list | show | fork | import | export | rewind | diff | prune`: stored
//! sessions, read straight from the configured store (JSONL files or PostgreSQL, see `store`).
//!
//! These commands need no agent, no provider and no key: they open the store and nothing
//! else.

use std::fmt::Write as _;

use anyhow::Context as _;
use dsh_checkpoint::{FileDiff, PruneReport, RewindMode, RewindRequest};
use dsh_session::StoredSession;

use dsh_harness::config::{ConfigError, Overrides, Settings};
use dsh_harness::{SessionReference, Store};

use crate::render::{Mode, Renderer, one_line};

/// `dsh sessions list`: one row per stored session, most recently active first.
pub async fn list(store: &Store) -> anyhow::Result<String> {
    list_where(store, None, None).await
}

/// `dsh sessions list [--cwd DIR] [--origin top|subagent]`: [`list`], filtered.
pub async fn list_where(
    store: &Store,
    cwd: Option<&std::path::Path>,
    origin: Option<crate::cli::OriginFilter>,
) -> anyhow::Result<String> {
    let listings = store
        .listings_where(cwd, origin.map(Into::into))
        .await
        .context("cannot list sessions")?;
    let mut out = String::new();
    if listings.is_empty() {
        let _ = writeln!(out, "no sessions in {}", store.describe());
        return Ok(out);
    }
    let _ = writeln!(
        out,
        "{:<44}  {:<16}  {:>5}  {:<30}  FIRST PROMPT",
        "ID", "LAST ACTIVITY", "TURNS", "CWD"
    );
    for l in listings {
        // The listing reads the turn count from the log's tail; only when that is not cheap
        // (a huge last turn) is the whole log scanned.
        let turns = match l.turns {
            Some(n) => n.to_string(),
            None => match store.summary(&l.header.id).await {
                Ok(s) => s.turns.to_string(),
                Err(_) => "?".to_owned(),
            },
        };
        let cwd = l
            .header
            .cwd
            .as_ref()
            .map_or_else(|| "-".to_owned(), |p| p.display().to_string());
        let prompt = l
            .first_prompt
            .as_deref()
            .map(|p| one_line(p, 60))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<44}  {:<16}  {:>5}  {:<30}  {}",
            l.header.id,
            format_time(l.last_activity),
            turns,
            cwd,
            prompt
        );
    }
    Ok(out)
}

/// `dsh sessions show ID`: a readable transcript of the session as it is on disk. It neither
/// repairs nor locks the file, so a session running in another dsh can be watched; a last turn
/// without its end is shown as such.
pub async fn show(store: &Store, id: &str) -> anyhow::Result<String> {
    let id = store.resolve(id).await?;
    let stored = store.read(&id).await?;
    let mut out = heading(store, &stored).await;
    let mut renderer = Renderer::new(Mode::Transcript);
    for event in &stored.events {
        out.push_str(&renderer.event(event));
    }
    out.push_str(&renderer.finish_line());
    if !dsh_session::interrupted_turn_closers(&stored.events).is_empty() {
        out.push_str(
            "── the last turn has not ended: it is still running, or dsh stopped during it \
             (resuming the session closes it)\n",
        );
    }
    Ok(out)
}

/// The lines `show` prints above a session's transcript: its id, cwd, creation, parent and
/// where it is stored.
pub async fn heading(store: &Store, stored: &StoredSession) -> String {
    let mut out = String::new();
    let h = &stored.header;
    let _ = writeln!(out, "session {}", h.id);
    if let Some(cwd) = &h.cwd {
        let _ = writeln!(out, "cwd     {}", cwd.display());
    }
    let _ = writeln!(out, "created {}", format_time(h.created_at));
    if let Some(parent) = &h.parent_session {
        let seed = h
            .seed_length
            .map(|n| format!(" ({n} events)"))
            .unwrap_or_default();
        let _ = writeln!(out, "forked from {parent}{seed}");
    }
    match store {
        Store::Jsonl(_) => {
            if let Ok(dsh_session::persistence::SessionLocation::File(path)) =
                store.locate(&h.id).await
            {
                let _ = writeln!(out, "file    {}", path.display());
            }
        }
        Store::Postgres(_) => {
            let _ = writeln!(out, "store   {}", store.describe());
        }
    }
    out
}

/// `dsh sessions fork ID [--at SEQ]`: returns the new session's id.
pub async fn fork(store: &Store, id: &str, at: Option<u64>) -> anyhow::Result<String> {
    let source = store.resolve(id).await?;
    let header = store.fork(&source, at, None).await?;
    Ok(header.id.to_string())
}

/// Runs a `sessions` subcommand against the store of `settings`; returns the exit status.
pub fn main(
    settings: Result<Settings, ConfigError>,
    flags: Overrides,
    command: &crate::cli::SessionsCommand,
    plain: bool,
) -> i32 {
    use crate::cli::SessionsCommand as C;
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dsh: {e}");
            return 1;
        }
    };
    if let C::Resume { id } = command {
        let reference = SessionReference::Resume(id.clone());
        return crate::tui::interactive(settings, flags, None, reference, plain);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let store = match Store::open(&settings) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("dsh: {e:#}");
            return 1;
        }
    };
    let result = runtime.block_on(async {
        match command {
            C::List { cwd, origin } => list_where(&store, cwd.as_deref(), *origin).await,
            C::Show { id, follow: false } => show(&store, id).await,
            C::Show { id, follow: true } => crate::follow::follow(&store, id)
                .await
                .map(|()| String::new()),
            C::Import {
                sources,
                all: false,
            } => crate::transfer::import(&store, &settings, sources).await,
            C::Import { all: true, .. } => crate::transfer::import_all(&store, &settings).await,
            C::Export { id, out } => {
                crate::transfer::export(&store, &settings, id, out.as_deref()).await
            }
            C::Fork { id, at } => fork(&store, id, *at).await.map(|id| format!("{id}\n")),
            C::Rewind {
                id,
                to_turn,
                files_only,
                conversation_only,
                force,
            } => {
                let mode = match (files_only, conversation_only) {
                    (true, _) => RewindMode::FilesOnly,
                    (_, true) => RewindMode::ConversationOnly,
                    _ => RewindMode::Both,
                };
                let request = RewindRequest {
                    to_turn: *to_turn,
                    mode,
                    force: *force,
                };
                dsh_harness::rewind_stored(&settings, &store, id, request)
                    .await
                    .map(|report| report.describe(*to_turn))
                    .map_err(anyhow::Error::from)
            }
            C::Diff { id, turn } => dsh_harness::diff_stored(&settings, &store, id, *turn)
                .await
                .map(|diffs| describe_diff(*turn, &diffs))
                .map_err(anyhow::Error::from),
            C::Prune => dsh_harness::prune_checkpoints(&settings, &store)
                .await
                .map(|r| describe_prune(&r))
                .map_err(anyhow::Error::from),
            C::Resume { .. } => Ok(String::new()),
        }
    });
    match result {
        Ok(text) => crate::print_out(&text),
        Err(e) => {
            eprintln!("dsh: {e:#}");
            1
        }
    }
}

fn describe_diff(turn: u64, diffs: &[FileDiff]) -> String {
    if diffs.is_empty() {
        return format!("turn {turn} changed no file\n");
    }
    diffs.iter().map(|d| d.diff.clone()).collect()
}

fn describe_prune(report: &PruneReport) -> String {
    let mut out = format!(
        "removed {} checkpoint store(s) and {} object(s), {} bytes freed\n",
        report.removed_stores.len(),
        report.removed_objects,
        report.freed_bytes
    );
    for busy in &report.busy {
        let _ = writeln!(out, "skipped (in use): {}", busy.display());
    }
    out
}

/// `YYYY-MM-DD HH:MM` (UTC) for epoch milliseconds.
pub fn format_time(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || "?".to_owned(),
            |t| t.format("%Y-%m-%d %H:%M").to_string(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_utc_minutes() {
        assert_eq!(format_time(0), "1970-01-01 00:00");
        assert_eq!(format_time(1_700_000_000_000), "2023-11-14 22:13");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00");
    }
}
