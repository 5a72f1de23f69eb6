//! One step: a model request (plus retries) and the tool calls it produced.

use dsh_agent::events::{AgentRequestError, RecoveryAction, RequestFailure};
use dsh_llm::BlockAssembler;
use dsh_prompt::{PromptAssembly, render};
use dsh_session::{
    AssistantChunk, AssistantMessage, EventDraft, EventKind, FinishReason, StreamChunk,
};
use futures::{FutureExt, StreamExt};
use std::sync::Arc;

use crate::cancel::TurnCancel;
use crate::driver::LoopAgent;
use crate::turn::{Ends, Interrupt, fail, fail_box};

impl LoopAgent {
    /// Runs the step's model request (retrying in place when recovery asks for it), records
    /// the completion anchor, then executes the requested tools. Returns how the step leaves
    /// the turn: concluded (`Completed`/`MaxTokens`) or owing another request (`None`).
    pub(crate) async fn step(
        &self,
        turn: u64,
        step: u64,
        assembly: PromptAssembly,
        cancel: &TurnCancel,
    ) -> Result<Option<Ends>, Interrupt> {
        cancel.check()?;
        let system = render(&assembly).map_err(fail)?;
        let system = (!system.is_empty()).then_some(system);
        loop {
            let built = self
                .build_request(turn, step, system.clone(), assembly.tools.clone(), cancel)
                .await?;
            // Checkpoint: the request's whole prefix is durable before the provider sees it.
            self.flush().await?;
            cancel.check()?;
            let provider = built.options.config.provider.clone();
            let model = built.options.config.model.clone();
            let mut stream = match built.prepared {
                Some(prepared) => prepared.stream(built.options),
                None => self.svc.llm.stream(built.options),
            };
            let mut assembler = BlockAssembler::new();
            let mut seqs = Vec::new();
            let interrupted = loop {
                let chunk = tokio::select! {
                    biased;
                    () = cancel.token().cancelled() => break true,
                    chunk = stream.next() => chunk,
                };
                let Some(chunk) = chunk else { break false };
                if cancel.is_cancelled() {
                    break true;
                }
                let event = self
                    .session
                    .append(EventKind::AssistantChunk(AssistantChunk {
                        turn,
                        step,
                        chunk: chunk.clone(),
                    }))
                    .map_err(fail)?;
                seqs.push(event.seq);
                assembler.push(&chunk);
                if matches!(chunk, StreamChunk::Finish { .. }) {
                    break false;
                }
            };
            drop(stream);
            if interrupted || cancel.is_cancelled() {
                // Keep what the user already saw: the visible text/reasoning prefix.
                let blocks = assembler.interrupted_blocks();
                if !blocks.is_empty() {
                    let message = dsh_session::Message::assistant(blocks, &provider, &model);
                    self.session
                        .append_draft(
                            EventDraft::new(EventKind::AssistantMessage(AssistantMessage {
                                turn,
                                step,
                                message: Arc::new(message),
                                usage: assembler.usage().cloned(),
                                interrupted: true,
                            }))
                            .with_sources(seqs),
                        )
                        .map_err(fail)?;
                }
                return Err(Interrupt::Cancelled);
            }
            let finish = assembler.finish();
            if let FinishReason::Error { failure } | FinishReason::Aborted { failure } = &finish {
                let request = RequestFailure {
                    agent: self.agent_ref(),
                    turn,
                    step,
                    provider: provider.clone(),
                    failure: failure.clone(),
                    retry_policy: self.svc.llm.retry_policy(&provider),
                    cancel: cancel.token().clone(),
                };
                let action = self
                    .ctx
                    .waterfall::<AgentRequestError>(request, |_| async { Ok(None) }.boxed())
                    .await
                    .map_err(fail_box)?;
                // Cancellation beats a retry action.
                cancel.check()?;
                if action == Some(RecoveryAction::Retry) {
                    continue;
                }
                return Err(Interrupt::Failed(failure.clone()));
            }
            let message = assembler.message(&provider, &model);
            let calls: Vec<_> = message
                .tool_calls()
                .map(|(id, name, args)| (id.clone(), name.to_owned(), args.to_owned()))
                .collect();
            self.session
                .append_draft(
                    EventDraft::new(EventKind::AssistantMessage(AssistantMessage {
                        turn,
                        step,
                        message: Arc::new(message),
                        usage: assembler.usage().cloned(),
                        interrupted: false,
                    }))
                    .with_sources(seqs),
                )
                .map_err(fail)?;
            if finish == FinishReason::MaxTokens {
                return Ok(Some(Ends::MaxTokens));
            }
            if calls.is_empty() {
                return Ok(Some(Ends::Completed));
            }
            let concluded = self.execute_tool_calls(turn, step, calls, cancel).await?;
            return Ok(concluded.then_some(Ends::Completed));
        }
    }
}
