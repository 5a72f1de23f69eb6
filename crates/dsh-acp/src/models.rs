//! The session's model, chosen by the editor from the models dsh knows, through the protocol's
//! config-option mechanism (a `model` select in `session/new` and `session/load`, changed with
//! `session/set_config_option` or the `/model` command).
//!
//! The choice is per session and applies from the next model request on: an `agent/request`
//! listener scoped to the session's agent swaps the model of every call it makes (the
//! provider stays the session's own). It is durable: a `route/switched` event records it (the
//! record the terminal UI's `/model` writes too), so a session loaded again (here, in `dsh run
//! --resume`, in the terminal UI) keeps it even when no request went out after the choice; the
//! resume-route rule reads the latest of that event and the requests' own records.

use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use dsh_agent::events::AgentRequest;
use dsh_kernel::{BoxError, Context};
use dsh_llm::Llm;
use dsh_session::RouteSwitched;

use crate::bridge::Bridge;
use crate::errors::{internal, invalid};
use crate::record::{SessionRecord, SessionState};

/// The config option id of the model select.
pub(crate) const MODEL_OPTION: &str = "model";

/// The models a session may choose from: the advisory catalog of its route's adapter. The one
/// place to change when the model catalog service arrives.
fn catalog(bridge: &Bridge, state: &SessionState) -> Vec<(String, String)> {
    let Some(provider) = state.route().provider.as_deref() else {
        return Vec::new();
    };
    bridge
        .ctx
        .get::<Llm>()
        .map(|llm| llm.list_models(provider))
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.id, m.name))
        .collect()
}

/// The model the session uses now: its own choice, else its route's.
fn current(state: &SessionState) -> Option<String> {
    state.model().or_else(|| state.route().model.clone())
}

/// The model in use and every model the session may switch to (a configured model outside
/// the catalog is still the one in use, so it is listed too).
fn offered(bridge: &Bridge, state: &SessionState) -> Option<(String, Vec<(String, String)>)> {
    let mut models = catalog(bridge, state);
    let current = current(state).or_else(|| models.first().map(|m| m.0.clone()))?;
    if !models.iter().any(|(id, _)| *id == current) {
        models.insert(0, (current.clone(), current.clone()));
    }
    Some((current, models))
}

/// The session's config options: the model select, when dsh knows any model to offer.
pub(crate) fn config_options(bridge: &Bridge, state: &SessionState) -> Vec<SessionConfigOption> {
    let Some((current, models)) = offered(bridge, state) else {
        return Vec::new();
    };
    let options: Vec<SessionConfigSelectOption> = models
        .into_iter()
        .map(|(id, name)| SessionConfigSelectOption::new(id, name))
        .collect();
    vec![
        SessionConfigOption::select(MODEL_OPTION, "Model", current, options)
            .category(SessionConfigOptionCategory::Model)
            .description("The model this session sends its requests to".to_owned()),
    ]
}

/// A one-line description of the models, the current one marked (for `/model`).
pub(crate) fn describe(bridge: &Bridge, state: &SessionState) -> String {
    match offered(bridge, state) {
        None => "no model is configured".to_owned(),
        Some((current, models)) => {
            let list: Vec<String> = models
                .into_iter()
                .map(|(id, _)| {
                    if id == current {
                        format!("{id} (current)")
                    } else {
                        id
                    }
                })
                .collect();
            format!("models: {}", list.join(", "))
        }
    }
}

/// Chooses `model` for the session: it must be one the session offers. The choice is appended
/// to the session's log (`route/switched`); it reaches the disk with the next flush (the loop
/// flushes before every request, teardown flushes too), or at once through [`choose_durably`].
pub(crate) fn choose(bridge: &Bridge, record: &SessionRecord, model: &str) -> Result<(), Error> {
    let state = &record.state;
    let Some((_, models)) = offered(bridge, state) else {
        return Err(invalid("no model can be chosen: none is configured"));
    };
    if !models.iter().any(|(id, _)| id == model) {
        let known: Vec<String> = models.into_iter().map(|m| m.0).collect();
        return Err(invalid(format!(
            "unknown model: {model} (available: {})",
            known.join(", ")
        )));
    }
    if let Some(provider) = &state.route().provider {
        let choice = RouteSwitched {
            provider: provider.clone(),
            model: model.to_owned(),
        };
        record
            .agent()
            .session()
            .append_draft(choice.draft())
            .map_err(|e| internal(format!("cannot record the model choice: {e}")))?;
    }
    state.set_model(model);
    Ok(())
}

/// [`choose`], then flushes the session, so the choice survives a crash right after the
/// answer.
pub(crate) async fn choose_durably(
    bridge: &Bridge,
    record: &SessionRecord,
    model: &str,
) -> Result<(), Error> {
    choose(bridge, record, model)?;
    bridge
        .store
        .flush(record.agent().session())
        .await
        .map_err(|e| internal(format!("cannot save the model choice: {e}")))
}

/// Applies the session's model choice to every request of its agent.
pub(crate) fn install(ctx: &Context, state: &Arc<SessionState>) -> Result<(), BoxError> {
    let state = state.clone();
    let _ = ctx.on_waterfall::<AgentRequest, _>(move |mut proposal, next| {
        if let Some(model) = state.model() {
            proposal.config.model = model;
        }
        next.run(proposal)
    })?;
    Ok(())
}
