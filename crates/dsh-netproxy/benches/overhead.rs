//! What the proxy costs a download: a 10 MB response from a local origin, fetched directly
//! and through the proxy (plain HTTP, and a CONNECT tunnel), median of 30 rounds each.
//! Prints figures; asserts nothing (timings belong in the design notes, not in tests).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_netproxy::{DomainPolicy, Lookup, Proxy};
use dsh_testkit::Origin;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SIZE: usize = 10 * 1024 * 1024;
const ROUNDS: usize = 30;

async fn fetch(port: u16, request: &str) -> usize {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    loop {
        let n = conn.read(&mut buf).await.unwrap();
        if n == 0 {
            return total;
        }
        total += n;
    }
}

async fn median(port: u16, request: &str) -> Duration {
    let mut times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let got = fetch(port, request).await;
        times.push(start.elapsed());
        assert!(got > SIZE, "short read: {got}");
    }
    times.sort();
    times[ROUNDS / 2]
}

#[tokio::main]
async fn main() {
    let body: &'static str = Box::leak("x".repeat(SIZE).into_boxed_str());
    let origin = Origin::start(body).await;
    let lookup: Lookup =
        Arc::new(|_| Box::pin(async { Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]) }));
    let policy = DomainPolicy::from_lists(["origin.test"], []).unwrap();
    let proxy = Proxy::start(policy, lookup).unwrap();
    let port = origin.port;
    let direct = median(port, "GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n").await;
    let plain = median(
        proxy.port(),
        &format!("GET http://origin.test:{port}/ HTTP/1.1\r\nHost: origin.test\r\n\r\n"),
    )
    .await;
    let tunnel = median(
        proxy.port(),
        &format!(
            "CONNECT origin.test:{port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: origin.test\r\n\r\n"
        ),
    )
    .await;
    let pct = |t: Duration| (t.as_secs_f64() / direct.as_secs_f64() - 1.0) * 100.0;
    println!("10 MB download, median of {ROUNDS}:");
    println!("  direct          {direct:>10.2?}");
    println!("  proxy (http)    {plain:>10.2?}  {:+.1}%", pct(plain));
    println!("  proxy (CONNECT) {tunnel:>10.2?}  {:+.1}%", pct(tunnel));
}
