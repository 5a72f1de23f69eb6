//! Reading a session file the way crash repair needs: strict about complete lines, tolerant of
//! a torn tail.
//!
//! A process killed mid-write, or a machine losing power, can leave a file whose tail is a
//! partial line (no line end) or a run of NUL bytes (blocks allocated but never written). Such
//! damage after the last committed `turn/end` only bounds what is kept: the tail is dropped and
//! the open turn is closed by the caller. The same damage *before* a committed `turn/end` means
//! the middle of a conversation is gone; silently truncating there would lose acknowledged
//! history, so the file is reported corrupt (file and 1-based line) and left untouched.
//!
//! A complete line (one that ends in a line end) that cannot be used is never a torn write:
//! invalid JSON, a `seq` out of order or an event that breaks the turn/step/call relations
//! (INV-REL) is corruption wherever it is, reported with its line and nothing is truncated.

use std::path::Path;

use dsh_session::event::{CORE_EVENT_TYPES, KNOWN_PLUGIN_EVENT_TYPES, REJECTED_LEGACY_TYPES};
use dsh_session::header::HEADER_VERSION;
use dsh_session::{EventKind, PersistenceError, RelationChecker, SessionEvent, SessionHeader};
use memchr::memmem;

/// Damage found after the last committed `turn/end`: what will be dropped.
#[derive(Debug)]
pub(crate) struct TailDamage {
    /// 1-based line where the damage starts.
    pub line: usize,
    /// What is wrong with that line.
    pub reason: String,
    /// Bytes from the damage to the end of the file.
    pub bytes: u64,
}

/// The intact part of a session file.
#[derive(Debug)]
pub(crate) struct Scanned {
    /// The header (line 1).
    pub header: SessionHeader,
    /// Every intact event, `seq` contiguous from 0.
    pub events: Vec<SessionEvent>,
    /// Byte length of the header and the intact event lines.
    pub intact_len: u64,
    /// The damaged tail, when there is one.
    pub damage: Option<TailDamage>,
}

fn corrupt(path: &Path, line: usize, reason: impl Into<String>) -> PersistenceError {
    PersistenceError::Corrupt {
        path: path.to_owned(),
        line,
        reason: reason.into(),
    }
}

fn unsupported(path: &Path, reason: impl Into<String>) -> PersistenceError {
    PersistenceError::Unsupported {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Parses the header line (without its newline).
pub(crate) fn parse_header(path: &Path, line: &[u8]) -> Result<SessionHeader, PersistenceError> {
    if memchr::memchr(0, line).is_some() {
        return Err(corrupt(path, 1, "the header line contains NUL bytes"));
    }
    match serde_json::from_slice::<SessionHeader>(line) {
        Ok(h) if h.version == HEADER_VERSION => Ok(h),
        Ok(h) => Err(unsupported(
            path,
            format!("header format version {} (this version reads 0)", h.version),
        )),
        Err(e) => {
            // A well-formed header of a newer format is unsupported, not corrupt.
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line)
                && v.get("type").and_then(|t| t.as_str()) == Some("session")
                && let Some(version) = v.get("version").and_then(|t| t.as_u64())
                && version != u64::from(HEADER_VERSION)
            {
                return Err(unsupported(
                    path,
                    format!("header format version {version} (this version reads 0)"),
                ));
            }
            Err(corrupt(path, 1, format!("invalid session header: {e}")))
        }
    }
}

/// Whether an event of type `ty` may be read by this version: legacy vocabulary never, an
/// unknown plugin type only when the writer marked it `ignorable`.
pub(crate) fn check_supported(
    path: &Path,
    line: usize,
    ty: &str,
    ignorable: bool,
) -> Result<(), PersistenceError> {
    if REJECTED_LEGACY_TYPES.contains(&ty) {
        return Err(unsupported(
            path,
            format!("line {line}: legacy event type `{ty}` is not read by this version"),
        ));
    }
    let known = CORE_EVENT_TYPES.contains(&ty) || KNOWN_PLUGIN_EVENT_TYPES.contains(&ty);
    if !known && !ignorable {
        return Err(unsupported(
            path,
            format!(
                "line {line}: unknown event type `{ty}` without `ignorable: true`; the history \
                 may depend on it, so the session is not loaded"
            ),
        ));
    }
    Ok(())
}

/// Splits off the first line: `(line without newline, rest)`, or `None` when no newline
/// terminates it.
pub(crate) fn next_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    memchr::memchr(b'\n', bytes).map(|i| (&bytes[..i], &bytes[i + 1..]))
}

/// Parses one event line (without its newline), or says why it cannot be used.
pub(crate) fn parse_line(line: &[u8]) -> Result<SessionEvent, String> {
    if memchr::memchr(0, line).is_some() {
        return Err("the line contains NUL bytes (unwritten blocks after a power loss)".into());
    }
    // Validating UTF-8 once for the line lets the parser skip per-string validation.
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8: {e}"))?;
    // dsh-session's deserializer reads an envelope whose `type` precedes `data` in one pass.
    serde_json::from_str(text).map_err(|e| format!("invalid event JSON: {e}"))
}

