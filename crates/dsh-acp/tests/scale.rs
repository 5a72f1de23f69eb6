#![allow(clippy::unwrap_used)]
//! What lets one `dsh acp` hold thousands of sessions (issue 30), and the durability it must
//! keep meanwhile: `session/new` does not wait for the disk, and a session whose creation
//! reached the disk survives `kill -9`.

mod common;

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::StopReason;
use common::child::*;
use common::*;
use dsh_store_jsonl::{FileOps, JsonlOptions};
use dsh_testkit::{MockResponse, MockServer, bounded};
use parking_lot::{Condvar, Mutex};

/// File operations whose syncs wait until the test opens them: a disk that has not finished
/// writing yet.
#[derive(Default)]
struct HeldSyncs {
    open: Mutex<bool>,
    opened: Condvar,
}

impl HeldSyncs {
    fn release(&self) {
        *self.open.lock() = true;
        self.opened.notify_all();
    }
}

impl FileOps for HeldSyncs {
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        let mut open = self.open.lock();
        while !*open {
            self.opened.wait(&mut open);
        }
        drop(open);
        file.sync_data()
    }
}

/// `session/new` answers without waiting for the session's file: the creation is appended and
/// the store's write-behind makes it durable off the request path (a synchronous write and
/// sync per session kept 10,000 sessions from being created in seconds). Teardown still
/// drains it.
#[tokio::test]
async fn session_new_answers_while_the_session_file_is_still_being_written() {
    let syncs = Arc::new(HeldSyncs::default());
    let h = H::persistent_with(JsonlOptions {
        file_ops: syncs.clone(),
        ..JsonlOptions::default()
    })
    .await;
    let conn = h.connect(options()).await;
    let first = bounded(conn.session()).await;
    let second = bounded(conn.open()).await;
    syncs.release();
    conn.disconnect().await.unwrap();
    for id in [first, second] {
        let stored = h.stored(&id).await;
        assert!(
            stored
                .iter()
                .any(|e| e.kind.type_name() == "acp/session-created"),
            "{id}: the creation was written by the teardown"
        );
    }
}

/// Once a new session's file is on disk (the write-behind published it, without any prompt or
/// teardown), the session survives `kill -9` of the agent and loads in the next process.
#[tokio::test]
async fn a_session_whose_creation_reached_the_disk_loads_after_kill_9() {
    let bin = binary();
    let server = MockServer::start();
    let mut first = spawn(&bin, &server).await;
    let id = first.conn().session().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !first.session_files().iter().any(|(path, _)| {
        path.file_stem()
            .is_some_and(|stem| stem.to_string_lossy().contains(&id))
    }) {
        assert!(
            Instant::now() < deadline,
            "the new session's file was not written within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.process.kill().await.unwrap();
    let Child { home, .. } = first;
    let mut second = spawn_in(&bin, &server, home, Launch::default()).await;
    let conn = second.conn();
    conn.initialize().await;
    conn.load(&id).await.unwrap();
    server.push(MockResponse::text("still here"));
    assert_eq!(
        conn.prompt_now(&id, "hi").await.unwrap(),
        StopReason::EndTurn
    );
    assert_eq!(
        second.close_stdin_and_wait(Duration::from_secs(10)).await.0,
        Some(0)
    );
}
