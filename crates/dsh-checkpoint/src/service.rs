//! The [`Checkpoints`] service: record, rewind, diff and list, per workspace.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_session::{EventKind, Persistence, Rewind, Session, SessionEvent, SessionId, SessionStore};
use gix::ObjectId;
use parking_lot::Mutex;

use crate::cache::StatCache;
use crate::error::CheckpointError;
use crate::events::{At, CREATED, Created, RESTORED, Restored};
use crate::path::RelPath;
use crate::restore::{Applied, Fault, Journal, apply};
use crate::snapshot::{Limits, Skipped, Snapshot, decode_skipped, encode_skipped, record};
use crate::store::{Flat, ShadowStore};
use crate::timeline::{MarkKind, last_mark, marks, spans, turn_last, turn_start};

/// Default size cap: files larger than this are not checkpointed.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Default file-count cap: a larger workspace is not checkpointed.
pub const DEFAULT_MAX_FILES: usize = 100_000;

/// How checkpoints are taken.
#[derive(Clone, Debug)]
pub struct CheckpointConfig {
    /// Where the stores live (`$DSH_HOME/checkpoints`).
    pub root: PathBuf,
    /// Files larger than this are left out (and named).
    pub max_file_bytes: u64,
    /// A workspace with more files than this is not checkpointed.
    pub max_files: usize,
}

impl CheckpointConfig {
    /// Stores under `root` with the default size cap.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// What to put back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RewindMode {
    /// Files and conversation.
    #[default]
    Both,
    /// Only the workspace's files.
    FilesOnly,
    /// Only the conversation.
    ConversationOnly,
}

impl RewindMode {
    fn files(self) -> bool {
        self != Self::ConversationOnly
    }
    fn conversation(self) -> bool {
        self != Self::FilesOnly
    }
}

/// A rewind a person asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RewindRequest {
    /// Back to the start of this turn.
    pub to_turn: u64,
    /// What to put back.
    pub mode: RewindMode,
    /// Overwrite files someone else changed too.
    pub force: bool,
}

/// What a rewind did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RewindReport {
    /// Files written, created or removed.
    pub changed: Vec<String>,
    /// Files left as they are, with why (not checkpointed, changed meanwhile, behind a
    /// symbolic link).
    pub left: Vec<String>,
    /// Whether the conversation went back.
    pub conversation: bool,
}

/// What a rewind would do, decided before anything is written.
#[derive(Clone, Debug)]
struct Plan {
    target: Snapshot,
    now: Snapshot,
    restore: BTreeSet<RelPath>,
    changed_since: Vec<RelPath>,
    conflicts: Vec<RelPath>,
    left: Vec<String>,
}

/// One turn as the rewind picker shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnSummary {
    /// The turn.
    pub turn: u64,
    /// What the person asked (its first prompt), on one line.
    pub prompt: String,
    /// How many files the turn changed, when it has checkpoints.
    pub changed_files: Option<usize>,
}

/// One file's change in a turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileDiff {
    /// The path.
    pub path: String,
    /// A unified diff (or a line saying what changed when the content is not text).
    pub diff: String,
}

/// The per-workspace state kept between checkpoints.
struct Workspace {
    root: PathBuf,
    /// Opened for each operation on its blocking thread: a gix repository is not `Send`.
    store: ShadowStore,
    cache: StatCache,
    last: Option<Snapshot>,
    generation: Option<Vec<u8>>,
}

/// What is kept of a workspace between operations (everything but the repository).
#[derive(Default)]
struct Kept {
    cache: StatCache,
    last: Option<Snapshot>,
    generation: Option<Vec<u8>>,
}

/// The file prune bumps so that processes drop their caches (the blobs they name may be gone).
pub const GENERATION_FILE: &str = "dsh-generation";

impl Workspace {
    /// Drops cached state when a prune ran since it was read.
    fn refresh(&mut self) {
        let generation = std::fs::read(self.store.dir().join(GENERATION_FILE)).ok();
        if generation != self.generation {
            self.cache = StatCache::load(self.store.dir());
            self.last = None;
            self.generation = generation;
        }
    }

