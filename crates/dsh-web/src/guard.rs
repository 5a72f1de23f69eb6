//! The door: every request and WebSocket upgrade is checked before anything answers it.
//!
//! In this order, each with its own status:
//! 1. `Host` must name the served address ([`AllowedHosts`]), else 403: DNS rebinding.
//! 2. An `Origin`, when sent (browsers always send one with a WebSocket upgrade), must be the
//!    page's own origin (`http://` + that `Host`), else 403: another site's page talking to
//!    the server through the person's browser.
//! 3. The token ([`Token`]), else 401: as `Authorization: Bearer TOKEN` (programs), or as the
//!    `HttpOnly; SameSite=Strict` cookie the server sets when the page is opened with
//!    `?token=TOKEN` (browsers; the answer moves on to the same path without the token, so it
//!    leaves the address bar and the history).
//!
//! Nothing answers cross-origin requests (no CORS headers, ever), and every answer carries
//! headers that keep the page out of frames, its address out of `Referer`, and scripts to the
//! server's own files. Refusals are logged with the path only: the query may hold the token.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, HOST, ORIGIN,
    REFERRER_POLICY, SET_COOKIE, UPGRADE, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::Response;

use crate::address::AllowedHosts;
use crate::token::Token;

/// The scripts, styles and connections a page of the server may use: its own, nothing inline
/// (the UI has no inline script), no frames, no forms, no plugins.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
     object-src 'none'";

/// What the door knows.
pub(crate) struct Access {
    pub(crate) hosts: AllowedHosts,
    pub(crate) token: Token,
    /// The cookie's name: per port, since cookies are shared by every port of a host.
    pub(crate) cookie: String,
}

/// What happens to a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Served.
    Pass,
    /// Refused with this status and reason.
    Refuse(StatusCode, &'static str),
    /// Opened with the right `?token=`: set the cookie and move on to this path.
    Admit(String),
}

impl Access {
    /// The door's decision for a request (pure, so each rule has its own test).
    pub(crate) fn judge(&self, uri: &Uri, headers: &HeaderMap) -> Verdict {
        let Some(host) = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| self.hosts.allows(h))
        else {
            return Verdict::Refuse(
                StatusCode::FORBIDDEN,
                "this server answers only requests addressed to it (Host)",
            );
        };
        if let Some(origin) = headers.get(ORIGIN) {
            let own = format!("http://{host}");
            if !origin.to_str().is_ok_and(|o| o.eq_ignore_ascii_case(&own)) {
                return Verdict::Refuse(
                    StatusCode::FORBIDDEN,
                    "this server answers only its own pages (Origin)",
                );
            }
        }
        if let Some(given) = query_token(uri) {
            if headers.contains_key(UPGRADE) || !self.token.matches(given) {
                return Verdict::Refuse(StatusCode::UNAUTHORIZED, "wrong token");
            }
            return Verdict::Admit(uri.path().to_owned());
        }
        let bearer = headers
            .get(AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        let cookie = headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie)
            .map(|(_, value)| value);
        match bearer.or(cookie) {
            Some(given) if self.token.matches(given) => Verdict::Pass,
            Some(_) => Verdict::Refuse(StatusCode::UNAUTHORIZED, "wrong token"),
            None => Verdict::Refuse(
                StatusCode::UNAUTHORIZED,
                "a token is required: open the URL `dsh web` printed (it ends in ?token=…), \
                 or send `Authorization: Bearer TOKEN`",
            ),
        }
    }
}

/// The `token` parameter of the query, if any.
fn query_token(uri: &Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .map(|(_, value)| value)
}

