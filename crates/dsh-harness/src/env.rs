//! The process environment as dsh sees it: the private copy of its secrets, then the rest.
//!
//! The binary moves every secret variable (provider keys, the store's password, bearer tokens)
//! out of its own environment before anything else runs (see `dsh-cli/src/secrets.rs`), so no
//! process it starts can find them in `/proc/<dsh>/environ`. Those values are handed over here
//! once ([`adopt_secrets`]); everything that reads a variable (settings, keys, the store's
//! password, MCP tokens) asks [`process_env`], never `std::env` directly.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::OnceLock;

use dsh_llm_openai::ApiKeySource;

/// The secret variables, moved out of the environment at start-up.
static SECRETS: OnceLock<BTreeMap<OsString, OsString>> = OnceLock::new();

/// Takes over the secret variables the binary moved out of its environment. Only the first
/// call counts: the copy is taken once per process, before any session exists.
pub fn adopt_secrets(secrets: BTreeMap<OsString, OsString>) {
    let _ = SECRETS.set(secrets);
}

/// A secret variable's value from the private copy (`None` when it was not set, or was not
/// secret: those stay in the environment).
pub fn secret(name: &str) -> Option<String> {
    SECRETS
        .get()?
        .get(OsStr::new(name))
        .and_then(|v| v.to_str())
        .map(str::to_owned)
}

/// The names of the secret variables moved out of the environment, for places that must
/// unset them in an environment dsh does not build (an editor's terminal).
pub fn moved_names() -> Vec<String> {
    SECRETS
        .get()
        .map(|secrets| {
            secrets
                .keys()
                .filter_map(|k| k.to_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The process environment, with empty values treated as unset; secret variables come from
/// the private copy.
pub fn process_env(name: &str) -> Option<String> {
    secret(name)
        .or_else(|| std::env::var(name).ok())
        .filter(|v| !v.trim().is_empty())
}

/// The key source of a provider whose key lives in the variable `env`: the value taken at
/// start-up (the environment no longer holds it), or missing.
pub fn key_source(env: &str) -> ApiKeySource {
    match process_env(env) {
        Some(key) => ApiKeySource::captured(env, key),
        None => ApiKeySource::Missing {
            env: env.to_owned(),
        },
    }
}
