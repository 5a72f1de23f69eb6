//! Facts about one stored session that need a full read, computed without modifying it.
//!
//! Only the envelope of each line is decoded (type, seq, ignorable); payloads are skipped,
//! except the one `user/message` that holds the first prompt.

use std::io;
use std::path::Path;

use dsh_session::persistence::SessionSummary;
use dsh_session::{PersistenceError, SessionId};
use serde::Deserialize;

use crate::list::{first_prompt_in, mtime_ms};
use crate::repair::{check_supported, committed_turn_end_in, next_line, parse_header};

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow)]
    ty: std::borrow::Cow<'a, str>,
    seq: u64,
    time: u64,
    #[serde(default)]
    ignorable: bool,
}

/// Summarizes the session stored at `path`. Damage before a committed `turn/end` is reported
/// as corruption, exactly as a load would; a damaged tail only marks the summary as needing
/// repair.
pub(crate) fn summarize(path: &Path, id: &SessionId) -> Result<SessionSummary, PersistenceError> {
    let io_err = |source| PersistenceError::Io {
        context: format!("reading {}", path.display()),
        source,
    };
    let meta = std::fs::metadata(path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            PersistenceError::NotFound { id: id.clone() }
        } else {
            io_err(e)
        }
    })?;
    let bytes = std::fs::read(path).map_err(io_err)?;
    let Some((header_line, mut rest)) = next_line(&bytes) else {
        return Err(PersistenceError::Corrupt {
            path: path.to_owned(),
            line: 1,
            reason: "the header line is incomplete".into(),
        });
    };
    let header = parse_header(path, header_line)?;
    if &header.id != id {
        return Err(PersistenceError::Corrupt {
            path: path.to_owned(),
            line: 1,
            reason: format!("the header names session \"{}\", not \"{id}\"", header.id),
        });
    }
    let mut events = 0u64;
    let mut turns = 0;
    let mut open = false;
    let mut first_prompt = None;
    let mut last_event_time = None;
    let mut damaged = false;
    let mut line_no = 1;
    while !rest.is_empty() {
        line_no += 1;
        let Some((line, tail)) = next_line(rest) else {
            damaged = true;
            break;
        };
        let envelope = serde_json::from_slice::<Envelope<'_>>(line)
            .ok()
            .filter(|e| e.seq == events && memchr::memchr(0, line).is_none());
        let Some(envelope) = envelope else {
            if let Some(n) = committed_turn_end_in(tail) {
                return Err(PersistenceError::Corrupt {
                    path: path.to_owned(),
                    line: line_no,
                    reason: format!(
                        "unreadable event line; a committed turn/end follows at line {}",
                        line_no + n
                    ),
                });
            }
            damaged = true;
            break;
        };
        check_supported(path, line_no, &envelope.ty, envelope.ignorable)?;
        match &*envelope.ty {
            "turn/start" => {
                turns += 1;
                open = true;
            }
            "turn/end" => open = false,
            "user/message" if first_prompt.is_none() => {
                first_prompt = first_prompt_in(&rest[..line.len() + 1]);
            }
            _ => {}
        }
        events += 1;
        last_event_time = Some(envelope.time);
        rest = tail;
    }
    Ok(SessionSummary {
        header,
        last_activity: mtime_ms(&meta),
        events,
        turns,
        first_prompt,
        last_event_time,
        needs_repair: damaged || open,
    })
}
