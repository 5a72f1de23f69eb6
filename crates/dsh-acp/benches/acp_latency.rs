//! ACP bridge latency figures (printed, never asserted):
//!
//! - `session/new`: request sent → response received, through a real connection (duplex pipe,
//!   JSON-RPC framing both ways) and a real agent creation.
//! - chunk delivery: the scripted model emits a text delta (its gate is released) → the client
//!   has received the matching `agent_message_chunk`. This is the whole path: the loop logs the
//!   chunk, the session publishes it, the bridge's per-session queue translates and writes it,
//!   the client parses it.
//!
//! Goals: `session/new` under 5 ms, chunk delivery under 1 ms.
//!
//! Run with `cargo bench -p dsh-acp --bench acp_latency`.

#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{NewSessionRequest, SessionUpdate};
use common::*;
use dsh_session::{BlockType, ContentBlock, FinishReason, StreamChunk};
use dsh_testkit::{Gate, Script};

const SESSIONS: usize = 300;
const CHUNKS: usize = 300;

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<28} n={:<4} mean={:>9.3?} p50={:>9.3?} p95={:>9.3?} p99={:>9.3?} max={:>9.3?}",
        samples.len(),
        mean,
        pct(0.50),
        pct(0.95),
        pct(0.99),
        samples[samples.len() - 1]
    );
}

async fn session_new(h: &H) -> Vec<Duration> {
    let conn = h.connect(options()).await;
    conn.initialize().await;
    let mut samples = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        let started = Instant::now();
        conn.cx
            .send_request(NewSessionRequest::new(conn.cwd.clone()))
            .block_task()
            .await
            .unwrap();
        samples.push(started.elapsed());
    }
    conn.disconnect().await.unwrap();
    samples
}

async fn chunk_delivery(h: &H) -> Vec<Duration> {
    let gates: Vec<Gate> = (0..CHUNKS).map(|_| Gate::new()).collect();
    let mut script = Script::new().chunk(StreamChunk::BlockStart {
        index: 0,
        block_type: BlockType::Text,
    });
    for gate in &gates {
        script = script.wait_for(gate).chunk(StreamChunk::TextDelta {
            index: 0,
            text: "x".into(),
        });
    }
    let script = script
        .chunk(StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("x".repeat(CHUNKS)),
        })
        .finish(FinishReason::Stop, CHUNKS as u64);
    h.adapter.push(script);
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    let prompt = conn.prompt(&id, "stream");
    let mut samples = Vec::with_capacity(CHUNKS);
    for gate in &gates {
        gate.reached().await;
        let released = Instant::now();
        gate.release();
        conn.wait_update(&id, |u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        samples.push(released.elapsed());
    }
    prompt.await.unwrap().unwrap();
    conn.disconnect().await.unwrap();
    samples
}

fn main() {
    for (flavor, runtime) in [
        (
            "multi-thread",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ),
        (
            "current-thread",
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        ),
    ] {
        println!("-- {flavor} runtime");
        runtime.block_on(async {
            let h = H::new().await;
            // Warm up allocations and code paths once.
            let _ = session_new(&h).await;
            report("session/new", session_new(&h).await);
            report("chunk -> agent_message_chunk", chunk_delivery(&h).await);
        });
    }
}
