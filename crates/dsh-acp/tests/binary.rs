#![allow(clippy::unwrap_used)]
//! The real `dsh acp` binary as a child process, driven by an ACP client over its stdio and
//! pointed at the mock OpenAI-compatible server (`DEEPSEEK_BASE_URL`).
//!
//! A library crate cannot name another crate's binary, so the binary comes from
//! [`dsh_testkit::dsh_binary`]: `<target>/<profile>/dsh`, built first when absent. A binary that
//! cannot be built, or whose `dsh acp --help` fails, fails the tests.
//!
//! Contract with the CLI these tests rely on: `dsh acp` reads the provider from the environment
//! (`DEEPSEEK_BASE_URL`, `DEEPSEEK_API_KEY`), keeps sessions as JSONL files under
//! `$DSH_HOME/sessions`, asks the editor before `bash`, and exits 0 once stdin is closed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason, ToolCallStatus};
use common::*;
use dsh_session::{EventKind, SessionEvent, TurnEndReason, check_balanced};
use dsh_testkit::{MockResponse, MockServer, dsh_binary};

/// The `dsh` binary of this target directory (built when absent), checked to have a working
/// `acp` subcommand: a missing or broken binary fails the test instead of skipping it.
fn binary() -> PathBuf {
    let bin = dsh_binary();
    let help = std::process::Command::new(&bin)
        .args(["acp", "--help"])
        .env("DSH_HOME", std::env::temp_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        help.status.success(),
        "`{} acp --help` failed ({}): {}",
        bin.display(),
        help.status,
        String::from_utf8_lossy(&help.stderr)
    );
    bin
}

/// A running `dsh acp` child with its own home, workspace and mock provider.
struct Child {
    process: tokio::process::Child,
    home: tempfile::TempDir,
    stderr: PathBuf,
    conn: Option<Conn>,
}

async fn spawn(bin: &Path, server: &MockServer) -> Child {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let stderr = home.path().join("stderr.log");
    let mut process = tokio::process::Command::new(bin)
        .arg("acp")
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "test-key")
        .env("DSH_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = process.stdin.take().unwrap();
    let stdout = process.stdout.take().unwrap();
    let conn = Conn::over(stdout, stdin, workspace).await;
    Child {
        process,
        home,
        stderr,
        conn: Some(conn),
    }
}

impl Child {
    fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().unwrap()
    }

    /// Closes the client's end (stdin) and waits, polling with a bounded deadline, for the
    /// process to exit; returns its exit code and how long it took.
    async fn close_stdin_and_wait(&mut self, deadline: Duration) -> (Option<i32>, Duration) {
        let conn = self.conn.take().unwrap();
        let started = Instant::now();
        conn.begin_disconnect();
        let _ = conn.served().await;
        let status = tokio::time::timeout(deadline, self.process.wait()).await;
        let elapsed = started.elapsed();
        match status {
            Ok(Ok(status)) => {
                if !status.success() {
                    eprintln!(
                        "{}",
                        std::fs::read_to_string(&self.stderr).unwrap_or_default()
                    );
                }
                (status.code(), elapsed)
            }
            _ => {
                let _ = self.process.start_kill();
                eprintln!(
                    "{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
                (None, elapsed)
            }
        }
    }

    /// Every session file under `$DSH_HOME/sessions`, parsed.
    fn session_files(&self) -> Vec<(PathBuf, Vec<Arc<SessionEvent>>)> {
        let mut files = Vec::new();
        let mut dirs = vec![self.home.path().join("sessions")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let events = text
                        .lines()
                        .skip(1) // the header
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| Arc::new(serde_json::from_str::<SessionEvent>(l).unwrap()))
                        .collect();
                    files.push((path, events));
                }
            }
        }
        files
    }
}

fn last_turn_end(events: &[Arc<SessionEvent>]) -> Option<TurnEndReason> {
    events.iter().rev().find_map(|e| match &e.kind {
        EventKind::TurnEnd(t) => Some(t.reason.clone()),
        _ => None,
    })
}

#[tokio::test]
async fn a_prompt_with_a_bash_call_streams_chunks_and_tool_updates_and_ends_end_turn() {
    let bin = binary();
    let server = MockServer::start();
    server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            r#"{"command":"echo from-bash","description":"print a word"}"#,
        ))
        .push(MockResponse::text("all done"));
    let mut child = spawn(&bin, &server).await;
    let id = child.conn().session().await;
    let stop = child.conn().prompt_now(&id, "run it").await.unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    let updates = child.conn().received();
    let call = updates.iter().find_map(|n| match &n.update {
        SessionUpdate::ToolCall(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(call.unwrap().title, "echo from-bash");
    let result = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) => Some(u.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(result.fields.status, Some(ToolCallStatus::Completed));
    assert!(
        format!("{:?}", result.fields.content).contains("from-bash"),
        "the command's output is on the card"
    );
    assert_eq!(agent_text(&updates), "all done");
    // bash is mutating: the editor was asked first.
    assert!(child.conn().asked.try_recv().is_ok());
    assert!(server.violations().is_empty());
    let (code, _) = child.close_stdin_and_wait(Duration::from_secs(5)).await;
    assert_eq!(code, Some(0));
}

#[tokio::test]
async fn cancel_during_a_held_stream_ends_cancelled_with_a_balanced_log() {
    let bin = binary();
    let server = MockServer::start();
    let (held, hold) = MockResponse::text("partial answer that never ends").hold_after(3);
    server.push(held);
    let mut child = spawn(&bin, &server).await;
    let id = child.conn().session().await;
    let prompt = child.conn().prompt(&id, "go");
    child
        .conn()
        .wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    child.conn().cancel(&id);
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    let (code, _) = child.close_stdin_and_wait(Duration::from_secs(5)).await;
    assert_eq!(code, Some(0));
    drop(hold);
    let files = child.session_files();
    assert_eq!(files.len(), 1);
    let (path, events) = &files[0];
    check_balanced(events).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(matches!(
        last_turn_end(events),
        Some(TurnEndReason::Aborted { .. })
    ));
}

#[tokio::test]
async fn closing_stdin_exits_zero_within_5s_with_every_session_file_balanced() {
    let bin = binary();
    let server = MockServer::start();
    let (held, _hold) = MockResponse::text("still streaming when the editor quits").hold_after(3);
    server.push(held);
    let mut child = spawn(&bin, &server).await;
    let busy = child.conn().session().await;
    let _idle = child.conn().session().await;
    let _prompt = child.conn().prompt(&busy, "go");
    child
        .conn()
        .wait_update(&busy, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .await;
    let (code, took) = child.close_stdin_and_wait(Duration::from_secs(5)).await;
    eprintln!("dsh acp exited {code:?} {took:?} after stdin closed");
    assert_eq!(code, Some(0), "exit 0 within 5 s");
    let files = child.session_files();
    assert!(!files.is_empty());
    for (path, events) in &files {
        check_balanced(events).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let aborted = files
        .iter()
        .filter(|(_, events)| matches!(last_turn_end(events), Some(TurnEndReason::Aborted { .. })))
        .count();
    assert_eq!(aborted, 1, "the busy session's turn ended aborted");
}
