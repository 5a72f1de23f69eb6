//! Frames from the browsers.

use serde_json::{Value, json};

use super::frame::{self, Frame};
use super::view::{ClientId, View};
use super::{Hub, Purpose, State};

impl Hub {
    /// One frame from connection `client`.
    pub(crate) fn receive(&self, client: ClientId, text: &str) {
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(e) => {
                let answer =
                    frame::error(&Value::Null, frame::PARSE_ERROR, &format!("not JSON: {e}"));
                return self.state.lock().send(client, answer);
            }
        };
        match Frame::classify(&value) {
            Some(Frame::Request { id, method, params }) => {
                self.request(client, value, &id, &method, &params);
            }
            Some(Frame::Notification { method, params }) => {
                self.notification(client, value, &method, &params);
            }
            Some(Frame::Response { id }) => self.answer(client, value, &id),
            None => {
                let id = value.get("id").cloned().unwrap_or(Value::Null);
                let answer = frame::error(&id, -32600, "not a JSON-RPC request");
                self.state.lock().send(client, answer);
            }
        }
    }

    fn request(&self, client: ClientId, value: Value, id: &Value, method: &str, params: &Value) {
        if method == "_dsh/steer" {
            return self.steer_request(client, id, params);
        }
        let mut state = self.state.lock();
        let session = frame::session_of(params);
        match (method, session) {
            ("initialize", _) => {
                let answer = match &state.initialized {
                    Some(result) => frame::result(id, result.clone()),
                    None => frame::error(id, -32603, "the agent is not ready"),
                };
                state.send(client, answer);
            }
            ("authenticate", _) => state.send(client, frame::result(id, json!({}))),
            ("session/load", Some(session)) => self.load(&mut state, client, value, &session),
            ("session/new", _) => self.forward(&mut state, Some(client), value, Purpose::New),
            ("session/prompt", Some(session)) => {
                if let Some(view) = state.sessions.get_mut(&session) {
                    view.prompts += 1;
                    // The asker shows its own prompt; the other tabs (and a tab that opens
                    // the session later) see it as the bridge's replay would show it.
                    let text = frame::prompt_text(params);
                    if !text.is_empty() {
                        let mirrored = frame::user_message(&session, &text, false);
                        view.history.push(mirrored.clone());
                        state.broadcast(&session, &mirrored, Some(client));
                    }
                    self.forward(&mut state, Some(client), value, Purpose::Prompt(session));
                } else {
                    self.forward(&mut state, Some(client), value, Purpose::Forward);
                }
            }
            ("session/close", Some(session)) => {
                self.forward(&mut state, Some(client), value, Purpose::Close(session));
            }
            ("session/set_config_option", Some(session)) => {
                self.forward(&mut state, Some(client), value, Purpose::SetConfig(session));
            }
            _ => self.forward(&mut state, Some(client), value, Purpose::Forward),
        }
    }

    /// `session/load`: an open session is joined (everything said about it so far, then the
    /// live stream); another is loaded by the bridge, the asker watching its replay.
    pub(super) fn load(&self, state: &mut State, client: ClientId, value: Value, session: &str) {
        if state.releasing.contains(session) {
            state
                .held
                .entry(session.to_owned())
                .or_default()
                .push((client, value));
            return;
        }
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        let Some(view) = state.sessions.get_mut(session) else {
            let view = View {
                subscribers: [client].into(),
                ..View::default()
            };
            state.sessions.insert(session.to_owned(), view);
            return self.forward(
                state,
                Some(client),
                value,
                Purpose::Load(session.to_owned()),
            );
        };
        view.subscribers.insert(client);
        let history = view.history.clone();
        let answer = view.opened.then(|| frame::result(&id, view.load_answer()));
        if answer.is_none() {
            view.waiters.push((client, id));
        }
        for text in history {
            state.send(client, text);
        }
        // Questions still waiting for an answer are this tab's to answer too.
        let mut questions = Vec::new();
        for ask in state.asks.values_mut() {
            if ask.session.as_deref() == Some(session) {
                ask.shown.insert(client);
                questions.push(ask.frame.clone());
            }
        }
        for text in questions {
            state.send(client, text);
        }
        if let Some(answer) = answer {
            state.send(client, answer);
        }
    }

    fn notification(&self, client: ClientId, mut value: Value, method: &str, params: &Value) {
        let state = self.state.lock();
        if method == "$/cancel_request" {
            // The request being cancelled is known to the bridge under the hub's id.
            let Some(asked) = params.get("requestId") else {
                return;
            };
            let asked = frame::key(asked);
            let found = state
                .pending
                .iter()
                .find(|(_, p)| p.client == Some(client) && frame::key(&p.id) == asked)
                .map(|(id, _)| *id);
            let Some(hub_id) = found else { return };
            value["params"]["requestId"] = json!(hub_id);
        }
        drop(state);
        self.to_bridge(value);
    }

    /// An answer to a question the bridge asked: the first one wins, the other tabs withdraw
    /// their card, and a deny reason reaches the model before the denial.
    fn answer(&self, client: ClientId, value: Value, id: &Value) {
        let mut state = self.state.lock();
        let Some(ask) = state.asks.remove(&frame::key(id)) else {
            // Answered by another tab already, or withdrawn.
            return;
        };
        let withdraw = frame::notification("$/cancel_request", json!({"requestId": id}));
        for other in ask.shown.iter().filter(|c| **c != client) {
            state.send(*other, withdraw.clone());
        }
        drop(state);
        let reason = value
            .pointer("/result/_meta/dsh/reason")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|r| !r.is_empty());
        let selected = value
            .pointer("/result/outcome/optionId")
            .and_then(Value::as_str);
        if let (Some(reason), Some(session)) = (reason, &ask.session)
            && selected.is_some_and(|o| !o.starts_with("allow"))
        {
            // Steered before the denial is returned, so the step that reads the denial
            // carries the reason too (as the terminal UI does).
            let text = format!("I denied the `{}` call: {reason}", ask.title);
            if let Err(error) = self.steer(session, text) {
                tracing::debug!(%error, "cannot pass a deny reason on");
            }
        }
        self.to_bridge(value);
    }

    /// `_dsh/steer {sessionId, prompt}`: the message joins the running turn at its next step.
    /// Only while a prompt of the session runs: otherwise it would start a turn no prompt
    /// answers, so the client is told to send it as a prompt instead.
    fn steer_request(&self, client: ClientId, id: &Value, params: &Value) {
        let session = frame::session_of(params);
        let text = frame::prompt_text(params);
        let refusal = {
            let state = self.state.lock();
            match session.as_deref().and_then(|s| state.sessions.get(s)) {
                None => Some("steer needs a sessionId of a session this connection opened"),
                Some(view) if !view.subscribers.contains(&client) => {
                    Some("steer needs a sessionId of a session this connection opened")
                }
                Some(_) if text.is_empty() => Some("steer needs a prompt with text"),
                Some(view) if view.prompts == 0 => {
                    Some("nothing is running in this session: send the message as a prompt")
                }
                Some(_) => None,
            }
        };
        let answer = match (refusal, session) {
            (None, Some(session)) => match self.steer(&session, text.clone()) {
                Ok(()) => {
                    let mut state = self.state.lock();
                    let mirrored = frame::user_message(&session, &text, true);
                    if let Some(view) = state.sessions.get_mut(&session) {
                        view.history.push(mirrored.clone());
                    }
                    state.broadcast(&session, &mirrored, Some(client));
                    frame::result(id, json!({}))
                }
                Err(why) => frame::error(id, frame::INVALID_PARAMS, &why),
            },
            // Without a session id there is no view, so a refusal was given.
            (refusal, _) => frame::error(
                id,
                frame::INVALID_PARAMS,
                refusal.unwrap_or("steer needs a sessionId"),
            ),
        };
        self.state.lock().send(client, answer);
    }
}
