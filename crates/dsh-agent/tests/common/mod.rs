//! A minimal driverless agent and factory, enough to exercise the interface contracts without
//! the real loop.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use dsh_agent::*;
use dsh_kernel::{Context, ScopeTag};
use dsh_session::{Message, MessageId, Session, SessionId, SessionMeta, SessionStore};
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;

pub struct TestAgent {
    session: Arc<Session>,
    ctx: Context,
    inbox: Inbox,
    options: AgentOptions,
    pub cancels: Mutex<Vec<CancelCause>>,
}

impl Agent for TestAgent {
    fn id(&self) -> &SessionId {
        self.session.id()
    }
    fn session(&self) -> &Arc<Session> {
        &self.session
    }
    fn status(&self) -> AgentStatus {
        AgentStatus::Idle
    }
    fn options(&self) -> &AgentOptions {
        &self.options
    }
    fn ctx(&self) -> &Context {
        &self.ctx
    }
    fn inbox(&self) -> &Inbox {
        &self.inbox
    }
    fn send(
        &self,
        message: Message,
        target: InboxTarget,
        _wakeup: bool,
    ) -> Result<MessageId, AgentError> {
        let id = message.id.clone();
        self.inbox.append(target, message)?;
        Ok(id)
    }
    fn cancel(&self, cause: CancelCause, options: CancelOptions) {
        self.cancels.lock().push(cause);
        if !options.keep_inbox {
            let _ = self.inbox.clear();
        }
    }
    fn when_idle(&self) -> BoxFuture<'static, ()> {
        futures::future::ready(()).boxed()
    }
}

/// Builds an unpublished test agent over a prepared session.
pub fn test_agent(root: &Context, session: Arc<Session>) -> Arc<TestAgent> {
    let tag = ScopeTag::new(session.id().as_str());
    let base = root.tagged_child(session.id().as_str(), tag).unwrap();
    Arc::new_cyclic(|weak: &std::sync::Weak<TestAgent>| {
        let weak_dyn: std::sync::Weak<dyn Agent> = weak.clone();
        let ctx = base.with_local(Arc::new(AgentLocal(weak_dyn.clone())));
        let inbox = Inbox::restore(session.clone()).unwrap();
        inbox.bind(weak_dyn);
        TestAgent {
            session,
            ctx,
            inbox,
            options: AgentOptions::default(),
            cancels: Mutex::new(Vec::new()),
        }
    })
}

pub struct World {
    pub ctx: Context,
    pub store: Arc<SessionStore>,
    pub registry: Arc<AgentRegistry>,
}

pub fn world() -> World {
    let ctx = Context::new();
    let store = SessionStore::new(&ctx);
    let registry = AgentRegistry::new(&ctx);
    ctx.provide::<AgentRegistry>(registry.clone()).unwrap();
    World {
        ctx,
        store,
        registry,
    }
}

impl World {
    /// A published (entered + announced) test agent with no owner.
    pub fn published(&self, id: &str) -> Arc<TestAgent> {
        let session = self
            .store
            .prepare(Some(id.into()), SessionMeta::default(), None)
            .unwrap();
        let agent = test_agent(&self.ctx, session.clone());
        let _ = self
            .store
            .enter(&session, agent.ctx().tag().cloned())
            .unwrap();
        let a: AgentRef = agent.clone();
        let _ = self.registry.register(&self.ctx, a).unwrap();
        agent
    }
}

/// A factory that builds test agents, runs setup unpublished, and publishes them with the
/// caller as owner.
pub struct TestFactory {
    pub root: Context,
    pub store: Arc<SessionStore>,
    pub registry: Arc<AgentRegistry>,
    pub owners: Mutex<Vec<Option<SessionId>>>,
}

#[async_trait]
impl AgentFactory for TestFactory {
    async fn create_agent(
        &self,
        owner: &Context,
        options: CreateAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        let owner_agent = agent_of(owner);
        self.owners
            .lock()
            .push(owner_agent.as_ref().map(|a| a.id().clone()));
        let session = self
            .store
            .prepare(options.session_id, options.meta, options.seed)?;
        let agent = test_agent(&self.root, session.clone());
        if let Some(setup) = options.setup {
            let commit = setup(agent.ctx().clone())
                .await
                .map_err(|e| AgentError::creation("setup failed", Some(e)))?;
            if let Some(commit) = commit {
                commit().map_err(|e| AgentError::creation("commit failed", Some(e)))?;
            }
        }
        let session_detach = self.store.enter(&session, agent.ctx().tag().cloned())?;
        let a: AgentRef = agent.clone();
        let agent_detach = self.registry.enter(a.clone(), owner_agent.as_ref())?;
        self.store.announce(&session)?;
        self.registry.announce(&a)?;
        let scope = agent.ctx().scope().clone();
        let detach = Arc::new(Mutex::new(Some((agent_detach, session_detach))));
        Ok(AgentHandle::new(
            a,
            Arc::new(move || {
                let detach = detach.clone();
                let scope = scope.clone();
                async move {
                    scope.dispose().await;
                    if let Some((agent, session)) = detach.lock().take() {
                        agent.detach();
                        session.detach();
                    }
                }
                .boxed()
            }),
        ))
    }

    async fn resume_agent(
        &self,
        _owner: &Context,
        _options: ResumeAgentOptions,
    ) -> Result<AgentHandle, AgentError> {
        Err(AgentError::PersistenceNotConfigured)
    }
}