    fn snapshot(&mut self, limits: Limits) -> Result<Snapshot, CheckpointError> {
        let snapshot = record(
            &self.store,
            &mut self.cache,
            &self.root,
            limits,
            self.last.as_ref(),
        )?;
        if self.cache.worth_saving() {
            // Only a cache: failing to save it costs a rehash next time, nothing else.
            if let Err(e) = self.cache.save(self.store.dir()) {
                tracing::debug!(error = %e, "checkpoint cache not saved");
            }
        }
        self.last = Some(snapshot.clone());
        Ok(snapshot)
    }

    fn skipped_blob(&self, skipped: &[Skipped]) -> Result<Option<ObjectId>, CheckpointError> {
        if skipped.is_empty() {
            return Ok(None);
        }
        self.store.write_blob(&encode_skipped(skipped)).map(Some)
    }

    fn skipped_of(&self, blob: Option<ObjectId>) -> Vec<Skipped> {
        blob.and_then(|b| self.store.read_blob(b).ok())
            .map(|bytes| decode_skipped(&bytes))
            .unwrap_or_default()
    }
}

/// Checkpoints of every workspace this process works in.
pub struct Checkpoints {
    config: CheckpointConfig,
    workspaces: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Option<Kept>>>>>,
    sessions: Option<Arc<SessionStore>>,
    persistence: Option<Arc<dyn Persistence>>,
    fault: Option<Fault>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Checkpoints {
    /// A service storing under `config.root`. `sessions` flushes the rewind's events and,
    /// with `persistence`, tells recovery whether a crashed rewind was committed.
    pub fn new(
        config: CheckpointConfig,
        sessions: Option<Arc<SessionStore>>,
        persistence: Option<Arc<dyn Persistence>>,
    ) -> Self {
        Self {
            config,
            workspaces: Mutex::new(HashMap::new()),
            sessions,
            persistence,
            fault: None,
        }
    }

    /// The same service with a crash seam in its restores (tests).
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &CheckpointConfig {
        &self.config
    }

    fn limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.config.max_file_bytes,
            max_files: self.config.max_files,
            // The store's home (`$DSH_HOME`, holding sessions and checkpoints) changes under
            // every turn; it is never part of a workspace's checkpoint.
            exclude: self
                .config
                .root
                .parent()
                .map(Path::to_path_buf)
                .into_iter()
                .chain(std::iter::once(self.config.root.clone()))
                .collect(),
        }
    }

    /// Runs `f` on `workspace`'s state on a blocking thread, holding the process-wide and the
    /// inter-process lock of its store.
    async fn with_workspace<T: Send + 'static>(
        &self,
        workspace: &Path,
        f: impl FnOnce(&mut Workspace) -> Result<T, CheckpointError> + Send + 'static,
    ) -> Result<T, CheckpointError> {
        let slot = self
            .workspaces
            .lock()
            .entry(workspace.to_path_buf())
            .or_default()
            .clone();
        let mut guard = slot.lock_owned().await;
        let root = self.config.root.clone();
        let workspace = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let kept = guard.take().unwrap_or_else(|| Kept {
                generation: Some(b"unread".to_vec()),
                ..Kept::default()
            });
            let store = ShadowStore::open(&root, &workspace)?;
            let mut ws = Workspace {
                root: workspace,
                store,
                cache: kept.cache,
                last: kept.last,
                generation: kept.generation,
            };
            let result = {
                let _lock = ws.store.lock()?;
                ws.refresh();
                f(&mut ws)
            };
            *guard = Some(Kept {
                cache: ws.cache,
                last: ws.last,
                generation: ws.generation,
            });
            result
        })
        .await
        .map_err(|e| {
            CheckpointError::io(
                "a checkpoint thread failed",
                std::io::Error::other(e.to_string()),
            )
        })?
    }

    /// Records the workspace now, without a session event (benchmarks, tests).
    pub async fn snapshot(&self, workspace: &Path) -> Result<Snapshot, CheckpointError> {
        let limits = self.limits();
        self.with_workspace(workspace, move |ws| ws.snapshot(limits))
            .await
    }

    /// Records `session`'s workspace and appends `checkpoint/created`. A step or end
    /// checkpoint identical to the session's last one is not recorded again. Returns the
    /// event's payload when one was appended.
    pub async fn checkpoint(
        &self,
        session: &Arc<Session>,
        turn: u64,
        step: u64,
        at: At,
    ) -> Result<Option<Created>, CheckpointError> {
        let created = self.record(session, turn, step, at).await?;
        if let Some(c) = &created {
            self.publish(session, c)?;
        }
        Ok(created)
    }

    /// Appends the `checkpoint/created` event of a checkpoint [`record`](Self::record)ed
    /// earlier.
    pub fn publish(&self, session: &Session, created: &Created) -> Result<(), CheckpointError> {
        session
            .append_plugin(CREATED, created)
            .map(|_| ())
            .map_err(|e| CheckpointError::Session(e.to_string()))
    }

    /// The first half of [`checkpoint`](Self::checkpoint): records the workspace in the store
    /// and returns the event to append, without appending it (`None`: a step or end
    /// checkpoint identical to the session's last). The turn's checkpoint is recorded beside
    /// the turn's first request and published when the turn first needs it: appending it
    /// while that request's flush runs would make the flush write and sync once more.
    pub async fn record(
        &self,
        session: &Arc<Session>,
        turn: u64,
        step: u64,
        at: At,
    ) -> Result<Option<Created>, CheckpointError> {
        let workspace = workspace_of(session)?;
        self.recover(&workspace).await?;
        let last = session.with_events(|e| last_mark(e).map(|m| m.tree));
        let limits = self.limits();
        let created = self
            .with_workspace(&workspace, move |ws| {
                let snap = ws.snapshot(limits)?;
                if at != At::Turn && last == Some(snap.tree) {
                    return Ok(None);
                }
                let skipped = ws.skipped_blob(&snap.skipped)?;
                Ok(Some(Created {
                    turn,
                    step,
                    at,
                    tree: snap.tree.to_string(),
                    skipped: skipped.map(|b| b.to_string()),
                    skipped_count: snap.skipped.len() as u64,
                }))
            })
            .await?;
        Ok(created)
    }

    /// Rewinds `session` to the start of `request.to_turn`: its files (what the session
    /// changed since, and only that) and its conversation, as the mode says. Refuses, writing
    /// nothing, when files changed since the session's last checkpoint or someone else changed
    /// a file the session changed too, unless `force`.
    pub async fn rewind(
        &self,
        session: &Arc<Session>,
        request: RewindRequest,
    ) -> Result<RewindReport, CheckpointError> {
        if session.open_turn().is_some() {
            return Err(CheckpointError::Busy(session.id().to_string()));
        }
        if !session.history_turns().contains(&request.to_turn) {
            return Err(CheckpointError::NoCheckpoint {
                turn: request.to_turn,
                reason: "the turn is not part of the session's history".into(),
            });
        }
        let mut report = RewindReport {
            conversation: request.mode.conversation(),
            ..RewindReport::default()
        };
        if !request.mode.files() {
            self.append_rewind(session, None, request).await?;
            return Ok(report);
        }
        let workspace = workspace_of(session)?;
        self.recover(&workspace).await?;
        let events = session.events();
        let limits = self.limits();
        let plan = self
            .with_workspace(&workspace, move |ws| {
                plan(ws, &events, request.to_turn, limits)
            })
            .await?;
        if !request.force && (!plan.changed_since.is_empty() || !plan.conflicts.is_empty()) {
            return Err(CheckpointError::Refused {
                changed_since: plan
                    .changed_since
                    .iter()
                    .map(|p| crate::path::display(p))
                    .collect(),
                conflicts: plan
                    .conflicts
                    .iter()
                    .map(|p| crate::path::display(p))
                    .collect(),
            });
        }
        report.left = plan.left.clone();
        let id = uuid::Uuid::new_v4().to_string();
        let session_id = session.id().to_string();
        let restored = {
            let plan = plan.clone();
            let id = id.clone();
            self.with_workspace(&workspace, move |ws| {
                let mut after: Flat = (*plan.now.flat).clone();
                for p in &plan.restore {
                    match plan.target.flat.get(p) {
                        Some(leaf) => after.insert(p.clone(), *leaf),
                        None => after.remove(p),
                    };
                }
                let tree = ws.store.build(&after)?;
                let skipped = ws.skipped_blob(&plan.now.skipped)?;
                Journal::new(
                    id.clone(),
                    session_id,
                    plan.now.tree.to_string(),
                    plan.target.tree.to_string(),
                    &plan.restore,
                )
                .save(ws.store.dir())?;
                Ok(Restored {
                    id,
                    to_turn: request.to_turn,
                    before: plan.now.tree.to_string(),
                    tree: tree.to_string(),
                    skipped: skipped.map(|b| b.to_string()),
                    count: plan.restore.len() as u64,
                })
            })
            .await?
        };
        // The commit point: once these events are durable the restore will complete, now or
        // by recovery.
        self.append_rewind(session, Some(&restored), request)
            .await?;
        let fault = self.fault.clone();
        let applied = self
            .with_workspace(&workspace, move |ws| {
                let paths: Vec<RelPath> = plan.restore.iter().cloned().collect();
                let applied = apply(
                    &ws.store,
                    &ws.root,
                    &paths,
                    &plan.target.flat,
                    &plan.now.flat,
                    fault.as_ref(),
                )?;
                Journal::remove(ws.store.dir())?;
                Ok(applied)
            })
            .await?;
        report.changed = applied
            .changed
            .iter()
            .map(|p| crate::path::display(p))
            .collect();
        report.left.extend(describe_left(&applied));
        Ok(report)
    }

    async fn append_rewind(
        &self,
        session: &Arc<Session>,
        restored: Option<&Restored>,
        request: RewindRequest,
    ) -> Result<(), CheckpointError> {
        if let Some(r) = restored {
            session
                .append_plugin(RESTORED, r)
                .map_err(|e| CheckpointError::Session(e.to_string()))?;
        }
        if request.mode.conversation() {
            session
                .append(EventKind::Rewind(Rewind {
                    to_turn: request.to_turn,
                }))
                .map_err(|e| CheckpointError::Session(e.to_string()))?;
        }
        if let Some(sessions) = &self.sessions
            && session.is_attached()
        {
            sessions
                .flush(session)
                .await
                .map_err(|e| CheckpointError::Session(e.to_string()))?;
        }
        Ok(())
    }

    /// Completes or drops a rewind that a crash interrupted in `workspace`: completed when its
    /// session recorded it (the commit point was passed), dropped otherwise. When nobody can
    /// say yet (the session is busy in another process) the journal stays for later.
    pub async fn recover(&self, workspace: &Path) -> Result<Option<Applied>, CheckpointError> {
        let dir = crate::store::store_dir(&self.config.root, workspace);
        let Ok(Some(journal)) = Journal::load(&dir) else {
            return Ok(None);
        };
        let Some(committed) = self.committed(&journal).await else {
            tracing::warn!(journal = %dir.display(), "an interrupted rewind cannot be settled yet");
            return Ok(None);
        };
        self.with_workspace(workspace, move |ws| {
            // Another task may have settled it while this one waited for the lock.
            let Some(journal) = Journal::load(ws.store.dir())? else {
                return Ok(None);
            };
            if !committed {
                Journal::remove(ws.store.dir())?;
                return Ok(None);
            }
            let (Some(before), Some(target)) = (
                crate::events::oid(&journal.before),
                crate::events::oid(&journal.target),
            ) else {
                return Err(CheckpointError::store(
                    ws.store.dir(),
                    "the rewind journal names no trees",
                ));
            };
            let (before, target) = (ws.store.flatten(before)?, ws.store.flatten(target)?);
            let applied = apply(
                &ws.store,
                &ws.root,
                &journal.paths(),
                &target,
                &before,
                None,
            )?;
            Journal::remove(ws.store.dir())?;
            ws.last = None;
            tracing::info!(
                changed = applied.changed.len(),
                "completed an interrupted rewind"
            );
            Ok(Some(applied))
        })
        .await
    }

    /// Whether the journal's rewind is in its session's log; `None` when that cannot be read.
    async fn committed(&self, journal: &Journal) -> Option<bool> {
        let id = SessionId::new(journal.session.clone());
        let has = |events: &[Arc<SessionEvent>]| {
            marks(events)
                .iter()
                .any(|m| matches!(&m.kind, MarkKind::Restore { id, .. } if *id == journal.id))
        };
        if let Some(live) = self.sessions.as_ref().and_then(|s| s.get(&id)) {
            return Some(live.with_events(has));
        }
        let stored = self.persistence.as_ref()?.load(&id).await;
        match stored {
            Ok(stored) => {
                let events: Vec<Arc<SessionEvent>> =
                    stored.events.into_iter().map(Arc::new).collect();
                Some(has(&events))
            }
            Err(dsh_session::PersistenceError::NotFound { .. }) => Some(false),
            Err(_) => None,
        }
    }

    /// The turns of `session`'s history with their first prompts and how many files each
    /// changed (for the rewind picker).
    pub async fn turns(&self, session: &Arc<Session>) -> Vec<TurnSummary> {
        let events = session.events();
        let history = session.history_turns();
        let prompts = prompts(&events);
        let counts = match workspace_of(session) {
            Ok(workspace) => {
                let events = events.clone();
                let turns = history.clone();
                self.with_workspace(&workspace, move |ws| {
                    let marks = marks(&events);
                    Ok(turns
                        .iter()
                        .map(|t| {
                            let (Some(a), Some(b)) =
                                (turn_start(&marks, *t), turn_last(&marks, *t))
                            else {
                                return None;
                            };
                            ws.store
                                .changed(marks[a].tree, marks[b].tree)
                                .ok()
                                .map(|c| c.len())
                        })
                        .collect::<Vec<_>>())
                })
                .await
                .unwrap_or_else(|_| vec![None; history.len()])
            }
            Err(_) => vec![None; history.len()],
        };
        history
            .into_iter()
            .zip(counts)
            .map(|(turn, changed_files)| TurnSummary {
                turn,
                prompt: prompts.get(&turn).cloned().unwrap_or_default(),
                changed_files,
            })
            .collect()
    }

    /// What turn `turn` of `events` changed in `workspace`: a unified diff per file, from its
    /// first checkpoint to its last.
    pub async fn diff(
        &self,
        workspace: &Path,
        events: Vec<Arc<SessionEvent>>,
        turn: u64,
    ) -> Result<Vec<FileDiff>, CheckpointError> {
        self.with_workspace(workspace, move |ws| {
            let marks = marks(&events);
            let (Some(a), Some(b)) = (turn_start(&marks, turn), turn_last(&marks, turn)) else {
                return Err(CheckpointError::NoCheckpoint {
                    turn,
                    reason: "no checkpoint was recorded for it".into(),
                });
            };
            let (from, to) = (marks[a].tree, marks[b].tree);
            let (fa, fb) = (ws.store.flatten(from)?, ws.store.flatten(to)?);
            let mut out = Vec::new();
            for path in ws.store.changed(from, to)? {
                let read = |flat: &Flat| -> Result<
                    Option<(gix::objs::tree::EntryKind, Vec<u8>)>,
                    CheckpointError,
                > {
                    flat.get(&path)
                        .map(|l| ws.store.read_blob(l.oid).map(|b| (l.kind, b)))
                        .transpose()
                };
                let diff = crate::diff::unified(&path, read(&fa)?, read(&fb)?);
                out.push(FileDiff {
                    path: crate::path::display(&path),
                    diff,
                });
            }
            Ok(out)
        })
        .await
    }
}

