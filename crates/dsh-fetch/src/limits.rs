//! The bounds of one fetch.

use std::time::Duration;

/// How far one `web_fetch` may go. The defaults keep a page from flooding the model's context
/// or holding a turn: most documentation pages are well under a megabyte of HTML and a few
/// tens of thousands of characters of Markdown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchLimits {
    /// Redirect hops followed before giving up.
    pub max_redirects: usize,
    /// Bytes of body read; the rest is not downloaded.
    pub max_bytes: usize,
    /// Characters of text handed to the model; the rest is cut with a note.
    pub max_chars: usize,
    /// The whole fetch, redirects included.
    pub timeout: Duration,
    /// Establishing one connection.
    pub connect_timeout: Duration,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            max_redirects: 5,
            max_bytes: 5 * 1024 * 1024,
            max_chars: 100_000,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}
