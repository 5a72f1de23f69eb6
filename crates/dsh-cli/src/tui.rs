//! The full-screen UI, composed: `dsh` and `dsh chat` on a terminal (unless `--plain`).
//!
//! `dsh-tui` drives agents through the [`TuiHost`] seam; this module is that host over the
//! shared composition (the same agents `dsh run` and the line chat get).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use dsh_agent::AgentHandle;
use dsh_kernel::Context;
use dsh_llm::Adapter as _;
use dsh_session::{SessionId, SessionOrigin};
use dsh_tui::runner::TuiOptions;
use dsh_tui::{HostError, HostInfo, ModelEntry, SessionEntry, TuiHost};

use crate::compose::{AgentSpec, ComposeOptions, Composed, compose};
use crate::config::{Settings, process_env};
use crate::run::DRAIN;

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
    cwd: Option<PathBuf>,
    resume: Option<String>,
    plain: bool,
) -> i32 {
    if wanted(plain) {
        main(settings, cwd, resume)
    } else {
        crate::chat::main(settings, cwd, resume)
    }
}

struct Host {
    composed: Composed,
    cwd: PathBuf,
    spec: AgentSpec,
}

#[async_trait]
impl TuiHost for Host {
    fn ctx(&self) -> &Context {
        &self.composed.ctx
    }

    fn info(&self) -> HostInfo {
        let settings = &self.composed.settings;
        let models = self
            .composed
            .adapter
            .list_models(&settings.provider.value)
            .into_iter()
            .map(|m| ModelEntry {
                id: m.id,
                context_window: m.context_window,
                prices: None,
            })
            .collect();
        HostInfo {
            model: settings.model.value.clone(),
            provider: settings.provider.value.clone(),
            cwd: self.cwd.clone(),
            mode: "no sandbox · no approvals".to_owned(),
            models,
        }
    }

    async fn create(&self) -> Result<AgentHandle, HostError> {
        self.composed
            .create_agent(SessionId::generate(), &self.cwd, &self.spec)
            .await
            .map_err(|e| HostError(format!("{:#}", anyhow::Error::new(e))))
    }

    async fn resume(&self, id: SessionId) -> Result<AgentHandle, HostError> {
        self.composed
            .resume_agent(id.clone(), &self.spec)
            .await
            .map_err(|e| HostError(format!("cannot resume {id}: {:#}", anyhow::Error::new(e))))
    }

    async fn sessions(&self) -> Result<Vec<SessionEntry>, HostError> {
        let listings = self
            .composed
            .store
            .listings()
            .await
            .map_err(|e| HostError(e.to_string()))?;
        Ok(listings
            .into_iter()
            // Subagent sessions belong to their parent's conversation.
            .filter(|l| l.header.origin != Some(SessionOrigin::Subagent))
            .map(|l| SessionEntry {
                id: l.header.id,
                first_prompt: l.first_prompt,
                last_activity: l.last_activity,
                turns: l.turns,
            })
            .collect())
    }
}

/// Runs the full-screen UI; returns the exit status.
pub fn main(settings: Settings, cwd: Option<PathBuf>, resume: Option<String>) -> i32 {
    start(settings, cwd, |settings, cwd| tui(settings, cwd, resume))
}

/// The start every interactive front end shares: credentials checked, the working directory
/// resolved, the runtime built, then `body` run on it; its error is printed. Returns the exit
/// status.
pub fn start<F>(
    settings: Settings,
    cwd: Option<PathBuf>,
    body: impl FnOnce(Settings, PathBuf) -> F,
) -> i32
where
    F: Future<Output = anyhow::Result<()>>,
{
    if let Err(e) = settings.check_credentials(&process_env) {
        eprintln!("dsh: {e:#}");
        return 1;
    }
    let cwd = match crate::workspace_dir(cwd) {
        Ok(cwd) => cwd,
        Err(e) => {
            eprintln!("dsh: {e:#}");
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
    match runtime.block_on(body(settings, cwd)) {
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
pub async fn compose_interactive(settings: &Settings) -> anyhow::Result<Composed> {
    let composed = compose(
        settings,
        ComposeOptions {
            start_configured_agents: true,
            approval: None,
        },
    )
    .await?;
    composed
        .adapter
        .ready()
        .await
        .map_err(|f| anyhow::anyhow!("provider `{}`: {f}", settings.provider.value))?;
    Ok(composed)
}

async fn tui(settings: Settings, cwd: PathBuf, resume: Option<String>) -> anyhow::Result<()> {
    let composed = compose_interactive(&settings).await?;
    let host = Arc::new(Host {
        composed,
        cwd,
        spec: AgentSpec::default(),
    });
    let options = TuiOptions {
        resume: resume.map(SessionId::from),
        history: Some(settings.home.value.join("tui-history.jsonl")),
        keyboard_protocol: std::env::var("DSH_TUI_KEYBOARD_PROTOCOL").map_or(true, |v| v != "0"),
    };
    let result = dsh_tui::run(host.clone(), options).await;
    host.composed
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
