//! The `dsh` binary: headless runs, the interactive chat, stored sessions and configuration.
//!
//! Module map: [`cli`] (the command-line surface), [`config`] (file + environment + flags),
//! [`compose`] (the composition root every front end shares), [`run`] (`dsh run`), [`chat`]
//! (the line chat), [`tui`] (the full-screen UI, the default on a terminal), [`acp`] (`dsh acp`), [`render`] (session events → terminal text, shared by the
//! drivers), [`sink`] (event delivery off the agent's thread), [`lazy_adapter`], [`sessions`], [`instructions`]
//! (`AGENTS.md`), [`signals`] and [`logging`].

mod acp;
mod approve;
mod chat;
mod cli;
mod compose;
mod config;
mod effort;
mod follow;
mod guard;
mod hooks;
mod instructions;
mod lazy_adapter;
mod logging;
mod mcp;
mod piped;
mod progress;
mod render;
mod resume_route;
mod run;
mod secrets;
mod session_ref;
mod sessions;
mod signals;
mod sink;
mod stdout;
mod storage;
mod store;
mod terminal;
mod transfer;
mod tui;
mod usage;

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command, ConfigCommand, HooksCommand, McpCommand};
use crate::config::{Settings, process_env};

fn main() {
    // The per-command supervisor is dsh re-executed: dispatched before anything else runs
    // (no clap, logging or runtime), so it stays single-threaded and cheap.
    let mut raw = std::env::args_os();
    if raw.nth(1).is_some_and(|a| a == dsh_guard::SUPERVISE_ARG) {
        std::process::exit(dsh_guard::supervise(raw));
    }
    // Then, while dsh still has a single thread: it may re-execute itself (see `secrets`).
    secrets::protect();
    let args = cli::rewrite_profile(std::env::args_os().collect());
    let cli = Cli::parse_from(args);
    logging::init();
    let overrides = cli.global.overrides();
    let code = match cli.command {
        Some(Command::Run(args)) => {
            // `-c` and id prefixes are resolved first, so the resumed session's own route
            // applies; a reference that does not resolve is reported by the run itself.
            let resolved = Settings::load(&overrides).ok().and_then(|s| {
                session_ref::for_chat(
                    &s,
                    cli.global.cwd.as_deref(),
                    args.resume.clone(),
                    args.continue_last,
                )
                .ok()
                .flatten()
            });
            let settings = resume_route::settings(&overrides, resolved.as_deref());
            run::main(args, settings, cli.global.cwd)
        }
        Some(Command::Chat(args)) => match Settings::load(&overrides).and_then(|settings| {
            session_ref::for_chat(
                &settings,
                cli.global.cwd.as_deref(),
                args.resume,
                args.continue_last,
            )
        }) {
            Ok(resume) => match resume_route::settings(&overrides, resume.as_deref()) {
                Ok(settings) => tui::interactive(settings, cli.global.cwd, resume, cli.plain),
                Err(e) => fail(&e),
            },
            Err(e) => fail(&e),
        },
        Some(Command::Sessions(command)) => {
            sessions::main(Settings::load(&overrides), &command, cli.plain)
        }
        Some(Command::Config(ConfigCommand::Show)) => match Settings::load(&overrides) {
            Ok(settings) => print_out(&settings.render(&process_env)),
            Err(e) => fail(&e),
        },
        Some(Command::Mcp(McpCommand::List)) => match Settings::load(&overrides) {
            Ok(settings) => mcp::list(settings),
            Err(e) => fail(&e),
        },
        Some(Command::Hooks(HooksCommand::List)) => {
            match Settings::load(&overrides).and_then(|settings| {
                let cwd = match &cli.global.cwd {
                    Some(dir) => dir.clone(),
                    None => std::env::current_dir().context("cannot read the current directory")?,
                };
                hooks::list(&settings, &cwd)
            }) {
                Ok(text) => print_out(&text),
                Err(e) => fail(&e),
            }
        }
        Some(Command::Acp(args)) => match Settings::load(&overrides) {
            Ok(settings) => acp::main(settings, args.auto_approve),
            Err(e) => acp::unconfigured::main(&e),
        },
        None if std::io::stdin().is_terminal() => match Settings::load(&overrides) {
            Ok(settings) => match session_ref::for_chat(
                &settings,
                cli.global.cwd.as_deref(),
                None,
                cli.continue_last,
            ) {
                Ok(resume) => tui::interactive(settings, cli.global.cwd, resume, cli.plain),
                Err(e) => fail(&e),
            },
            Err(e) => fail(&e),
        },
        None => {
            // Nothing to do without a terminal to chat in: say how to use dsh instead.
            let _ = Cli::command().write_long_help(&mut std::io::stderr());
            eprintln!();
            run::USAGE
        }
    };
    std::process::exit(code);
}

/// Writes a command's output to stdout; returns the exit status. A reader that stopped
/// reading early (`dsh sessions show ID | head`) is not a failure; any other write error is.
pub(crate) fn print_out(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("dsh: cannot write to stdout: {e}");
            1
        }
    }
}

fn fail(e: &anyhow::Error) -> i32 {
    eprintln!("dsh: {e:#}");
    1
}

/// The runtime every agent-driving command uses. Two workers keep the agent's driver, the
/// HTTP stream and the tools moving without paying for a thread per core.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("dsh-worker")
        .enable_all()
        .build()
}

/// The canonical working directory of a new session: `--cwd` or the current directory.
pub(crate) fn workspace_dir(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let canonical = dir
        .canonicalize()
        .with_context(|| format!("cannot use working directory {}", dir.display()))?;
    if !canonical.is_dir() {
        anyhow::bail!("working directory {} is not a directory", dir.display());
    }
    Ok(canonical)
}

/// Whether two paths name one directory, symlinks resolved.
pub(crate) fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || matches!(
            (a.canonicalize(), b.canonicalize()),
            (Ok(a), Ok(b)) if a == b
        )
}
