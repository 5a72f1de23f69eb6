//! The child's unpublished setup: what makes an ordinary agent a subagent.
//!
//! Registered through the child's scoped context while it is not yet published, so the child
//! never runs a step without them and they vanish with the child:
//!
//! - a `tools/pre-execute` listener that rewrites `Ask` by the configured
//!   [`ChildApprovals`] policy, so the child can never block on a question nobody is there to
//!   answer;
//! - a system-prompt section telling the child it works on a delegated task and must end with
//!   a final report, because that report is all its parent receives.
//!
//! The approval rewrite is described in [`crate::approval`]; it is registered here as well as
//! globally so it is part of the child's own scoped world.

use std::sync::Arc;

use dsh_agent::Setup;
use dsh_kernel::{BoxError, Context};
use dsh_prompt::{Section, SystemPrompt};
use futures::FutureExt;

use crate::approval;
use crate::config::ChildApprovals;

/// Name of the system-prompt section every child gets.
pub const SUBAGENT_SECTION: &str = "subagent";

/// Its order: right after the deployment persona (0), before tool guidance (100–199).
pub const SUBAGENT_SECTION_ORDER: i32 = 10;

/// Its text.
pub const SUBAGENT_SECTION_TEXT: &str = "\
You are a subagent: another agent delegated one task to you and is waiting for your answer. \
No person reads this conversation, so work on your own: you cannot ask questions, and tools \
that would need a person's approval are refused. When you have finished, or cannot go \
further, reply with a final report in plain text: what you did, what you found, and anything \
left undone. That report is the only part of your work the delegating agent sees.";

/// The setup handed to the factory.
pub(crate) fn child_setup(approvals: ChildApprovals) -> Setup {
    Box::new(move |ctx: Context| {
        async move {
            install(&ctx, approvals)?;
            Ok(None)
        }
        .boxed()
    })
}

fn install(ctx: &Context, approvals: ChildApprovals) -> Result<(), BoxError> {
    let _ = approval::install_scoped(ctx, approvals)?;
    let prompt: Arc<SystemPrompt> = ctx.require::<SystemPrompt>()?;
    let _ = prompt.section(
        ctx,
        Section::new(
            SUBAGENT_SECTION,
            SUBAGENT_SECTION_ORDER,
            SUBAGENT_SECTION_TEXT,
        ),
    )?;
    Ok(())
}
