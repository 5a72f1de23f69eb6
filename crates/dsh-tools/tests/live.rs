#![allow(clippy::unwrap_used)]
//! The live feed of a call's output: batched by time, bounded in size, flushed before the
//! body returns.

mod common;

use std::time::Duration;

use dsh_session::{CallId, LiveNotice, LiveUpdate, SessionLiveFired};
use dsh_tools::{LIVE_INTERVAL, LIVE_PENDING_MAX, ToolCallContext};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn outputs(notices: &mut mpsc::UnboundedReceiver<LiveNotice>) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    while let Ok(n) = notices.try_recv() {
        if let LiveUpdate::ToolOutput { text, skipped, .. } = n.update {
            out.push((text, skipped));
        }
    }
    out
}

/// A call context of agent `a` and the live notices its root context hears.
fn call() -> (
    dsh_kernel::Context,
    ToolCallContext,
    mpsc::UnboundedReceiver<LiveNotice>,
) {
    let (root, _rt) = common::runtime();
    let caller = common::agent(&root, "a");
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = root
        .on_global::<SessionLiveFired>(move |n| {
            let _ = tx.send(n.clone());
        })
        .unwrap();
    let call = ToolCallContext::new(
        CallId::new("c1"),
        "bash",
        "{}",
        Some(caller),
        CancellationToken::new(),
    );
    (root, call, rx)
}

async fn settle() {
    // Lets the publishing task run up to its next wait (time is paused: no real waiting).
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_chunk_goes_out_at_once_and_a_burst_waits_for_the_interval() {
    let (_root, call, mut notices) = call();
    let feed = call.live_output().unwrap();
    let push = feed.pusher();
    push.push(b"tick-1\n");
    settle().await;
    assert_eq!(outputs(&mut notices), [("tick-1\n".to_owned(), 0)]);
    push.push(b"tick-2\n");
    push.push(b"tick-3\n");
    settle().await;
    assert!(outputs(&mut notices).is_empty(), "the burst waits");
    tokio::time::sleep(LIVE_INTERVAL).await;
    settle().await;
    assert_eq!(outputs(&mut notices), [("tick-2\ntick-3\n".to_owned(), 0)]);
    feed.finish().await;
    assert!(outputs(&mut notices).is_empty());
}

#[tokio::test(start_paused = true)]
async fn finish_publishes_what_waits_including_a_split_character() {
    let (_root, call, mut notices) = call();
    let feed = call.live_output().unwrap();
    let push = feed.pusher();
    push.push(b"a");
    settle().await;
    let snow = "☃".as_bytes();
    push.push(&snow[..2]);
    tokio::time::sleep(LIVE_INTERVAL * 2).await;
    settle().await;
    push.push(&snow[2..]);
    feed.finish().await;
    let texts: String = outputs(&mut notices).into_iter().map(|(t, _)| t).collect();
    assert_eq!(texts, "a☃", "never two replacement characters");
}

#[tokio::test(start_paused = true)]
async fn a_flood_keeps_its_tail_and_counts_what_it_skipped() {
    let (_root, call, mut notices) = call();
    let feed = call.live_output().unwrap();
    let push = feed.pusher();
    push.push(b"start\n");
    settle().await;
    outputs(&mut notices);
    let line = [b'x'; 1023]
        .iter()
        .chain(b"\n")
        .copied()
        .collect::<Vec<u8>>();
    for _ in 0..100 {
        push.push(&line);
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    settle().await;
    let out = outputs(&mut notices);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.len(), LIVE_PENDING_MAX);
    assert_eq!(out[0].1, (100 * 1024 - LIVE_PENDING_MAX) as u64);
    feed.finish().await;
}

#[tokio::test(start_paused = true)]
async fn finish_publishes_at_once_without_waiting_out_the_interval() {
    let (_root, call, mut notices) = call();
    let feed = call.live_output().unwrap();
    let push = feed.pusher();
    push.push(b"first\n");
    settle().await;
    push.push(b"last\n");
    settle().await;
    let start = tokio::time::Instant::now();
    feed.finish().await;
    // Paused time only moves when something sleeps: finishing slept not at all.
    assert_eq!(start.elapsed(), Duration::ZERO);
    let texts: String = outputs(&mut notices).into_iter().map(|(t, _)| t).collect();
    assert_eq!(texts, "first\nlast\n");
}

#[tokio::test]
async fn without_a_caller_there_is_no_feed() {
    let call = ToolCallContext::new(
        CallId::new("c1"),
        "bash",
        "{}",
        None,
        CancellationToken::new(),
    );
    assert!(call.live_output().is_none());
}
