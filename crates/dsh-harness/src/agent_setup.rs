//! The per-agent composition every session gets, whatever front end opened it: its
//! workspace's instruction files, its reasoning effort and its model-request budget.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use dsh_agent::events::{AgentPreStep, PreStepDecision};
use dsh_agent::{CancelCause, CancelOptions, Setup};
use dsh_kernel::{BoxError, Context};
use dsh_prompt::Section;
use dsh_session::SessionRerooted;
use dsh_skills::{Catalog, Places};
use futures::FutureExt;

use crate::instructions;

/// Skill and command discoveries running at once in the process (each on a blocking thread).
/// Never closed.
static DISCOVERIES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// What a session's agent is set up with, beyond its route.
#[derive(Clone, Debug, Default)]
pub struct AgentSpec {
    /// Stop the agent (cancel with a hook cause) once it asks for more than this many model
    /// requests (`dsh run --max-turns`).
    pub max_turns: Option<u32>,
    /// Send this reasoning effort with every model request (`--effort`, `reasoning_effort`).
    pub reasoning_effort: Option<String>,
    /// `$DSH_HOME`, whose `AGENTS.md` holds the person's instructions for every project
    /// (and whose `skills` and `commands` folders the person's skills and commands).
    pub home: Option<PathBuf>,
    /// The person's home directory (`~/.agents/skills`, `~/.claude/skills`).
    pub user_home: Option<PathBuf>,
    /// Offer the provider's own web search with every model request
    /// (`[web_search] provider = "native"`).
    pub provider_web_search: Option<dsh_llm::ProviderWebSearch>,
    /// Move the (resumed) session to this directory before anything else reads its
    /// directory (`--cwd DIR` on a resume): a durable `session/rerooted`.
    pub reroot: Option<PathBuf>,
}

/// The per-agent composition: the `AGENTS.md` section of the agent's own working directory
/// (read from its session header, so fresh, resumed and ACP-created agents all get theirs) and
/// the model-request budget.
pub(crate) fn agent_setup(spec: &AgentSpec) -> Setup {
    let max_turns = spec.max_turns;
    let effort = spec.reasoning_effort.clone();
    let home = spec.home.clone();
    let user_home = spec.user_home.clone();
    let provider_web_search = spec.provider_web_search;
    let reroot = spec.reroot.clone();
    Box::new(move |agent_ctx: Context| {
        async move {
            let session = dsh_agent::agent_of(&agent_ctx).map(|agent| agent.session().clone());
            if let (Some(dir), Some(session)) = (&reroot, &session)
                && session.cwd().as_deref() != Some(dir.as_path())
            {
                session.append_draft(SessionRerooted { cwd: dir.clone() }.draft())?;
            }
            let cwd = session.as_ref().and_then(|s| s.cwd());
            // A session continued where its directory does not exist (another machine, a
            // moved checkout) would fail every command: said now, with the way out.
            if let (Some(dir), Some(session)) = (&cwd, &session)
                && !dir.is_dir()
            {
                return Err(format!(
                    "session {} works in {}, which is not a directory here; resume it with \
                     --cwd DIR to move it",
                    session.id(),
                    dir.display()
                )
                .into());
            }
            if let (Some(cwd), Some(home)) = (&cwd, &home) {
                let places = Places::for_workspace(cwd, home.clone(), user_home.clone());
                // Found once, when the session starts: the list is part of the prompt's
                // stable prefix, so a change shows in the next session, never mid-session.
                // A few at a time: an editor opening hundreds of sessions at once would
                // otherwise hold a blocking thread for each.
                let permit = DISCOVERIES
                    .acquire()
                    .await
                    .map_err(|e| format!("finding skills failed: {e}"))?;
                let catalog = tokio::task::spawn_blocking(move || Catalog::discover(&places))
                    .await
                    .map_err(|e| format!("finding skills failed: {e}"))?;
                drop(permit);
                // Front ends that open sessions through the harness say these once
                // (`OpenedSession::notices`); the log has them for the others.
                for problem in catalog.problems() {
                    tracing::info!("skill or command skipped: {problem}");
                }
                dsh_skills::attach(&agent_ctx, Arc::new(catalog))?;
            }
            let section = cwd.and_then(|cwd| {
                instructions::render(&instructions::discover(&cwd, home.as_deref()))
            });
            if let Some(text) = section {
                let prompt = agent_ctx.require::<dsh_prompt::SystemPrompt>()?;
                let _ = prompt.variable(
                    &agent_ctx,
                    "agents_md",
                    Arc::new(move |_| Some(text.clone())),
                )?;
                // The text goes in through a variable because substituted values are never
                // interpolated again: `{{` in a project's AGENTS.md stays literal.
                let _ = prompt.section(
                    &agent_ctx,
                    Section::new("workspace:agents-md", 50, "{{agents_md}}"),
                )?;
            }
            if let Some(max) = max_turns {
                limit_model_requests(&agent_ctx, max)?;
            }
            if let Some(effort) = effort {
                crate::effort::apply(&agent_ctx, effort)?;
            }
            if let Some(search) = provider_web_search {
                offer_provider_web_search(&agent_ctx, search)?;
            }
            Ok(None)
        }
        .boxed()
    })
}

/// Puts the provider's own web search in every model request's configuration (so the
/// request header logs it); adapters whose API has none send the request without it.
fn offer_provider_web_search(
    agent_ctx: &Context,
    search: dsh_llm::ProviderWebSearch,
) -> Result<(), BoxError> {
    let _ = agent_ctx.on_waterfall::<dsh_agent::events::AgentRequest, _>(
        move |mut proposal, next| {
            proposal.config.web_search = Some(search);
            async move { next.run(proposal).await }
        },
    )?;
    Ok(())
}

/// Cancels the agent with a hook cause when it proposes its `max + 1`-th model request (each
/// step is one request), so the turn ends `aborted{hook}` with a provider-valid log.
fn limit_model_requests(agent_ctx: &Context, max: u32) -> Result<(), BoxError> {
    let steps = Arc::new(AtomicU32::new(0));
    let _ = agent_ctx.on_waterfall::<AgentPreStep, _>(move |request, next| {
        let n = steps.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n > max {
                request.agent.cancel(
                    CancelCause::Hook {
                        reason: format!("--max-turns {max} reached"),
                    },
                    CancelOptions::default(),
                );
                return Ok(PreStepDecision::Reject);
            }
            next.run(request).await
        }
    })?;
    Ok(())
}
