//! `/acp`: one WebSocket is one ACP client connection, one text message one JSON-RPC frame.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt as _, StreamExt as _};

use crate::hub::Hub;

/// The read buffer of a connection. tungstenite's default (128 KiB) is allocated per
/// connection up front; ACP frames are small, and the buffer grows for a large one.
const READ_BUFFER: usize = 16 << 10;

/// Accepts the upgrade (the door has checked Host, Origin and the token already).
pub(crate) async fn upgrade(State(hub): State<Arc<Hub>>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(dsh_acp::MAX_FRAME_BYTES)
        .max_frame_size(dsh_acp::MAX_FRAME_BYTES)
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| serve(socket, hub))
}

/// Relays frames between the socket and the hub until either side ends.
async fn serve(socket: WebSocket, hub: Arc<Hub>) {
    let Some((client, mut outgoing)) = hub.connect() else {
        // The server is stopping.
        return;
    };
    tracing::debug!(client, "ACP WebSocket connected");
    let (mut tx, mut rx) = socket.split();
    let writer = async {
        while let Some(text) = outgoing.recv().await {
            if tx
                .send(Message::Text(Utf8Bytes::from(&*text)))
                .await
                .is_err()
            {
                return;
            }
        }
        // The hub let go of the connection: the server is stopping.
        let _ = tx.close().await;
    };
    let reader = async {
        while let Some(Ok(message)) = rx.next().await {
            match message {
                Message::Text(text) => hub.receive(client, text.as_str()),
                Message::Binary(bytes) => hub.receive(client, &String::from_utf8_lossy(&bytes)),
                Message::Close(_) => return,
                Message::Ping(_) | Message::Pong(_) => {}
            }
        }
    };
    tokio::select! {
        () = writer => {}
        () = reader => {}
    }
    hub.disconnect(client);
    tracing::debug!(client, "ACP WebSocket closed");
}
