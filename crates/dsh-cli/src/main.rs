//! The `dsh` binary: headless runs, the interactive chat, stored sessions and configuration.
//!
//! Sessions are composed and opened by `dsh-harness`; this crate keeps what is the binary's
//! own: [`cli`] (the command-line surface), [`run`] (`dsh run`), [`chat`] (the line chat),
//! [`tui`] (the full-screen UI, the default on a terminal), [`acp`] (`dsh acp`), [`render`]
//! (session events → terminal text), [`sink`] (event delivery off the agent's thread),
//! [`sessions`], [`signals`] and [`logging`]. The line chat's approval and question prompts
//! are `dsh-chat`; the start-up re-exec without secrets is `dsh_harness::secrets`.

mod acp;
mod chat;
mod cli;
mod follow;
mod hooks;
mod logging;
mod mcp;
mod piped;
mod progress;
mod render;
mod rewind;
mod run;
mod sessions;
mod signals;
mod sink;
mod stdout;
mod terminal;
mod transfer;
mod tui;
mod web;

use std::io::{IsTerminal, Write as _};

use clap::{CommandFactory, Parser};
use dsh_harness::config::{Settings, process_env};
use dsh_harness::{SessionReference, workspace_dir};

use crate::cli::{Cli, Command, ConfigCommand, HooksCommand, McpCommand, SkillsCommand};

fn main() {
    // The per-command supervisor is dsh re-executed: dispatched before anything else runs
    // (no clap, logging or runtime), so it stays single-threaded and cheap.
    let mut raw = std::env::args_os();
    if raw.nth(1).is_some_and(|a| a == dsh_guard::SUPERVISE_ARG) {
        std::process::exit(dsh_guard::supervise(raw));
    }
    // Then, while dsh still has a single thread: it may re-execute itself (see `secrets`).
    for warning in dsh_harness::secrets::protect() {
        eprintln!("dsh: warning: {warning}");
    }
    let args = cli::rewrite_profile(std::env::args_os().collect());
    let cli = Cli::parse_from(args);
    logging::init();
    let overrides = cli.global.overrides();
    let code = match cli.command {
        Some(Command::Run(args)) => {
            run::main(args, Settings::load(&overrides), overrides, cli.global.cwd)
        }
        Some(Command::Chat(args)) => match Settings::load(&overrides) {
            Ok(settings) => tui::interactive(
                settings,
                overrides,
                cli.global.cwd,
                reference(args.resume, args.continue_last),
                cli.plain,
                args.plan || cli.plan,
            ),
            Err(e) => fail(&e.into()),
        },
        Some(Command::Sessions(command)) => {
            sessions::main(Settings::load(&overrides), overrides, &command, cli.plain)
        }
        Some(Command::Config(ConfigCommand::Show)) => match Settings::load(&overrides) {
            Ok(settings) => {
                let mut text = settings.render(&process_env);
                if let Ok(cwd) = workspace_dir(cli.global.cwd.clone()) {
                    dsh_harness::skills::render_folders(&mut text, &settings, &cwd);
                }
                text.push_str(&dsh_harness::guard::sandbox_status(&settings));
                print_out(&text)
            }
            Err(e) => fail(&e.into()),
        },
        Some(Command::Skills(SkillsCommand::List)) => match Settings::load(&overrides)
            .map_err(anyhow::Error::from)
            .and_then(|settings| {
                let cwd = workspace_dir(cli.global.cwd.clone())?;
                Ok(dsh_harness::skills::list(&settings, &cwd))
            }) {
            Ok(text) => print_out(&text),
            Err(e) => fail(&e),
        },
        Some(Command::Mcp(McpCommand::List)) => match Settings::load(&overrides) {
            Ok(settings) => mcp::list(settings),
            Err(e) => fail(&e.into()),
        },
        Some(Command::Mcp(McpCommand::Add { name, url, command })) => {
            match mcp::add(&overrides, &name, url, command) {
                Ok(text) => print_out(&text),
                Err(e) => fail(&e),
            }
        }
        Some(Command::Mcp(McpCommand::Trust)) => match Settings::load(&overrides)
            .map_err(anyhow::Error::from)
            .and_then(|settings| {
                // Where the servers are started from: the current directory (as `dsh mcp
                // list` and the sessions' servers use it).
                let cwd = workspace_dir(None)?;
                dsh_harness::project_mcp::trust(&settings.home.value, &cwd)
                    .map_err(anyhow::Error::msg)
            }) {
            Ok(text) => print_out(&text),
            Err(e) => fail(&e),
        },
        Some(Command::Mcp(McpCommand::Remove { name })) => match mcp::remove(&overrides, &name) {
            Ok(text) => print_out(&text),
            Err(e) => fail(&e),
        },
        Some(Command::Hooks(command)) => {
            match Settings::load(&overrides)
                .map_err(anyhow::Error::from)
                .and_then(|settings| {
                    let cwd = workspace_dir(cli.global.cwd.clone())?;
                    match command {
                        HooksCommand::List => hooks::list(&settings, &cwd),
                        HooksCommand::Trust => hooks::trust(&settings, &cwd),
                    }
                }) {
                Ok(text) => print_out(&text),
                Err(e) => fail(&e),
            }
        }
        Some(Command::Acp(args)) => match Settings::load(&overrides) {
            Ok(settings) => acp::main(settings, overrides, args.auto_approve),
            Err(e) => acp::unconfigured::main(&e.into()),
        },
        Some(Command::Web(args)) => match Settings::load(&overrides) {
            Ok(settings) => web::main(settings, overrides, cli.global.cwd, &args),
            Err(e) => fail(&e.into()),
        },
        None if std::io::stdin().is_terminal() => match Settings::load(&overrides) {
            Ok(settings) => tui::interactive(
                settings,
                overrides,
                cli.global.cwd,
                reference(None, cli.continue_last),
                cli.plain,
                cli.plan,
            ),
            Err(e) => fail(&e.into()),
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

/// Runs a server front end (`dsh acp`, `dsh web`) on a fresh runtime with dsh's signal
/// handlers: `body` gets the signals and returns the exit status. The runtime is then left
/// with `shutdown_background`: stdin and socket reads sit on blocking threads nothing can
/// interrupt (an editor may hold the pipe open after a signal), and everything durable is
/// done by the time `body` returns.
pub(crate) fn serve<F>(body: impl FnOnce(signals::Signals) -> F) -> i32
where
    F: std::future::Future<Output = i32>,
{
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dsh: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = runtime.block_on(async move {
        match signals::Signals::install() {
            Ok(signals) => body(signals).await,
            Err(e) => {
                eprintln!("dsh: cannot install signal handlers: {e}");
                1
            }
        }
    });
    runtime.shutdown_background();
    code
}

/// The session a chat (line or full-screen) or a run opens: `--resume REF`, `-c`, or a new one.
pub(crate) fn reference(resume: Option<String>, continue_last: bool) -> SessionReference {
    match (resume, continue_last) {
        (Some(reference), _) => SessionReference::Resume(reference),
        (None, true) => SessionReference::Continue,
        (None, false) => SessionReference::New,
    }
}
