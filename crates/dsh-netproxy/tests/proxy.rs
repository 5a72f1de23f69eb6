//! The proxy against real local servers: what passes, what is refused, and what the refusal
//! says. Names are mapped to 127.0.0.1 by a lookup table (no DNS, no internet).

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use dsh_netproxy::{
    Answer, AnswerFuture, Asker, Asking, DomainPolicy, Lookup, Owner, Proxy, Question,
};
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

/// A request head for `host` carrying `proxy`'s credential for `owner`, as a client sends
/// it when its proxy URL is `Proxy::url_for(owner)`.
fn get_as(proxy: &Proxy, owner: &Owner, host: &str, port: u16) -> String {
    use base64::Engine as _;
    let url = proxy.url_for(owner);
    let credentials = url
        .strip_prefix("http://")
        .and_then(|u| u.split_once('@'))
        .unwrap()
        .0;
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    format!(
        "GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\n\
         Proxy-Authorization: Basic {encoded}\r\n\r\n"
    )
}

/// The lines reported to `owner`'s call.
fn reported(proxy: &Proxy, owner: &Owner) -> Vec<String> {
    proxy
        .take_blocked(owner)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn owner(session: &str, call: &str) -> Owner {
    Owner {
        session: Some(session.into()),
        call: Some(call.into()),
    }
}

#[tokio::test]
async fn a_refusal_is_reported_to_the_call_whose_credential_made_it_once() {
    let (port, _heads) = origin().await;
    let proxy = Proxy::start(policy(&["origin.test"], &[]), loopback_lookup()).unwrap();
    let (mine, other) = (owner("s1", "call_1"), owner("s1", "call_2"));
    for _ in 0..2 {
        let response = bounded(send(&proxy, get_as(&proxy, &mine, "exfil.test", port))).await;
        assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    }
    // Without a credential: decided the same, reported to nobody.
    let response = bounded(send(&proxy, get("anon.test", port))).await;
    assert!(response.starts_with("HTTP/1.1 403"), "{response}");
    assert_eq!(
        reported(&proxy, &mine),
        [format!(
            "[sandbox] network: blocked exfil.test:{port} (not in `[sandbox] allowed_domains`)"
        )]
    );
    assert!(proxy.take_blocked(&mine).is_empty(), "reported twice");
    assert!(
        proxy.take_blocked(&other).is_empty(),
        "reported to another call"
    );
    assert_eq!(proxy.stats().refused(), 3);
}

#[tokio::test]
async fn curl_sends_the_credential_of_a_proxy_url_so_its_refusal_is_attributed() {
    let (port, _heads) = origin().await;
    let proxy = Proxy::start(policy(&["origin.test"], &[]), loopback_lookup()).unwrap();
    let mine = owner("s1", "call_curl");
    let url = proxy.url_for(&mine);
    let out = bounded(
        tokio::process::Command::new("curl")
            .args([
                "-sS",
                "-p",
                "-x",
                &url,
                &format!("http://exfil.test:{port}/"),
            ])
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output(),
    )
    .await
    .unwrap();
    assert!(!out.status.success());
    let blocked = proxy.take_blocked(&mine);
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0].host(), "exfil.test");
}

