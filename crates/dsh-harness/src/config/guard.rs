//! `[sandbox]` and `[permissions]`, and the `--sandbox`/`--approval` flags: what the guard
//! (dsh-guard) is configured with, each value with its source for `dsh config show`.
//!
//! ```toml
//! [sandbox]
//! mode = "workspace-write"        # read-only | workspace-write | danger-full-access
//! network = true                  # false: no TCP connect or bind, loopback included;
//!                                 # "allowlist": only through dsh's proxy, to these hosts:
//! allowed_domains = ["@registries", "api.example.com", "*.example.org"]
//! denied_domains = ["upload.example.org"]   # deny wins
//! writable_roots = ["~/.cache/x"] # extra directories commands may write
//! protect = "best-effort"         # or "require": refuse what cannot keep .git/.dsh read-only
//! namespaces = true               # false: Landlock and seccomp alone, even where namespaces work
//! min_abi = 4                     # refuse confined commands on an older Landlock ABI
//!
//! [permissions]
//! approval = "ask"                # ask | never | auto (default: ask; `dsh run`: never)
//! deny = ["bash(rm -rf *)", "write(/etc/**)"]
//! ask = ["bash(git push *)"]
//! allow = ["bash(cargo test *)", "mcp__github__*"]
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dsh_guard::{ApprovalPolicy, LandlockProbe, Rule, Rules, SandboxMode};
use dsh_netproxy::DomainPolicy;
use serde::Deserialize;
use toml::Spanned;

use super::{Overrides, Source, Sourced, located, toml_string};
use crate::error::{ConfigError, config_bail};

/// `[sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSandbox {
    mode: Option<Spanned<String>>,
    network: Option<Spanned<FileNetwork>>,
    allowed_domains: Option<Vec<Spanned<String>>>,
    denied_domains: Option<Vec<Spanned<String>>>,
    writable_roots: Option<Vec<String>>,
    protect: Option<Spanned<String>>,
    namespaces: Option<bool>,
    min_abi: Option<u32>,
}

/// `network = true | false | "allowlist"` as written.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FileNetwork {
    On(bool),
    Named(String),
}

/// `network = "allowlist"`: commands reach the network only through dsh's proxy, which lets
/// them reach the hosts these lists allow.
#[derive(Clone, Debug)]
pub struct NetworkAllowlist {
    /// `allowed_domains` as written (the preset by its name).
    pub allowed: Vec<String>,
    /// `denied_domains` as written.
    pub denied: Vec<String>,
    /// Both, parsed: what the proxy decides by.
    pub policy: DomainPolicy,
}

/// `[permissions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilePermissions {
    approval: Option<Spanned<String>>,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

pub use dsh_guard::Protect;

/// The guard's effective settings.
#[derive(Clone, Debug)]
pub struct GuardSettings {
    /// The sandbox mode.
    pub sandbox: Sourced<SandboxMode>,
    /// Whether commands reach the network (true in allow-list mode too: through the proxy).
    pub network: Sourced<bool>,
    /// With `network = "allowlist"`, the hosts commands may reach through the proxy.
    pub allowlist: Option<NetworkAllowlist>,
    /// Extra writable directories (`~` expanded).
    pub writable_roots: Sourced<Vec<PathBuf>>,
    /// What to do about `.git`/`.dsh` without a mount namespace.
    pub protect: Sourced<Protect>,
    /// Whether commands get mount and PID namespaces where the kernel allows them.
    pub namespaces: Sourced<bool>,
    /// The oldest Landlock ABI confined commands run on.
    pub min_abi: Option<Sourced<u32>>,
    /// The approval policy, when set by flag or file (else the front end's default).
    pub approval: Option<Sourced<ApprovalPolicy>>,
    /// The rules, each knowing where it was written.
    pub rules: Rules,
}

impl GuardSettings {
    /// The approval policy a front end applies: the configured one, else `default`.
    pub fn approval_or(&self, default: ApprovalPolicy) -> ApprovalPolicy {
        self.approval.as_ref().map_or(default, |a| a.value)
    }
}

