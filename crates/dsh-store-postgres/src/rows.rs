//! Reading stored sessions back: the session row and its events, checked as strictly as a
//! session file is.

use dsh_session::{
    PersistenceError, RelationChecker, SessionEvent, SessionHeader, SessionId, StoredSession,
};
use tokio_postgres::Client;

use crate::error::{bad_row, db};

/// What the session row says about its log.
pub(crate) struct SessionRow {
    /// The header exactly as serialized when the session was first stored.
    pub header_text: String,
    /// Committed events (the next seq).
    pub event_count: u64,
    /// Epoch ms of the last commit.
    pub updated_at: u64,
}

/// The session row of `id`, if it is stored.
pub(crate) async fn session_row(
    client: &Client,
    id: &SessionId,
) -> Result<Option<SessionRow>, PersistenceError> {
    let row = client
        .query_opt(
            "SELECT header_text, event_count, updated_at FROM dsh_sessions WHERE id = $1",
            &[&id.as_str()],
        )
        .await
        .map_err(db(format!("reading session \"{id}\"")))?;
    Ok(row.map(|r| SessionRow {
        header_text: r.get(0),
        event_count: r.get::<_, i64>(1) as u64,
        updated_at: r.get::<_, i64>(2) as u64,
    }))
}

/// Parses a stored header.
pub(crate) fn parse_header(id: &SessionId, text: &str) -> Result<SessionHeader, PersistenceError> {
    let header: SessionHeader = serde_json::from_str(text)
        .map_err(|e| bad_row(id, format!("invalid session header: {e}")))?;
    if &header.id != id {
        return Err(bad_row(
            id,
            format!("the header names session \"{}\"", header.id),
        ));
    }
    Ok(header)
}

/// Reads a stored session as committed (no repair): every event in seq order, checked for
/// contiguous seqs and for turn/step/call relations, so a damaged log is reported, never resumed.
/// Returns the session and its row.
pub(crate) async fn read_stored(
    client: &Client,
    id: &SessionId,
) -> Result<(StoredSession, SessionRow), PersistenceError> {
    let row = session_row(client, id)
        .await?
        .filter(|r| r.event_count > 0)
        .ok_or_else(|| PersistenceError::NotFound { id: id.clone() })?;
    let header = parse_header(id, &row.header_text)?;
    let lines = client
        .query(
            "SELECT seq, line FROM dsh_events WHERE session_id = $1 AND seq < $2 ORDER BY seq",
            &[&id.as_str(), &(row.event_count as i64)],
        )
        .await
        .map_err(db(format!("reading the events of session \"{id}\"")))?;
    let mut events = Vec::with_capacity(lines.len());
    let mut relations = RelationChecker::default();
    for r in &lines {
        let seq = r.get::<_, i64>(0) as u64;
        let line: &str = r.get(1);
        let event: SessionEvent = serde_json::from_str(line)
            .map_err(|e| bad_row(id, format!("event {seq}: invalid event JSON: {e}")))?;
        let expected = events.len() as u64;
        if event.seq != expected || seq != expected {
            return Err(bad_row(
                id,
                format!("event seq {} where {expected} was expected", event.seq),
            ));
        }
        relations
            .check(&event)
            .map_err(|reason| bad_row(id, format!("event {seq}: {reason}")))?;
        events.push(event);
    }
    if events.len() as u64 != row.event_count {
        return Err(bad_row(
            id,
            format!(
                "{} events stored where the session row counts {}",
                events.len(),
                row.event_count
            ),
        ));
    }
    Ok((StoredSession { header, events }, row))
}
