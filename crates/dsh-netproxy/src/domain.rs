//! Which hosts a command may reach: the allowed and denied patterns of `[sandbox]`, and the
//! registry preset.

/// The name of the preset that stands for the common package registries in
/// `allowed_domains` (and `denied_domains`).
pub const REGISTRIES_PRESET: &str = "@registries";

/// The hosts [`REGISTRIES_PRESET`] expands to: what `cargo`, `npm`, `pip`, `go mod download`
/// and `apt-get` fetch from with their default configuration, so people need not look them
/// up. Kept short on purpose: every entry is a host a prompt-injected command may reach.
pub const REGISTRIES: &[&str] = &[
    // Rust: the sparse index, crate downloads, rustup's toolchains.
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    // npm.
    "registry.npmjs.org",
    // PyPI: the index and the files.
    "pypi.org",
    "files.pythonhosted.org",
    // Go modules: the module proxy and the checksum database.
    "proxy.golang.org",
    "sum.golang.org",
    // Debian.
    "deb.debian.org",
    "security.debian.org",
];

/// One entry of `allowed_domains` or `denied_domains`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `example.com`: that name only.
    Exact(String),
    /// `*.example.com`: every name below it, not the name itself (as in Claude Code and
    /// TLS wildcards, though any depth matches).
    Subdomains(String),
}

impl Pattern {
    /// Whether `host` (lower case, no trailing dot) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            Pattern::Exact(name) => host == name,
            Pattern::Subdomains(parent) => host
                .strip_suffix(parent.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pattern::Exact(name) => f.write_str(name),
            Pattern::Subdomains(parent) => write!(f, "*.{parent}"),
        }
    }
}

/// A malformed entry, with the byte offset in it where the problem is (the config loader
/// turns it into `file:line:column`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DomainError {
    /// What is wrong.
    pub message: String,
    /// Where in the entry.
    pub offset: usize,
}

/// What the proxy does with a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; `exact` when an exact entry (not a wildcard or the preset) named it, which is
    /// what lets a name reach a private address.
    Allowed {
        /// Named exactly by the user.
        exact: bool,
    },
    /// Named by `denied_domains` (this entry), whatever the allowed list says.
    Denied(String),
    /// In neither list.
    NotListed,
}

/// `allowed_domains` and `denied_domains`, parsed. Deny wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainPolicy {
    /// Hosts that may be reached, with where each came from (the text as written, or the
    /// preset's name for its hosts).
    pub allowed: Vec<(Pattern, bool)>,
    /// Hosts that may never be reached.
    pub denied: Vec<Pattern>,
}

impl DomainPolicy {
    /// A policy of these entries, as `allowed_domains` and `denied_domains` hold them.
    pub fn from_lists<'a>(
        allowed: impl IntoIterator<Item = &'a str>,
        denied: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, DomainError> {
        let mut policy = Self::default();
        for entry in allowed {
            policy.allow(entry)?;
        }
        for entry in denied {
            policy.deny(entry)?;
        }
        Ok(policy)
    }

    /// Adds one `allowed_domains` entry (a preset adds its hosts).
    pub fn allow(&mut self, entry: &str) -> Result<(), DomainError> {
        if entry.starts_with('@') {
            for host in preset(entry)? {
                self.allowed
                    .push((Pattern::Exact((*host).to_owned()), false));
            }
            return Ok(());
        }
        let pattern = parse(entry)?;
        let exact = matches!(pattern, Pattern::Exact(_));
        self.allowed.push((pattern, exact));
        Ok(())
    }

    /// Adds one `denied_domains` entry (a preset adds its hosts).
    pub fn deny(&mut self, entry: &str) -> Result<(), DomainError> {
        if entry.starts_with('@') {
            for host in preset(entry)? {
                self.denied.push(Pattern::Exact((*host).to_owned()));
            }
            return Ok(());
        }
        self.denied.push(parse(entry)?);
        Ok(())
    }

    /// The decision for `host` as a request names it (any case, an IPv6 literal with or
    /// without brackets, a trailing dot allowed).
    pub fn decide(&self, host: &str) -> Decision {
        let host = normalize(host);
        if let Some(denied) = self.denied.iter().find(|p| p.matches(&host)) {
            return Decision::Denied(denied.to_string());
        }
        let mut found = None;
        for (pattern, exact) in &self.allowed {
            if pattern.matches(&host) {
                found = Some(found.unwrap_or(false) || *exact);
            }
        }
        match found {
            Some(exact) => Decision::Allowed { exact },
            None => Decision::NotListed,
        }
    }
}

