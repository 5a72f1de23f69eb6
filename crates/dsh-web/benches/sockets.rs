//! What open browser connections cost `dsh web`: resident memory with 100 WebSockets open
//! (initialized, then each with a session of its own), beside `dsh acp`'s own figure for one
//! editor connection with one session. Prints figures; asserts nothing about them.
//!
//! `cargo bench -p dsh-web --bench sockets` (the `dsh` binary of the bench profile is built
//! first when absent).

#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Stdio;

use common::{Web, start};
use dsh_testkit::{MockServer, bounded};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

const SOCKETS: usize = 100;

/// Resident and peak resident memory of `pid`, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// `dsh acp` with one editor connection that opened one session: its resident memory.
async fn acp_figure(server: &MockServer) -> u64 {
    let home = tempfile::tempdir().unwrap();
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let mut child = tokio::process::Command::new(dsh_testkit::dsh_binary())
        .arg("acp")
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "bench-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let frames = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": workspace, "mcpServers": []}}),
    ];
    for (n, frame) in frames.iter().enumerate() {
        stdin
            .write_all(format!("{frame}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = bounded(stdout.next_line()).await.unwrap().unwrap();
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            if value["id"] == json!(n + 1) {
                break;
            }
        }
    }
    let (rss, _) = memory(child.id().unwrap());
    drop(stdin);
    let _ = bounded(child.wait()).await;
    rss
}

async fn web_figures(server: &MockServer) -> (u64, u64, u64, u64) {
    let web: Web = start(server).await;
    let pid = web.process.id().unwrap();
    let (idle, _) = memory(pid);
    let mut sockets = Vec::new();
    for _ in 0..SOCKETS {
        sockets.push(web.page_socket().await);
    }
    let (open, _) = memory(pid);
    for socket in &mut sockets {
        socket
            .request(
                "session/new",
                json!({"cwd": web.workspace, "mcpServers": []}),
            )
            .await
            .unwrap();
    }
    let (with_sessions, peak) = memory(pid);
    for socket in sockets {
        socket.close().await;
    }
    let _ = web.stop().await;
    (idle, open, with_sessions, peak)
}

#[tokio::main]
async fn main() {
    let server = MockServer::start();
    let acp = acp_figure(&server).await;
    let (idle, open, sessions, peak) = web_figures(&server).await;
    println!(
        "dsh acp, one editor with one session: {:.1} MiB resident",
        mib(acp)
    );
    println!("dsh web, idle: {:.1} MiB resident", mib(idle));
    println!(
        "dsh web, {SOCKETS} WebSockets open and initialized: {:.1} MiB (+{:.1} MiB over idle, {:.1} KiB each)",
        mib(open),
        mib(open.saturating_sub(idle)),
        open.saturating_sub(idle) as f64 / SOCKETS as f64
    );
    println!(
        "dsh web, {SOCKETS} WebSockets with a session each: {:.1} MiB (+{:.1} MiB over dsh acp's figure; peak {:.1} MiB)",
        mib(sessions),
        mib(sessions.saturating_sub(acp)),
        mib(peak)
    );
}
