//! `web_fetch` against a real HTTP server on 127.0.0.1: redirects, bounds, HTML as Markdown,
//! binary refused, and a name that resolves to a private address refused.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use dsh_fetch::{FetchLimits, WebFetchTool};
use dsh_testkit::{MockResponse, MockServer};
use dsh_tools::{Tool, ToolCallContext, ToolOutput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn http(status: &str, headers: &[(&str, &str)], body: &str) -> MockResponse {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    MockResponse::raw(format!("{head}Connection: close\r\n\r\n{body}"))
}

async fn fetch(tool: &WebFetchTool, url: &str) -> Result<ToolOutput, String> {
    let args = json!({ "url": url });
    let call = ToolCallContext::new(
        "c1".into(),
        "web_fetch",
        args.to_string(),
        None,
        CancellationToken::new(),
    );
    dsh_testkit::bounded(Tool::execute(tool, args, &call))
        .await
        .map_err(|e| e.message)
}

fn text(out: &ToolOutput) -> String {
    out.content
        .iter()
        .filter_map(dsh_session::ContentBlock::as_text)
        .collect()
}

/// A plain web server on 127.0.0.1 answering from its script.
fn web() -> MockServer {
    let server = MockServer::start();
    server.serve_any_route();
    server
}

fn tool() -> WebFetchTool {
    WebFetchTool::new(FetchLimits::default())
}

#[tokio::test]
async fn a_page_comes_back_as_markdown_with_its_url() {
    let server = web();
    server.push(http(
        "200 OK",
        &[("Content-Type", "text/html; charset=utf-8")],
        "<html><body><h1>Guide</h1><p>Use <a href=\"/x\">this</a>.</p><script>x()</script></body></html>",
    ));
    let out = fetch(&tool(), &format!("{}/guide", server.url()))
        .await
        .unwrap();
    let text = text(&out);
    assert!(
        text.starts_with(&format!("URL: {}/guide\n", server.url())),
        "{text}"
    );
    assert!(
        text.contains("Content-Type: text/html\n\n# Guide"),
        "{text}"
    );
    assert!(text.contains("Use [this](/x)."), "{text}");
    assert!(!text.contains("x()"), "{text}");
    let meta = out.meta.unwrap();
    assert_eq!(meta["status"], 200);
    assert_eq!(meta["truncated"], false);
    // Nothing of dsh's own goes out with the request: no cookie, no authorization.
    let request = &server.requests()[0];
    assert_eq!(request.header("cookie"), None);
    assert_eq!(request.header("authorization"), None);
    assert!(request.header("user-agent").unwrap().starts_with("dsh/"));
}

#[tokio::test]
async fn redirects_are_followed_up_to_the_limit() {
    let server = web();
    server
        .push(http("302 Found", &[("Location", "/b")], ""))
        .push(http("301 Moved", &[("Location", "/c")], ""))
        .push(http("200 OK", &[("Content-Type", "text/plain")], "arrived"));
    let out = fetch(&tool(), &format!("{}/a", server.url()))
        .await
        .unwrap();
    assert!(text(&out).ends_with("arrived"), "{}", text(&out));
    assert_eq!(out.meta.unwrap()["finalUrl"], format!("{}/c", server.url()));

    let looping = web();
    looping.respond_with(|_| http("302 Found", &[("Location", "/again")], ""));
    let limits = FetchLimits {
        max_redirects: 3,
        ..FetchLimits::default()
    };
    let err = fetch(&WebFetchTool::new(limits), &looping.url())
        .await
        .unwrap_err();
    assert!(err.contains("more than 3 redirects"), "{err}");
    assert_eq!(looping.requests().len(), 4);
}

#[tokio::test]
async fn a_redirect_to_a_private_address_the_request_did_not_name_is_not_followed() {
    let server = web();
    server.push(http(
        "302 Found",
        &[("Location", "http://169.254.169.254/latest/meta-data/")],
        "",
    ));
    let err = fetch(&tool(), &server.url()).await.unwrap_err();
    assert!(err.contains("was not followed"), "{err}");
    assert!(
        err.contains("169.254.169.254 is this machine or a private network"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_body_past_the_byte_limit_is_cut_and_says_so() {
    let server = web();
    server.push(http(
        "200 OK",
        &[("Content-Type", "text/plain")],
        &"x".repeat(5000),
    ));
    let limits = FetchLimits {
        max_bytes: 1000,
        ..FetchLimits::default()
    };
    let out = fetch(&WebFetchTool::new(limits), &server.url())
        .await
        .unwrap();
    let text = text(&out);
    let body = text.split_once("\n\n").unwrap().1;
    assert_eq!(body.matches('x').count(), 1000, "{text}");
    assert!(
        text.contains("[web_fetch: the page is larger than 1000 bytes"),
        "{text}"
    );
    assert_eq!(out.meta.unwrap()["truncated"], true);
}

#[tokio::test]
async fn text_past_the_character_limit_is_cut() {
    let server = web();
    server.push(http(
        "200 OK",
        &[("Content-Type", "application/json")],
        &format!("[{}]", "1,".repeat(100) + "1"),
    ));
    let limits = FetchLimits {
        max_chars: 50,
        ..FetchLimits::default()
    };
    let out = fetch(&WebFetchTool::new(limits), &server.url())
        .await
        .unwrap();
    assert!(
        text(&out).contains("longer than 50 characters and was cut"),
        "{}",
        text(&out)
    );
}

#[tokio::test]
async fn binary_content_is_refused_with_its_type_and_size() {
    let server = web();
    server.push(http(
        "200 OK",
        &[("Content-Type", "image/png")],
        "\u{1}PNG-bytes",
    ));
    let err = fetch(&tool(), &server.url()).await.unwrap_err();
    assert!(err.contains("does not show binary content"), "{err}");
    assert!(err.contains("image/png (10 bytes)"), "{err}");
}

#[tokio::test]
async fn an_error_status_is_a_page_with_its_status() {
    let server = web();
    server.push(http(
        "404 Not Found",
        &[("Content-Type", "text/plain")],
        "no such page",
    ));
    let out = fetch(&tool(), &server.url()).await.unwrap();
    assert!(
        text(&out).contains("Status: 404 Not Found\n"),
        "{}",
        text(&out)
    );
    assert!(text(&out).ends_with("no such page"));
}

#[tokio::test]
async fn urls_it_cannot_fetch_are_refused_before_any_connection() {
    for (url, why) in [
        ("file:///etc/passwd", "only http and https"),
        ("http://user:secret@example.com/", "credentials"),
        ("not a url", "not a URL web_fetch can fetch"),
    ] {
        let err = fetch(&tool(), url).await.unwrap_err();
        assert!(err.contains(why), "{url}: {err}");
    }
}

#[tokio::test]
async fn a_name_that_resolves_to_a_private_address_is_refused_at_connection() {
    let server = web();
    let addr: SocketAddr = server.addr();
    // A DNS answer pointing a harmless-looking name at this machine.
    let tool = WebFetchTool::with_lookup(
        FetchLimits::default(),
        Arc::new(move |_| Box::pin(async move { Ok(vec![addr]) })),
    );
    let err = fetch(&tool, &format!("http://docs.example:{}/", addr.port()))
        .await
        .unwrap_err();
    assert!(err.contains("docs.example resolves to 127.0.0.1"), "{err}");
    assert!(server.requests().is_empty());
}

#[test]
fn it_declares_the_host_it_reaches() {
    let effects = Tool::effects(&tool(), &json!({"url": "https://Docs.RS/tokio"}));
    assert_eq!(effects.network(), ["docs.rs"]);
    assert!(effects.is_read_only());
    let none = Tool::effects(&tool(), &Value::String("{bad".into()));
    assert!(none.network().is_empty());
}
