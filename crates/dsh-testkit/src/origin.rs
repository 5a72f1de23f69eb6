//! A plain HTTP origin server for tests of what sits between a client and a server (dsh's
//! network proxy): every request gets the same `200` and closes; each request head is handed
//! to the test, so it can check what arrived and that nothing did.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// The server: its port on `127.0.0.1` and the request heads it received, in order. It stops
/// with the test's runtime.
pub struct Origin {
    /// The port it listens on.
    pub port: u16,
    /// Each request head (request line and headers, up to the blank line) as it arrived.
    pub heads: mpsc::UnboundedReceiver<String>,
}

impl Origin {
    /// Starts a server answering every request with `body`, on the current tokio runtime.
    ///
    /// Panics when the loopback interface cannot be bound: a test cannot proceed without it.
    pub async fn start(body: &'static str) -> Origin {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        #[allow(clippy::expect_used)]
        let port = listener.local_addr().expect("a bound address").port();
        let (tx, heads) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if conn.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(response.as_bytes()).await;
                    let _ = conn.shutdown().await;
                });
            }
        });
        Origin { port, heads }
    }
}
