//! Building one model request and logging what makes it reconstructable.
//!
//! Every request the loop sends is derivable from the log alone: the messages are the derived
//! history at the start of the attempt, and the rest (configuration with materialized
//! defaults, system prompt, tool schemas) is the latest `request/header`, which is logged
//! whenever it changes.

use std::sync::atomic::Ordering;

use dsh_agent::events::{AgentRequest, RequestProposal};
use dsh_llm::{GenerateOptions, LlmCallConfig, PreparedCall, ToolSchema};
use dsh_session::{
    EventKind, FailureCode, HeaderReason, LlmFailure, RequestContext, RequestHeader,
    RequestHeaderEvent,
};
use futures::FutureExt;
use serde_json::{Map, Value};

use crate::cancel::TurnCancel;
use crate::driver::LoopAgent;
use crate::turn::{Interrupt, fail, fail_box};

/// A request ready to stream, with the prepared call that pins its adapter (absent when no
/// adapter serves the route and `llm/stream` middleware is expected to).
pub(crate) struct BuiltRequest {
    pub(crate) options: GenerateOptions,
    pub(crate) prepared: Option<PreparedCall>,
}

/// The JSON form of a header, as logged.
pub(crate) fn header_of(
    config: &LlmCallConfig,
    adapter_defaults: Option<&dsh_llm::AdapterDefaults>,
    system: Option<&str>,
    tools: &[ToolSchema],
) -> RequestHeader {
    RequestHeader {
        config: serde_json::to_value(config).unwrap_or(Value::Null),
        adapter_defaults: adapter_defaults
            .filter(|d| !d.is_empty())
            .and_then(|d| serde_json::to_value(d).ok()),
        system: system.map(str::to_owned),
        tools: Some(
            tools
                .iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect(),
        ),
    }
    .canonical()
}

/// The config of a logged header minus the fields its adapter materialized, so a route switch
/// re-materializes the new route's defaults while explicit values persist.
fn strip_adapter_defaults(header: &RequestHeader) -> Option<LlmCallConfig> {
    let mut config: Map<String, Value> = header.config.as_object()?.clone();
    if let Some(marks) = header.adapter_defaults.as_ref().and_then(Value::as_object) {
        for (field, marked) in marks {
            if marked == &Value::Bool(true) {
                config.remove(field);
            }
        }
    }
    serde_json::from_value(Value::Object(config)).ok()
}

impl LoopAgent {
    pub(crate) async fn build_request(
        &self,
        turn: u64,
        step: u64,
        system: Option<String>,
        mut tools: Vec<ToolSchema>,
        cancel: &TurnCancel,
    ) -> Result<BuiltRequest, Interrupt> {
        let persisted = self.session.request_header();
        let provider = self.options.provider.clone().unwrap_or_default();
        let model = self.options.model.clone().unwrap_or_default();
        let logged_here = self.header_logged.load(Ordering::Acquire);
        let seed = match (&persisted, logged_here) {
            (Some(h), true) => {
                strip_adapter_defaults(h).unwrap_or_else(|| LlmCallConfig::new(provider, model))
            }
            _ => {
                // A fresh instance restores an explicit effort only for the identical route.
                let effort = persisted.as_ref().and_then(|h| {
                    let same_route = h.config.get("provider").and_then(Value::as_str)
                        == Some(provider.as_str())
                        && h.config.get("model").and_then(Value::as_str) == Some(model.as_str());
                    let adapter_marked = h
                        .adapter_defaults
                        .as_ref()
                        .and_then(|d| d.get("reasoningEffort"))
                        == Some(&Value::Bool(true));
                    (same_route && !adapter_marked)
                        .then(|| h.config.get("reasoningEffort").and_then(Value::as_str))
                        .flatten()
                        .map(str::to_owned)
                });
                let mut seed = LlmCallConfig::new(provider, model);
                seed.reasoning_effort = effort;
                seed.max_tokens = self.options.max_tokens;
                seed
            }
        };
        let proposal = RequestProposal {
            agent: self.agent_ref(),
            turn,
            step,
            config: seed,
            cancel: cancel.token().clone(),
        };
        let config = self
            .ctx
            .waterfall::<AgentRequest>(proposal, |p| async move { Ok(p.config) }.boxed())
            .await
            .map_err(fail_box)?;
        cancel.check()?;
        if config.provider.is_empty() || config.model.is_empty() {
            return Err(Interrupt::Failed(LlmFailure::new(
                FailureCode::Unknown,
                format!(
                    "agent {} has no provider/model: set AgentOptions.provider and \
                     AgentOptions.model or supply both via the agent/request waterfall",
                    self.session.id()
                ),
            )));
        }
        let prepared = match self
            .svc
            .llm
            .prepare_call(config.clone(), cancel.token())
            .await
        {
            Ok(p) => Some(p),
            Err(e) if e.failure.code == FailureCode::NoAdapter => None,
            Err(e) => return Err(fail(e)),
        };
        cancel.check()?;
        let config = prepared.as_ref().map_or(config, |p| p.config.clone());
        // A tool that answers with images is offered only to a model that reads them (the
        // header below records what was offered).
        if prepared.as_ref().is_some_and(|p| !p.vision) {
            tools.retain(|t| !t.needs_vision);
        }
        let header = header_of(
            &config,
            prepared.as_ref().map(|p| &p.adapter_defaults),
            system.as_deref(),
            &tools,
        );
        let reason = if !logged_here {
            Some(if persisted.is_some() {
                HeaderReason::Resume
            } else {
                HeaderReason::Initial
            })
        } else if persisted.as_deref() != Some(&header) {
            Some(HeaderReason::Change)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.session
                .append(EventKind::RequestHeader(RequestHeaderEvent {
                    header: header.clone(),
                    reason,
                }))
                .map_err(fail)?;
            self.header_logged.store(true, Ordering::Release);
        }
        let context = RequestContext {
            provider: config.provider.clone(),
            model: config.model.clone(),
            context_window: prepared.as_ref().and_then(|p| p.context_window),
        };
        if self.session.request_context().as_ref() != Some(&context) {
            self.session
                .append(EventKind::RequestContext(context))
                .map_err(fail)?;
        }
        cancel.check()?;
        let mut options = GenerateOptions::new(config);
        options.messages = crate::alternate::alternate_roles(self.session.derive_messages());
        options.system = header.system.clone();
        options.tools = tools;
        options.session_id = Some(self.session.id().clone());
        options.cancel = cancel.token().clone();
        Ok(BuiltRequest { options, prepared })
    }
}
