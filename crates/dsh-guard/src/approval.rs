//! The approval policy and the decision for one call: rules first (deny > ask > allow), then
//! what the sandbox mode allows, then the policy for what is left.
//!
//! Two kinds of call need more than running confined (spec/guard.md §5):
//! - **A, needs approval:** an `ask` rule matched, or an unconfined call that may mutate (any
//!   `bash` or file write in `danger-full-access` that no allow rule or safe list covers, and
//!   every call of an MCP tool no allow rule covers: another program's tool, in any mode);
//! - **B, beyond the mode:** an escalation (a command to run outside the sandbox), or a
//!   `write`/`edit` outside the writable roots (any write in `read-only`).
//!
//! | | ask | never | auto |
//! |---|---|---|---|
//! | A | ask | deny + reason | allow |
//! | B | ask | deny + reason | deny + reason |
//!
//! An ordinary `bash` call in a confining mode is neither: it runs confined without asking.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use dsh_tools::{ToolEffects, names_private_address};
use serde::Serialize;

use crate::mode::SandboxMode;
use crate::policy::{SandboxPolicy, lexical};
use crate::rules::{CallFacts, Rule, RuleAction, mcp_server, plainly_readable, simple_commands};

/// When dsh asks the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    /// Ask for anything beyond the mode or marked `ask` (the chat and ACP default).
    Ask,
    /// Never ask: refuse it with a reason the model can act on (the `dsh run` default).
    Never,
    /// Never ask: allow what only needs approval, refuse what goes beyond the mode.
    Auto,
}

impl ApprovalPolicy {
    /// Every policy.
    pub const ALL: [ApprovalPolicy; 3] = [
        ApprovalPolicy::Ask,
        ApprovalPolicy::Never,
        ApprovalPolicy::Auto,
    ];

    /// The spelling used by flags, config and the log.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::Auto => "auto",
        }
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval policy {0:?}: expected ask, never or auto")]
pub struct UnknownPolicy(pub String);

impl FromStr for ApprovalPolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// The configured rules, by action.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Refuse, whatever the policy.
    pub deny: Vec<Rule>,
    /// Needs approval.
    pub ask: Vec<Rule>,
    /// Runs without asking (still confined).
    pub allow: Vec<Rule>,
}

/// What happens to the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "lowercase")]
pub enum Verdict {
    /// It runs.
    Allow,
    /// It does not; the model reads the reason.
    Deny {
        /// Why, and what to do instead.
        reason: String,
    },
    /// The user decides.
    Ask {
        /// What the user is asked about.
        reason: String,
    },
}

/// A verdict and what produced it, as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The outcome.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// What decided: `rule`, `mode` or `policy`.
    pub by: &'static str,
    /// The rule that matched, with where it was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The justification of an escalation request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<String>,
}

/// Read-only commands that never need approval even unconfined (used only where something
/// would otherwise ask: `danger-full-access` under `ask`). Each must also be plainly readable.
const SAFE_COMMANDS: &[&str] = &[
    "cat",
    "cd",
    "pwd",
    "echo",
    "true",
    "false",
    "ls",
    "head",
    "tail",
    "wc",
    "nl",
    "cut",
    "paste",
    "tr",
    "rev",
    "tac",
    "seq",
    "expr",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "stat",
    "file",
    "du",
    "df",
    "id",
    "whoami",
    "uname",
    "which",
    "diff",
    "cmp",
    "comm",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "grep",
    "egrep",
    "fgrep",
];

/// Whether `command` only reads: every simple command is on the safe list, nothing hidden.
pub fn is_safe_command(command: &str) -> bool {
    plainly_readable(command)
        && simple_commands(command).iter().all(|c| {
            let first = c.split_whitespace().next().unwrap_or("");
            SAFE_COMMANDS.contains(&first)
        })
}

