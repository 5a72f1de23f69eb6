//! Headless Chromium (Debian's `chromium`), driven over CDP with `chromiumoxide`.
//!
//! The browser is the one the person would use; nothing is mocked. Every wait polls the page
//! with a bounded deadline (the browser is another process), and a missing `chromium` fails
//! the test: `.ci/run` installs it.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::page::Page;
use dsh_testkit::bounded;
use futures::StreamExt as _;
use serde_json::Value;

/// A running headless Chromium with a fresh profile.
pub struct Chromium {
    pub browser: Browser,
    handler: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

fn executable() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "no `chromium` on PATH: install Debian's chromium package (`apt-get install -y chromium`)"
    );
}

impl Chromium {
    pub async fn launch() -> Chromium {
        let profile = tempfile::tempdir().unwrap();
        let config = BrowserConfig::builder()
            .chrome_executable(executable())
            .disable_default_args()
            .no_sandbox()
            .user_data_dir(profile.path())
            .window_size(1280, 800)
            .viewport(None)
            .args([
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ])
            .launch_timeout(Duration::from_secs(60))
            .request_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let (browser, mut events) = bounded(Browser::launch(config)).await.unwrap();
        let handler = tokio::spawn(async move { while events.next().await.is_some() {} });
        Chromium {
            browser,
            handler,
            _profile: profile,
        }
    }

    pub async fn open(&self, url: &str) -> Page {
        bounded(self.browser.new_page(url)).await.unwrap()
    }

    pub async fn close(mut self) {
        let _ = bounded(self.browser.close()).await;
        let _ = bounded(self.browser.wait()).await;
        self.handler.abort();
    }
}

/// The value of a JavaScript expression on `page`.
pub async fn eval(page: &Page, expression: &str) -> Value {
    let result = bounded(page.evaluate(expression))
        .await
        .unwrap_or_else(|e| {
            panic!("evaluating `{expression}` failed: {e}");
        });
    result.value().cloned().unwrap_or(Value::Null)
}

/// Calls the (async) JavaScript function `source` on `page` and awaits what it returns.
pub async fn call(page: &Page, source: &str) -> Value {
    let result = bounded(page.evaluate_function(source))
        .await
        .unwrap_or_else(|e| panic!("calling `{source}` failed: {e}"));
    result.value().cloned().unwrap_or(Value::Null)
}

/// Waits (polling, bounded) until `expression` is truthy on `page`; its last value. While the
/// page navigates there is no context to evaluate in: that counts as not yet.
pub async fn until(page: &Page, expression: &str) -> Value {
    bounded(async {
        loop {
            let value = match page.evaluate(expression).await {
                Ok(result) => result.value().cloned().unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            if super::truthy(&value) {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}

/// Saves what `page` shows as `CARGO_TARGET_TMPDIR/name.png` and prints where.
pub async fn screenshot(page: &Page, name: &str) {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.png"));
    let params = chromiumoxide::page::ScreenshotParams::builder().build();
    bounded(page.save_screenshot(params, &path)).await.unwrap();
    println!("screenshot: {}", path.display());
}

/// Clicks the element `selector` names (the first).
pub async fn click(page: &Page, selector: &str) {
    let element = bounded(page.find_element(selector))
        .await
        .unwrap_or_else(|e| panic!("no element `{selector}`: {e}"));
    bounded(element.click()).await.unwrap();
}

/// Types `text` into the element `selector` names, as keystrokes.
pub async fn type_into(page: &Page, selector: &str, text: &str) {
    let element = bounded(page.find_element(selector)).await.unwrap();
    bounded(element.click()).await.unwrap();
    bounded(element.type_str(text)).await.unwrap();
}
