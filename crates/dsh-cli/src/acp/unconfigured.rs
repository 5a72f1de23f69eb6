//! `dsh acp` whose configuration cannot run an agent (a broken config file, no model for the
//! provider, a missing key, an unreachable provider setup): the editor still gets its
//! `initialize` answer, and the problem as the error of `session/new`, instead of a broken
//! pipe. The problem is also written to stderr, where editors keep the agent's log.

use dsh_acp::AcpOptions;

/// Serves the unconfigured agent on stdio until the client hangs up (or a signal, when
/// `stop` resolves); returns the exit status, 1: dsh could not do its job.
pub(crate) async fn serve(problem: String, stop: impl std::future::Future<Output = ()>) -> i32 {
    eprintln!("dsh: {problem}");
    let served = dsh_acp::serve_unconfigured(
        AcpOptions::default(),
        problem,
        tokio::io::stdin(),
        tokio::io::stdout(),
    );
    tokio::select! {
        result = served => {
            if let Err(e) = result {
                eprintln!("dsh: {e}");
            }
        }
        () = stop => {}
    }
    1
}

/// [`serve`] on a runtime of its own, for a configuration that failed to load at all.
pub(crate) fn main(problem: &anyhow::Error) -> i32 {
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: {problem:#}");
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(serve(format!("{problem:#}"), std::future::pending()));
    // Stdin is read on a blocking thread nothing can interrupt; nothing is left to save.
    runtime.shutdown_background();
    code
}
