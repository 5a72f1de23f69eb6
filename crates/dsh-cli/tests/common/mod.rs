//! Shared harness of the end-to-end tests: the real `dsh` binary against the mock server, with
//! a private `DSH_HOME`, a private working directory and stdin at /dev/null.

#![allow(dead_code, clippy::unwrap_used)]

pub mod acp;
pub mod pty_ui;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;

use dsh_session::{Persistence, SessionEvent, SessionId};
use dsh_store_jsonl::JsonlStore;
use dsh_testkit::MockServer;
use serde_json::Value;

/// Environment variables a developer's shell may carry that would change what dsh does.
const SCRUBBED: &[&str] = &[
    "DSH_HOME",
    "DSH_PROVIDER",
    "DSH_MODEL",
    "DSH_EFFORT",
    "DSH_LOG",
    "DSH_LOG_FILE",
    "DSH_STORE_URL",
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
];

/// Prints the environment of the command's parent, then of every ancestor up to dsh.
pub const PROBE: &str = r#"tr '\0' '\n' < /proc/$PPID/environ
p=$$
while [ "$p" -gt 1 ]; do
  echo "== $p $(cat /proc/$p/comm)"
  tr '\0' '\n' < /proc/$p/environ
  if [ "$(cat /proc/$p/comm)" = dsh ]; then echo "probe reached dsh"; break; fi
  p=$(awk '/^PPid:/ {print $2}' /proc/$p/status)
done"#;

pub struct World {
    pub server: MockServer,
    pub home: tempfile::TempDir,
    pub cwd: tempfile::TempDir,
}

impl World {
    /// Adds provider `mock` (no key, model `local-model`) served by `local` to the config.
    pub fn with_local_provider(&self, local: &MockServer) {
        std::fs::write(
            self.home.path().join("config.toml"),
            format!(
                "[providers.mock]\nkind = \"openai-compatible\"\nbase_url = \"{}\"\n\
                 models = [\"local-model\"]\n",
                local.url()
            ),
        )
        .unwrap();
    }

    /// A session held on provider `mock` (see [`World::with_local_provider`]), started by
    /// `dsh run` and answered once by `local`; its id.
    pub fn session_on_local_provider(&self, local: &MockServer) -> String {
        self.with_local_provider(local);
        local.push(dsh_testkit::MockResponse::text("from the local model"));
        let out = self.output(&[
            "run",
            "--output-format",
            "stream-json",
            "--provider",
            "mock",
            "one",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        session_id_of(&json_lines(&out))
    }

    pub fn new() -> Self {
        let cwd = tempfile::tempdir().unwrap();
        // A repository boundary, so AGENTS.md files above the temp dir never leak in.
        std::fs::create_dir(cwd.path().join(".git")).unwrap();
        Self {
            server: MockServer::start(),
            home: tempfile::tempdir().unwrap(),
            cwd,
        }
    }

    /// `dsh ARGS…` with the test environment (key `test`, the mock as DeepSeek's base URL).
    pub fn dsh(&self, args: &[&str]) -> Command {
        let mut cmd = self.bare(args);
        cmd.env("DEEPSEEK_API_KEY", "test");
        cmd
    }

    /// Like [`World::dsh`] but without an API key.
    pub fn bare(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dsh"));
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        cmd.args(args)
            .env("DSH_HOME", self.home.path())
            .env("HOME", self.home.path())
            .env("DEEPSEEK_BASE_URL", self.server.url())
            .current_dir(self.cwd.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    pub fn output(&self, args: &[&str]) -> Output {
        self.dsh(args).output().unwrap()
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.dsh(args).spawn().unwrap()
    }

    pub fn sessions_root(&self) -> PathBuf {
        self.home.path().join("sessions")
    }

    /// Every session file under the sessions root.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(projects) = std::fs::read_dir(self.sessions_root()) else {
            return out;
        };
        for project in projects {
            for file in std::fs::read_dir(project.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                if path.extension().is_some_and(|e| e == "jsonl") {
                    out.push(path);
                }
            }
        }
        out.sort();
        out
    }

    /// The id of the only stored session, read from its file's header line.
    pub fn only_session_id(&self) -> String {
        let files = self.session_files();
        assert_eq!(files.len(), 1, "{files:?}");
        let text = std::fs::read_to_string(&files[0]).unwrap();
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        header["id"].as_str().unwrap().to_owned()
    }

    /// The text of every tool result the model read in request `n` (chat-completions form).
    pub fn tool_results(&self, n: usize) -> Vec<String> {
        self.server.requests()[n]
            .messages()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Loads a stored session through the persistence store (repairing nothing it need not).
    pub fn load(&self, id: &str) -> Vec<Arc<SessionEvent>> {
        let store = JsonlStore::new(self.sessions_root());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let stored = rt.block_on(store.load(&SessionId::new(id))).unwrap();
        stored.events.into_iter().map(Arc::new).collect()
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON lines of a stream-json run.
pub fn json_lines(out: &Output) -> Vec<Value> {
    stdout(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A `bash` call's arguments.
pub fn bash(command: &str) -> String {
    serde_json::json!({"command": command, "description": "run a test command"}).to_string()
}

/// Runs `f` on a small runtime (for the mock server's async waits).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The session id of a stream-json run's result line.
pub fn session_id_of(lines: &[Value]) -> String {
    lines.last().unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// A process on a pseudo-terminal: its terminal's master end and what it writes, chunk by
/// chunk (the reader thread ends once every slave descriptor is closed).
pub struct OnPty {
    pub child: Child,
    pub master: std::fs::File,
    pub bytes: std::sync::mpsc::Receiver<Vec<u8>>,
}

/// Starts `cmd` with a new `rows`×`cols` pseudo-terminal as stdin, stdout and stderr.
pub fn spawn_on_pty(mut cmd: Command, rows: u16, cols: u16) -> OnPty {
    use std::io::Read as _;
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let child = cmd
        .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .unwrap();
    let master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
    let (tx, bytes) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        // Ends with an error (EIO) once every slave descriptor is closed.
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    OnPty {
        child,
        master,
        bytes,
    }
}

/// Waits for `child` to exit, killing it and failing the test when it has not within `bound`.
pub fn wait_within(child: &mut Child, bound: std::time::Duration) -> std::process::ExitStatus {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dsh still running {bound:?} later");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A plain HTTP server on loopback on a thread (these tests have no runtime), answering
/// every request with the same body.
pub fn origin_thread() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let body = "hello from origin\n";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}
