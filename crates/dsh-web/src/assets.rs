//! The UI's files, embedded in the binary and served with validators and compression.
//!
//! Every file under `assets/` is compiled into dsh (`rust-embed` with `debug-embed`, so a
//! debug build is as self-contained as a release one). At start each text file is gzipped
//! once; a browser that accepts gzip gets that copy. Every answer carries a strong `ETag` (the
//! file's SHA-256) and `Cache-Control: no-cache`: the browser keeps the files and asks each
//! time whether they changed, so a new dsh never runs an old UI, and an unchanged file costs a
//! `304` with no body.

use std::collections::HashMap;
use std::io::Write as _;

use axum::body::{Body, Bytes};
use axum::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

#[derive(rust_embed::Embed)]
#[folder = "assets/"]
struct Files;

/// Files smaller than this are sent as they are: gzip would save less than its header costs.
const COMPRESS_FROM: usize = 512;

/// One file, ready to send.
struct Asset {
    /// Shared by every answer (a reference count, no copy per request).
    body: Bytes,
    gzip: Option<Bytes>,
    etag: HeaderValue,
    content_type: &'static str,
}

/// Every embedded file by its URL path (`/index.html`, `/app.js`, …).
pub(crate) struct Assets {
    files: HashMap<String, Asset>,
}

impl Assets {
    /// Reads and compresses every embedded file.
    pub(crate) fn load() -> Assets {
        let mut files = HashMap::new();
        for path in Files::iter() {
            let Some(file) = Files::get(&path) else {
                continue;
            };
            let content_type = content_type(&path);
            let body = Bytes::from(file.data.into_owned());
            let gzip = (content_type.starts_with("text/")
                || content_type.starts_with("application/json")
                || content_type.starts_with("image/svg"))
            .then(|| gzip(&body))
            .flatten()
            .filter(|z| body.len() >= COMPRESS_FROM && z.len() < body.len())
            .map(Bytes::from);
            let hash = file.metadata.sha256_hash();
            let etag: String = hash[..16].iter().map(|b| format!("{b:02x}")).collect();
            // Hex digits in quotes: always a valid header value.
            let Ok(etag) = HeaderValue::from_str(&format!("\"{etag}\"")) else {
                continue;
            };
            files.insert(
                format!("/{path}"),
                Asset {
                    body,
                    gzip,
                    etag,
                    content_type,
                },
            );
        }
        Assets { files }
    }

    /// The answer to a `GET` of `path` (`/` is the page).
    pub(crate) fn answer(&self, path: &str, headers: &HeaderMap) -> Response {
        let path = if path == "/" { "/index.html" } else { path };
        let Some(asset) = self.files.get(path) else {
            let mut response = Response::new(Body::from("not found\n"));
            *response.status_mut() = StatusCode::NOT_FOUND;
            return response;
        };
        let fresh = headers
            .get_all(IF_NONE_MATCH)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(','))
            .any(|tag| tag.trim() == asset.etag || tag.trim() == "*");
        let gzip = asset.gzip.as_ref().filter(|_| accepts_gzip(headers));
        let mut response = if fresh {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            Response::new(Body::from(gzip.unwrap_or(&asset.body).clone()))
        };
        let out = response.headers_mut();
        out.insert(ETAG, asset.etag.clone());
        out.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        out.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
        if asset.gzip.is_some() {
            out.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        if gzip.is_some() && !fresh {
            out.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        response
    }
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

fn gzip(data: &[u8]) -> Option<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).ok()?;
    encoder.finish().ok()
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn files_carry_an_etag_that_revalidates_to_304_and_text_is_gzipped_when_accepted() {
        let assets = Assets::load();
        let page = assets.answer("/", &HeaderMap::new());
        assert_eq!(page.status(), StatusCode::OK);
        let kind = page.headers()[CONTENT_TYPE].to_str().unwrap();
        assert!(kind.starts_with("text/html"), "{kind}");
        let etag = page.headers()[ETAG].to_str().unwrap().to_owned();
        let again = assets.answer("/index.html", &headers(&[("if-none-match", &etag)]));
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        let full = assets.answer("/style.css", &headers(&[("accept-encoding", "gzip, br")]));
        assert_eq!(full.headers()[CONTENT_ENCODING], "gzip");
        assert_eq!(full.headers()[VARY], "Accept-Encoding");
        let plain = assets.answer("/style.css", &headers(&[("accept-encoding", "gzip;q=0")]));
        assert!(plain.headers().get(CONTENT_ENCODING).is_none());
        assert_eq!(
            assets.answer("/nope.js", &HeaderMap::new()).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn the_vendored_libraries_and_their_licences_are_embedded() {
        let assets = Assets::load();
        for path in [
            "/vendor/preact.module.js",
            "/vendor/hooks.module.js",
            "/vendor/htm.module.js",
            "/vendor/LICENSE-preact",
            "/vendor/LICENSE-htm",
        ] {
            assert_eq!(
                assets.answer(path, &HeaderMap::new()).status(),
                StatusCode::OK,
                "{path}"
            );
        }
    }
}
