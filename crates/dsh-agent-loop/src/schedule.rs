//! Tool-call scheduling inside a step.
//!
//! Exclusive calls are barriers; consecutive parallel-safe calls share a bounded rolling pool.
//! Each call is classified again just before it starts, so a registry change made by an
//! earlier call is honoured. Policy (`prepare`), results (`finish`, `tool/result`) and the
//! contexts results carry all follow model order; only the bodies overlap. On cancellation no
//! new call starts, started bodies are awaited and recorded, and every call that never started
//! gets a synthetic `ABORTED_BEFORE_DISPATCH` call/result pair, so the log stays
//! provider-valid.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dsh_session::{CallId, EventDraft, EventKind, InboxTarget, ToolCall, ToolResult};
use dsh_tools::{Dispatched, ExecutionMode, Prepared, ToolCallResult, ToolCaller, ToolExec};
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::cancel::TurnCancel;
use crate::driver::LoopAgent;
use crate::turn::{Interrupt, fail};

/// What the scheduler knows about calls whose results could not be recorded in order: the
/// result of a body that ran (or was settled by policy), and which bodies were started. A failed
/// step answers these with what is known instead of claiming they never ran.
#[derive(Default)]
struct Known {
    results: HashMap<CallId, ToolCallResult>,
    started: HashSet<CallId>,
}

struct GroupOutcome {
    consumed: usize,
    concluded: bool,
    aborted: bool,
}

/// Code of a synthetic result for a call the scheduler could not run because the step failed.
const TOOL_NOT_RUN: &str = "TOOL_NOT_RUN";

/// Code of a synthetic result for a call whose body started but whose outcome was lost.
const TOOL_OUTCOME_UNKNOWN: &str = "TOOL_OUTCOME_UNKNOWN";

impl LoopAgent {
    /// Executes the step's tool calls. Returns whether a committed result concluded the turn.
    pub(crate) async fn execute_tool_calls(
        &self,
        turn: u64,
        step: u64,
        calls: Vec<(CallId, String, String)>,
        cancel: &TurnCancel,
    ) -> Result<bool, Interrupt> {
        let caller = ToolCaller {
            agent_id: self.session.id().clone(),
            session: self.session.clone(),
            ctx: self.ctx.clone(),
            cwd: self.session.cwd(),
        };
        let planned: Vec<ToolExec> = calls
            .into_iter()
            .map(|(id, name, args)| {
                ToolExec::new(id, name, args, Some(caller.clone()), cancel.token().clone())
            })
            .collect();
        let mut next = 0;
        let mut concluded = false;
        let mut known = Known::default();
        while next < planned.len() {
            let mode = self.svc.tools.execution_mode(&planned[next]);
            let group = match mode {
                ExecutionMode::Parallel => &planned[next..],
                ExecutionMode::Exclusive => &planned[next..=next],
            };
            let outcome = match self
                .run_group(turn, step, group, mode, cancel, &mut known)
                .await
            {
                Ok(o) => o,
                Err(e) => {
                    // Keep the history provider-valid: every call the model made gets exactly
                    // one result, even when the step fails.
                    self.answer_unanswered(turn, step, &planned, &known);
                    return Err(e);
                }
            };
            next += outcome.consumed;
            concluded |= outcome.concluded;
            if outcome.aborted {
                for exec in &planned[next..] {
                    if let Err(e) = self.append_skipped(turn, step, exec) {
                        // Whichever half of the synthetic pair failed, no call may stay
                        // unanswered (INV-REL-4): the same fallback as a failed group.
                        self.answer_unanswered(turn, step, &planned, &known);
                        return Err(fail(e));
                    }
                }
                return Ok(concluded);
            }
        }
        Ok(concluded)
    }

