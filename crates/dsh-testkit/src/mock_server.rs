//! A mock OpenAI-compatible HTTP server on real TCP.
//!
//! Real sockets, real HTTP/1.1 and real SSE framing, so adapter tests exercise the same code
//! paths as production (connection setup, chunked bodies, partial reads, disconnects). The
//! server runs on its own thread and runtime: it keeps serving while a test blocks on a child
//! process, and it is unaffected by `tokio::time::pause()` in the test.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::gate::Gate;
use crate::mock_response::{Body, MockResponse, SseFrame};
use crate::validity::check_wire_messages;

/// One request the mock server received.
#[derive(Clone, Debug)]
pub struct MockRequest {
    /// HTTP method.
    pub method: String,
    /// Request target, query included.
    pub path: String,
    /// Headers in arrival order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// When the request (head and body) had fully arrived.
    pub received_at: Instant,
}

impl MockRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body's `messages` array (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

/// Answers a request from what it carries, once the queued responses are used up.
pub type MockResponder = Arc<dyn Fn(&MockRequest) -> MockResponse + Send + Sync>;

struct Shared {
    responses: Mutex<VecDeque<MockResponse>>,
    responder: Mutex<Option<MockResponder>>,
    requests: Mutex<Vec<MockRequest>>,
    violations: Mutex<Vec<String>>,
    received: watch::Sender<usize>,
    disconnects: watch::Sender<usize>,
    models: Mutex<Option<Vec<String>>>,
    /// Serve every request from the script, whatever its method and route.
    any_route: std::sync::atomic::AtomicBool,
}

/// A scripted OpenAI-compatible chat-completions server on `127.0.0.1`.
///
/// `POST …/chat/completions` (or Anthropic's `…/v1/messages`, or OpenAI's `…/responses`)
/// under any path prefix is
/// answered with the next queued
/// [`MockResponse`]; anything else is a 404. Every request is recorded, and every request's
/// history is checked for provider validity (each assistant `tool_calls[i].id` answered by
/// exactly one later `role: tool` message): a violation is recorded and answered `400`
/// without consuming a response. With no response left the answer is a `500` saying so.
/// Each response closes its connection. Dropping the server stops it.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl MockServer {
    /// Binds an ephemeral port on `127.0.0.1` and starts serving on a dedicated thread.
    ///
    /// Panics when the loopback interface cannot be bound: a test cannot proceed without it.
    pub fn start() -> Self {
        let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
            Ok(l) => l,
            Err(e) => panic!("mock server: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr().and_then(|a| {
            listener.set_nonblocking(true)?;
            Ok(a)
        }) {
            Ok(a) => a,
            Err(e) => panic!("mock server: cannot configure the listener: {e}"),
        };
        let shared = Arc::new(Shared {
            responses: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            received: watch::Sender::new(0),
            disconnects: watch::Sender::new(0),
            models: Mutex::new(None),
            any_route: std::sync::atomic::AtomicBool::new(false),
        });
        let shutdown = CancellationToken::new();
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("mock server: cannot build its runtime: {e}"),
        };
        let (task_shared, task_shutdown) = (shared.clone(), shutdown.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("mock-server-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(accept_loop(listener, task_shared, task_shutdown));
            });
        if let Err(e) = spawned {
            panic!("mock server: cannot start its thread: {e}");
        }
        Self {
            addr,
            shared,
            shutdown,
        }
    }

    /// The API root to configure as a base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a response for a later request.
    pub fn push(&self, response: MockResponse) -> &Self {
        self.shared.responses.lock().push_back(response);
        self
    }

    /// Answers requests with `responder` once the queued responses are used up (for loops
    /// whose request order depends on the client, e.g. interleaved compaction calls).
    pub fn respond_with(
        &self,
        responder: impl Fn(&MockRequest) -> MockResponse + Send + Sync + 'static,
    ) -> &Self {
        *self.shared.responder.lock() = Some(Arc::new(responder));
        self
    }

    /// Answers `GET …/models` with `ids` in OpenAI's list shape (as llama.cpp's server and
    /// Ollama do) instead of a 404. The request is recorded like any other.
    pub fn serve_models(&self, ids: &[&str]) -> &Self {
        *self.shared.models.lock() = Some(ids.iter().map(|id| (*id).to_owned()).collect());
        self
    }

    /// Answers every request from the queue (then the responder), whatever its method and
    /// route and without the provider-validity check: a plain web server for tests of HTTP
    /// clients that are not model clients (`web_fetch`, a search API).
    pub fn serve_any_route(&self) -> &Self {
        self.shared
            .any_route
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// Responses not yet used.
    pub fn responses_left(&self) -> usize {
        self.shared.responses.lock().len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<MockRequest> {
        self.shared.requests.lock().clone()
    }

    /// Provider-validity violations found so far.
    pub fn violations(&self) -> Vec<String> {
        self.shared.violations.lock().clone()
    }

    /// How many times a client went away before its response was complete.
    pub fn disconnects(&self) -> usize {
        *self.shared.disconnects.borrow()
    }

    /// Resolves once at least `n` requests have arrived.
    pub async fn wait_for_requests(&self, n: usize) {
        let mut rx = self.shared.received.subscribe();
        // The sender lives in `shared`, which `self` keeps alive.
        let _ = rx.wait_for(|seen| *seen >= n).await;
    }

    /// Resolves once at least `n` clients disconnected mid-response.
    pub async fn wait_for_disconnects(&self, n: usize) {
        let mut rx = self.shared.disconnects.subscribe();
        let _ = rx.wait_for(|seen| *seen >= n).await;
    }

    /// Resolves once a client has disconnected mid-response.
    pub async fn client_disconnected(&self) {
        self.wait_for_disconnects(1).await;
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("mock server: cannot register the listener: {e}");
            return;
        }
    };
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("mock server: accept failed: {e}");
                    continue;
                }
            },
        };
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = serve(stream, &shared) => {}
            }
        });
    }
}

