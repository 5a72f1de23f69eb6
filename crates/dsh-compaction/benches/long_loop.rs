//! Prints what a long tool loop costs under a small window: a 100-step loop of ~6 KB tool
//! results under a 32k-token window, with the default policy and with a compaction before
//! every step (the upper bound a naive policy pays). Figures: requests, compactions, prompt
//! bytes sent, the share of them that repeated the previous request's prefix (what a
//! provider's prefix cache can serve), and what the bytes would be billed as at
//! `deepseek-v4-flash`'s list prices (a cache hit costs 2% of a miss): uncached bytes plus
//! cached bytes weighted by that ratio.
//!
//! `cargo bench -p dsh-compaction --bench long_loop`

#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use dsh_compaction::CompactionConfig;
use dsh_compaction::events::SUMMARY;
use dsh_session::Message;
use dsh_testkit::ScriptedRequest;

const STEPS: usize = 100;
const WINDOW: u64 = 32_000;

/// The request as a provider sees it, in wire order: system, tools, then each message's role
/// and content.
fn wire(r: &ScriptedRequest) -> Vec<u8> {
    let mut out = serde_json::to_vec(&(&r.system, &r.tools)).unwrap();
    for m in &r.messages {
        out.extend(serde_json::to_vec(&(&m.role, &m.content)).unwrap());
    }
    out
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A cache hit's price as a share of a miss's, for `deepseek-v4-flash`.
fn hit_ratio() -> f64 {
    let price = dsh_llm::ModelCatalog::builtin()
        .facts("deepseek-v4-flash")
        .price
        .unwrap();
    price.cached_input / price.input
}

async fn run(label: &str, config: CompactionConfig, chars_per_token: u64) -> f64 {
    let home = tempfile::tempdir().unwrap();
    let h = harness_with(WINDOW, home.path(), config).await;
    loop_model_with(&h, WINDOW, STEPS, chars_per_token);
    let handle = h.agent("bench").await;
    let a = handle.agent();
    a.followup(Message::user_text("dump 100 times")).unwrap();
    a.when_idle().await;
    let requests = h.adapter.requests();
    let mut total = 0usize;
    let mut cacheable = 0usize;
    let mut uncached = 0usize;
    let mut previous: Vec<u8> = Vec::new();
    for r in &requests {
        let bytes = wire(r);
        total += bytes.len();
        let shared = common_prefix(&previous, &bytes);
        cacheable += shared;
        uncached += bytes.len() - shared;
        previous = bytes;
    }
    let compactions = count(a.session(), SUMMARY);
    let billed = uncached as f64 + cacheable as f64 * hit_ratio();
    println!(
        "{label:<30} requests {:>4}  compactions {:>3}  prompt bytes {:>9}  uncached {:>8}  \
         cacheable {:>5.1}%  billed as {:>9.0}  over window {}",
        requests.len(),
        compactions,
        total,
        uncached,
        cacheable as f64 * 100.0 / total.max(1) as f64,
        billed,
        h.over_window.lock().len()
    );
    drop(handle);
    h.shutdown().await;
    billed
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for chars_per_token in [4, 3] {
            println!(
                "{STEPS}-step loop, ~6 KB results, {WINDOW}-token window, {chars_per_token} \
                 characters per token"
            );
            let policy = run(
                "default policy",
                CompactionConfig::default(),
                chars_per_token,
            )
            .await;
            // `[compaction] threshold = 0.9`: fewer compactions, longer cached prefixes.
            run(
                "threshold 0.9",
                CompactionConfig {
                    threshold_ratio: 0.9,
                    ..CompactionConfig::default()
                },
                chars_per_token,
            )
            .await;
            let every = run(
                "compaction before every step",
                CompactionConfig {
                    threshold_ratio: 0.0,
                    ..CompactionConfig::default()
                },
                chars_per_token,
            )
            .await;
            println!(
                "default policy: billed as {:.1}% of the prompt bytes of compacting at every step\n",
                policy * 100.0 / every.max(1.0)
            );
        }
    });
}
