//! `web_search`: a query against the configured search API.

use std::fmt::Write as _;
use std::time::Duration;

use async_trait::async_trait;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use crate::config::{SearchConfig, SearchProvider};

const DESCRIPTION: &str = "Search the web. Returns titles, URLs and short snippets of the top \
results; read a result with web_fetch. Prefer specific queries (names, versions, error \
messages).";

/// How long one search may take.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Arguments of `web_search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WebSearchArgs {
    /// What to search for.
    pub query: String,
}

/// One result, as every provider's answer is normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

/// The `web_search` tool over one configured provider.
#[derive(Clone, Debug)]
pub struct WebSearchTool {
    config: SearchConfig,
    base: Url,
    /// Built on the first search (see [`crate::WebFetchTool`] for why not at start-up).
    client: std::sync::Arc<std::sync::OnceLock<Result<reqwest::Client, String>>>,
}

impl WebSearchTool {
    /// The tool for `config`; a base URL that is not an http(s) URL, or a provider that needs
    /// a key without one, is refused here so the mistake shows at start-up.
    pub fn new(config: SearchConfig) -> Result<Self, ToolError> {
        let base = Url::parse(config.base_url.trim_end_matches('/'))
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| {
                ToolError::new(format!(
                    "[web_search] base_url {:?} is not an http(s) URL",
                    config.base_url
                ))
            })?;
        if config.provider.default_key_env().is_some() && config.api_key.is_none() {
            return Err(ToolError::new(format!(
                "[web_search] provider {} needs an API key",
                config.provider
            )));
        }
        Ok(Self {
            config,
            base,
            client: std::sync::Arc::default(),
        })
    }

    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION"), " (web_search)"))
                    // A redirect could carry the key to another host.
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(TIMEOUT)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| ToolError::new(format!("the HTTP client could not be built: {e}")))
    }

    fn endpoint(&self, path: &str, query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        let joined = format!("{}{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    fn key(&self) -> Result<HeaderValue, ToolError> {
        let key = self.config.api_key.as_deref().unwrap_or("");
        let mut value = HeaderValue::from_str(key)
            .map_err(|_| ToolError::new("the search API key is not a valid header value"))?;
        value.set_sensitive(true);
        Ok(value)
    }

    async fn search(&self, query: &str) -> Result<Vec<Hit>, ToolError> {
        let n = self.config.max_results;
        let client = self.client()?;
        let request = match self.config.provider {
            SearchProvider::Brave => client
                .get(self.endpoint(
                    "/res/v1/web/search",
                    &[("q", query), ("count", &n.to_string())],
                ))
                .header("X-Subscription-Token", self.key()?),
            SearchProvider::Exa => client
                .post(self.endpoint("/search", &[]))
                .header("x-api-key", self.key()?)
                .header(CONTENT_TYPE, "application/json")
                .body(
                    json!({
                        "query": query,
                        "numResults": n,
                        "contents": {"text": {"maxCharacters": 400}},
                    })
                    .to_string(),
                ),
            SearchProvider::Searxng => {
                client.get(self.endpoint("/search", &[("q", query), ("format", "json")]))
            }
        };
        let response = request
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| {
                ToolError::new(format!("the {} search failed: {e}", self.config.provider))
            })?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let detail: String = body.chars().take(300).collect();
            return Err(ToolError::new(format!(
                "the {} search API answered {status}: {detail}",
                self.config.provider
            )));
        }
        let value: Value = serde_json::from_str(&body).map_err(|e| {
            ToolError::new(format!(
                "the {} search API did not answer JSON ({e})",
                self.config.provider
            ))
        })?;
        let mut hits = hits_of(self.config.provider, &value);
        hits.truncate(n);
        Ok(hits)
    }
}

/// Each provider's result list, normalised.
fn hits_of(provider: SearchProvider, value: &Value) -> Vec<Hit> {
    let (list, snippet_key) = match provider {
        SearchProvider::Brave => (&value["web"]["results"], "description"),
        SearchProvider::Exa => (&value["results"], "text"),
        SearchProvider::Searxng => (&value["results"], "content"),
    };
    fn text<'v>(v: &'v Value, k: &str) -> &'v str {
        v.get(k).and_then(Value::as_str).unwrap_or("").trim()
    }
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter(|item| !text(item, "url").is_empty())
                .map(|item| Hit {
                    title: text(item, "title").to_owned(),
                    url: text(item, "url").to_owned(),
                    snippet: strip_tags(text(item, snippet_key)),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Brave marks matches with `<strong>`; the model needs the words, not the markup.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn render(query: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("No results for {query:?}.");
    }
    let mut out = format!("Results for {query:?}:");
    for (i, hit) in hits.iter().enumerate() {
        let title = if hit.title.is_empty() {
            &hit.url
        } else {
            &hit.title
        };
        let _ = write!(out, "\n\n{}. {title}\n   {}", i + 1, hit.url);
        if !hit.snippet.is_empty() {
            let _ = write!(out, "\n   {}", hit.snippet);
        }
    }
    out
}

#[async_trait]
impl TypedTool for WebSearchTool {
    type Args = WebSearchArgs;

    fn name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn is_concurrency_safe(&self, _args: &WebSearchArgs) -> bool {
        true
    }

    fn effects(&self, _args: &WebSearchArgs) -> ToolEffects {
        ToolEffects::none().reaches_configured(self.base.host_str().unwrap_or(""))
    }

    async fn run(
        &self,
        args: WebSearchArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let query = args.query.trim();
        if query.is_empty() {
            return Err(ToolError::invalid_arguments(
                "web_search",
                "`query` is empty",
            ));
        }
        let hits = tokio::select! {
            biased;
            () = call.cancel().cancelled() => return Err(ToolError::aborted()),
            hits = self.search(query) => hits?,
        };
        let meta = json!({
            "provider": self.config.provider.as_str(),
            "query": query,
            "results": hits.iter().map(|h| h.url.as_str()).collect::<Vec<_>>(),
        });
        Ok(ToolOutput::text(render(query, &hits)).with_meta(meta))
    }

    fn present_call(&self, args: &WebSearchArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Search the web: {}", args.query),
            kind: ToolKind::Search,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_answer_becomes_the_same_hits() {
        let brave = json!({"web": {"results": [
            {"title": "Tokio", "url": "https://tokio.rs/", "description": "An <strong>async</strong> runtime"},
            {"title": "no url"}
        ]}});
        assert_eq!(
            hits_of(SearchProvider::Brave, &brave),
            [Hit {
                title: "Tokio".into(),
                url: "https://tokio.rs/".into(),
                snippet: "An async runtime".into()
            }]
        );
        let searx =
            json!({"results": [{"title": "A", "url": "https://a.example/", "content": "c"}]});
        assert_eq!(hits_of(SearchProvider::Searxng, &searx)[0].snippet, "c");
        let exa = json!({"results": [{"title": "B", "url": "https://b.example/", "text": "t"}]});
        assert_eq!(
            hits_of(SearchProvider::Exa, &exa)[0].url,
            "https://b.example/"
        );
        assert!(hits_of(SearchProvider::Exa, &json!({})).is_empty());
    }

    #[test]
    fn results_are_numbered_with_url_and_snippet() {
        let hits = [Hit {
            title: String::new(),
            url: "https://x.example/".into(),
            snippet: "s".into(),
        }];
        assert_eq!(
            render("q", &hits),
            "Results for \"q\":\n\n1. https://x.example/\n   https://x.example/\n   s"
        );
        assert_eq!(render("q", &[]), "No results for \"q\".");
    }
}
