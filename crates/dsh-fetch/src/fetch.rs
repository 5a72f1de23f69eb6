//! `web_fetch`: one page, fetched by dsh itself.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use dsh_tools::{
    ToolCallContext, ToolEffects, ToolError, ToolKind, ToolOutput, ToolPresentation, TypedTool,
    names_private_address,
};
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use url::Url;

use crate::body::{Kind, cap_chars, classify, essence, text_of};
use crate::limits::FetchLimits;
use crate::resolve::{Lookup, PublicResolver, system_lookup};

const DESCRIPTION: &str = "Fetch one web page or text resource by URL (http or https) and \
read it: HTML comes back as Markdown, other text as it is; binary content is not shown. Use \
it to read documentation, issues or API references instead of curl in bash. Redirects are \
followed; very long pages are cut.";

/// Arguments of `web_fetch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    /// The http:// or https:// URL to fetch.
    pub url: String,
}

/// The `web_fetch` tool (see the crate docs). Its HTTP client is built on the first fetch, not
/// at start-up: loading the TLS roots costs milliseconds every session would pay for a tool
/// most never call.
#[derive(Clone)]
pub struct WebFetchTool {
    client: Arc<OnceLock<Result<reqwest::Client, String>>>,
    lookup: Lookup,
    limits: Arc<FetchLimits>,
}

impl std::fmt::Debug for WebFetchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchTool")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Why a fetch produced no page, in words the model can act on.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("`{0}` is not a URL web_fetch can fetch: {1}")]
    BadUrl(String, String),
    #[error("the redirect from {from} to {to} was not followed: {why}")]
    RedirectBlocked {
        from: String,
        to: String,
        why: String,
    },
    #[error("more than {0} redirects; the last one pointed at {1}")]
    TooManyRedirects(usize, String),
    #[error("web_fetch does not show binary content: {url} is {content_type} ({bytes} bytes)")]
    Binary {
        url: String,
        content_type: String,
        bytes: usize,
    },
    #[error("fetching {0} took longer than {1} s")]
    Timeout(String, u64),
    #[error("fetching {url} failed: {why}")]
    Transport { url: String, why: String },
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}

/// A page as fetched.
struct Page {
    url: Url,
    status: reqwest::StatusCode,
    content_type: Option<String>,
    body: Vec<u8>,
    /// The body was longer than the byte limit (only the limit was read).
    cut: bool,
}

impl WebFetchTool {
    /// The tool with `limits`. The client sends no cookies and no credentials, follows no
    /// redirect on its own (each hop is checked here), and resolves names through
    /// [`PublicResolver`].
    pub fn new(limits: FetchLimits) -> Self {
        Self::with_lookup(limits, system_lookup())
    }

