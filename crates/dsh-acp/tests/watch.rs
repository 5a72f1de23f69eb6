#![allow(clippy::unwrap_used)]
//! A session another dsh process runs, loaded by a second one: followed read-only.

mod common;

use std::time::Duration;

use agent_client_protocol::v1::schema::{CloseSessionRequest, LoadSessionRequest};
use common::child::*;
use common::*;
use dsh_testkit::{MockResponse, MockServer, bounded};

const EXIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_session_another_dsh_runs_is_replayed_then_followed_as_it_commits_and_refuses_prompts() {
    let bin = binary();
    let server = MockServer::start();
    server.push(MockResponse::text("first answer"));
    let mut runner = spawn(&bin, &server).await;
    let id = runner.conn().session().await;
    runner.conn().prompt_now(&id, "ping").await.unwrap();

    // A second dsh over the same sessions: the first one holds this session.
    let launch = Launch {
        beside: Some(runner.home.path().to_owned()),
        ..Launch::default()
    };
    let mut watcher = spawn_in(&bin, &server, tempfile::tempdir().unwrap(), launch).await;
    let conn = watcher.conn();
    conn.initialize().await;
    let answer = conn
        .cx
        .send_request(LoadSessionRequest::new(id.clone(), conn.cwd.clone()))
        .block_task()
        .await
        .unwrap();
    assert_eq!(answer.meta.unwrap()["dsh"]["watching"], true);
    let replay: Vec<(&str, String)> = conn
        .received()
        .iter()
        .filter_map(|n| chunk_text(&n.update))
        .collect();
    assert_eq!(
        replay,
        [
            ("user", "ping".to_owned()),
            ("agent", "first answer".to_owned())
        ]
    );
    let refused = conn.prompt_now(&id, "from here").await.unwrap_err();
    assert!(
        refused.message.contains("running in another dsh process"),
        "{}",
        refused.message
    );

    // The first dsh goes on; the second sees the new turn as it is committed.
    server.push(MockResponse::text("second answer"));
    runner.conn().prompt_now(&id, "again").await.unwrap();
    let followed = bounded(async {
        let mut seen = Vec::new();
        while let Some(n) = watcher.conn().updates.recv().await {
            if let Some(chunk) = chunk_text(&n.update) {
                seen.push(chunk);
            }
            if seen
                .iter()
                .any(|(k, t)| *k == "agent" && t == "second answer")
            {
                return seen;
            }
        }
        panic!("the watcher's updates ended: {seen:?}");
    })
    .await;
    assert_eq!(followed[0], ("user", "again".to_owned()), "{followed:?}");
    assert_eq!(
        server.requests().len(),
        2,
        "the watcher never asks the model"
    );

    // Closing stops following; the session is the first dsh's throughout.
    let conn = watcher.conn();
    conn.cx
        .send_request(CloseSessionRequest::new(id.clone()))
        .block_task()
        .await
        .unwrap();
    assert_eq!(watcher.close_stdin_and_wait(EXIT).await.0, Some(0));
    assert_eq!(runner.close_stdin_and_wait(EXIT).await.0, Some(0));
}
