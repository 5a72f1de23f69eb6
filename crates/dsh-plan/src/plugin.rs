//! Plan mode and questions in a composition.

use std::sync::Arc;

use dsh_agent::events::{AgentCreated, AgentDisposed};
use dsh_guard::SessionPolicies;
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_tools::{PreExecute, ToolRuntime, ToolsPreExecute};

use crate::ask::AskUserQuestionTool;
use crate::exit::ExitPlanTool;
use crate::mode::PlanMode;

/// Provides [`PlanMode`], registers `exit_plan_mode` and `ask_user_question` (always, so
/// entering or leaving plan mode never changes the tools in the prompt), refuses what a
/// planning session may not do on `tools/pre-execute`, and follows agents: a resumed session
/// takes up the plan mode its log ends in, a disposed one is forgotten.
///
/// Mount it after the guard's [`SessionPolicies`] are on the context (the harness provides
/// them before anything else), so plan mode can confine commands read-only; without them a
/// planning session's commands are refused instead.
#[derive(Clone, Debug, Default)]
pub struct PlanPlugin;

impl Plugin for PlanPlugin {
    fn name(&self) -> &str {
        "dsh-plan"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let mode = Arc::new(PlanMode::new(ctx.get::<SessionPolicies>()));
        ctx.provide(mode.clone())?;
        let runtime = ctx.require::<ToolRuntime>()?;
        let _ = runtime.register(ctx, Arc::new(ExitPlanTool::new(mode.clone())))?;
        let _ = runtime.register(ctx, Arc::new(AskUserQuestionTool))?;
        let _ = ctx.on::<AgentCreated>({
            let mode = mode.clone();
            move |agent| mode.restore(agent)
        })?;
        let _ = ctx.on::<AgentDisposed>({
            let mode = mode.clone();
            move |agent| mode.forget(agent.id())
        })?;
        let _ = ctx.on_waterfall::<ToolsPreExecute, _>(move |call, next| {
            let refused = call
                .caller
                .as_ref()
                .filter(|c| mode.governs(c.session.header()))
                .and_then(|_| {
                    crate::refusal::refusal(&call.name, call.effects(), mode.confines_commands())
                });
            async move {
                match refused {
                    Some(reason) => Ok(PreExecute::Deny { reason }),
                    None => next.run(call).await,
                }
            }
        })?;
        Ok(())
    }
}
