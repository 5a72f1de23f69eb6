//! `exit_plan_mode`: the model presents its plan; the person approves it or says what to
//! change.
//!
//! The plan is recorded (`plan/proposed`) and put to the person through the front end's
//! [`Questioner`] as a plan review. Approved: the session leaves plan mode before the result
//! returns, so the model carries the plan out in the same turn. Not approved: the call fails
//! with the person's feedback and the session keeps planning, so the model revises. Nobody to
//! ask (`dsh run --plan`): the plan is the run's answer and the turn ends here.

use std::sync::Arc;

use async_trait::async_trait;
use dsh_agent::agent_of;
use dsh_tools::{
    Question, QuestionIntent, QuestionOption, QuestionOutcome, QuestionRequest, Questioner,
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::events::{DECIDED_EVENT, Decided, Decision, PROPOSED_EVENT, Proposed, Trigger};
use crate::mode::PlanMode;

/// The tool's name.
pub const EXIT_PLAN_MODE: &str = "exit_plan_mode";

/// The label of the approving option.
pub const APPROVE: &str = "Approve";

/// The label of the option that keeps planning.
pub const KEEP_PLANNING: &str = "Keep planning";

const DESCRIPTION: &str = "In plan mode only: present your plan for the user's approval once \
you have explored enough to make one. Pass the whole plan as Markdown (what you will change, \
where, in what order, and how you will check it). If the user approves, plan mode ends and you \
carry the plan out; if not, you get their feedback: revise the plan and call this again. Do not \
use it to ask questions (use ask_user_question).";

/// Arguments of `exit_plan_mode`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ExitPlanArgs {
    /// The plan, in Markdown.
    pub plan: String,
}

/// The `exit_plan_mode` tool.
#[derive(Debug)]
pub struct ExitPlanTool {
    mode: Arc<PlanMode>,
}

impl ExitPlanTool {
    /// The tool over `mode`.
    pub fn new(mode: Arc<PlanMode>) -> Self {
        Self { mode }
    }
}

/// The review question for `plan`.
pub fn review(plan: &str) -> Question {
    Question {
        header: Some("Plan".to_owned()),
        question: "Approve this plan and let the agent carry it out?".to_owned(),
        detail: Some(plan.to_owned()),
        options: vec![
            QuestionOption::new(APPROVE).described("leave plan mode and start the work"),
            QuestionOption::new(KEEP_PLANNING)
                .described("stay in plan mode; type what to change instead to say why"),
        ],
        intent: QuestionIntent::PlanReview {
            approve: APPROVE.to_owned(),
        },
    }
}

#[async_trait]
impl TypedTool for ExitPlanTool {
    type Args = ExitPlanArgs;

    fn name(&self) -> &str {
        EXIT_PLAN_MODE
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// It changes only the session's own state (and asks the person).
    fn effects(&self, _args: &ExitPlanArgs) -> ToolEffects {
        ToolEffects::none()
    }

    fn present_call(&self, _args: &ExitPlanArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: "Plan for approval".to_owned(),
            kind: ToolKind::Think,
        })
    }

    async fn run(
        &self,
        args: ExitPlanArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let caller = call
            .caller()
            .ok_or_else(|| ToolError::new("exit_plan_mode needs a calling session"))?;
        if !self.mode.is_active(&caller.agent_id) {
            return Err(ToolError::coded(
                "PlanModeError",
                "NOT_IN_PLAN_MODE",
                "the session is not in plan mode; there is no plan to approve. Go on with the \
                 work (or tell the user the plan in your answer)",
            ));
        }
        let plan = args.plan.trim();
        if plan.is_empty() {
            return Err(ToolError::invalid_arguments(
                EXIT_PLAN_MODE,
                "`plan` is empty: pass the whole plan as Markdown",
            ));
        }
        let call_id = call.call_id().to_string();
        let session = &caller.session;
        record(
            session,
            PROPOSED_EVENT,
            &Proposed {
                call_id: call_id.clone(),
                plan: plan.to_owned(),
            },
        );
        let decided = |decision, feedback: Option<String>| Decided {
            call_id: call_id.clone(),
            decision,
            feedback,
        };
        let question = review(plan);
        let outcome = match caller.ctx.get::<dyn Questioner>() {
            Some(questioner) => {
                questioner
                    .ask(QuestionRequest {
                        agent_id: caller.agent_id.clone(),
                        call_id: call.call_id().clone(),
                        questions: vec![question.clone()],
                        cancel: call.cancel().clone(),
                    })
                    .await
            }
            None => QuestionOutcome::Unavailable,
        };
        match outcome {
            QuestionOutcome::Answered(replies)
                if replies.first().is_some_and(|r| question.approves(r)) =>
            {
                let agent = agent_of(&caller.ctx)
                    .ok_or_else(|| ToolError::new("the calling agent is gone"))?;
                record(session, DECIDED_EVENT, &decided(Decision::Approved, None));
                // Off before the result returns: the model's next calls in this turn run
                // under the session's usual policy.
                self.mode
                    .set(&agent, false, Trigger::Approval)
                    .map_err(|e| ToolError::new(e.to_string()))?;
                Ok(ToolOutput::text(
                    "The user approved the plan. Plan mode is off: carry the plan out now.",
                ))
            }
            QuestionOutcome::Answered(replies) => {
                let feedback = replies.into_iter().find_map(|r| match r {
                    dsh_tools::Reply::Text(text) if !text.trim().is_empty() => Some(text),
                    _ => None,
                });
                record(
                    session,
                    DECIDED_EVENT,
                    &decided(Decision::Rejected, feedback.clone()),
                );
                Err(rejected(feedback.as_deref()))
            }
            QuestionOutcome::Declined => {
                record(session, DECIDED_EVENT, &decided(Decision::Rejected, None));
                Err(rejected(None))
            }
            QuestionOutcome::Cancelled => Err(ToolError::aborted()),
            QuestionOutcome::Unavailable => {
                record(session, DECIDED_EVENT, &decided(Decision::Unreviewed, None));
                // Nobody will answer in this run: the plan is its answer, and the turn ends
                // here rather than with the model carrying on unapproved.
                call.conclude_turn();
                Ok(ToolOutput::text(
                    "No one can review the plan in this session (nobody is at a prompt). The plan \
                     is recorded as this run's answer and plan mode stays on; the user will \
                     read it afterwards. Do not start the work.",
                ))
            }
        }
    }
}

fn rejected(feedback: Option<&str>) -> ToolError {
    let said = match feedback {
        Some(text) => format!(" They said: {text}"),
        None => String::new(),
    };
    ToolError::coded(
        "PlanRejectedError",
        "PLAN_NOT_APPROVED",
        format!(
            "the user did not approve the plan.{said} Plan mode stays on: revise the plan (ask \
             with ask_user_question if something is unclear) and call exit_plan_mode again."
        ),
    )
}

/// Appends a plan event; a session that cannot take it is logged, not fatal to the review
/// (the decision still reaches the model through the result).
fn record<T: serde::Serialize>(session: &dsh_session::Session, kind: &str, data: &T) {
    if let Err(e) = session.append_plugin(kind, data) {
        tracing::warn!(error = %e, "cannot record {kind}");
    }
}
