//! The proxy: one listener on loopback, served by a thread of its own so it runs whatever
//! runtime (or none) the code that starts it is on, and lives as long as its [`Proxy`].

use std::collections::BTreeSet;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener as StdListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use dsh_tools::is_private_address;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::domain::{Decision, DomainPolicy, normalize};
use crate::refuse::Refusal;

/// The most a request head may take: enough for any real client's headers, small enough that
/// a command cannot make dsh buffer without bound.
const MAX_HEAD: usize = 32 * 1024;
/// How long a client has to send its request head, and the proxy to connect upstream.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The answers of a lookup.
pub type LookupFuture = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// How the proxy resolves names: the system resolver, or (in tests) a table, so the
/// private-address refusal is testable without a DNS server that lies.
pub type Lookup = Arc<dyn Fn(String) -> LookupFuture + Send + Sync>;

/// The system resolver (`getaddrinfo` through tokio).
pub fn system_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    })
}

/// What the proxy decided so far: counts for the session's summary, and the hosts it
/// refused (each once) so they can be reported.
#[derive(Debug, Default)]
pub struct ProxyStats {
    allowed: AtomicU64,
    refused: AtomicU64,
    blocked: Mutex<BTreeSet<String>>,
}

impl ProxyStats {
    /// Requests let through.
    pub fn allowed(&self) -> u64 {
        self.allowed.load(Ordering::Relaxed)
    }

    /// Requests refused.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The hosts refused so far, sorted.
    pub fn blocked_hosts(&self) -> Vec<String> {
        self.blocked
            .lock()
            .map(|b| b.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn refuse(&self, refusal: &Refusal) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut blocked) = self.blocked.lock() {
            blocked.insert(refusal.host().to_owned());
        }
    }
}

struct Shared {
    policy: DomainPolicy,
    lookup: Lookup,
    stats: Arc<ProxyStats>,
}

/// A running proxy on `127.0.0.1`. Dropping it stops the listener (tunnels already open end
/// when either side closes).
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    stats: Arc<ProxyStats>,
    stop: Option<oneshot::Sender<()>>,
}

impl Proxy {
    /// Binds a free loopback port and serves `policy` on a thread of its own.
    pub fn start(policy: DomainPolicy, lookup: Lookup) -> io::Result<Proxy> {
        let listener = StdListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stats = Arc::new(ProxyStats::default());
        let shared = Arc::new(Shared {
            policy,
            lookup,
            stats: stats.clone(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        std::thread::Builder::new()
            .name("dsh-netproxy".into())
            .spawn(move || runtime.block_on(serve(listener, shared, stopped)))?;
        tracing::debug!(port, "network proxy started");
        Ok(Proxy {
            port,
            stats,
            stop: Some(stop),
        })
    }

    /// The port it listens on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, what the proxy variables of a command hold.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What it decided so far.
    pub fn stats(&self) -> &Arc<ProxyStats> {
        &self.stats
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A proxy started the first time it is asked for (the first confined command of a process
/// in allow-list mode), then shared: one per process.
pub struct LazyProxy {
    policy: DomainPolicy,
    lookup: Lookup,
    proxy: OnceLock<Result<Proxy, String>>,
}

impl LazyProxy {
    /// A proxy for `policy`, not started yet.
    pub fn new(policy: DomainPolicy, lookup: Lookup) -> Self {
        Self {
            policy,
            lookup,
            proxy: OnceLock::new(),
        }
    }

    /// The running proxy, started now if it was not (a failure to start is kept: every
    /// later command is refused with the same reason rather than retrying a bind).
    pub fn get(&self) -> Result<&Proxy, String> {
        self.proxy
            .get_or_init(|| {
                Proxy::start(self.policy.clone(), self.lookup.clone())
                    .map_err(|e| format!("the network proxy did not start: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The policy it serves.
    pub fn policy(&self) -> &DomainPolicy {
        &self.policy
    }
}

impl std::fmt::Debug for LazyProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyProxy")
            .field("policy", &self.policy)
            .field("proxy", &self.proxy.get())
            .finish_non_exhaustive()
    }
}

async fn serve(listener: StdListener, shared: Arc<Shared>, mut stopped: oneshot::Receiver<()>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("the network proxy cannot listen: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        if let Err(e) = handle(client, &shared).await {
                            tracing::debug!("network proxy connection ended: {e}");
                        }
                    });
                }
                // Out of descriptors or a reset before accept: the next one may work.
                Err(e) => tracing::debug!("network proxy accept failed: {e}"),
            },
        }
    }
}

/// A parsed request head: where to, and (for plain HTTP) the head to send upstream.
struct Target {
    host: String,
    port: u16,
    /// `None` for `CONNECT` (a tunnel); else the rewritten origin-form head.
    forward: Option<Vec<u8>>,
}

async fn handle(mut client: TcpStream, shared: &Shared) -> io::Result<()> {
    let (head, rest) = match tokio::time::timeout(TIMEOUT, read_head(&mut client)).await {
        Ok(read) => read?,
        Err(_) => return Ok(()),
    };
    let target = match parse_head(&head) {
        Ok(t) => t,
        Err(why) => return answer(&mut client, 400, &why).await,
    };
    let decision = shared.policy.decide(&target.host);
    tracing::debug!(host = %target.host, port = target.port, ?decision, "network proxy request");
    if let Some(refusal) = Refusal::of(&target.host, &decision) {
        return refuse(&mut client, shared, &refusal).await;
    }
    let exact = matches!(decision, Decision::Allowed { exact: true });
    let addrs = match resolve(shared, &target.host, exact).await {
        Ok(a) => a,
        Err(Resolved::Refused(refusal)) => return refuse(&mut client, shared, &refusal).await,
        Err(Resolved::Failed(why)) => return answer(&mut client, 502, &why).await,
    };
    let addrs: Vec<SocketAddr> = addrs
        .into_iter()
        .map(|ip| SocketAddr::new(ip, target.port))
        .collect();
    let mut upstream = match tokio::time::timeout(TIMEOUT, TcpStream::connect(&addrs[..])).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let why = format!("cannot connect to {}:{}: {e}", target.host, target.port);
            return answer(&mut client, 502, &why).await;
        }
        Err(_) => {
            let why = format!("connecting to {}:{} timed out", target.host, target.port);
            return answer(&mut client, 504, &why).await;
        }
    };
    shared.stats.allowed.fetch_add(1, Ordering::Relaxed);
    match &target.forward {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?
        }
        Some(head) => upstream.write_all(head).await?,
    }
    // Bytes the client sent after its head (a body, or a TLS hello sent eagerly).
    upstream.write_all(&rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

enum Resolved {
    Refused(Refusal),
    Failed(String),
}

/// The addresses to connect to, checked once (no second lookup a rebinding DNS server could
/// answer differently): a private one refuses the host unless `exact`.
async fn resolve(shared: &Shared, host: &str, exact: bool) -> Result<Vec<IpAddr>, Resolved> {
    let bare = normalize(host);
    let addrs = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => match (shared.lookup)(bare.clone()).await {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return Err(Resolved::Failed(format!("{host} has no address"))),
            Err(e) => return Err(Resolved::Failed(format!("cannot resolve {host}: {e}"))),
        },
    };
    if !exact && let Some(private) = addrs.iter().find(|ip| is_private_address(**ip)) {
        return Err(Resolved::Refused(Refusal::Private {
            host: host.to_owned(),
            address: *private,
        }));
    }
    Ok(addrs)
}

async fn refuse(client: &mut TcpStream, shared: &Shared, refusal: &Refusal) -> io::Result<()> {
    tracing::debug!("network proxy refused: {refusal}");
    shared.stats.refuse(refusal);
    client.write_all(&refusal.response()).await?;
    client.shutdown().await
}

async fn answer(client: &mut TcpStream, status: u16, why: &str) -> io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        502 => "Bad Gateway",
        _ => "Gateway Timeout",
    };
    let body = format!("[sandbox] network proxy: {why}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

/// Reads up to the end of the request head; returns the head and whatever followed it.
async fn read_head(client: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the request head ended",
            ));
        }
        let searched_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf[searched_from..]
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
        {
            let end = searched_from + end + 4;
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
    }
}

