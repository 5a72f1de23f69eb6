//! One bridge-owned session: its agent handle, its prompt slot, its delivery queue, and the
//! listeners that tie them to exactly that agent.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CurrentModeUpdate, SessionInfoUpdate, SessionModeId, SessionUpdate, ToolCallId, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use dsh_agent::events::{AgentErrorReported, InboxClaimed};
use dsh_agent::{Agent, AgentHandle, AgentOptions, AgentRef, Setup, agent_of};
use dsh_guard::SessionPolicies;
use dsh_kernel::{BoxError, Context, ScopeTag};
use dsh_session::{EventKind, SessionEventFired, SessionId, SessionLiveFired};
use dsh_tools::{ToolRuntime, ToolsExecute};
use futures::FutureExt;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::bridge::Bridge;
use crate::editor::EditorOffer;
use crate::errors::invalid;
use crate::modes::Mode;
use crate::options::AcpOptions;
use crate::permission;
use crate::settle::Inflight;
use crate::terminal::TerminalCards;
use crate::translate::Source;
use crate::updates::UpdateQueue;

/// The protocol's form of a session id (the same string: the ACP `sessionId` is the dsh id).
pub(crate) fn wire_id(id: &SessionId) -> agent_client_protocol::v1::schema::SessionId {
    agent_client_protocol::v1::schema::SessionId::new(id.as_str())
}

/// What the agent-scoped listeners and the request handlers share about one session. Built
/// before the agent exists (its listeners are installed during the agent's unpublished setup),
/// so it holds the agent only weakly.
pub(crate) struct SessionState {
    pub(crate) id: SessionId,
    pub(crate) conn: ConnectionTo<Client>,
    pub(crate) updates: UpdateQueue,
    pub(crate) tools: Arc<ToolRuntime>,
    /// Fired when the bridge lets go of the session (close, disconnect, teardown): pending
    /// permission questions fail closed.
    pub(crate) closed: CancellationToken,
    /// Which call runs in which editor terminal (for the cards).
    pub(crate) terminals: Arc<TerminalCards>,
    slot: Mutex<Option<Arc<Inflight>>>,
    mode: Mutex<Mode>,
    /// The mode to return to when plan mode ends (the one it was entered from, or the one the
    /// client chose to leave it for).
    after_plan: Mutex<Mode>,
    /// Where the mode's approval policy goes for the guard (when one is mounted): "auto" stops
    /// the guard asking too, not only the bridge's own listener.
    policies: Option<Arc<SessionPolicies>>,
    /// The model chosen in this session, if any (else the one of its route).
    model: Mutex<Option<String>>,
    /// The route the session's agent was planned with (provider, model, output cap).
    route: AgentOptions,
    /// Whether the session has a title (its first prompt) the editor was told about.
    titled: AtomicBool,
    always_allowed: Mutex<HashSet<String>>,
    bound: Mutex<Bound>,
}

#[derive(Default)]
struct Bound {
    agent: Option<Weak<dyn Agent>>,
    tag: Option<ScopeTag>,
    cwd: Option<PathBuf>,
}

impl SessionState {
    /// The state of session `id` of `bridge`, delivering through `conn`: it starts in the mode
    /// the bridge's approval policy gives, prices usage updates from the bridge's catalog, and
    /// tells the guard (when one is mounted) the policy its mode stands for.
    pub(crate) fn new(
        id: SessionId,
        conn: ConnectionTo<Client>,
        bridge: &Bridge,
        route: AgentOptions,
    ) -> Arc<SessionState> {
        let tools = bridge.tools.clone();
        let mode = Mode::initial(bridge.options.approval);
        let catalog = bridge.options.catalog.clone();
        let policies = bridge.ctx.get::<SessionPolicies>();
        let terminals = Arc::new(TerminalCards::default());
        if let Some(p) = &policies {
            p.set(&id, mode.approval_policy());
        }
        Arc::new(SessionState {
            updates: UpdateQueue::start(
                id.clone(),
                conn.clone(),
                tools.clone(),
                terminals.clone(),
                catalog,
            ),
            terminals,
            id,
            conn,
            tools,
            closed: CancellationToken::new(),
            slot: Mutex::new(None),
            mode: Mutex::new(mode),
            after_plan: Mutex::new(mode),
            policies,
            model: Mutex::new(None),
            route,
            titled: AtomicBool::new(false),
            always_allowed: Mutex::new(HashSet::new()),
            bound: Mutex::new(Bound::default()),
        })
    }

    /// Takes the prompt slot; a second outstanding prompt is refused, never queued — unless
    /// the one holding it has been cancelled (interrupt and send: an editor sends
    /// `session/cancel` and, without waiting, the next `session/prompt`). Then `inflight`
    /// takes the slot at once and the cancelled prompt is returned: the caller waits for it to
    /// settle before queueing anything. Taking the slot, not queueing behind it, is what makes
    /// a later `session/cancel` reach the waiting prompt and a third prompt be refused.
    pub(crate) fn reserve_slot(
        &self,
        inflight: &Arc<Inflight>,
    ) -> Result<Option<Arc<Inflight>>, agent_client_protocol::Error> {
        let mut slot = self.slot.lock();
        let cancelled = match slot.as_ref() {
            None => None,
            Some(held) if held.is_cancelled() => Some(held.clone()),
            Some(_) => return Err(invalid("a prompt is already in flight for this session")),
        };
        *slot = Some(inflight.clone());
        Ok(cancelled)
    }

