//! The network by allow-list end to end: a confined `bash` whose only TCP port is dsh's proxy
//! (dsh-netproxy, started here as the harness starts it), against a real local server.

#![allow(clippy::unwrap_used)]

#[path = "../../dsh-shell/tests/common/mod.rs"]
mod common;
mod guarded;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use common::config;
use dsh_guard::{GuardSupervision, NetworkProxy, SandboxMode};
use dsh_netproxy::{DomainPolicy, Lookup, Proxy};
use dsh_shell::{LocalShellExecutor, ShellExecutor};
use dsh_testkit::Origin;
use guarded::{Dirs, User, program, run};

/// A proxy already running (the harness's is started by the first command).
#[derive(Debug)]
struct Running(u16);

impl NetworkProxy for Running {
    fn port(&self) -> Result<u16, String> {
        Ok(self.0)
    }
}

/// An origin server on loopback answering every request with the same body.
async fn origin() -> u16 {
    Origin::start("hello from origin\n").await.port
}

/// Every name is this machine (the test has no DNS); `origin.test` is allowed by exact name,
/// which is what lets it reach a loopback address.
fn start_proxy() -> Proxy {
    let lookup: Lookup =
        Arc::new(|_| Box::pin(async { Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]) }));
    let policy = DomainPolicy::from_lists(["origin.test"], ["denied.test"]).unwrap();
    Proxy::start(policy, lookup).unwrap()
}

fn executor(dirs: &Dirs, proxy: &Proxy, namespaces: bool) -> LocalShellExecutor {
    let mut policy = dirs.policy(SandboxMode::WorkspaceWrite);
    policy.namespaces = namespaces;
    let mut config = config();
    config.default_workdir = Some(policy.workspace.clone());
    let supervision = GuardSupervision::new(policy, program(User::Me))
        .with_network_proxy(Arc::new(Running(proxy.port())));
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
