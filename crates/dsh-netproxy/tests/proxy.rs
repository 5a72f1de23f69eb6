//! The proxy against real local servers: what passes, what is refused, and what the refusal
//! says. Names are mapped to 127.0.0.1 by a lookup table (no DNS, no internet).

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use dsh_netproxy::{DomainPolicy, Lookup, Proxy};
use dsh_testkit::{Origin, bounded};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Every name resolves to loopback, as a hostile DNS answer for a wildcard name would.
fn loopback_lookup() -> Lookup {
    Arc::new(|_| Box::pin(async { Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]) }))
}

fn policy(allowed: &[&str], denied: &[&str]) -> DomainPolicy {
    DomainPolicy::from_lists(allowed.iter().copied(), denied.iter().copied()).unwrap()
}

/// An origin server; each request head it received arrives on the channel.
async fn origin() -> (u16, mpsc::UnboundedReceiver<String>) {
    let origin = Origin::start("hello from origin").await;
    (origin.port, origin.heads)
}

/// Sends `request` to the proxy and reads until it closes.
async fn send(proxy: &Proxy, request: String) -> String {
    let mut conn = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    conn.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

fn get(host: &str, port: u16) -> String {
    format!("GET http://{host}:{port}/path?q=1 HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n")
}

#[tokio::test]
async fn an_allowed_name_reaches_its_server_in_origin_form() {
    let (port, mut heads) = origin().await;
    let proxy = Proxy::start(policy(&["origin.test"], &[]), loopback_lookup()).unwrap();
    let response = bounded(send(&proxy, get("origin.test", port))).await;
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.ends_with("hello from origin"), "{response}");
    let head = bounded(heads.recv()).await.unwrap();
    assert!(head.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(proxy.stats().allowed(), 1);
}

#[tokio::test]
async fn an_unlisted_name_is_refused_with_403_naming_the_host_and_the_key() {
    let (port, mut heads) = origin().await;
    let proxy = Proxy::start(policy(&["origin.test"], &[]), loopback_lookup()).unwrap();
    let response = bounded(send(&proxy, get("exfil.example", port))).await;
    assert!(response.starts_with("HTTP/1.1 403 Forbidden"), "{response}");
    assert!(
        response.contains("x-proxy-error: blocked-by-allowlist"),
        "{response}"
    );
    assert!(
        response
            .contains("blocked exfil.example: exfil.example is not in `[sandbox] allowed_domains`"),
        "{response}"
    );
    assert!(heads.try_recv().is_err(), "the origin was reached");
    assert_eq!(proxy.stats().refused(), 1);
    assert_eq!(proxy.stats().blocked_hosts(), ["exfil.example"]);
}

#[tokio::test]
async fn a_denied_name_is_refused_even_when_a_wildcard_allows_it() {
    let (port, _heads) = origin().await;
    let p = policy(&["*.corp.test", "api.corp.test"], &["api.corp.test"]);
    let proxy = Proxy::start(p, loopback_lookup()).unwrap();
    let response = bounded(send(&proxy, get("API.corp.test", port))).await;
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    assert!(
        response.contains("`[sandbox] denied_domains`"),
        "{response}"
    );
}

#[tokio::test]
async fn a_name_allowed_by_wildcard_that_resolves_to_a_private_address_is_refused() {
    let (port, mut heads) = origin().await;
    let proxy = Proxy::start(policy(&["*.corp.test"], &[]), loopback_lookup()).unwrap();
    let response = bounded(send(&proxy, get("rebind.corp.test", port))).await;
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    assert!(response.contains("resolves to 127.0.0.1"), "{response}");
    assert!(heads.try_recv().is_err(), "the origin was reached");
    // The same address named by an exact entry is the user's explicit choice.
    let proxy = Proxy::start(policy(&["rebind.corp.test"], &[]), loopback_lookup()).unwrap();
    let response = bounded(send(&proxy, get("rebind.corp.test", port))).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

#[tokio::test]
async fn connect_tunnels_to_an_allowed_host_and_refuses_an_unlisted_one() {
    let (port, mut heads) = origin().await;
    let proxy = Proxy::start(policy(&["tunnel.test"], &[]), loopback_lookup()).unwrap();
    // The request through the tunnel is sent with the CONNECT, as eager clients do.
    let request = format!(
        "CONNECT tunnel.test:{port} HTTP/1.1\r\nHost: tunnel.test:{port}\r\n\r\n\
         GET /inside HTTP/1.1\r\nHost: tunnel.test\r\n\r\n"
    );
    let response = bounded(send(&proxy, request)).await;
    assert!(
        response.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
        "{response}"
    );
    let head = bounded(heads.recv()).await.unwrap();
    assert!(head.starts_with("GET /inside HTTP/1.1"), "{head}");
    let refused = format!("CONNECT elsewhere.test:{port} HTTP/1.1\r\n\r\n");
    let response = bounded(send(&proxy, refused)).await;
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    assert!(heads.try_recv().is_err(), "the origin was reached");
}

#[tokio::test]
async fn a_request_that_is_not_proxy_form_gets_400() {
    let proxy = Proxy::start(policy(&["x.test"], &[]), loopback_lookup()).unwrap();
    let response = bounded(send(&proxy, "GET /relative HTTP/1.1\r\n\r\n".into())).await;
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
}
