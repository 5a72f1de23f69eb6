//! Drives one command to its end: timeout, cancellation, the kill ladder, draining output.

use std::future::pending;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use crate::process::{CommandProcess, ExitInfo};
use crate::stop::{StopCause, StopLatch};

/// How long to wait for the output pipes to reach end of file once `bash` is reaped. By then
/// the reaper has SIGKILLed the group, so only a process that left the group (`setsid`) can still
/// hold a pipe; it must not hold up the result forever.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Where the kill ladder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ladder {
    Idle,
    /// SIGTERM sent; SIGKILL due at this instant.
    Terminating(Instant),
    Killed,
}

/// Waits for the command to end, stopping it when `stop` is requested, the `cancel` token fires
/// or `limit` elapses, and returns once `bash` is reaped and its output is drained.
///
/// Stopping is the kill ladder on the whole group: SIGTERM (and SIGCONT, so a stopped group can
/// act on it), then SIGKILL after `grace` unless `bash` has ended by then. When `bash` ends, the
/// reaper kills whatever is left in the group, so either way the group is gone within `grace`
/// plus scheduling time. The ladder runs once, whatever cause started it.
pub(crate) async fn run_to_end(
    process: CommandProcess,
    stop: &StopLatch,
    cancel: Option<&CancellationToken>,
    limit: Option<Duration>,
    grace: Duration,
) -> ExitInfo {
    let CommandProcess {
        group,
        mut exit,
        stdout,
        stderr,
        pumps,
        lifeline,
        leftovers: _,
    } = process;
    let deadline = limit.map(|limit| Instant::now() + limit);
    let mut ladder = Ladder::Idle;
    let exit = loop {
        let idle = ladder == Ladder::Idle;
        let kill_at = match ladder {
            Ladder::Terminating(at) => Some(at),
            Ladder::Idle | Ladder::Killed => None,
        };
        tokio::select! {
            biased;
            exit = &mut exit => break exit.unwrap_or(ExitInfo::Unknown),
            () = stop.requested(), if idle => {
                group.signal(Signal::SIGTERM);
                group.signal(Signal::SIGCONT);
                ladder = Ladder::Terminating(Instant::now() + grace);
            }
            () = until(kill_at) => {
                group.signal(Signal::SIGKILL);
                ladder = Ladder::Killed;
            }
            () = until(deadline), if idle => {
                stop.request(StopCause::Timeout);
            }
            () = cancelled(cancel), if idle => {
                stop.request(StopCause::Cancelled);
            }
        }
    };
    // The supervisor died with the group; the lifeline has nothing left to guard.
    drop(lifeline);
    let aborts = pumps.each_ref().map(|pump| pump.abort_handle());
    let [out_pump, err_pump] = pumps;
    if timeout(DRAIN_LIMIT, async {
        let _ = out_pump.await;
        let _ = err_pump.await;
    })
    .await
    .is_err()
    {
        tracing::warn!(
            "a process that left the command's group still holds its output pipes; not waiting for it"
        );
        aborts.iter().for_each(|pump| pump.abort());
        stdout.close();
        stderr.close();
    }
    exit
}

async fn until(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => pending().await,
    }
}

async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => pending().await,
    }
}
