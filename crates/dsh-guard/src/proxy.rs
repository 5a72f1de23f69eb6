//! The network by allow-list, as the guard sees it: a proxy somewhere (dsh-netproxy, wired
//! by the harness) whose port is the only one a confined command may connect to, the
//! variables that point programs at it, what it refused for a call, and the lists as tools
//! that reach hosts themselves (`web_fetch`) meet them.

use std::ffi::OsString;
use std::sync::Arc;

/// The variable the bash tool sets to its call's id: the supervision reads it to tell the
/// proxy which call a command's requests belong to.
pub const CALL_ID_VARIABLE: &str = "DSH_CALL_ID";

/// The session and tool call a confined command runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyOwner<'a> {
    /// The calling session (agent) id, when known.
    pub session: Option<&'a str>,
    /// The tool call that runs the command, when there is one.
    pub call: Option<&'a str>,
}

/// Where one command's proxy is: the port Landlock lets it connect to, and the URL its proxy
/// variables hold (with a credential naming its owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEndpoint {
    /// The proxy's port on `127.0.0.1`.
    pub port: u16,
    /// `http://…@127.0.0.1:PORT`.
    pub url: String,
}

/// A host the proxy refused for a call, as reported in the call's result and the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedHost {
    /// The host asked for.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// The whole line, `[sandbox] network: blocked HOST:PORT (why)`.
    pub line: String,
}

/// dsh's network proxy. A seam so the guard does not depend on the proxy's crate; it is asked
/// for when a confined command starts, so the proxy can start with the first one.
pub trait NetworkProxy: Send + Sync + std::fmt::Debug {
    /// The proxy for a command of `owner`, started now if it does not run yet (an error says
    /// why it cannot run; the command is then refused, never run without it).
    fn enlist(&self, owner: ProxyOwner<'_>) -> Result<ProxyEndpoint, String>;

    /// The hosts refused for `call` of `session` since last asked, each once.
    fn take_blocked(&self, session: &str, call: &str) -> Vec<BlockedHost>;
}

/// Why the network allow-list refuses a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRefusal {
    /// Why, naming the key to change (`not in `[sandbox] allowed_domains``).
    pub reason: String,
    /// The user denied it by name (`denied_domains`): refused without asking.
    pub denied: bool,
}

/// The allow-list of `[sandbox] network = "allowlist"`, for the guard's decision about tools
/// that reach hosts themselves: what the proxy refuses a command, they may not reach either.
pub trait HostPolicy: Send + Sync + std::fmt::Debug {
    /// `None` when `host` may be reached.
    fn refusal(&self, host: &str) -> Option<HostRefusal>;
}

/// A [`HostPolicy`] inside the (comparable) sandbox policy: two are equal when they are the
/// same list.
#[derive(Debug, Clone)]
pub struct Hosts(pub Arc<dyn HostPolicy>);

impl PartialEq for Hosts {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Hosts {}

/// The variables programs read for a proxy, both cases (curl reads only the lower-case
/// `http_proxy`; most others take either).
const PROXY_VARIABLES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// `env` with every proxy variable holding `url` and `NO_PROXY` empty (an inherited
/// exemption would send those hosts straight at a connect Landlock refuses).
pub(crate) fn with_proxy_env(env: &[(OsString, OsString)], url: &str) -> Vec<(OsString, OsString)> {
    let url = OsString::from(url);
    let ours = |name: &OsString| {
        PROXY_VARIABLES.iter().any(|v| name == v) || name == "NO_PROXY" || name == "no_proxy"
    };
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(name, _)| !ours(name))
        .cloned()
        .collect();
    out.extend(
        PROXY_VARIABLES
            .iter()
            .map(|v| (OsString::from(v), url.clone())),
    );
    out.push(("NO_PROXY".into(), OsString::new()));
    out.push(("no_proxy".into(), OsString::new()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_variables_replace_inherited_ones_and_empty_no_proxy() {
        let env = [
            ("PATH".into(), "/bin".into()),
            ("https_proxy".into(), "http://elsewhere:1".into()),
            ("NO_PROXY".into(), "*".into()),
        ];
        let out = with_proxy_env(&env, "http://127.0.0.1:4242");
        let get = |name: &str| {
            let found: Vec<_> = out.iter().filter(|(n, _)| n == name).collect();
            assert_eq!(found.len(), 1, "{name} once");
            found[0].1.clone()
        };
        assert_eq!(get("PATH"), "/bin");
        assert_eq!(get("https_proxy"), "http://127.0.0.1:4242");
        assert_eq!(get("ALL_PROXY"), "http://127.0.0.1:4242");
        assert_eq!(get("NO_PROXY"), "");
    }
}
