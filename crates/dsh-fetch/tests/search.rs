//! `web_search` against a local stand-in for each search API, and the plugin offering it only
//! when configured.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use dsh_fetch::{SearchConfig, SearchProvider, WebPlugin, WebSearchTool};
use dsh_kernel::Context;
use dsh_testkit::{MockResponse, MockServer};
use dsh_tools::{Tool, ToolCallContext, ToolRuntime};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn api() -> MockServer {
    let server = MockServer::start();
    server.serve_any_route();
    server
}

fn config(provider: SearchProvider, server: &MockServer) -> SearchConfig {
    SearchConfig {
        provider,
        base_url: server.url(),
        api_key: provider.default_key_env().map(|_| "search-key".to_owned()),
        max_results: 2,
    }
}

async fn search(tool: &WebSearchTool, query: &str) -> Result<String, String> {
    let args = json!({ "query": query });
    let call = ToolCallContext::new(
        "c1".into(),
        "web_search",
        args.to_string(),
        None,
        CancellationToken::new(),
    );
    dsh_testkit::bounded(Tool::execute(tool, args, &call))
        .await
        .map(|out| {
            out.content
                .iter()
                .filter_map(dsh_session::ContentBlock::as_text)
                .collect()
        })
        .map_err(|e| e.message)
}

#[tokio::test]
async fn brave_is_asked_with_its_token_and_its_results_are_listed() {
    let server = api();
    server.push(MockResponse::error(
        200,
        json!({"web": {"results": [
            {"title": "Tokio", "url": "https://tokio.rs/", "description": "An <strong>async</strong> runtime"},
            {"title": "Docs", "url": "https://docs.rs/tokio", "description": "API"},
            {"title": "Third", "url": "https://third.example/", "description": "cut by max_results"}
        ]}})
        .to_string(),
    ));
    let tool = WebSearchTool::new(config(SearchProvider::Brave, &server)).unwrap();
    let text = search(&tool, "tokio runtime").await.unwrap();
    assert_eq!(
        text,
        "Results for \"tokio runtime\":\n\n1. Tokio\n   https://tokio.rs/\n   An async runtime\
         \n\n2. Docs\n   https://docs.rs/tokio\n   API"
    );
    let request = &server.requests()[0];
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/res/v1/web/search?q=tokio+runtime&count=2");
    assert_eq!(request.header("x-subscription-token"), Some("search-key"));
}

#[tokio::test]
async fn exa_gets_a_json_query_and_searxng_its_json_format() {
    let exa = api();
    exa.push(MockResponse::error(
        200,
        json!({"results": [{"title": "E", "url": "https://e.example/", "text": "t"}]}).to_string(),
    ));
    let tool = WebSearchTool::new(config(SearchProvider::Exa, &exa)).unwrap();
    assert!(
        search(&tool, "q")
            .await
            .unwrap()
            .contains("1. E\n   https://e.example/\n   t")
    );
    let request = &exa.requests()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/search")
    );
    assert_eq!(request.body["query"], "q");
    assert_eq!(request.body["numResults"], 2);
    assert_eq!(request.header("x-api-key"), Some("search-key"));

    let searx = api();
    searx.push(MockResponse::error(200, json!({"results": []}).to_string()));
    let tool = WebSearchTool::new(config(SearchProvider::Searxng, &searx)).unwrap();
    assert_eq!(
        search(&tool, "nothing").await.unwrap(),
        "No results for \"nothing\"."
    );
    assert_eq!(searx.requests()[0].path, "/search?q=nothing&format=json");
}

#[tokio::test]
async fn an_api_error_is_reported_with_its_status() {
    let server = api();
    server.push(MockResponse::error(429, r#"{"error":"rate limited"}"#));
    let tool = WebSearchTool::new(config(SearchProvider::Brave, &server)).unwrap();
    let err = search(&tool, "q").await.unwrap_err();
    assert!(err.contains("answered 429 Too Many Requests"), "{err}");
    assert!(err.contains("rate limited"), "{err}");
}

#[test]
fn a_provider_that_needs_a_key_is_refused_without_one() {
    let server = api();
    let mut cfg = config(SearchProvider::Exa, &server);
    cfg.api_key = None;
    let err = WebSearchTool::new(cfg).unwrap_err();
    assert!(
        err.message.contains("exa needs an API key"),
        "{}",
        err.message
    );
}

#[test]
fn the_search_declares_its_configured_host_so_a_local_searxng_is_not_asked_about() {
    let server = api();
    let tool = WebSearchTool::new(config(SearchProvider::Searxng, &server)).unwrap();
    let effects = Tool::effects(&tool, &json!({"query": "q"}));
    assert_eq!(effects.network(), ["127.0.0.1"]);
    assert!(effects.is_configured("127.0.0.1"));
}

#[tokio::test]
async fn web_search_is_offered_only_when_configured() {
    for search in [None, Some(config(SearchProvider::Searxng, &api()))] {
        let ctx = Context::new();
        let rt = ToolRuntime::new(&ctx);
        ctx.provide::<ToolRuntime>(rt.clone()).unwrap();
        let configured = search.is_some();
        let _plugin = ctx
            .plugin(WebPlugin {
                search,
                ..WebPlugin::default()
            })
            .await
            .unwrap();
        let names: Vec<String> = rt.schemas(None).into_iter().map(|s| s.name).collect();
        assert!(names.contains(&"web_fetch".to_owned()), "{names:?}");
        assert_eq!(
            names.contains(&"web_search".to_owned()),
            configured,
            "{names:?}"
        );
        drop(Arc::clone(&rt));
    }
}