/// Below this many bytes a log is parsed on the calling thread.
const PARALLEL_THRESHOLD: usize = 1 << 20;

/// Parses every line, in order. Lines are independent, so a long log is split across the
/// available cores (the ordering checks run afterwards, sequentially).
fn parse_lines(lines: &[&[u8]], bytes: usize) -> Vec<Result<SessionEvent, String>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads < 2 || bytes < PARALLEL_THRESHOLD {
        return lines.iter().map(|l| parse_line(l)).collect();
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = lines
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|l| parse_line(l)).collect::<Vec<_>>()))
            .collect();
        let mut out = Vec::with_capacity(lines.len());
        for part in parts {
            match part.join() {
                Ok(parsed) => out.extend(parsed),
                // A panicking parser would be a serde bug; report the chunk as unreadable.
                Err(_) => out.extend(
                    std::iter::repeat_with(|| Err("parser panicked".to_owned())).take(chunk),
                ),
            }
        }
        out.truncate(lines.len());
        out
    })
}

/// Whether a complete `turn/end` event line exists in `rest`.
pub(crate) fn committed_turn_end_in(rest: &[u8]) -> Option<usize> {
    let finder = memmem::Finder::new(b"\"type\":\"turn/end\"");
    let mut rest = rest;
    let mut offset_lines = 0;
    while let Some((line, tail)) = next_line(rest) {
        offset_lines += 1;
        if finder.find(line).is_some()
            && serde_json::from_slice::<SessionEvent>(line)
                .is_ok_and(|e| matches!(e.kind, EventKind::TurnEnd(_)))
        {
            return Some(offset_lines);
        }
        rest = tail;
    }
    None
}

/// Reads a whole session file. Damage before the last committed `turn/end` (or in the header)
/// is an error; damage after it is reported in [`Scanned::damage`] for the caller to drop.
pub(crate) fn scan(path: &Path, bytes: &[u8]) -> Result<Scanned, PersistenceError> {
    let Some((header_line, mut rest)) = next_line(bytes) else {
        return Err(corrupt(path, 1, "the header line is incomplete"));
    };
    let header = parse_header(path, header_line)?;
    let mut intact_len = header_line.len() as u64 + 1;
    let mut lines = Vec::with_capacity(bytes.len() / 256);
    while let Some((line, tail)) = next_line(rest) {
        lines.push(line);
        rest = tail;
    }
    // `rest` is now the fragment after the last newline (empty for a clean file).
    let torn = rest;
    let mut events = Vec::with_capacity(lines.len());
    let mut damage = None;
    let mut remaining = &bytes[intact_len as usize..];
    let mut relations = RelationChecker::default();
    for (i, parsed) in parse_lines(&lines, bytes.len()).into_iter().enumerate() {
        let line_no = i + 2;
        let event = match parsed {
            Ok(event) => event,
            // Unwritten blocks after a power loss may hold a line end; that is still a torn
            // tail (bounded below by the committed-turn check).
            Err(reason) if memchr::memchr(0, lines[i]).is_some() => {
                damage = Some((line_no, reason, remaining));
                break;
            }
            // A complete line is never a torn write: whatever is wrong with it, the file was
            // damaged some other way, and cutting it off could lose a committed turn.
            Err(reason) => return Err(corrupt(path, line_no, reason)),
        };
        let expected = events.len() as u64;
        if event.seq != expected {
            return Err(corrupt(
                path,
                line_no,
                format!("seq {} where {expected} was expected", event.seq),
            ));
        }
        check_supported(path, line_no, event.type_name(), event.ignorable)?;
        // Resuming a log whose turns, steps or calls do not fit together would send a history
        // every provider rejects.
        relations
            .check(&event)
            .map_err(|reason| corrupt(path, line_no, reason))?;
        events.push(event);
        let len = lines[i].len() + 1;
        intact_len += len as u64;
        remaining = &remaining[len..];
    }
    if damage.is_none() && !torn.is_empty() {
        let reason = if torn.iter().all(|b| *b == 0) {
            "NUL padding at the end of the file (unwritten blocks after a power loss)"
        } else {
            "the last line is incomplete (torn write)"
        };
        damage = Some((lines.len() + 2, reason.to_owned(), torn));
    }
    let damage = match damage {
        None => None,
        Some((line, reason, damaged)) => {
            // Skip the damaged line itself when looking for a later committed turn/end.
            let after = next_line(damaged).map_or(&[][..], |(_, t)| t);
            if let Some(n) = committed_turn_end_in(after) {
                return Err(corrupt(
                    path,
                    line,
                    format!(
                        "{reason}; a committed turn/end follows at line {}, so history would be \
                         lost",
                        line + n
                    ),
                ));
            }
            Some(TailDamage {
                line,
                reason,
                bytes: damaged.len() as u64,
            })
        }
    };
    Ok(Scanned {
        header,
        events,
        intact_len,
        damage,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn lines_with_nul_bytes_or_bad_utf8_are_refused_with_a_reason() {
        assert!(parse_line(b"{\"type\"\0}").unwrap_err().contains("NUL"));
        assert!(parse_line(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
        let ok = br#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#;
        assert_eq!(parse_line(ok).unwrap().seq, 0);
    }
}
