//! Checkpoints and rewinds of a real workspace, driven through a session log.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_checkpoint::{
    At, CheckpointConfig, CheckpointError, Checkpoints, RewindMode, RewindRequest,
};
use dsh_session::{
    EventKind, Message, Session, SessionHeader, SessionId, SessionMeta, StepBoundary, TurnEnd,
    TurnEndReason, TurnStart,
};

struct Fixture {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    work: PathBuf,
    home: PathBuf,
    session: Arc<Session>,
}

fn fixture() -> Fixture {
    let work_dir = tempfile::tempdir().unwrap();
    let home_dir = tempfile::tempdir().unwrap();
    let work = work_dir.path().canonicalize().unwrap();
    let home = home_dir.path().join("checkpoints");
    let session = Session::new(
        SessionHeader::new(
            SessionId::new("s"),
            1,
            SessionMeta {
                cwd: Some(work.clone()),
                ..SessionMeta::default()
            },
        ),
        None,
    )
    .unwrap();
    Fixture {
        _dirs: (work_dir, home_dir),
        work,
        home,
        session,
    }
}

impl Fixture {
    fn service(&self) -> Checkpoints {
        Checkpoints::new(CheckpointConfig::new(&self.home), None, None)
    }

    /// One turn whose body changes the workspace, checkpointed as the plugin does.
    async fn turn(&self, cp: &Checkpoints, n: u64, prompt: &str, body: impl FnOnce(&Path)) {
        let s = &self.session;
        s.append(EventKind::TurnStart(TurnStart { turn: n }))
            .unwrap();
        cp.checkpoint(s, n, 0, At::Turn).await.unwrap();
        s.append(EventKind::StepStart(StepBoundary { turn: n, step: 1 }))
            .unwrap();
        s.append(EventKind::UserMessage(Arc::new(Message::user_text(prompt))))
            .unwrap();
        cp.checkpoint(s, n, 1, At::Step).await.unwrap();
        body(&self.work);
        s.append(EventKind::StepEnd(StepBoundary { turn: n, step: 1 }))
            .unwrap();
        cp.checkpoint(s, n, 1, At::End).await.unwrap();
        s.append(EventKind::TurnEnd(TurnEnd {
            turn: n,
            reason: TurnEndReason::Completed,
        }))
        .unwrap();
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.work.join(rel)).ok()
    }

    fn mode(&self, rel: &str) -> u32 {
        std::fs::metadata(self.work.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn request(to_turn: u64) -> RewindRequest {
    RewindRequest {
        to_turn,
        mode: RewindMode::Both,
        force: false,
    }
}

use dsh_testkit::workspace_tree as tree;

#[tokio::test]
async fn a_turn_that_creates_modifies_deletes_renames_and_chmods_is_undone_exactly() {
    let f = fixture();
    let cp = f.service();
    write(&f.work, "keep.txt", "keep\n");
    write(&f.work, "edit.txt", "one\ntwo\n");
    write(&f.work, "gone.txt", "bye\n");
    write(&f.work, "old/name.txt", "moving\n");
    write(&f.work, "run.sh", "echo hi\n");
    std::os::unix::fs::symlink("keep.txt", f.work.join("link")).unwrap();
    std::fs::create_dir(f.work.join("empty")).unwrap();
    f.turn(&cp, 1, "first", |_| {}).await;
    let before = tree(&f.work);
    f.turn(&cp, 2, "change everything", |w| {
        write(w, "new/deep/file.txt", "new\n");
        write(w, "edit.txt", "one\nTWO\nthree\n");
        std::fs::remove_file(w.join("gone.txt")).unwrap();
        std::fs::rename(w.join("old"), w.join("renamed")).unwrap();
        std::fs::set_permissions(w.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(w.join("link")).unwrap();
        std::os::unix::fs::symlink("edit.txt", w.join("link")).unwrap();
        std::fs::remove_dir(w.join("empty")).unwrap();
        std::fs::create_dir(w.join("made")).unwrap();
    })
    .await;
    assert_ne!(tree(&f.work), before);
    let report = cp.rewind(&f.session, request(2)).await.unwrap();
    assert_eq!(tree(&f.work), before, "{report:?}");
    assert!(report.left.is_empty(), "{report:?}");
    assert_eq!(f.mode("run.sh") & 0o111, 0);
    // The conversation went back too.
    let texts: Vec<String> = f
        .session
        .derive_messages()
        .iter()
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["first"]);
}

#[tokio::test]
async fn a_file_changed_by_hand_since_the_last_checkpoint_makes_the_rewind_refuse_and_stays() {
    let f = fixture();
    let cp = f.service();
    write(&f.work, "a.txt", "a\n");
    f.turn(&cp, 1, "one", |w| write(w, "a.txt", "agent\n"))
        .await;
    write(&f.work, "a.txt", "mine\n");
    write(&f.work, "other.txt", "mine too\n");
    let err = cp.rewind(&f.session, request(1)).await.unwrap_err();
    let CheckpointError::Refused { changed_since, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(changed_since, &["a.txt", "other.txt"]);
    assert_eq!(f.read("a.txt").as_deref(), Some("mine\n"));
    assert_eq!(f.read("other.txt").as_deref(), Some("mine too\n"));
    // Nothing was recorded: the conversation is as it was.
    assert_eq!(f.session.history_turns(), [1]);
    // --force overwrites what the session changed, and still leaves the rest alone.
    let forced = RewindRequest {
        force: true,
        ..request(1)
    };
    cp.rewind(&f.session, forced).await.unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("a\n"));
    assert_eq!(f.read("other.txt").as_deref(), Some("mine too\n"));
}

#[tokio::test]
async fn a_change_made_between_turns_by_someone_else_is_kept_or_refused_never_overwritten() {
    let f = fixture();
    let cp = f.service();
    write(&f.work, "shared.txt", "v0\n");
    write(&f.work, "yours.txt", "v0\n");
    f.turn(&cp, 1, "one", |w| write(w, "shared.txt", "agent\n"))
        .await;
    // By hand, between the turns.
    write(&f.work, "yours.txt", "by hand\n");
    f.turn(&cp, 2, "two", |w| write(w, "new.txt", "agent\n"))
        .await;
    // Rewinding turn 2 only: the hand edit is older and untouched.
    cp.rewind(&f.session, request(2)).await.unwrap();
    assert_eq!(f.read("new.txt"), None);
    assert_eq!(f.read("yours.txt").as_deref(), Some("by hand\n"));
    // Someone edits a file the session changed in turn 1, then turn 3 runs.
    write(&f.work, "shared.txt", "by hand\n");
    f.turn(&cp, 3, "three", |_| {}).await;
    let err = cp.rewind(&f.session, request(1)).await.unwrap_err();
    let CheckpointError::Refused { conflicts, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(conflicts, &["shared.txt"]);
    assert_eq!(f.read("shared.txt").as_deref(), Some("by hand\n"));
}

#[tokio::test]
async fn ignored_and_large_files_are_named_and_never_touched() {
    let f = fixture();
    let mut config = CheckpointConfig::new(&f.home);
    config.max_file_bytes = 16;
    let cp = Checkpoints::new(config, None, None);
    write(&f.work, ".gitignore", "target/\n*.log\n");
    write(&f.work, "target/out.bin", "built\n");
    f.turn(&cp, 1, "one", |w| {
        write(w, "target/out.bin", "rebuilt\n");
        write(w, "run.log", "log\n");
        write(w, "big.txt", "more than sixteen bytes\n");
        write(w, "small.txt", "small\n");
    })
    .await;
    let snapshot = cp.snapshot(&f.work).await.unwrap();
    let named: Vec<String> = snapshot.skipped.iter().map(|s| s.describe()).collect();
    assert!(named.contains(&"target/ (ignored)".to_owned()), "{named:?}");
    assert!(
        named.iter().any(|n| n.starts_with("big.txt (")),
        "{named:?}"
    );
    cp.rewind(&f.session, request(1)).await.unwrap();
    assert_eq!(f.read("small.txt"), None);
    assert_eq!(f.read("target/out.bin").as_deref(), Some("rebuilt\n"));
    assert_eq!(f.read("run.log").as_deref(), Some("log\n"));
    assert_eq!(
        f.read("big.txt").as_deref(),
        Some("more than sixteen bytes\n")
    );
}

#[tokio::test]
async fn the_users_git_repository_is_never_written() {
    let f = fixture();
    let cp = f.service();
    write(&f.work, ".git/HEAD", "ref: refs/heads/main\n");
    write(&f.work, ".git/index", "not really an index\n");
    let git_before = tree(&f.work.join(".git"));
    f.turn(&cp, 1, "one", |w| write(w, "x.txt", "x\n")).await;
    cp.rewind(&f.session, request(1)).await.unwrap();
    assert_eq!(tree(&f.work.join(".git")), git_before);
    assert!(!f.home.join(".git").exists());
}

#[tokio::test]
async fn conversation_only_and_files_only_rewind_one_side() {
    let f = fixture();
    let cp = f.service();
    f.turn(&cp, 1, "one", |w| write(w, "a.txt", "a\n")).await;
    f.turn(&cp, 2, "two", |w| write(w, "b.txt", "b\n")).await;
    let files_only = RewindRequest {
        mode: RewindMode::FilesOnly,
        ..request(2)
    };
    cp.rewind(&f.session, files_only).await.unwrap();
    assert_eq!(f.read("b.txt"), None);
    assert_eq!(f.session.history_turns(), [1, 2]);
    let conversation = RewindRequest {
        mode: RewindMode::ConversationOnly,
        ..request(1)
    };
    cp.rewind(&f.session, conversation).await.unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("a\n"));
    assert!(f.session.history_turns().is_empty());
}

#[tokio::test]
async fn a_crash_before_the_commit_point_leaves_the_old_state_and_after_it_the_new_one() {
    // A crash after k file operations: recovery by a fresh service (a new process) completes
    // the rewind, because the session recorded it.
    for k in [0usize, 1, 2] {
        let f = fixture();
        let cp = f.service();
        write(&f.work, "a.txt", "a0\n");
        write(&f.work, "b.txt", "b0\n");
        f.turn(&cp, 1, "one", |w| {
            write(w, "a.txt", "a1\n");
            write(w, "b.txt", "b1\n");
            write(w, "c.txt", "c1\n");
        })
        .await;
        let crashing = f.service().with_fault(Arc::new(move |done| {
            if done == k {
                Err(std::io::Error::other("crash"))
            } else {
                Ok(())
            }
        }));
        let err = crashing.rewind(&f.session, request(1)).await.unwrap_err();
        assert!(matches!(err, CheckpointError::Fault(n) if n == k), "{err}");
        // The next process finds the session (live, or in its store) holding the commit.
        let live = dsh_kernel::Context::new();
        let sessions = dsh_session::SessionStore::new(&live);
        let _entered = sessions.enter(&f.session, None).unwrap();
        let next = Checkpoints::new(CheckpointConfig::new(&f.home), Some(sessions), None);
        let recovered = next.recover(&f.work).await.unwrap();
        assert!(recovered.is_some());
        assert_eq!(f.read("a.txt").as_deref(), Some("a0\n"), "after {k}");
        assert_eq!(f.read("b.txt").as_deref(), Some("b0\n"), "after {k}");
        assert_eq!(f.read("c.txt"), None, "after {k}");
        assert!(f.service().recover(&f.work).await.unwrap().is_none());
    }
    // A journal whose session never recorded the rewind (the crash came before the commit
    // point) is dropped and nothing is written.
    let f = fixture();
    let cp = f.service();
    f.turn(&cp, 1, "one", |w| write(w, "a.txt", "a1\n")).await;
    let other = Session::new(
        SessionHeader::new(SessionId::new("other"), 1, SessionMeta::default()),
        None,
    )
    .unwrap();
    let store = dsh_checkpoint::store::store_dir(&f.home, &f.work);
    let snap = cp.snapshot(&f.work).await.unwrap();
    dsh_checkpoint::restore::Journal::new(
        "never".into(),
        other.id().to_string(),
        snap.tree.to_string(),
        snap.tree.to_string(),
        &[b"a.txt".to_vec()].into_iter().collect(),
    )
    .save(&store)
    .unwrap();
    let live = dsh_kernel::Context::new();
    let sessions = dsh_session::SessionStore::new(&live);
    let _entered = sessions.enter(&other, None).unwrap();
    let probe = Checkpoints::new(CheckpointConfig::new(&f.home), Some(sessions), None);
    assert!(probe.recover(&f.work).await.unwrap().is_none());
    assert!(!store.join(dsh_checkpoint::restore::JOURNAL_FILE).exists());
    assert_eq!(f.read("a.txt").as_deref(), Some("a1\n"));
}

#[tokio::test]
async fn rewind_is_refused_inside_a_turn_and_for_a_turn_outside_the_history() {
    let f = fixture();
    let cp = f.service();
    f.turn(&cp, 1, "one", |_| {}).await;
    assert!(matches!(
        cp.rewind(&f.session, request(5)).await,
        Err(CheckpointError::NoCheckpoint { turn: 5, .. })
    ));
    f.session
        .append(EventKind::TurnStart(TurnStart { turn: 2 }))
        .unwrap();
    assert!(matches!(
        cp.rewind(&f.session, request(1)).await,
        Err(CheckpointError::Busy(_))
    ));
}

#[tokio::test]
async fn turns_and_diff_show_what_each_turn_changed() {
    let f = fixture();
    let cp = f.service();
    write(&f.work, "a.txt", "one\ntwo\n");
    f.turn(&cp, 1, "edit a", |w| write(w, "a.txt", "one\n2\n"))
        .await;
    f.turn(&cp, 2, "just talk", |_| {}).await;
    let turns = cp.turns(&f.session).await;
    let summary: Vec<(u64, String, Option<usize>)> = turns
        .into_iter()
        .map(|t| (t.turn, t.prompt, t.changed_files))
        .collect();
    assert_eq!(
        summary,
        [
            (1, "edit a".into(), Some(1)),
            (2, "just talk".into(), Some(0))
        ]
    );
    let diff = cp.diff(&f.work, f.session.events(), 1).await.unwrap();
    assert_eq!(diff.len(), 1);
    assert_eq!(diff[0].path, "a.txt");
    assert!(diff[0].diff.contains("-two\n+2\n"), "{}", diff[0].diff);
}

#[tokio::test]
async fn prune_keeps_what_sessions_refer_to_and_deletes_the_rest() {
    let f = fixture();
    let cp = f.service();
    write(&f.work, "a.txt", "kept\n");
    f.turn(&cp, 1, "one", |w| write(w, "a.txt", "kept too\n"))
        .await;
    // An object no checkpoint names, and a store no session refers to at all.
    write(&f.work, "a.txt", "only in a snapshot\n");
    cp.snapshot(&f.work).await.unwrap();
    let orphan_ws = tempfile::tempdir().unwrap();
    write(orphan_ws.path(), "x.txt", "x\n");
    cp.snapshot(orphan_ws.path()).await.unwrap();
    let store = dsh_checkpoint::store::store_dir(&f.home, &f.work);
    let mut refs = std::collections::HashMap::new();
    refs.insert(
        store.clone(),
        dsh_checkpoint::referenced(&f.session.events()),
    );
    let report = dsh_checkpoint::prune(&f.home, &refs, std::time::Duration::ZERO).unwrap();
    assert_eq!(report.removed_stores.len(), 1, "{report:?}");
    assert!(
        report.removed_objects >= 2,
        "the orphan blob and tree: {report:?}"
    );
    // Every checkpoint of the session still restores.
    write(&f.work, "a.txt", "kept too\n");
    cp.rewind(&f.session, request(1)).await.unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("kept\n"));
}

#[tokio::test]
async fn dsh_home_inside_the_workspace_is_never_recorded_and_a_huge_workspace_is_refused() {
    let f = fixture();
    // dsh started in the directory that holds its own home (a home directory, say).
    let home = f.work.join(".dsh");
    write(&home, "sessions/s.jsonl", "{}\n");
    write(&f.work, "a.txt", "a\n");
    let mut config = CheckpointConfig::new(home.join("checkpoints"));
    let cp = Checkpoints::new(config.clone(), None, None);
    let snap = cp.snapshot(&f.work).await.unwrap();
    let paths: Vec<String> = snap
        .flat
        .keys()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    assert_eq!(paths, ["a.txt"]);
    config.max_files = 3;
    for i in 0..4 {
        write(&f.work, &format!("many/{i}.txt"), "x\n");
    }
    let err = Checkpoints::new(config, None, None)
        .snapshot(&f.work)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CheckpointError::TooLarge { limit: 3, .. }),
        "{err}"
    );
}
