//! A `dsh acp` child and a minimal JSON-RPC client on its stdio.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use super::World;

/// Bound on waiting for one frame, so a broken server fails the test instead of hanging it.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(60);

/// A `dsh acp` child and a minimal JSON-RPC client on its stdio. Every stdout line must be a
/// JSON-RPC 2.0 frame; notifications received while waiting for a response are kept in `seen`.
pub struct Acp {
    pub child: Child,
    stdin: Option<ChildStdin>,
    pub frames: mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
    pub seen: Vec<Value>,
    next_id: u64,
}

impl Acp {
    pub fn spawn(w: &World) -> Acp {
        Self::spawn_with(w, &[])
    }

    /// `dsh acp` with extra arguments.
    pub fn spawn_with(w: &World, args: &[&str]) -> Acp {
        let mut argv = vec!["acp"];
        argv.extend(args);
        let mut child = w
            .dsh(&argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        Acp {
            child,
            stdin,
            frames,
            reader: Some(reader),
            seen: Vec::new(),
            next_id: 0,
        }
    }

    pub fn send(&mut self, frame: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{frame}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to request `id`.
    pub fn response(&mut self, id: u64) -> Value {
        loop {
            let line = self.frames.recv_timeout(FRAME_DEADLINE).unwrap();
            let frame: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
            assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return frame;
            }
            self.seen.push(frame);
        }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(id)
    }

    pub fn initialize(&mut self) {
        let init = self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    }

    pub fn new_session(&mut self, w: &World) -> String {
        let cwd = w.cwd.path().canonicalize().unwrap();
        let created = self.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
        created["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// A session whose editor sends one stdio MCP server, `t`: the test server.
    pub fn new_session_with_test_server(&mut self, w: &World) -> String {
        let cwd = w.cwd.path().canonicalize().unwrap();
        let server = env!("CARGO_BIN_EXE_dsh-cli-mcp-test-server");
        let created = self.call(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [
                {"name": "t", "command": server, "args": [], "env": []}
            ]}),
        );
        created["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    pub fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    pub fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits (polling, with a bounded deadline) for the process to exit; kills it and fails
    /// when it does not. Returns the status and what it wrote to stderr.
    pub fn exit(&mut self, deadline: Duration) -> (ExitStatus, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "dsh acp still running {deadline:?} later; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status, self.stderr())
    }

    pub fn stderr(&mut self) -> String {
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }

    /// Closes stdin (the editor hangs up) and waits for the process to exit.
    pub fn hang_up(&mut self) -> (ExitStatus, String) {
        drop(self.stdin.take());
        let exited = self.exit(FRAME_DEADLINE);
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        exited
    }
}
