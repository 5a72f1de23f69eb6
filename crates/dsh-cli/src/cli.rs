//! The command-line surface (clap derive).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use dsh_harness::config::Overrides;

/// dsh runs coding agents against real LLM providers: headless (`dsh run`), as an interactive
/// chat in a terminal (`dsh` with no arguments), and over stored sessions (`dsh sessions`).
///
/// Configuration: `$DSH_HOME/config.toml` (default `~/.dsh`), then environment variables
/// (DSH_PROVIDER, DSH_MODEL, DSH_EFFORT, DEEPSEEK_API_KEY, DEEPSEEK_BASE_URL, OPENAI_API_KEY,
/// OPENAI_BASE_URL), then flags. `dsh config show` prints the result. Logs: DSH_LOG (filter,
/// e.g. `debug`) and DSH_LOG_FILE (write them to a file instead of stderr).
#[derive(Parser, Debug)]
#[command(name = "dsh", version, about, long_about)]
pub struct Cli {
    /// Options shared by every command.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// Use the line chat instead of the full-screen UI (for dumb terminals, screen readers,
    /// or the terminal's own scrollback).
    #[arg(long, global = true)]
    pub plain: bool,
    /// What to do; without one, an interactive chat starts (stdin must be a terminal).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Without a command: continue the newest session of this directory in the chat.
    #[arg(short = 'c', long = "continue")]
    pub continue_last: bool,
    /// Without a command: start in plan mode (explore read-only, then propose a plan for
    /// your approval; `/plan` switches it).
    #[arg(long)]
    pub plan: bool,
}

/// Model and workspace selection, accepted before or after the subcommand.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// Provider route (`deepseek`, `openai`, `local`, or one under [providers.NAME]).
    #[arg(long, global = true, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model id to request.
    #[arg(long, global = true, value_name = "ID")]
    pub model: Option<String>,
    /// API root of the selected provider, e.g. `http://127.0.0.1:11434/v1` for Ollama.
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// Working directory of a new session (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Reasoning effort of the model (e.g. `low`, `high`; DeepSeek also `off`, `max`).
    #[arg(long, global = true, value_name = "LEVEL")]
    pub effort: Option<String>,
    /// Where commands may write: read-only, workspace-write (default) or danger-full-access.
    #[arg(long, global = true, value_name = "MODE")]
    pub sandbox: Option<dsh_guard::SandboxMode>,
    /// When to ask before a call: ask (chat, acp default), never (`dsh run` default) or auto.
    #[arg(long, global = true, value_name = "POLICY")]
    pub approval: Option<dsh_guard::ApprovalPolicy>,
}

impl GlobalArgs {
    /// The flags that override the file and the environment.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            effort: self.effort.clone(),
            sandbox: self.sandbox,
            approval: self.approval,
        }
    }
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one task headless: the final answer on stdout, exit 0 only if the turn completed.
    ///
    /// Progress (streamed text, one line per tool call) goes to stderr when stderr is a
    /// terminal. `dsh run -` reads the task from standard input; with a task given, input
    /// piped in (a pipe or a file, never a terminal or /dev/null) is attached to it, up to
    /// 1 MiB. Exit codes: 0 completed, 1 not completed (error
    /// turns also print `dsh: CODE: message` on stderr), 2 usage error, 130 interrupted by
    /// SIGINT, 143 terminated by SIGTERM.
    Run(RunArgs),
    /// Start the interactive chat (the default when stdin is a terminal).
    Chat(ChatArgs),
    /// List, show, fork or resume stored sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Inspect the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Inspect the configured MCP servers (`[mcp_servers.NAME]`).
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Inspect the command hooks that apply to this directory.
    #[command(subcommand)]
    Hooks(HooksCommand),
    /// Inspect the skills and custom commands that apply to this directory.
    #[command(subcommand)]
    Skills(SkillsCommand),
    /// Serve the Agent Client Protocol on stdin/stdout (for editors such as Zed).
    ///
    /// Stdout carries protocol frames only; logs go to stderr (or DSH_LOG_FILE). Mutating tools
    /// (`bash`, `write`, `edit`) ask the editor for permission unless `--auto-approve`.
    Acp(AcpArgs),
    /// Serve the browser UI (and ACP over WebSocket at /acp) on http://127.0.0.1:3080.
    ///
    /// Prints the URL to open, with a token that every request needs (fresh each start;
    /// DSH_WEB_TOKEN fixes it), and opens it in the desktop's browser unless --no-open. Tools
    /// ask for permission in the page, as in an editor.
    Web(WebArgs),
}

