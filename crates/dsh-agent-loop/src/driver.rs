//! The concrete agent: public verbs, the driver state machine and its task.
//!
//! State the public verbs touch synchronously (phase, turn number, the current turn's
//! cancellation, the wake latch) sits behind one short critical section; the driver's async
//! tail (prompt assembly, model request, tools) runs outside it. "Check pending work and go
//! idle" is a single critical section, so a wake can never be stranded between them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use dsh_agent::events::{
    AgentCancelRequested, AgentErrorNotice, AgentErrorReported, AgentStatusChanged, CancelNotice,
    StatusChange,
};
use dsh_agent::{
    Agent, AgentError, AgentOptions, AgentRef, AgentRegistry, AgentStatus, CancelCause,
    CancelOptions, Inbox,
};
use dsh_kernel::Context;
use dsh_llm::Llm;
use dsh_prompt::SystemPrompt;
use dsh_session::{
    EventKind, InboxTarget, LlmFailure, Message, MessageId, Session, SessionId, SessionStore,
    TurnStart,
};
use dsh_tools::ToolRuntime;
use futures::FutureExt;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::cancel::TurnCancel;
use crate::turn::Opened;

/// The services a driver uses, resolved once by the loop.
pub(crate) struct Services {
    pub(crate) store: Arc<SessionStore>,
    pub(crate) llm: Arc<Llm>,
    pub(crate) tools: Arc<ToolRuntime>,
    pub(crate) prompt: Arc<SystemPrompt>,
    pub(crate) registry: Arc<AgentRegistry>,
    /// Live `max_parallel_tool_calls`, read at each tool group's start.
    pub(crate) max_parallel: AtomicUsize,
    /// Where drivers are spawned (so `send` works from any thread).
    pub(crate) runtime: tokio::runtime::Handle,
}

pub(crate) enum Phase {
    Idle,
    Running {
        cancel: TurnCancel,
        turn: u64,
        step: u64,
        wake_requested: bool,
    },
}

pub(crate) struct DriverState {
    pub(crate) phase: Phase,
    pub(crate) last_turn: u64,
}

/// What the driver does after a turn closes.
enum Settle {
    /// A fresh turn in the same run (status stays running).
    Continue,
    /// The run retired, but a latched wake starts a new one at once.
    Replay,
    /// The agent is idle.
    Retired,
}

/// The one concrete driver, implementing [`Agent`].
pub(crate) struct LoopAgent {
    pub(crate) me: Weak<LoopAgent>,
    pub(crate) session: Arc<Session>,
    pub(crate) ctx: Context,
    pub(crate) inbox: Inbox,
    pub(crate) options: AgentOptions,
    pub(crate) svc: Arc<Services>,
    pub(crate) state: Mutex<DriverState>,
    /// `true` while a driver run is active; `when_idle` waits for `false`.
    activity: watch::Sender<bool>,
    /// Set when disposal begins: no new run may start afterwards.
    disposing: AtomicBool,
    /// Whether this instance already logged a `request/header`.
    pub(crate) header_logged: AtomicBool,
    /// Text of the last runtime-context snapshot entered into the log.
    pub(crate) runtime_context: Mutex<Option<String>>,
}

impl LoopAgent {
    pub(crate) fn new(
        me: Weak<LoopAgent>,
        session: Arc<Session>,
        ctx: Context,
        inbox: Inbox,
        options: AgentOptions,
        svc: Arc<Services>,
    ) -> Self {
        let last_turn = session.last_turn();
        let runtime_context = crate::turn::restore_runtime_context(&session);
        Self {
            me,
            session,
            ctx,
            inbox,
            options,
            svc,
            state: Mutex::new(DriverState {
                phase: Phase::Idle,
                last_turn,
            }),
            activity: watch::channel(false).0,
            disposing: AtomicBool::new(false),
            header_logged: AtomicBool::new(false),
            runtime_context: Mutex::new(runtime_context),
        }
    }

    pub(crate) fn arc(&self) -> Arc<LoopAgent> {
        // The driver only runs while someone holds the agent; `me` upgrades whenever a public
        // verb or the driver itself is executing.
        self.me
            .upgrade()
            .expect("LoopAgent used after its last reference dropped")
    }

    pub(crate) fn agent_ref(&self) -> AgentRef {
        self.arc()
    }

