//! Background tasks through `bash`, `bash_output` and `bash_kill`: the owner fence of seed
//! decision 3, its survival across a remount of the tools, and completion notices.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_agent::Agent;
use dsh_agent::events::{InboxInserted, InboxNotice};
use dsh_session::{MessageSource, Role};
use dsh_shell::{ShellExecRequest, ShellExecutor, TaskId, TaskStatus};
use dsh_tools::ToolCallResult;
use dsh_tools_builtin::{BuiltinToolsPlugin, FOREIGN_TASK, NOTICE_PLUGIN, UNKNOWN_TASK};
use serde_json::json;
use tokio::sync::mpsc;

async fn output(w: &World, id: &TaskId, caller: Option<&dsh_tools::ToolCaller>) -> ToolCallResult {
    w.call("bash_output", json!({"task_id": id.as_str()}), caller)
        .await
}

async fn kill(w: &World, id: &TaskId, caller: Option<&dsh_tools::ToolCaller>) -> ToolCallResult {
    w.call("bash_kill", json!({"task_id": id.as_str()}), caller)
        .await
}

fn assert_foreign(result: &ToolCallResult, id: &TaskId) {
    assert!(result.is_error, "expected a refusal, got {}", result.text());
    assert_eq!(result.code(), Some(FOREIGN_TASK));
    assert_eq!(
        result.text(),
        format!("Error: task {id} belongs to another session")
    );
}

/// Starts a task directly on the executor with an explicit owner token.
async fn start_owned(w: &World, command: &str, owner: Option<&str>) -> TaskId {
    let spec = w
        .executor
        .resolve(ShellExecRequest {
            owner: owner.map(str::to_owned),
            ..ShellExecRequest::new(command)
        })
        .unwrap();
    w.executor.start(spec).await.unwrap()
}

#[tokio::test]
async fn background_start_answers_with_the_task_id_and_stamps_the_caller_as_owner() {
    let w = world().await;
    let a = w.caller("session-a");
    let result = w
        .call(
            "bash",
            json!({"command": "sleep 30", "description": "sleep", "run_in_background": true}),
            Some(&a),
        )
        .await;
    assert!(!result.is_error);
    assert_eq!(result.text(), "started background task bash-1");
    let id = TaskId::new("bash-1");
    assert_eq!(w.executor.owner_of(&id).as_deref(), Some("session-a"));
    assert!(w.status(&id).is_running());
    w.shutdown().await;
}

#[tokio::test]
async fn session_b_cannot_read_session_a_background_task() {
    let w = world().await;
    let (a, b) = (w.caller("session-a"), w.caller("session-b"));
    let id = w.start("echo secret-of-a; sleep 30", Some(&a)).await;
    assert_foreign(&output(&w, &id, Some(&b)).await, &id);
    // An agentless caller can never touch an owned task either.
    assert_foreign(&output(&w, &id, None).await, &id);
    // The refused reads consumed nothing: the owner still gets all of the output.
    let seen = w.read_until(&id, Some(&a), "secret-of-a").await;
    assert!(seen.contains("[status: running]"), "{seen}");
    w.shutdown().await;
}

#[tokio::test]
async fn session_b_cannot_kill_session_a_background_task() {
    let w = world().await;
    let (a, b) = (w.caller("session-a"), w.caller("session-b"));
    let id = w.start("sleep 30", Some(&a)).await;
    assert_foreign(&kill(&w, &id, Some(&b)).await, &id);
    assert_foreign(&kill(&w, &id, None).await, &id);
    assert!(w.status(&id).is_running(), "a refused kill stops nothing");
    let killed = kill(&w, &id, Some(&a)).await;
    assert_eq!(killed.text(), format!("requested termination of task {id}"));
    assert!(matches!(
        w.wait_finished(&id).await,
        TaskStatus::Killed { .. }
    ));
    w.shutdown().await;
}

#[tokio::test]
async fn unowned_task_is_open_to_every_session() {
    let w = world().await;
    let (a, b) = (w.caller("session-a"), w.caller("session-b"));
    // An agentless `bash` call stamps no owner.
    let id = w.start("echo shared; sleep 30", None).await;
    assert_eq!(w.executor.owner_of(&id), None);
    w.read_until(&id, Some(&a), "shared").await;
    assert!(!output(&w, &id, None).await.is_error);
    let killed = kill(&w, &id, Some(&b)).await;
    assert_eq!(killed.text(), format!("requested termination of task {id}"));
    w.wait_finished(&id).await;
    w.shutdown().await;
}

