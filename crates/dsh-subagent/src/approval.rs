//! Children never block on an approval nobody can answer.
//!
//! A child has no person watching it: front ends route approval questions by session, and no
//! front end serves a child's session, so an `Ask` reaching the approval service could hold the
//! child (and a parent waiting on it) forever. Two `tools/pre-execute` listeners rewrite `Ask`
//! by the [`ChildApprovals`] policy:
//!
//! - a global one, registered when the runtime is provided, for calls made by a live child of
//!   this runtime. Waterfall listeners run outermost-first in registration order, so it sees
//!   the final decision of every policy registered after the runtime: **provide the runtime
//!   (mount the plugin) before any approval policy**;
//! - one registered through each child's scoped context during its unpublished setup, so the
//!   rewrite is part of the child's own world and leaves with it.
//!
//! A policy registered before the runtime that returns `Ask` without consulting `next` stays
//! out of reach; such a policy should check the caller's session origin itself, and approvers
//! should answer `Unavailable` for sessions they do not serve.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_kernel::{Context, KernelError, Registration};
use dsh_session::SessionId;
use dsh_tools::{PreExecute, ToolsPreExecute};
use parking_lot::Mutex;

use crate::config::ChildApprovals;

/// The reason a child reads when a policy asked for approval and the child denies.
pub(crate) fn denial(tool: &str, reason: Option<&str>) -> String {
    let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
    format!(
        "tool `{tool}` needs a person's approval{why}, which a subagent cannot ask for; \
         do without it, or say in your final report what should be run"
    )
}

/// Applies the child policy to one decision: `Ask` becomes `Allow` or `Deny`, anything else
/// stands.
pub(crate) fn rewrite(decision: PreExecute, tool: &str, policy: ChildApprovals) -> PreExecute {
    match decision {
        PreExecute::Ask { reason } => match policy {
            ChildApprovals::Allow => PreExecute::Allow,
            ChildApprovals::Deny => PreExecute::Deny {
                reason: denial(tool, reason.as_deref()),
            },
        },
        decision => decision,
    }
}

/// The live children of one runtime, by session id.
pub(crate) type LiveChildren = Arc<Mutex<HashSet<SessionId>>>;

/// Registers the rewrite through `ctx` (scoped if `ctx` is a child's context).
pub(crate) fn install_scoped(
    ctx: &Context,
    policy: ChildApprovals,
) -> Result<Registration, KernelError> {
    ctx.on_waterfall::<ToolsPreExecute, _>(move |view, next| {
        let tool = view.name.clone();
        async move { Ok(rewrite(next.run(view).await?, &tool, policy)) }
    })
}

/// Registers the global rewrite for calls whose caller is in `children`.
pub(crate) fn install_global(
    ctx: &Context,
    children: LiveChildren,
    policy: ChildApprovals,
) -> Result<Registration, KernelError> {
    ctx.global()
        .on_waterfall::<ToolsPreExecute, _>(move |view, next| {
            let tool = view.name.clone();
            let child = view
                .caller
                .as_ref()
                .is_some_and(|c| children.lock().contains(&c.agent_id));
            async move {
                let decision = next.run(view).await?;
                Ok(if child {
                    rewrite(decision, &tool, policy)
                } else {
                    decision
                })
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ask_is_rewritten() {
        let ask = || PreExecute::Ask {
            reason: Some("why".into()),
        };
        assert_eq!(
            rewrite(ask(), "t", ChildApprovals::Allow),
            PreExecute::Allow
        );
        assert_eq!(
            rewrite(ask(), "t", ChildApprovals::Deny),
            PreExecute::Deny {
                reason: denial("t", Some("why"))
            }
        );
        let deny = PreExecute::Deny {
            reason: "no".into(),
        };
        assert_eq!(rewrite(deny.clone(), "t", ChildApprovals::Allow), deny);
        assert_eq!(
            rewrite(PreExecute::Allow, "t", ChildApprovals::Deny),
            PreExecute::Allow
        );
    }
}
