//! Committing a batch of events: one transaction that inserts them and advances the session
//! row's count from exactly the count the writer expected.
//!
//! That compare-and-advance is what makes a gap or a duplicate seq impossible: a batch commits
//! only on top of the count it was built for, its seqs must continue it, and `(session, seq)` is
//! the primary key. A writer whose acknowledgement was lost (the connection broke during
//! `COMMIT`) finds out on reconnect by reading the count back, instead of writing twice.

use std::sync::Arc;

use dsh_session::{EventKind, MessageSource, PersistenceError, SessionEvent, SessionHeader};
use tokio_postgres::Client;

use crate::error::{db, diverged};
use crate::follow;

// `updated_at` is the server's clock, not the writer's: sessions from many machines are ordered
// by last activity, and their clocks disagree.

/// Columns derived from a batch for the session row (cheap listing facts).
#[derive(Default)]
struct Facts {
    first_prompt: Option<String>,
    title: Option<String>,
    turns: i64,
    bytes: i64,
}

/// A batch as column arrays (one array parameter per column keeps the insert one statement).
#[derive(Default)]
struct Columns {
    seqs: Vec<i64>,
    types: Vec<String>,
    times: Vec<i64>,
    lines: Vec<String>,
    facts: Facts,
}

/// The events' exact serialized lines, and the listing facts they carry.
fn encode(events: &[Arc<SessionEvent>]) -> Result<Columns, serde_json::Error> {
    let mut c = Columns::default();
    let facts = &mut c.facts;
    for e in events {
        let line = serde_json::to_string(&**e)?;
        match &e.kind {
            EventKind::TurnStart(_) => facts.turns += 1,
            EventKind::UserMessage(m)
                if facts.first_prompt.is_none() && m.source == MessageSource::User =>
            {
                facts.first_prompt = Some(m.text());
            }
            _ if e.type_name() == "session/title" => {
                let value: serde_json::Value = serde_json::from_str(&line)?;
                if let Some(t) = value["data"]["title"].as_str() {
                    facts.title = Some(t.to_owned());
                }
            }
            _ => {}
        }
        // As the JSONL store counts them: one line with its line end.
        facts.bytes += line.len() as i64 + 1;
        c.seqs.push(e.seq as i64);
        c.types.push(e.type_name().to_owned());
        c.times.push(e.time as i64);
        c.lines.push(line);
    }
    Ok(c)
}

/// Commits `events` (which must continue at `expected`) for the session `header`: creates the
/// session row when `expected` is 0, otherwise advances it from `expected`. On failure nothing
/// was committed (or the connection broke during commit: the caller reads the count back).
/// A created row's last activity is `created_activity` when given (an imported session was
/// last used when its own last event happened, not when it was imported), else now.
pub(crate) async fn commit(
    client: &mut Client,
    header: &SessionHeader,
    events: &[Arc<SessionEvent>],
    expected: u64,
    created_activity: Option<u64>,
) -> Result<(), PersistenceError> {
    let id = &header.id;
    if let Some((i, e)) = events
        .iter()
        .enumerate()
        .find(|(i, e)| e.seq != expected + *i as u64)
    {
        return Err(diverged(id, Some(e.seq), expected + i as u64));
    }
    if events.is_empty() {
        return Ok(());
    }
    let encoding = |e: serde_json::Error| PersistenceError::Io {
        context: format!("encoding events of session \"{id}\""),
        source: std::io::Error::other(e),
    };
    let Columns {
        seqs,
        types,
        times,
        lines,
        facts,
    } = encode(events).map_err(encoding)?;
    let new_count = (expected + events.len() as u64) as i64;
    let tx = client
        .transaction()
        .await
        .map_err(db(format!("starting a write of session \"{id}\"")))?;
    let advanced = if expected == 0 {
        let header_text = serde_json::to_string(header).map_err(encoding)?;
        let cwd = header
            .cwd
            .as_ref()
            .map(|c| c.to_string_lossy().into_owned());
        let origin = header
            .origin
            .map(|o| serde_json::to_value(o).map(|v| v.as_str().unwrap_or_default().to_owned()))
            .transpose()
            .map_err(encoding)?;
        let parent = header
            .parent_session
            .as_ref()
            .map(|p| p.as_str().to_owned());
        tx.execute(
            "INSERT INTO dsh_sessions (id, project_key, cwd, header, header_text, origin, parent,
                 created_at, updated_at, title, first_prompt, turns, event_count, bytes)
             VALUES ($1, $2, $3, $4::text::jsonb, $4, $5, $6, $7,
                 COALESCE($13::int8, (extract(epoch FROM clock_timestamp()) * 1000)::int8),
                 $8, $9, $10, $11, $12)
             ON CONFLICT (id) DO NOTHING",
            &[
                &id.as_str(),
                &cwd.clone().unwrap_or_default(),
                &cwd,
                &header_text,
                &origin,
                &parent,
                &(header.created_at as i64),
                &facts.title,
                &facts.first_prompt,
                &facts.turns,
                &new_count,
                &(header_text.len() as i64 + 1 + facts.bytes),
                &created_activity.map(|t| t as i64),
            ],
        )
        .await
        .map_err(db(format!("creating session \"{id}\"")))?
    } else {
        tx.execute(
            "UPDATE dsh_sessions SET event_count = $3, updated_at = GREATEST(updated_at, (extract(epoch FROM clock_timestamp()) * 1000)::int8),
                 title = COALESCE($4, title), first_prompt = COALESCE(first_prompt, $5),
                 turns = turns + $6, bytes = bytes + $7
             WHERE id = $1 AND event_count = $2",
            &[
                &id.as_str(),
                &(expected as i64),
                &new_count,
                &facts.title,
                &facts.first_prompt,
                &facts.turns,
                &facts.bytes,
            ],
        )
        .await
        .map_err(db(format!("advancing session \"{id}\"")))?
    };
    if advanced != 1 {
        drop(tx);
        return Err(if expected == 0 {
            PersistenceError::AlreadyExists { id: id.clone() }
        } else {
            diverged(id, None, expected)
        });
    }
    // `data` is a query aid; the line is authoritative. PostgreSQL's JSONB cannot hold a NUL
    // character, so an event carrying one keeps only its line.
    tx.execute(
        "INSERT INTO dsh_events (session_id, seq, type, time, data, line)
         SELECT $1, u.seq, u.type, u.time,
                CASE WHEN strpos(u.line, '\\u0000') > 0 THEN NULL ELSE (u.line::jsonb) -> 'data' END,
                u.line
         FROM unnest($2::int8[], $3::text[], $4::int8[], $5::text[]) AS u(seq, type, time, line)",
        &[&id.as_str(), &seqs, &types, &times, &lines],
    )
    .await
    .map_err(db(format!("writing events of session \"{id}\"")))?;
    // Delivered to followers when (and only if) this transaction commits.
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&follow::CHANNEL, &id.as_str()],
    )
    .await
    .map_err(db(format!("signalling events of session \"{id}\"")))?;
    tx.commit()
        .await
        .map_err(db(format!("committing events of session \"{id}\"")))
}
