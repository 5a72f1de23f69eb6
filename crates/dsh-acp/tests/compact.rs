#![allow(clippy::unwrap_used)]
//! `/compact [focus]` over ACP: a slash command that waits on a model call, holds the prompt
//! slot while it runs, and obeys `session/cancel`; and the running cost on `usage_update`.

mod common;

use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};
use common::*;
use dsh_compaction::events::SUMMARY;
use dsh_compaction::{CompactionConfig, CompactionPlugin};
use dsh_llm::{ModelCatalog, ModelOverride, ModelPrice, Purpose};
use dsh_session::{EventKind, Session};
use dsh_testkit::{Script, bounded};

/// A harness whose agents get the compaction plugin, as every front end of `dsh` mounts it.
async fn compacting() -> H {
    let h = H::new().await;
    std::mem::forget(
        h.ctx
            .plugin(CompactionPlugin::new(CompactionConfig::default()))
            .await
            .unwrap(),
    );
    h
}

fn summaries(session: &Session) -> usize {
    session
        .events()
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::Other { type_name, .. } if type_name == SUMMARY))
        .count()
}

/// Two turns, the first long enough that a short summary shrinks it.
async fn two_turns(h: &H, conn: &Conn, id: &str) {
    h.adapter
        .push(Script::text("noted"))
        .push(Script::text("ok"));
    let long = format!("remember these numbers: {}", "1234567890 ".repeat(300));
    let first = bounded(conn.prompt_now(id, &long)).await.unwrap();
    assert_eq!(first, StopReason::EndTurn);
    let second = bounded(conn.prompt_now(id, "thanks")).await.unwrap();
    assert_eq!(second, StopReason::EndTurn);
}

#[tokio::test]
async fn compact_is_offered_and_summarizes_the_older_history_with_the_focus() {
    let h = compacting().await;
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    let offered = bounded(conn.wait_update(&id, |u| {
        matches!(u, SessionUpdate::AvailableCommandsUpdate(_))
    }))
    .await;
    let SessionUpdate::AvailableCommandsUpdate(offered) = offered else {
        unreachable!()
    };
    assert!(
        offered
            .available_commands
            .iter()
            .any(|c| c.name == "compact"),
        "the editor is offered /compact"
    );
    two_turns(&h, &conn, &id).await;
    let _ = conn.received();

    h.adapter.push(Script::text("S: the numbers 1-0"));
    let stop = bounded(conn.prompt_now(&id, "/compact keep the numbers"))
        .await
        .unwrap();
    assert_eq!(stop, StopReason::EndTurn);

    let requests = h.adapter.requests();
    let summary = requests.last().unwrap();
    assert_eq!(summary.purpose, Purpose::Compaction);
    let instruction = serde_json::to_string(&summary.messages.last().unwrap().content).unwrap();
    assert!(
        instruction.contains("keep the numbers"),
        "the focus reaches the summary call: {instruction}"
    );
    let said = agent_text(&conn.received());
    assert!(said.starts_with("Compacted: about"), "{said}");
    let agent = h.agent(&id).unwrap();
    assert_eq!(summaries(agent.session()), 1);
    assert_balanced(agent.session());
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_compact_answers_cancelled_and_changes_nothing() {
    let h = compacting().await;
    let mut conn = h.connect(options()).await;
    let id = conn.session().await;
    two_turns(&h, &conn, &id).await;
    let before = h.agent(&id).unwrap().session().derive_messages();

    h.adapter.push(Script::new().hang_until_cancelled());
    let compacting = conn.prompt(&id, "/compact");
    // The summary call is in flight once the adapter has seen it.
    bounded(async {
        while h.adapter.requests().last().map(|r| r.purpose) != Some(Purpose::Compaction) {
            tokio::task::yield_now().await;
        }
    })
    .await;
    // The slot is held: a prompt sent meanwhile is refused, not run under the compaction.
    let refused = bounded(conn.prompt_now(&id, "hello")).await;
    assert!(refused.is_err(), "a prompt during /compact is refused");
    conn.cancel(&id);
    let stop = bounded(compacting).await.unwrap().unwrap().stop_reason;
    assert_eq!(stop, StopReason::Cancelled);

    let agent = h.agent(&id).unwrap();
    assert_eq!(summaries(agent.session()), 0);
    assert_eq!(agent.session().derive_messages(), before);
    assert!(
        !agent_text(&conn.received()).contains("Compacted"),
        "nothing is reported as compacted"
    );
    // The slot was released: the session takes prompts again.
    h.adapter.push(Script::text("back"));
    let again = bounded(conn.prompt_now(&id, "hello")).await.unwrap();
    assert_eq!(again, StopReason::EndTurn);
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn usage_update_carries_the_running_session_cost_when_prices_are_known() {
    let h = H::new().await;
    h.adapter.set_context_window(Some(100_000));
    let price = ModelPrice {
        input: 1.0,
        cached_input: 0.1,
        output: 4.0,
    };
    let mut options = options();
    options.catalog = Some(ModelCatalog::builtin().with_override(
        "test-model",
        ModelOverride {
            price: Some(price),
            ..ModelOverride::default()
        },
    ));
    let mut conn = h.connect(options).await;
    let id = conn.session().await;
    h.adapter
        .push(Script::text("one"))
        .push(Script::text("two two"));
    for prompt in ["a", "b"] {
        let stop = bounded(conn.prompt_now(&id, prompt)).await.unwrap();
        assert_eq!(stop, StopReason::EndTurn);
    }
    let costs: Vec<f64> = conn
        .received()
        .into_iter()
        .filter_map(|n| match n.update {
            SessionUpdate::UsageUpdate(u) => Some(u.cost.unwrap().amount),
            _ => None,
        })
        .collect();
    let session = h.agent(&id).unwrap().session().clone();
    let billed: Vec<f64> = session
        .events()
        .iter()
        .filter_map(|e| dsh_compaction::usage_report(e))
        .map(|(_, usage)| price.cost(&usage))
        .collect();
    assert_eq!(billed.len(), 2);
    assert!(billed.iter().all(|c| *c > 0.0));
    assert_eq!(costs, vec![billed[0], billed[0] + billed[1]], "cumulative");
    conn.disconnect().await.unwrap();
}

#[tokio::test]
async fn usage_update_leaves_the_cost_out_when_a_price_is_unknown() {
    let h = H::new().await;
    h.adapter.set_context_window(Some(100_000));
    let mut options = options();
    options.catalog = Some(ModelCatalog::builtin());
    let mut conn = h.connect(options).await;
    let id = conn.session().await;
    h.adapter.push(Script::text("one"));
    let stop = bounded(conn.prompt_now(&id, "a")).await.unwrap();
    assert_eq!(stop, StopReason::EndTurn);
    let usage = conn
        .received()
        .into_iter()
        .find_map(|n| match n.update {
            SessionUpdate::UsageUpdate(u) => Some(u),
            _ => None,
        })
        .unwrap();
    assert!(usage.cost.is_none(), "no partial or made-up cost");
    conn.disconnect().await.unwrap();
}