/// The whole decision procedure of a session: its sandbox, approval policy and rules.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The sandbox the session's commands run in.
    pub sandbox: SandboxPolicy,
    /// When to ask.
    pub approval: ApprovalPolicy,
    /// The configured rules.
    pub rules: Rules,
}

/// One tool call, as the guard sees it: the tool's name (rules are written against names) and
/// what the tool declared the call does. The guard never reads a tool's arguments itself, so
/// a new tool that writes files meets the same write-root check as `write`.
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    /// The tool.
    pub tool: &'a str,
    /// What the call does, as its tool declared it.
    pub effects: &'a ToolEffects,
    /// The caller's working directory (relative paths hang off it).
    pub cwd: Option<&'a Path>,
}

impl Guard {
    /// Decides one call; the caller's working directory is its session's workspace.
    pub fn decide(&self, call: &CallView<'_>) -> Decision {
        if call.cwd.is_some_and(|cwd| cwd != self.sandbox.workspace) {
            let scoped = Guard {
                sandbox: self.sandbox.for_workspace(call.cwd),
                approval: self.approval,
                rules: self.rules.clone(),
            };
            return scoped.decide_here(call);
        }
        self.decide_here(call)
    }

    fn decide_here(&self, call: &CallView<'_>) -> Decision {
        let tool = call.tool.to_ascii_lowercase();
        let base = call.cwd.unwrap_or(&self.sandbox.workspace);
        let effects = call.effects;
        let command = effects.command().map(|c| c.line.as_str());
        let writes: Vec<PathBuf> = effects
            .write_paths()
            .iter()
            .map(|p| absolute(base, p))
            .collect();
        let paths: Vec<PathBuf> = writes
            .iter()
            .cloned()
            .chain(effects.read_paths().iter().map(|p| absolute(base, p)))
            .collect();
        let facts = CallFacts {
            tool: &tool,
            command,
            paths: &paths,
            hosts: effects.network(),
            workspace: base,
        };
        let escalation = effects
            .command()
            .and_then(|c| c.escalation.as_deref())
            .map(|j| j.trim().to_owned());
        let by_rule = |action: RuleAction, rule: &Rule, verdict| Decision {
            verdict,
            by: "rule",
            rule: Some(format!("{} {rule}", action.as_str())),
            escalation: escalation.clone(),
        };
        if let Some(rule) = self.rules.deny.iter().find(|r| r.matches_any(&facts)) {
            let reason = format!(
                "`{}` is denied by the rule `{}`; do not retry it in another form",
                call.tool,
                rule.text()
            );
            return by_rule(RuleAction::Deny, rule, Verdict::Deny { reason });
        }
        if let Some(justification) = &escalation {
            return self.beyond_mode(self.escalation(justification, command), escalation.clone());
        }
        if let Some(rule) = self.rules.ask.iter().find(|r| r.matches_any(&facts)) {
            let what = format!("`{}` matches the rule `{}`", call.tool, rule.text());
            let mut decision = self.needs_approval(what);
            decision.by = "rule";
            decision.rule = Some(format!("ask {rule}"));
            return decision;
        }
        // An allow rule never lets git run unconfined in a repository whose config makes git
        // run programs (see `crate::git`): the call is decided as if no rule matched, saying why.
        let mut set_aside = None;
        if let Some(rule) = self.rules.allow.iter().find(|r| r.matches_all(&facts)) {
            let risk = (self.sandbox.mode == SandboxMode::DangerFullAccess)
                .then(|| command.filter(|c| runs_git(c)))
                .flatten()
                .and_then(|_| crate::git::program_setting(base));
            match risk {
                None => return by_rule(RuleAction::Allow, rule, Verdict::Allow),
                Some(setting) => {
                    set_aside = Some(format!(
                        " (the rule `{}` does not apply: this repository's git config sets \
                         {setting}, which makes git run a program, and the command would run \
                         unconfined)",
                        rule.text()
                    ));
                }
            }
        }
        if !effects.is_declared() {
            // An MCP tool does whatever its server does (an HTTP server is not even
            // confined), and a server's own `readOnlyHint` is its word, not a fact: it may
            // mutate, so it asks. So does any tool that does not say what it does.
            let what = match mcp_server(call.tool) {
                Some(server) => format!(
                    "`{}` is a tool of the MCP server `{server}`, and dsh cannot tell what it does",
                    call.tool
                ),
                None => format!(
                    "`{}` does not declare what it does, so dsh cannot tell whether it stays \
                     inside the sandbox",
                    call.tool
                ),
            };
            return self.needs_approval(what);
        }
        let mode = self.sandbox.mode;
        for path in &writes {
            if mode == SandboxMode::DangerFullAccess {
                return self.needs_approval(format!("`{}` writes {}", call.tool, path.display()));
            }
            if !self.sandbox.allows_write(path) {
                let why = match mode {
                    SandboxMode::ReadOnly => "the session is read-only".to_owned(),
                    _ => format!("it is outside the writable roots ({})", self.roots_text()),
                };
                return self.beyond_mode(
                    Beyond {
                        asked: format!("`{}` writes {} ({why})", call.tool, path.display()),
                        refused: format!(
                            "`{}` may not write {}: {why}. Keep writes inside {}",
                            call.tool,
                            path.display(),
                            self.roots_text()
                        ),
                    },
                    None,
                );
            }
        }
        if let Some(host) = effects.network().first()
            && !self.sandbox.network
        {
            return self.beyond_mode(
                Beyond {
                    asked: format!("`{}` reaches {host} while the network is off", call.tool),
                    refused: format!(
                        "`{}` may not reach {host}: the network is off for this session \
                         (`[sandbox] network = false`)",
                        call.tool
                    ),
                },
                None,
            );
        }
        // What the proxy refuses a command, a tool that connects itself may not reach
        // either; a host the user configured for a tool (a search API) was their choice.
        if let Some(hosts) = &self.sandbox.hosts
            && let Some((host, refusal)) = effects
                .network()
                .iter()
                .filter(|h| !effects.is_configured(h))
                .find_map(|h| hosts.0.refusal(h).map(|r| (h, r)))
        {
            let refused = format!(
                "`{}` may not reach {host}: it is {} (`[sandbox] network = \"allowlist\"`)",
                call.tool, refusal.reason
            );
            if refusal.denied {
                return Decision {
                    verdict: Verdict::Deny {
                        reason: format!("{refused}; do not retry it in another form"),
                    },
                    by: "mode",
                    rule: None,
                    escalation: None,
                };
            }
            return self.beyond_mode(
                Beyond {
                    asked: format!(
                        "`{}` reaches {host}, which is {}",
                        call.tool, refusal.reason
                    ),
                    refused: format!("{refused}; ask the user to add it there if it is needed"),
                },
                None,
            );
        }
        // A host the user configured (a local search API) was their choice, not the model's.
        if let Some(host) = effects
            .network()
            .iter()
            .find(|h| names_private_address(h) && !effects.is_configured(h))
        {
            return self.needs_approval(format!(
                "`{}` reaches {host}, which is this machine or a private network",
                call.tool
            ));
        }
        if let Some(command) = command
            && mode == SandboxMode::DangerFullAccess
            && !is_safe_command(command)
        {
            return self.needs_approval(format!(
                "`{}` runs unconfined (danger-full-access): {command}{}",
                call.tool,
                set_aside.unwrap_or_default()
            ));
        }
        self.allowed("mode")
    }

