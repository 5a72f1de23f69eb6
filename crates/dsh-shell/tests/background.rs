//! Background tasks against real `bash` processes: ids, consuming reads, kill, notices,
//! owner tokens and disposal.

// Helpers outside #[test] functions panic on failure like the tests do.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use dsh_shell::{
    LocalShellExecutor, ShellError, ShellExecRequest, ShellExecutor, TaskDone, TaskId, TaskOutput,
    TaskStatus,
};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

async fn start(exec: &LocalShellExecutor, req: ShellExecRequest) -> TaskId {
    exec.start(spec(exec, req)).await.unwrap()
}

async fn next_done(notices: &mut broadcast::Receiver<TaskDone>) -> TaskDone {
    tokio::time::timeout(PATIENCE, notices.recv())
        .await
        .expect("no TaskDone arrived")
        .unwrap()
}

/// Reads until `want` has arrived, accumulating deltas; polls because output reaches the tail
/// through the pipe at the command's pace.
async fn read_until(exec: &LocalShellExecutor, id: &TaskId, want: &str) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut seen = String::new();
    loop {
        seen.push_str(&exec.read_output(id).unwrap().delta);
        if seen.contains(want) {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw {want:?}; got {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn task_ids_count_up_per_executor() {
    let exec = executor();
    let other = executor();
    assert_eq!(
        start(&exec, ShellExecRequest::new("true")).await.as_str(),
        "bash-1"
    );
    assert_eq!(
        start(&exec, ShellExecRequest::new("true")).await.as_str(),
        "bash-2"
    );
    assert_eq!(
        start(&other, ShellExecRequest::new("true")).await.as_str(),
        "bash-1"
    );
    exec.dispose().await;
    other.dispose().await;
}

#[tokio::test]
async fn read_output_is_consuming_and_readable_after_exit() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let mut gate = Gate::new();
    let req = ShellExecRequest {
        env: vec![gate.env("GATE")],
        ..ShellExecRequest::new(
            r#"echo out1; echo err1 >&2; read -r _ < "$GATE"; printf out2; echo err2 >&2"#,
        )
    };
    let id = start(&exec, req).await;
    let first = read_until(&exec, &id, "err1\n").await;
    assert!(first.contains("out1\n"), "{first:?}");

    let idle = exec.read_output(&id).unwrap();
    assert_eq!(idle.delta, "", "nothing is delivered twice");
    assert_eq!(idle.status, TaskStatus::Running);

    gate.open().await;
    let done = next_done(&mut notices).await;
    assert_eq!(done.status, TaskStatus::Completed { exit_code: 0 });

    let last = exec.read_output(&id).unwrap();
    assert_eq!(
        last,
        TaskOutput {
            delta: "out2\n[stderr]\nerr2\n".into(),
            status: TaskStatus::Completed { exit_code: 0 },
            lossy: false,
            stdout_spill: None,
            stderr_spill: None,
        }
    );
    assert_eq!(exec.read_output(&id).unwrap().delta, "");
}

#[tokio::test]
async fn output_lost_from_memory_is_reported_lossy_with_spill_paths() {
    let exec = executor_with(|c| c.max_output_bytes = 1000);
    let mut notices = exec.subscribe();
    let id = start(&exec, ShellExecRequest::new("seq 1 20000; seq 1 1000 >&2")).await;
    next_done(&mut notices).await;
    let read = exec.read_output(&id).unwrap();
    assert!(read.lossy);
    let (stdout, stderr) = read.delta.split_once("[stderr]\n").unwrap();
    assert!(seq(20000).ends_with(stdout));
    assert!(seq(1000).ends_with(stderr));
    assert_eq!(
        std::fs::read_to_string(read.stdout_spill.unwrap()).unwrap(),
        seq(20000)
    );
    assert_eq!(
        std::fs::read_to_string(read.stderr_spill.unwrap()).unwrap(),
        seq(1000)
    );
    assert!(
        !exec.read_output(&id).unwrap().lossy,
        "nothing more was lost after the first read"
    );
}

#[tokio::test]
async fn kill_returns_true_once_and_ends_killed() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let id = start(&exec, ShellExecRequest::new("sleep 1000")).await;
    assert!(exec.kill(&id).unwrap());
    assert!(
        !exec.kill(&id).unwrap(),
        "a second kill of a stopping task does nothing"
    );
    let done = next_done(&mut notices).await;
    let killed = TaskStatus::Killed {
        signal: Some("SIGTERM".into()),
    };
    assert_eq!(done.id, id);
    assert_eq!(done.status, killed);
    assert!(!exec.kill(&id).unwrap(), "a finished task cannot be killed");
    assert_eq!(exec.read_output(&id).unwrap().status, killed);
    assert_eq!(exec.list()[0].status, killed);
}

#[tokio::test]
async fn kill_escalates_to_sigkill_when_term_is_ignored() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let mut fifo = LineFifo::new();
    let req = ShellExecRequest {
        env: vec![fifo.env("PID_FIFO")],
        ..ShellExecRequest::new(r#"trap '' TERM; sleep 1000 & echo $! > "$PID_FIFO"; wait"#)
    };
    let id = start(&exec, req).await;
    let sleep = Proc::alive(Proc::pid(&fifo.read_line().await));
    assert!(exec.kill(&id).unwrap());
    let done = next_done(&mut notices).await;
    assert_eq!(
        done.status,
        TaskStatus::Killed {
            signal: Some("SIGKILL".into())
        }
    );
    sleep.assert_gone("TERM-ignoring sleep").await;
}

#[tokio::test]
async fn kill_of_a_term_trapping_task_is_still_killed() {
    let exec = executor_with(|c| c.grace = Duration::from_secs(30));
    let mut notices = exec.subscribe();
    let mut fifo = LineFifo::new();
    let req = ShellExecRequest {
        env: vec![fifo.env("READY")],
        ..ShellExecRequest::new(
            r#"trap 'exit 0' TERM; echo ready > "$READY"; while :; do sleep 1; done"#,
        )
    };
    let id = start(&exec, req).await;
    assert_eq!(fifo.read_line().await, "ready");
    assert!(exec.kill(&id).unwrap());
    let done = next_done(&mut notices).await;
    assert_eq!(done.status, TaskStatus::Killed { signal: None });
}

#[tokio::test]
async fn self_signal_ends_a_task_killed() {
    let exec = executor();
    let mut notices = exec.subscribe();
    start(&exec, ShellExecRequest::new("kill -TERM $$")).await;
    let done = next_done(&mut notices).await;
    assert_eq!(
        done.status,
        TaskStatus::Killed {
            signal: Some("SIGTERM".into())
        }
    );
}

#[tokio::test]
async fn cancel_token_stops_a_background_task() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let token = CancellationToken::new();
    let req = ShellExecRequest {
        cancel: Some(token.clone()),
        ..ShellExecRequest::new("sleep 1000")
    };
    start(&exec, req).await;
    token.cancel();
    let done = next_done(&mut notices).await;
    assert_eq!(
        done.status,
        TaskStatus::Killed {
            signal: Some("SIGTERM".into())
        }
    );
}