    async fn run_group(
        &self,
        turn: u64,
        step: u64,
        group: &[ToolExec],
        mode: ExecutionMode,
        cancel: &TurnCancel,
        known: &mut Known,
    ) -> Result<GroupOutcome, Interrupt> {
        let tools = &self.svc.tools;
        let cap = match mode {
            ExecutionMode::Parallel => self.max_parallel(),
            ExecutionMode::Exclusive => 1,
        };
        let n = group.len();
        let mut slots: Vec<Option<Dispatched>> = vec![None; n];
        let mut call_seqs = vec![0u64; n];
        let mut started = 0;
        let mut committed = 0;
        let mut concluded = false;
        let mut aborted = cancel.is_cancelled();
        let mut failure: Option<Interrupt> = None;
        let mut in_flight = FuturesUnordered::new();
        // Each iteration either starts the next call or waits for one in flight to settle,
        // then commits whatever is next in model order.
        loop {
            // A call reclassified as exclusive stops replenishment; it becomes a new barrier
            // once the pool drains.
            let can_start = failure.is_none()
                && !aborted
                && started < n
                && in_flight.len() < cap
                && !(started > 0
                    && mode == ExecutionMode::Parallel
                    && tools.execution_mode(&group[started]) != ExecutionMode::Parallel);
            if can_start {
                let (i, exec) = (started, &group[started]);
                match self.append_call(turn, step, exec) {
                    Ok(seq) => call_seqs[i] = seq,
                    Err(e) => {
                        failure = Some(fail(e));
                        continue;
                    }
                }
                started += 1;
                match tools.prepare(exec).await {
                    Prepared::Settled(outcome) => slots[i] = Some(outcome),
                    // Checkpoint: a body with side effects starts only once its `tool/call` is
                    // durable. On failure it never runs (fail closed); the call is answered with
                    // the other unanswered calls of the failed step.
                    Prepared::Dispatch => match self.flush().await {
                        Ok(()) => {
                            known.started.insert(exec.call_id.clone());
                            in_flight.push(async move { (i, tools.dispatch(exec).await) });
                        }
                        Err(e) => failure = Some(e),
                    },
                }
            } else {
                let Some((i, outcome)) = in_flight.next().await else {
                    break;
                };
                slots[i] = Some(outcome);
            }
            if let Err(e) = self
                .commit_ready(
                    turn,
                    step,
                    group,
                    &mut slots,
                    &call_seqs,
                    started,
                    &mut committed,
                    &mut concluded,
                    known,
                )
                .await
            {
                failure.get_or_insert(e);
            }
            if cancel.is_cancelled() {
                aborted = true;
            }
        }
        if let Some(e) = failure {
            // Every started body has settled (the loop drains the pool before it ends); keep
            // the outcomes that could not be committed in order, so they are reported as they
            // are rather than as "not run".
            for (exec, slot) in group.iter().zip(slots) {
                if let Some(outcome) = slot {
                    let result = tools.finish(exec, outcome).await;
                    known.results.insert(exec.call_id.clone(), result);
                }
            }
            return Err(e);
        }
        if aborted {
            for exec in &group[started..] {
                self.append_skipped(turn, step, exec).map_err(fail)?;
            }
            return Ok(GroupOutcome {
                consumed: n,
                concluded,
                aborted: true,
            });
        }
        Ok(GroupOutcome {
            consumed: started,
            concluded,
            aborted: false,
        })
    }

    /// Finishes and records every settled result that is next in model order.
    #[allow(clippy::too_many_arguments)]
    async fn commit_ready(
        &self,
        turn: u64,
        step: u64,
        group: &[ToolExec],
        slots: &mut [Option<Dispatched>],
        call_seqs: &[u64],
        started: usize,
        committed: &mut usize,
        concluded: &mut bool,
        known: &mut Known,
    ) -> Result<(), Interrupt> {
        while *committed < started {
            let Some(outcome) = slots[*committed].take() else {
                break;
            };
            let exec = &group[*committed];
            let result = self.svc.tools.finish(exec, outcome).await;
            if let Err(e) =
                self.append_result(turn, step, &exec.call_id, &result, call_seqs[*committed])
            {
                known.results.insert(exec.call_id.clone(), result);
                return Err(fail(e));
            }
            for context in result.additional_contexts {
                self.inbox
                    .append(InboxTarget::NextStep, context)
                    .map_err(fail)?;
            }
            *concluded |= result.concludes_turn;
            *committed += 1;
        }
        Ok(())
    }

