//! Cancel (or dispose) at a random point of a random scripted session: the log always ends
//! balanced and provider-valid, and the agent reaches idle.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use dsh_agent::*;
use dsh_session::*;
use dsh_testkit::Script;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Reply {
    Text,
    Calls { n: usize, parallel: bool },
    MaxTokens,
    Error,
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        3 => Just(Reply::Text),
        3 => (1usize..4, any::<bool>()).prop_map(|(n, parallel)| Reply::Calls { n, parallel }),
        1 => Just(Reply::MaxTokens),
        1 => Just(Reply::Error),
    ]
}

#[derive(Clone, Debug)]
enum Stop {
    Cancel { keep_inbox: bool },
    Dispose,
}

fn stop() -> impl Strategy<Value = Stop> {
    prop_oneof![
        3 => any::<bool>().prop_map(|keep_inbox| Stop::Cancel { keep_inbox }),
        1 => Just(Stop::Dispose),
    ]
}

fn script_of(r: &Reply, i: usize) -> Script {
    match r {
        Reply::Text => Script::text("ok"),
        Reply::Calls { n, parallel } => {
            let name = if *parallel { "r" } else { "w" };
            let ids: Vec<String> = (0..*n).map(|k| format!("c{i}-{k}")).collect();
            Script::tool_calls(ids.iter().map(|id| (id.as_str(), name, "{}")))
        }
        Reply::MaxTokens => Script::max_tokens("cut"),
        Reply::Error => Script::error_code(FailureCode::InvalidRequest, "nope"),
    }
}

async fn run_case(replies: Vec<Reply>, prompts: usize, at: usize, how: Stop) {
    let h = harness_with(dsh_agent_loop::CoreConfig {
        retry: false,
        ..parallel(2)
    })
    .await;
    h.tool(TestTool::new("r", &h.log).parallel());
    h.tool(TestTool::new("w", &h.log));
    for (i, r) in replies.iter().enumerate() {
        h.script(script_of(r, i));
    }
    let handle = h.agent().await;
    let a = handle.agent().clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let _ = a
        .ctx()
        .on::<SessionEventFired>(move |_| {
            if s.fetch_add(1, Ordering::SeqCst) == at {
                let _ = tx.send(());
            }
        })
        .unwrap();
    let stopper = {
        let a = a.clone();
        let handle = handle.clone();
        tokio::spawn(async move {
            if rx.recv().await.is_some() {
                match how {
                    Stop::Cancel { keep_inbox } => {
                        a.cancel(CancelCause::User, CancelOptions { keep_inbox })
                    }
                    Stop::Dispose => handle.dispose().await,
                }
            }
        })
    };
    for p in 0..prompts {
        let _ = a.followup(Message::user_text(format!("prompt {p}")));
    }
    bounded(a.when_idle()).await;
    assert_status_order(&h.statuses_of(a.id().as_str()));
    bounded(handle.dispose()).await;
    stopper.abort();
    let events = a.session().events();
    check_balanced(&events).unwrap_or_else(|e| panic!("unbalanced log: {e}"));
    assert_eq!(a.status(), AgentStatus::Idle);
    assert!(
        h.adapter.violations().is_empty(),
        "{:?}",
        h.adapter.violations()
    );
    assert!(h.core.registry.get(a.id()).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn cancel_at_any_point_leaves_a_balanced_log_and_an_idle_agent(
        replies in proptest::collection::vec(reply(), 1..8),
        prompts in 1usize..4,
        at in 0usize..80,
        how in stop(),
        threaded in any::<bool>(),
    ) {
        let rt = if threaded {
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
        } else {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        }
        .unwrap();
        rt.block_on(run_case(replies, prompts, at, how));
    }
}
