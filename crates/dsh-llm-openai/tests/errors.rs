//! Every failure class of the adapter, against the mock server over real TCP.

mod common;

use std::time::{Duration, SystemTime};

use common::*;
use dsh_llm::{FailureCode, FinishReason, LlmFailure, StreamChunk};
use dsh_llm_openai::{ApiKeySource, OpenAiAdapter, OpenAiAdapterConfig};
use dsh_testkit::sse::ChatStream;
use dsh_testkit::{MockResponse, MockServer, SseFrame};

async fn fail_with(response: MockResponse) -> (LlmFailure, Vec<StreamChunk>) {
    let server = MockServer::start();
    server.push(response);
    let llm = deepseek(&server);
    let chunks = run(&llm, options("deepseek-v4-flash")).await;
    (error(&chunks), chunks)
}

#[tokio::test]
async fn http_error_statuses_and_wording_map_to_normalized_codes() {
    let cases: Vec<(MockResponse, FailureCode, u16, &str)> = vec![
        (
            MockResponse::error_json(401, "Authentication Fails", "authentication_error", None),
            FailureCode::Auth,
            401,
            "Authentication Fails",
        ),
        (
            MockResponse::error_json(403, "Forbidden region", "permission_error", None),
            FailureCode::Auth,
            403,
            "Forbidden region",
        ),
        (
            MockResponse::error_json(402, "Insufficient Balance", "unknown_error", None),
            FailureCode::Quota,
            402,
            "Insufficient Balance",
        ),
        (
            MockResponse::error_json(
                429,
                "You exceeded your current quota, please check your plan",
                "insufficient_quota",
                Some("insufficient_quota"),
            ),
            FailureCode::Quota,
            429,
            "current quota",
        ),
        (
            MockResponse::error_json(429, "Rate limit reached", "rate_limit_error", None),
            FailureCode::RateLimit,
            429,
            "Rate limit reached",
        ),
        (
            MockResponse::error(413, "request entity too large"),
            FailureCode::InvalidRequest,
            413,
            "too large",
        ),
        (
            MockResponse::error_json(
                400,
                "This model's maximum context length is 131072 tokens. However, you requested 200000 tokens",
                "invalid_request_error",
                Some("context_length_exceeded"),
            ),
            FailureCode::ContextWindowExceeded,
            400,
            "maximum context length",
        ),
        (
            MockResponse::error_json(
                400,
                "Invalid 'messages[1].role'",
                "invalid_request_error",
                None,
            ),
            FailureCode::InvalidRequest,
            400,
            "messages[1].role",
        ),
        (
            MockResponse::error_json(500, "Internal error", "server_error", None),
            FailureCode::Server,
            500,
            "Internal error",
        ),
        (
            MockResponse::error(503, "upstream connect error"),
            FailureCode::Server,
            503,
            "upstream connect error",
        ),
        (
            MockResponse::error(418, "I'm a teapot"),
            FailureCode::Http(418),
            418,
            "teapot",
        ),
    ];
    let server = MockServer::start();
    for (response, ..) in &cases {
        server.push(response.clone());
    }
    let llm = deepseek(&server);
    for (_, code, status, wording) in cases {
        let failure = error(&run(&llm, options("m")).await);
        assert_eq!(failure.code, code, "{failure}");
        assert_eq!(failure.status, Some(status), "{failure}");
        assert!(failure.message.contains(wording), "{failure}");
        assert!(failure.message.contains("deepseek"), "{failure}");
        assert_eq!(failure.code.to_string(), code.to_string());
    }
    assert_eq!(
        FailureCode::Http(418).to_string(),
        "HTTP_418",
        "wire spelling"
    );
}

#[tokio::test]
async fn rate_limit_keeps_retry_after_seconds_and_the_request_id() {
    let (failure, _) = fail_with(
        MockResponse::error_json(429, "slow down", "rate_limit_error", None)
            .with_retry_after("7")
            .with_request_id("req-123"),
    )
    .await;
    assert_eq!(failure.code, FailureCode::RateLimit);
    assert_eq!(failure.provider_retry_after_ms, Some(7_000));
    assert_eq!(failure.request_id.as_deref(), Some("req-123"));

    let (failure, _) =
        fail_with(MockResponse::error(503, "busy").with_header("x-deepseek-request-id", "ds-9"))
            .await;
    assert_eq!(failure.request_id.as_deref(), Some("ds-9"));
    assert_eq!(failure.provider_retry_after_ms, None);
}

