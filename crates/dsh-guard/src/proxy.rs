//! The network by allow-list, as the guard sees it: a proxy somewhere (dsh-netproxy, wired
//! by the harness) whose port is the only one a confined command may connect to, and the
//! variables that point programs at it.

use std::ffi::OsString;

/// dsh's network proxy. A seam so the guard does not depend on the proxy's crate; the port is
/// asked for when a confined command starts, so the proxy can start with the first one.
pub trait NetworkProxy: Send + Sync + std::fmt::Debug {
    /// The proxy's port on `127.0.0.1`, started now if it does not run yet (an error says
    /// why it cannot run; the command is then refused, never run without it).
    fn port(&self) -> Result<u16, String>;
}

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

/// `env` with every proxy variable pointing at `127.0.0.1:port` and `NO_PROXY` empty (an
/// inherited exemption would send those hosts straight at a connect Landlock refuses).
pub(crate) fn with_proxy_env(env: &[(OsString, OsString)], port: u16) -> Vec<(OsString, OsString)> {
    let url = OsString::from(format!("http://127.0.0.1:{port}"));
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
        let out = with_proxy_env(&env, 4242);
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