#[tokio::test]
async fn empty_string_owner_is_still_an_owner() {
    let w = world().await;
    let id = start_owned(&w, "sleep 30", Some("")).await;
    assert_eq!(w.executor.owner_of(&id).as_deref(), Some(""));
    let b = w.caller("session-b");
    assert_foreign(&output(&w, &id, Some(&b)).await, &id);
    assert_foreign(&output(&w, &id, None).await, &id);
    assert_foreign(&kill(&w, &id, None).await, &id);
    // Only the caller whose id is the empty string matches.
    let empty = w.caller("");
    assert!(!output(&w, &id, Some(&empty)).await.is_error);
    let killed = kill(&w, &id, Some(&empty)).await;
    assert_eq!(killed.text(), format!("requested termination of task {id}"));
    w.shutdown().await;
}

#[tokio::test]
async fn remount_of_builtin_tools_does_not_make_a_task_readable_or_killable_by_another_session() {
    let w = world().await;
    let (a, b) = (w.caller("session-a"), w.caller("session-b"));
    let id = w.start("echo before-remount; sleep 30", Some(&a)).await;
    w.plugin.dispose().await;
    assert!(w.runtime.get(None, "bash_output").is_none(), "unmounted");
    let remounted = w.ctx.plugin(BuiltinToolsPlugin).await.unwrap();
    assert_foreign(&output(&w, &id, Some(&b)).await, &id);
    assert_foreign(&kill(&w, &id, Some(&b)).await, &id);
    assert_foreign(&output(&w, &id, None).await, &id);
    assert!(w.status(&id).is_running());
    w.read_until(&id, Some(&a), "before-remount").await;
    let killed = kill(&w, &id, Some(&a)).await;
    assert_eq!(killed.text(), format!("requested termination of task {id}"));
    remounted.dispose().await;
    w.shutdown().await;
}

#[tokio::test]
async fn output_is_consumed_and_the_status_line_follows_the_task() {
    let w = world().await;
    let a = w.caller("session-a");
    let id = w.start("echo one; echo two >&2; exit 4", Some(&a)).await;
    assert!(matches!(
        w.wait_finished(&id).await,
        TaskStatus::Completed { exit_code: 4 }
    ));
    assert_eq!(
        output(&w, &id, Some(&a)).await.text(),
        "one\n[stderr]\ntwo\n[status: completed, exit code: 4]"
    );
    assert_eq!(
        output(&w, &id, Some(&a)).await.text(),
        "(no new output)\n[status: completed, exit code: 4]"
    );
    w.shutdown().await;
}

#[tokio::test]
async fn killing_a_task_reports_the_kill_then_that_it_had_already_finished() {
    let w = world().await;
    let a = w.caller("session-a");
    let id = w.start("sleep 30", Some(&a)).await;
    assert_eq!(
        kill(&w, &id, Some(&a)).await.text(),
        format!("requested termination of task {id}")
    );
    let status = w.wait_finished(&id).await;
    assert_eq!(
        status,
        TaskStatus::Killed {
            signal: Some("SIGTERM".into())
        }
    );
    assert_eq!(
        output(&w, &id, Some(&a)).await.text(),
        "(no new output)\n[status: killed by SIGTERM]"
    );
    assert_eq!(
        kill(&w, &id, Some(&a)).await.text(),
        format!("task {id} had already finished [status: killed by SIGTERM]")
    );
    w.shutdown().await;
}

#[tokio::test]
async fn unknown_task_ids_fail_loudly() {
    let w = world().await;
    let a = w.caller("session-a");
    let id = TaskId::new("bash-999");
    for result in [
        output(&w, &id, Some(&a)).await,
        kill(&w, &id, Some(&a)).await,
    ] {
        assert!(result.is_error);
        assert_eq!(result.code(), Some(UNKNOWN_TASK));
        assert_eq!(result.text(), "Error: unknown task bash-999");
    }
    let blank = w
        .call("bash_output", json!({"task_id": " "}), Some(&a))
        .await;
    assert_eq!(
        blank.text(),
        "Error: invalid task_id: expected a non-empty string"
    );
    w.shutdown().await;
}

/// Notices injected into any agent's inbox, in order.
fn inbox_feed(w: &World) -> mpsc::UnboundedReceiver<InboxNotice> {
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = w
        .ctx
        .on_global::<InboxInserted>(move |notice| {
            let _ = tx.send(notice.clone());
        })
        .unwrap();
    rx
}

async fn next_notice(feed: &mut mpsc::UnboundedReceiver<InboxNotice>) -> InboxNotice {
    tokio::time::timeout(PATIENCE, feed.recv())
        .await
        .expect("no notice arrived")
        .unwrap()
}

