//! Classifying provider errors into normalized failure codes, and making provider text fit
//! for a failure message. Every adapter parses its own error bodies, then passes the text here,
//! so the same wording gets the same code on every route.

use std::time::{Duration, SystemTime};

use dsh_llm::FailureCode;
use reqwest::header::HeaderMap;

const QUOTA_WORDING: &[&str] = &[
    "insufficient balance",
    "insufficient_balance",
    "insufficient quota",
    "insufficient_quota",
    "insufficient credits",
    "insufficient credit",
    "quota exceeded",
    "exceeded your current quota",
    "out of credits",
    "credit balance is too low",
];

const CONTEXT_WORDING: &[&str] = &[
    "maximum context length",
    "context_length_exceeded",
    "context length",
    "too long",
    "exceeds context",
    "exceeds the context",
    "context window",
    // llama.cpp's server: "the request exceeds the available context size", type
    // `exceed_context_size_error`.
    "exceeds the available context size",
    "exceed_context_size",
];

/// The failure code for an error with HTTP `status` (absent mid-stream) and `text` (message,
/// type and code of the provider's error, lower-cased by the caller or not).
pub fn classify_failure(status: Option<u16>, text: &str) -> FailureCode {
    let text = text.to_ascii_lowercase();
    if QUOTA_WORDING.iter().any(|w| text.contains(w)) {
        return FailureCode::Quota;
    }
    match status {
        Some(401 | 403) => FailureCode::Auth,
        Some(429) => FailureCode::RateLimit,
        Some(413) => FailureCode::InvalidRequest,
        Some(400) if CONTEXT_WORDING.iter().any(|w| text.contains(w)) => {
            FailureCode::ContextWindowExceeded
        }
        Some(400) => FailureCode::InvalidRequest,
        Some(s) if s >= 500 => FailureCode::Server,
        Some(s) => FailureCode::Http(s),
        None if CONTEXT_WORDING.iter().any(|w| text.contains(w)) => {
            FailureCode::ContextWindowExceeded
        }
        None => FailureCode::Server,
    }
}

/// The most characters of provider-supplied text a failure message carries.
const MAX_MESSAGE_CHARS: usize = 1000;