#[tokio::test]
async fn task_done_is_sent_once_with_status_and_owner() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let req = ShellExecRequest {
        owner: Some("session-a".into()),
        ..ShellExecRequest::new("exit 4")
    };
    let id = start(&exec, req).await;
    let done = next_done(&mut notices).await;
    assert_eq!(
        done,
        TaskDone {
            id: id.clone(),
            status: TaskStatus::Completed { exit_code: 4 },
            owner: Some("session-a".into())
        }
    );
    // The executor is quiescent after dispose, so a second notice would be queued by now.
    exec.dispose().await;
    assert!(matches!(
        notices.try_recv(),
        Err(broadcast::error::TryRecvError::Empty)
    ));
}

#[tokio::test]
async fn owner_of_is_the_stored_token() {
    let exec = executor();
    let owned = ShellExecRequest {
        owner: Some("session-a".into()),
        ..ShellExecRequest::new("true")
    };
    let empty = ShellExecRequest {
        owner: Some(String::new()),
        ..ShellExecRequest::new("true")
    };
    let owned = start(&exec, owned).await;
    let unowned = start(&exec, ShellExecRequest::new("true")).await;
    let empty = start(&exec, empty).await;
    assert_eq!(exec.owner_of(&owned).as_deref(), Some("session-a"));
    assert_eq!(exec.owner_of(&unowned), None);
    assert_eq!(
        exec.owner_of(&empty).as_deref(),
        Some(""),
        "an empty token is still an owner"
    );
    assert_eq!(exec.owner_of(&TaskId::new("bash-99")), None);
    exec.dispose().await;
}

#[tokio::test]
async fn list_shows_every_task_oldest_first() {
    let exec = executor();
    let mut notices = exec.subscribe();
    start(&exec, ShellExecRequest::new("exit 0")).await;
    next_done(&mut notices).await;
    start(&exec, ShellExecRequest::new("sleep 1000")).await;
    let list = exec.list();
    assert_eq!(list.len(), 2);
    assert_eq!(
        (list[0].id.as_str(), list[0].command.as_str()),
        ("bash-1", "exit 0")
    );
    assert_eq!(list[0].status, TaskStatus::Completed { exit_code: 0 });
    assert_eq!(
        (list[1].id.as_str(), list[1].status.clone()),
        ("bash-2", TaskStatus::Running)
    );
    exec.dispose().await;
}

#[tokio::test]
async fn unknown_task_errors_name_the_id() {
    let exec = executor();
    let id = TaskId::new("bash-42");
    let err = exec.read_output(&id).unwrap_err();
    assert!(matches!(err, ShellError::UnknownTask(ref unknown) if *unknown == id));
    assert!(err.to_string().contains("bash-42"), "{err}");
    assert!(matches!(exec.kill(&id), Err(ShellError::UnknownTask(_))));
}

