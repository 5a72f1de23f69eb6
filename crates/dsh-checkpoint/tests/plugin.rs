//! The plugin in a real loop: when the turn's checkpoint is taken relative to the turn's model
//! request and tool calls (scripted model, real `bash` tool, real shadow store).

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

use std::sync::Arc;

use dsh_agent::{AgentOptions, AgentRef, CreateAgentOptions, WorkspaceFence};
use dsh_agent_loop::{Core, CoreConfig, mount_core};
use dsh_checkpoint::store::{lock_dir, store_dir};
use dsh_checkpoint::{CheckpointConfig, CheckpointPlugin};
use dsh_kernel::Context;
use dsh_session::{EventKind, Message, SessionMeta, TurnEndReason};
use dsh_shell::{LocalShellExecutor, ShellConfig, ShellExecutor};
use dsh_testkit::{Gate, Script, ScriptedAdapter, bounded};
use dsh_tools_builtin::BuiltinToolsPlugin;

struct H {
    ctx: Context,
    core: Core,
    model: Arc<ScriptedAdapter>,
    work: tempfile::TempDir,
    home: tempfile::TempDir,
}

async fn harness() -> H {
    harness_with(None).await
}

/// A harness whose plugin finds `fence` already provided (else it provides its own).
async fn harness_with(fence: Option<Arc<WorkspaceFence>>) -> H {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ctx = Context::new();
    if let Some(fence) = fence {
        ctx.provide::<WorkspaceFence>(fence).unwrap();
    }
    let executor: Arc<dyn ShellExecutor> =
        Arc::new(LocalShellExecutor::new(ShellConfig::default()).unwrap());
    ctx.provide::<dyn ShellExecutor>(executor).unwrap();
    let core = mount_core(&ctx, CoreConfig::default()).await.unwrap();
    let model = Arc::new(ScriptedAdapter::new());
    std::mem::forget(model.register(&core.llm).unwrap());
    std::mem::forget(ctx.plugin(BuiltinToolsPlugin).await.unwrap());
    std::mem::forget(
        ctx.plugin(CheckpointPlugin::new(CheckpointConfig::new(
            home.path().join("checkpoints"),
        )))
        .await
        .unwrap(),
    );
    H {
        ctx,
        core,
        model,
        work,
        home,
    }
}

impl H {
    async fn agent(&self) -> AgentRef {
        let handle = self
            .core
            .registry
            .create(
                &self.ctx,
                CreateAgentOptions {
                    meta: SessionMeta {
                        cwd: Some(self.work.path().canonicalize().unwrap()),
                        ..SessionMeta::default()
                    },
                    agent_options: AgentOptions::route(ScriptedAdapter::ROUTE, "scripted"),
                    ..CreateAgentOptions::default()
                },
            )
            .await
            .unwrap();
        let agent = handle.agent().clone();
        // The tests never tear agents down; the handle must not dispose on drop either.
        std::mem::forget(handle);
        agent
    }

    /// Scripts a turn whose one `bash` call creates `made-by-the-turn`, then ends.
    fn push_touching_turn(&self) {
        self.model
            .push(Script::tool_call(
                "c1",
                "bash",
                r#"{"command":"touch made-by-the-turn","description":"test"}"#,
            ))
            .push(Script::text("done"));
    }

    fn store(&self) -> std::path::PathBuf {
        store_dir(
            &self.home.path().join("checkpoints"),
            &self.work.path().canonicalize().unwrap(),
        )
    }
}

/// `(seq, turn, at, tree)` of every `checkpoint/created`.
fn checkpoints(agent: &AgentRef) -> Vec<(u64, u64, String, String)> {
    agent
        .session()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Other { type_name, data } if type_name == "checkpoint/created" => {
                let field = |k: &str| data[k].clone();
                Some((
                    e.seq,
                    field("turn").as_u64().unwrap(),
                    field("at").as_str().unwrap().to_owned(),
                    field("tree").as_str().unwrap().to_owned(),
                ))
            }
            _ => None,
        })
        .collect()
}

fn last_turn_end(agent: &AgentRef) -> TurnEndReason {
    agent
        .session()
        .events()
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::TurnEnd(end) => Some(end.reason.clone()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_checkpoint_does_not_hold_up_the_first_request_and_precedes_every_tool_call() {
    let h = harness().await;
    let agent = h.agent().await;
    // A first turn creates the workspace's store and ends with a checkpoint of it.
    h.model.push(Script::text("hello"));
    agent.followup(Message::user_text("first")).unwrap();
    bounded(agent.when_idle()).await;
    assert_eq!(last_turn_end(&agent), TurnEndReason::Completed);

    // Another process holds the store: the next turn's checkpoint cannot finish.
    let lock = lock_dir(&h.store(), false).unwrap();
    h.push_touching_turn();
    agent.followup(Message::user_text("second")).unwrap();
    // The turn's model request goes out while its checkpoint is still pending.
    bounded(h.model.wait_for_requests(2)).await;
    // The tool call it answered waits for the checkpoint: nothing the turn does lands in it.
    drop(lock);
    bounded(agent.when_idle()).await;
    assert_eq!(last_turn_end(&agent), TurnEndReason::Completed);
    assert!(h.work.path().join("made-by-the-turn").exists());

    let marks = checkpoints(&agent);
    let at = |turn: u64, at: &str| marks.iter().find(|m| m.1 == turn && m.2 == at).unwrap();
    // The first turn's last record (its end's, when that differed from its start's).
    let first_last = marks.iter().rfind(|m| m.1 == 1).unwrap();
    let second_start = at(2, "turn");
    assert_eq!(
        first_last.3, second_start.3,
        "the turn's checkpoint records the workspace before its tool ran: {marks:?}"
    );
    // And the log has it before the tool's call ran (its result), as it had before.
    let result_seq = agent
        .session()
        .events()
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.turn == 2 => Some(e.seq),
            _ => None,
        })
        .unwrap();
    assert!(
        second_start.0 < result_seq,
        "{marks:?} result at {result_seq}"
    );
    let end = at(2, "end");
    assert_ne!(end.3, second_start.3, "the turn's end sees the new file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_waits_for_the_work_holding_the_sessions_workspace_fence() {
    let fence = Arc::new(WorkspaceFence::default());
    let h = harness_with(Some(fence.clone())).await;
    let agent = h.agent().await;
    // Work held before the turn (as the turn's checkpoint holds it): its gate is reached when
    // a passer first waits on it.
    let gate = Gate::new();
    let held = gate.clone();
    fence.hold(agent.session().id(), async move { held.pass().await });
    h.push_touching_turn();
    agent.followup(Message::user_text("go")).unwrap();
    tokio::select! {
        () = h.model.wait_for_requests(2) => panic!("the tool ran past the held fence"),
        () = bounded(gate.reached()) => {}
    }
    assert!(!h.work.path().join("made-by-the-turn").exists());
    gate.release();
    bounded(agent.when_idle()).await;
    assert_eq!(last_turn_end(&agent), TurnEndReason::Completed);
    assert!(h.work.path().join("made-by-the-turn").exists());
}