/// The session's working directory.
pub fn workspace_of(session: &Session) -> Result<PathBuf, CheckpointError> {
    session
        .cwd()
        .ok_or_else(|| CheckpointError::NoWorkspace(session.id().to_string()))
}

/// The first prompt of each turn, on one line.
fn prompts(events: &[Arc<SessionEvent>]) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let mut turn = None;
    for e in events {
        match &e.kind {
            EventKind::TurnStart(t) => turn = Some(t.turn),
            EventKind::UserMessage(m) if m.source == dsh_session::MessageSource::User => {
                if let Some(t) = turn {
                    out.entry(t).or_insert_with(|| {
                        let text = m.text();
                        text.lines()
                            .next()
                            .unwrap_or_default()
                            .chars()
                            .take(80)
                            .collect()
                    });
                }
            }
            _ => {}
        }
    }
    out
}

fn describe_left(applied: &Applied) -> Vec<String> {
    applied
        .left
        .iter()
        .map(|(p, why)| format!("{} ({why})", crate::path::display(p)))
        .collect()
}

/// Decides what a rewind of `events` to `turn` would do in `ws`.
fn plan(
    ws: &mut Workspace,
    events: &[Arc<SessionEvent>],
    turn: u64,
    limits: Limits,
) -> Result<Plan, CheckpointError> {
    let marks = marks(events);
    let Some(start) = turn_start(&marks, turn) else {
        return Err(CheckpointError::NoCheckpoint {
            turn,
            reason: "no checkpoint was recorded when it started (checkpoints were off, or the \
                     session predates them); --conversation-only still rewinds the conversation"
                .into(),
        });
    };
    let now = ws.snapshot(limits)?;
    let last = marks.last().map_or(now.tree, |m| m.tree);
    let mut by_session = BTreeSet::new();
    let mut by_others = BTreeSet::new();
    for span in spans(&marks, start) {
        let changed = ws.store.changed(span.from, span.to)?;
        if span.by_session {
            by_session.extend(changed);
        } else {
            by_others.extend(changed);
        }
    }
    let changed_since: Vec<RelPath> = ws.store.changed(last, now.tree)?.into_iter().collect();
    let conflicts: Vec<RelPath> = by_session.intersection(&by_others).cloned().collect();
    let target_mark = &marks[start];
    let target = Snapshot::stored(
        target_mark.tree,
        ws.store.flatten(target_mark.tree)?,
        ws.skipped_of(target_mark.skipped),
    );
    // A path left out of either end is not known well enough to write.
    let mut restore = BTreeSet::new();
    let mut left = Vec::new();
    for p in by_session {
        let skip = target
            .skipped
            .iter()
            .chain(now.skipped.iter())
            .find(|s| s.covers(&p));
        match skip {
            Some(s) => left.push(format!(
                "{} (not checkpointed: {})",
                crate::path::display(&p),
                s.describe()
            )),
            None if target.flat.get(&p) != now.flat.get(&p) => {
                restore.insert(p);
            }
            None => {}
        }
    }
    Ok(Plan {
        target,
        now,
        restore,
        changed_since,
        conflicts,
        left,
    })
}