#[tokio::test]
async fn dispose_kills_and_reaps_every_command() {
    let exec = Arc::new(executor());
    let mut notices = exec.subscribe();
    let mut background_fifo = LineFifo::new();
    let mut foreground_fifo = LineFifo::new();
    let script = r#"sleep 1000 & echo $! > "$PID_FIFO"; wait"#;
    let background = ShellExecRequest {
        env: vec![background_fifo.env("PID_FIFO")],
        ..ShellExecRequest::new(script)
    };
    let foreground = ShellExecRequest {
        env: vec![foreground_fifo.env("PID_FIFO")],
        ..ShellExecRequest::new(script)
    };
    let id = start(&exec, background).await;
    let foreground = spec(&*exec, foreground);
    let run = tokio::spawn({
        let exec = exec.clone();
        async move { exec.run(foreground).await }
    });
    let background_sleep = Proc::alive(Proc::pid(&background_fifo.read_line().await));
    let foreground_sleep = Proc::alive(Proc::pid(&foreground_fifo.read_line().await));

    exec.dispose().await;

    background_sleep
        .assert_gone("background task's sleep")
        .await;
    foreground_sleep.assert_gone("foreground run's sleep").await;
    let result = run.await.unwrap().unwrap();
    assert!(result.aborted && !result.timed_out);
    let done = notices
        .try_recv()
        .expect("dispose waited for the task to finish");
    assert_eq!(done.id, id);
    assert!(matches!(done.status, TaskStatus::Killed { .. }));
    assert!(
        !exec.read_output(&id).unwrap().status.is_running(),
        "reads still work after dispose"
    );

    assert!(matches!(
        exec.start(command(&*exec, "true")).await,
        Err(ShellError::Disposed)
    ));
    assert!(matches!(
        exec.run(command(&*exec, "true")).await,
        Err(ShellError::Disposed)
    ));
    exec.dispose().await;
}

fn owned(owner: &str, command: &str) -> ShellExecRequest {
    ShellExecRequest {
        owner: Some(owner.into()),
        ..ShellExecRequest::new(command)
    }
}

/// Polls (bounded: the kill ladder runs at the process's pace) until `id` is forgotten.
async fn assert_forgotten(exec: &LocalShellExecutor, id: &TaskId) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while exec.list().iter().any(|task| task.id == *id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} was never forgotten"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(
        exec.read_output(id),
        Err(ShellError::UnknownTask(_))
    ));
    assert_eq!(exec.owner_of(id), None);
}

#[tokio::test]
async fn released_owner_s_tasks_are_stopped_and_forgotten_and_others_untouched() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let finished = start(&exec, owned("session-a", "echo done")).await;
    assert_eq!(next_done(&mut notices).await.id, finished);
    let mut fifo = LineFifo::new();
    let running = start(
        &exec,
        ShellExecRequest {
            env: vec![fifo.env("PID_FIFO")],
            ..owned("session-a", r#"sleep 1000 & echo $! > "$PID_FIFO"; wait"#)
        },
    )
    .await;
    let sleep = Proc::alive(Proc::pid(&fifo.read_line().await));
    let other = start(&exec, owned("session-b", "sleep 1000")).await;
    let unowned = start(&exec, ShellExecRequest::new("sleep 1000")).await;

    assert_eq!(exec.release_owner("session-a"), 1, "one task was running");

    assert_forgotten(&exec, &finished).await;
    sleep.assert_gone("a released owner's grandchild").await;
    let done = next_done(&mut notices).await;
    assert_eq!(
        done.id, running,
        "the stopped task's end is still announced"
    );
    assert!(matches!(done.status, TaskStatus::Killed { .. }));
    assert_forgotten(&exec, &running).await;
    for id in [&other, &unowned] {
        assert!(exec.read_output(id).unwrap().status.is_running(), "{id}");
    }
    assert_eq!(
        exec.release_owner("session-a"),
        0,
        "nothing is left to release"
    );
    exec.dispose().await;
}

#[tokio::test]
async fn task_ids_are_never_reused_after_a_release() {
    let exec = executor();
    let mut notices = exec.subscribe();
    let first = start(&exec, owned("session-a", "true")).await;
    next_done(&mut notices).await;
    exec.release_owner("session-a");
    let second = start(&exec, owned("session-b", "true")).await;
    assert_ne!(first, second);
    assert_eq!(second.as_str(), "bash-2");
    exec.dispose().await;
}

#[tokio::test]
async fn a_released_owner_s_spill_files_are_deleted() {
    let exec = executor_with(|config| config.max_output_bytes = 1000);
    let mut notices = exec.subscribe();
    let id = start(&exec, owned("session-a", "seq 1 5000")).await;
    next_done(&mut notices).await;
    let spill = exec
        .read_output(&id)
        .unwrap()
        .stdout_spill
        .expect("the output outgrew its tail");
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), seq(5000));
    exec.release_owner("session-a");
    assert!(!spill.exists(), "{} is still there", spill.display());
    exec.dispose().await;
}
