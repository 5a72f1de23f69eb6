//! Idle timeouts versus cancellation, over real TCP.
//!
//! Timeouts here are the behaviour under test (a short idle timeout really elapses); nothing
//! waits on a timer to synchronise: the server's hold handles and disconnect signal order
//! the steps.

mod common;

use std::time::Duration;

use common::*;
use dsh_llm::{FailureCode, FinishReason, StreamChunk};
use dsh_testkit::sse::ChatStream;
use dsh_testkit::{MockResponse, MockServer};
use futures::StreamExt;

const DEADLINE: Duration = Duration::from_secs(30);

fn short_idle(server: &MockServer) -> dsh_llm::Llm {
    with_config(deepseek_config(&server.url()).with_idle_timeout(Duration::from_millis(300)))
}

fn abc_stream() -> MockResponse {
    MockResponse::sse(
        ChatStream::new("m")
            .role()
            .text("abc")
            .text("def")
            .finish("stop")
            .done()
            .build(),
    )
}

#[tokio::test]
async fn idle_timeout_covers_the_wait_for_the_response_head() {
    let server = MockServer::start();
    let (response, _hold) = abc_stream().hold_before_headers();
    server.push(response);
    let failure = error(&run(&short_idle(&server), options("m")).await);
    assert_eq!(failure.code, FailureCode::Timeout);
    assert!(
        failure.message.contains("waiting for the response"),
        "{failure}"
    );
}

#[tokio::test]
async fn idle_timeout_mid_stream_is_timeout_after_the_chunks_so_far() {
    let server = MockServer::start();
    let (response, _hold) = abc_stream().hold_after(2);
    server.push(response);
    let chunks = run(&short_idle(&server), options("m")).await;
    assert!(chunks.contains(&StreamChunk::TextDelta {
        index: 0,
        text: "abc".into()
    }));
    assert_eq!(error(&chunks).code, FailureCode::Timeout);
}

#[tokio::test]
async fn time_the_consumer_spends_between_reads_is_not_idle_time() {
    let server = MockServer::start();
    server.push(abc_stream());
    let llm = short_idle(&server);
    let mut stream = llm.stream(options("m"));
    while !matches!(stream.next().await, Some(StreamChunk::TextDelta { .. })) {}
    // A slow consumer (the behaviour under test, not synchronisation): the rest of the
    // answer is already buffered, so no read waits and no idle timeout fires.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let rest: Vec<StreamChunk> = stream.collect().await;
    assert_eq!(finish(&rest), FinishReason::Stop);
}

#[tokio::test]
async fn cancel_mid_stream_is_aborted_and_the_server_sees_the_disconnect() {
    let server = MockServer::start();
    let (response, hold) = abc_stream().hold_after(2);
    server.push(response);
    let llm = deepseek(&server);
    let opts = options("m");
    let cancel = opts.cancel.clone();
    let mut stream = llm.stream(opts);
    loop {
        match stream.next().await {
            Some(StreamChunk::TextDelta { .. }) => break,
            Some(StreamChunk::Finish { reason, .. }) => panic!("finished early: {reason:?}"),
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    hold.reached().await;
    cancel.cancel();
    let rest: Vec<StreamChunk> = tokio::time::timeout(DEADLINE, stream.collect())
        .await
        .unwrap();
    match finish(&rest) {
        FinishReason::Aborted { failure } => assert_eq!(failure.code, FailureCode::Aborted),
        other => panic!("expected aborted, got {other:?}"),
    }
    tokio::time::timeout(DEADLINE, server.client_disconnected())
        .await
        .expect("the server observed the disconnect");
    assert!(!hold.is_released());
}

#[tokio::test]
async fn cancel_before_the_response_head_is_aborted_and_disconnects() {
    let server = MockServer::start();
    let (response, _hold) = abc_stream().hold_before_headers();
    server.push(response);
    let llm = deepseek(&server);
    let opts = options("m");
    let cancel = opts.cancel.clone();
    let consumer = tokio::spawn(collect(llm.stream(opts)));
    server.wait_for_requests(1).await;
    cancel.cancel();
    let chunks = consumer.await.unwrap();
    assert!(matches!(finish(&chunks), FinishReason::Aborted { .. }));
    assert_eq!(chunks.len(), 1);
    tokio::time::timeout(DEADLINE, server.client_disconnected())
        .await
        .expect("the server observed the disconnect");
}
