#![allow(clippy::unwrap_used)]
//! Signals during `dsh run`: the first one stops gracefully and leaves a balanced session file;
//! a second one exits at once.

mod common;

use std::io::Read;
use std::sync::Arc;

use common::{World, bash, block_on, json_lines, session_id_of, stderr};
use dsh_session::{CancelCause, EventKind, SessionEvent, TurnEndReason};
use dsh_testkit::MockResponse;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The events exactly as they are on disk (no repair), header line skipped.
fn raw_events(w: &World) -> Vec<Arc<SessionEvent>> {
    let files = w.session_files();
    assert_eq!(files.len(), 1);
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| Arc::new(serde_json::from_str(l).unwrap()))
        .collect()
}

/// Reads a FIFO to its end. Opening blocks until the writer comes, so it happens on a helper
/// thread with a deadline: if dsh went away instead, the test fails with its stderr rather
/// than hanging.
fn read_fifo(path: &std::path::Path, child: &mut std::process::Child) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let fifo = path.to_owned();
    std::thread::spawn(move || {
        let mut text = String::new();
        let read = std::fs::File::open(&fifo).and_then(|mut f| f.read_to_string(&mut text));
        let _ = tx.send(read.map(|_| text));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(text) => text.unwrap(),
        Err(_) => {
            let status = child.try_wait();
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!(
                "nothing was written to {}; dsh ({status:?}) stderr:\n{err}",
                path.display()
            );
        }
    }
}

fn last_turn_end(events: &[Arc<SessionEvent>]) -> TurnEndReason {
    events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::TurnEnd(t) => Some(t.reason.clone()),
            _ => None,
        })
        .unwrap()
}

fn signal_during_held_stream(sig: Signal) -> (std::process::Output, World) {
    let w = World::new();
    let (held, hold) = MockResponse::text("this answer never finishes").hold_after(3);
    w.server.push(held);
    let child = w.spawn(&["run", "--output-format", "stream-json", "wait for it"]);
    block_on(hold.reached());
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    let out = child.wait_with_output().unwrap();
    (out, w)
}

#[test]
fn sigint_during_a_held_stream_exits_130_with_a_balanced_session_file() {
    let (out, w) = signal_during_held_stream(Signal::SIGINT);
    assert_eq!(out.status.code(), Some(130), "stderr: {}", stderr(&out));
    assert_eq!(stderr(&out), "", "a graceful stop logs nothing");
    let lines = json_lines(&out);
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["exitCode"], 130);
    let on_disk = raw_events(&w);
    dsh_session::check_balanced(&on_disk).unwrap();
    assert_eq!(
        last_turn_end(&on_disk),
        TurnEndReason::Aborted {
            reason: CancelCause::User
        }
    );
    // Loading needed no repair: the store returns exactly what was written.
    let loaded = w.load(&session_id_of(&lines));
    assert_eq!(loaded.len(), on_disk.len());
}

#[test]
fn sigterm_during_a_held_stream_exits_143_with_a_balanced_session_file() {
    let (out, w) = signal_during_held_stream(Signal::SIGTERM);
    assert_eq!(out.status.code(), Some(143), "stderr: {}", stderr(&out));
    assert_eq!(stderr(&out), "", "a graceful stop logs nothing");
    let on_disk = raw_events(&w);
    dsh_session::check_balanced(&on_disk).unwrap();
    assert_eq!(
        last_turn_end(&on_disk),
        TurnEndReason::Aborted {
            reason: CancelCause::Disposed
        }
    );
}

#[test]
fn a_second_sigint_exits_without_waiting_for_the_drain() {
    let w = World::new();
    let started = w.cwd.path().join("started");
    let terminated = w.cwd.path().join("terminated");
    for fifo in [&started, &terminated] {
        nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    }
    // The command announces its start and the SIGTERM of the cancel ladder through FIFOs (the
    // test learns both without sleeping), then keeps running until the ladder's SIGKILL, so
    // the drain is still in progress when the second signal arrives.
    // The trap is set before the start is announced, and the announced state is the `wait`
    // builtin (which a trapped signal interrupts at once), never a fork: a SIGTERM that lands
    // while bash forks a foreground child can be swallowed by the child before its exec.
    let command = format!(
        "trap 'echo term > {t}' TERM; sleep 30 & echo started > {s}; wait; sleep 30",
        s = started.display(),
        t = terminated.display()
    );
    w.server
        .push(MockResponse::tool_call("call_1", "bash", &bash(&command)));
    let mut child = w.spawn(&["run", "stubborn"]);
    let pid = Pid::from_raw(child.id() as i32);
    assert_eq!(read_fifo(&started, &mut child).trim(), "started");
    kill(pid, Signal::SIGINT).unwrap();
    // The first signal was handled: the turn's cancellation reached the command.
    assert_eq!(read_fifo(&terminated, &mut child).trim(), "term");
    kill(pid, Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "stderr: {}", stderr(&out));
    // The turn never closed on disk; the next load repairs it (the call's outcome is unknown).
    let on_disk = raw_events(&w);
    assert!(dsh_session::check_balanced(&on_disk).is_err());
    let id = w.only_session_id();
    let repaired = w.load(&id);
    dsh_session::check_balanced(&repaired).unwrap();
    assert_eq!(last_turn_end(&repaired), TurnEndReason::Interrupted);
}

#[test]
fn sigint_while_a_stalled_mcp_server_holds_the_first_request_exits_130_at_once() {
    let w = World::new();
    let fifo = w.cwd.path().join("started");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // A server that starts, says so, and never answers `initialize`: the first request waits
    // for it (up to its 60 s start-up timeout).
    std::fs::write(
        w.home.path().join("config.toml"),
        format!(
            "[mcp_servers.stall]\ncommand = \"bash\"\nargs = [\"-c\", \"echo up > {}; exec sleep 600\"]\n\
             startup_timeout_sec = 60\n",
            fifo.display()
        ),
    )
    .unwrap();
    let mut child = w.spawn(&["run", "hello"]);
    assert_eq!(read_fifo(&fifo, &mut child).trim(), "up");
    let signalled = std::time::Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = common::wait_within(&mut child, std::time::Duration::from_secs(30));
    let took = signalled.elapsed();
    assert_eq!(status.code(), Some(130), "{}", stderr_of(&mut child));
    // Not the start-up timeout and not the 5 s drain: the wait gave up with the turn.
    assert!(
        took < std::time::Duration::from_secs(3),
        "exited {took:?} after SIGINT"
    );
    assert!(w.server.requests().is_empty());
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    err
}
