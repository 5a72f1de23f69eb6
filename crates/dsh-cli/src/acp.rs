//! `dsh acp`: an Agent Client Protocol agent on stdio, for editors.
//!
//! Stdout carries protocol frames only (the bridge writes nothing else there, and logs go to
//! stderr or `DSH_LOG_FILE`). The composition is the one `dsh run` uses, plus the config-declared
//! agents; every session the editor opens gets its workspace's `AGENTS.md`.

pub(crate) mod unconfigured;

use dsh_acp::{AcpOptions, ApprovalPolicy};
use dsh_agent::AgentOptions;
use dsh_harness::config::{Overrides, Settings, Source, Sourced, process_env};
use dsh_harness::{DRAIN, FrontEnd, Harness, HarnessOptions};
use tokio::time::Instant;

use crate::signals::{Signals, Stop};

/// The bridge's options for a front end serving ACP over `harness` (`dsh acp`, `dsh web`).
/// `never_ask` turns the client's own per-call prompt off (`--auto-approve`, or a guard policy
/// other than `ask`: the guard then decides alone).
pub(crate) fn bridge_options(harness: &Harness, never_ask: bool) -> AcpOptions {
    let approval = if never_ask {
        ApprovalPolicy::Never
    } else {
        ApprovalPolicy::MutatingTools
    };
    // Sessions are planned by the harness (its `AgentPlanner`: the route a loaded session
    // keeps, instruction files, effort); these options only name the default route.
    let settings = harness.settings();
    let route = AgentOptions::route(&settings.provider.value, &settings.model.value);
    let mut options = AcpOptions::new(route).with_approval(approval);
    // Editor terminals inherit the editor's environment, secrets included.
    options.terminal_unset = dsh_harness::env::moved_names();
    options.terminal_unset.extend(
        settings
            .providers
            .values()
            .filter_map(|p| p.api_key_env.as_ref().map(|v| v.value.clone())),
    );
    // Usage updates carry the session's running cost, priced like `dsh run`'s summary.
    options.catalog = Some(settings.catalog.clone());
    options
}

/// Runs a front end's ACP server until it ends or a signal stops it, and returns the exit code
/// and the deadline that bounds the rest of the stop.
///
/// `serve` gets the stop future: on the first signal the bridge tears its sessions down (every
/// session cancelled with cause `user`, drained, disposed; outstanding prompts answered
/// `cancelled`) while its clients are still connected, bounded by [`DRAIN`]; a second signal
/// exits at once. The loop's shutdown after it, bounded by the same deadline, then only has the
/// config-declared agents left to stop.
pub(crate) async fn serve_until_signal<F, Fut, E>(signals: &mut Signals, serve: F) -> (i32, Instant)
where
    F: FnOnce(futures::future::BoxFuture<'static, ()>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    signals.graceful();
    let mut first_signal = signals.clone();
    let stop = Box::pin(async move {
        first_signal.first().await;
    });
    let served = serve(stop);
    tokio::pin!(served);
    let outcome = tokio::select! {
        result = &mut served => {
            let code = match result {
                // The stop future fired first and the server was quicker than the select.
                Ok(()) => signals.received().map_or(0, Stop::exit_code),
                Err(e) => {
                    eprintln!("dsh: {e}");
                    1
                }
            };
            (code, Instant::now() + DRAIN)
        }
        stop = signals.first() => {
            // From now on a second signal exits at once. One deadline bounds the whole
            // stop: the bridge's teardown and the loop's shutdown after it.
            signals.exit_on_next();
            let deadline = Instant::now() + DRAIN;
            match tokio::time::timeout_at(deadline, &mut served).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "the ACP server failed while stopping"),
                Err(_) => tracing::warn!("the ACP sessions did not stop within {DRAIN:?}"),
            }
            (stop.exit_code(), deadline)
        }
    };
    signals.exit_on_next();
    outcome
}

/// Serves ACP on stdin/stdout until the client closes stdin (exit 0) or a signal stops it
/// (130 after SIGINT, 143 after SIGTERM, once every session is cancelled, drained and saved —
/// at most [`DRAIN`] — or at once on a second signal); returns the exit status.
pub fn main(mut settings: Settings, flags: Overrides, auto_approve: bool) -> i32 {
    // `--auto-approve` runs every tool without asking, so the guard must not ask either (MCP
    // tools would otherwise still wait for the editor): its policy becomes `auto`, which allows
    // what only needs approval and refuses what goes beyond the sandbox. `--approval` wins.
    if auto_approve
        && !matches!(
            settings.guard.approval.as_ref().map(|a| &a.source),
            Some(Source::Flag(_))
        )
    {
        settings.guard.approval = Some(Sourced::new(
            dsh_guard::ApprovalPolicy::Auto,
            Source::Flag("--auto-approve"),
        ));
    }
    if let Err(e) = settings.check_credentials(&process_env) {
        return unconfigured::main(&e.into());
    }
    crate::serve(|mut signals: Signals| async move {
        let guard_policy = settings.guard.approval_or(dsh_guard::ApprovalPolicy::Ask);
        let editor_terminals =
            settings.guard.sandbox.value == dsh_guard::SandboxMode::DangerFullAccess;
        let options = HarnessOptions::new(FrontEnd::Editor).with_flags(flags);
        let harness = match Harness::start(settings, options).await {
            Ok(h) => h,
            Err(e) => {
                let problem = format!("{:#}", anyhow::Error::new(e));
                signals.graceful();
                return unconfigured::serve(problem, async {
                    signals.first().await;
                })
                .await;
            }
        };
        if let Err(e) = harness.ready().await {
            harness.shutdown().await;
            signals.graceful();
            return unconfigured::serve(e.to_string(), async {
                signals.first().await;
            })
            .await;
        }
        let never_ask = auto_approve || guard_policy != dsh_guard::ApprovalPolicy::Ask;
        let mut options = bridge_options(&harness, never_ask);
        // The editor spawns its terminals' processes itself, outside dsh's supervisor: a
        // confining sandbox mode must not be bypassed through them (R10), so `bash` runs in the
        // editor's terminals only when commands are not confined.
        options.editor_terminals = editor_terminals;
        let served = |stop| {
            dsh_acp::serve_until(
                harness.context().clone(),
                options,
                tokio::io::stdin(),
                tokio::io::stdout(),
                stop,
            )
        };
        let (code, deadline) = serve_until_signal(&mut signals, served).await;
        // Every agent still running (config-declared ones, or a bridge session whose teardown
        // ran out of time) is stopped, drained and flushed by the loop's shutdown.
        harness.shutdown_by(deadline).await;
        code
    })
}
