//! The agent registry: live agents of this process, their runtime owners, and the creation
//! factory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use dsh_kernel::{Context, KernelError, Registration};
use dsh_session::SessionId;
use parking_lot::Mutex;

use crate::agent::{Agent, AgentRef, agent_of, same_agent};
use crate::error::AgentError;
use crate::events::{AgentCreated, AgentDisposed};
use crate::factory::{AgentFactory, AgentHandle, CreateAgentOptions, ResumeAgentOptions};
use crate::initiator::InitiatorScope;

#[derive(Default)]
struct Flags {
    announced: bool,
    announcing: bool,
    detach_requested: bool,
    detached: bool,
}

struct Entry {
    agent: AgentRef,
    owner: Option<Weak<dyn Agent>>,
    flags: Mutex<Flags>,
}

/// Live agents keyed by id (at most one per id), with the runtime owner each was created
/// through. Also holds the factory slot and the initiator scope.
pub struct AgentRegistry {
    ctx: Context,
    entries: Mutex<Vec<Arc<Entry>>>,
    factory: Mutex<Option<(u64, Arc<dyn AgentFactory>)>>,
    next_factory: AtomicU64,
    initiator: InitiatorScope,
}

/// The capability to remove one exact registry entry. Idempotent; a stale detach never removes
/// a later agent registered under the same id.
pub struct AgentDetach {
    registry: Arc<AgentRegistry>,
    entry: Arc<Entry>,
}

impl AgentRegistry {
    /// A registry dispatching lifecycle events through `ctx`'s bus.
    pub fn new(ctx: &Context) -> Arc<Self> {
        Arc::new(Self {
            ctx: ctx.clone(),
            entries: Mutex::new(Vec::new()),
            factory: Mutex::new(None),
            next_factory: AtomicU64::new(1),
            initiator: InitiatorScope::default(),
        })
    }

    /// The registry provided in `ctx`.
    pub fn of(ctx: &Context) -> Result<Arc<AgentRegistry>, KernelError> {
        ctx.require::<AgentRegistry>()
    }

    /// Inserts an already-constructed agent without announcing it. Enforces
    /// `agent.id == session.id` and the authoritative id-collision check; records `owner` as
    /// the live creator (independent of durable lineage).
    pub fn enter(
        self: &Arc<Self>,
        agent: AgentRef,
        owner: Option<&AgentRef>,
    ) -> Result<AgentDetach, AgentError> {
        if agent.id() != agent.session().id() {
            return Err(AgentError::IdMismatch {
                agent: agent.id().clone(),
                session: agent.session().id().clone(),
            });
        }
        let mut entries = self.entries.lock();
        if entries.iter().any(|e| e.agent.id() == agent.id()) {
            return Err(AgentError::AlreadyRegistered {
                id: agent.id().clone(),
            });
        }
        let entry = Arc::new(Entry {
            agent,
            owner: owner.map(Arc::downgrade),
            flags: Mutex::new(Flags::default()),
        });
        entries.push(entry.clone());
        Ok(AgentDetach {
            registry: self.clone(),
            entry,
        })
    }

    /// Emits `agent/created` exactly once for the exact live entry. A synchronous listener
    /// failure is returned as a veto; the entry stays announced so the rollback detach pairs it
    /// with `agent/disposed`. A detach requested by a creation listener waits until every
    /// creation listener has seen the live entry.
    pub fn announce(&self, agent: &AgentRef) -> Result<(), AgentError> {
        let entry = self.live_entry(agent)?;
        {
            let mut flags = entry.flags.lock();
            if flags.announced {
                return Err(AgentError::AlreadyAnnounced {
                    id: agent.id().clone(),
                });
            }
            flags.announced = true;
            flags.announcing = true;
        }
        let result = self
            .ctx
            .events()
            .try_emit::<AgentCreated>(agent.ctx().tag(), agent);
        let deferred = {
            let mut flags = entry.flags.lock();
            flags.announcing = false;
            flags.detach_requested
        };
        if deferred {
            self.finish_detach(&entry);
        }
        result.map_err(|source| AgentError::CreatedVetoed {
            id: agent.id().clone(),
            source,
        })
    }

    /// Records an already-constructed agent as owned by `caller`'s context: enter + announce,
    /// with the detach registered as an effect of the caller's scope.
    pub fn register(
        self: &Arc<Self>,
        caller: &Context,
        agent: AgentRef,
    ) -> Result<Registration, AgentError> {
        let owner = agent_of(caller);
        let detach = self.enter(agent.clone(), owner.as_ref())?;
        if let Err(e) = self.announce(&agent) {
            detach.detach();
            return Err(e);
        }
        match caller.scope().defer(move || detach.detach()) {
            Ok(effect) => Ok(Registration::from_effect(caller.scope().clone(), effect)),
            Err(e) => {
                if let Ok(entry) = self.live_entry(&agent) {
                    self.finish_detach(&entry);
                }
                Err(e.into())
            }
        }
    }