/// Resolves flags over the file over the defaults; a bad value or rule is an error at
/// `file:line:column`.
pub(super) fn resolve(
    sandbox: FileSandbox,
    permissions: FilePermissions,
    flags: &Overrides,
    path: &Path,
    text: &str,
) -> Result<GuardSettings, ConfigError> {
    let at = |span: std::ops::Range<usize>| located(path, text, span.start);
    let (network, allowlist) = network(&sandbox, path, text)?;
    let mode = match (flags.sandbox, sandbox.mode) {
        (Some(mode), _) => Sourced::new(mode, Source::Flag("--sandbox")),
        (None, Some(mode)) => match mode.get_ref().parse::<SandboxMode>() {
            Ok(value) => Sourced::new(value, Source::File),
            Err(e) => config_bail!("invalid config file {}: sandbox.mode: {e}", at(mode.span())),
        },
        (None, None) => Sourced::new(SandboxMode::default(), Source::Default),
    };
    let writable_roots = match sandbox.writable_roots {
        Some(roots) => Sourced::new(roots.iter().map(|r| expand_home(r)).collect(), Source::File),
        None => Sourced::new(Vec::new(), Source::Default),
    };
    let protect = match sandbox.protect {
        None => Sourced::new(Protect::BestEffort, Source::Default),
        Some(p) => match p.get_ref().as_str() {
            "best-effort" => Sourced::new(Protect::BestEffort, Source::File),
            "require" => Sourced::new(Protect::Require, Source::File),
            other => config_bail!(
                "invalid config file {}: sandbox.protect: expected \"best-effort\" or \
                 \"require\", got {other:?}",
                at(p.span())
            ),
        },
    };
    let namespaces = match sandbox.namespaces {
        Some(on) => Sourced::new(on, Source::File),
        None => Sourced::new(true, Source::Default),
    };
    let min_abi = sandbox.min_abi.map(|abi| Sourced::new(abi, Source::File));
    let approval = match (flags.approval, permissions.approval) {
        (Some(policy), _) => Some(Sourced::new(policy, Source::Flag("--approval"))),
        (None, Some(policy)) => match policy.get_ref().parse::<ApprovalPolicy>() {
            Ok(value) => Some(Sourced::new(value, Source::File)),
            Err(e) => config_bail!(
                "invalid config file {}: permissions.approval: {e}",
                at(policy.span())
            ),
        },
        (None, None) => None,
    };
    let parse = |key: &str, list: Vec<Spanned<String>>| -> Result<Vec<Rule>, ConfigError> {
        list.into_iter()
            .map(|raw| {
                // The span starts at the opening quote.
                let start = raw.span().start + 1;
                match Rule::parse(raw.get_ref()) {
                    Ok(mut rule) => {
                        rule.origin = Some(located(path, text, start));
                        Ok(rule)
                    }
                    Err(e) => config_bail!(
                        "invalid config file {}: permissions.{key}: bad rule {:?}: {e}",
                        located(path, text, start + e.offset),
                        raw.get_ref()
                    ),
                }
            })
            .collect()
    };
    let rules = Rules {
        deny: parse("deny", permissions.deny)?,
        ask: parse("ask", permissions.ask)?,
        allow: parse("allow", permissions.allow)?,
    };
    Ok(GuardSettings {
        sandbox: mode,
        network,
        allowlist,
        writable_roots,
        protect,
        namespaces,
        min_abi,
        approval,
        rules,
    })
}

/// `network`, and with `"allowlist"` the domain lists (an entry that is not a host name, or a
/// list without the allow-list, is an error at `file:line:column`).
fn network(
    sandbox: &FileSandbox,
    path: &Path,
    text: &str,
) -> Result<(Sourced<bool>, Option<NetworkAllowlist>), ConfigError> {
    let listed = sandbox.allowed_domains.is_some() || sandbox.denied_domains.is_some();
    let on = match sandbox.network.as_ref().map(|n| (n.get_ref(), n.span())) {
        None => None,
        Some((FileNetwork::On(on), _)) => Some(*on),
        Some((FileNetwork::Named(name), _)) if name == "allowlist" => {
            let mut allowlist = NetworkAllowlist {
                allowed: Vec::new(),
                denied: Vec::new(),
                policy: DomainPolicy::default(),
            };
            for (key, list) in [
                ("allowed_domains", &sandbox.allowed_domains),
                ("denied_domains", &sandbox.denied_domains),
            ] {
                for entry in list.iter().flatten() {
                    let raw = entry.get_ref();
                    let added = if key == "allowed_domains" {
                        allowlist.allowed.push(raw.clone());
                        allowlist.policy.allow(raw)
                    } else {
                        allowlist.denied.push(raw.clone());
                        allowlist.policy.deny(raw)
                    };
                    if let Err(e) = added {
                        // The span starts at the opening quote.
                        config_bail!(
                            "invalid config file {}: sandbox.{key}: bad entry {raw:?}: {e}",
                            located(path, text, entry.span().start + 1 + e.offset)
                        );
                    }
                }
            }
            return Ok((Sourced::new(true, Source::File), Some(allowlist)));
        }
        Some((FileNetwork::Named(other), span)) => config_bail!(
            "invalid config file {}: sandbox.network: expected true, false or \"allowlist\", \
             got {other:?}",
            located(path, text, span.start)
        ),
    };
    if listed {
        let span = sandbox
            .allowed_domains
            .iter()
            .chain(&sandbox.denied_domains)
            .flatten()
            .map(|e| e.span().start)
            .min()
            .unwrap_or(0);
        config_bail!(
            "invalid config file {}: sandbox.allowed_domains and denied_domains apply only with \
             `network = \"allowlist\"`",
            located(path, text, span)
        );
    }
    Ok((
        match on {
            Some(on) => Sourced::new(on, Source::File),
            None => Sourced::new(true, Source::Default),
        },
        None,
    ))
}

