//! `GET {base_url}/models`: the models an OpenAI-compatible server says it serves.
//!
//! Used to pick a model for a local server nobody named one for (llama.cpp's `llama-server`
//! lists the one it loaded, Ollama lists what it pulled). Bounded by a timeout and a body cap,
//! so a server that does not answer delays the start by at most that long.

use std::time::Duration;

use dsh_llm::{FailureCode, LlmFailure, USER_AGENT};
use serde::Deserialize;

/// The most of a `/models` answer read: a list of ids, not a payload.
const MAX_BODY: usize = 1 << 20;

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

/// The model ids `base_url` lists, in the server's order. Fails on an unreachable server, an
/// error status, a timeout, or an answer that is not an OpenAI model list.
pub async fn list_model_ids(base_url: &str, timeout: Duration) -> Result<Vec<String>, LlmFailure> {
    let url = format!("{}/models", base_url.trim().trim_end_matches('/'));
    let failure = |code, what: String| LlmFailure::new(code, format!("GET {url}: {what}"));
    let client = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .map_err(|e| failure(FailureCode::Transport, e.to_string()))?;
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| failure(FailureCode::Transport, e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failure(
            FailureCode::InvalidRequest,
            format!("status {}", status.as_u16()),
        ));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| failure(FailureCode::Transport, e.to_string()))?;
    if body.len() > MAX_BODY {
        return Err(failure(
            FailureCode::MalformedResponse,
            format!("the answer exceeds {MAX_BODY} bytes"),
        ));
    }
    let list: ModelList = serde_json::from_slice(&body)
        .map_err(|e| failure(FailureCode::MalformedResponse, e.to_string()))?;
    Ok(list
        .data
        .into_iter()
        .map(|m| m.id)
        .filter(|id| !id.trim().is_empty())
        .collect())
}
