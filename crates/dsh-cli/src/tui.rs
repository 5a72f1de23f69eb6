//! The full-screen UI, composed: `dsh` and `dsh chat` on a terminal (unless `--plain`).
//!
//! `dsh-tui` drives agents through its host seam; `dsh_tui::HarnessHost` is that host over the
//! harness (the same sessions, routes and policy `dsh run` and the line chat get). What is left
//! here is the binary's part: whether to start it, start-up errors, signals and the exit line.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_harness::config::{Overrides, Settings, process_env};
use dsh_harness::{
    DRAIN, FrontEnd, Harness, HarnessOptions, SessionReference, SessionRequest, workspace_dir,
};
use dsh_tui::HarnessHost;
use dsh_tui::runner::TuiOptions;

use crate::signals::Signals;

/// Whether `dsh`/`dsh chat` should start the full-screen UI: both ends are terminals, the
/// terminal is not `dumb` and `--plain` was not given.
pub fn wanted(plain: bool) -> bool {
    !plain
        && std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// The interactive front end for `dsh`, `dsh chat` and `dsh sessions resume`: the full-screen
/// UI when [`wanted`], else the line chat.
pub fn interactive(
    settings: Settings,
    flags: Overrides,
    cwd: Option<PathBuf>,
    reference: SessionReference,
    plain: bool,
) -> i32 {
    if wanted(plain) {
        main(settings, flags, cwd, reference)
    } else {
        crate::chat::main(settings, flags, cwd, reference)
    }
}

/// Runs the full-screen UI; returns the exit status.
pub fn main(
    settings: Settings,
    flags: Overrides,
    cwd: Option<PathBuf>,
    reference: SessionReference,
) -> i32 {
    let first = reference.clone();
    start(settings, cwd, &reference, |settings, cwd, signals| {
        tui(settings, flags, cwd, first, signals)
    })
}

/// The start every interactive front end shares: credentials checked (for a new session: a
/// resumed one keeps its own route, checked when it opens), the working directory resolved,
/// the runtime built, then `body` run on it; its error is printed. Returns the exit status.
pub fn start<F>(
    settings: Settings,
    cwd: Option<PathBuf>,
    reference: &SessionReference,
    body: impl FnOnce(Settings, PathBuf, Signals) -> F,
) -> i32
where
    F: Future<Output = anyhow::Result<()>>,
{
    if *reference == SessionReference::New
        && let Err(e) = settings.check_credentials(&process_env)
    {
        eprintln!("dsh: {e}");
        return 1;
    }
    let cwd = match workspace_dir(cwd) {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("dsh: {e}");
            return 1;
        }
    };
    let runtime = match crate::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let ran = runtime.block_on(async move {
        // Until the front end takes Ctrl-C over, a signal ends a start-up at once.
        let signals = Signals::install()
            .map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
        body(settings, cwd, signals).await
    });
    match ran {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("dsh: {e:#}");
            1
        }
    }
}

/// The harness of an interactive front end: configured agents started, and the provider
/// checked now (a chat is long-lived: a bad provider setting shows at start, not at the first
/// message).
pub async fn start_harness(settings: Settings, flags: Overrides) -> anyhow::Result<Harness> {
    let options = HarnessOptions::new(FrontEnd::Interactive).with_flags(flags);
    let harness = Harness::start(settings, options).await?;
    if let Err(e) = harness.ready().await {
        harness.shutdown().await;
        return Err(e.into());
    }
    for notice in harness.notices() {
        eprintln!("dsh: {notice}");
    }
    Ok(harness)
}

async fn tui(
    settings: Settings,
    flags: Overrides,
    cwd: PathBuf,
    reference: SessionReference,
    signals: Signals,
) -> anyhow::Result<()> {
    let history = settings.home.value.join("tui-history.jsonl");
    let harness = start_harness(settings, flags).await?;
    // `-c` is found before the UI starts; an id (or a prefix of one) is resolved as the UI
    // resumes it, so a bad one is reported in the UI.
    let resume = match &reference {
        SessionReference::New => None,
        SessionReference::Resume(reference) => Some(reference.clone()),
        other => {
            let request = SessionRequest::new(other.clone()).in_dir(&cwd);
            match harness.locate(&request).await {
                Ok(located) => Some(located.id.to_string()),
                Err(e) => {
                    harness.shutdown().await;
                    return Err(e.into());
                }
            }
        }
    };
    let host = Arc::new(HarnessHost::new(harness, cwd));
    let options = TuiOptions {
        resume,
        history: Some(history),
        keyboard_protocol: std::env::var("DSH_TUI_KEYBOARD_PROTOCOL").map_or(true, |v| v != "0"),
    };
    // The UI reads Ctrl-C as a key; SIGTERM still ends dsh.
    signals.interactive();
    let result = dsh_tui::run(host.clone(), options).await;
    host.harness()
        .shutdown_by(tokio::time::Instant::now() + DRAIN)
        .await;
    let exit = result?;
    if let Some(answer) = &exit.last_answer {
        println!("{}", answer.trim_end());
    }
    if let Some(id) = &exit.session {
        println!("session {id} (dsh chat --resume {id})");
    }
    Ok(())
}
