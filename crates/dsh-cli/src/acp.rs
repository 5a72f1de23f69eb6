//! `dsh acp`: an Agent Client Protocol agent on stdio, for editors.
//!
//! Stdout carries protocol frames only (the bridge writes nothing else there, and logs go to
//! stderr or `DSH_LOG_FILE`). The composition is the one `dsh run` uses, plus the config-declared
//! agents; every session the editor opens gets its workspace's `AGENTS.md`.

use std::sync::Arc;

use dsh_acp::{AcpOptions, ApprovalPolicy};

use crate::compose::{AgentSpec, agent_setup, compose_for_acp};
use crate::config::{Settings, process_env};
use crate::run::DRAIN;
use crate::signals::Signals;

/// Serves ACP on stdin/stdout until the client closes stdin; returns the exit status.
pub fn main(settings: Settings, auto_approve: bool) -> i32 {
    if let Err(e) = settings.check_credentials(&process_env) {
        eprintln!("dsh: {e:#}");
        return 1;
    }
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        let mut signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("dsh: cannot install signal handlers: {e}");
                return 1;
            }
        };
        let composed = match compose_for_acp(&settings).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("dsh: {e:#}");
                return 1;
            }
        };
        if let Err(f) = composed.adapter.ready().await {
            eprintln!("dsh: provider `{}`: {f}", settings.provider.value);
            composed.shutdown().await;
            return 1;
        }
        let approval = if auto_approve {
            ApprovalPolicy::Never
        } else {
            ApprovalPolicy::MutatingTools
        };
        let options = AcpOptions::new(composed.agent_options())
            .with_approval(approval)
            .with_agent_setup(Arc::new(|| agent_setup(&AgentSpec::default())));
        let served = dsh_acp::serve(
            composed.ctx.clone(),
            options,
            tokio::io::stdin(),
            tokio::io::stdout(),
        );
        let code = tokio::select! {
            result = served => match result {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("dsh: {e}");
                    1
                }
            },
            stop = signals.first() => stop.exit_code(),
        };
        signals.exit_on_next();
        // Every agent (the bridge's included) is stopped, drained and flushed by the loop's
        // shutdown, so a signal still leaves balanced session files.
        if tokio::time::timeout(DRAIN, composed.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("teardown did not finish within {DRAIN:?}; exiting anyway");
        }
        code
    })
}
