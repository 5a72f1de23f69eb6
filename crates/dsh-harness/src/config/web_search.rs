//! `[web_search]` in `config.toml`: which search API the model's `web_search` asks.
//!
//! ```toml
//! [web_search]
//! provider = "brave"          # brave | exa | searxng | native
//! api_key_env = "BRAVE_API_KEY" # the default for brave (exa: EXA_API_KEY; searxng takes none)
//! base_url = "http://127.0.0.1:8888"  # required for searxng; the public API otherwise
//! max_results = 8
//! ```
//!
//! Off unless the table names a provider: `web_search` is then not offered at all (a tool the
//! model cannot use would only cost prompt tokens). The key is a secret like a provider's:
//! moved out of the environment at start-up, hidden from commands, never printed.
//!
//! `provider = "native"` asks the model provider's own search instead (Anthropic's
//! `web_search` server tool, run on its servers and billed by it per search; `max_uses`, 5
//! unless set, caps the searches of one request). dsh runs nothing and offers no tool of its
//! own; routes whose API has no such search get none.

use std::fmt::Write as _;
use std::path::Path;

use dsh_fetch::{SearchConfig, SearchProvider};
use serde::Deserialize;
use toml::Spanned;

use super::located;
use crate::error::{ConfigError, config_bail};

/// `[web_search]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileWebSearch {
    provider: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    max_results: Option<Spanned<usize>>,
    max_uses: Option<Spanned<u32>>,
}

/// Searches per request when `max_uses` is not set: enough for a question, few enough that a
/// looping model cannot run up the provider's per-search bill.
const DEFAULT_MAX_USES: u32 = 5;

/// The table resolved: dsh's own `web_search` tool over an API, or the provider's search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebSearchChoice {
    /// dsh's `web_search` tool asks this API.
    Api(WebSearchSettings),
    /// The model provider's own search, offered with each request.
    Provider(dsh_llm::ProviderWebSearch),
}

/// The configured search, before its key is read: what `config show` prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebSearchSettings {
    /// Which API.
    pub provider: SearchProvider,
    /// Where it lives.
    pub base_url: String,
    /// The variable holding its key (`None`: it takes none).
    pub api_key_env: Option<String>,
    /// Results per query.
    pub max_results: usize,
}

impl WebSearchSettings {
    /// The search as the tool takes it, with the key read from `env` (the secrets vault
    /// first). A provider that needs a key without one is refused, naming the variable.
    pub fn config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SearchConfig, ConfigError> {
        let api_key = match &self.api_key_env {
            Some(var) => Some(env(var).ok_or_else(|| {
                ConfigError(format!(
                    "[web_search] provider {} needs its API key in {var}, which is not set \
                     (export it, or remove [web_search] to turn web_search off)",
                    self.provider
                ))
            })?),
            None => None,
        };
        Ok(SearchConfig {
            provider: self.provider,
            base_url: self.base_url.clone(),
            api_key,
            max_results: self.max_results,
        })
    }
}

