//! `session/list`: the sessions an editor can load, newest first.
//!
//! Stored sessions come from the persistence listing (headers plus the first prompt and the
//! last activity, read cheaply) when persistence is mounted; the bridge's
//! own live sessions are listed too (a new session has no stored event yet), with the live
//! view preferred for a session that is both. Only sessions with an absolute working directory
//! are listed: an editor cannot place any other.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{ListSessionsRequest, ListSessionsResponse, SessionInfo};
use dsh_session::{EventKind, MessageSource, Persistence, Session, SessionId, SessionOrigin};

use crate::bridge::Bridge;
use crate::errors::{chain, internal, invalid};
use crate::record::wire_id;

/// Longest title derived from a first prompt, in characters.
const TITLE_CHARS: usize = 80;

struct Row {
    id: SessionId,
    cwd: PathBuf,
    title: Option<String>,
    updated_ms: u64,
}

/// A prompt folded to one line and cut to [`TITLE_CHARS`].
pub(crate) fn title(prompt: &str) -> Option<String> {
    let folded = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut title: String = folded.chars().take(TITLE_CHARS).collect();
    if folded.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    (!title.is_empty()).then_some(title)
}

/// The first prompt a person typed in a live session.
pub(crate) fn title_of(session: &Session) -> Option<String> {
    session.with_events(|events| {
        events.iter().find_map(|e| match &e.kind {
            EventKind::UserMessage(m) if m.source == MessageSource::User => title(&m.text()),
            _ => None,
        })
    })
}

/// Answers `session/list`.
pub(crate) async fn list_sessions(
    bridge: Arc<Bridge>,
    request: ListSessionsRequest,
) -> Result<ListSessionsResponse, Error> {
    if request.cursor.is_some() {
        return Err(invalid(
            "unknown cursor: this agent returns every session in one page",
        ));
    }
    if let Some(cwd) = &request.cwd
        && !cwd.is_absolute()
    {
        return Err(invalid(format!(
            "cwd must be an absolute path, got {}",
            cwd.display()
        )));
    }
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    for id in bridge.live_ids() {
        let Some(session) = bridge.store.get(&id) else {
            continue;
        };
        let Some(cwd) = session.header().cwd.clone() else {
            continue;
        };
        seen.insert(session.id().clone());
        rows.push(Row {
            id: session.id().clone(),
            cwd,
            title: title_of(&session),
            updated_ms: session
                .event(session.len().saturating_sub(1))
                .map_or(session.header().created_at, |e| e.time),
        });
    }
    if let Some(persistence) = bridge.ctx.get::<dyn Persistence>() {
        let listings = persistence
            .listings()
            .await
            .map_err(|e| internal(format!("cannot list stored sessions: {}", chain(&e))))?;
        for listing in listings {
            let header = listing.header;
            // A subagent's session belongs to its parent's conversation: it is not one the
            // user started, and loading it in an editor would resume a delegated task alone.
            if seen.contains(&header.id) || header.origin == Some(SessionOrigin::Subagent) {
                continue;
            }
            let Some(cwd) = header.cwd else { continue };
            rows.push(Row {
                id: header.id,
                cwd,
                title: listing.first_prompt.as_deref().and_then(title),
                updated_ms: listing.last_activity,
            });
        }
    }
    rows.retain(|r| r.cwd.is_absolute());
    if let Some(filter) = &request.cwd {
        rows.retain(|r| r.cwd.as_path() == filter.as_path());
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.updated_ms));
    let sessions = rows
        .into_iter()
        .map(|r| {
            SessionInfo::new(wire_id(&r.id), r.cwd)
                .title(r.title)
                .updated_at(iso8601(r.updated_ms))
        })
        .collect();
    Ok(ListSessionsResponse::new(sessions))
}

/// Epoch milliseconds as an RFC 3339 UTC timestamp (`2026-11-29T19:24:44.123Z`).
pub(crate) fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm), for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_795_980_284_123), "2026-11-29T19:24:44.123Z");
    }
}
