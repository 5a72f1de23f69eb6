//! Diagnostics with `tracing`: to stderr, or to the file named by `DSH_LOG_FILE`, filtered by
//! `DSH_LOG` (default `warn`). Never to stdout: stdout carries answers and machine output.
//! `DSH_LOG=debug` shows each model request (provider, URL, bytes, status, timing, usage) and
//! `trace` their bodies, keys redacted (see `dsh-llm-openai`).

use std::fs::OpenOptions;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

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
    // Colour codes only where a person reads them: a captured or redirected stderr (CI logs,
    // an editor's ACP log pane) gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = builder
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}
