//! Where the server listens, and which `Host` headers name it.
//!
//! A browser page on another site can make the browser send requests to `127.0.0.1` by
//! pointing a DNS name it controls at that address (DNS rebinding); the browser then treats
//! the server as that site's origin. Such requests carry the attacker's name in `Host`, so the
//! server answers only requests whose `Host` names the address it serves: the name given with
//! `--host`, the loopback names when it listens on loopback, any IP literal (never a DNS name)
//! when it listens on every interface, always with the port it listens on.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::WebError;

/// The default address: loopback only.
pub const DEFAULT_HOST: &str = "127.0.0.1";

/// The default port (the reference's).
pub const DEFAULT_PORT: u16 = 3080;

/// The `Host` values a request may carry.
#[derive(Clone, Debug)]
pub(crate) struct AllowedHosts {
    /// Host names and IP literals (IPv6 in brackets), lowercase, without the port.
    names: Vec<String>,
    /// Listening on every interface: any IP literal names it.
    any_ip: bool,
    port: u16,
}

impl AllowedHosts {
    /// The hosts of a server asked to listen on `given`, bound to `local`.
    pub(crate) fn new(given: &str, local: SocketAddr) -> AllowedHosts {
        let ip = local.ip();
        let mut names = vec![bracketed(&given.to_ascii_lowercase())];
        if ip.is_loopback() {
            names.extend(["localhost", "127.0.0.1", "[::1]"].map(str::to_owned));
        }
        names.push(bracketed(&ip.to_string()));
        AllowedHosts {
            names,
            any_ip: ip.is_unspecified(),
            port: local.port(),
        }
    }

    /// Whether a request's `Host` header names this server.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if port != self.port {
            return false;
        }
        let name = name.to_ascii_lowercase();
        if self.any_ip && literal_ip(&name).is_some() {
            return true;
        }
        self.names.contains(&name)
    }
}

/// `name` with an IPv6 literal in brackets, as it appears in a `Host` header and a URL.
fn bracketed(name: &str) -> String {
    match name.parse::<Ipv6Addr>() {
        Ok(_) => format!("[{name}]"),
        Err(_) => name.to_owned(),
    }
}

/// The IP a `Host` name spells, if it is a literal (`1.2.3.4` or `[::1]`).
fn literal_ip(name: &str) -> Option<IpAddr> {
    match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => name.parse::<Ipv4Addr>().ok().map(IpAddr::V4),
    }
}

/// `host[:port]` → (host, port); the port defaults to 80 (what a browser omits).
fn split_host(header: &str) -> Option<(&str, u16)> {
    let (name, port) = if header.starts_with('[') {
        let end = header.find(']')?;
        let (name, rest) = header.split_at(end + 1);
        match rest.strip_prefix(':') {
            Some(port) => (name, port),
            None if rest.is_empty() => (name, ""),
            None => return None,
        }
    } else {
        match header.rsplit_once(':') {
            Some((name, port)) => (name, port),
            None => (header, ""),
        }
    };
    if name.is_empty() {
        return None;
    }
    let port = if port.is_empty() {
        80
    } else {
        port.parse().ok()?
    };
    Some((name, port))
}

/// Resolves the address to listen on. `localhost` is loopback without asking a resolver;
/// other names are resolved (the first address).
pub(crate) async fn resolve(host: &str, port: u16) -> Result<SocketAddr, WebError> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let mut found = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| WebError::Address(format!("cannot resolve `{host}`: {e}")))?;
    found
        .next()
        .ok_or_else(|| WebError::Address(format!("`{host}` resolves to no address")))
}

/// The host part of the URL a person opens: the name they gave, or for a wildcard bind the
/// loopback address (a URL cannot name "every interface").
pub(crate) fn url_host(given: &str, local: SocketAddr) -> String {
    match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_owned(),
        IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_owned(),
        _ => {
            let given = given
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(given);
            bracketed(given)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)), port)
    }

    #[test]
    fn a_loopback_server_answers_its_loopback_names_on_its_port_only() {
        let hosts = AllowedHosts::new("127.0.0.1", at("127.0.0.1", 3080));
        for ok in [
            "127.0.0.1:3080",
            "localhost:3080",
            "LOCALHOST:3080",
            "[::1]:3080",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:3080",
            "127.0.0.1:3081",
            "127.0.0.1",
            "10.0.0.1:3080",
            "",
            ":3080",
            "127.0.0.1:x",
            "[::1]x:3080",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn a_wildcard_server_answers_ip_literals_but_no_dns_name() {
        let hosts = AllowedHosts::new("0.0.0.0", at("0.0.0.0", 80));
        assert!(hosts.allows("192.168.1.7"));
        assert!(hosts.allows("[fe80::1]:80"));
        assert!(!hosts.allows("rebind.attacker.example"));
    }

    #[test]
    fn a_named_host_is_answered_under_that_name() {
        let hosts = AllowedHosts::new("devbox.lan", at("192.168.1.7", 3080));
        assert!(hosts.allows("devbox.lan:3080"));
        assert!(hosts.allows("192.168.1.7:3080"));
        assert!(!hosts.allows("localhost:3080"));
        assert_eq!(
            url_host("devbox.lan", at("192.168.1.7", 3080)),
            "devbox.lan"
        );
        assert_eq!(url_host("::1", at("::1", 3080)), "[::1]");
        assert_eq!(url_host("0.0.0.0", at("0.0.0.0", 3080)), "127.0.0.1");
    }
}
