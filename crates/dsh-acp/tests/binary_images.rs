#![allow(clippy::unwrap_used)]
//! Image blocks in prompts through the real `dsh acp` binary, against the mock model: stored
//! through the harness and sent as a data URL to a model that reads images, refused by name
//! for one that does not.

mod common;

use agent_client_protocol::ErrorCode;
use agent_client_protocol::v1::schema::{
    ContentBlock as AcpBlock, ImageContent, PromptRequest, StopReason, TextContent,
};
use base64::Engine as _;
use common::child::*;
use dsh_testkit::{MockResponse, MockServer, TINY_PNG};
use serde_json::json;

fn prompt_with_picture(session: &str) -> PromptRequest {
    let data = base64::engine::general_purpose::STANDARD.encode(TINY_PNG);
    PromptRequest::new(
        session.to_owned(),
        vec![
            AcpBlock::Text(TextContent::new("what is this?")),
            AcpBlock::Image(ImageContent::new(data, "image/png")),
        ],
    )
}

#[tokio::test]
async fn an_image_block_reaches_a_vision_model_as_a_data_url_after_the_text() {
    let bin = binary();
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    // DeepSeek's flash model granted vision, as a person would in the config.
    std::fs::write(
        home.path().join("config.toml"),
        "[models.\"deepseek-v4-flash\"]\nvision = true\n",
    )
    .unwrap();
    server.push(MockResponse::text("A red and a blue pixel."));
    let mut child = spawn_in(&bin, &server, home, Launch::default()).await;
    let conn = child.conn();
    let init = conn.initialize().await;
    assert!(init.agent_capabilities.prompt_capabilities.image);
    let id = conn.open().await;
    let answer = conn
        .cx
        .send_request(prompt_with_picture(&id))
        .block_task()
        .await
        .unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let requests = server.requests();
    let user = requests[0].messages().last().unwrap().clone();
    assert_eq!(user["role"], "user");
    assert_eq!(
        user["content"][0],
        json!({"type": "text", "text": "what is this?"})
    );
    assert_eq!(user["content"][1]["type"], "image_url", "{user}");
    let url = user["content"][1]["image_url"]["url"].as_str().unwrap();
    let data = url.strip_prefix("data:image/png;base64,").unwrap();
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
        TINY_PNG
    );
}

#[tokio::test]
async fn an_image_block_for_a_model_without_vision_is_refused_naming_the_model() {
    let bin = binary();
    let server = MockServer::start();
    let mut child = spawn(&bin, &server).await;
    let conn = child.conn();
    conn.initialize().await;
    let id = conn.open().await;
    let error = conn
        .cx
        .send_request(prompt_with_picture(&id))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(
        error
            .message
            .contains("model `deepseek-v4-flash` does not read images"),
        "{}",
        error.message
    );
    assert!(server.requests().is_empty(), "nothing reached the model");
    // The refusal held no slot: a text prompt runs.
    server.push(MockResponse::text("ok"));
    assert_eq!(
        conn.prompt_now(&id, "hi").await.unwrap(),
        StopReason::EndTurn
    );
}
