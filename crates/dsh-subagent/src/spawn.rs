//! Creating a child through the factory and handing it its task.
//!
//! The child is created with the *parent's* scoped context as the caller, so the registry
//! records the parent as its runtime owner (`is_owned_by`, `children_of`) and the parent's
//! scope disposal tears the child down before the parent's own session detaches. Delegation is
//! not an `Agent` method: it is an ordinary factory call and an ordinary `followup`.

use dsh_agent::{AgentHandle, AgentRef, AgentRegistry, CreateAgentOptions, ResumeAgentOptions};
use dsh_session::{Message, SessionId};
use tokio_util::sync::CancellationToken;

use crate::approval::LiveChildren;
use crate::child_setup::child_setup;
use crate::children::children_in_log;
use crate::config::SubagentConfig;
use crate::error::SubagentError;
use crate::request::{SubagentRequest, child_meta, child_options};

/// A published child that has been handed its prompt.
pub(crate) struct Spawned {
    /// The consumer capability over the child; whoever holds it must dispose it.
    pub(crate) handle: AgentHandle,
    /// The child's log length before the prompt was queued: everything from here on is the
    /// delegated run.
    pub(crate) start: u64,
    /// The runtime's live children; the child leaves it once disposed.
    pub(crate) live: LiveChildren,
}

/// Loads an earlier child of `parent` to continue it, owned by `parent` again. Only a child
/// `parent`'s own log names may be continued (so one session never reaches another's work),
/// and not while it runs.
async fn resume_child(
    parent: &AgentRef,
    registry: &AgentRegistry,
    id: &SessionId,
    request: &SubagentRequest,
    config: &SubagentConfig,
    cancel: &CancellationToken,
) -> Result<AgentHandle, SubagentError> {
    if !children_in_log(parent).iter().any(|c| c.session == *id) {
        return Err(SubagentError::NotAChild(id.clone()));
    }
    if registry.get(id).is_some() {
        return Err(SubagentError::StillRunning(id.clone()));
    }
    let options = ResumeAgentOptions {
        session_id: id.clone(),
        agent_options: child_options(parent, request.model.as_deref()),
        setup: Some(child_setup(config.approvals)),
        cancel: Some(cancel.clone()),
    };
    let handle = registry
        .resume(parent.ctx(), options)
        .await
        .map_err(|source| SubagentError::Resume {
            id: id.clone(),
            source,
        })?;
    // The log named it, but the stored header is the lineage of record.
    if handle.agent().session().header().parent_session.as_ref() != Some(parent.id()) {
        handle.dispose().await;
        return Err(SubagentError::NotAChild(id.clone()));
    }
    Ok(handle)
}

/// The depth the child of `parent` would have, or the error refusing it.
pub(crate) fn child_depth(
    parent: &AgentRef,
    config: &SubagentConfig,
) -> Result<u32, SubagentError> {
    let depth = parent.session().header().delegation_depth;
    let child = depth.saturating_add(1);
    if child > config.max_depth {
        return Err(SubagentError::DepthExceeded {
            depth,
            limit: config.max_depth,
        });
    }
    Ok(child)
}

/// Creates the child (nothing is created when the depth limit refuses it) and queues the
/// prompt, which on the idle new child opens its first turn synchronously. `cancel` aborts an
/// unfinished creation only.
pub(crate) async fn spawn_child(
    parent: &AgentRef,
    request: &SubagentRequest,
    config: &SubagentConfig,
    live: &LiveChildren,
    cancel: &CancellationToken,
) -> Result<Spawned, SubagentError> {
    let registry = AgentRegistry::of(parent.ctx())?;
    let handle = match &request.resume {
        None => {
            let depth = child_depth(parent, config)?;
            let options = CreateAgentOptions {
                session_id: None,
                meta: child_meta(parent, depth),
                seed: None,
                agent_options: child_options(parent, request.model.as_deref()),
                setup: Some(child_setup(config.approvals)),
                cancel: Some(cancel.clone()),
            };
            registry
                .create(parent.ctx(), options)
                .await
                .map_err(SubagentError::Create)?
        }
        Some(id) => resume_child(parent, &registry, id, request, config, cancel).await?,
    };
    let child = handle.agent().clone();
    // Before the child can run anything: the global approval rewrite must know it.
    live.lock().insert(child.id().clone());
    let start = child.session().len();
    if let Err(e) = child.followup(Message::user_text(request.prompt.clone())) {
        handle.dispose().await;
        live.lock().remove(child.id());
        return Err(SubagentError::Prompt(e));
    }
    Ok(Spawned {
        handle,
        start,
        live: live.clone(),
    })
}
