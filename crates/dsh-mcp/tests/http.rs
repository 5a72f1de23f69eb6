//! The streamable HTTP transport against a minimal MCP endpoint on 127.0.0.1: JSON responses,
//! a session id, `202` for notifications, no server-initiated stream.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use dsh_mcp::{ApprovalMode, McpOptions, ServerConfig, ServerState, Transport};
use dsh_testkit::Script;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The endpoint; records the `authorization` header of every request.
struct Endpoint {
    url: String,
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
}

async fn endpoint() -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let authorizations: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen = authorizations.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, seen.clone()));
        }
    });
    Endpoint {
        url,
        authorizations,
    }
}

/// One request per connection (`Connection: close`), enough for a client test.
async fn serve(mut stream: TcpStream, seen: Arc<Mutex<Vec<Option<String>>>>) {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let method = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    seen.lock().push(header("authorization"));
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value =
        serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
    let (status, reply) = match method.as_str() {
        "POST" => answer(&body),
        "DELETE" => ("200 OK", None),
        _ => ("405 Method Not Allowed", None),
    };
    let payload = reply.map(|r| r.to_string()).unwrap_or_default();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nmcp-session-id: s-1\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn answer(request: &Value) -> (&'static str, Option<Value>) {
    let Some(id) = request.get("id") else {
        return ("202 Accepted", None);
    };
    let result = match request["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "http-test", "version": "1"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "hello",
            "description": "Says hello.",
            "inputSchema": {"type": "object", "properties": {}}
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "hello over http"}]}),
        other => {
            return (
                "200 OK",
                Some(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("no method {other}")}})),
            );
        }
    };
    (
        "200 OK",
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
}

fn http_server(url: &str, token_var: &str) -> ServerConfig {
    let mut config = ServerConfig::http("h", url);
    config.approval = ApprovalMode::Approve;
    if let Transport::Http {
        bearer_token_env_var,
        ..
    } = &mut config.transport
    {
        *bearer_token_env_var = Some(token_var.to_owned());
    }
    config
}

fn options_with_token(var: &'static str, value: &'static str) -> McpOptions {
    let mut options = McpOptions::new(std::env::temp_dir());
    options.lookup = Arc::new(move |name| (name == var).then(|| value.to_owned()));
    options
}

#[tokio::test]
async fn an_http_server_is_reached_with_the_bearer_token_of_the_named_variable() {
    let endpoint = endpoint().await;
    let w = world_with_options(
        vec![http_server(&endpoint.url, "DOCS_TOKEN")],
        options_with_token("DOCS_TOKEN", "sekret"),
    )
    .await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__h__hello", "{}"))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    assert_eq!(tool_results(handle.agent())[0].1, "hello over http");
    let seen = endpoint.authorizations.lock().clone();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|a| a.as_deref() == Some("Bearer sekret")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_missing_token_variable_fails_that_server_by_name() {
    let endpoint = endpoint().await;
    let w = world_with_options(
        vec![http_server(&endpoint.url, "UNSET_TOKEN")],
        options_with_token("OTHER", "x"),
    )
    .await;
    w.servers().settled().await;
    let status = w.servers().statuses().remove(0);
    let ServerState::Failed(reason) = status.state else {
        panic!("{status:?}")
    };
    assert!(reason.contains("UNSET_TOKEN is not set"), "{reason}");
    assert!(
        endpoint.authorizations.lock().is_empty(),
        "nothing was sent"
    );
}
