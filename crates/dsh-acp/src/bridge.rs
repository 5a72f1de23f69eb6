//! The bridge: the services it drives and the records of the sessions it owns.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use agent_client_protocol::v1::schema::ClientCapabilities;
use dsh_agent::{AgentPlan, AgentPlanner, AgentRegistry};
use dsh_kernel::{Context, KernelError, Notification};
use dsh_session::{SessionId, SessionStore};
use dsh_shell::ShellExecutor;
use dsh_tools::{Approver, FileAccess, Questioner, Routes, ToolRuntime};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::errors::{AcpError, invalid};
use crate::options::AcpOptions;
use crate::permission::BridgeApprover;
use crate::question::BridgeQuestioner;
use crate::record::SessionRecord;

/// `acp/closing`: the bridge stopped accepting sessions and is tearing its own down (the
/// client disconnected, or `serve` is returning). Emitted once, after the bridge is marked
/// closed and before any session is disposed; observers (and tests of the create-versus-close
/// race) can rely on every later `session/new` or `session/load` being refused or rolled back.
pub struct BridgeClosing;

impl Notification for BridgeClosing {
    const NAME: &'static str = "acp/closing";
    type Payload = ();
}

#[derive(Default)]
struct Records {
    closed: bool,
    live: HashMap<SessionId, Arc<SessionRecord>>,
    /// Ids with a `session/load` in progress (reserved before any await).
    loading: HashSet<SessionId>,
}

/// Shared state of one `serve` call.
pub(crate) struct Bridge {
    /// The bridge's own scope: owner of every agent it creates and of its approver.
    pub(crate) ctx: Context,
    pub(crate) registry: Arc<AgentRegistry>,
    pub(crate) store: Arc<SessionStore>,
    pub(crate) tools: Arc<ToolRuntime>,
    pub(crate) options: AcpOptions,
    /// Whether `dyn Approver` is the bridge's (else policy listeners ask the client directly).
    pub(crate) owns_approver: bool,
    /// Fired when teardown starts: aborts pending creations and resumes.
    pub(crate) closing: CancellationToken,
    /// Request work running outside the dispatch loop (creations, settlements, closes).
    pub(crate) tasks: TaskTracker,
    records: Mutex<Records>,
    /// Per-agent file routes (the editor's buffers for its sessions).
    pub(crate) file_routes: Arc<Routes<dyn FileAccess>>,
    /// Per-agent shell routes (the editor's terminals for its sessions).
    pub(crate) shell_routes: Arc<Routes<dyn ShellExecutor>>,
    /// What the editor offered in `initialize` (files, terminals); none until then.
    client: Mutex<ClientCapabilities>,
    /// Sessions another dsh runs that this connection follows read-only.
    pub(crate) watching: crate::watch::Watching,
}

impl Bridge {
    /// A bridge over the core services mounted on `ctx`.
    pub(crate) fn new(ctx: &Context, options: AcpOptions) -> Result<Arc<Bridge>, AcpError> {
        let registry = ctx.require::<AgentRegistry>()?;
        let store = ctx.require::<SessionStore>()?;
        let tools = ctx.require::<ToolRuntime>()?;
        let own = ctx.child("acp")?;
        // Provided on the composition's own scope: they outlive this connection, and another
        // bridge of the process shares them.
        let file_routes = Routes::<dyn FileAccess>::shared(ctx)?;
        let shell_routes = Routes::<dyn ShellExecutor>::shared(ctx)?;
        let wants_approver = ctx.get::<dyn Approver>().is_none();
        let wants_questioner = ctx.get::<dyn Questioner>().is_none();
        let mut failure: Option<KernelError> = None;
        let bridge = Arc::new_cyclic(|weak| {
            let owns_approver = wants_approver && {
                let approver: Arc<dyn Approver> = Arc::new(BridgeApprover {
                    bridge: weak.clone(),
                });
                match own.provide::<dyn Approver>(approver) {
                    Ok(()) => true,
                    // Provided concurrently by someone else: theirs stays, ours asks directly.
                    Err(KernelError::ServiceAlreadyProvided { .. }) => false,
                    Err(e) => {
                        failure = Some(e);
                        false
                    }
                }
            };
            if wants_questioner {
                let questioner: Arc<dyn Questioner> = Arc::new(BridgeQuestioner {
                    bridge: weak.clone(),
                });
                match own.provide::<dyn Questioner>(questioner) {
                    // Provided concurrently by another bridge: it routes by session too.
                    Ok(()) | Err(KernelError::ServiceAlreadyProvided { .. }) => {}
                    Err(e) => failure = Some(e),
                }
            }
            Bridge {
                ctx: own.clone(),
                registry,
                store,
                tools,
                options,
                owns_approver,
                closing: CancellationToken::new(),
                tasks: TaskTracker::new(),
                records: Mutex::new(Records::default()),
                file_routes,
                shell_routes,
                client: Mutex::new(ClientCapabilities::default()),
                watching: crate::watch::Watching::default(),
            }
        });
        if let Some(e) = failure {
            return Err(e.into());
        }
        Ok(bridge)
    }

