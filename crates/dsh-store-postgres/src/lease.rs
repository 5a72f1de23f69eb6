//! Connections, and the one-writer-per-session lease held on one.
//!
//! The lease is a session-level PostgreSQL advisory lock keyed by a stable hash of the session
//! id, held by the connection of whoever writes the session: its live writer, or a load while
//! it repairs. It is released when that connection closes, so a writer killed with `kill -9`
//! releases it at once and a machine that vanished releases it when TCP keepalive gives up.

use std::time::Duration;

use dsh_session::{PersistenceError, SessionId};
use tokio::time::Instant;
use tokio_postgres::{Client, NoTls};

use crate::error::{db, held_elsewhere};

/// How long a taker waits for a held lease: a writer that just closed its session may still be
/// finishing its connection; one that is really in use is reported promptly.
const LEASE_PATIENCE: Duration = Duration::from_secs(2);

/// How often a waiting taker asks again.
const LEASE_RETRY: Duration = Duration::from_millis(20);

/// Opens a connection; its driver runs on the current runtime until the client is dropped.
pub(crate) async fn connect(config: &tokio_postgres::Config) -> Result<Client, PersistenceError> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(db("connecting to the session database"))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "session database connection ended");
        }
    });
    Ok(client)
}

/// The advisory lock key of a session: FNV-1a of its id, the same on every machine.
pub(crate) fn lease_key(id: &SessionId) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in b"dsh-session:".iter().chain(id.as_str().as_bytes()) {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

/// Takes the lease of `id` on `client`'s connection, waiting up to [`LEASE_PATIENCE`].
pub(crate) async fn acquire(client: &Client, id: &SessionId) -> Result<(), PersistenceError> {
    let key = lease_key(id);
    let deadline = Instant::now() + LEASE_PATIENCE;
    loop {
        let row = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .await
            .map_err(db(format!("taking the writer lease of session \"{id}\"")))?;
        if row.get::<_, bool>(0) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(held_elsewhere(id));
        }
        tokio::time::sleep(LEASE_RETRY).await;
    }
}

/// Gives the lease back without closing the connection.
pub(crate) async fn release(client: &Client, id: &SessionId) {
    if let Err(error) = client
        .execute("SELECT pg_advisory_unlock($1)", &[&lease_key(id)])
        .await
    {
        // Closing the connection (which follows) releases it anyway.
        tracing::debug!(session = %id, %error, "releasing a session lease failed");
    }
}