/// Lower case, brackets and one trailing dot gone: the form patterns are compared in.
pub(crate) fn normalize(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

fn preset(entry: &str) -> Result<&'static [&'static str], DomainError> {
    if entry == REGISTRIES_PRESET {
        Ok(REGISTRIES)
    } else {
        Err(DomainError {
            message: format!("unknown preset {entry:?} (the one preset is {REGISTRIES_PRESET:?})"),
            offset: 0,
        })
    }
}

/// A host name or IP address, optionally led by `*.`; no scheme, port, path or other
/// wildcard, so an entry means exactly one thing.
fn parse(entry: &str) -> Result<Pattern, DomainError> {
    let bad = |message: String, offset: usize| Err(DomainError { message, offset });
    let (body, start, wildcard) = match entry.strip_prefix("*.") {
        Some(rest) => (rest, 2, true),
        None => (entry, 0, false),
    };
    if body.is_empty() {
        return bad(
            "expected a host name such as \"example.com\" or \"*.example.com\"".into(),
            0,
        );
    }
    if let Some(i) = entry.find("://") {
        return bad("a host name, not a URL: leave out the scheme".into(), i);
    }
    // IPv6 literals are written bare or in brackets; they cannot take a wildcard.
    let bare = body.trim_start_matches('[').trim_end_matches(']');
    if !wildcard && bare.parse::<std::net::IpAddr>().is_ok() {
        return Ok(Pattern::Exact(normalize(body)));
    }
    for (i, c) in body.char_indices() {
        let ok = c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_';
        if !ok {
            let what = match c {
                '*' => "`*` only as a leading `*.` (subdomains)".to_owned(),
                ':' => "no port: the allow-list is by host".to_owned(),
                '/' => "no path: the allow-list is by host".to_owned(),
                other => format!("{other:?} is not allowed in a host name"),
            };
            return bad(what, start + i);
        }
    }
    if body.starts_with('.') || body.ends_with('.') || body.contains("..") {
        return bad("empty label in the host name".into(), start);
    }
    let name = body.to_ascii_lowercase();
    Ok(if wildcard {
        Pattern::Subdomains(name)
    } else {
        Pattern::Exact(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allowed: &[&str], denied: &[&str]) -> DomainPolicy {
        DomainPolicy::from_lists(allowed.iter().copied(), denied.iter().copied()).unwrap()
    }

    #[test]
    fn a_wildcard_matches_subdomains_only() {
        let p = policy(&["*.example.org"], &[]);
        assert_eq!(
            p.decide("a.example.org"),
            Decision::Allowed { exact: false }
        );
        assert_eq!(
            p.decide("A.B.Example.ORG."),
            Decision::Allowed { exact: false }
        );
        assert_eq!(p.decide("example.org"), Decision::NotListed);
        assert_eq!(p.decide("badexample.org"), Decision::NotListed);
    }

    #[test]
    fn deny_wins_over_allow() {
        let p = policy(&["*.example.com", "api.example.com"], &["api.example.com"]);
        assert_eq!(
            p.decide("api.example.com"),
            Decision::Denied("api.example.com".into())
        );
        assert_eq!(
            p.decide("www.example.com"),
            Decision::Allowed { exact: false }
        );
    }

    #[test]
    fn only_an_exact_entry_counts_as_exact() {
        let p = policy(&["@registries", "*.internal", "db.internal", "::1"], &[]);
        assert_eq!(p.decide("crates.io"), Decision::Allowed { exact: false });
        assert_eq!(p.decide("db.internal"), Decision::Allowed { exact: true });
        assert_eq!(p.decide("x.internal"), Decision::Allowed { exact: false });
        assert_eq!(p.decide("[::1]"), Decision::Allowed { exact: true });
    }

    #[test]
    fn malformed_entries_are_refused_with_their_offset() {
        let err = |e: &str| parse(e).unwrap_err();
        assert_eq!(err("https://x.com").offset, 5);
        assert_eq!(err("x.com:443").offset, 5);
        assert_eq!(err("*.x.*.com").offset, 4);
        assert_eq!(err("x.com/path").offset, 5);
        assert!(err("*.").message.contains("expected a host name"));
        assert!(err("a..b").message.contains("empty label"));
        let mut p = DomainPolicy::default();
        assert!(
            p.allow("@nope")
                .unwrap_err()
                .message
                .contains("@registries")
        );
    }
}