impl RewindRequest {
    /// Reads the arguments of a front end's `/rewind N [--files-only | --conversation-only]
    /// [--force]` (the chat, the terminal UI and ACP share it). `Ok(None)`: no turn named
    /// (list the turns instead).
    pub fn parse_args(args: &[&str]) -> Result<Option<Self>, String> {
        const USAGE: &str = "usage: /rewind [N [--files-only | --conversation-only] [--force]]";
        let Some((first, rest)) = args.split_first() else {
            return Ok(None);
        };
        let to_turn: u64 = first.parse().map_err(|_| USAGE.to_owned())?;
        let mut request = Self {
            to_turn,
            mode: RewindMode::Both,
            force: false,
        };
        for arg in rest {
            match (*arg, request.mode) {
                ("--force", _) => request.force = true,
                ("--files-only", RewindMode::Both) => request.mode = RewindMode::FilesOnly,
                ("--conversation-only", RewindMode::Both) => {
                    request.mode = RewindMode::ConversationOnly
                }
                _ => return Err(USAGE.to_owned()),
            }
        }
        Ok(Some(request))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rewind_arguments_parse_or_say_the_usage() {
        assert_eq!(RewindRequest::parse_args(&[]).unwrap(), None);
        let r = RewindRequest::parse_args(&["3", "--force", "--files-only"])
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.to_turn, r.mode, r.force),
            (3, RewindMode::FilesOnly, true)
        );
        for bad in [
            &["x"][..],
            &["2", "--files-only", "--conversation-only"],
            &["2", "now"],
        ] {
            assert!(
                RewindRequest::parse_args(bad)
                    .unwrap_err()
                    .starts_with("usage")
            );
        }
    }
}
