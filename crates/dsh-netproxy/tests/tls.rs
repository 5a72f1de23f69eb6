//! `CONNECT` tunnels TLS end to end: a real TLS origin (rustls, a self-signed certificate for
//! `tls.test` in `fixtures/`) reached by curl through the proxy, the certificate checked by
//! curl against the name it asked for. The proxy sees only the `CONNECT` line, never the
//! bytes inside.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use dsh_netproxy::{DomainPolicy, Lookup, Proxy};
use dsh_testkit::bounded;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

const CERT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls.test.pem");
const KEY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls.test.key");

/// A TLS origin on loopback answering every request with `hello over tls`; each plaintext
/// request head it decrypted arrives on the channel.
async fn tls_origin() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let certs = vec![CertificateDer::from_pem_file(CERT).unwrap()];
    let key = PrivateKeyDer::from_pem_file(KEY).unwrap();
    let config = ServerConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, heads) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(conn).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                let body = "hello over tls";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, heads)
}

fn loopback_lookup() -> Lookup {
    Arc::new(|_| Box::pin(async { Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]) }))
}

async fn curl(proxy: &Proxy, url: &str) -> std::process::Output {
    bounded(
        tokio::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "20",
                "--cacert",
                CERT,
                "-x",
                &proxy.url(),
                url,
            ])
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn tls_to_an_allowed_host_is_tunnelled_and_verified_end_to_end() {
    let (port, mut heads) = tls_origin().await;
    let policy = DomainPolicy::from_lists(["tls.test"], []).unwrap();
    let proxy = Proxy::start(policy, loopback_lookup()).unwrap();
    let out = curl(&proxy, &format!("https://tls.test:{port}/secret?q=1")).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "hello over tls",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The request line travelled inside TLS: the origin read it, the proxy never parsed it.
    let head = bounded(heads.recv()).await.unwrap();
    assert!(head.starts_with("GET /secret?q=1 HTTP/1.1"), "{head}");
    assert_eq!(proxy.stats().allowed(), 1);
}

#[tokio::test]
async fn tls_to_an_unlisted_host_never_reaches_the_origin() {
    let (port, mut heads) = tls_origin().await;
    let policy = DomainPolicy::from_lists(["tls.test"], []).unwrap();
    let proxy = Proxy::start(policy, loopback_lookup()).unwrap();
    // The same origin under a name the list does not hold: refused at CONNECT, before any TLS.
    let out = curl(&proxy, &format!("https://other.test:{port}/")).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("403"), "{stderr}");
    assert!(heads.try_recv().is_err(), "the origin was reached");
    assert_eq!(proxy.stats().blocked_hosts(), ["other.test"]);
}
