//! Listing stored sessions from their first lines.
//!
//! A listing reads the head of each file (one `read` of at most 16 KiB), its tail (one more
//! `read` of at most 16 KiB, only when the file is longer than the head) and its metadata: the
//! header, whether any event follows it, the mtime as last activity, the first prompt when it
//! lies in the head, and the last turn number found in the tail (turn numbers are consecutive
//! from 1, so that is the number of turns). Nothing else is parsed and there is no separate
//! index that could go stale, so a thousand sessions list in milliseconds however long each one
//! is.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::UNIX_EPOCH;

use dsh_session::persistence::SessionListing;
use dsh_session::{EventKind, MessageSource, PersistenceError, SessionEvent};
use memchr::memmem;

use crate::layout::{SESSION_FILE_SUFFIX, session_file_name};
use crate::repair::{next_line, parse_header};

/// How much of each file's start a listing reads.
const HEAD: usize = 16 * 1024;
/// How much of each file's end a listing reads.
const TAIL: u64 = 16 * 1024;
/// Largest header line a listing will look for.
const MAX_HEADER: usize = 1024 * 1024;

/// Epoch milliseconds of a file's mtime.
pub(crate) fn mtime_ms(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Reads up to `limit` bytes from the start of `file`.
fn read_head(file: &mut File, limit: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(limit.min(HEAD));
    file.take(limit as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// The first prompt a person typed, if a complete `user/message` line in `lines` has it.
pub(crate) fn first_prompt_in(mut lines: &[u8]) -> Option<String> {
    let finder = memmem::Finder::new(b"\"type\":\"user/message\"");
    while let Some((line, rest)) = next_line(lines) {
        if finder.find(line).is_some()
            && let Ok(SessionEvent {
                kind: EventKind::UserMessage(m),
                ..
            }) = serde_json::from_slice(line)
            && m.source == MessageSource::User
        {
            return Some(m.text());
        }
        lines = rest;
    }
    None
}

#[derive(serde::Deserialize)]
struct TurnLine {
    data: TurnData,
}

#[derive(serde::Deserialize)]
struct TurnData {
    turn: u64,
}

/// The turn number of the last complete `turn/start` or `turn/end` line in `bytes` (whose first
/// and last pieces may be partial lines; those simply fail to parse).
fn last_turn_in(bytes: &[u8]) -> Option<u64> {
    let finder = memmem::Finder::new(b"\"type\":\"turn/");
    bytes
        .rsplit(|b| *b == b'\n')
        .filter(|line| finder.find(line).is_some())
        .find_map(|line| serde_json::from_slice::<TurnLine>(line).ok())
        .map(|l| l.data.turn)
}

/// The listing row of one session file; `None` when the file holds no event.
fn read_listing(path: &Path) -> Result<Option<SessionListing>, PersistenceError> {
    let io_err = |source| PersistenceError::Io {
        context: format!("reading {}", path.display()),
        source,
    };
    let mut file = File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    let mut head = read_head(&mut file, HEAD).map_err(io_err)?;
    if memchr::memchr(b'\n', &head).is_none() && (head.len() as u64) < meta.len() {
        // A header longer than the usual head (a very long cwd): read up to the cap.
        head = read_head(&mut File::open(path).map_err(io_err)?, MAX_HEADER).map_err(io_err)?;
    }
    let Some((header_line, after)) = next_line(&head) else {
        return Err(PersistenceError::Corrupt {
            path: path.to_owned(),
            line: 1,
            reason: "the header line is incomplete".into(),
        });
    };
    let header = parse_header(path, header_line)?;
    let expected = session_file_name(&header.id)?;
    if path.file_name().is_none_or(|n| n != expected.as_str()) {
        return Err(PersistenceError::Corrupt {
            path: path.to_owned(),
            line: 1,
            reason: format!("the header names session \"{}\"", header.id),
        });
    }
    let has_event = memchr::memchr(b'\n', after).is_some() || (head.len() as u64) < meta.len();
    if !has_event {
        return Ok(None);
    }
    let turns = if (head.len() as u64) < meta.len() {
        let mut tail = Vec::new();
        file.seek(SeekFrom::Start(meta.len().saturating_sub(TAIL)))
            .and_then(|_| file.take(TAIL).read_to_end(&mut tail))
            .map_err(io_err)?;
        last_turn_in(&tail)
    } else {
        last_turn_in(after)
    };
    Ok(Some(SessionListing {
        turns,
        first_prompt: first_prompt_in(after),
        header,
        last_activity: mtime_ms(&meta),
        bytes: Some(meta.len()),
    }))
}

/// Every stored session under `root` with at least one event, most recently active first.
/// A file that cannot be read as a session is skipped with a warning rather than hiding every
/// other session.
pub(crate) fn list_root(root: &Path) -> Result<Vec<SessionListing>, PersistenceError> {
    let projects = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PersistenceError::Io {
                context: format!("reading {}", root.display()),
                source,
            });
        }
    };
    let mut out = Vec::new();
    for project in projects.flatten() {
        if !project.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(project.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let name = name.to_string_lossy();
            // Temp files of an unfinished publication end in `.tmp`, so they never match; a
            // leading dot is legal (an id such as `.hidden`).
            if !name.ends_with(SESSION_FILE_SUFFIX) {
                continue;
            }
            // Opening a FIFO would wait forever for a writer, and a device or a symlink is not
            // a session file either: only regular files are read, as `show` and `resume` do.
            if !file.file_type().is_ok_and(|t| t.is_file()) {
                tracing::warn!(
                    path = %file.path().display(),
                    "skipping a session entry that is not a regular file"
                );
                continue;
            }
            match read_listing(&file.path()) {
                Ok(Some(listing)) => out.push(listing),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "skipping an unreadable session file"),
            }
        }
    }
    out.sort_by(|a, b| {
        b.last_activity
            .cmp(&a.last_activity)
            .then(b.header.created_at.cmp(&a.header.created_at))
            .then(a.header.id.cmp(&b.header.id))
    });
    Ok(out)
}
