//! Moving sessions between the JSONL files and PostgreSQL, byte for byte.
//!
//! Both stores keep each event as dsh-session's exact serialization (a JSONL line; the `line`
//! column), and the header likewise, so an export is the file the JSONL store would have
//! written, and a file imported and exported again is identical to the original.

use std::sync::Arc;

use dsh_session::{PersistenceError, RelationChecker, SessionEvent, SessionHeader, SessionId};

use crate::error::bad_row;
use crate::store::PostgresStore;
use crate::{batch, rows};

fn corrupt(id: &str, line: usize, reason: impl Into<String>) -> PersistenceError {
    PersistenceError::Io {
        context: format!("cannot import session file of \"{id}\": line {line}"),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason.into()),
    }
}

impl PostgresStore {
    /// The session as a JSONL session file: its header line, then one line per committed
    /// event, exactly as stored.
    pub async fn export_jsonl(&self, id: &SessionId) -> Result<Vec<u8>, PersistenceError> {
        let client = self.connect().await?;
        let (stored, row) = rows::read_stored(&client, id).await?;
        drop(stored);
        let lines = client
            .query(
                "SELECT line FROM dsh_events WHERE session_id = $1 AND seq < $2 ORDER BY seq",
                &[&id.as_str(), &(row.event_count as i64)],
            )
            .await
            .map_err(crate::error::db(format!("exporting session \"{id}\"")))?;
        let mut out = row.header_text.into_bytes();
        out.push(b'\n');
        for r in lines {
            out.extend_from_slice(r.get::<_, &str>(0).as_bytes());
            out.push(b'\n');
        }
        Ok(out)
    }

    /// Stores a complete JSONL session file (as the JSONL store writes them) as a new session.
    /// Every line must be complete and valid, seqs contiguous from 0 and the turn relations
    /// intact: an import never repairs, so damage is reported (with its line) instead. An id
    /// that is already stored is refused. Returns the header.
    pub async fn import_jsonl(&self, bytes: &[u8]) -> Result<SessionHeader, PersistenceError> {
        let text = std::str::from_utf8(bytes).map_err(|e| corrupt("?", 1, e.to_string()))?;
        let Some(body) = text.strip_suffix('\n') else {
            return Err(corrupt(
                "?",
                text.lines().count(),
                "the last line is incomplete",
            ));
        };
        let mut lines = body.split('\n');
        let header_line = lines.next().unwrap_or_default();
        let header: SessionHeader = serde_json::from_str(header_line)
            .map_err(|e| corrupt("?", 1, format!("invalid session header: {e}")))?;
        let id = header.id.as_str().to_owned();
        if serde_json::to_string(&header).ok().as_deref() != Some(header_line) {
            return Err(corrupt(
                &id,
                1,
                "the header is not in this version's exact form; it would not export identically",
            ));
        }
        let mut events = Vec::new();
        let mut relations = RelationChecker::default();
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            let event: SessionEvent = serde_json::from_str(line)
                .map_err(|e| corrupt(&id, n, format!("invalid event JSON: {e}")))?;
            if event.seq != events.len() as u64 {
                return Err(corrupt(&id, n, format!("seq {} out of order", event.seq)));
            }
            if serde_json::to_string(&event).ok().as_deref() != Some(line) {
                return Err(corrupt(
                    &id,
                    n,
                    "the event is not in this version's exact form; it would not export identically",
                ));
            }
            relations
                .check(&event)
                .map_err(|reason| corrupt(&id, n, reason))?;
            events.push(Arc::new(event));
        }
        if events.is_empty() {
            return Err(bad_row(&header.id, "the session file holds no events"));
        }
        let mut client = self.connect().await?;
        // The session was last used when its last event happened, not when it is imported:
        // listings and `-c` order it by that.
        let last_activity = events.last().map(|e| e.time);
        batch::commit(&mut client, &header, &events, 0, last_activity).await?;
        Ok(header)
    }
}