    pub(crate) fn is_disposing(&self) -> bool {
        self.disposing.load(Ordering::Acquire)
    }

    /// Marks disposal: after this, wakes never start a run and are never latched.
    pub(crate) fn begin_disposal(&self) {
        self.disposing.store(true, Ordering::Release);
    }

    fn emit_status(&self, status: AgentStatus) {
        self.ctx.emit::<AgentStatusChanged>(&StatusChange {
            agent: self.agent_ref(),
            status,
        });
    }

    pub(crate) fn report_error(&self, turn: u64, step: u64, error: LlmFailure) {
        self.ctx.emit::<AgentErrorReported>(&AgentErrorNotice {
            agent: self.agent_ref(),
            turn,
            step,
            error,
        });
    }

    /// Wakes the driver: starts a run on an idle agent (synchronously opening the turn and
    /// claiming its input), or latches the wake when it lands after the active run was
    /// cancelled but before it retired.
    fn wake(&self, after_abort: bool) {
        let started = {
            let mut st = self.state.lock();
            let last_turn = st.last_turn;
            match &mut st.phase {
                Phase::Running {
                    cancel,
                    wake_requested,
                    ..
                } => {
                    // `after_abort` is what the send saw before inserting; a cancel that
                    // landed since then (another thread's) also makes this a wake after the
                    // abort, which must latch rather than leave the message parked.
                    let after_abort = after_abort || cancel.is_cancelled();
                    let disposed = cancel.cause() == Some(CancelCause::Disposed);
                    if after_abort && !disposed && !self.is_disposing() {
                        *wake_requested = true;
                    }
                    false
                }
                Phase::Idle if self.is_disposing() => false,
                Phase::Idle => {
                    st.phase = Phase::Running {
                        cancel: TurnCancel::new(),
                        turn: last_turn,
                        step: 0,
                        wake_requested: false,
                    };
                    self.activity.send_replace(true);
                    true
                }
            }
        };
        if started {
            self.emit_status(AgentStatus::Running);
            let this = self.arc();
            let agent: AgentRef = this.clone();
            let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
            let run = async move {
                let first = opened_rx.await.ok().flatten();
                this.drive(first).await
            };
            match self.svc.registry.initiator().scope(Some(agent), run) {
                Ok(fut) => {
                    // The turn opens synchronously, once the driver's boundary is granted.
                    let _ = opened_tx.send(self.begin_turn());
                    self.svc.runtime.spawn(fut);
                }
                Err(e) => {
                    // The registry is tearing down: no new work may start, so no turn opens
                    // (a `turn/start` here could never be closed); the input stays queued.
                    tracing::warn!(agent = %self.id(), error = %e, "driver not started");
                    let this = self.arc();
                    self.svc
                        .runtime
                        .spawn(async move { this.drive(None).await });
                }
            }
        }
    }

    /// The synchronous opening of a turn: `turn/start`, then the first claim. `None` when the
    /// run was cancelled before the turn opened or `turn/start` could not be logged (the input
    /// then stays queued).
    pub(crate) fn begin_turn(&self) -> Option<Opened> {
        let (cancel, last) = {
            let st = self.state.lock();
            match &st.phase {
                Phase::Running { cancel, turn, .. } => (cancel.clone(), *turn),
                Phase::Idle => return None,
            }
        };
        if cancel.is_cancelled() {
            return None;
        }
        // Checked: wrapping to turn 0 would break every turn relation of the log.
        let Some(turn) = last.checked_add(1) else {
            self.report_error(
                last,
                0,
                LlmFailure::new(
                    dsh_session::FailureCode::Unknown,
                    format!("the session has no turn after turn {last}"),
                ),
            );
            return None;
        };
        if let Err(e) = self
            .session
            .append(EventKind::TurnStart(TurnStart { turn }))
        {
            self.report_error(turn, 0, crate::turn::failure_of(&e));
            return None;
        }
        if let Phase::Running {
            turn: t, step: s, ..
        } = &mut self.state.lock().phase
        {
            *t = turn;
            *s = 0;
        }
        let claimed = self.inbox.claim(InboxTarget::NextTurn, turn);
        Some(Opened {
            turn,
            cancel,
            claimed,
        })
    }

