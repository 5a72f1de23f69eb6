//! `session/rerooted`: the session works in another directory from here on (`--cwd DIR` on a
//! resume): a session stored in PostgreSQL continued on another machine, or a checkout that
//! moved.
//!
//! The header's `cwd` is where the session started and stays as written (it also names the
//! JSONL file's project folder); commands, file tools, instruction files and subagents use
//! [`Session::cwd`](crate::Session::cwd), the latest of this event and the header. Not
//! ignorable: a reader that skipped it would run the model's next command in the old directory.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::event::{EventKind, SessionEvent};
use crate::session::EventDraft;

/// The payload of `session/rerooted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRerooted {
    /// The working directory from this event on.
    pub cwd: PathBuf,
}

impl SessionRerooted {
    /// The session event type name.
    pub const TYPE: &'static str = "session/rerooted";

    /// The directory `event` moves the session to, when it is a well-formed `session/rerooted`.
    pub fn of(event: &SessionEvent) -> Option<Self> {
        match &event.kind {
            EventKind::Other { type_name, data } if type_name == Self::TYPE => {
                serde_json::from_value(data.clone()).ok()
            }
            _ => None,
        }
    }

    /// The latest re-rooting among `events` (a stored log read without a live session).
    pub fn latest<'a>(
        events: impl DoubleEndedIterator<Item = &'a SessionEvent>,
    ) -> Option<PathBuf> {
        events.rev().find_map(|e| Self::of(e).map(|r| r.cwd))
    }

    /// The event to append.
    pub fn draft(&self) -> EventDraft {
        let data = serde_json::json!({ "cwd": self.cwd });
        EventDraft::new(EventKind::other(Self::TYPE, data))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{Session, SessionHeader, SessionId, SessionMeta};

    fn session(seed: Option<Vec<SessionEvent>>) -> std::sync::Arc<Session> {
        let meta = SessionMeta {
            cwd: Some("/old".into()),
            ..SessionMeta::default()
        };
        Session::new(SessionHeader::new(SessionId::new("s"), 1, meta), seed).unwrap()
    }

    #[test]
    fn the_latest_rerooting_wins_over_the_header_live_and_when_seeded() {
        let live = session(None);
        assert_eq!(live.cwd(), Some(PathBuf::from("/old")));
        live.append_draft(SessionRerooted { cwd: "/a".into() }.draft())
            .unwrap();
        live.append_draft(SessionRerooted { cwd: "/b".into() }.draft())
            .unwrap();
        assert_eq!(live.cwd(), Some(PathBuf::from("/b")));
        assert_eq!(
            live.header().cwd,
            Some(PathBuf::from("/old")),
            "the header stays"
        );
        let events: Vec<SessionEvent> = live.events().iter().map(|e| (**e).clone()).collect();
        assert_eq!(
            SessionRerooted::latest(events.iter()),
            Some(PathBuf::from("/b"))
        );
        assert_eq!(session(Some(events)).cwd(), Some(PathBuf::from("/b")));
    }
}
