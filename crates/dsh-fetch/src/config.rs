//! Which search API `web_search` asks.

use std::fmt;
use std::str::FromStr;

/// A search API dsh can ask on the model's behalf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchProvider {
    /// Brave Search API (`X-Subscription-Token`; key in `BRAVE_API_KEY` by default).
    Brave,
    /// Exa (`x-api-key`; key in `EXA_API_KEY` by default).
    Exa,
    /// A SearXNG instance (its JSON format enabled); no key, `base_url` required.
    Searxng,
}

impl SearchProvider {
    /// Every provider.
    pub const ALL: [SearchProvider; 3] = [
        SearchProvider::Brave,
        SearchProvider::Exa,
        SearchProvider::Searxng,
    ];

    /// The spelling used in config.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchProvider::Brave => "brave",
            SearchProvider::Exa => "exa",
            SearchProvider::Searxng => "searxng",
        }
    }

    /// Where its API lives unless configured otherwise (`None`: it must be configured).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            SearchProvider::Brave => Some("https://api.search.brave.com"),
            SearchProvider::Exa => Some("https://api.exa.ai"),
            SearchProvider::Searxng => None,
        }
    }

    /// The variable holding its key unless configured otherwise (`None`: it takes no key).
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            SearchProvider::Brave => Some("BRAVE_API_KEY"),
            SearchProvider::Exa => Some("EXA_API_KEY"),
            SearchProvider::Searxng => None,
        }
    }
}

impl fmt::Display for SearchProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider name that is not one of those dsh knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown search provider {0:?}: expected brave, exa or searxng")]
pub struct UnknownProvider(pub String);

impl FromStr for SearchProvider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SearchProvider::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProvider(s.to_owned()))
    }
}

/// A configured search: which API, where, with which key. The key is the secret itself, read
/// by the front end from its vault; it is sent only to `base_url`.
#[derive(Clone, PartialEq, Eq)]
pub struct SearchConfig {
    /// Which API.
    pub provider: SearchProvider,
    /// Its base URL (scheme, host, optional path prefix).
    pub base_url: String,
    /// The key, for the providers that take one.
    pub api_key: Option<String>,
    /// Results per query (1–20).
    pub max_results: usize,
}

impl fmt::Debug for SearchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_results", &self.max_results)
            .finish()
    }
}
