//! `dsh acp`: an Agent Client Protocol agent on stdio, for editors.
//!
//! Stdout carries protocol frames only (the bridge writes nothing else there, and logs go to
//! stderr or `DSH_LOG_FILE`). The composition is the one `dsh run` uses, plus the config-declared
//! agents; every session the editor opens gets its workspace's `AGENTS.md`.

pub(crate) mod unconfigured;

use std::sync::Arc;

use dsh_acp::{AcpOptions, ApprovalPolicy};
use tokio::time::Instant;

use crate::compose::{agent_setup, compose_for_acp};
use crate::config::{Settings, process_env};
use crate::run::DRAIN;
use crate::signals::Signals;

/// Serves ACP on stdin/stdout until the client closes stdin (exit 0) or a signal stops it
/// (130 after SIGINT, 143 after SIGTERM, once every session is cancelled, drained and saved —
/// at most [`DRAIN`] — or at once on a second signal); returns the exit status.
pub fn main(settings: Settings, auto_approve: bool) -> i32 {
    if let Err(e) = settings.check_credentials(&process_env) {
        return unconfigured::main(&e);
    }
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(async move {
        let mut signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("dsh: cannot install signal handlers: {e}");
                return 1;
            }
        };
        let composed = match compose_for_acp(&settings).await {
            Ok(c) => c,
            Err(e) => return unconfigured::serve(format!("{e:#}"), async { signals.first().await; }).await,
        };
        if let Err(f) = composed.adapter.ready().await {
            composed.shutdown().await;
            let problem = format!("provider `{}`: {f}", settings.provider.value);
            return unconfigured::serve(problem, async { signals.first().await; }).await;
        }
        // `--approval auto|never` turns the editor's own per-call prompt off too; the guard
        // then decides alone (see `compose`).
        let guard_policy = settings.guard.approval_or(dsh_guard::ApprovalPolicy::Ask);
        let approval = if auto_approve || guard_policy != dsh_guard::ApprovalPolicy::Ask {
            ApprovalPolicy::Never
        } else {
            ApprovalPolicy::MutatingTools
        };
        let spec = composed.agent_spec();
        let mut options = AcpOptions::new(composed.agent_options())
            .with_approval(approval)
            .with_agent_setup(Arc::new(move || agent_setup(&spec)));
        // The editor spawns its terminals' processes itself, outside dsh's supervisor: a
        // confining sandbox mode must not be bypassed through them (R10), so `bash` runs in the
        // editor's terminals only when commands are not confined.
        options.editor_terminals =
            settings.guard.sandbox.value == dsh_guard::SandboxMode::DangerFullAccess;
        // Editor terminals inherit the editor's environment, secrets included.
        options.terminal_unset = crate::secrets::moved_names();
        options.terminal_unset.extend(
            settings
                .providers
                .values()
                .filter_map(|p| p.api_key_env.as_ref().map(|v| v.value.clone())),
        );
        // Usage updates carry the session's running cost, priced like `dsh run`'s summary.
        options.catalog = Some(settings.catalog.clone());
        // A signal asks the bridge for its own teardown (every session cancelled with cause
        // `user`, drained, disposed; outstanding prompts answered `cancelled`), bounded by
        // DRAIN. The loop's shutdown then only has the config-declared agents left to stop.
        let mut first_signal = signals.clone();
        let stop = async move {
            first_signal.first().await;
        };
        let served = dsh_acp::serve_until(
            composed.ctx.clone(),
            options,
            tokio::io::stdin(),
            tokio::io::stdout(),
            stop,
        );
        tokio::pin!(served);
        let (code, deadline) = tokio::select! {
            result = &mut served => {
                let code = match result {
                    Ok(()) => 0,
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
                    Ok(Err(error)) => tracing::warn!(%error, "the ACP connection failed while stopping"),
                    Err(_) => tracing::warn!("the ACP sessions did not stop within {DRAIN:?}"),
                }
                (stop.exit_code(), deadline)
            }
        };
        signals.exit_on_next();
        // Every agent still running (config-declared ones, or a bridge session whose teardown
        // ran out of time) is stopped, drained and flushed by the loop's shutdown.
        composed.shutdown_by(deadline).await;
        code
    });
    // The runtime reads stdin on a blocking thread that nothing can interrupt: after a signal
    // the editor may still hold the pipe open, and waiting for that read would keep dsh alive.
    // Everything durable is done by now, so leave that thread behind.
    runtime.shutdown_background();
    code
}