/// Headers that speak to the proxy, not the origin, and `connection` (replaced by `close`:
/// one request per upstream connection, so a kept-alive client cannot send its next request,
/// for another host, down a connection opened for this one).
const HOP_BY_HOP: &[&str] = &[
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

fn parse_head(head: &[u8]) -> Result<Target, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("incomplete request head".into()),
        Err(e) => return Err(format!("malformed request: {e}")),
    }
    let method = request.method.unwrap_or_default();
    let path = request.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(path, None)?;
        return Ok(Target {
            host,
            port,
            forward: None,
        });
    }
    let Some(rest) = strip_prefix_ignore_case(path, "http://") else {
        return Err(format!(
            "expected an absolute http:// URL or CONNECT host:port, got {path:?} (https goes \
             through CONNECT)"
        ));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, origin) = rest.split_at(end);
    let (host, port) = split_authority(authority, Some(80))?;
    let origin = if origin.starts_with('/') {
        origin.to_owned()
    } else {
        format!("/{origin}")
    };
    let mut out = format!("{method} {origin} HTTP/1.1\r\n").into_bytes();
    for header in request.headers.iter() {
        if HOP_BY_HOP
            .iter()
            .any(|h| header.name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        out.extend_from_slice(header.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(header.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
    Ok(Target {
        host,
        port,
        forward: Some(out),
    })
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host:port`, `[v6]:port`, or (with a default port) a host alone; userinfo is dropped.
fn split_authority(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let bad = || format!("bad host:port {authority:?}");
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(bad)?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().map_err(|_| bad())?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad()),
    };
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_form_is_rewritten_to_origin_form_with_connection_close() {
        let head = b"GET http://Example.com:8080/a?b HTTP/1.1\r\nHost: example.com:8080\r\n\
                     Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\n";
        let t = parse_head(head).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("Example.com", 8080));
        let out = String::from_utf8(t.forward.unwrap()).unwrap();
        assert_eq!(
            out,
            "GET /a?b HTTP/1.1\r\nHost: example.com:8080\r\nconnection: close\r\n\r\n"
        );
    }

    #[test]
    fn authorities_split_with_v6_userinfo_and_defaults() {
        assert_eq!(
            split_authority("[::1]:443", None).unwrap(),
            ("::1".into(), 443)
        );
        assert_eq!(
            split_authority("u:p@h.io", Some(80)).unwrap(),
            ("h.io".into(), 80)
        );
        assert!(split_authority("h.io", None).is_err());
        assert!(split_authority("h.io:0", None).is_err());
        assert!(parse_head(b"GET /x HTTP/1.1\r\n\r\n").is_err());
    }
}
