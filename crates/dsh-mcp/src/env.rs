//! The environment of a stdio server, built from nothing rather than filtered from dsh's.
//!
//! A server is someone else's program that dsh starts on the user's behalf: it gets what it
//! needs to run (a short allow-list of inherited variables: where programs are, who the user
//! is, the locale, the temp dir), the variables its config sets or names, and nothing else.
//! Provider keys therefore never reach it, whatever they are called, unless the user writes
//! them into the server's own `env` table. A name in `env_vars` that looks like a secret, or is
//! one of the front end's hidden variables (the provider key variables), is refused: passing a
//! key through by name is exactly the leak this module exists to prevent, and an explicit
//! `env` value is the way to hand a server its own credential.

use std::collections::BTreeMap;
use std::ffi::OsString;

use dsh_shell::env::is_scrubbed;

/// Inherited when set: enough for interpreters (`npx`, `uvx`, `python`) to find themselves and
/// their caches, nothing that identifies a credential.
pub const INHERITED: [&str; 13] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
];

/// A server's full environment: the inherited base from `parent` (normally
/// `std::env::vars_os()`), then the `pass` names, then `explicit` (later wins).
///
/// Returns the names from `pass` that were refused (secret-looking or in `hidden`), so the
/// caller can say so once.
pub fn server_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
    hidden: &[String],
    explicit: &BTreeMap<String, String>,
) -> (Vec<(OsString, OsString)>, Vec<String>) {
    let refused: Vec<String> = pass
        .iter()
        .filter(|name| is_scrubbed(name.as_ref()) || hidden.contains(name))
        .cloned()
        .collect();
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            INHERITED.contains(&name.as_ref())
                || pass.iter().any(|p| *p == name && !refused.contains(p))
        })
        .collect();
    for (name, value) in explicit {
        env.insert(name.into(), value.into());
    }
    (env.into_iter().collect(), refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        vars.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn provider_keys_never_reach_a_server_even_under_innocent_names() {
        let (env, refused) = server_env(
            parent(&[
                ("DEEPSEEK_API_KEY", "sk-1"),
                ("OLLAMA_AUTH", "k"),
                ("PATH", "/usr/bin"),
                ("RANDOM_THING", "x"),
            ]),
            &["OLLAMA_AUTH".to_owned(), "DEEPSEEK_API_KEY".to_owned()],
            &["OLLAMA_AUTH".to_owned()],
            &BTreeMap::new(),
        );
        assert_eq!(names(&env), ["PATH"]);
        assert_eq!(refused, ["OLLAMA_AUTH", "DEEPSEEK_API_KEY"]);
    }

    #[test]
    fn named_and_explicit_variables_are_passed_and_explicit_wins() {
        let explicit = BTreeMap::from([
            ("GITHUB_TOKEN".to_owned(), "ghp".to_owned()),
            ("PATH".to_owned(), "/opt/bin".to_owned()),
        ]);
        let (env, refused) = server_env(
            parent(&[("PATH", "/usr/bin"), ("REGION", "eu"), ("OTHER", "o")]),
            &["REGION".to_owned()],
            &[],
            &explicit,
        );
        assert!(refused.is_empty());
        assert_eq!(
            env,
            parent(&[
                ("GITHUB_TOKEN", "ghp"),
                ("PATH", "/opt/bin"),
                ("REGION", "eu")
            ])
        );
    }
}
