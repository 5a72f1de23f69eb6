//! Headless Firefox (Debian's `firefox-esr`), driven over WebDriver through `geckodriver`.
//!
//! WebDriver is plain HTTP and JSON, so the client is a few requests over the workspace's
//! `reqwest` rather than another driver crate. Clicks and keystrokes go through WebDriver's
//! element commands (real input events in the browser), not scripts. A missing `firefox-esr`
//! or `geckodriver` fails the test: `.ci/run` installs them.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use dsh_testkit::bounded;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// The W3C key of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn on_path(names: &[&str], install: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("no `{}` on PATH: {install}", names[0]);
}

/// A WebDriver session in a headless Firefox with a fresh profile.
pub struct Firefox {
    driver: tokio::process::Child,
    http: reqwest::Client,
    session: String,
}

impl Firefox {
    pub async fn launch() -> Firefox {
        let geckodriver = on_path(
            &["geckodriver"],
            "`cargo install geckodriver --locked` (what .ci/run does)",
        );
        let firefox = on_path(
            &["firefox-esr", "firefox"],
            "install Debian's firefox-esr package (`apt-get install -y firefox-esr`)",
        );
        // Port 0: geckodriver picks a free one and says which.
        let mut driver = tokio::process::Command::new(geckodriver)
            .args(["--port", "0", "--log", "info"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own group, which Firefox joins: a failing test takes both down (Drop).
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
        let base = bounded(async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(at) = line.split("Listening on ").nth(1) {
                    return format!("http://{}", at.trim());
                }
            }
            panic!("geckodriver exited before listening");
        })
        .await;
        // Its later output is not needed; keep the pipe drained.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let http = reqwest::Client::new();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "firefox",
            "moz:firefoxOptions": {
                "binary": firefox,
                "args": ["-headless", "-width=1280", "-height=800"],
                "prefs": {"datareporting.policy.dataSubmissionEnabled": false,
                          "browser.shell.checkDefaultBrowser": false},
            },
        }}});
        let answer = send(
            &http,
            reqwest::Method::POST,
            &format!("{base}/session"),
            Some(capabilities),
        )
        .await;
        let session = answer["sessionId"].as_str().unwrap().to_owned();
        Firefox {
            driver,
            http,
            session: format!("{base}/session/{session}"),
        }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        send(
            &self.http,
            reqwest::Method::POST,
            &format!("{}{path}", self.session),
            Some(body),
        )
        .await
    }

    /// Navigates to `url` (returns once the page has loaded).
    pub async fn open(&self, url: &str) {
        self.post("/url", json!({ "url": url })).await;
    }

    /// The value of a JavaScript expression.
    pub async fn eval(&self, expression: &str) -> Value {
        self.post(
            "/execute/sync",
            json!({ "script": format!("return ({expression});"), "args": [] }),
        )
        .await
    }

    /// Waits (polling, bounded) until `expression` is truthy; its last value. A script that
    /// fails (the page is navigating) counts as not yet.
    pub async fn until(&self, expression: &str) -> Value {
        bounded(async {
            loop {
                let script = json!({ "script": format!("return ({expression});"), "args": [] });
                let url = format!("{}/execute/sync", self.session);
                let answer = self
                    .http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(script.to_string())
                    .send()
                    .await;
                let value = match answer {
                    Ok(r) if r.status().is_success() => {
                        let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
                        v["value"].clone()
                    }
                    _ => Value::Null,
                };
                if super::truthy(&value) {
                    return value;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
        .await
    }

    async fn element(&self, selector: &str) -> String {
        let found = self
            .post(
                "/element",
                json!({ "using": "css selector", "value": selector }),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element `{selector}`: {found}"))
            .to_owned()
    }

    /// Clicks the element `selector` names (the first), as a pointer would.
    pub async fn click(&self, selector: &str) {
        let element = self.element(selector).await;
        self.post(&format!("/element/{element}/click"), json!({}))
            .await;
    }

    /// Types `text` into the element `selector` names, as keystrokes.
    pub async fn type_into(&self, selector: &str, text: &str) {
        let element = self.element(selector).await;
        self.post(&format!("/element/{element}/click"), json!({}))
            .await;
        self.post(
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        )
        .await;
    }

    /// Ends the session (Firefox quits) and stops geckodriver.
    pub async fn close(mut self) {
        let _ = bounded(self.http.delete(&self.session).send()).await;
        let _ = self.driver.start_kill();
        let _ = bounded(self.driver.wait()).await;
    }
}

impl Drop for Firefox {
    fn drop(&mut self) {
        // Firefox is geckodriver's child: killing geckodriver alone would leave it running.
        if let Some(pid) = self.driver.id() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// One WebDriver command; its `value`, or a panic naming the command and the error.
async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Value {
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    let response = bounded(request.send()).await.unwrap();
    let status = response.status();
    let answer: Value =
        serde_json::from_slice(&bounded(response.bytes()).await.unwrap()).unwrap_or(Value::Null);
    assert!(
        status.is_success(),
        "WebDriver {url} answered {status}: {answer}"
    );
    answer["value"].clone()
}