    /// Frees the slot if it still holds `inflight`, and marks `inflight` settled either way (a
    /// prompt that took the slot from it may be waiting for that).
    pub(crate) fn release_slot(&self, inflight: &Arc<Inflight>) {
        {
            let mut slot = self.slot.lock();
            if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, inflight)) {
                *slot = None;
            }
        }
        inflight.mark_settled();
    }

    /// Whether the slot still holds `inflight`.
    pub(crate) fn holds(&self, inflight: &Arc<Inflight>) -> bool {
        self.slot
            .lock()
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, inflight))
    }

    /// The outstanding prompt, if any.
    pub(crate) fn inflight(&self) -> Option<Arc<Inflight>> {
        self.slot.lock().clone()
    }

    /// The current mode.
    pub(crate) fn mode(&self) -> Mode {
        *self.mode.lock()
    }

    /// Switches the mode; `true` when it changed.
    pub(crate) fn set_mode(&self, mode: Mode) -> bool {
        let mut current = self.mode.lock();
        // Under the mode's lock, so two switches cannot leave the guard on the older one.
        if let Some(p) = &self.policies {
            p.set(&self.id, mode.approval_policy());
        }
        std::mem::replace(&mut *current, mode) != mode
    }

    /// Withdraws the session's policy from the guard (the session is closing).
    pub(crate) fn forget_policy(&self) {
        if let Some(p) = &self.policies {
            p.set(&self.id, None);
        }
    }

    /// Switches the mode and, when it changed, tells the client (`current_mode_update`).
    pub(crate) fn switch_mode(&self, mode: Mode) {
        if self.set_mode(mode) {
            self.updates
                .update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                    SessionModeId::new(mode.id()),
                )));
        }
    }

    /// Sets the mode plan mode returns to when it ends.
    pub(crate) fn return_after_plan(&self, mode: Mode) {
        *self.after_plan.lock() = mode;
    }

    /// Follows the session's plan mode (a `plan/mode` event, from whichever side switched
    /// it): entering shows the `plan` mode, leaving returns to the mode it was entered from,
    /// each told to the client.
    pub(crate) fn follow_plan(&self, active: bool) {
        let current = self.mode();
        if active && current != Mode::Plan {
            self.return_after_plan(current);
            self.switch_mode(Mode::Plan);
        } else if !active && current == Mode::Plan {
            let back = *self.after_plan.lock();
            self.switch_mode(if back == Mode::Plan { Mode::Ask } else { back });
        }
    }

    /// The model chosen in this session, if any.
    pub(crate) fn model(&self) -> Option<String> {
        self.model.lock().clone()
    }

    /// The route the session's agent was planned with.
    pub(crate) fn route(&self) -> &AgentOptions {
        &self.route
    }

    /// Chooses the session's model for its next requests.
    pub(crate) fn set_model(&self, model: &str) {
        *self.model.lock() = Some(model.to_owned());
    }

    /// Titles the session after its first prompt (`session_info_update`), once: the editor's
    /// thread list then shows what the session is about. A session that already had a prompt
    /// (a loaded one) keeps the title it was listed with.
    /// `prompted_before` says whether the log held a prompt before this one.
    pub(crate) fn title_from(&self, prompt: &str, prompted_before: bool) {
        if self.titled.swap(true, Ordering::AcqRel) || prompted_before {
            return;
        }
        if let Some(title) = crate::list::title(prompt) {
            self.updates.update(SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new()
                    .title(title)
                    .updated_at(crate::list::iso8601(dsh_session::now_ms())),
            ));
        }
    }

    /// Whether the person chose "allow always" for `tool` in this session.
    pub(crate) fn is_always_allowed(&self, tool: &str) -> bool {
        self.always_allowed.lock().contains(tool)
    }

    /// Remembers "allow always" for `tool` in this session.
    pub(crate) fn allow_always(&self, tool: &str) {
        self.always_allowed.lock().insert(tool.to_owned());
    }

    /// The agent's routing tag and working directory, for presenting its calls.
    pub(crate) fn presentation_scope(&self) -> (Option<ScopeTag>, Option<PathBuf>) {
        let b = self.bound.lock();
        (b.tag.clone(), b.cwd.clone())
    }

    /// Whether `agent` is the agent this state was wired to (same object, not just same id).
    pub(crate) fn is_agent(&self, agent: &AgentRef) -> bool {
        self.bound
            .lock()
            .agent
            .as_ref()
            .and_then(Weak::upgrade)
            .is_some_and(|a| dsh_agent::same_agent(&a, agent))
    }

    fn bind(&self, agent: &AgentRef) {
        let mut b = self.bound.lock();
        b.agent = Some(Arc::downgrade(agent));
        b.tag = agent.ctx().tag().cloned();
        b.cwd = agent.session().cwd();
        self.updates.bind(b.tag.clone(), b.cwd.clone());
    }
}

