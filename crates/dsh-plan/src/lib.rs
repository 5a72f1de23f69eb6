//! Plan mode and questions to the person.
//!
//! - **Plan mode** ([`PlanMode`]): the model explores read-only and proposes a plan; the
//!   person approves it before anything changes. While a session plans, every call that is
//!   not read-only by its declared effects is refused with a reason ([`refusal`]), and its
//!   commands run in the read-only sandbox (a per-session narrowing of the guard's
//!   [`dsh_guard::SessionPolicies`], reaching its subagents too). The model ends with
//!   `exit_plan_mode` ([`ExitPlanTool`]): the person approves (plan mode ends, the model goes
//!   on in the same turn) or says what to change (the model revises). Entering, leaving, each
//!   plan and each decision are durable events ([`events`]).
//! - **Questions** ([`AskUserQuestionTool`]): up to four questions with two to four options
//!   each, answered through the front end's [`dsh_tools::Questioner`]; with none (a headless
//!   run) the call fails at once instead of waiting.
//!
//! [`PlanPlugin`] mounts both.

mod ask;
pub mod events;
mod exit;
mod mode;
mod plugin;
mod refusal;

pub use ask::{
    ASK_USER_QUESTION, AskArgs, AskUserQuestionTool, MAX_QUESTIONS, OptionArg, QuestionArg,
    answer_text, questions,
};
pub use events::{Decided, Decision, ModeChange, Proposed, Trigger};
pub use exit::{APPROVE, EXIT_PLAN_MODE, ExitPlanArgs, ExitPlanTool, KEEP_PLANNING, review};
pub use mode::{ENTERED, LEFT, PLAN_PLUGIN, PlanError, PlanMode};
pub use plugin::PlanPlugin;
pub use refusal::refusal;
