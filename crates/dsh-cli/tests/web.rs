#![allow(clippy::unwrap_used)]
//! The web tools end to end: `dsh run` whose model calls `web_fetch` and `web_search`, under
//! the guard, against local stand-ins for the web and a search API.

mod common;

use common::{World, stderr, stdout};
use dsh_testkit::{MockResponse, MockServer};
use serde_json::json;

/// A plain web server on 127.0.0.1 serving one HTML page.
fn site() -> MockServer {
    let server = MockServer::start();
    server.serve_any_route();
    let body = "<html><body><h1>Release notes</h1><p>Version 2 is out.</p></body></html>";
    server.respond_with(move |_| {
        MockResponse::raw(format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        ))
    });
    server
}

fn config(w: &World, text: &str) {
    std::fs::write(w.home.path().join("config.toml"), text).unwrap();
}

/// What the model read as the result of its first call.
fn first_result(w: &World) -> String {
    serde_json::to_string(w.server.requests()[1].messages()).unwrap()
}

fn fetch_then_answer(w: &World, url: &str) {
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "web_fetch",
            &json!({ "url": url }).to_string(),
        ))
        .push(MockResponse::text("Read it."));
}

#[test]
fn a_page_on_this_machine_is_fetched_only_when_a_rule_allows_it() {
    let web = site();
    let url = format!("{}/notes", web.url());

    // `dsh run` cannot ask anyone: reaching this machine is refused with the reason.
    let w = World::new();
    fetch_then_answer(&w, &url);
    let out = w.output(&["run", "read", "the", "notes"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let seen = first_result(&w);
    assert!(seen.contains("this machine or a private network"), "{seen}");
    assert!(web.requests().is_empty(), "the page was fetched");

    // With an allow rule for that host the page reaches the model as Markdown.
    let w = World::new();
    config(
        &w,
        "[permissions]\nallow = [\"web_fetch(domain:127.0.0.1)\"]\n",
    );
    fetch_then_answer(&w, &url);
    let out = w.output(&["run", "read", "the", "notes"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "Read it.\n");
    let seen = first_result(&w);
    assert!(seen.contains("# Release notes"), "{seen}");
    assert!(seen.contains("Version 2 is out."), "{seen}");
    assert_eq!(web.requests().len(), 1);
}

#[test]
fn with_the_network_off_web_fetch_is_refused_even_where_a_rule_would_ask() {
    let web = site();
    let w = World::new();
    config(&w, "[sandbox]\nnetwork = false\n");
    fetch_then_answer(&w, &format!("{}/notes", web.url()));
    let out = w.output(&["run", "read"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let seen = first_result(&w);
    assert!(seen.contains("the network is off"), "{seen}");
    assert!(web.requests().is_empty());
}

#[test]
fn web_search_is_offered_when_configured_and_its_key_stays_out_of_commands() {
    let api = MockServer::start();
    api.serve_any_route();
    api.push(MockResponse::error(
        200,
        json!({"results": [{"title": "Tokio", "url": "https://tokio.rs/", "text": "runtime"}]})
            .to_string(),
    ));
    let w = World::new();
    config(
        &w,
        &format!(
            "[web_search]\nprovider = \"exa\"\nbase_url = \"{}\"\n",
            api.url()
        ),
    );
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "web_search",
            r#"{"query":"tokio"}"#,
        ))
        .push(MockResponse::tool_call(
            "call_2",
            "bash",
            &common::bash("env | grep -c EXA_API_KEY || true"),
        ))
        .push(MockResponse::text("Found."));
    let out = w
        .dsh(&["run", "search"])
        .env("EXA_API_KEY", "exa-secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    let tools = serde_json::to_string(&requests[0].body["tools"]).unwrap();
    assert!(tools.contains("\"web_search\""), "{tools}");
    let seen = serde_json::to_string(requests[1].messages()).unwrap();
    assert!(seen.contains("1. Tokio"), "{seen}");
    assert_eq!(api.requests()[0].header("x-api-key"), Some("exa-secret"));
    let env_count = serde_json::to_string(requests[2].messages()).unwrap();
    assert!(!env_count.contains("exa-secret"), "{env_count}");

    // Without the table the tool is not offered at all.
    let plain = World::new();
    plain.server.push(MockResponse::text("ok"));
    let out = plain.output(&["run", "hi"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let tools = serde_json::to_string(&plain.server.requests()[0].body["tools"]).unwrap();
    assert!(tools.contains("\"web_fetch\""), "{tools}");
    assert!(!tools.contains("\"web_search\""), "{tools}");
}

#[test]
fn config_show_names_the_search_and_never_its_key() {
    let w = World::new();
    config(&w, "[web_search]\nprovider = \"brave\"\n");
    let out = w
        .dsh(&["config", "show"])
        .env("BRAVE_API_KEY", "brave-secret")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("web_search: brave at https://api.search.brave.com, 8 results, key in BRAVE_API_KEY (set, redacted)"),
        "{text}"
    );
    assert!(!text.contains("brave-secret"), "{text}");
}