    /// The tool resolving names through `lookup` instead of the system resolver (the seam for
    /// testing what a hostile DNS answer does).
    pub fn with_lookup(limits: FetchLimits, lookup: Lookup) -> Self {
        Self {
            client: Arc::default(),
            lookup,
            limits: Arc::new(limits),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, FetchError> {
        self.client
            .get_or_init(|| {
                reqwest::Client::builder()
                    .user_agent(concat!("dsh/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
                    .redirect(reqwest::redirect::Policy::none())
                    .connect_timeout(self.limits.connect_timeout)
                    .dns_resolver(Arc::new(PublicResolver::new(self.lookup.clone())))
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| FetchError::Client(e.clone()))
    }

    async fn fetch(&self, start: Url) -> Result<Page, FetchError> {
        let client = self.client()?;
        let mut url = start.clone();
        for hop in 0..=self.limits.max_redirects {
            check_url(&url)?;
            let response = client
                .get(url.clone())
                .header(
                    ACCEPT,
                    "text/html, text/markdown;q=0.9, text/plain;q=0.8, */*;q=0.1",
                )
                .send()
                .await
                .map_err(|e| transport(&url, &e))?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                let next = location
                    .to_str()
                    .ok()
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| FetchError::RedirectBlocked {
                        from: url.to_string(),
                        to: String::from_utf8_lossy(location.as_bytes()).into_owned(),
                        why: "the Location header is not a URL".to_owned(),
                    })?;
                check_hop(&start, &url, &next)?;
                if hop == self.limits.max_redirects {
                    return Err(FetchError::TooManyRedirects(
                        self.limits.max_redirects,
                        next.to_string(),
                    ));
                }
                url = next;
                continue;
            }
            return self.read(url, response).await;
        }
        unreachable!("the loop returns on its last hop")
    }

    async fn read(&self, url: Url, mut response: reqwest::Response) -> Result<Page, FetchError> {
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let declared_len = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        let max = self.limits.max_bytes;
        let mut body = Vec::with_capacity(declared_len.unwrap_or(0).min(max));
        let mut cut = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| transport(&url, &e))? {
            let room = max - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                cut = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Page {
            url,
            status,
            content_type,
            body,
            cut,
        })
    }

    /// What the model reads of `page`, and the facts recorded with the result.
    fn render(&self, requested: &str, page: Page) -> Result<ToolOutput, FetchError> {
        let kind = classify(page.content_type.as_deref(), &page.body);
        let content_type = page
            .content_type
            .as_deref()
            .map(essence)
            .unwrap_or_else(|| "unknown".to_owned());
        if kind == Kind::Binary {
            return Err(FetchError::Binary {
                url: page.url.to_string(),
                content_type,
                bytes: page.body.len(),
            });
        }
        let (text, chars_cut) = cap_chars(text_of(kind, &page.body), self.limits.max_chars);
        let mut out = format!("URL: {}\n", page.url);
        if !page.status.is_success() {
            out.push_str(&format!("Status: {}\n", page.status));
        }
        out.push_str(&format!("Content-Type: {content_type}\n\n{text}"));
        if page.cut {
            out.push_str(&format!(
                "\n\n[web_fetch: the page is larger than {} bytes; only its beginning is shown. \
                 Fetch a more specific URL for the rest]",
                self.limits.max_bytes
            ));
        } else if chars_cut {
            out.push_str(&format!(
                "\n\n[web_fetch: the text is longer than {} characters and was cut here. \
                 Fetch a more specific URL for the rest]",
                self.limits.max_chars
            ));
        }
        let meta = json!({
            "url": requested,
            "finalUrl": page.url.as_str(),
            "status": page.status.as_u16(),
            "contentType": content_type,
            "bytes": page.body.len(),
            "truncated": page.cut || chars_cut,
        });
        Ok(ToolOutput::text(out).with_meta(meta))
    }
}

/// Only `http(s)` URLs with a host and without credentials.
fn check_url(url: &Url) -> Result<(), FetchError> {
    let bad = |why: &str| Err(FetchError::BadUrl(url.to_string(), why.to_owned()));
    if !matches!(url.scheme(), "http" | "https") {
        return bad("only http and https URLs are fetched");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return bad("it has no host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("URLs with credentials are not fetched");
    }
    Ok(())
}

/// A redirect may not lead somewhere the first request would have had to ask about: to a host
/// that names this machine or a private network, unless the request already named that very
/// host (and the user was asked then).
fn check_hop(start: &Url, from: &Url, to: &Url) -> Result<(), FetchError> {
    check_url(to).map_err(|e| FetchError::RedirectBlocked {
        from: from.to_string(),
        to: to.to_string(),
        why: e.to_string(),
    })?;
    let host = to.host_str().unwrap_or("");
    if names_private_address(host) && start.host_str() != Some(host) {
        return Err(FetchError::RedirectBlocked {
            from: from.to_string(),
            to: to.to_string(),
            why: format!("{host} is this machine or a private network"),
        });
    }
    Ok(())
}

fn transport(url: &Url, error: &reqwest::Error) -> FetchError {
    // The resolver's refusal is the actionable part; reqwest wraps it in "error sending
    // request", so name the innermost cause.
    let mut why = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        why = cause.to_string();
        source = cause.source();
    }
    FetchError::Transport {
        url: url.to_string(),
        why,
    }
}

#[async_trait]
impl TypedTool for WebFetchTool {
    type Args = WebFetchArgs;

    fn name(&self) -> &str {
        "web_fetch"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// A fetch changes nothing here; pages may be fetched side by side.
    fn is_concurrency_safe(&self, _args: &WebFetchArgs) -> bool {
        true
    }

    fn effects(&self, args: &WebFetchArgs) -> ToolEffects {
        match Url::parse(args.url.trim()) {
            Ok(url) => match url.host_str() {
                Some(host) => ToolEffects::none().reaches(host),
                None => ToolEffects::none(),
            },
            // Refused before any connection.
            Err(_) => ToolEffects::none(),
        }
    }

    async fn run(
        &self,
        args: WebFetchArgs,
        call: &ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let requested = args.url.trim().to_owned();
        let url = Url::parse(&requested).map_err(|e| {
            ToolError::new(FetchError::BadUrl(requested.clone(), e.to_string()).to_string())
        })?;
        let timeout = self.limits.timeout;
        let page = tokio::select! {
            biased;
            () = call.cancel().cancelled() => {
                return Err(ToolError::aborted());
            }
            page = tokio::time::timeout(timeout, self.fetch(url)) => page
                .unwrap_or_else(|_| Err(FetchError::Timeout(requested.clone(), timeout.as_secs()))),
        };
        page.and_then(|page| self.render(&requested, page))
            .map_err(|e| ToolError::new(e.to_string()))
    }

    fn present_call(&self, args: &WebFetchArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Generic {
            title: format!("Fetch {}", args.url),
            kind: ToolKind::Fetch,
        })
    }
}