    fn allowed(&self, by: &'static str) -> Decision {
        Decision {
            verdict: Verdict::Allow,
            by,
            rule: None,
            escalation: None,
        }
    }

    fn roots_text(&self) -> String {
        let roots = self.sandbox.write_roots();
        if roots.is_empty() {
            return "nothing: the session is read-only".to_owned();
        }
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn escalation(&self, justification: &str, command: Option<&str>) -> Beyond {
        Beyond {
            asked: format!(
                "run outside the sandbox: {}\njustification: {justification}",
                command.unwrap_or("")
            ),
            refused: format!(
                "escalation is unavailable here; keep writes inside {} or ask the user to \
                 rerun dsh with `--sandbox danger-full-access`",
                self.roots_text()
            ),
        }
    }

    /// Kind A: ask under `ask`, refuse under `never`, allow under `auto`.
    fn needs_approval(&self, what: String) -> Decision {
        let verdict = match self.approval {
            ApprovalPolicy::Ask => Verdict::Ask { reason: what },
            ApprovalPolicy::Auto => Verdict::Allow,
            ApprovalPolicy::Never => Verdict::Deny {
                reason: format!(
                    "{what}, which needs the user's approval, and this session never asks \
                     (approval policy `never`); do it another way or leave it to the user"
                ),
            },
        };
        Decision {
            verdict,
            by: "policy",
            rule: None,
            escalation: None,
        }
    }

    /// Kind B: ask under `ask`, refuse otherwise.
    fn beyond_mode(&self, beyond: Beyond, escalation: Option<String>) -> Decision {
        let empty_justification = escalation.as_deref().is_some_and(str::is_empty);
        let verdict = if empty_justification {
            Verdict::Deny {
                reason: "an escalation (`escalate: true`) needs a `justification` saying why \
                         the command must run outside the sandbox"
                    .to_owned(),
            }
        } else {
            match self.approval {
                ApprovalPolicy::Ask => Verdict::Ask {
                    reason: beyond.asked,
                },
                ApprovalPolicy::Never | ApprovalPolicy::Auto => Verdict::Deny {
                    reason: format!(
                        "{} (sandbox `{}`, approval policy `{}`)",
                        beyond.refused, self.sandbox.mode, self.approval
                    ),
                },
            }
        };
        Decision {
            verdict,
            by: "mode",
            rule: None,
            escalation,
        }
    }
}

/// What to ask, and what to tell the model when not asking.
struct Beyond {
    asked: String,
    refused: String,
}

/// Whether any simple command of `command` runs `git`.
fn runs_git(command: &str) -> bool {
    simple_commands(command).iter().any(|c| {
        c.split_whitespace()
            .next()
            .is_some_and(|w| w == "git" || w.ends_with("/git"))
    })
}

/// A declared path made absolute: relative paths hang off the caller's working directory.
fn absolute(base: &Path, path: &Path) -> PathBuf {
    lexical(&if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn guard(mode: SandboxMode, approval: ApprovalPolicy) -> Guard {
        Guard {
            sandbox: SandboxPolicy::new(mode, "/ws"),
            approval,
            rules: Rules::default(),
        }
    }

    fn rules(list: &[&str]) -> Vec<Rule> {
        list.iter().map(|r| Rule::parse(r).unwrap()).collect()
    }

    /// What the built-in tools declare for these arguments (they live in a crate above this
    /// one); MCP tools declare nothing.
    fn effects_of(tool: &str, args: &Value) -> ToolEffects {
        let text = |k: &str| args.get(k).and_then(Value::as_str);
        match tool {
            "bash" => {
                let runs = ToolEffects::none().runs(text("command").unwrap_or(""));
                match args.get("escalate").and_then(Value::as_bool) {
                    Some(true) => runs.escalated(text("justification").unwrap_or("")),
                    _ => runs,
                }
            }
            "write" | "edit" => ToolEffects::none().writes(text("file_path").unwrap_or("")),
            "read" => ToolEffects::none().reads(text("file_path").unwrap_or("")),
            "web_fetch" => ToolEffects::none().reaches(text("host").unwrap_or("")),
            t if t.starts_with("mcp__") => ToolEffects::undeclared(),
            _ => ToolEffects::none(),
        }
    }

    fn decide(guard: &Guard, tool: &str, arguments: Value) -> Decision {
        guard.decide(&CallView {
            tool,
            effects: &effects_of(tool, &arguments),
            cwd: Some(Path::new("/ws")),
        })
    }

    fn bash(command: &str) -> Value {
        serde_json::json!({ "command": command, "description": "test" })
    }

    #[test]
    fn an_allow_rule_never_runs_git_unconfined_over_a_planted_repository_config() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        let decide_in = |g: &Guard, command: &str| {
            g.decide(&CallView {
                tool: "bash",
                effects: &ToolEffects::none().runs(command),
                cwd: Some(repo.path()),
            })
        };
        let mut danger = guard(SandboxMode::DangerFullAccess, ApprovalPolicy::Ask);
        danger.rules.allow = rules(&["bash(git status*)"]);
        std::fs::write(repo.path().join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        assert_eq!(decide_in(&danger, "git status").verdict, Verdict::Allow);
        std::fs::write(
            repo.path().join(".git/config"),
            "[core]\n\tfsmonitor = touch /tmp/pwned\n",
        )
        .unwrap();
        let d = decide_in(&danger, "git status");
        let Verdict::Ask { reason } = &d.verdict else {
            panic!("{d:?}")
        };
        assert!(
            reason.contains("core.fsmonitor") && reason.contains("bash(git status*)"),
            "{reason}"
        );
        // Confined, the rule still applies: the planted program would run sandboxed.
        let mut confined = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask);
        confined.rules.allow = rules(&["bash(git status*)"]);
        assert_eq!(decide_in(&confined, "git status").verdict, Verdict::Allow);
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let mut g = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask);
        g.rules.allow = rules(&["bash(git *)"]);
        g.rules.deny = rules(&["bash(git push *)"]);
        g.rules.ask = rules(&["bash(git commit *)"]);
        let push = decide(&g, "bash", bash("git status && git push"));
        assert!(matches!(push.verdict, Verdict::Deny { .. }), "{push:?}");
        assert_eq!(push.by, "rule");
        let commit = decide(&g, "bash", bash("git commit -m x"));
        assert!(matches!(commit.verdict, Verdict::Ask { .. }), "{commit:?}");
        assert_eq!(decide(&g, "bash", bash("git log")).verdict, Verdict::Allow);
    }