/// The answer to a page opened with the right `?token=`: the cookie, and a page that moves on
/// to the same path without the token.
///
/// Not a `303`: the cookie is `SameSite=Strict`, and a browser does not send such a cookie on
/// a navigation another site started (the mode-0600 opener page dsh hands to the desktop is a
/// `file:` page; a link in a chat is another site), redirects included, so the page behind a
/// redirect would be refused. A navigation this page starts itself is same-site. The `meta`
/// refresh replaces the history entry, so the token leaves the history too; `Referrer-Policy:
/// no-referrer` keeps it out of the next request.
fn admit(access: &Access, path: &str) -> Response {
    let escaped = path
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    let page = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={escaped}\">\
         <title>dsh</title><a href=\"{escaped}\">Continue to dsh</a>\n"
    );
    let mut response = Response::new(Body::from(page));
    let cookie = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        access.cookie,
        access.token.expose()
    );
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The token is URL-safe by construction (Token::given): always a valid header value.
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        headers.insert(SET_COOKIE, cookie);
    }
    response
}

/// The middleware: judges, then serves or refuses, and hardens every answer.
pub(crate) async fn check(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    let verdict = access.judge(request.uri(), request.headers());
    let mut response = match verdict {
        Verdict::Pass => next.run(request).await,
        Verdict::Refuse(status, why) => {
            tracing::debug!(path = %request.uri().path(), %status, why, "request refused");
            let mut response = Response::new(Body::from(format!("{why}\n")));
            *response.status_mut() = status;
            let headers = response.headers_mut();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            if status == StatusCode::UNAUTHORIZED {
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
        Verdict::Admit(path) => admit(&access, &path),
    };
    let headers = response.headers_mut();
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::net::SocketAddr;

    fn access() -> Access {
        let local: SocketAddr = "127.0.0.1:3080".parse().unwrap();
        Access {
            hosts: AllowedHosts::new("127.0.0.1", local),
            token: Token::given("the-token-of-this-test").unwrap(),
            cookie: "dsh_web_3080".to_owned(),
        }
    }

    fn judge(uri: &str, headers: &[(&'static str, &str)]) -> Verdict {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        access().judge(&uri.parse().unwrap(), &map)
    }

    const HOST_OK: (&str, &str) = ("host", "127.0.0.1:3080");

    #[test]
    fn the_host_is_checked_before_anything_else() {
        let bearer = ("authorization", "Bearer the-token-of-this-test");
        assert_eq!(judge("/", &[HOST_OK, bearer]), Verdict::Pass);
        assert!(matches!(
            judge("/", &[("host", "rebound.example:3080"), bearer]),
            Verdict::Refuse(StatusCode::FORBIDDEN, _)
        ));
        assert!(matches!(
            judge("/", &[bearer]),
            Verdict::Refuse(StatusCode::FORBIDDEN, _)
        ));
    }

    #[test]
    fn an_origin_must_be_the_pages_own() {
        let cookie = ("cookie", "other=1; dsh_web_3080=the-token-of-this-test");
        assert_eq!(
            judge(
                "/acp",
                &[HOST_OK, cookie, ("origin", "http://127.0.0.1:3080")]
            ),
            Verdict::Pass
        );
        for origin in [
            "http://evil.example",
            "http://localhost:3080",
            "null",
            "https://127.0.0.1:3080",
        ] {
            assert!(
                matches!(
                    judge("/acp", &[HOST_OK, cookie, ("origin", origin)]),
                    Verdict::Refuse(StatusCode::FORBIDDEN, _)
                ),
                "{origin}"
            );
        }
    }

    #[test]
    fn the_token_comes_as_bearer_cookie_or_once_in_the_query() {
        assert!(matches!(
            judge("/", &[HOST_OK]),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            judge("/", &[HOST_OK, ("authorization", "Bearer nope")]),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            judge(
                "/",
                &[HOST_OK, ("cookie", "dsh_web_3081=the-token-of-this-test")]
            ),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
        assert_eq!(
            judge("/?token=the-token-of-this-test", &[HOST_OK]),
            Verdict::Admit("/".to_owned())
        );
        assert!(matches!(
            judge("/?token=guess", &[HOST_OK]),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
        // A WebSocket cannot follow a redirect: the query token is refused there.
        assert!(matches!(
            judge(
                "/acp?token=the-token-of-this-test",
                &[HOST_OK, ("upgrade", "websocket")]
            ),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
    }
}