/// Provider text made fit for a failure message, which ends up in the session log and on the
/// user's terminal: an HTML page (a proxy's or load balancer's error page) is reduced to its
/// title, else its text; control characters (terminal escapes included) become spaces;
/// whitespace runs collapse; the result is cut at [`MAX_MESSAGE_CHARS`].
pub fn readable_error(text: &str) -> String {
    let trimmed = text.trim_start();
    let html;
    // Markup with closing tags; a message like `<nil>` stays as it is.
    let text = if trimmed.starts_with('<') && trimmed.contains("</") {
        html = html_text(trimmed);
        html.as_str()
    } else {
        text
    };
    let mut out = String::with_capacity(text.len().min(MAX_MESSAGE_CHARS));
    let mut chars = 0;
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
    {
        if chars > 0 {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= MAX_MESSAGE_CHARS {
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    out
}

/// The readable text of an HTML page: its `<title>` when it has one, else its text without
/// tags, scripts and style sheets.
fn html_text(page: &str) -> String {
    // ASCII lower-casing keeps byte offsets, so positions found in `lower` index `page`.
    let lower = page.to_ascii_lowercase();
    if let Some(open) = lower.find("<title")
        && let Some(start) = lower[open..].find('>').map(|i| open + i + 1)
        && let Some(len) = lower[start..].find("</title")
        && !page[start..start + len].trim().is_empty()
    {
        return page[start..start + len].to_owned();
    }
    let mut text = String::new();
    let mut rest = 0;
    while let Some(tag) = lower[rest..].find('<').map(|i| rest + i) {
        text.push_str(&page[rest..tag]);
        text.push(' ');
        let skip_to = ["<script", "<style"]
            .iter()
            .find(|t| lower[tag..].starts_with(**t))
            .and_then(|t| {
                lower[tag..]
                    .find(&format!("</{}", &t[1..]))
                    .map(|i| tag + i)
            });
        let from = skip_to.unwrap_or(tag);
        match lower[from..].find('>') {
            Some(end) => rest = from + end + 1,
            None => return text,
        }
    }
    text.push_str(&page[rest..]);
    text
}

/// `Retry-After` in milliseconds: delta-seconds or an HTTP date, positive only.
pub fn retry_after_ms(headers: &HeaderMap, now: SystemTime) -> Option<u64> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    let delay = match value.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Duration::from_secs_f64(secs.min(1e9)),
        Ok(_) => return None,
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .ok()?,
    };
    let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    (ms > 0).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn status_and_wording_map_to_codes() {
        let cases: &[(Option<u16>, &str, FailureCode)] = &[
            (Some(401), "bad key", FailureCode::Auth),
            (Some(403), "forbidden", FailureCode::Auth),
            (Some(402), "Insufficient Balance", FailureCode::Quota),
            (
                Some(429),
                "You exceeded your current quota",
                FailureCode::Quota,
            ),
            (Some(429), "slow down", FailureCode::RateLimit),
            (Some(413), "payload", FailureCode::InvalidRequest),
            (
                Some(400),
                "This model's maximum context length is 65536 tokens",
                FailureCode::ContextWindowExceeded,
            ),
            (Some(400), "bad field", FailureCode::InvalidRequest),
            (Some(503), "overloaded", FailureCode::Server),
            (Some(418), "teapot", FailureCode::Http(418)),
        ];
        for (status, text, code) in cases {
            assert_eq!(&classify_failure(*status, text), code, "{status:?} {text}");
        }
    }

    #[test]
    fn every_listed_context_length_error_is_context_window_exceeded() {
        for text in [
            // DeepSeek, OpenAI and vLLM.
            "This model's maximum context length is 131072 tokens. However, you requested 140000",
            "context_length_exceeded",
            // Anthropic-style.
            "prompt is too long: 210000 tokens > 200000 maximum",
            // llama.cpp's server (message and error type).
            "request (40000 tokens) exceeds the available context size (32768 tokens), try \
             increasing it",
            "exceed_context_size_error",
        ] {
            assert_eq!(
                classify_failure(Some(400), text),
                FailureCode::ContextWindowExceeded,
                "{text}"
            );
        }
    }

    #[test]
    fn provider_text_is_reduced_to_a_short_single_line_without_markup_or_escapes() {
        let nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n\
                     <center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>";
        assert_eq!(readable_error(nginx), "502 Bad Gateway");
        let untitled = "<!DOCTYPE html><html><head><style>body { color: red }</style>\
                        <script>var x = '<b>';</script></head><body><p>Upstream\n  timed out</p>\
                        </body></html>";
        assert_eq!(readable_error(untitled), "Upstream timed out");
        assert_eq!(
            readable_error("\u{1b}[31mkey\u{1b}[0m\tinvalid\u{7}"),
            "[31mkey [0m invalid"
        );
        let long = readable_error(&"word ".repeat(1000));
        assert_eq!(long.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(readable_error("<nil>"), "<nil>");
        assert_eq!(readable_error("<p>unclosed</p><b"), "unclosed");
        assert_eq!(readable_error("  plain  text "), "plain text");
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates_and_ignores_the_rest() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_ms(&h, now), Some(2000));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        assert_eq!(retry_after_ms(&h, now), Some(30_000));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        h.insert("retry-after", HeaderValue::from_str(&earlier).unwrap());
        assert_eq!(retry_after_ms(&h, now), None);
        for bad in ["0", "-3", "soon"] {
            h.insert("retry-after", HeaderValue::from_static(bad));
            assert_eq!(retry_after_ms(&h, now), None, "{bad}");
        }
    }
}
