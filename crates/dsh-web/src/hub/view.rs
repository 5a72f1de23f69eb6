//! What the hub keeps about one session the bridge has open: who watches it, everything the
//! bridge said about it (so a tab that opens it later sees the same thread), and the state a
//! `session/load` answer carries.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::frame::Text;

/// A browser connection's number in the hub.
pub(crate) type ClientId = u64;

/// One open session.
#[derive(Default)]
pub(crate) struct View {
    /// The connections that opened it (`session/new` or `session/load`) and did not leave.
    pub(crate) subscribers: BTreeSet<ClientId>,
    /// Every `session/update` about it since the bridge opened it, in order: the bridge's own
    /// replay of the stored log first, then the live stream (and the prompts the hub mirrored).
    pub(crate) history: Vec<Text>,
    /// Whether the bridge answered the request that opened it.
    pub(crate) opened: bool,
    /// `session/load` requests that arrived while the first load was in flight: answered with
    /// it.
    pub(crate) waiters: Vec<(ClientId, Value)>,
    /// The session's modes and config options, kept current from the updates, as a
    /// `session/load` answer carries them.
    pub(crate) state: Map<String, Value>,
    /// `session/prompt` requests the bridge has not answered yet.
    pub(crate) prompts: usize,
}

impl View {
    /// Takes the state fields of the bridge's `session/new` or `session/load` answer.
    pub(crate) fn opened_with(&mut self, answer: &Value) {
        self.opened = true;
        if let Some(object) = answer.as_object() {
            self.state = object
                .iter()
                .filter(|(k, _)| k.as_str() != "sessionId")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
    }

    /// Follows the mode and config changes an update reports.
    pub(crate) fn apply(&mut self, update: &Value) {
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("current_mode_update") => {
                if let (Some(mode), Some(modes)) = (
                    update.get("currentModeId"),
                    self.state.get_mut("modes").and_then(Value::as_object_mut),
                ) {
                    modes.insert("currentModeId".to_owned(), mode.clone());
                }
            }
            Some("config_option_update") => {
                if let Some(options) = update.get("configOptions") {
                    self.state
                        .insert("configOptions".to_owned(), options.clone());
                }
            }
            _ => {}
        }
    }

    /// The answer a `session/load` of the open session gets.
    pub(crate) fn load_answer(&self) -> Value {
        Value::Object(self.state.clone())
    }

    /// Whether nobody needs the session open any more: nobody watches, nothing is running,
    /// nobody waits for it.
    pub(crate) fn idle(&self) -> bool {
        self.opened && self.subscribers.is_empty() && self.prompts == 0 && self.waiters.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_load_answer_follows_mode_and_option_updates() {
        let mut view = View::default();
        view.opened_with(&json!({
            "sessionId": "s",
            "modes": {"currentModeId": "default", "availableModes": []},
            "configOptions": [{"id": "model", "currentValue": "a"}]
        }));
        view.apply(&json!({"sessionUpdate": "current_mode_update", "currentModeId": "auto"}));
        view.apply(&json!({
            "sessionUpdate": "config_option_update",
            "configOptions": [{"id": "model", "currentValue": "b"}]
        }));
        assert_eq!(
            view.load_answer(),
            json!({
                "modes": {"currentModeId": "auto", "availableModes": []},
                "configOptions": [{"id": "model", "currentValue": "b"}]
            })
        );
    }
}