/// A request as read off the socket.
struct Incoming {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

enum ReadOutcome {
    Request(Incoming),
    /// Unparseable or unsupported; answer with this status and message.
    Bad(u16, String),
    /// The client went away before a whole request arrived.
    Closed,
}

async fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let response = match read_request(&mut rd).await {
        ReadOutcome::Closed => return,
        ReadOutcome::Bad(status, message) => fixed_error(status, &message),
        ReadOutcome::Request(incoming) => shared.answer(incoming),
    };
    if write_response(&response, &mut rd, &mut wr).await.is_err() {
        shared.disconnects.send_modify(|n| *n += 1);
        return;
    }
    let _ = wr.shutdown().await;
}

impl Shared {
    /// Records the request and picks its answer.
    fn answer(&self, incoming: Incoming) -> MockResponse {
        let body: Value = serde_json::from_slice(&incoming.body).unwrap_or(Value::Null);
        let route = incoming
            .path
            .split('?')
            .next()
            .unwrap_or_default()
            .to_owned();
        let request = MockRequest {
            method: incoming.method,
            path: incoming.path,
            headers: incoming.headers,
            body,
            received_at: Instant::now(),
        };
        let number = {
            let mut requests = self.requests.lock();
            requests.push(request.clone());
            requests.len()
        };
        self.received.send_replace(number);
        if !self.any_route.load(std::sync::atomic::Ordering::SeqCst) {
            return self.model_route(request, &route, number);
        }
        self.scripted(&request, number)
    }

    /// The answer of a model API: the models list, a scripted answer to a provider-valid
    /// request, or an error naming what is wrong.
    fn model_route(&self, request: MockRequest, route: &str, number: usize) -> MockResponse {
        if request.method == "GET"
            && route.ends_with("/models")
            && let Some(ids) = self.models.lock().clone()
        {
            let data: Vec<Value> = ids
                .iter()
                .map(|id| json!({"id": id, "object": "model", "owned_by": "mock"}))
                .collect();
            return MockResponse::error(200, json!({"object": "list", "data": data}).to_string());
        }
        let known = route.ends_with("/chat/completions")
            || route.ends_with("/v1/messages")
            || route.ends_with("/responses");
        if request.method != "POST" || !known {
            return fixed_error(
                404,
                &format!(
                    "mock server: no route for {} {}",
                    request.method, request.path
                ),
            );
        }
        if request.body.is_null() {
            return fixed_error(400, "mock server: the request body is not JSON");
        }
        let mut violations = check_wire_messages(request.messages());
        if let Some(input) = request.body.get("input").and_then(Value::as_array) {
            violations.extend(crate::validity::check_response_items(input));
        }
        if !violations.is_empty() {
            let message = format!(
                "mock server: request #{number} is not provider-valid: {}",
                violations.join("; ")
            );
            self.violations.lock().extend(violations);
            return fixed_error(400, &message);
        }
        self.scripted(&request, number)
    }

    /// The next queued response, else the responder's.
    fn scripted(&self, request: &MockRequest, number: usize) -> MockResponse {
        let queued = self.responses.lock().pop_front();
        let responder = self.responder.lock().clone();
        match queued.or_else(|| responder.map(|r| r(request))) {
            Some(response) => response,
            None => fixed_error(
                500,
                &format!("mock server: no scripted response left for request #{number}"),
            ),
        }
    }
}

fn fixed_error(status: u16, message: &str) -> MockResponse {
    MockResponse::error(
        status,
        json!({"error": {"message": message, "type": "mock_server_error", "code": null}})
            .to_string(),
    )
}

