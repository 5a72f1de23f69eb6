#![allow(clippy::unwrap_used)]
//! Images end to end: `dsh run --image` and the `read_image` tool against the mock provider,
//! for a model that reads images (granted in the config) and one that does not.

mod common;

use common::{World, stderr};
use dsh_testkit::{MockResponse, TINY_PNG};
use serde_json::json;

/// DeepSeek's flash model granted vision, as a user would for a model the table says no to.
fn with_vision(w: &World) {
    std::fs::write(
        w.home.path().join("config.toml"),
        "[models.\"deepseek-v4-flash\"]\nvision = true\n",
    )
    .unwrap();
}

fn picture(w: &World) -> std::path::PathBuf {
    let path = w.cwd.path().join("pic.png");
    std::fs::write(&path, TINY_PNG).unwrap();
    path
}

/// Whether `url` is the data URL of [`TINY_PNG`] (70 bytes: 96 base64 characters, starting
/// with the PNG signature's encoding).
fn is_tiny_png(url: &serde_json::Value) -> bool {
    let url = url.as_str().unwrap_or_default();
    let data = url
        .strip_prefix("data:image/png;base64,")
        .unwrap_or_default();
    data.starts_with("iVBORw0KGgo") && data.len() == TINY_PNG.len().div_ceil(3) * 4
}

#[test]
fn an_attached_image_reaches_a_vision_model_with_the_task() {
    let w = World::new();
    with_vision(&w);
    let pic = picture(&w);
    w.server.push(MockResponse::text("A red and a blue pixel."));
    let out = w.output(&[
        "run",
        "--image",
        pic.to_str().unwrap(),
        "what",
        "is",
        "this?",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    let user = requests[0].messages().last().unwrap().clone();
    assert_eq!(user["role"], "user");
    assert_eq!(
        user["content"][0],
        json!({"type": "text", "text": "what is this?"})
    );
    assert_eq!(user["content"][1]["type"], "image_url");
    assert!(
        is_tiny_png(&user["content"][1]["image_url"]["url"]),
        "{user}"
    );
    // The log names the image; its bytes live once in the attachment store.
    let stored = std::fs::read_dir(w.sessions_root().join("attachments"))
        .unwrap()
        .count();
    assert_eq!(stored, 1);
}

#[test]
fn an_image_for_a_model_that_reads_none_is_refused_before_any_request() {
    let w = World::new();
    let pic = picture(&w);
    let out = w.output(&["run", "--image", pic.to_str().unwrap(), "what is this?"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("model `deepseek-v4-flash` does not read images")
            && err.contains("vision = true"),
        "{err}"
    );
    assert!(w.server.requests().is_empty());
}

#[test]
fn a_file_that_is_not_an_image_is_refused_naming_it() {
    let w = World::new();
    with_vision(&w);
    let notes = w.cwd.path().join("notes.txt");
    std::fs::write(&notes, "just text").unwrap();
    let out = w.output(&["run", "--image", notes.to_str().unwrap(), "look"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("notes.txt") && err.contains("not an image"),
        "{err}"
    );
    let missing = w.output(&["run", "--image", "nowhere.png", "look"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("nowhere.png"),
        "{}",
        stderr(&missing)
    );
    assert!(w.server.requests().is_empty());
}

#[test]
fn read_image_shows_a_vision_model_the_file_and_is_not_offered_to_others() {
    let w = World::new();
    with_vision(&w);
    picture(&w);
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "read_image",
            &json!({"file_path": "pic.png"}).to_string(),
        ))
        .push(MockResponse::text("Two pixels."));
    let out = w.output(&["run", "look", "at", "pic.png"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    let messages = requests[1].messages();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "tool");
    let said = messages[n - 2]["content"].as_str().unwrap();
    assert!(
        said.contains("[1 image(s) follow in the next message]"),
        "{said}"
    );
    assert_eq!(messages[n - 1]["role"], "user");
    assert!(
        is_tiny_png(&messages[n - 1]["content"][1]["image_url"]["url"]),
        "{}",
        messages[n - 1]
    );

    // Without vision the tool is not offered at all.
    let plain = World::new();
    plain.server.push(MockResponse::text("No tool for that."));
    let out = plain.output(&["run", "look"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let tools = serde_json::to_string(&plain.server.requests()[0].body["tools"]).unwrap();
    assert!(
        tools.contains("\"read_file\"") || tools.contains("\"read\""),
        "{tools}"
    );
    assert!(!tools.contains("read_image"), "{tools}");
}

#[test]
fn the_request_prefix_stays_byte_identical_with_an_image_in_the_history() {
    let w = World::new();
    with_vision(&w);
    let pic = picture(&w);
    w.server
        .push(MockResponse::tool_call(
            "call_1",
            "bash",
            &json!({"command": "echo looked"}).to_string(),
        ))
        .push(MockResponse::text("Done."));
    let out = w.output(&["run", "--image", pic.to_str().unwrap(), "look"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let requests = w.server.requests();
    let first = requests[0].messages();
    let second = requests[1].messages();
    // The second request repeats the first byte for byte (the image read back from the
    // store encodes the same), then adds the step: the provider's prompt cache can serve it.
    assert_eq!(
        serde_json::to_string(first).unwrap(),
        serde_json::to_string(&second[..first.len()]).unwrap()
    );
    assert!(second.len() > first.len());
    assert_eq!(requests[0].body["tools"], requests[1].body["tools"]);
}

#[test]
fn a_fifo_given_as_an_image_is_refused_instead_of_waiting_for_a_writer() {
    let w = World::new();
    with_vision(&w);
    let fifo = w.cwd.path().join("pipe.png");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = w.output(&["run", "--image", fifo.to_str().unwrap(), "look"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("pipe.png") && err.contains("FIFO"), "{err}");
    assert!(w.server.requests().is_empty());
}
