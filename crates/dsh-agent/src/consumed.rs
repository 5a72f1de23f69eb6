//! `fold_consumed_work`: what became of the work a log consumed.
//!
//! The turn sequence alone cannot say whether accepted input was run, rejected, or cancelled out
//! of the inbox unrun. Front ends ask this to summarize an owned run the same way whichever
//! owner issued a cancellation, because both facts come from the log.

use std::sync::Arc;

use dsh_session::{EventKind, SessionEvent, SpliceOutcome, TurnEndReason};

/// The answer of [`fold_consumed_work`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumedWork {
    /// The latest `turn/end` that accounts for consumed work.
    pub end: Option<Arc<SessionEvent>>,
    /// Whether accepted work was cancelled out of the inbox, unrun, after that turn.
    pub dropped_unrun: bool,
}

/// Reads a log (or a suffix of one) and returns the latest accounting `turn/end` and whether
/// work was dropped unrun after it.
///
/// A turn accounts for work when it entered a model step, or claimed inbox input and then did
/// not complete normally (failed, was stopped, was rejected). A no-step turn that took nothing,
/// or emptied its claim and completed, describes no work and is skipped.
pub fn fold_consumed_work(events: &[Arc<SessionEvent>]) -> ConsumedWork {
    let mut out = ConsumedWork::default();
    let mut open: Option<(bool, bool)> = None; // (stepped, claimed)
    for event in events {
        match &event.kind {
            EventKind::TurnStart(_) => open = Some((false, false)),
            EventKind::StepStart(_) => {
                if let Some((stepped, _)) = open.as_mut() {
                    *stepped = true;
                }
            }
            EventKind::InboxSpliced(s) if s.removed_count.unwrap_or(0) > 0 => {
                if s.outcome == Some(SpliceOutcome::Canceled) {
                    if s.inserted.is_empty() {
                        out.dropped_unrun = true;
                    }
                } else if let Some((_, claimed)) = open.as_mut() {
                    *claimed = true;
                }
            }
            EventKind::TurnEnd(end) => {
                if let Some((stepped, claimed)) = open.take()
                    && (stepped || (claimed && end.reason != TurnEndReason::Completed))
                {
                    out.end = Some(event.clone());
                    out.dropped_unrun = false;
                }
            }
            _ => {}
        }
    }
    out
}
