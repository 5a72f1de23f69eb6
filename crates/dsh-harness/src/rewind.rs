//! Rewinding, diffing and pruning stored sessions, for `dsh sessions rewind | diff | prune`.
//!
//! These need no provider, no key and no agent: a stored session is loaded (repaired, and
//! held with its writer lock, so a session live in another dsh is refused), the rewind's
//! events are appended and made durable, and the session is let go. A live session in this
//! process (the chat's `/rewind`, an editor's) is rewound through [`crate::Harness::checkpoints`]
//! instead.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_checkpoint::{
    CheckpointConfig, Checkpoints, FileDiff, PruneReport, RewindReport, RewindRequest, referenced,
    store::store_dir,
};
use dsh_kernel::Context;
use dsh_session::{Persistence, SessionStore};

use crate::config::Settings;
use crate::error::HarnessError;
use crate::store::Store;

/// The checkpoint configuration `settings` describe.
pub(crate) fn checkpoint_config(settings: &Settings) -> CheckpointConfig {
    let mut config = CheckpointConfig::new(settings.checkpoints_root());
    config.max_file_bytes = settings.checkpoints.max_file_bytes;
    config
}

fn failed(what: &str, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::store_message(format!("{what}: {e}"))
}

/// Rewinds the stored session `reference` names (`dsh sessions rewind`).
pub async fn rewind_stored(
    settings: &Settings,
    store: &Store,
    reference: &str,
    request: RewindRequest,
) -> Result<RewindReport, HarnessError> {
    let id = store.resolve(reference).await?;
    let ctx = Context::new();
    let persistence = store.mount(&ctx).await?;
    let sessions = SessionStore::new(&ctx);
    let persistence_seam: Arc<dyn Persistence> = match store {
        Store::Jsonl(s) => s.clone(),
        Store::Postgres(s) => s.clone(),
    };
    let service = Checkpoints::new(
        checkpoint_config(settings),
        Some(sessions.clone()),
        Some(persistence_seam),
    );
    let result = async {
        let stored = store.load(&id).await?;
        let session = sessions
            .prepare_loaded(stored.header, stored.events)
            .map_err(|e| failed("cannot open the session", e))?;
        let detach = sessions
            .enter(&session, None)
            .map_err(|e| failed("cannot open the session", e))?;
        sessions
            .announce(&session)
            .map_err(|e| failed("cannot open the session", e))?;
        let outcome = service.rewind(&session, request).await;
        // The end-of-seed marker and anything the rewind appended are durable before the
        // session is let go, whatever the outcome.
        let flushed = sessions.flush(&session).await;
        detach.detach();
        let report = outcome.map_err(HarnessError::Checkpoint)?;
        flushed.map_err(|e| failed("cannot store the rewind", e))?;
        Ok(report)
    }
    .await;
    if let Err(e) = store.close().await {
        tracing::error!(error = %e, "draining the session file failed");
    }
    persistence.dispose().await;
    result
}

/// What turn `turn` of the stored session `reference` changed (`dsh sessions diff`).
pub async fn diff_stored(
    settings: &Settings,
    store: &Store,
    reference: &str,
    turn: u64,
) -> Result<Vec<FileDiff>, HarnessError> {
    let id = store.resolve(reference).await?;
    let stored = store.read(&id).await?;
    let workspace = dsh_session::SessionRerooted::latest(stored.events.iter())
        .or_else(|| stored.header.cwd.clone())
        .ok_or_else(|| {
            failed(
                "cannot diff",
                format!("session {id} has no working directory"),
            )
        })?;
    let events = stored.events.into_iter().map(Arc::new).collect();
    Checkpoints::new(checkpoint_config(settings), None, None)
        .diff(&workspace, events, turn)
        .await
        .map_err(HarnessError::Checkpoint)
}

/// Deletes the checkpoints no stored session refers to (`dsh sessions prune`).
pub async fn prune_checkpoints(
    settings: &Settings,
    store: &Store,
) -> Result<PruneReport, HarnessError> {
    let root = settings.checkpoints_root();
    let mut refs: HashMap<PathBuf, Vec<dsh_checkpoint::store::ObjectId>> = HashMap::new();
    for listing in store.listings().await? {
        let Some(cwd) = listing.header.cwd.clone() else {
            continue;
        };
        // A session that cannot be read keeps its workspace's store whole: nothing it might
        // refer to is deleted.
        // A session moved with `--cwd` has checkpoints in each directory it worked in.
        let mut dirs = vec![cwd];
        let ids = match store.read(&listing.header.id).await {
            Ok(stored) => {
                dirs.extend(
                    stored
                        .events
                        .iter()
                        .filter_map(dsh_session::SessionRerooted::of)
                        .map(|moved| moved.cwd),
                );
                let events: Vec<_> = stored.events.into_iter().map(Arc::new).collect();
                referenced(&events)
            }
            Err(e) => {
                tracing::warn!(session = %listing.header.id, error = %e, "keeping its checkpoints");
                return Err(failed("cannot read every session; nothing was pruned", e));
            }
        };
        for dir in dirs {
            refs.entry(store_dir(&root, &dir))
                .or_default()
                .extend(ids.iter().cloned());
        }
    }
    tokio::task::spawn_blocking(move || {
        dsh_checkpoint::prune(&root, &refs, dsh_checkpoint::prune::GRACE)
    })
    .await
    .map_err(|e| failed("prune failed", e))?
    .map_err(HarnessError::Checkpoint)
}