/// `dsh web`.
#[derive(Args, Debug)]
pub struct WebArgs {
    /// Address to listen on. Anything but loopback serves dsh to the network over plain HTTP,
    /// guarded by the token alone; prefer an SSH tunnel.
    #[arg(long, default_value = dsh_web::DEFAULT_HOST, value_name = "ADDR")]
    pub host: String,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = dsh_web::DEFAULT_PORT)]
    pub port: u16,
    /// Do not open a browser; just print the URL.
    #[arg(long)]
    pub no_open: bool,
}

/// `dsh acp`.
#[derive(Args, Debug, Default)]
pub struct AcpArgs {
    /// Run every tool without asking the editor (sessions start in the `auto` mode).
    #[arg(long)]
    pub auto_approve: bool,
}

/// `dsh run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The task (the remaining arguments, joined with spaces); `-` reads it from stdin.
    #[arg(required = true, trailing_var_arg = true, value_name = "TASK")]
    pub task: Vec<String>,
    /// `text` prints the final answer; `stream-json` prints one JSON object per session event
    /// and a final result object (see README).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Continue a stored session instead of starting a new one (a unique prefix of its id
    /// will do).
    #[arg(long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Continue the newest session started in this working directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_last: bool,
    /// Stop (cancel with a hook cause, exit 1) when the agent asks for more than N model
    /// requests.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// Attach an image (PNG, JPEG, GIF or WebP) to the task; repeat for more. The model must
    /// read images (`dsh config show` says which do).
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,
    /// Plan only: the agent explores read-only and ends with a plan, which is printed as the
    /// answer (nothing is changed; exit 0 when the turn completed).
    #[arg(long)]
    pub plan: bool,
}

/// Output formats of `dsh run`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// The final answer only.
    Text,
    /// JSON lines: `event` objects, then one `result` object.
    StreamJson,
    /// Only the `result` object (usage, cost, duration included), for scripts.
    Json,
}

/// `dsh chat`.
#[derive(Args, Debug, Default)]
pub struct ChatArgs {
    /// Continue a stored session (a unique prefix of its id will do).
    #[arg(long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Continue the newest session started in this working directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_last: bool,
    /// Start in plan mode (explore read-only, then propose a plan for your approval; `/plan`
    /// switches it).
    #[arg(long)]
    pub plan: bool,
}

/// `dsh sessions …`.
#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// Stored sessions, most recently active first.
    List {
        /// Only sessions started in this directory (on any machine, with the PostgreSQL
        /// store).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Only sessions a person started (`top`) or only subagents' (`subagent`).
        #[arg(long, value_enum)]
        origin: Option<OriginFilter>,
    },
    /// A readable transcript of one session.
    Show {
        /// The session id, or a unique prefix of it.
        id: String,
        /// Keep printing the session's new events as they are committed (by a dsh on any
        /// machine) until interrupted. Needs the PostgreSQL store.
        #[arg(long)]
        follow: bool,
    },
    /// Copy sessions from the JSONL files under $DSH_HOME/sessions into the PostgreSQL store,
    /// byte for byte; prints each imported id.
    Import {
        /// Session files, or ids (unique prefixes will do) of sessions under $DSH_HOME/sessions.
        #[arg(required_unless_present = "all", value_name = "FILE_OR_ID")]
        sources: Vec<String>,
        /// Every session under $DSH_HOME/sessions; those already in the database are skipped,
        /// and one that fails does not stop the others.
        #[arg(long, conflicts_with = "sources")]
        all: bool,
    },
    /// Copy a session from the PostgreSQL store into a JSONL session file, byte for byte:
    /// by default to where the JSONL store keeps it under $DSH_HOME/sessions; prints the path.
    Export {
        /// The session id, or a unique prefix of it.
        id: String,
        /// Write the file here instead (`-`: standard output). An existing file is never
        /// overwritten.
        #[arg(long, short = 'o', value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Copy a session (up to and including event SEQ) into a new one; prints the new id.
    Fork {
        /// The session to fork (its id, or a unique prefix of it).
        id: String,
        /// The last event to keep (default: the last event); must not be inside a turn.
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
    },
    /// Put a session back to the start of turn N: the files the session changed since (by
    /// any tool, commands included) and the conversation. Files someone else changed since
    /// the session's last checkpoint make it refuse, writing nothing, unless --force.
    Rewind {
        /// The session (its id, or a unique prefix of it).
        id: String,
        /// The turn to go back to the start of (`dsh sessions show` numbers them).
        #[arg(long, value_name = "N")]
        to_turn: u64,
        /// Only the files; the conversation keeps its turns.
        #[arg(long, conflicts_with = "conversation_only")]
        files_only: bool,
        /// Only the conversation; no file is touched.
        #[arg(long)]
        conversation_only: bool,
        /// Overwrite files someone else changed too (files the session never changed are
        /// still left alone).
        #[arg(long)]
        force: bool,
    },
    /// What turn N of a session changed in its workspace: a unified diff per file.
    Diff {
        /// The session (its id, or a unique prefix of it).
        id: String,
        /// The turn.
        #[arg(long, value_name = "N")]
        turn: u64,
    },
    /// Delete the checkpoints no stored session refers to (after sessions were deleted).
    Prune,
    /// Continue a stored session in the interactive chat.
    Resume {
        /// The session id, or a unique prefix of it.
        id: String,
    },
}

