//! What a fetched body is, and the text the model reads of it.

/// How a body is shown to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// HTML, shown as Markdown.
    Html,
    /// Text of another type (plain, Markdown, JSON, XML, source code), shown as it is.
    Text,
    /// Anything else: named, not shown.
    Binary,
}

/// The media type of a `Content-Type` value, lower case, without parameters.
pub(crate) fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Classifies a body by its declared type; a body without one is sniffed (text if it is UTF-8
/// without NUL bytes, HTML if it starts like a page).
pub(crate) fn classify(content_type: Option<&str>, body: &[u8]) -> Kind {
    let Some(declared) = content_type.map(essence).filter(|e| !e.is_empty()) else {
        return sniff(body);
    };
    match declared.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        t if t.starts_with("text/") => Kind::Text,
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/ecmascript"
        | "application/x-javascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml"
        | "application/x-sh"
        | "application/sql"
        | "application/graphql"
        | "application/ld+json" => Kind::Text,
        t if t.ends_with("+json") || t.ends_with("+xml") => Kind::Text,
        _ => Kind::Binary,
    }
}

fn sniff(body: &[u8]) -> Kind {
    let Ok(text) = std::str::from_utf8(body) else {
        return Kind::Binary;
    };
    if text.contains('\0') {
        return Kind::Binary;
    }
    let head = text
        .trim_start()
        .get(..15)
        .unwrap_or("")
        .to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// The text of a body: HTML converted to Markdown (scripts, styles and page chrome dropped),
/// other text decoded as UTF-8 (invalid sequences replaced).
pub(crate) fn text_of(kind: Kind, body: &[u8]) -> String {
    let raw = String::from_utf8_lossy(body);
    match kind {
        Kind::Html => markdown(&raw),
        Kind::Text | Kind::Binary => raw.into_owned(),
    }
}

/// HTML as Markdown. Scripts, styles and page furniture (navigation, forms, frames) carry no
/// content a model needs; dropping them keeps the answer to what the page says.
fn markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec![
            "script", "style", "noscript", "template", "svg", "canvas", "iframe", "form", "button",
            "select", "nav", "head",
        ])
        .build();
    match converter.convert(html) {
        Ok(markdown) => collapse_blank_lines(&markdown),
        // html5ever recovers from any input; a failure here is the converter's own. The text
        // with tags is still better than nothing.
        Err(e) => {
            tracing::debug!(%e, "HTML could not be converted to Markdown");
            html.to_owned()
        }
    }
}

/// At most one blank line in a row (converted pages are full of empty blocks).
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim().to_owned()
}

/// `text` cut to `max` characters on a character boundary; the flag says whether it was cut.
pub(crate) fn cap_chars(text: String, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_decide_and_missing_ones_are_sniffed() {
        assert_eq!(classify(Some("text/html; charset=utf-8"), b""), Kind::Html);
        assert_eq!(classify(Some("text/markdown"), b""), Kind::Text);
        assert_eq!(classify(Some("application/vnd.api+json"), b""), Kind::Text);
        assert_eq!(classify(Some("image/png"), b"text"), Kind::Binary);
        assert_eq!(
            classify(Some("application/octet-stream"), b"x"),
            Kind::Binary
        );
        assert_eq!(classify(None, b"  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(classify(None, b"plain words"), Kind::Text);
        assert_eq!(classify(None, b"\x89PNG\r\n\x1a\n\0\0"), Kind::Binary);
    }

    #[test]
    fn html_becomes_markdown_without_scripts_or_navigation() {
        let html = "<html><head><title>T</title><style>p{}</style></head><body>\
                    <nav><a href='/'>Home</a></nav><h1>Install</h1>\
                    <p>Run <code>cargo add x</code>.</p><script>alert(1)</script>\
                    <ul><li>one</li><li>two</li></ul></body></html>";
        let md = text_of(Kind::Html, html.as_bytes());
        assert!(md.starts_with("# Install"), "{md}");
        assert!(md.contains("Run `cargo add x`."), "{md}");
        assert!(
            md.contains("*   one") || md.contains("- one") || md.contains("* one"),
            "{md}"
        );
        assert!(!md.contains("alert"), "{md}");
        assert!(!md.contains("Home"), "{md}");
        assert!(!md.contains("p{}"), "{md}");
    }

    #[test]
    fn capping_cuts_on_a_character_boundary() {
        assert_eq!(cap_chars("héllo".into(), 2), ("hé".into(), true));
        assert_eq!(cap_chars("hé".into(), 2), ("hé".into(), false));
    }
}
