//! `model/chosen`: a person picked the session's model (an editor's model select, a `/model`
//! command) before the next request went out.
//!
//! The model a session uses is recorded by every request (`request/header`,
//! `request/context`), so a resumed session keeps the model of its last request. A choice made
//! after that request would be lost on a restart; this event records it, so the rule "a
//! resumed session keeps the route it last used or was told to use" reads one place: the
//! latest of the three.

use serde::{Deserialize, Serialize};

use crate::event::{EventKind, SessionEvent};
use crate::session::EventDraft;

/// The payload of `model/chosen`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChosen {
    /// The provider route the model belongs to (the session's own: a choice never moves a
    /// session to another provider).
    pub provider: String,
    /// The model id requests use from now on.
    pub model: String,
}

impl ModelChosen {
    /// The session event type name.
    pub const TYPE: &'static str = "model/chosen";

    /// The choice `event` records, when it is a well-formed `model/chosen`.
    pub fn of(event: &SessionEvent) -> Option<Self> {
        match &event.kind {
            EventKind::Other { type_name, data } if type_name == Self::TYPE => {
                serde_json::from_value(data.clone()).ok()
            }
            _ => None,
        }
    }

    /// The event to append. Ignorable: nothing the model sees depends on it, so a reader that
    /// does not know it may skip it.
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
        let choice = ModelChosen {
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
        assert_eq!(ModelChosen::of(&event), Some(choice));
        let malformed = SessionEvent {
            kind: EventKind::other(ModelChosen::TYPE, serde_json::json!({"model": 3})),
            ..event
        };
        assert_eq!(ModelChosen::of(&malformed), None);
    }
}