/// Answers every question with `answer`, counting them; `gate` holds the answers until the
/// test opens it (so concurrent requests meet one open question).
#[derive(Debug)]
struct Scripted {
    answer: Answer,
    asked: Arc<std::sync::Mutex<Vec<Question>>>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl Asker for Scripted {
    fn ask(&self, question: Question) -> AnswerFuture {
        self.asked.lock().unwrap().push(question);
        let (answer, gate) = (self.answer.clone(), self.gate.clone());
        Box::pin(async move {
            let _open = gate.acquire().await;
            answer
        })
    }
}

fn asking(
    allowed: &[&str],
    denied: &[&str],
    answer: Answer,
) -> (Proxy, Arc<std::sync::Mutex<Vec<Question>>>) {
    let asked = Arc::default();
    let asker = Scripted {
        answer,
        asked: Arc::clone(&asked),
        gate: Arc::new(tokio::sync::Semaphore::new(1)),
    };
    let asking = Asking {
        asker: Arc::new(asker),
        timeout: Duration::from_secs(5),
    };
    let proxy = Proxy::start_asking(policy(allowed, denied), loopback_lookup(), Some(asking));
    (proxy.unwrap(), asked)
}

#[tokio::test]
async fn a_host_allowed_for_the_session_reaches_its_server_and_is_not_asked_about_again() {
    let (port, mut heads) = origin().await;
    let (proxy, asked) = asking(&[], &[], Answer::Session);
    // Named by an exact approval, the host may reach this machine (the origin).
    let first = bounded(send(
        &proxy,
        get_as(&proxy, &owner("s1", "c1"), "new.test", port),
    ))
    .await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    bounded(heads.recv()).await.unwrap();
    let later = bounded(send(
        &proxy,
        get_as(&proxy, &owner("s1", "c2"), "new.test", port),
    ))
    .await;
    assert!(later.starts_with("HTTP/1.1 200"), "{later}");
    assert!(proxy.session_allows("s1", "NEW.test"));
    // Another session's person was not asked: it is asked itself.
    let other = bounded(send(
        &proxy,
        get_as(&proxy, &owner("s2", "c3"), "new.test", port),
    ))
    .await;
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
    let asked: Vec<String> = asked
        .lock()
        .unwrap()
        .iter()
        .map(|q| q.session.clone())
        .collect();
    assert_eq!(asked, ["s1", "s2"]);
    let question = proxy.take_blocked(&owner("s1", "c1"));
    assert!(
        question.is_empty(),
        "an allowed host was reported: {question:?}"
    );
}

#[tokio::test]
async fn allow_once_covers_the_call_that_asked_and_no_other() {
    let (port, _heads) = origin().await;
    let (proxy, asked) = asking(&[], &[], Answer::Once);
    for call in ["c1", "c1", "c2"] {
        let r = bounded(send(
            &proxy,
            get_as(&proxy, &owner("s1", call), "once.test", port),
        ))
        .await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    let calls: Vec<Option<String>> = asked
        .lock()
        .unwrap()
        .iter()
        .map(|q| q.call.clone())
        .collect();
    assert_eq!(calls, [Some("c1".to_owned()), Some("c2".to_owned())]);
    assert!(!proxy.session_allows("s1", "once.test"));
}

#[tokio::test]
async fn a_refused_question_blocks_with_the_answer_in_the_report_and_is_not_asked_again() {
    let (port, mut heads) = origin().await;
    let (proxy, asked) = asking(&[], &[], Answer::Deny("the user refused it".into()));
    let mine = owner("s1", "c1");
    for _ in 0..2 {
        let r = bounded(send(&proxy, get_as(&proxy, &mine, "no.test", port))).await;
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        assert!(r.contains("; the user refused it"), "{r}");
    }
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert!(heads.try_recv().is_err(), "the origin was reached");
    assert_eq!(
        reported(&proxy, &mine),
        [format!(
            "[sandbox] network: blocked no.test:{port} (not in `[sandbox] allowed_domains`; \
             the user refused it)"
        )]
    );
}

#[tokio::test]
async fn a_denied_host_and_a_request_without_credential_are_never_asked_about() {
    let (port, _heads) = origin().await;
    let (proxy, asked) = asking(&[], &["denied.test"], Answer::Session);
    let r = bounded(send(
        &proxy,
        get_as(&proxy, &owner("s1", "c1"), "denied.test", port),
    ))
    .await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    let r = bounded(send(&proxy, get("anon.test", port))).await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn concurrent_requests_for_one_host_share_one_question() {
    let (port, _heads) = origin().await;
    let asked: Arc<std::sync::Mutex<Vec<Question>>> = Arc::default();
    // Closed until every request waits on the question.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let asker = Scripted {
        answer: Answer::Once,
        asked: Arc::clone(&asked),
        gate: gate.clone(),
    };
    let asking = Asking {
        asker: Arc::new(asker),
        timeout: Duration::from_secs(5),
    };
    let proxy =
        Arc::new(Proxy::start_asking(policy(&[], &[]), loopback_lookup(), Some(asking)).unwrap());
    // Four calls of one session (a build's parallel downloads): one card.
    let requests: Vec<_> = (0..4)
        .map(|i| {
            let mine = owner("s1", &format!("c{i}"));
            let (proxy, request) = (proxy.clone(), get_as(&proxy, &mine, "many.test", port));
            tokio::spawn(async move { send(&proxy, request).await })
        })
        .collect();
    bounded(async {
        while proxy.stats().waiting() < 4 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    gate.add_permits(1);
    for request in requests {
        let r = bounded(request).await.unwrap();
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    assert_eq!(asked.lock().unwrap().len(), 1);
}
