//! Reading a log that holds rewinds: which events belong to turns a `session/rewind` took out
//! of the history.
//!
//! The log keeps rewound turns (it is append-only), so anything that reads the log directly
//! rather than through [`crate::Session::derive_messages`] (a transcript, an editor's replay,
//! the todo list) asks here which events the current history no longer holds.

use std::ops::Range;
use std::sync::Arc;

use crate::event::{EventKind, SessionEvent};

/// The seq ranges of events taken out of the history by rewinds: for each `session/rewind`,
/// from its turn's `turn/start` up to the rewind itself (exclusive), in log order. Ranges may
/// nest or overlap when a rewind goes back past an earlier one.
pub fn rewound_ranges(events: &[Arc<SessionEvent>]) -> Vec<Range<u64>> {
    let mut starts: Vec<(u64, u64)> = Vec::new();
    let mut ranges = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::TurnStart(t) => starts.push((t.turn, e.seq)),
            EventKind::Rewind(r) => {
                if let Some((_, seq)) = starts.iter().rev().find(|(turn, _)| *turn == r.to_turn) {
                    ranges.push(*seq..e.seq);
                }
            }
            _ => {}
        }
    }
    ranges
}

/// Whether `seq` lies in one of `ranges` (from [`rewound_ranges`]).
pub fn is_rewound(ranges: &[Range<u64>], seq: u64) -> bool {
    ranges.iter().any(|r| r.contains(&seq))
}

/// The events of the current history: `events` less those a rewind took out. The rewinds
/// themselves stay, so a reader can say where the history went back.
pub fn history_events(events: &[Arc<SessionEvent>]) -> Vec<Arc<SessionEvent>> {
    let ranges = rewound_ranges(events);
    events
        .iter()
        .filter(|e| !is_rewound(&ranges, e.seq))
        .cloned()
        .collect()
}
