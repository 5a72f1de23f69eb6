//! Mounting checkpoints: when the workspace is recorded.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_agent::events::{AgentPreStep, AgentTurnEnding};
use dsh_agent::{AgentRef, WorkspaceFence};
use dsh_kernel::{BoxError, Context, Plugin};
use dsh_session::{EventKind, Persistence, Session, SessionId, SessionOrigin, SessionStore};
use dsh_tools::ToolsPreExecute;
use parking_lot::Mutex;

use crate::error::CheckpointError;
use crate::events::At;
use crate::service::{CheckpointConfig, Checkpoints};

/// Mounts [`Checkpoints`] for every top-level agent: the workspace is recorded at each turn's
/// first step (`agent/pre-step`), before the first call of a step that may change files
/// (`tools/pre-execute`: any call whose declared effects are not read-only, which includes
/// every tool that declares nothing), and when the turn ends (`agent/turn-ending`). A
/// subagent's changes belong to its parent's turn: its own calls are not checkpointed, the
/// parent's checkpoints around the delegating call cover them. A checkpoint that fails is
/// logged and the turn goes on (it can then not be rewound).
///
/// The turn's checkpoint does not hold up the turn's first model request: it is taken on its
/// own task and holds the session's [`WorkspaceFence`] (provided here), which every tool call
/// of the session and every hook passes before it runs, and the turn's end before its own
/// checkpoint. So nothing the session does can change the workspace before it is recorded,
/// and the log still has the turn's checkpoint before any of the turn's tool calls run.
pub struct CheckpointPlugin {
    config: CheckpointConfig,
    recording: bool,
}

impl CheckpointPlugin {
    /// The plugin storing under `config.root`.
    pub fn new(config: CheckpointConfig) -> Self {
        Self {
            config,
            recording: true,
        }
    }

    /// With `false`, only the service is provided (a conversation can still be rewound, and
    /// checkpoints recorded earlier restored); nothing new is recorded.
    pub fn recording(mut self, recording: bool) -> Self {
        self.recording = recording;
        self
    }
}

fn top_level(session: &Session) -> bool {
    session.header().origin != Some(SessionOrigin::Subagent) && session.cwd().is_some()
}

async fn take(service: &Checkpoints, session: &Arc<Session>, turn: u64, step: u64, at: At) {
    if let Err(error) = service.checkpoint(session, turn, step, at).await {
        tracing::warn!(session = %session.id(), %error, "checkpoint failed; this turn cannot be rewound");
    }
}

/// The step a session's open turn is in.
fn open_step(session: &Session) -> Option<(u64, u64)> {
    let turn = session.open_turn()?;
    session.with_events(|events| {
        events.iter().rev().find_map(|e| match &e.kind {
            EventKind::StepStart(b) if b.turn == turn => Some((turn, b.step)),
            EventKind::TurnStart(_) => Some((turn, 0)),
            _ => None,
        })
    })
}

impl Plugin for CheckpointPlugin {
    fn name(&self) -> &str {
        "dsh-checkpoint"
    }

    async fn apply(&self, ctx: &Context) -> Result<(), BoxError> {
        let service = Arc::new(Checkpoints::new(
            self.config.clone(),
            ctx.get::<SessionStore>(),
            ctx.get::<dyn Persistence>(),
        ));
        ctx.provide::<Checkpoints>(service.clone())?;
        if !self.recording {
            return Ok(());
        }

        let fence = match ctx.get::<WorkspaceFence>() {
            Some(fence) => fence,
            None => {
                let fence = Arc::new(WorkspaceFence::default());
                ctx.provide::<WorkspaceFence>(fence.clone())?;
                fence
            }
        };

        let at_turn = service.clone();
        let turn_fence = fence.clone();
        let _ = ctx.on_waterfall::<AgentPreStep, _>(move |request, next| {
            let service = at_turn.clone();
            let fence = turn_fence.clone();
            async move {
                let session = request.agent.session().clone();
                if request.step == 1 && top_level(&session) {
                    // Recorded beside the first request; every side effect of the turn waits
                    // for it. Its event is appended by the first to pass the fence (a shared
                    // future runs where it is awaited), not while the request's flush runs.
                    let turn = request.turn;
                    let id = session.id().clone();
                    let recorder = service.clone();
                    let recorded = session.clone();
                    let task = tokio::spawn(async move {
                        recorder.record(&recorded, turn, 0, At::Turn).await
                    });
                    fence.hold(&id, async move {
                        let outcome = match task.await {
                            Ok(recorded) => recorded
                                .and_then(|c| c.map_or(Ok(()), |c| service.publish(&session, &c))),
                            Err(error) => Err(CheckpointError::Session(format!(
                                "the checkpoint's task failed: {error}"
                            ))),
                        };
                        if let Err(error) = outcome {
                            tracing::warn!(session = %session.id(), %error, "checkpoint failed; this turn cannot be rewound");
                        }
                    });
                }
                next.run(request).await
            }
        })?;

        // One checkpoint per step, before its first call that may change files.
        let taken: Arc<Mutex<HashMap<SessionId, (u64, u64)>>> = Arc::default();
        let at_step = service.clone();
        let steps = taken.clone();
        let step_fence = fence.clone();
        let _ = ctx.on_waterfall::<ToolsPreExecute, _>(move |call, next| {
            let service = at_step.clone();
            let taken = steps.clone();
            let fence = step_fence.clone();
            async move {
                let session = call.caller.as_ref().map(|c| c.session.clone());
                // Whatever the call does, the turn's checkpoint was taken before it.
                if let Some(session) = session.as_ref().filter(|s| top_level(s)) {
                    fence.pass(session.id()).await;
                }
                if let Some(session) =
                    session.filter(|s| top_level(s) && !call.effects().is_read_only())
                    && let Some((turn, step)) = open_step(&session)
                {
                    let first = taken.lock().insert(session.id().clone(), (turn, step))
                        != Some((turn, step));
                    if first {
                        take(&service, &session, turn, step, At::Step).await;
                    }
                }
                next.run(call).await
            }
        })?;

        let at_end = service;
        let _ = ctx.on_serial::<AgentTurnEnding, _>(move |ending| {
            let service = at_end.clone();
            let taken = taken.clone();
            let fence = fence.clone();
            let agent: AgentRef = ending.agent.clone();
            let (turn, step) = (ending.turn, ending.step);
            async move {
                let session = agent.session().clone();
                // The turn's own checkpoint is in the log before its end's.
                fence.pass(session.id()).await;
                taken.lock().remove(session.id());
                if top_level(&session) {
                    take(&service, &session, turn, step, At::End).await;
                }
                Ok(())
            }
        })?;
        Ok(())
    }
}