/// `~/x` → `$HOME/x`.
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The `[sandbox]` and `[permissions]` sections of `dsh config show`.
pub(super) fn render(out: &mut String, guard: &GuardSettings, probe: &dyn LandlockProbe) {
    let line = |out: &mut String, text: String, source: &dyn std::fmt::Display| {
        let _ = writeln!(out, "{text:<48} # {source}");
    };
    let q = |s: &str| toml_string(s);
    let _ = writeln!(out, "\n[sandbox]");
    line(
        out,
        format!("mode = {}", q(guard.sandbox.value.as_str())),
        &guard.sandbox.source,
    );
    match &guard.allowlist {
        None => line(
            out,
            format!("network = {}", guard.network.value),
            &guard.network.source,
        ),
        Some(list) => {
            line(
                out,
                "network = \"allowlist\"".to_owned(),
                &guard.network.source,
            );
            for (key, entries) in [
                ("allowed_domains", &list.allowed),
                ("denied_domains", &list.denied),
            ] {
                let quoted: Vec<String> = entries.iter().map(|e| q(e)).collect();
                line(
                    out,
                    format!("{key} = [{}]", quoted.join(", ")),
                    &guard.network.source,
                );
            }
        }
    }
    let roots: Vec<String> = guard
        .writable_roots
        .value
        .iter()
        .map(|r| q(&r.display().to_string()))
        .collect();
    line(
        out,
        format!("writable_roots = [{}]", roots.join(", ")),
        &guard.writable_roots.source,
    );
    let protect = match guard.protect.value {
        Protect::BestEffort => "best-effort",
        Protect::Require => "require",
    };
    line(
        out,
        format!("protect = {}", q(protect)),
        &guard.protect.source,
    );
    line(
        out,
        format!("namespaces = {}", guard.namespaces.value),
        &guard.namespaces.source,
    );
    match &guard.min_abi {
        Some(abi) => line(out, format!("min_abi = {}", abi.value), &abi.source),
        None => line(out, "# min_abi unset".to_owned(), &"default: any ABI"),
    }
    let state = match probe.probe() {
        Ok(()) => format!(
            "available (ABI {}): confining modes are enforced",
            dsh_guard::kernel_abi()
        ),
        Err(e) => format!("UNAVAILABLE ({e}): confining modes refuse every command"),
    };
    let _ = writeln!(out, "# landlock: {state}");
    let _ = writeln!(out, "\n[permissions]");
    match &guard.approval {
        Some(a) => line(
            out,
            format!("approval = {}", q(a.value.as_str())),
            &a.source,
        ),
        None => line(
            out,
            "# approval unset".to_owned(),
            &"default: ask (chat, acp), never (dsh run)",
        ),
    }
    for (key, rules) in [
        ("deny", &guard.rules.deny),
        ("ask", &guard.rules.ask),
        ("allow", &guard.rules.allow),
    ] {
        for rule in rules {
            let origin = rule.origin.as_deref().unwrap_or("file");
            line(out, format!("{key} += {}", q(rule.text())), &origin);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dsh_netproxy::Decision;

    use super::*;

    fn parse(text: &str) -> Result<GuardSettings, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            sandbox: FileSandbox,
        }
        let file: File = toml::from_str(text).unwrap();
        resolve(
            file.sandbox,
            FilePermissions::default(),
            &Overrides::default(),
            Path::new("/c.toml"),
            text,
        )
    }

    #[test]
    fn the_allowlist_mode_reads_both_lists_and_the_preset() {
        let settings = parse(
            "[sandbox]\nnetwork = \"allowlist\"\n\
             allowed_domains = [\"@registries\", \"*.corp.test\"]\n\
             denied_domains = [\"x.corp.test\"]\n",
        )
        .unwrap();
        assert!(settings.network.value);
        let list = settings.allowlist.unwrap();
        assert_eq!(list.allowed, ["@registries", "*.corp.test"]);
        assert_eq!(
            list.policy.decide("crates.io"),
            Decision::Allowed { exact: false }
        );
        assert!(matches!(
            list.policy.decide("x.corp.test"),
            Decision::Denied(_)
        ));
        assert_eq!(list.policy.decide("example.com"), Decision::NotListed);
        let on = parse("[sandbox]\nnetwork = false\n").unwrap();
        assert!(!on.network.value && on.allowlist.is_none());
    }

    #[test]
    fn network_mistakes_are_reported_at_file_line_column() {
        let cases = [
            (
                "[sandbox]\nnetwork = \"some\"\n",
                "/c.toml:2:11: sandbox.network: expected true, false or \"allowlist\"",
            ),
            (
                "[sandbox]\nnetwork = \"allowlist\"\nallowed_domains = [\"ok.io\", \"https://x.io\"]\n",
                "/c.toml:3:35: sandbox.allowed_domains: bad entry \"https://x.io\": a host name, \
                 not a URL",
            ),
            (
                "[sandbox]\nnetwork = \"allowlist\"\ndenied_domains = [\"@nope\"]\n",
                "/c.toml:3:20: sandbox.denied_domains: bad entry \"@nope\": unknown preset",
            ),
            (
                "[sandbox]\nnetwork = true\nallowed_domains = [\"a.io\"]\n",
                "/c.toml:3:20: sandbox.allowed_domains and denied_domains apply only with",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}\n→ {err}");
        }
    }
}
