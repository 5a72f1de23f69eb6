//! The network by allow-list end to end: a confined `bash` whose only TCP port is dsh's proxy
//! (dsh-netproxy, started here as the harness starts it), against a real local server.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-shell/tests/common/mod.rs"]
mod common;
mod guarded;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use common::config;
use dsh_guard::{
    BlockedHost, GuardSupervision, NetworkProxy, ProxyEndpoint, ProxyOwner, SandboxMode,
};
use dsh_netproxy::{DomainPolicy, Lookup, Owner, Proxy};
use dsh_shell::{LocalShellExecutor, ShellExecutor};
use dsh_testkit::Origin;
use guarded::{Dirs, User, program, run};

/// A proxy already running (the harness's is started by the first command).
#[derive(Debug)]
struct Running(Arc<Proxy>);

fn owner_of(session: Option<&str>, call: Option<&str>) -> Owner {
    Owner {
        session: session.map(str::to_owned),
        call: call.map(str::to_owned),
    }
}

impl NetworkProxy for Running {
    fn enlist(&self, owner: ProxyOwner<'_>) -> Result<ProxyEndpoint, String> {
        Ok(ProxyEndpoint {
            port: self.0.port(),
            url: self.0.url_for(&owner_of(owner.session, owner.call)),
        })
    }

    fn take_blocked(&self, session: &str, call: &str) -> Vec<BlockedHost> {
        self.0
            .take_blocked(&owner_of(Some(session), Some(call)))
            .into_iter()
            .map(|b| BlockedHost {
                host: b.host().to_owned(),
                port: b.port,
                line: b.to_string(),
            })
            .collect()
    }
}

/// An origin server on loopback answering every request with the same body.
async fn origin() -> u16 {
    Origin::start("hello from origin\n").await.port
}

/// Every name is this machine (the test has no DNS); `origin.test` is allowed by exact name,
/// which is what lets it reach a loopback address.
fn start_proxy() -> Arc<Proxy> {
    let lookup: Lookup =
        Arc::new(|_| Box::pin(async { Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]) }));
    let policy = DomainPolicy::from_lists(["origin.test"], ["denied.test"]).unwrap();
    Arc::new(Proxy::start(policy, lookup).unwrap())
}

fn executor(dirs: &Dirs, proxy: &Arc<Proxy>, namespaces: bool) -> LocalShellExecutor {
    let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
    policy.namespaces = namespaces;
    let mut config = config();
    config.default_workdir = Some(policy.workspace.clone());
    let supervision = GuardSupervision::new(policy, program(User::Me))
        .with_network_proxy(Arc::new(Running(proxy.clone())));
    LocalShellExecutor::new(config)
        .unwrap()
        .with_supervision(Arc::new(supervision))
}

#[tokio::test]
async fn a_confined_command_reaches_an_allowed_name_only_through_the_proxy() {
    let port = origin().await;
    let proxy = start_proxy();
    let dirs = Dirs::new();
    for namespaces in [true, false] {
        let exec = executor(&dirs, &proxy, namespaces);
        let script = format!(
            "(exec 3<>/dev/tcp/127.0.0.1/{port} && echo direct: connected) 2>&1 | sed 's/^.*: /direct: /'
             curl -sS http://origin.test:{port}/ 2>&1
             curl -sS -p http://origin.test:{port}/tunnel 2>&1
             curl -sS http://exfil.test:{port}/ 2>&1
             curl -sS http://denied.test:{port}/ 2>&1
             env -u http_proxy -u HTTP_PROXY -u ALL_PROXY -u all_proxy curl -sS --max-time 5 http://127.0.0.1:{port}/ >/dev/null 2>&1 || echo around: refused
             (exec 4<>/dev/udp/127.0.0.1/53 && echo udp: opened) 2>&1 | sed 's/^.*: /udp: /'"
        );
        let out = run(&exec, &script).await;
        let text = &out.stdout.text;
        let what = format!("namespaces {namespaces}: {text}\n{}", out.stderr.text);
        assert!(text.contains("direct: Permission denied"), "{what}");
        assert_eq!(
            text.matches("hello from origin").count(),
            2,
            "plain and CONNECT: {what}"
        );
        assert!(
            text.contains("[sandbox] network: blocked exfil.test: exfil.test is not in `[sandbox] allowed_domains`"),
            "{what}"
        );
        assert!(text.contains("blocked denied.test"), "{what}");
        assert!(text.contains("around: refused"), "{what}");
        assert!(text.contains("udp: Operation not permitted"), "{what}");
        exec.dispose().await;
    }
    assert!(
        proxy
            .stats()
            .blocked_hosts()
            .contains(&"exfil.test".to_owned())
    );
}

#[tokio::test]
async fn without_a_proxy_the_same_direct_connect_succeeds() {
    // The control for the test above: the refusal is the allow-list's, not the machine's.
    let port = origin().await;
    let dirs = Dirs::new();
    let exec = guarded::guarded(dirs.policy(SandboxMode::WorkspaceWrite));
    let out = run(
        &exec,
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
    )
    .await;
    assert_eq!(out.stdout.text, "connected\n", "{}", out.stderr.text);
    exec.dispose().await;
}

#[tokio::test]
async fn what_the_proxy_refused_a_call_s_commands_is_kept_for_that_call_alone() {
    let port = origin().await;
    let proxy = start_proxy();
    let dirs = Dirs::new();
    let exec = executor(&dirs, &proxy, true);
    let running = Running(proxy.clone());
    // Through CONNECT curl prints no body: the report is the only place the host is named.
    let script = format!(
        "curl -sS -p http://exfil.test:{port}/ 2>&1
         curl -sS http://denied.test:{port}/ >/dev/null 2>&1
         curl -sS http://origin.test:{port}/"
    );
    let mut request = dsh_shell::ShellExecRequest::new(script);
    request.session = Some("s1".into());
    request.env = vec![(dsh_guard::CALL_ID_VARIABLE.into(), "call_7".into())];
    let spec = exec.resolve(request).unwrap();
    let out = dsh_testkit::bounded(exec.run(spec)).await.unwrap();
    assert!(
        out.stdout.text.contains("hello from origin"),
        "{}",
        out.stdout.text
    );
    let lines: Vec<String> = running
        .take_blocked("s1", "call_7")
        .into_iter()
        .map(|b| b.line)
        .collect();
    assert_eq!(
        lines,
        [
            format!(
                "[sandbox] network: blocked exfil.test:{port} (not in `[sandbox] allowed_domains`)"
            ),
            format!(
                "[sandbox] network: blocked denied.test:{port} (denied by `[sandbox] \
                 denied_domains` (entry \"denied.test\"))"
            ),
        ]
    );
    assert!(
        running.take_blocked("s1", "call_7").is_empty(),
        "reported twice"
    );
    assert!(running.take_blocked("s1", "call_8").is_empty());
    exec.dispose().await;
}