#[tokio::test]
async fn retry_after_as_an_http_date_becomes_milliseconds_from_now() {
    let at = SystemTime::now() + Duration::from_secs(120);
    let (failure, _) =
        fail_with(MockResponse::error(429, "later").with_retry_after(&httpdate::fmt_http_date(at)))
            .await;
    let ms = failure.provider_retry_after_ms.unwrap();
    // HTTP dates have one-second resolution; the test itself takes well under a minute.
    assert!((60_000..=120_000).contains(&ms), "{ms}");
}

#[tokio::test]
async fn connection_refused_is_transport_naming_the_endpoint_but_not_the_key() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let llm = with_config(deepseek_config(&format!("http://127.0.0.1:{port}")));
    let failure = error(&run(&llm, options("m")).await);
    assert_eq!(failure.code, FailureCode::Transport);
    assert!(
        failure
            .message
            .contains(&format!("127.0.0.1:{port}/chat/completions")),
        "{failure}"
    );
    assert!(!failure.message.contains(KEY));
}

#[tokio::test]
async fn malformed_json_event_is_malformed_response() {
    let (failure, _) = fail_with(MockResponse::sse(
        ChatStream::new("m")
            .role()
            .frame(SseFrame::Data("{not json".into()))
            .done()
            .build(),
    ))
    .await;
    assert_eq!(failure.code, FailureCode::MalformedResponse);
}