/// The table's search, checked at `file:line:column`: a known provider, an http(s) base URL
/// (required for SearXNG), a variable name, 1–20 results.
pub(super) fn resolve(
    file: &FileWebSearch,
    path: &Path,
    text: &str,
) -> Result<Option<WebSearchChoice>, ConfigError> {
    let Some(name) = &file.provider else {
        if let Some(other) = file
            .base_url
            .as_ref()
            .map(|v| v.span().start)
            .or(file.api_key_env.as_ref().map(|v| v.span().start))
        {
            config_bail!(
                "invalid config file {}: [web_search] needs `provider` (brave, exa or searxng)",
                located(path, text, other)
            );
        }
        return Ok(None);
    };
    if name.get_ref() == "native" {
        return resolve_native(file, path, text).map(Some);
    }
    if let Some(n) = &file.max_uses {
        config_bail!(
            "invalid config file {}: web_search.max_uses applies to provider \"native\" only \
             (use max_results for {})",
            located(path, text, n.span().start),
            name.get_ref()
        );
    }
    let provider: SearchProvider = match name.get_ref().parse() {
        Ok(p) => p,
        Err(_) => config_bail!(
            "invalid config file {}: web_search.provider {:?} is not one dsh knows: expected \
             brave, exa, searxng or native",
            located(path, text, name.span().start),
            name.get_ref()
        ),
    };
    let base_url = match (&file.base_url, provider.default_base_url()) {
        (Some(url), _) => {
            let value = url.get_ref().trim().to_owned();
            if !(value.starts_with("http://") || value.starts_with("https://")) {
                config_bail!(
                    "invalid config file {}: web_search.base_url must be an http(s) URL, not {value:?}",
                    located(path, text, url.span().start)
                );
            }
            value
        }
        (None, Some(default)) => default.to_owned(),
        (None, None) => config_bail!(
            "invalid config file {}: web_search.base_url is required for {provider} (the \
             address of your instance, e.g. \"http://127.0.0.1:8888\")",
            located(path, text, name.span().start)
        ),
    };
    let api_key_env = match (&file.api_key_env, provider.default_key_env()) {
        (Some(var), _) if var.get_ref().trim().is_empty() => config_bail!(
            "invalid config file {}: web_search.api_key_env is empty",
            located(path, text, var.span().start)
        ),
        (Some(var), _) => Some(var.get_ref().trim().to_owned()),
        (None, default) => default.map(str::to_owned),
    };
    let max_results = match &file.max_results {
        Some(n) if !(1..=20).contains(n.get_ref()) => config_bail!(
            "invalid config file {}: web_search.max_results must be between 1 and 20, not {}",
            located(path, text, n.span().start),
            n.get_ref()
        ),
        Some(n) => *n.get_ref(),
        None => 8,
    };
    Ok(Some(WebSearchChoice::Api(WebSearchSettings {
        provider,
        base_url,
        api_key_env,
        max_results,
    })))
}

/// `provider = "native"`: only `max_uses` (1–50) applies; the API keys are the route's own.
fn resolve_native(
    file: &FileWebSearch,
    path: &Path,
    text: &str,
) -> Result<WebSearchChoice, ConfigError> {
    for (key, at) in [
        ("base_url", file.base_url.as_ref().map(|v| v.span().start)),
        (
            "api_key_env",
            file.api_key_env.as_ref().map(|v| v.span().start),
        ),
        (
            "max_results",
            file.max_results.as_ref().map(|v| v.span().start),
        ),
    ] {
        if let Some(at) = at {
            config_bail!(
                "invalid config file {}: web_search.{key} does not apply to provider \"native\" \
                 (the model provider searches with the route's own key; max_uses caps it)",
                located(path, text, at)
            );
        }
    }
    let max_uses = match &file.max_uses {
        Some(n) if !(1..=50).contains(n.get_ref()) => config_bail!(
            "invalid config file {}: web_search.max_uses must be between 1 and 50, not {}",
            located(path, text, n.span().start),
            n.get_ref()
        ),
        Some(n) => *n.get_ref(),
        None => DEFAULT_MAX_USES,
    };
    Ok(WebSearchChoice::Provider(dsh_llm::ProviderWebSearch {
        max_uses: Some(max_uses),
    }))
}

