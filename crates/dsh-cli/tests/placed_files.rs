#![allow(clippy::unwrap_used)]
//! Files dsh reads because of where they are never hang or stall it: a FIFO, a directory, a
//! socket, a symlink to `/dev/zero` or a 1 GB sparse file in the place of `config.toml`, a
//! workspace's `AGENTS.md`/`CLAUDE.md`, `$DSH_HOME/AGENTS.md` or `.dsh/hooks.json` makes every
//! front end either refuse to start naming the file (`config.toml`) or start without it, warning
//! about it. Each case runs under a deadline, so a regression fails instead of hanging.

mod common;

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::acp::Acp;
use common::pty_ui::Tui;
use common::{World, stderr, stdout};
use dsh_testkit::MockResponse;
use serde_json::json;

/// A hang is a failure long before the test runner's own timeout.
const DEADLINE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug)]
enum Kind {
    Fifo,
    Directory,
    Socket,
    DevZero,
    Sparse,
}

const KINDS: [Kind; 5] = [
    Kind::Fifo,
    Kind::Directory,
    Kind::Socket,
    Kind::DevZero,
    Kind::Sparse,
];

#[derive(Clone, Copy, Debug)]
enum Place {
    Config,
    WorkspaceAgents,
    WorkspaceClaude,
    HomeAgents,
    WorkspaceHooks,
}

impl Place {
    fn path(self, w: &World) -> PathBuf {
        match self {
            Place::Config => w.home.path().join("config.toml"),
            Place::WorkspaceAgents => w.cwd.path().join("AGENTS.md"),
            Place::WorkspaceClaude => w.cwd.path().join("CLAUDE.md"),
            Place::HomeAgents => w.home.path().join("AGENTS.md"),
            Place::WorkspaceHooks => w.cwd.path().join(".dsh/hooks.json"),
        }
    }

    /// Only a broken configuration stops dsh; the others are skipped with a warning.
    fn stops_start_up(self) -> bool {
        matches!(self, Place::Config)
    }
}

/// What was planted; a socket lives as long as its listener.
struct Planted {
    path: PathBuf,
    _socket: Option<UnixListener>,
}

fn plant(w: &World, place: Place, kind: Kind) -> Planted {
    let path = place.path(w);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut socket = None;
    match kind {
        Kind::Fifo => nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap(),
        Kind::Directory => std::fs::create_dir(&path).unwrap(),
        Kind::Socket => socket = Some(UnixListener::bind(&path).unwrap()),
        Kind::DevZero => std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
        Kind::Sparse => std::fs::File::create(&path)
            .unwrap()
            .set_len(1 << 30)
            .unwrap(),
    }
    Planted {
        path,
        _socket: socket,
    }
}

/// `cmd`'s output, killing it and failing when it does not finish within [`DEADLINE`].
fn output_within(mut cmd: Command, case: &str) -> Output {
    let child = cmd.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("{case}: dsh still running after {DEADLINE:?}");
        }
    }
}

fn run_case(place: Place, kind: Kind) {
    let w = World::new();
    let planted = plant(&w, place, kind);
    let case = format!("dsh run, {kind:?} at {}", planted.path.display());
    w.server.push(MockResponse::text("fine"));
    let started = Instant::now();
    let out = output_within(w.dsh(&["run", "hello"]), &case);
    let err = stderr(&out);
    let named = planted.path.display().to_string();
    if place.stops_start_up() {
        assert_eq!(out.status.code(), Some(1), "{case}: {err}");
        assert!(w.server.requests().is_empty(), "{case}");
    } else {
        assert_eq!(out.status.code(), Some(0), "{case}: {err}");
        assert_eq!(stdout(&out), "fine\n", "{case}");
    }
    assert!(err.contains(&named), "{case}: the file is named: {err}");
    assert_eq!(err.matches(&named).count(), 1, "{case}: said once: {err}");
    eprintln!("{case}: {:?}", started.elapsed());
}

fn acp_case(place: Place, kind: Kind) {
    let w = World::new();
    let planted = plant(&w, place, kind);
    let case = format!("dsh acp, {kind:?} at {}", planted.path.display());
    let named = planted.path.display().to_string();
    w.server.push(MockResponse::text("fine"));
    let mut acp = Acp::spawn(&w);
    acp.initialize();
    let cwd = w.cwd.path().canonicalize().unwrap();
    let created = acp.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
    if place.stops_start_up() {
        let message = created["error"]["message"].to_string();
        assert!(message.contains(&named), "{case}: {created}");
    } else {
        let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
        let prompt = acp.prompt(&id, "hello");
        let done = acp.response(prompt);
        assert_eq!(done["result"]["stopReason"], "end_turn", "{case}: {done}");
    }
    let (status, err) = acp.hang_up();
    assert!(err.contains(&named), "{case}: the file is named: {err}");
    assert_eq!(
        status.code(),
        Some(i32::from(place.stops_start_up())),
        "{case}"
    );
}

/// The chat (`plain`) or the full-screen UI on a terminal.
fn interactive_case(place: Place, kind: Kind, plain: bool) {
    let w = World::new();
    let planted = plant(&w, place, kind);
    let front = if plain { "the chat" } else { "the UI" };
    let case = format!("{front}, {kind:?} at {}", planted.path.display());
    let args: &[&str] = if plain { &["--plain"] } else { &[] };
    w.server.push(MockResponse::text("all fine"));
    let mut ui = Tui::start(&w, args, &[]);
    if place.stops_start_up() {
        assert_eq!(ui.exit_code(), Some(1), "{case}");
        let printed = String::from_utf8_lossy(&ui.raw).replace("\r\n", "\n");
        assert!(
            printed.contains(&planted.path.display().to_string()),
            "{case}: {printed}"
        );
        return;
    }
    ui.wait_for(if plain {
        "/help for commands"
    } else {
        "ask anything"
    });
    ui.type_line("hello");
    ui.wait_for("all fine");
    ui.type_line("/exit");
    assert_eq!(ui.exit_code(), Some(0), "{case}");
}

macro_rules! table {
    ($($name:ident: $place:expr;)*) => {
        $(
            mod $name {
                use super::*;

                #[test]
                fn dsh_run_starts_or_refuses_naming_the_file() {
                    for kind in KINDS {
                        run_case($place, kind);
                    }
                }

                #[test]
                fn dsh_acp_starts_or_refuses_naming_the_file() {
                    for kind in KINDS {
                        acp_case($place, kind);
                    }
                }

                #[test]
                fn the_chat_starts_or_refuses() {
                    for kind in KINDS {
                        interactive_case($place, kind, true);
                    }
                }

                #[test]
                fn the_ui_starts_or_refuses() {
                    for kind in KINDS {
                        interactive_case($place, kind, false);
                    }
                }
            }
        )*
    };
}

table! {
    config_toml: Place::Config;
    workspace_agents_md: Place::WorkspaceAgents;
    workspace_claude_md: Place::WorkspaceClaude;
    home_agents_md: Place::HomeAgents;
    workspace_hooks_json: Place::WorkspaceHooks;
}