/// A published session: its state and the handle whose `dispose` tears the agent down.
pub(crate) struct SessionRecord {
    pub(crate) state: Arc<SessionState>,
    pub(crate) handle: AgentHandle,
}

impl SessionRecord {
    /// The session's agent.
    pub(crate) fn agent(&self) -> &AgentRef {
        self.handle.agent()
    }
}

/// The unpublished composition of a bridge-owned agent: the front end's own per-agent setup
/// first, then (for `session/load`) the stored conversation queued for replay, then the
/// listeners scoped to exactly this agent. Everything is registered through the agent's scoped
/// context, so it is undone by the agent's own teardown, and nothing can be missed: the
/// session publishes no event before setup has finished.
pub(crate) fn wiring(
    state: Arc<SessionState>,
    planned: Option<Setup>,
    options: &AcpOptions,
    asks_through_approver: bool,
    replay: bool,
    offer: EditorOffer,
) -> Setup {
    // The planner's setup when the composition root provides one (the harness), else the
    // front end's own hook.
    let extra = planned.or_else(|| options.agent_setup.as_ref().map(|hook| hook()));
    Box::new(move |ctx: Context| {
        async move {
            let commit = match extra {
                Some(setup) => setup(ctx.clone()).await?,
                None => None,
            };
            let agent = agent_of(&ctx).ok_or_else(|| -> BoxError {
                "the ACP bridge was handed a context that belongs to no agent".into()
            })?;
            state.bind(&agent);
            // A session whose log ends in plan mode opens in the `plan` mode (the answer's
            // `modes` says so; the client does not know the session yet).
            if dsh_plan::events::active_in(&agent.session().events()) {
                state.return_after_plan(state.mode());
                state.set_mode(Mode::Plan);
            }
            if replay {
                for event in agent.session().events() {
                    state.updates.event(event, Source::Replay);
                }
            }
            listen(&ctx, &state, &agent)?;
            offer.install(&ctx, &state)?;
            crate::models::install(&ctx, &state)?;
            permission::install_policy(&ctx, state.clone(), asks_through_approver)?;
            Ok(commit)
        }
        .boxed()
    })
}

fn listen(ctx: &Context, state: &Arc<SessionState>, agent: &AgentRef) -> Result<(), BoxError> {
    let session = agent.session().clone();
    let s = state.clone();
    let _ = ctx.on::<SessionEventFired>(move |notice| {
        // The listener is scoped to the agent's tag; the identity check keeps a foreign
        // session that somehow shares the route out of this client's stream.
        if !Arc::ptr_eq(&notice.session, &session) {
            return;
        }
        if let EventKind::TurnEnd(end) = &notice.event.kind
            && let Some(inflight) = s.inflight()
        {
            inflight.turn_ended(end.turn, &end.reason);
        }
        if let Some(change) = dsh_plan::ModeChange::of(&notice.event) {
            s.follow_plan(change.active);
        }
        s.updates.event(notice.event.clone(), Source::Live);
    })?;
    // Progress reports of the session's calls update their cards while they run.
    let session = agent.session().clone();
    let s = state.clone();
    let _ = ctx.on::<SessionLiveFired>(move |notice| {
        if Arc::ptr_eq(&notice.session, &session)
            && let Some(update) = crate::progress::card_update(&notice.update)
        {
            s.updates.update(update);
        }
    })?;
    // A call's card is announced `pending` (it may still wait for permission); it turns
    // `in_progress` when its body is dispatched, i.e. after any approval.
    let s = state.clone();
    let _ = ctx.on_waterfall::<ToolsExecute, _>(move |call, next| {
        let s = s.clone();
        async move {
            let own = call
                .exec()
                .caller
                .as_ref()
                .is_some_and(|c| c.agent_id == s.id);
            let call_id = call.exec().call_id.clone();
            if !own {
                return next.run(call).await;
            }
            s.updates
                .update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    ToolCallId::new(call_id.as_str()),
                    ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                )));
            s.terminals.started(&call_id);
            let result = next.run(call).await;
            s.terminals.finished(&call_id);
            result
        }
    })?;
    let s = state.clone();
    let _ = ctx.on::<InboxClaimed>(move |claim| {
        if s.is_agent(&claim.agent)
            && let Some(inflight) = s.inflight()
        {
            inflight.claimed(&claim.message.id, claim.turn);
        }
    })?;
    let s = state.clone();
    let _ = ctx.on::<AgentErrorReported>(move |notice| {
        if s.is_agent(&notice.agent)
            && let Some(inflight) = s.inflight()
        {
            inflight.agent_failed(notice.turn, &notice.error);
        }
    })?;
    Ok(())
}