#[tokio::test]
async fn eof_without_done_is_stream_closed_after_the_chunks_so_far() {
    let (failure, chunks) = fail_with(MockResponse::sse(
        ChatStream::new("m")
            .role()
            .text("abc")
            .finish("stop")
            .build(),
    ))
    .await;
    assert_eq!(failure.code, FailureCode::StreamClosed);
    assert!(chunks.contains(&StreamChunk::TextDelta {
        index: 0,
        text: "abc".into()
    }));
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_transport() {
    let (failure, _) = fail_with(
        MockResponse::sse(ChatStream::new("m").role().text("abc").build()).cut_connection(),
    )
    .await;
    assert_eq!(failure.code, FailureCode::Transport, "{failure}");
    assert!(!failure.message.contains(KEY));
}

#[tokio::test]
async fn an_answer_without_content_is_empty_response_after_its_usage() {
    let (failure, chunks) = fail_with(MockResponse::sse(
        ChatStream::new("m")
            .role()
            .finish("stop")
            .usage(10, 0)
            .done()
            .build(),
    ))
    .await;
    assert_eq!(failure.code, FailureCode::EmptyResponse);
    assert!(matches!(chunks[0], StreamChunk::Usage { .. }));
    let (failure, _) = fail_with(MockResponse::sse([])).await;
    assert_eq!(failure.code, FailureCode::EmptyResponse);
}

#[tokio::test]
async fn unknown_finish_reasons_become_upper_cased_error_codes() {
    let (failure, _) = fail_with(MockResponse::sse(
        ChatStream::new("m")
            .text("bad")
            .finish("content_filter")
            .done()
            .build(),
    ))
    .await;
    assert_eq!(failure.code, FailureCode::Other("CONTENT_FILTER".into()));
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_classified() {
    let (failure, _) = fail_with(MockResponse::sse([SseFrame::Data(
        r#"{"error":{"message":"model overloaded","type":"server_error"}}"#.into(),
    )]))
    .await;
    assert_eq!(failure.code, FailureCode::Server);
    assert!(failure.message.contains("model overloaded"));
}

#[tokio::test]
async fn the_api_key_never_appears_in_failures_or_debug_output() {
    let server = MockServer::start();
    server.push(MockResponse::error_json(
        401,
        &format!("Incorrect API key provided: {KEY}"),
        "invalid_request_error",
        Some(KEY),
    ));
    server.push(MockResponse::error(500, format!("proxy saw Bearer {KEY}")));
    server.push(MockResponse::sse([SseFrame::Data(format!(
        r#"{{"error":{{"message":"key {KEY} revoked"}}}}"#
    ))]));
    let config = deepseek_config(&server.url());
    let adapter = OpenAiAdapter::new(config.clone()).unwrap();
    let llm = dsh_llm::Llm::new();
    adapter.register(&llm).unwrap();
    let mut texts = vec![
        format!("{config:?}"),
        format!("{adapter:?}"),
        format!("{llm:?}"),
    ];
    for _ in 0..3 {
        let chunks = run(&llm, options("m")).await;
        let failure = error(&chunks);
        texts.push(failure.to_string());
        texts.push(format!("{failure:?}"));
        texts.push(serde_json::to_string(&chunks).unwrap());
    }
    for text in &texts {
        assert!(!text.contains(KEY), "key leaked: {text}");
    }
    assert!(texts[3].contains("***"), "{}", texts[3]);
}

#[tokio::test]
async fn missing_or_malformed_keys_fail_before_any_request() {
    let server = MockServer::start();
    let missing = OpenAiAdapterConfig::deepseek(
        server.url(),
        ApiKeySource::Missing {
            env: "DEEPSEEK_API_KEY".into(),
        },
    );
    let failure = error(&run(&with_config(missing), options("m")).await);
    assert_eq!(failure.code, FailureCode::MissingCredential);
    assert!(failure.message.contains("DEEPSEEK_API_KEY"));

    let malformed =
        OpenAiAdapterConfig::deepseek(server.url(), ApiKeySource::value("sk-with space"));
    let failure = error(&run(&with_config(malformed), options("m")).await);
    assert_eq!(failure.code, FailureCode::InvalidCredential);
    assert!(!failure.message.contains("sk-with space"));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_finish_error_is_not_mistaken_for_an_abort() {
    let (failure, chunks) = fail_with(MockResponse::error(500, "x")).await;
    assert_eq!(failure.code, FailureCode::Server);
    assert!(matches!(finish(&chunks), FinishReason::Error { .. }));
}

#[tokio::test]
async fn an_error_body_that_never_ends_is_cut_off_classified_and_disconnected() {
    let server = MockServer::start();
    // A proxy's HTML error page that promises 64 MiB and stalls after 256 KiB: the adapter
    // must neither wait for the rest (the idle timeout is an hour) nor buffer it.
    let page = format!(
        "<html><head><title>502 Bad Gateway</title></head><body>{}",
        "<p>upstream \u{1b}[31mfailed</p>\n".repeat(8 * 1024)
    );
    let raw = format!(
        "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n{page}",
        64 << 20
    );
    let (response, _hold) = MockResponse::raw(raw).hold_open();
    server.push(response);
    let llm =
        with_config(deepseek_config(&server.url()).with_idle_timeout(Duration::from_secs(3600)));
    let failure = error(&run(&llm, options("m")).await);
    assert_eq!(failure.code, FailureCode::Server, "{failure}");
    assert_eq!(failure.status, Some(502));
    assert!(
        failure.message.ends_with("HTTP 502: 502 Bad Gateway"),
        "{failure}"
    );
    tokio::time::timeout(Duration::from_secs(30), server.client_disconnected())
        .await
        .expect("the adapter dropped the connection");
}

#[tokio::test]
async fn provider_error_messages_reach_the_user_as_one_short_line() {
    let (failure, _) = fail_with(MockResponse::error_json(
        400,
        &format!("bad\u{1b}]0;pwned\u{7}\n{}", "field ".repeat(2000)),
        "invalid_request_error",
        None,
    ))
    .await;
    assert_eq!(failure.code, FailureCode::InvalidRequest);
    assert!(
        !failure.message.contains(['\u{1b}', '\u{7}', '\n']),
        "{failure}"
    );
    assert!(
        failure.message.chars().count() < 1200,
        "{}",
        failure.message.len()
    );
    assert!(
        failure.message.contains("bad ]0;pwned field field"),
        "{failure}"
    );
}

#[test]
fn base_urls_with_credentials_a_query_or_a_fragment_are_refused_without_echoing_the_key() {
    let cases = [
        (format!("https://:{KEY}@api.example.com"), "credentials"),
        (
            format!("https://user:{KEY}@api.example.com/v1"),
            "credentials",
        ),
        (format!("https://{KEY}@api.example.com"), "credentials"),
        (format!("https://u:{KEY}@api.example.com:99999"), "invalid"),
        (
            "https://api.example.com/v1?api-version=1".to_owned(),
            "query",
        ),
        ("https://api.example.com/v1#x".to_owned(), "fragment"),
        ("ftp://api.example.com".to_owned(), "http(s)"),
    ];
    for (url, why) in cases {
        let err = OpenAiAdapter::new(deepseek_config(&url)).unwrap_err();
        assert_eq!(err.code(), &FailureCode::InvalidRequest, "{url}");
        assert!(err.to_string().contains(why), "{url}: {err}");
        assert!(!err.to_string().contains(KEY), "key leaked: {err}");
    }
}

#[tokio::test]
async fn a_response_streaming_past_the_size_limit_is_malformed_after_the_chunks_so_far() {
    let server = MockServer::start();
    let mut stream = ChatStream::new("m").role();
    for _ in 0..64 {
        stream = stream.delta(serde_json::json!({"content": "x".repeat(1024)}), None);
    }
    server.push(MockResponse::sse(stream.finish("stop").done().build()));
    let llm = with_config(deepseek_config(&server.url()).with_max_response_bytes(16 * 1024));
    let chunks = run(&llm, options("m")).await;
    let failure = error(&chunks);
    assert_eq!(failure.code, FailureCode::MalformedResponse, "{failure}");
    assert!(failure.message.contains("16384 bytes"), "{failure}");
    let text: usize = chunks
        .iter()
        .map(|c| match c {
            StreamChunk::TextDelta { text, .. } => text.len(),
            _ => 0,
        })
        .sum();
    assert!((1..=16 * 1024).contains(&text), "{text}");
}

#[tokio::test]
async fn a_clean_close_before_any_of_the_answer_is_retryable_and_after_some_of_it_is_not() {
    use dsh_llm::retry::{RetryDecision, RetryPolicy, decide};
    let (failure, chunks) = fail_with(MockResponse::sse(ChatStream::new("m").role().build())).await;
    assert_eq!(chunks.len(), 1, "nothing but the failure: {chunks:?}");
    assert_eq!(failure.code, FailureCode::Transport, "{failure}");
    assert!(failure.message.contains("before [DONE]"), "{failure}");
    let policy = RetryPolicy::default();
    assert!(matches!(
        decide(&policy, &failure, 0, 0.5),
        RetryDecision::Retry { .. }
    ));
    let (failure, _) = fail_with(MockResponse::sse(
        ChatStream::new("m").role().text("half").build(),
    ))
    .await;
    assert_eq!(failure.code, FailureCode::StreamClosed);
    assert_eq!(decide(&policy, &failure, 0, 0.5), RetryDecision::Delegate);
}

#[tokio::test]
async fn an_event_without_a_payload_is_ignored() {
    let server = MockServer::start();
    server.push(MockResponse::sse(
        ChatStream::new("m")
            .role()
            .frame(SseFrame::Raw(b"data:\n\n".to_vec()))
            .text("hi")
            .frame(SseFrame::Raw(b"data: \n\n".to_vec()))
            .finish("stop")
            .done()
            .build(),
    ));
    let chunks = run(&deepseek(&server), options("deepseek-v4-flash")).await;
    assert_eq!(finish(&chunks), FinishReason::Stop, "{chunks:?}");
    assert_eq!(assemble(&chunks).message("p", "m").text(), "hi");
}

#[tokio::test]
async fn a_plain_json_answer_says_the_server_did_not_stream() {
    let completion = r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
    let (failure, _) = fail_with(MockResponse::error(200, completion)).await;
    assert_eq!(failure.code, FailureCode::MalformedResponse, "{failure}");
    assert!(
        failure.message.contains("did not stream") && failure.message.contains("base URL"),
        "{failure}"
    );
    // The same document without a content type is recognised once the body ends.
    let raw = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{completion}",
        completion.len()
    );
    let (failure, _) = fail_with(MockResponse::raw(raw.into_bytes())).await;
    assert_eq!(failure.code, FailureCode::MalformedResponse, "{failure}");
    assert!(failure.message.contains("did not stream"), "{failure}");
    // An error object in a 200 JSON answer is classified as the error it is.
    let (failure, _) = fail_with(MockResponse::error(
        200,
        r#"{"error":{"message":"model overloaded","type":"server_error"}}"#,
    ))
    .await;
    assert_eq!(failure.code, FailureCode::Server, "{failure}");
}