/// `dsh sessions list --origin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OriginFilter {
    /// Sessions a person started.
    Top,
    /// Sessions of subagents.
    Subagent,
}

impl From<OriginFilter> for dsh_harness::OriginFilter {
    fn from(filter: OriginFilter) -> Self {
        match filter {
            OriginFilter::Top => Self::Top,
            OriginFilter::Subagent => Self::Subagent,
        }
    }
}

/// `dsh hooks …`.
#[derive(Subcommand, Debug)]
pub enum HooksCommand {
    /// Every hook that applies here, by event, with the file it comes from and whether it is
    /// trusted.
    List,
    /// Trust this workspace's hooks files as they are now (recorded with their content hash in
    /// $DSH_HOME; a changed file needs trust again).
    Trust,
}

/// `dsh skills …`.
#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// The skills and custom commands a session here gets, with the folder each comes from,
    /// those shadowed by a nearer one of the same name, and the files skipped (with why).
    List,
}

/// `dsh config …`.
#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// The effective configuration with the source of each value (keys redacted).
    Show,
}

/// `dsh mcp …`.
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Start every configured server, show its state and the tools, resources and prompts it
    /// offers, stop it again. Exits 1 when a server failed to start.
    List,
    /// Add `[mcp_servers.NAME]` to config.toml (comments kept): `dsh mcp add NAME -- CMD
    /// ARGS…` for a local server, `dsh mcp add NAME --url URL` for a remote one.
    Add {
        /// The server's name (letters, digits, `-`, `_`): the middle of its tools' names.
        name: String,
        /// The streamable HTTP endpoint of a remote server.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// The program and its arguments, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Trust this workspace's `.mcp.json` as it is now, so its servers start (until it
    /// changes).
    Trust,
    /// Remove `[mcp_servers.NAME]` from config.toml (comments kept).
    Remove {
        /// The server's name.
        name: String,
    },
}

/// Rewrites the compatible spelling `dsh --profile headless TASK…` into `dsh run TASK…`.
/// Other profiles do not exist in this implementation; they are left for clap to reject.
pub fn rewrite_profile(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut iter = args.into_iter();
    if let Some(program) = iter.next() {
        out.push(program);
    }
    let rest: Vec<OsString> = iter.collect();
    let (headless, skip) = match rest.first().and_then(|a| a.to_str()) {
        Some("--profile") if rest.get(1).and_then(|a| a.to_str()) == Some("headless") => (true, 2),
        Some("--profile=headless") => (true, 1),
        _ => (false, 0),
    };
    if headless {
        out.push("run".into());
        out.extend(rest.into_iter().skip(skip));
    } else {
        out.extend(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use clap::CommandFactory;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn profile_headless_is_run() {
        assert_eq!(
            rewrite_profile(args(&["dsh", "--profile", "headless", "do", "it"])),
            args(&["dsh", "run", "do", "it"])
        );
        assert_eq!(
            rewrite_profile(args(&["dsh", "--profile=headless", "x"])),
            args(&["dsh", "run", "x"])
        );
        assert_eq!(
            rewrite_profile(args(&["dsh", "run", "x"])),
            args(&["dsh", "run", "x"])
        );
    }

    #[test]
    fn run_takes_the_rest_as_the_task() {
        let cli =
            Cli::try_parse_from(["dsh", "run", "--max-turns", "3", "fix", "--the", "bug"]).unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.task, ["fix", "--the", "bug"]);
        assert_eq!(run.max_turns, Some(3));
    }

    #[test]
    fn plan_is_a_flag_of_run_chat_and_the_bare_ui() {
        let cli = Cli::try_parse_from(["dsh", "run", "--plan", "design", "it"]).unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not run")
        };
        assert!(run.plan);
        assert_eq!(run.task, ["design", "it"]);
        let Some(Command::Chat(chat)) = Cli::try_parse_from(["dsh", "chat", "--plan"])
            .unwrap()
            .command
        else {
            panic!("not chat")
        };
        assert!(chat.plan);
        assert!(Cli::try_parse_from(["dsh", "--plan"]).unwrap().plan);
    }
}
