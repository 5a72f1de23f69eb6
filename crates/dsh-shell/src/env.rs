//! The environment a command sees: the parent's, minus secrets and managed variables, plus a
//! fixed non-interactive overlay, plus the caller's explicit variables.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// Name fragments that mark a variable as a credential (matched case-insensitively anywhere in
/// the name). Broad on purpose: losing `KEYBOARD_LAYOUT` is cheap, leaking an API key to a
/// model-written command is not.
const SECRET_MARKERS: [&str; 4] = ["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// Prefix of the variables dsh manages itself; inherited values would be stale or belong to an
/// outer dsh, so only the caller's explicit `env` may set them.
const MANAGED_PREFIX: &str = "DSH_";

/// Keeps tools from paging, colouring, drawing or asking questions on a terminal nobody is
/// watching: `GIT_TERMINAL_PROMPT=0` makes git fail at once instead of waiting for a user name
/// and password that will never be typed (a command stuck on a prompt is a turn stuck until its
/// timeout).
const OVERLAY: [(&str, &str); 5] = [
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Whether an inherited variable must not reach a command.
pub fn is_scrubbed(name: &OsStr) -> bool {
    name.to_string_lossy().starts_with(MANAGED_PREFIX) || looks_secret(name)
}

/// Whether a variable's name marks it as a credential (`KEY`, `SECRET`, `TOKEN`, `PASSWORD`,
/// any case). Public so that dsh keeps the same variables out of its *own* environment as it
/// keeps out of commands' (a command can read its parent's `/proc/<pid>/environ`).
pub fn looks_secret(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|marker| upper.contains(marker))
}

/// Computes a command's full environment from `parent` (normally `std::env::vars_os()`), the
/// names to `hide` besides the secret-looking ones ([`ShellConfig::hidden_env`]) and the
/// request's explicit variables.
///
/// [`ShellConfig::hidden_env`]: crate::ShellConfig::hidden_env
///
/// Order, later wins: scrubbed parent < the overlay (`NO_COLOR=1`, `TERM=dumb`, `PAGER=cat`,
/// `GIT_PAGER=cat`, `GIT_TERMINAL_PROMPT=0`) < `explicit`. Explicit variables are trusted (they come from the tool, not the model), so they
/// may re-add `DSH_*` names such as `DSH_SESSION_ID`. Public so that wrapping providers (a
/// sandboxing executor) apply the same policy. The result is sorted by name.
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    hide: &[String],
    explicit: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(name, _)| !is_scrubbed(name) && !hide.iter().any(|h| name == h.as_str()))
        .collect();
    for (name, value) in OVERLAY {
        env.insert(name.into(), value.into());
    }
    for (name, value) in explicit {
        env.insert(name.into(), value.into());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn lookup<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsStr> {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    #[test]
    fn secrets_and_managed_variables_are_scrubbed() {
        let env = child_env(
            parent(&[
                ("MY_API_KEY", "k"),
                ("github_token", "t"),
                ("DB_Password", "p"),
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("DSH_FOO", "f"),
                ("DSH_SESSION_ID", "outer"),
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
            ]),
            &[],
            &[],
        );
        for gone in [
            "MY_API_KEY",
            "github_token",
            "DB_Password",
            "AWS_SECRET_ACCESS_KEY",
            "DSH_FOO",
            "DSH_SESSION_ID",
        ] {
            assert_eq!(lookup(&env, gone), None, "{gone} leaked");
        }
        assert_eq!(lookup(&env, "PATH"), Some(OsStr::new("/usr/bin")));
        assert_eq!(lookup(&env, "HOME"), Some(OsStr::new("/home/u")));
    }

    #[test]
    fn variables_named_as_hidden_are_scrubbed_whatever_their_name() {
        let env = child_env(
            parent(&[("OLLAMA_AUTH", "k"), ("OLLAMA_HOST", "h")]),
            &["OLLAMA_AUTH".to_owned()],
            &[],
        );
        assert_eq!(lookup(&env, "OLLAMA_AUTH"), None);
        assert_eq!(lookup(&env, "OLLAMA_HOST"), Some(OsStr::new("h")));
    }

    #[test]
    fn overlay_replaces_inherited_terminal_settings() {
        let env = child_env(
            parent(&[("TERM", "xterm-256color"), ("PAGER", "less")]),
            &[],
            &[],
        );
        assert_eq!(lookup(&env, "TERM"), Some(OsStr::new("dumb")));
        assert_eq!(lookup(&env, "PAGER"), Some(OsStr::new("cat")));
        assert_eq!(lookup(&env, "GIT_PAGER"), Some(OsStr::new("cat")));
        assert_eq!(lookup(&env, "NO_COLOR"), Some(OsStr::new("1")));
        assert_eq!(lookup(&env, "GIT_TERMINAL_PROMPT"), Some(OsStr::new("0")));
    }

    #[test]
    fn explicit_variables_win_and_may_set_managed_names() {
        let explicit = [
            ("DSH_SESSION_ID".to_owned(), "s1".to_owned()),
            ("TERM".to_owned(), "vt100".to_owned()),
            ("SERVICE_TOKEN".to_owned(), "trusted".to_owned()),
        ];
        let env = child_env(parent(&[("DSH_SESSION_ID", "outer")]), &[], &explicit);
        assert_eq!(lookup(&env, "DSH_SESSION_ID"), Some(OsStr::new("s1")));
        assert_eq!(lookup(&env, "TERM"), Some(OsStr::new("vt100")));
        assert_eq!(lookup(&env, "SERVICE_TOKEN"), Some(OsStr::new("trusted")));
    }

    #[test]
    fn managed_prefix_is_case_sensitive_but_secret_markers_are_not() {
        assert!(!is_scrubbed(OsStr::new("dsh_lower")));
        assert!(is_scrubbed(OsStr::new("my_secret_thing")));
        assert!(is_scrubbed(OsStr::new("Passwordless")));
    }
}