    /// The driver task: runs turns until nothing more is owed, then retires.
    async fn drive(self: Arc<Self>, mut opened: Option<Opened>) {
        loop {
            let normal = match opened.take() {
                Some(o) => self.run_turn(o).await,
                None => false,
            };
            match self.settle(normal) {
                Settle::Continue => {}
                Settle::Replay => {
                    self.emit_status(AgentStatus::Idle);
                    self.emit_status(AgentStatus::Running);
                }
                Settle::Retired => {
                    self.emit_status(AgentStatus::Idle);
                    return;
                }
            }
            opened = self.begin_turn();
        }
    }

    /// Decides, atomically with respect to wakes, whether the run continues, replays a latched
    /// wake, or retires.
    fn settle(&self, normal_close: bool) -> Settle {
        let mut st = self.state.lock();
        let (turn, wake_requested) = match &st.phase {
            Phase::Running {
                turn,
                wake_requested,
                ..
            } => (*turn, *wake_requested),
            Phase::Idle => return Settle::Retired,
        };
        let alive = !self.is_disposing();
        if normal_close && alive && self.inbox.has_pending() {
            st.phase = Phase::Running {
                cancel: TurnCancel::new(),
                turn,
                step: 0,
                wake_requested: false,
            };
            return Settle::Continue;
        }
        st.last_turn = turn;
        if wake_requested && alive && self.inbox.has_pending() {
            st.phase = Phase::Running {
                cancel: TurnCancel::new(),
                turn,
                step: 0,
                wake_requested: false,
            };
            return Settle::Replay;
        }
        st.phase = Phase::Idle;
        self.activity.send_replace(false);
        Settle::Retired
    }

    pub(crate) fn current_step(&self) -> u64 {
        match &self.state.lock().phase {
            Phase::Running { step, .. } => *step,
            Phase::Idle => 0,
        }
    }

    pub(crate) fn set_step(&self, s: u64) {
        if let Phase::Running { step, .. } = &mut self.state.lock().phase {
            *step = s;
        }
    }

    pub(crate) fn max_parallel(&self) -> usize {
        self.svc.max_parallel.load(Ordering::Relaxed).max(1)
    }
}

impl Agent for LoopAgent {
    fn id(&self) -> &SessionId {
        self.session.id()
    }

    fn session(&self) -> &Arc<Session> {
        &self.session
    }

    fn status(&self) -> AgentStatus {
        match self.state.lock().phase {
            Phase::Idle => AgentStatus::Idle,
            Phase::Running { .. } => AgentStatus::Running,
        }
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
        wakeup: bool,
    ) -> Result<MessageId, AgentError> {
        // Captured before the insert: a waking send that lands after the active run was
        // cancelled starts its own turn once that run converges.
        let after_abort = wakeup
            && matches!(&self.state.lock().phase,
                Phase::Running { cancel, .. } if cancel.is_cancelled());
        let target = if after_abort {
            InboxTarget::NextTurn
        } else {
            target
        };
        let id = message.id.clone();
        self.inbox.append(target, message)?;
        if wakeup {
            self.wake(after_abort);
        }
        Ok(id)
    }

    fn cancel(&self, cause: CancelCause, options: CancelOptions) {
        let running = matches!(self.state.lock().phase, Phase::Running { .. });
        let effective = running || (!options.keep_inbox && self.inbox.has_pending());
        if !effective {
            return;
        }
        self.ctx.emit::<AgentCancelRequested>(&CancelNotice {
            agent: self.agent_ref(),
            cause: cause.clone(),
        });
        if !options.keep_inbox {
            if let Err(e) = self.inbox.clear() {
                tracing::warn!(agent = %self.id(), error = %e, "cancel could not clear the inbox");
            }
            if let Phase::Running { wake_requested, .. } = &mut self.state.lock().phase {
                *wake_requested = false;
            }
        }
        let cancel = match &self.state.lock().phase {
            Phase::Running { cancel, .. } => Some(cancel.clone()),
            Phase::Idle => None,
        };
        if let Some(cancel) = cancel {
            cancel.cancel(cause);
        }
    }

    fn when_idle(&self) -> BoxFuture<'static, ()> {
        let mut rx = self.activity.subscribe();
        async move {
            let _ = rx.wait_for(|running| !running).await;
        }
        .boxed()
    }
}
