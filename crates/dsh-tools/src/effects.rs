//! What a call does to the world, as its tool declares it.
//!
//! Policy (the guard's write roots and approvals), the editor's permission requests and the
//! front ends' cards all need to know whether a call writes files, runs a command or reaches
//! the network. Recognising that by tool name (`"write"`, `"bash"`) or by argument key
//! (`file_path`) breaks silently the day a new tool writes files under another name: it would
//! skip the write-root check. So every tool says it itself, per call, from its arguments
//! ([`crate::Tool::effects`]), and everything downstream reads these facts.
//!
//! A tool that says nothing is [`ToolEffects::undeclared`]: policy treats it as possibly doing
//! anything (it asks), which is what a new tool gets until its author declares better.

use std::net::IpAddr;
use std::path::PathBuf;

/// A shell command a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandEffect {
    /// The command line, as the shell will read it.
    pub line: String,
    /// `Some(justification)` when the call asks to run outside the sandbox.
    pub escalation: Option<String>,
}

/// The declared effects of one call. Paths are as the arguments give them: a relative path
/// hangs off the caller's working directory, which only the caller knows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolEffects {
    declared: bool,
    reads: Vec<PathBuf>,
    writes: Vec<PathBuf>,
    command: Option<CommandEffect>,
    network: Vec<String>,
    /// Of `network`, the hosts the user configured (not chosen by the model).
    configured: Vec<String>,
}

impl ToolEffects {
    /// The tool cannot say what the call does (another program's tool, or a tool that does not
    /// declare its effects): treated as possibly writing, running and reaching anything.
    pub fn undeclared() -> Self {
        Self::default()
    }

    /// The call touches nothing outside the session (a todo list, a subagent, which is
    /// guarded call by call itself). Add what it does touch with the builder methods.
    pub fn none() -> Self {
        Self {
            declared: true,
            ..Self::default()
        }
    }

    /// It reads `path`.
    #[must_use]
    pub fn reads(mut self, path: impl Into<PathBuf>) -> Self {
        self.declared = true;
        self.reads.push(path.into());
        self
    }

    /// It creates, changes or deletes `path`.
    #[must_use]
    pub fn writes(mut self, path: impl Into<PathBuf>) -> Self {
        self.declared = true;
        self.writes.push(path.into());
        self
    }

    /// It runs the shell command `line` (inside the session's sandbox unless escalated).
    #[must_use]
    pub fn runs(mut self, line: impl Into<String>) -> Self {
        self.declared = true;
        self.command = Some(CommandEffect {
            line: line.into(),
            escalation: None,
        });
        self
    }

    /// Its command asks to run outside the sandbox, for `justification`. Only meaningful after
    /// [`runs`](Self::runs).
    #[must_use]
    pub fn escalated(mut self, justification: impl Into<String>) -> Self {
        if let Some(command) = &mut self.command {
            command.escalation = Some(justification.into());
        }
        self
    }

    /// dsh itself connects to `host` (a domain name or an IP address, as the call names it)
    /// for this call. Rules such as `web_fetch(domain:example.com)` match it, and a host that
    /// names a private address ([`names_private_address`]) needs approval.
    #[must_use]
    pub fn reaches(mut self, host: impl Into<String>) -> Self {
        self.declared = true;
        self.network.push(host.into().to_ascii_lowercase());
        self
    }

    /// Whether the tool declared anything at all; `false` means "could do anything".
    pub fn is_declared(&self) -> bool {
        self.declared
    }

    /// Whether the call changes nothing: declared, no writes, no command. (Reading and the
    /// network are not changes; policy on those is separate.)
    pub fn is_read_only(&self) -> bool {
        self.declared && self.writes.is_empty() && self.command.is_none()
    }

    /// The paths it reads.
    pub fn read_paths(&self) -> &[PathBuf] {
        &self.reads
    }

    /// The paths it writes.
    pub fn write_paths(&self) -> &[PathBuf] {
        &self.writes
    }

    /// Every path it names, writes first (the locations an editor shows).
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.writes.iter().chain(&self.reads)
    }

    /// The command it runs.
    pub fn command(&self) -> Option<&CommandEffect> {
        self.command.as_ref()
    }

    /// dsh connects to `host`, an endpoint the user configured (a search API), not one the
    /// model chose: the network must be on, but a private address needs no approval (the
    /// user named it).
    #[must_use]
    pub fn reaches_configured(mut self, host: impl Into<String>) -> Self {
        let host = host.into().to_ascii_lowercase();
        self.configured.push(host.clone());
        self.reaches(host)
    }

    /// The hosts dsh connects to for it (lower case).
    pub fn network(&self) -> &[String] {
        &self.network
    }

    /// Whether `host` (one of [`network`](Self::network)) was configured by the user rather
    /// than chosen by the model.
    pub fn is_configured(&self, host: &str) -> bool {
        self.configured.iter().any(|h| h == host)
    }
}

/// Whether `host` names this machine or a private network directly: `localhost` (and
/// `*.localhost`), or an IP address that is loopback, private, link-local, carrier-grade NAT,
/// unique-local or unspecified. Reaching one from dsh itself (not from a confined command) is
/// how a prompt-injected call would read a service that trusts its network position (SSRF),
/// so such a target needs a person's approval. A domain name that merely *resolves* to such an
/// address is the fetching tool's to refuse, at connection time.
pub fn names_private_address(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(is_private_address)
}

/// Whether `ip` is loopback, private, link-local, carrier-grade NAT (100.64/10), unique-local
/// (fc00::/7), unspecified, or an IPv4-mapped IPv6 form of one of those.
pub fn is_private_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_address(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_declaration_without_writes_or_commands_is_read_only() {
        assert!(!ToolEffects::undeclared().is_read_only());
        assert!(ToolEffects::none().is_read_only());
        assert!(ToolEffects::none().reads("a").is_read_only());
        assert!(ToolEffects::none().reaches("https://x").is_read_only());
        assert!(!ToolEffects::none().writes("a").is_read_only());
        assert!(!ToolEffects::none().runs("ls").is_read_only());
    }

    #[test]
    fn escalation_belongs_to_the_command() {
        let plain = ToolEffects::none().escalated("why");
        assert_eq!(plain.command(), None);
        let escalated = ToolEffects::none().runs("make").escalated("why");
        assert_eq!(
            escalated.command().and_then(|c| c.escalation.as_deref()),
            Some("why")
        );
    }

    #[test]
    fn private_hosts_are_this_machine_and_private_networks_only() {
        for private in [
            "localhost",
            "api.localhost",
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "[::1]",
            "::ffff:127.0.0.1",
            "fd00::1",
            "fe80::1",
        ] {
            assert!(names_private_address(private), "{private}");
        }
        for public in [
            "example.com",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1",
        ] {
            assert!(!names_private_address(public), "{public}");
        }
    }

    #[test]
    fn paths_list_writes_before_reads() {
        let e = ToolEffects::none().reads("r").writes("w");
        let paths: Vec<_> = e.paths().map(|p| p.to_str().unwrap_or("")).collect();
        assert_eq!(paths, ["w", "r"]);
    }
}
