//! The real `dsh web` binary as a child process pointed at the mock model server, and the
//! clients the tests talk to it with: raw HTTP (to send any `Host`), and JSON-RPC over a
//! WebSocket.

#![allow(dead_code, clippy::unwrap_used)]

pub mod chromium;
pub mod firefox;
pub mod fixtures;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use dsh_testkit::{MockServer, bounded};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};

/// The token every test server uses (`DSH_WEB_TOKEN`).
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `dsh web`.
pub struct Web {
    pub process: tokio::process::Child,
    pub home: tempfile::TempDir,
    pub workspace: PathBuf,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
}

/// Options of [`start_with`].
#[derive(Default)]
pub struct Launch {
    /// Reuse this `DSH_HOME` (its stored sessions).
    pub home: Option<tempfile::TempDir>,
    /// Extra arguments after `web`.
    pub args: Vec<String>,
}

pub async fn start(server: &MockServer) -> Web {
    start_with(server, Launch::default()).await
}

pub async fn start_with(server: &MockServer, launch: Launch) -> Web {
    let home = launch.home.unwrap_or_else(|| tempfile::tempdir().unwrap());
    let workspace = home.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let stderr = home.path().join("stderr.log");
    let mut command = tokio::process::Command::new(dsh_testkit::dsh_binary());
    command
        .args(["web", "--port", "0", "--no-open"])
        .args(&launch.args)
        .current_dir(&workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("DSH_HOME", home.path())
        .env("DSH_LOG", "debug")
        .env("DSH_WEB_TOKEN", TOKEN)
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "test-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .kill_on_drop(true);
    let mut process = command.spawn().unwrap();
    let stdout = process.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = bounded(lines.next_line())
        .await
        .unwrap()
        .unwrap_or_else(|| {
            panic!(
                "dsh web printed no URL; stderr:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            )
        });
    let url = line.strip_prefix("dsh web: ").unwrap();
    assert!(url.ends_with(&format!("?token={TOKEN}")), "{url}");
    let authority = url
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let addr = authority.parse().unwrap();
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Web {
        process,
        home,
        workspace,
        addr,
        stderr,
    }
}

/// A raw HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Web {
    /// `Host` as a browser would send it.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// The page's own origin.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `GET path` with exactly these headers (`Host` included, so a test can lie about it).
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut stream = bounded(TcpStream::connect(self.addr)).await.unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        bounded(stream.read_to_end(&mut raw)).await.unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        Answer {
            status,
            headers,
            body: raw[split + 4..].to_vec(),
        }
    }

    /// Opens `/acp` with `headers`; the handshake's HTTP status when it is refused.
    pub async fn socket(&self, headers: &[(&'static str, &str)]) -> Result<Rpc, u16> {
        let mut request = format!("ws://{}/acp", self.addr)
            .into_client_request()
            .unwrap();
        for (name, value) in headers {
            request
                .headers_mut()
                .insert(*name, HeaderValue::from_str(value).unwrap());
        }
        match bounded(tokio_tungstenite::connect_async(request)).await {
            Ok((ws, _)) => Ok(Rpc {
                ws,
                next_id: 0,
                inbox: VecDeque::new(),
            }),
            Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
            Err(e) => panic!("WebSocket handshake failed: {e}"),
        }
    }

    /// A WebSocket as the page opens it (cookie, own origin), initialized.
    pub async fn page_socket(&self) -> Rpc {
        let cookie = format!("dsh_web_{}={TOKEN}", self.addr.port());
        let origin = self.origin();
        let mut rpc = self
            .socket(&[("cookie", &cookie), ("origin", &origin)])
            .await
            .unwrap();
        rpc.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
        .unwrap();
        rpc
    }

    /// Stops the server with SIGTERM and returns its exit code (bounded).
    pub async fn stop(mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.process.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = bounded(self.process.wait()).await.unwrap();
        status.code()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The session file of `id` under `$DSH_HOME/sessions`.
    pub fn session_file(&self, id: &str) -> PathBuf {
        find(&self.home.path().join("sessions"), &format!("{id}.jsonl"))
            .unwrap_or_else(|| panic!("no session file for {id}"))
    }
}

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// JSON-RPC over one WebSocket, frames as JSON values.
pub struct Rpc {
    ws: Socket,
    next_id: u64,
    /// Frames received while waiting for something else, in order.
    pub inbox: VecDeque<Value>,
}

impl Rpc {
    pub async fn send(&mut self, frame: Value) {
        self.ws
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }

    /// The next frame from the server (bounded wait). `None` when the socket closed.
    pub async fn recv(&mut self) -> Option<Value> {
        if let Some(frame) = self.inbox.pop_front() {
            return Some(frame);
        }
        loop {
            match bounded(self.ws.next()).await {
                Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    }

    /// Sends a request; waits for its answer, keeping every other frame in the inbox.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut kept = VecDeque::new();
        let answer = loop {
            let frame = self.recv_wire().await.expect("the socket closed");
            if frame.get("id") == Some(&json!(id)) && frame.get("method").is_none() {
                break frame;
            }
            kept.push_back(frame);
        };
        self.inbox.extend(kept);
        match answer.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(answer["result"].clone()),
        }
    }

    /// Sends a request without waiting; returns its id.
    pub async fn start(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn recv_wire(&mut self) -> Option<Value> {
        loop {
            match bounded(self.ws.next()).await {
                Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    }

    /// The first frame (inbox first, then the wire) that `matches`; frames before it are
    /// returned too, in order.
    pub async fn until(&mut self, matches: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let frame = self.recv().await.expect("the socket closed");
            if matches(&frame) {
                return (frame, before);
            }
            before.push(frame);
        }
    }

    /// Closes the socket.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

/// Whether `frame` is a `session/update` of kind `kind`.
pub fn is_update(frame: &Value, kind: &str) -> bool {
    frame["method"] == "session/update" && frame["params"]["update"]["sessionUpdate"] == kind
}

/// The agent's message text in `frames`.
pub fn agent_text(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| is_update(f, "agent_message_chunk"))
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// A prompt's params.
pub fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// How long the tests allow a stop to take.
pub const EXIT: Duration = Duration::from_secs(15);

/// Whether a JavaScript value the page returned counts as true (what a browser `until` waits
/// for): `null`, `false`, `0` and `""` do not.
pub fn truthy(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => false,
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        serde_json::Value::String(s) => !s.is_empty(),
        _ => true,
    }
}
