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

use crate::ask::{Answer, Asker, InFlight, Question};
use crate::domain::{Decision, DomainPolicy, normalize};
use crate::refuse::{Blocked, Refusal};
use crate::ticket::{Owner, Ticket, Tickets};

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
    waiting: AtomicU64,
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

    /// Requests held now while a person is asked about their host.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
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
    tickets: Arc<Tickets>,
    asker: Option<Arc<dyn Asker>>,
    ask_timeout: Duration,
    in_flight: Arc<InFlight>,
}

/// How long a person has to answer a question about a blocked host unless told otherwise:
/// long enough to read the card, short enough that the command's own timeouts (cargo's is
/// 30 s per attempt, and it retries) have not all run out.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(60);

/// Who the proxy asks about a blocked host, and how long it waits.
#[derive(Debug, Clone)]
pub struct Asking {
    /// Asks the person (the harness: the front end's approver under `ask`).
    pub asker: Arc<dyn Asker>,
    /// How long each question may take.
    pub timeout: Duration,
}

/// A running proxy on `127.0.0.1`. Dropping it stops the listener (tunnels already open end
/// when either side closes).
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("port", &self.port)
            .field("stats", &self.shared.stats)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Binds a free loopback port and serves `policy` on a thread of its own; nobody is
    /// asked about a blocked host.
    pub fn start(policy: DomainPolicy, lookup: Lookup) -> io::Result<Proxy> {
        Self::start_asking(policy, lookup, None)
    }

    /// [`start`](Self::start), asking `asking`'s asker about blocked hosts of requests that
    /// carry a session's credential (see [`Proxy::url_for`]).
    pub fn start_asking(
        policy: DomainPolicy,
        lookup: Lookup,
        asking: Option<Asking>,
    ) -> io::Result<Proxy> {
        let listener = StdListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (asker, ask_timeout) = match asking {
            Some(a) => (Some(a.asker), a.timeout),
            None => (None, DEFAULT_ASK_TIMEOUT),
        };
        let shared = Arc::new(Shared {
            policy,
            lookup,
            stats: Arc::default(),
            tickets: Arc::default(),
            asker,
            ask_timeout,
            in_flight: Arc::default(),
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel();
        let served = shared.clone();
        std::thread::Builder::new()
            .name("dsh-netproxy".into())
            .spawn(move || runtime.block_on(serve(listener, served, stopped)))?;
        tracing::debug!(port, "network proxy started");
        Ok(Proxy {
            port,
            shared,
            stop: Some(stop),
        })
    }

    /// The port it listens on (on `127.0.0.1`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`: the proxy without a credential (requests through it are
    /// decided by the lists alone, and reported to nobody).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The proxy URL for the commands of `owner`: `http://dsh:TOKEN@127.0.0.1:PORT`, whose
    /// token clients send back as `Proxy-Authorization: Basic` (curl, cargo, pip, npm and Go
    /// all do for a URL with credentials), so what the proxy refuses is reported to that
    /// call and its person can be asked.
    pub fn url_for(&self, owner: &Owner) -> String {
        let token = self.shared.tickets.token(owner);
        format!("http://dsh:{token}@127.0.0.1:{}", self.port)
    }

    /// What was refused for `owner` since last asked (each host and port once), to report
    /// in the result of the call that ran the command.
    pub fn take_blocked(&self, owner: &Owner) -> Vec<Blocked> {
        self.shared.tickets.take_blocked(owner)
    }

    /// Whether `session`'s person allowed `host` for the session.
    pub fn session_allows(&self, session: &str, host: &str) -> bool {
        self.shared
            .tickets
            .session_allows(session, &normalize(host))
    }

    /// What it decided so far.
    pub fn stats(&self) -> &Arc<ProxyStats> {
        &self.shared.stats
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
    asking: Option<Asking>,
    proxy: OnceLock<Result<Proxy, String>>,
}

impl LazyProxy {
    /// A proxy for `policy`, not started yet.
    pub fn new(policy: DomainPolicy, lookup: Lookup) -> Self {
        Self {
            policy,
            lookup,
            asking: None,
            proxy: OnceLock::new(),
        }
    }

    /// The same proxy, asking about blocked hosts (see [`Proxy::start_asking`]).
    #[must_use]
    pub fn asking(mut self, asking: Asking) -> Self {
        self.asking = Some(asking);
        self
    }

    /// The running proxy, started now if it was not (a failure to start is kept: every
    /// later command is refused with the same reason rather than retrying a bind).
    pub fn get(&self) -> Result<&Proxy, String> {
        self.proxy
            .get_or_init(|| {
                Proxy::start_asking(
                    self.policy.clone(),
                    self.lookup.clone(),
                    self.asking.clone(),
                )
                .map_err(|e| format!("the network proxy did not start: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The proxy if it runs (reports need no proxy started for them).
    pub fn running(&self) -> Option<&Proxy> {
        self.proxy.get().and_then(|p| p.as_ref().ok())
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
    /// The token of `Proxy-Authorization`, when the client sent one of ours.
    token: Option<String>,
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
    let ticket = target
        .token
        .as_deref()
        .and_then(|t| shared.tickets.by_token(t));
    let decision = shared.policy.decide(&target.host);
    tracing::debug!(host = %target.host, port = target.port, ?decision, "network proxy request");
    let mut exact = matches!(decision, Decision::Allowed { exact: true });
    if let Some(refusal) = Refusal::of(&target.host, &decision) {
        match permit(shared, ticket.as_ref(), target.port, refusal).await {
            // The person allowed the host by name: as an exact entry would.
            Ok(()) => exact = true,
            Err(blocked) => return refuse(&mut client, shared, ticket.as_deref(), blocked).await,
        }
    }
    let addrs = match resolve(shared, &target.host).await {
        Ok(a) => a,
        Err(why) => return answer(&mut client, 502, &why).await,
    };
    // Checked once, on the addresses connected to (no second lookup a rebinding DNS server
    // could answer differently): a private one refuses the host unless named exactly.
    if !exact && let Some(private) = addrs.iter().find(|ip| is_private_address(**ip)) {
        let refusal = Refusal::Private {
            host: target.host.clone(),
            address: *private,
        };
        if let Err(blocked) = permit(shared, ticket.as_ref(), target.port, refusal).await {
            return refuse(&mut client, shared, ticket.as_deref(), blocked).await;
        }
    }
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

/// Whether a request the lists refuse may go on: the person of the request's session let
/// its host through before (for this call or the session), or says so now when asked.
/// Hosts the user denied by name are never asked about, nor requests without a session's
/// credential (there is nobody to ask).
async fn permit(
    shared: &Shared,
    ticket: Option<&Arc<Ticket>>,
    port: u16,
    refusal: Refusal,
) -> Result<(), Blocked> {
    let host = normalize(refusal.host());
    let blocked = |refusal: Refusal, note: Option<String>| Blocked {
        port,
        refusal,
        note,
    };
    let Some(ticket) = ticket.filter(|_| refusal.askable()) else {
        return Err(blocked(refusal, None));
    };
    let session = ticket.owner.session.clone();
    if ticket.allowed_once(&host)
        || session
            .as_deref()
            .is_some_and(|s| shared.tickets.session_allows(s, &host))
    {
        return Ok(());
    }
    if let Some(note) = ticket.refused(&host) {
        return Err(blocked(refusal, Some(note)));
    }
    let (Some(asker), Some(session)) = (&shared.asker, session) else {
        return Err(blocked(refusal, None));
    };
    let question = Question {
        session: session.clone(),
        call: ticket.owner.call.clone(),
        port,
        refusal: refusal.clone(),
        timeout: shared.ask_timeout,
    };
    let record = {
        let ticket = ticket.clone();
        let tickets = shared.tickets.clone();
        let host = host.clone();
        move |answer: &Answer| match answer {
            Answer::Once => ticket.allow_once(&host),
            Answer::Session => tickets.allow_for_session(&session, &host),
            Answer::Deny(note) => ticket.refuse(&host, note),
        }
    };
    shared.stats.waiting.fetch_add(1, Ordering::Relaxed);
    let answer = shared.in_flight.answer(asker, question, record).await;
    shared.stats.waiting.fetch_sub(1, Ordering::Relaxed);
    match answer {
        Answer::Once | Answer::Session => {
            tracing::debug!(%host, "network proxy: the person allowed a blocked host");
            Ok(())
        }
        Answer::Deny(note) => Err(blocked(refusal, Some(note).filter(|n| !n.is_empty()))),
    }
}

/// The addresses of `host` (an IP literal is its own).
async fn resolve(shared: &Shared, host: &str) -> Result<Vec<IpAddr>, String> {
    let bare = normalize(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    match (shared.lookup)(bare).await {
        Ok(a) if !a.is_empty() => Ok(a),
        Ok(_) => Err(format!("{host} has no address")),
        Err(e) => Err(format!("cannot resolve {host}: {e}")),
    }
}

/// Refuses the request: counted, kept for its owner's report (before the answer is written,
/// so a command that exits on reading it finds its report complete), answered `403`.
async fn refuse(
    client: &mut TcpStream,
    shared: &Shared,
    ticket: Option<&Ticket>,
    blocked: Blocked,
) -> io::Result<()> {
    tracing::debug!("network proxy refused: {blocked}");
    shared.stats.refuse(&blocked.refusal);
    let response = blocked.refusal.response(blocked.note.as_deref());
    if let Some(ticket) = ticket {
        ticket.record(blocked);
    }
    client.write_all(&response).await?;
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
            token: token_of(request.headers),
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
        token: token_of(request.headers),
    })
}

/// The password of a `Proxy-Authorization: Basic` header (our URLs put the token there; the
/// user name is always `dsh`).
fn token_of(headers: &[httparse::Header<'_>]) -> Option<String> {
    use base64::Engine as _;
    let value = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("proxy-authorization"))?
        .value;
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let credentials = String::from_utf8(decoded).ok()?;
    let (_, token) = credentials.split_once(':')?;
    Some(token.to_owned())
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