    fn live_entry(&self, agent: &AgentRef) -> Result<Arc<Entry>, AgentError> {
        self.entries
            .lock()
            .iter()
            .find(|e| same_agent(&e.agent, agent))
            .cloned()
            .ok_or_else(|| AgentError::NotLive {
                id: agent.id().clone(),
            })
    }

    fn finish_detach(&self, entry: &Arc<Entry>) {
        let announced = {
            let mut flags = entry.flags.lock();
            if flags.detached {
                return;
            }
            flags.detached = true;
            flags.announced
        };
        self.entries.lock().retain(|e| !Arc::ptr_eq(e, entry));
        if announced {
            self.ctx
                .events()
                .emit::<AgentDisposed>(entry.agent.ctx().tag(), &entry.agent);
        }
    }

    /// The live agent with this id.
    pub fn get(&self, id: &SessionId) -> Option<AgentRef> {
        self.entries
            .lock()
            .iter()
            .find(|e| e.agent.id() == id)
            .map(|e| e.agent.clone())
    }

    /// Live agents in registration order.
    pub fn list(&self) -> Vec<AgentRef> {
        self.entries
            .lock()
            .iter()
            .map(|e| e.agent.clone())
            .collect()
    }

    /// Live agents created without an owning agent (a resumed child can still be a root).
    pub fn roots(&self) -> Vec<AgentRef> {
        self.entries
            .lock()
            .iter()
            .filter(|e| e.owner.is_none())
            .map(|e| e.agent.clone())
            .collect()
    }

    /// Whether the live entry `id` was created through `owner`'s context.
    pub fn is_owned_by(&self, id: &SessionId, owner: &AgentRef) -> bool {
        self.entries.lock().iter().any(|e| {
            e.agent.id() == id
                && e.owner
                    .as_ref()
                    .and_then(Weak::upgrade)
                    .is_some_and(|o| same_agent(&o, owner))
        })
    }

    /// Live agents owned by `owner`, in registration order.
    pub fn children_of(&self, owner: &AgentRef) -> Vec<AgentRef> {
        self.entries
            .lock()
            .iter()
            .filter(|e| {
                e.owner
                    .as_ref()
                    .and_then(Weak::upgrade)
                    .is_some_and(|o| same_agent(&o, owner))
            })
            .map(|e| e.agent.clone())
            .collect()
    }

    /// Registers the creation factory (the loop does this). A second factory is refused; the
    /// slot clears when the provider's scope is disposed.
    pub fn set_factory(
        self: &Arc<Self>,
        provider: &Context,
        factory: Arc<dyn AgentFactory>,
    ) -> Result<Registration, AgentError> {
        let id = self.next_factory.fetch_add(1, Ordering::Relaxed);
        {
            let mut slot = self.factory.lock();
            if slot.is_some() {
                return Err(AgentError::FactoryExists);
            }
            *slot = Some((id, factory));
        }
        let this = self.clone();
        let clear = move || {
            let mut slot = this.factory.lock();
            if slot.as_ref().is_some_and(|(f, _)| *f == id) {
                *slot = None;
            }
        };
        match provider.scope().defer(clear) {
            Ok(effect) => Ok(Registration::from_effect(provider.scope().clone(), effect)),
            Err(e) => {
                *self.factory.lock() = None;
                Err(e.into())
            }
        }
    }

    fn factory(&self) -> Result<Arc<dyn AgentFactory>, AgentError> {
        self.factory
            .lock()
            .as_ref()
            .map(|(_, f)| f.clone())
            .ok_or(AgentError::NoFactory)
    }

    /// Creates an agent through the factory, owned by `caller` (an agent's context makes the
    /// new agent that agent's child).
    pub async fn create(
        &self,
        caller: &Context,
        options: CreateAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        self.factory()?.create_agent(caller, options).await
    }

    /// Resumes a persisted session through the factory, owned by `caller`.
    pub async fn resume(
        &self,
        caller: &Context,
        options: ResumeAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        self.factory()?.resume_agent(caller, options).await
    }

    /// The initiator scope.
    pub fn initiator(&self) -> &InitiatorScope {
        &self.initiator
    }
}

impl AgentDetach {
    /// Removes the exact entry and emits `agent/disposed` if it was announced. Requested while
    /// `agent/created` is being dispatched, it takes effect once that dispatch unwinds.
    pub fn detach(&self) {
        {
            let mut flags = self.entry.flags.lock();
            if flags.detached {
                return;
            }
            if flags.announcing {
                flags.detach_requested = true;
                return;
            }
        }
        self.registry.finish_detach(&self.entry);
    }
}
