//! Completion notices: when an owned background task ends, its owning agent is told, so the
//! model need not poll.
//!
//! A watcher task follows the executor's `TaskDone` broadcast for as long as the plugin is
//! mounted. For a task with an owner it looks up the live agent with that id in the
//! [`AgentRegistry`] and injects a short notice (joining the agent's next step without waking
//! an idle agent, as in the seed-era contract). An owner that is gone, or an unowned task, gets
//! nothing. A completion that lands while the plugin is unmounted is not announced; ownership
//! itself is unaffected, because it lives in the executor.

use dsh_agent::AgentRegistry;
use dsh_kernel::{BoxError, Context};
use dsh_session::{Message, SessionId, clip_chars};
use dsh_shell::{ShellExecutor, TaskDone, TaskId};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::render::render_status;

/// The `plugin` name on notice messages.
pub const NOTICE_PLUGIN: &str = "dsh-tools-builtin";

/// Longest command excerpt quoted in a notice.
const MAX_LABEL_CHARS: usize = 80;

/// The user message announcing `done`; `command` is the task's command line when known.
pub(crate) fn notice_message(done: &TaskDone, command: Option<&str>) -> Message {
    let status = render_status(&done.status);
    let id = &done.id;
    let label = command
        .map(|c| format!(" (`{}`)", clip_chars(c.trim(), MAX_LABEL_CHARS)))
        .unwrap_or_default();
    let text =
        format!("background task {id}{label} finished {status}. Read its output with bash_output.");
    Message::notice(
        NOTICE_PLUGIN,
        text,
        &format!("background task {id} finished {status}"),
    )
}

fn command_of(executor: &dyn ShellExecutor, id: &TaskId) -> Option<String> {
    executor
        .list()
        .into_iter()
        .find(|task| task.id == *id)
        .map(|task| task.command)
}

/// Delivers one notice, or drops it quietly when nobody owns the task or the owner is gone.
fn deliver(ctx: &Context, done: &TaskDone) {
    let Some(owner) = &done.owner else { return };
    let Some(agent) = ctx
        .get::<AgentRegistry>()
        .and_then(|registry| registry.get(&SessionId::new(owner.as_str())))
    else {
        return;
    };
    let command = ctx
        .get::<dyn ShellExecutor>()
        .and_then(|executor| command_of(executor.as_ref(), &done.id));
    if let Err(error) = agent.inject(notice_message(done, command.as_deref())) {
        tracing::warn!(task = %done.id, agent = %owner, %error, "completion notice not delivered");
    }
}

/// Starts the watcher for `executor`'s completions; it stops, and is awaited, when `ctx`'s
/// scope is disposed.
pub(crate) fn watch(ctx: &Context, executor: &dyn ShellExecutor) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| format!("completion notices need a tokio runtime: {e}"))?;
    let mut notices = executor.subscribe();
    let stop = CancellationToken::new();
    let watcher = {
        let (ctx, stop) = (ctx.clone(), stop.clone());
        runtime.spawn(async move {
            loop {
                let done = tokio::select! {
                    () = stop.cancelled() => break,
                    done = notices.recv() => done,
                };
                match done {
                    Ok(done) => deliver(&ctx, &done),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(
                            missed,
                            "completion notices were dropped: the watcher lagged"
                        );
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        })
    };
    let stop_on_failure = stop.clone();
    let registered = ctx.scope().defer_async(move || async move {
        stop.cancel();
        let _ = watcher.await;
    });
    if let Err(error) = registered {
        // No scope owns the watcher: stop it here rather than leak it.
        stop_on_failure.cancel();
        return Err(error.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use dsh_session::{MessageSource, NOTICE_SUMMARY_CHARS};
    use dsh_shell::TaskStatus;

    use super::*;

    #[test]
    fn long_commands_and_summaries_are_cut_to_their_limits() {
        let done = TaskDone {
            id: TaskId::new("bash-1"),
            status: TaskStatus::Completed { exit_code: 0 },
            owner: Some("a".into()),
        };
        let message = notice_message(&done, Some(&"x".repeat(500)));
        assert!(message.text().contains(&format!("(`{}…`)", "x".repeat(79))));
        let MessageSource::Plugin { extra, .. } = &message.source else {
            panic!("not a plugin message");
        };
        let summary = extra["summary"].as_str().unwrap();
        assert!(summary.chars().count() <= NOTICE_SUMMARY_CHARS);
    }
}
