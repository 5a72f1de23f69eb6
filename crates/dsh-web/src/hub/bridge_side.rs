//! Frames from the bridge.

use serde_json::{Value, json};

use super::frame::{self, Frame, Text};
use super::view::View;
use super::{Ask, Hub, Pending, Purpose, State};

impl Hub {
    /// One frame the bridge sent.
    pub(super) fn bridge_frame(&self, text: &str) {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            tracing::warn!("the ACP bridge sent a frame that is not JSON; dropped");
            return;
        };
        let mut state = self.state.lock();
        match Frame::classify(&value) {
            Some(Frame::Response { id }) => self.bridge_answer(&mut state, value, &id),
            Some(Frame::Request { id, method, params }) => {
                self.bridge_request(&mut state, text, &id, &method, &params);
            }
            Some(Frame::Notification { method, params }) => {
                bridge_notification(&mut state, text, &method, &params);
            }
            None => tracing::warn!("the ACP bridge sent a frame of no known shape; dropped"),
        }
    }

    /// The bridge ended: every connection is closed, none is accepted any more.
    pub(super) fn bridge_gone(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.clients.clear();
        if let Some(done) = state.init_done.take() {
            let _ = done.send(Err("the ACP bridge ended before its handshake".to_owned()));
        }
    }

    fn bridge_answer(&self, state: &mut State, value: Value, id: &Value) {
        let Some(pending) = id.as_u64().and_then(|id| state.pending.remove(&id)) else {
            tracing::debug!(%id, "an answer from the bridge to no request; dropped");
            return;
        };
        let Pending {
            client,
            id: original,
            purpose,
        } = pending;
        let result = value.get("result").filter(|_| value.get("error").is_none());
        let back: Text = frame::with_id(value.clone(), original.clone())
            .to_string()
            .into();
        match purpose {
            Purpose::Initialize => {
                let outcome = match result {
                    Some(result) => {
                        let mut result = result.clone();
                        if let (Some(cwd), Some(object)) =
                            (&state.default_cwd, result.as_object_mut())
                        {
                            object.insert(
                                "_meta".to_owned(),
                                json!({"dsh": {"cwd": cwd.to_string_lossy()}}),
                            );
                        }
                        state.initialized = Some(result);
                        Ok(())
                    }
                    None => Err(format!("the ACP bridge refused the handshake: {value}")),
                };
                if let Some(done) = state.init_done.take() {
                    let _ = done.send(outcome);
                }
                return;
            }
            Purpose::New => {
                if let Some(session) = result
                    .and_then(|r| r.get("sessionId"))
                    .and_then(Value::as_str)
                {
                    let mut view = View::default();
                    view.opened_with(result.unwrap_or(&Value::Null));
                    if let Some(client) = client.filter(|c| state.clients.contains_key(c)) {
                        view.subscribers.insert(client);
                    }
                    let session = session.to_owned();
                    state.sessions.insert(session.clone(), view);
                    self.release(state, &session);
                }
            }
            Purpose::Load(session) => self.loaded(state, &session, result, &value),
            Purpose::Prompt(session) => {
                if let Some(view) = state.sessions.get_mut(&session) {
                    view.prompts = view.prompts.saturating_sub(1);
                }
                self.release(state, &session);
            }
            Purpose::Close(session) => {
                if result.is_some() {
                    let closed =
                        frame::notification("_dsh/session_closed", json!({"sessionId": session}));
                    state.broadcast(&session, &closed, client);
                    state.sessions.remove(&session);
                }
            }
            Purpose::SetConfig(session) => {
                if let Some(options) = result.and_then(|r| r.get("configOptions")) {
                    let update = json!({
                        "sessionUpdate": "config_option_update",
                        "configOptions": options,
                    });
                    let text = frame::notification(
                        "session/update",
                        json!({"sessionId": session, "update": update}),
                    );
                    if let Some(view) = state.sessions.get_mut(&session) {
                        view.apply(&update);
                        view.history.push(text.clone());
                    }
                    state.broadcast(&session, &text, client);
                }
            }
            Purpose::Release(session) => {
                state.releasing.remove(&session);
                for (asker, request) in state.held.remove(&session).unwrap_or_default() {
                    if state.clients.contains_key(&asker) {
                        self.load(state, asker, request, &session);
                    }
                }
                return;
            }
            Purpose::Forward => {}
        }
        if let Some(client) = client {
            state.send(client, back);
        }
    }

    /// The bridge answered the `session/load` that opened `session`: the asker and every tab
    /// that joined meanwhile get the answer; on failure the view goes.
    fn loaded(&self, state: &mut State, session: &str, result: Option<&Value>, value: &Value) {
        let Some(view) = state.sessions.get_mut(session) else {
            return;
        };
        let waiters = std::mem::take(&mut view.waiters);
        match result {
            Some(result) => {
                view.opened_with(result);
                let answer = view.load_answer();
                for (client, id) in waiters {
                    state.send(client, frame::result(&id, answer.clone()));
                }
                self.release(state, session);
            }
            None => {
                let error = value.get("error").cloned().unwrap_or(Value::Null);
                for (client, id) in waiters {
                    let text = json!({"jsonrpc": "2.0", "id": id, "error": error});
                    state.send(client, text.to_string().into());
                }
                state.sessions.remove(session);
            }
        }
    }

    fn bridge_request(
        &self,
        state: &mut State,
        text: &str,
        id: &Value,
        method: &str,
        params: &Value,
    ) {
        if method != "session/request_permission" {
            // The hub offered no files and no terminals; nothing else is asked of a client.
            self.to_bridge(json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": frame::METHOD_NOT_FOUND, "message": "not offered by dsh web"}
            }));
            return;
        }
        let session = frame::session_of(params);
        let title = params
            .pointer("/toolCall/title")
            .and_then(Value::as_str)
            .unwrap_or("tool")
            .to_owned();
        let text: Text = text.into();
        let shown = session
            .as_ref()
            .and_then(|s| state.sessions.get(s))
            .map(|v| v.subscribers.clone())
            .unwrap_or_default();
        for client in &shown {
            state.send(*client, text.clone());
        }
        state.asks.insert(
            frame::key(id),
            Ask {
                session,
                frame: text,
                title,
                shown,
            },
        );
    }
}

fn bridge_notification(state: &mut State, text: &str, method: &str, params: &Value) {
    let text: Text = text.into();
    match method {
        "session/update" => {
            let Some(session) = frame::session_of(params) else {
                return;
            };
            let Some(view) = state.sessions.get_mut(&session) else {
                tracing::debug!(%session, "an update about a session no connection has open");
                return;
            };
            if let Some(update) = params.get("update") {
                view.apply(update);
            }
            view.history.push(text.clone());
            state.broadcast(&session, &text, None);
        }
        "$/cancel_request" => {
            // The bridge withdrew a question (the turn was cancelled): the cards go.
            let Some(ask) = params
                .get("requestId")
                .and_then(|id| state.asks.remove(&frame::key(id)))
            else {
                return;
            };
            for client in &ask.shown {
                state.send(*client, text.clone());
            }
        }
        _ => {
            for client in state.clients.keys() {
                state.send(*client, text.clone());
            }
        }
    }
}
