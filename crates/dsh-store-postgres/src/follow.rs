//! Following a session live from anywhere: its committed events as they are committed.
//!
//! Every batch commit notifies the `dsh_session_events` channel with the session id (delivered
//! by PostgreSQL when the transaction commits, never for one that rolls back). A follower
//! LISTENs first and reads the log after that, so no commit can fall between its read and its
//! subscription; each notification for its session makes it read what follows its last seq.

use std::future::poll_fn;

use dsh_session::{PersistenceError, SessionEvent, SessionId};
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::error::{bad_row, db};

/// The notification channel batch commits signal.
pub(crate) const CHANNEL: &str = "dsh_session_events";

/// One followed event, or the failure that ended the stream.
pub type Followed = Result<SessionEvent, PersistenceError>;

/// Streams `id`'s committed events from `from_seq` on into the returned receiver until it is
/// dropped or the connection fails (the last item is then the error).
pub(crate) async fn follow(
    config: &tokio_postgres::Config,
    id: SessionId,
    from_seq: u64,
) -> Result<mpsc::Receiver<Followed>, PersistenceError> {
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(db("connecting to the session database"))?;
    let (wake_tx, mut wake_rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        // Driving the connection by hand is how tokio-postgres hands out notifications.
        while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if wake_tx.send(n.payload().to_owned()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, "session follow connection ended");
                    break;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(db("subscribing to session events"))?;
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        let mut next = from_seq;
        loop {
            let rows = client
                .query(
                    "SELECT seq, line FROM dsh_events WHERE session_id = $1 AND seq >= $2 \
                     ORDER BY seq",
                    &[&id.as_str(), &(next as i64)],
                )
                .await
                .map_err(db(format!("following session \"{id}\"")));
            let rows = match rows {
                Ok(rows) => rows,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            for r in rows {
                let seq = r.get::<_, i64>(0) as u64;
                let event = serde_json::from_str::<SessionEvent>(r.get(1))
                    .map_err(|e| bad_row(&id, format!("event {seq}: invalid event JSON: {e}")));
                let failed = event.is_err();
                if tx.send(event).await.is_err() || failed {
                    return;
                }
                next = seq + 1;
            }
            // Wait for a commit of this session; others' commits are skipped.
            loop {
                match wake_rx.recv().await {
                    Some(payload) if payload == id.as_str() => break,
                    Some(_) => {}
                    None => {
                        let _ = tx
                            .send(Err(PersistenceError::Io {
                                context: format!("following session \"{id}\": connection lost"),
                                source: std::io::Error::other("connection closed"),
                            }))
                            .await;
                        return;
                    }
                }
            }
        }
    });
    Ok(rx)
}