async fn read_request(rd: &mut OwnedReadHalf) -> ReadOutcome {
    const MAX_HEAD: usize = 1 << 20;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut tmp = vec![0u8; 16 * 1024];
    loop {
        match rd.read(&mut tmp).await {
            Ok(0) | Err(_) => return ReadOutcome::Closed,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD => continue,
            Ok(httparse::Status::Partial) => {
                return ReadOutcome::Bad(431, "mock server: request head too large".into());
            }
            Err(e) => return ReadOutcome::Bad(400, format!("mock server: bad request: {e}")),
        };
        let method = req.method.unwrap_or_default().to_owned();
        let path = req.path.unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = req
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let find = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        if find("transfer-encoding").is_some() {
            return ReadOutcome::Bad(411, "mock server: send a Content-Length body".into());
        }
        let length: usize = match find("content-length").map(|v| v.trim().parse()) {
            None => 0,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                return ReadOutcome::Bad(400, "mock server: bad Content-Length".into());
            }
        };
        let mut body = buf.split_off(head_len);
        while body.len() < length {
            match rd.read(&mut tmp).await {
                Ok(0) | Err(_) => return ReadOutcome::Closed,
                Ok(n) => body.extend_from_slice(&tmp[..n]),
            }
        }
        body.truncate(length);
        return ReadOutcome::Request(Incoming {
            method,
            path,
            headers,
            body,
        });
    }
}

/// The client went away.
struct Disconnected;

impl From<std::io::Error> for Disconnected {
    fn from(_: std::io::Error) -> Self {
        Disconnected
    }
}

async fn write_response(
    response: &MockResponse,
    rd: &mut OwnedReadHalf,
    wr: &mut OwnedWriteHalf,
) -> Result<(), Disconnected> {
    if let Some(gate) = &response.hold_headers {
        hold(gate, rd).await?;
    }
    match &response.body {
        Body::Raw(bytes) => {
            wr.write_all(bytes).await?;
        }
        Body::Fixed { status, body } => {
            let mut head = status_line(*status);
            head.push_str("content-type: application/json\r\n");
            head.push_str(&format!("content-length: {}\r\n", body.len()));
            push_headers(&mut head, &response.headers);
            wr.write_all(head.as_bytes()).await?;
            wr.write_all(body.as_bytes()).await?;
        }
        Body::Sse { frames, holds, cut } => {
            let mut head = status_line(200);
            head.push_str("content-type: text/event-stream\r\n");
            head.push_str("cache-control: no-cache\r\n");
            head.push_str("transfer-encoding: chunked\r\n");
            push_headers(&mut head, &response.headers);
            wr.write_all(head.as_bytes()).await?;
            wr.flush().await?;
            for (i, frame) in frames.iter().enumerate() {
                for (_, gate) in holds.iter().filter(|(n, _)| *n == i) {
                    hold(gate, rd).await?;
                }
                write_chunk(wr, frame).await?;
            }
            for (_, gate) in holds.iter().filter(|(n, _)| *n >= frames.len()) {
                hold(gate, rd).await?;
            }
            if let Some(gate) = &response.hold_end {
                wr.flush().await?;
                hold(gate, rd).await?;
            }
            if !cut {
                wr.write_all(b"0\r\n\r\n").await?;
            }
            wr.flush().await?;
            return Ok(());
        }
    }
    wr.flush().await?;
    if let Some(gate) = &response.hold_end {
        hold(gate, rd).await?;
    }
    Ok(())
}

async fn write_chunk(wr: &mut OwnedWriteHalf, frame: &SseFrame) -> Result<(), Disconnected> {
    let bytes = frame.to_bytes();
    if bytes.is_empty() {
        return Ok(());
    }
    let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
    chunk.extend_from_slice(&bytes);
    chunk.extend_from_slice(b"\r\n");
    wr.write_all(&chunk).await?;
    wr.flush().await?;
    Ok(())
}

/// Waits at `gate` while watching the socket: a client that closes its side meanwhile is a
/// disconnect (the request was fully read, so any read completing means EOF or error).
async fn hold(gate: &Gate, rd: &mut OwnedReadHalf) -> Result<(), Disconnected> {
    let mut scratch = [0u8; 1024];
    let watch_close = async {
        loop {
            match rd.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        _ = gate.pass() => Ok(()),
        _ = watch_close => Err(Disconnected),
    }
}

fn status_line(status: u16) -> String {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        411 => "Length Required",
        413 => "Payload Too Large",
        418 => "I'm a teapot",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    };
    format!("HTTP/1.1 {status} {reason}\r\nconnection: close\r\n")
}

fn push_headers(head: &mut String, headers: &[(String, String)]) {
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
}
