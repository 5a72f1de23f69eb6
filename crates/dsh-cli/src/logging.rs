//! Diagnostics with `tracing`: to stderr, or to the file named by `DSH_LOG_FILE`, filtered by
//! `DSH_LOG` (default `warn`). Never to stdout: stdout carries answers and machine output.

use std::fs::OpenOptions;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// The ACP SDK warns about every error answer it sends, and most of those answer a client's
/// mistake (an editor probing an unknown session): `dsh acp` logs those itself at debug level
/// and its own failures as warnings, so the SDK's copy is kept to errors. A `DSH_LOG` that
/// names the SDK's target explicitly keeps its say.
fn quiet_protocol_refusals(filter: EnvFilter) -> EnvFilter {
    let explicit =
        std::env::var("DSH_LOG").is_ok_and(|spec| spec.contains("agent_client_protocol"));
    if explicit {
        return filter;
    }
    match "agent_client_protocol::jsonrpc::outgoing_actor=error".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// Installs the subscriber. Failures to open the log file fall back to stderr with a note.
pub fn init() {
    let filter = match std::env::var("DSH_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        Some(spec) => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            eprintln!("dsh: ignoring DSH_LOG={spec:?} ({e}); logging warnings only");
            EnvFilter::new("warn")
        }),
        None => EnvFilter::new("warn"),
    };
    let filter = quiet_protocol_refusals(filter);
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if let Some(path) = std::env::var_os("DSH_LOG_FILE").filter(|v| !v.is_empty()) {
        match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => {
                let _ = builder
                    .with_ansi(false)
                    .with_writer(Mutex::new(file))
                    .try_init();
                return;
            }
            Err(e) => eprintln!(
                "dsh: cannot open DSH_LOG_FILE {}: {e}; logging to stderr",
                std::path::Path::new(&path).display()
            ),
        }
    }
    let _ = builder.with_writer(std::io::stderr).try_init();
}