/// The table's lines of `dsh config show`; the key is named, never shown.
pub(super) fn render(
    out: &mut String,
    search: Option<&WebSearchChoice>,
    env: &dyn Fn(&str) -> Option<String>,
) {
    let s = match search {
        None => {
            let _ = writeln!(
                out,
                "web_search: off (no [web_search] provider; web_fetch is always available)"
            );
            return;
        }
        Some(WebSearchChoice::Provider(p)) => {
            let _ = writeln!(
                out,
                "web_search: native (the provider's own search, at most {} per request; \
                 Anthropic routes only, none elsewhere)",
                p.max_uses.unwrap_or(DEFAULT_MAX_USES)
            );
            return;
        }
        Some(WebSearchChoice::Api(s)) => s,
    };
    let key = match &s.api_key_env {
        Some(var) if env(var).is_some() => format!(", key in {var} (set, redacted)"),
        Some(var) => format!(", key in {var} (NOT SET)"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "web_search: {} at {}, {} results{key}",
        s.provider, s.base_url, s.max_results
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(text: &str) -> Result<Option<WebSearchChoice>, String> {
        #[derive(Deserialize)]
        struct Wrapper {
            web_search: FileWebSearch,
        }
        let file: Wrapper = toml::from_str(text).unwrap();
        resolve(&file.web_search, Path::new("/c.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_fill_in_the_public_api_and_its_key_variable() {
        let Some(WebSearchChoice::Api(s)) = parse("[web_search]\nprovider = \"brave\"\n").unwrap()
        else {
            panic!("an API search")
        };
        assert_eq!(s.base_url, "https://api.search.brave.com");
        assert_eq!(s.api_key_env.as_deref(), Some("BRAVE_API_KEY"));
        assert_eq!(s.max_results, 8);
        assert_eq!(parse("[web_search]\n").unwrap(), None);
    }

    #[test]
    fn mistakes_are_named_at_their_place() {
        let err = parse("[web_search]\nprovider = \"bing\"\n").unwrap_err();
        assert!(err.contains("/c.toml:2:12"), "{err}");
        assert!(
            err.contains("expected brave, exa, searxng or native"),
            "{err}"
        );
        let err = parse("[web_search]\nprovider = \"searxng\"\n").unwrap_err();
        assert!(err.contains("base_url is required for searxng"), "{err}");
        let err = parse("[web_search]\nprovider = \"exa\"\nmax_results = 0\n").unwrap_err();
        assert!(err.contains("/c.toml:3:15"), "{err}");
        let err = parse("[web_search]\nbase_url = \"http://x\"\n").unwrap_err();
        assert!(err.contains("needs `provider`"), "{err}");
    }

    #[test]
    fn a_missing_key_names_its_variable() {
        let Some(WebSearchChoice::Api(s)) = parse("[web_search]\nprovider = \"exa\"\n").unwrap()
        else {
            panic!("an API search")
        };
        let err = s.config(&|_| None).unwrap_err().to_string();
        assert!(err.contains("EXA_API_KEY"), "{err}");
        let cfg = s.config(&|_| Some("k".into())).unwrap();
        assert_eq!(cfg.api_key.as_deref(), Some("k"));
    }

    #[test]
    fn native_search_takes_only_max_uses_and_caps_searches_by_default() {
        assert_eq!(
            parse("[web_search]\nprovider = \"native\"\n").unwrap(),
            Some(WebSearchChoice::Provider(dsh_llm::ProviderWebSearch {
                max_uses: Some(DEFAULT_MAX_USES)
            }))
        );
        assert_eq!(
            parse("[web_search]\nprovider = \"native\"\nmax_uses = 2\n").unwrap(),
            Some(WebSearchChoice::Provider(dsh_llm::ProviderWebSearch {
                max_uses: Some(2)
            }))
        );
        let err =
            parse("[web_search]\nprovider = \"native\"\nbase_url = \"http://x\"\n").unwrap_err();
        assert!(
            err.contains("/c.toml:3:12") && err.contains("does not apply"),
            "{err}"
        );
        let err = parse("[web_search]\nprovider = \"native\"\nmax_uses = 0\n").unwrap_err();
        assert!(err.contains("between 1 and 50"), "{err}");
        let err = parse("[web_search]\nprovider = \"brave\"\nmax_uses = 3\n").unwrap_err();
        assert!(err.contains("native\" only"), "{err}");
    }
}
