#![allow(clippy::unwrap_used)]
//! `usage_update` counts the whole context, cache hits included.

mod common;

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};
use common::*;
use dsh_session::{StreamChunk, TokenUsage};
use dsh_testkit::{Script, Step};

#[tokio::test]
async fn usage_update_counts_cache_hits_as_context_and_reports_the_split() {
    let h = H::new().await;
    let mut script = Script::new();
    for step in Script::text("hi").steps() {
        script = match step {
            Step::Chunk(StreamChunk::Usage { .. }) => script.chunk(StreamChunk::Usage {
                usage: TokenUsage {
                    input_tokens: 100,
                    cache_read_tokens: Some(9_000),
                    output_tokens: 20,
                    ..TokenUsage::default()
                },
            }),
            other => script.then(other.clone()),
        };
    }
    h.adapter.push(script);
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    assert_eq!(
        conn.prompt_now(&id, "hi").await.unwrap(),
        StopReason::EndTurn
    );
    let usage = conn
        .received()
        .into_iter()
        .find_map(|n| match n.update {
            SessionUpdate::UsageUpdate(u) => Some(u),
            _ => None,
        })
        .unwrap();
    assert_eq!(usage.used, 9_120);
    let split = &usage.meta.unwrap()["dsh"];
    assert_eq!(split["cachedInputTokens"], 9_000);
    assert_eq!(split["inputTokens"], 100);
    conn.disconnect().await.unwrap();
}