    fn append_call(
        &self,
        turn: u64,
        step: u64,
        exec: &ToolExec,
    ) -> Result<u64, dsh_session::SessionError> {
        Ok(self
            .session
            .append(EventKind::ToolCall(ToolCall {
                turn,
                step,
                call_id: exec.call_id.clone(),
                name: exec.name.clone(),
                arguments: exec.raw_arguments.clone(),
            }))?
            .seq)
    }

    fn append_result(
        &self,
        turn: u64,
        step: u64,
        call_id: &CallId,
        result: &ToolCallResult,
        call_seq: u64,
    ) -> Result<(), dsh_session::SessionError> {
        self.session.append_draft(
            EventDraft::new(EventKind::ToolResult(ToolResult {
                turn,
                step,
                message: Arc::new(result.to_message(call_id.clone())),
                error: result.error.clone(),
                meta: result.meta.clone(),
            }))
            .with_sources(vec![call_seq]),
        )?;
        Ok(())
    }

    /// The synthetic pair for a call that never started.
    fn append_skipped(
        &self,
        turn: u64,
        step: u64,
        exec: &ToolExec,
    ) -> Result<(), dsh_session::SessionError> {
        let seq = self.append_call(turn, step, exec)?;
        self.append_result(
            turn,
            step,
            &exec.call_id,
            &ToolCallResult::aborted_before_dispatch(),
            seq,
        )
    }

    /// Best effort after a scheduler failure: answer every call of the step that has no
    /// result yet, so the next request is still provider-valid. A call is answered with what
    /// is known: its own result when its body settled, `TOOL_OUTCOME_UNKNOWN` when its body
    /// started but the outcome was lost (or cannot be recorded), `TOOL_NOT_RUN` otherwise.
    fn answer_unanswered(&self, turn: u64, step: u64, planned: &[ToolExec], known: &Known) {
        let (called, answered) = self.session.with_events(|events| {
            let mut called = std::collections::HashMap::new();
            let mut answered = std::collections::HashSet::new();
            for e in events.iter().rev() {
                match &e.kind {
                    EventKind::StepStart(b) if b.turn == turn && b.step == step => break,
                    EventKind::ToolCall(c) => {
                        called.insert(c.call_id.clone(), e.seq);
                    }
                    EventKind::ToolResult(r) => {
                        if let Some((id, _, _)) = r.message.content.first().and_then(|b| match b {
                            dsh_session::ContentBlock::ToolResult { tool_call_id, .. } => {
                                Some((tool_call_id.clone(), (), ()))
                            }
                            _ => None,
                        }) {
                            answered.insert(id);
                        }
                    }
                    _ => {}
                }
            }
            (called, answered)
        });
        let not_run = ToolCallResult::from_error(&dsh_tools::ToolError::coded(
            "SchedulerError",
            TOOL_NOT_RUN,
            "the tool call was not run because the step failed",
        ));
        let unknown = ToolCallResult::from_error(&dsh_tools::ToolError::coded(
            "SchedulerError",
            TOOL_OUTCOME_UNKNOWN,
            "the tool call ran but its outcome could not be recorded because the step failed",
        ));
        for exec in planned {
            if answered.contains(&exec.call_id) {
                continue;
            }
            let seq = match called.get(&exec.call_id) {
                Some(seq) => Ok(*seq),
                None => self.append_call(turn, step, exec),
            };
            let Ok(seq) = seq else { continue };
            let recorded = match known.results.get(&exec.call_id) {
                Some(result) => self
                    .append_result(turn, step, &exec.call_id, result, seq)
                    .is_ok(),
                None if !known.started.contains(&exec.call_id) => {
                    let _ = self.append_result(turn, step, &exec.call_id, &not_run, seq);
                    continue;
                }
                None => false,
            };
            if !recorded {
                let _ = self.append_result(turn, step, &exec.call_id, &unknown, seq);
            }
        }
    }
}
