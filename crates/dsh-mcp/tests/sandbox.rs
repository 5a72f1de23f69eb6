//! Stdio servers under the session's supervision: dsh-guard's sandbox and containment through
//! the `Supervision` seam, with the real test-server process and the supervisor binary.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use dsh_guard::{
    GuardSupervision, SANDBOX_UNAVAILABLE, SandboxMode, SandboxPolicy, SupervisorProgram,
    UnavailableProbe,
};
use dsh_mcp::{McpOptions, McpPlugin, ServerConfig, ServerState};
use dsh_shell::Supervision;
use dsh_testkit::Script;
use parking_lot::Mutex;
use tempfile::TempDir;

/// This package's supervisor binary (dsh runs the same code as `dsh __supervise`).
fn supervisor() -> SupervisorProgram {
    SupervisorProgram {
        program: PathBuf::from(env!("CARGO_BIN_EXE_dsh-mcp-test-supervisor")),
        args: Vec::new(),
    }
}

/// A workspace under /tmp, and a directory outside every writable root (under the target dir,
/// as a folder under `$HOME` would be).
fn dirs() -> (TempDir, TempDir) {
    let outside = dsh_testkit::outside_writable_roots(env!("CARGO_TARGET_TMPDIR"));
    (tempfile::tempdir().unwrap(), outside)
}

/// The core with `servers` started in `workspace` under `supervision`.
async fn sandboxed(
    supervision: GuardSupervision,
    workspace: &Path,
    servers: Vec<ServerConfig>,
    options: McpOptions,
) -> World {
    let mut w = world().await;
    w.ctx
        .provide::<dyn Supervision>(Arc::new(supervision))
        .unwrap();
    let mut options = options;
    options.cwd = workspace.to_path_buf();
    w.mcp = Some(
        w.ctx
            .plugin(McpPlugin::new(servers, options))
            .await
            .unwrap(),
    );
    w
}

/// A write refused by the sandbox: Landlock's EACCES, or EROFS in a read-only mount
/// namespace.
fn denied(text: &str) -> bool {
    text.contains("Permission denied") || text.contains("Read-only file system")
}

fn in_mode(mode: SandboxMode, workspace: &TempDir) -> GuardSupervision {
    GuardSupervision::new(SandboxPolicy::new(mode, workspace.path()), supervisor())
}

/// One turn that calls `write_file` for each path; each call's (text, is_error).
async fn write_files(w: &World, paths: &[&Path]) -> Vec<(String, bool)> {
    let calls: Vec<(String, String)> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let args = serde_json::json!({"path": p, "text": "x"}).to_string();
            (format!("c{i}"), args)
        })
        .collect();
    w.adapter
        .push(Script::tool_calls(calls.iter().map(|(id, args)| {
            (id.as_str(), "mcp__t__write_file", args.as_str())
        })))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    tool_results(handle.agent())
        .into_iter()
        .map(|(_, text, is_error, _)| (text, is_error))
        .collect()
}

#[tokio::test]
async fn a_server_under_workspace_write_writes_the_workspace_but_nothing_outside() {
    let (workspace, elsewhere) = dirs();
    let inside = workspace.path().join("in.txt");
    let outside = elsewhere.path().join("out.txt");
    let w = sandboxed(
        in_mode(SandboxMode::WorkspaceWrite, &workspace),
        workspace.path(),
        vec![test_server("t", &[])],
        McpOptions::new("/"),
    )
    .await;
    let results = write_files(&w, &[&inside, &outside]).await;
    assert_eq!(results[0], (format!("wrote {}", inside.display()), false));
    assert!(results[1].1, "{results:?}");
    assert!(denied(&results[1].0), "{results:?}");
    assert!(inside.exists());
    assert!(!outside.exists());
}

#[tokio::test]
async fn a_server_under_read_only_cannot_write_even_the_workspace() {
    let workspace = tempfile::tempdir().unwrap();
    let inside = workspace.path().join("in.txt");
    let w = sandboxed(
        in_mode(SandboxMode::ReadOnly, &workspace),
        workspace.path(),
        vec![test_server("t", &[])],
        McpOptions::new("/"),
    )
    .await;
    let results = write_files(&w, &[&inside]).await;
    assert!(results[0].1 && denied(&results[0].0), "{results:?}");
    assert!(!inside.exists());
}

#[tokio::test]
async fn a_server_under_danger_full_access_writes_outside_the_workspace() {
    let (workspace, elsewhere) = dirs();
    let outside = elsewhere.path().join("out.txt");
    let w = sandboxed(
        in_mode(SandboxMode::DangerFullAccess, &workspace),
        workspace.path(),
        vec![test_server("t", &[])],
        McpOptions::new("/"),
    )
    .await;
    let results = write_files(&w, &[&outside]).await;
    assert_eq!(results[0], (format!("wrote {}", outside.display()), false));
    assert!(outside.exists());
}

#[tokio::test]
async fn a_confining_mode_that_cannot_be_enforced_refuses_the_server_and_the_session_goes_on() {
    let workspace = tempfile::tempdir().unwrap();
    let log = log_path(workspace.path());
    let confinement = GuardSupervision::with_probe(
        SandboxPolicy::new(SandboxMode::WorkspaceWrite, workspace.path()),
        supervisor(),
        Arc::new(UnavailableProbe("no Landlock in this test".into())),
    );
    let reported: Arc<Mutex<Vec<String>>> = Arc::default();
    let r = reported.clone();
    let mut options = McpOptions::new("/");
    options.on_failure = Some(Arc::new(move |e| r.lock().push(e.to_string())));
    let w = sandboxed(
        confinement,
        workspace.path(),
        vec![test_server("t", &["--log", log.to_str().unwrap()])],
        options,
    )
    .await;
    w.adapter.push(Script::text("fine without it"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert!(offered(&w.adapter, 0).is_empty());
    let reported = reported.lock().clone();
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert!(
        reported[0].contains("MCP server `t`: not started: ")
            && reported[0].contains(SANDBOX_UNAVAILABLE)
            && reported[0].contains("no Landlock in this test"),
        "{reported:?}"
    );
    assert!(matches!(
        &w.servers().statuses()[0].state,
        ServerState::Failed(reason) if reason.contains(SANDBOX_UNAVAILABLE)
    ));
    // Never started unconfined: the server would have logged its start first thing.
    assert!(log_lines(&log).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_server_and_every_process_it_started_stop_with_the_set() {
    // Found by a tag: the server runs in a PID namespace of its own, so the pids it could
    // log mean nothing here.
    let workspace = tempfile::tempdir().unwrap();
    let log = log_path(workspace.path());
    let tag = dsh_testkit::Tag::new();
    let mut w = sandboxed(
        in_mode(SandboxMode::WorkspaceWrite, &workspace),
        workspace.path(),
        vec![test_server(
            "t",
            &[
                "--log",
                log.to_str().unwrap(),
                "--daemon",
                &format!("3600.{tag}"),
            ],
        )],
        McpOptions::new("/"),
    )
    .await;
    w.servers().settled().await;
    assert!(matches!(
        w.servers().statuses()[0].state,
        ServerState::Ready
    ));
    tag.wait_running(1, "the server's setsid daemon");
    // dsh does not know the pid of a supervised server.
    assert_eq!(w.servers().statuses()[0].pid, None);
    w.stop_servers().await;
    tag.wait_gone("the setsid daemon outlived its server");
}