#[tokio::test]
async fn completion_notice_is_injected_into_the_owning_agent() {
    let w = world().await;
    let mut feed = inbox_feed(&w);
    let agent = w.agent("agent-a");
    let caller = caller_of(&agent, None);
    let id = w.start("echo done", Some(&caller)).await;
    let notice = next_notice(&mut feed).await;
    assert_eq!(notice.agent.id().as_str(), "agent-a");
    let message = &notice.message;
    assert_eq!(message.role, Role::User);
    assert_eq!(
        message.text(),
        format!(
            "background task {id} (`echo done`) finished [status: completed, exit code: 0]. \
             Read its output with bash_output."
        )
    );
    match &message.source {
        MessageSource::Plugin { plugin, extra } => {
            assert_eq!(plugin, NOTICE_PLUGIN);
            assert_eq!(extra["form"], "notice");
            assert_eq!(
                extra["summary"],
                format!("background task {id} finished [status: completed, exit code: 0]")
            );
        }
        other => panic!("unexpected source {other:?}"),
    }
    // Injected for the next step: the agent is not woken and the notice waits in its inbox.
    let pending = agent.inbox().next_step();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, message.id);
    assert!(agent.inbox().next_turn().is_empty());
    w.shutdown().await;
}

#[tokio::test]
async fn notices_go_only_to_live_owners() {
    let w = world().await;
    let mut feed = inbox_feed(&w);
    let mut done = w.executor.subscribe();
    let agent = w.agent("agent-a");
    // A task whose owner is not a live agent, and one with no owner: both end unannounced.
    let ghost = w.start("true", Some(&w.caller("ghost"))).await;
    let unowned = w.start("true", None).await;
    for _ in 0..2 {
        tokio::time::timeout(PATIENCE, done.recv())
            .await
            .unwrap()
            .unwrap();
    }
    // Completions are handled in order, so once the owned task's notice arrives, the two
    // earlier completions have been handled (and dropped).
    let owned = w.start("true", Some(&caller_of(&agent, None))).await;
    let notice = next_notice(&mut feed).await;
    assert!(
        notice
            .message
            .text()
            .starts_with(&format!("background task {owned} ")),
        "{}",
        notice.message.text()
    );
    assert!(
        feed.try_recv().is_err(),
        "no notice for {ghost} or {unowned}"
    );
    assert_eq!(agent.inbox().next_step().len(), 1);
    w.shutdown().await;
}

#[tokio::test]
async fn unmounting_the_tools_stops_completion_notices_and_remounting_restores_them() {
    let w = world().await;
    let mut feed = inbox_feed(&w);
    let agent = w.agent("agent-a");
    let caller = caller_of(&agent, None);
    let mut done = w.executor.subscribe();
    w.plugin.dispose().await;
    // Started directly on the executor while the tools are unmounted: nobody announces it.
    let quiet = start_owned(&w, "true", Some("agent-a")).await;
    let ended = tokio::time::timeout(PATIENCE, done.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.id, quiet);
    let remounted = w.ctx.plugin(BuiltinToolsPlugin).await.unwrap();
    let id = w.start("true", Some(&caller)).await;
    let notice = next_notice(&mut feed).await;
    assert!(
        notice
            .message
            .text()
            .starts_with(&format!("background task {id} ")),
        "{}",
        notice.message.text()
    );
    assert!(feed.try_recv().is_err());
    remounted.dispose().await;
    w.shutdown().await;
}

/// Whether a process with this pid exists (a reaped command's pid no longer does).
fn exists(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[tokio::test]
async fn a_disposed_owner_s_background_tasks_are_stopped_and_forgotten() {
    let w = world().await;
    let (agent, detach) = w.detachable_agent("agent-a");
    let caller = caller_of(&agent, None);
    let id = w
        .start(r#"echo "pid=$$"; exec sleep 1000"#, Some(&caller))
        .await;
    let seen = w.read_until(&id, Some(&caller), "pid=").await;
    let pid: i32 = seen
        .lines()
        .find_map(|line| line.strip_prefix("pid="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(exists(pid));
    let other = w.caller("session-b");
    let kept = w.start("sleep 1000", Some(&other)).await;

    detach.detach();

    let deadline = tokio::time::Instant::now() + PATIENCE;
    while w.executor.list().iter().any(|task| task.id == id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} of a disposed owner is still kept"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        !exists(pid),
        "the disposed owner's command {pid} still runs"
    );
    // A later agent under the same id finds nothing left of it.
    let (again, _detach) = w.detachable_agent("agent-a");
    let result = output(&w, &id, Some(&caller_of(&again, None))).await;
    assert_eq!(result.code(), Some(UNKNOWN_TASK), "{}", result.text());
    assert!(
        w.status(&kept).is_running(),
        "another session's task is untouched"
    );
    w.shutdown().await;
}
