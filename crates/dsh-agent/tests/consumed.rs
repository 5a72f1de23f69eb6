//! `fold_consumed_work` cases (INV-CW, G6).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use dsh_agent::fold_consumed_work;
use dsh_session::*;

fn ev(seq: u64, kind: EventKind) -> Arc<SessionEvent> {
    Arc::new(SessionEvent {
        seq,
        time: 0,
        kind,
        ignorable: false,
        source_event_seqs: None,
        surface_op: None,
    })
}

/// Tiny DSL: `T`=turn/start, `S`=step/start, `C`=claim splice, `X`=canceled drop,
/// `R`=replacement, `E:<reason>`=turn/end.
fn log(spec: &str) -> Vec<Arc<SessionEvent>> {
    let mut turn = 0;
    spec.split_whitespace()
        .enumerate()
        .map(|(i, tok)| {
            let seq = i as u64;
            let splice = |removed, inserted: Vec<Arc<Message>>, outcome| {
                EventKind::InboxSpliced(InboxSplice {
                    target: InboxTarget::NextTurn,
                    start: 0,
                    removed_count: Some(removed),
                    inserted,
                    outcome,
                })
            };
            let kind = match tok {
                "T" => {
                    turn += 1;
                    EventKind::TurnStart(TurnStart { turn })
                }
                "S" => EventKind::StepStart(StepBoundary { turn, step: 1 }),
                "C" => splice(1, vec![], None),
                "X" => splice(1, vec![], Some(SpliceOutcome::Canceled)),
                "R" => splice(
                    1,
                    vec![Arc::new(Message::user_text("new"))],
                    Some(SpliceOutcome::Canceled),
                ),
                end => {
                    let reason = match end {
                        "E:completed" => TurnEndReason::Completed,
                        "E:blocked" => TurnEndReason::Blocked,
                        "E:aborted" => TurnEndReason::Aborted {
                            reason: CancelCause::User,
                        },
                        "E:error" => TurnEndReason::Error {
                            error: LlmFailure::new(FailureCode::Unknown, "x"),
                        },
                        other => panic!("bad token {other}"),
                    };
                    EventKind::TurnEnd(TurnEnd { turn, reason })
                }
            };
            ev(seq, kind)
        })
        .collect()
}

fn end_seq(spec: &str) -> (Option<u64>, bool) {
    let w = fold_consumed_work(&log(spec));
    (w.end.map(|e| e.seq), w.dropped_unrun)
}

#[test]
fn empty_log_reports_nothing() {
    assert_eq!(end_seq(""), (None, false));
}

#[test]
fn latest_stepped_turn_is_reported() {
    assert_eq!(
        end_seq("T C S E:completed T C S E:completed"),
        (Some(7), false)
    );
}

#[test]
fn claimed_then_failed_or_stopped_before_a_step_is_reported() {
    assert_eq!(end_seq("T C E:error"), (Some(2), false));
    assert_eq!(end_seq("T C E:aborted"), (Some(2), false));
}

#[test]
fn no_input_stop_fail_or_reject_is_ignored() {
    assert_eq!(end_seq("T E:aborted T E:error T E:blocked"), (None, false));
}

#[test]
fn blocked_with_a_claim_is_reported() {
    assert_eq!(end_seq("T C E:blocked"), (Some(2), false));
}

#[test]
fn a_claim_emptied_and_completed_is_ignored() {
    assert_eq!(end_seq("T C E:completed"), (None, false));
}

#[test]
fn a_drop_after_the_last_accounting_turn_is_reported() {
    assert_eq!(end_seq("T C S E:completed X"), (Some(3), true));
}

#[test]
fn a_replacement_is_not_a_drop() {
    assert_eq!(end_seq("T C S E:completed R"), (Some(3), false));
}

#[test]
fn a_later_accounting_turn_absorbs_an_earlier_drop() {
    assert_eq!(end_seq("X T C S E:completed"), (Some(4), false));
}