    /// Remembers the capabilities the client offered in `initialize`.
    pub(crate) fn set_client_capabilities(&self, capabilities: ClientCapabilities) {
        *self.client.lock() = capabilities;
    }

    /// The capabilities the client offered in `initialize`.
    pub(crate) fn client_capabilities(&self) -> ClientCapabilities {
        self.client.lock().clone()
    }

    /// Whether teardown has started.
    pub(crate) fn is_closed(&self) -> bool {
        self.records.lock().closed
    }

    /// The published record of session `id`.
    pub(crate) fn record(&self, id: &SessionId) -> Option<Arc<SessionRecord>> {
        self.records.lock().live.get(id).cloned()
    }

    /// Publishes a freshly created or resumed session. Hands the record back when the bridge
    /// closed meanwhile: the caller must dispose it (the create lost the race with the close).
    pub(crate) fn publish(&self, record: Arc<SessionRecord>) -> Result<(), Arc<SessionRecord>> {
        let mut records = self.records.lock();
        if records.closed {
            return Err(record);
        }
        records.loading.remove(&record.state.id);
        records.live.insert(record.state.id.clone(), record);
        Ok(())
    }

    /// Removes the record of `id` (for `session/close`).
    pub(crate) fn remove(&self, id: &SessionId) -> Option<Arc<SessionRecord>> {
        self.records.lock().live.remove(id)
    }

    /// Marks the bridge closed and takes every record: from now on no session is accepted.
    pub(crate) fn close_all(&self) -> Vec<Arc<SessionRecord>> {
        let mut records = self.records.lock();
        records.closed = true;
        records.loading.clear();
        records.live.drain().map(|(_, r)| r).collect()
    }

    /// Reserves `id` for a `session/load` (before any await), refusing an id that is loaded or
    /// being loaded.
    pub(crate) fn reserve_load(&self, id: &SessionId) -> Result<(), agent_client_protocol::Error> {
        let mut records = self.records.lock();
        if records.closed {
            return Err(crate::errors::internal("bridge has been disposed"));
        }
        if records.live.contains_key(id) || !records.loading.insert(id.clone()) {
            return Err(invalid(format!("session {id} is already loaded")));
        }
        Ok(())
    }

    /// Releases a `session/load` reservation that did not publish.
    pub(crate) fn release_load(&self, id: &SessionId) {
        self.records.lock().loading.remove(id);
    }

    /// What a new or resumed agent of this bridge should be: the composition root's plan
    /// (`dyn AgentPlanner` on the context: the harness, which keeps a loaded session on its own
    /// route), else the options the front end started the bridge with.
    pub(crate) async fn plan(
        &self,
        resume: Option<&SessionId>,
        cwd: &std::path::Path,
    ) -> Result<AgentPlan, dsh_agent::AgentError> {
        match self.ctx.get::<dyn AgentPlanner>() {
            Some(planner) => match resume {
                Some(id) => planner.plan_resume(id).await,
                None => planner.plan_new(cwd).await,
            },
            None => Ok(AgentPlan::with_options(self.options.agent_options.clone())),
        }
    }

    /// Ids of the live bridge sessions.
    pub(crate) fn live_ids(&self) -> Vec<SessionId> {
        self.records.lock().live.keys().cloned().collect()
    }
}
