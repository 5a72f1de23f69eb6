//! File-system work off the async threads, for every file tool.

use dsh_tools::ToolError;
use tokio_util::sync::CancellationToken;

/// Runs `body` on tokio's blocking pool and returns its result; `tool` names the tool in the
/// error of a body that panicked.
///
/// A read-only tool passes its call's cancellation as `abandon`: once it fires, the call
/// returns `aborted` at once instead of waiting for `body`, which may be stuck in a read that
/// never returns (`/proc/kmsg`, a FIFO swapped in after the file-type check, a hung network
/// mount) and would otherwise keep the turn from ever being cancelled. The abandoned thread
/// ends on its own and its result is dropped; a read-only body has nothing to undo, and the
/// observation record is only updated by the caller from a result it received. Tools that
/// change files pass `None`: their outcome must be reported as it happened.
pub(crate) async fn off_thread<T: Send + 'static>(
    tool: &str,
    abandon: Option<&CancellationToken>,
    body: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let task = tokio::task::spawn_blocking(body);
    let joined = match abandon {
        Some(cancel) => tokio::select! {
            // A body that has finished wins over a cancellation that arrived meanwhile.
            biased;
            joined = task => joined,
            () = cancel.cancelled() => return Err(ToolError::aborted()),
        },
        None => task.await,
    };
    joined.map_err(|e| ToolError::new(format!("{tool} failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use dsh_tools::TOOL_ABORTED;

    use super::*;

    #[tokio::test]
    async fn a_cancelled_read_only_call_returns_without_waiting_for_a_stuck_body() {
        let cancel = CancellationToken::new();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        // Dropped on every path, which also frees the body if the test fails.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let call = off_thread("read", Some(&cancel), move || {
            let _ = started_tx.send(());
            // Stands for a read that does not return until the test lets it.
            let _ = release_rx.recv();
            Ok("late")
        });
        let cancel_once_started = async {
            started_rx.await.unwrap();
            cancel.cancel();
        };
        let (result, ()) = tokio::time::timeout(Duration::from_secs(20), async {
            tokio::join!(call, cancel_once_started)
        })
        .await
        .expect("the cancelled call waited for its stuck body");
        assert_eq!(result.unwrap_err().code.as_deref(), Some(TOOL_ABORTED));
        drop(release_tx);
    }

    #[tokio::test]
    async fn a_body_that_finished_is_returned_even_when_abandoning_is_allowed() {
        let cancel = CancellationToken::new();
        assert_eq!(
            off_thread("read", Some(&cancel), || Ok("read"))
                .await
                .unwrap(),
            "read"
        );
        assert_eq!(
            off_thread("write", None, || Ok("written")).await.unwrap(),
            "written"
        );
    }

    #[tokio::test]
    async fn a_panicking_body_is_an_error_naming_the_tool() {
        let result: Result<(), ToolError> = off_thread("grep", None, || panic!("boom")).await;
        assert!(result.unwrap_err().message.starts_with("grep failed: "));
    }
}
