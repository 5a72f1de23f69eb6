//! `route/switched`: a person moved the session to another model or provider (the terminal
//! UI's `/model`, an editor's model select or `/model` command), from its next request on.
//!
//! The route a session uses is recorded by every request (`request/header`,
//! `request/context`), so a resumed session keeps the route of its last request. A switch made
//! after that request would be lost on a restart; this event records it, so the rule "a
//! resumed session keeps the route it last used or was told to use" reads one place: the
//! latest of the three. One type for every front end, so each reads what the others wrote.

use serde::{Deserialize, Serialize};

use crate::event::{EventKind, SessionEvent};
use crate::session::EventDraft;

/// The payload of `route/switched`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSwitched {
    /// The configured provider route that serves the model.
    pub provider: String,
    /// The model id requests use from now on.
    pub model: String,
}

impl RouteSwitched {
    /// The session event type name.
    pub const TYPE: &'static str = "route/switched";

    /// The switch `event` records, when it is a well-formed `route/switched`.
    pub fn of(event: &SessionEvent) -> Option<Self> {
        match &event.kind {
            EventKind::Other { type_name, data } if type_name == Self::TYPE => {
                serde_json::from_value(data.clone()).ok()
            }
            _ => None,
        }
    }

    /// The event to append. Ignorable: nothing the model sees depends on it, so a reader that
    /// does not know it (an older dsh) still loads the session; it only loses the switch.
    pub fn draft(&self) -> EventDraft {
        let data = serde_json::json!({ "provider": self.provider, "model": self.model });
        let mut draft = EventDraft::new(EventKind::other(Self::TYPE, data));
        draft.ignorable = true;
        draft
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_choice_reads_back_from_its_own_draft_and_a_malformed_one_is_none() {
        let choice = RouteSwitched {
            provider: "deepseek".into(),
            model: "deepseek-v4-pro".into(),
        };
        let draft = choice.draft();
        assert!(draft.ignorable);
        let event = SessionEvent {
            seq: 1,
            time: 0,
            kind: draft.kind,
            ignorable: true,
            source_event_seqs: None,
            surface_op: None,
        };
        assert_eq!(RouteSwitched::of(&event), Some(choice));
        let malformed = SessionEvent {
            kind: EventKind::other(RouteSwitched::TYPE, serde_json::json!({"model": 3})),
            ..event
        };
        assert_eq!(RouteSwitched::of(&malformed), None);
    }
}
