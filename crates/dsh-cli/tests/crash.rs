//! kill -9 at random moments of a real `dsh run` (the real loop, tools and persistence in a
//! child process, against the mock model server): every session still loads, is balanced after
//! repair, and holds everything that was durable before the kill.
//!
//! "Durable before the kill" is observable from outside: the loop flushes the session before
//! every model request, so the history of the last request the server received was on disk
//! when it arrived. Reproduce a failure with `DSH_CRASH_SEED=<seed>`.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use dsh_session::{ContentBlock, EventKind, Persistence, SessionId, check_balanced};
use dsh_store_jsonl::JsonlStore;
use dsh_testkit::MockResponse;

/// A small deterministic generator (xorshift64*), so a seed reproduces a run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Tool call ids and result ids the model saw in a request: what must have been durable.
fn ids_in_request(body: &serde_json::Value) -> HashSet<String> {
    let mut ids = HashSet::new();
    for m in body["messages"].as_array().unwrap() {
        if let Some(calls) = m["tool_calls"].as_array() {
            for c in calls {
                ids.insert(format!("call:{}", c["id"].as_str().unwrap()));
            }
        }
        if let Some(id) = m["tool_call_id"].as_str() {
            ids.insert(format!("result:{id}"));
        }
    }
    ids
}

fn ids_in_log(events: &[std::sync::Arc<dsh_session::SessionEvent>]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for e in events {
        match &e.kind {
            EventKind::AssistantMessage(m) => {
                for (id, _, _) in m.message.tool_calls() {
                    ids.insert(format!("call:{id}"));
                }
            }
            EventKind::ToolResult(r) => {
                for b in &r.message.content {
                    if let ContentBlock::ToolResult { tool_call_id, .. } = b {
                        ids.insert(format!("result:{tool_call_id}"));
                    }
                }
            }
            _ => {}
        }
    }
    ids
}

fn wait_for_requests(w: &World, n: usize, child: &mut std::process::Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if w.server.requests().len() >= n {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the child never sent request {n}");
}

#[test]
fn sigkill_at_random_moments_loses_nothing_that_was_durable() {
    let seed = std::env::var("DSH_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1234_u64);
    let mut rng = Rng(seed | 1);
    let mut killed = 0;
    let mut repaired = 0;
    for round in 0..12 {
        let w = World::new();
        let steps = 1 + rng.below(3) as usize;
        for i in 0..steps {
            let call = format!("r{round}c{i}");
            w.server.push(MockResponse::tool_call(
                &call,
                "bash",
                &bash(&format!("echo step {i}")),
            ));
        }
        // Sometimes the final answer stalls mid-stream, so the kill can land inside a stream.
        let (answer, _hold) = if rng.below(2) == 0 {
            let (r, h) = MockResponse::text("all done").hold_after(2);
            (r, Some(h))
        } else {
            (MockResponse::text("all done"), None)
        };
        w.server.push(answer);
        let mut child = w.spawn(&["run", "do the steps"]);
        let target = 1 + rng.below(steps as u64 + 1) as usize;
        let alive = wait_for_requests(&w, target, &mut child);
        // The kill lands at a random moment after that request (randomness, not
        // synchronisation: any moment must be safe).
        std::thread::sleep(Duration::from_micros(rng.below(15_000)));
        if alive && child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            killed += 1;
        }
        let _ = child.wait().unwrap();

        let seen = w.server.requests();
        let last = seen.last().unwrap();
        let durable = ids_in_request(&last.body);
        let store = JsonlStore::new(w.sessions_root());
        let files = w.session_files();
        assert_eq!(files.len(), 1, "round {round} (seed {seed}): {files:?}");
        let id = w.only_session_id();
        let before = std::fs::read(&files[0]).unwrap();
        let stored = block_on(store.load(&SessionId::new(id.as_str())))
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): load failed: {e}"));
        if std::fs::read(&files[0]).unwrap() != before {
            repaired += 1;
        }
        let events: Vec<_> = stored.events.into_iter().map(std::sync::Arc::new).collect();
        check_balanced(&events)
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): unbalanced: {e}"));
        let logged = ids_in_log(&events);
        let missing: Vec<_> = durable.difference(&logged).collect();
        assert!(
            missing.is_empty(),
            "round {round} (seed {seed}): lost durable events {missing:?}"
        );
        let prompt_logged = events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::UserMessage(m) if m.text() == "do the steps"));
        assert!(
            prompt_logged,
            "round {round} (seed {seed}): the prompt was lost"
        );
    }
    eprintln!("crash rounds: 12, killed mid-run: {killed}, repaired on load: {repaired}");
    assert!(killed > 0, "no round was actually killed (seed {seed})");
}