    #[test]
    fn reaching_a_private_address_needs_approval_unless_a_domain_rule_allows_it() {
        let fetch = |host: &str| serde_json::json!({ "host": host });
        let mut ask = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask);
        let d = decide(&ask, "web_fetch", fetch("169.254.169.254"));
        let Verdict::Ask { reason } = &d.verdict else {
            panic!("{d:?}")
        };
        assert!(reason.contains("private network"), "{reason}");
        assert_eq!(
            decide(&ask, "web_fetch", fetch("docs.rs")).verdict,
            Verdict::Allow
        );
        let never = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never);
        assert!(matches!(
            decide(&never, "web_fetch", fetch("localhost")).verdict,
            Verdict::Deny { .. }
        ));
        ask.rules.allow = rules(&["web_fetch(domain:localhost)"]);
        assert_eq!(
            decide(&ask, "web_fetch", fetch("localhost")).verdict,
            Verdict::Allow
        );
        ask.rules.deny = rules(&["web_fetch(domain:*.example.com)"]);
        assert!(matches!(
            decide(&ask, "web_fetch", fetch("cdn.example.com")).verdict,
            Verdict::Deny { .. }
        ));
    }

    /// The allow-list as the harness puts it in the policy: `docs.rs` allowed,
    /// `evil.example` denied by name, anything else not listed.
    #[derive(Debug)]
    struct Listed;

    impl crate::proxy::HostPolicy for Listed {
        fn refusal(&self, host: &str) -> Option<crate::proxy::HostRefusal> {
            match host {
                "docs.rs" => None,
                "evil.example" => Some(crate::proxy::HostRefusal {
                    reason: "denied by `[sandbox] denied_domains`".into(),
                    denied: true,
                }),
                _ => Some(crate::proxy::HostRefusal {
                    reason: "not in `[sandbox] allowed_domains`".into(),
                    denied: false,
                }),
            }
        }
    }

    #[test]
    fn a_tool_that_reaches_a_host_the_allowlist_refuses_is_refused_or_asked_saying_why() {
        let fetch = |host: &str| serde_json::json!({ "host": host });
        let listed = |approval| {
            let mut g = guard(SandboxMode::WorkspaceWrite, approval);
            g.sandbox.hosts = Some(crate::proxy::Hosts(std::sync::Arc::new(Listed)));
            g
        };
        let (never, ask, auto) = (
            listed(ApprovalPolicy::Never),
            listed(ApprovalPolicy::Ask),
            listed(ApprovalPolicy::Auto),
        );
        assert_eq!(
            decide(&never, "web_fetch", fetch("docs.rs")).verdict,
            Verdict::Allow
        );
        for g in [&never, &auto] {
            let d = decide(g, "web_fetch", fetch("other.example"));
            let Verdict::Deny { reason } = &d.verdict else {
                panic!("{d:?}")
            };
            assert!(
                reason.contains("`web_fetch` may not reach other.example: it is not in `[sandbox] allowed_domains`"),
                "{reason}"
            );
        }
        let d = decide(&ask, "web_fetch", fetch("other.example"));
        assert!(matches!(d.verdict, Verdict::Ask { .. }), "{d:?}");
        // Denied by name: refused without asking, whatever the policy.
        let d = decide(&ask, "web_fetch", fetch("evil.example"));
        let Verdict::Deny { reason } = &d.verdict else {
            panic!("{d:?}")
        };
        assert!(reason.contains("denied_domains"), "{reason}");
        // A host the user configured for the tool is theirs, not the model's.
        let configured = ToolEffects::none().reaches_configured("search.internal");
        let d = never.decide(&CallView {
            tool: "web_search",
            effects: &configured,
            cwd: Some(Path::new("/ws")),
        });
        assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
        // Without the allow-list the same fetch is allowed.
        let open = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never);
        assert_eq!(
            decide(&open, "web_fetch", fetch("other.example")).verdict,
            Verdict::Allow
        );
    }

    #[test]
    fn confined_bash_runs_without_asking() {
        let g = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask);
        assert_eq!(
            decide(&g, "bash", bash("rm -rf /x")).verdict,
            Verdict::Allow
        );
    }

    #[test]
    fn never_refuses_what_would_ask_with_a_reason() {
        let g = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never);
        let outside = decide(&g, "write", serde_json::json!({"file_path": "/etc/x"}));
        let Verdict::Deny { reason } = outside.verdict else {
            panic!("{outside:?}")
        };
        assert!(reason.contains("outside the writable roots"), "{reason}");
        assert!(reason.contains("Keep writes inside /ws"), "{reason}");

        let danger = guard(SandboxMode::DangerFullAccess, ApprovalPolicy::Never);
        let Verdict::Deny { reason } = decide(&danger, "bash", bash("make install")).verdict else {
            panic!()
        };
        assert!(reason.contains("never asks"), "{reason}");
        assert_eq!(
            decide(&danger, "bash", bash("ls -la")).verdict,
            Verdict::Allow
        );
    }

    #[test]
    fn auto_allows_what_needs_approval_but_refuses_what_goes_beyond_the_mode() {
        let danger = guard(SandboxMode::DangerFullAccess, ApprovalPolicy::Auto);
        assert_eq!(
            decide(&danger, "bash", bash("make")).verdict,
            Verdict::Allow
        );
        let ws = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Auto);
        let outside = decide(&ws, "edit", serde_json::json!({"file_path": "/etc/x"}));
        assert!(matches!(outside.verdict, Verdict::Deny { .. }));
        let inside = decide(&ws, "edit", serde_json::json!({"file_path": "src/a.rs"}));
        assert_eq!(inside.verdict, Verdict::Allow);
    }

    #[test]
    fn read_only_asks_for_every_file_write_under_ask() {
        let g = guard(SandboxMode::ReadOnly, ApprovalPolicy::Ask);
        let d = decide(&g, "write", serde_json::json!({"file_path": "/ws/a"}));
        let Verdict::Ask { reason } = d.verdict else {
            panic!("{d:?}")
        };
        assert!(reason.contains("read-only"), "{reason}");
    }

    #[test]
    fn escalation_goes_through_the_policy_and_needs_a_justification() {
        let request = serde_json::json!({
            "command": "touch /etc/x", "description": "d",
            "escalate": true, "justification": "install the hook"
        });
        let ask = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask);
        let d = decide(&ask, "bash", request.clone());
        let Verdict::Ask { reason } = &d.verdict else {
            panic!("{d:?}")
        };
        assert!(reason.contains("install the hook"), "{reason}");
        assert_eq!(d.escalation.as_deref(), Some("install the hook"));
        for policy in [ApprovalPolicy::Never, ApprovalPolicy::Auto] {
            let d = decide(
                &guard(SandboxMode::WorkspaceWrite, policy),
                "bash",
                request.clone(),
            );
            let Verdict::Deny { reason } = d.verdict else {
                panic!("{d:?}")
            };
            assert!(reason.contains("escalation is unavailable"), "{reason}");
        }
        let bare = serde_json::json!({"command": "x", "description": "d", "escalate": true});
        assert!(matches!(
            decide(&ask, "bash", bare).verdict,
            Verdict::Deny { .. }
        ));
    }

    #[test]
    fn an_mcp_tool_needs_approval_unless_a_rule_allows_it_and_deny_wins() {
        let call = serde_json::json!({"title": "x"});
        for mode in SandboxMode::ALL {
            let ask = guard(mode, ApprovalPolicy::Ask);
            let d = decide(&ask, "mcp__github__create_issue", call.clone());
            let Verdict::Ask { reason } = &d.verdict else {
                panic!("{mode}: {d:?}")
            };
            assert!(reason.contains("MCP server `github`"), "{reason}");
            assert_eq!(d.by, "policy");
        }
        let never = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never);
        let d = decide(&never, "mcp__github__create_issue", call.clone());
        let Verdict::Deny { reason } = d.verdict else {
            panic!("{d:?}")
        };
        assert!(reason.contains("never asks"), "{reason}");
        let auto = guard(SandboxMode::ReadOnly, ApprovalPolicy::Auto);
        assert_eq!(
            decide(&auto, "mcp__github__create_issue", call.clone()).verdict,
            Verdict::Allow
        );

        let mut ruled = guard(SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask);
        ruled.rules.allow = rules(&["mcp__github__*"]);
        ruled.rules.deny = rules(&["mcp__github__delete_repo"]);
        let allowed = decide(&ruled, "mcp__github__create_issue", call.clone());
        assert_eq!(allowed.verdict, Verdict::Allow);
        assert_eq!(allowed.rule.as_deref(), Some("allow mcp__github__*"));
        let denied = decide(&ruled, "mcp__github__delete_repo", call.clone());
        assert!(matches!(denied.verdict, Verdict::Deny { .. }), "{denied:?}");
        assert!(matches!(
            decide(&ruled, "mcp__gitlab__x", call).verdict,
            Verdict::Ask { .. }
        ));
    }

    #[test]
    fn policies_parse_their_own_spelling() {
        for p in ApprovalPolicy::ALL {
            assert_eq!(p.as_str().parse::<ApprovalPolicy>(), Ok(p));
        }
        assert!("sometimes".parse::<ApprovalPolicy>().is_err());
    }
}
