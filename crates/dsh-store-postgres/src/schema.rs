//! The database schema and its migrations.
//!
//! Migrations are numbered and applied in order, each in its own transaction together with the
//! row that records it, under a transaction-scoped advisory lock: many dsh processes starting at
//! once against a fresh database apply each migration exactly once, and running them again is a
//! no-op. A database migrated by a newer dsh (a version this one does not know) is refused
//! rather than written with an older idea of the schema.

use dsh_session::PersistenceError;
use tokio_postgres::Client;

use crate::error::db;

/// Advisory lock key serializing migrators (an arbitrary constant: "dsh schema").
const MIGRATION_LOCK: i64 = 0x6473_6873_6368_656d;

/// The migrations, in order; index + 1 is the version.
pub const MIGRATIONS: &[&str] = &[
    // 1: sessions and their events.
    "CREATE TABLE dsh_sessions (
        id            text PRIMARY KEY,
        project_key   text NOT NULL,
        cwd           text,
        header        jsonb NOT NULL,
        header_text   text NOT NULL,
        origin        text,
        parent        text,
        created_at    bigint NOT NULL,
        updated_at    bigint NOT NULL,
        title         text,
        first_prompt  text,
        turns         bigint NOT NULL DEFAULT 0,
        event_count   bigint NOT NULL DEFAULT 0,
        bytes         bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX dsh_sessions_updated ON dsh_sessions (updated_at DESC);
    CREATE INDEX dsh_sessions_project ON dsh_sessions (project_key, updated_at DESC);
    CREATE TABLE dsh_events (
        session_id  text NOT NULL REFERENCES dsh_sessions (id) ON DELETE CASCADE,
        seq         bigint NOT NULL CHECK (seq >= 0),
        type        text NOT NULL,
        time        bigint NOT NULL,
        data        jsonb,
        line        text NOT NULL,
        PRIMARY KEY (session_id, seq)
    );",
];

/// Brings the schema up to date; safe to call from many processes at once.
pub async fn migrate(client: &mut Client) -> Result<(), PersistenceError> {
    let tx = client
        .transaction()
        .await
        .map_err(db("starting the schema migration"))?;
    // Taken before anything is created: concurrent `CREATE TABLE IF NOT EXISTS` still races on
    // the catalog, so migrators queue here instead.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db("waiting for other schema migrators"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS dsh_schema_migrations (
            version    integer PRIMARY KEY,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await
    .map_err(db("creating the schema migrations table"))?;
    let row = tx
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM dsh_schema_migrations",
            &[],
        )
        .await
        .map_err(db("reading the schema version"))?;
    let current: i32 = row.get(0);
    let known = MIGRATIONS.len() as i32;
    if current > known {
        return Err(PersistenceError::Io {
            context: format!(
                "the session database has schema version {current}, newer than this dsh knows \
                 ({known}); upgrade dsh"
            ),
            source: std::io::Error::other("unknown schema version"),
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = i as i32 + 1;
        tx.batch_execute(sql)
            .await
            .map_err(db(format!("applying schema migration {version}")))?;
        tx.execute(
            "INSERT INTO dsh_schema_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(db(format!("recording schema migration {version}")))?;
    }
    tx.commit()
        .await
        .map_err(db("committing the schema migration"))
}
