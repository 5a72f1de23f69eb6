//! Resources through the agent loop: `list_mcp_resources` and `read_mcp_resource` against a
//! real test-server process.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use dsh_testkit::Script;

#[tokio::test]
async fn a_servers_resources_are_listed_and_read_with_their_mime_type() {
    let w = world_with(vec![test_server("t", &[])]).await;
    w.adapter
        .push(Script::tool_calls([
            ("c1", dsh_mcp::LIST_RESOURCES, "{}"),
            (
                "c2",
                dsh_mcp::READ_RESOURCE,
                r#"{"server":"t","uri":"test://greeting"}"#,
            ),
            (
                "c3",
                dsh_mcp::READ_RESOURCE,
                r#"{"server":"t","uri":"test://dot"}"#,
            ),
            (
                "c4",
                dsh_mcp::READ_RESOURCE,
                r#"{"server":"nope","uri":"test://greeting"}"#,
            ),
        ]))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let names: Vec<String> = w.adapter.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        names.contains(&"list_mcp_resources".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"read_mcp_resource".to_owned()), "{names:?}");
    let results = tool_results(handle.agent());
    let listed: serde_json::Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(listed[0]["server"], "t");
    assert_eq!(listed[0]["uri"], "test://greeting");
    assert_eq!(listed[0]["mimeType"], "text/plain");
    assert_eq!(listed[1]["uri"], "test://dot");
    assert_eq!(
        results[1].1,
        "[resource: test://greeting, text/plain]\nhello resource"
    );
    assert!(!results[1].2);
    // The PNG arrives as an image block after its header line.
    let image = result_image(handle.agent(), "c3").expect("the image resource as an image block");
    assert_eq!(image.media_type, "image/png");
    assert!(results[3].2, "an unknown server is an error");
    assert!(
        results[3].1.contains("no MCP server `nope`"),
        "{}",
        results[3].1
    );
}

#[tokio::test]
async fn a_resources_list_change_is_honoured_by_the_next_listing() {
    let w = world_with(vec![test_server("t", &[])]).await;
    w.adapter
        .push(Script::tool_call("c1", "mcp__t__add_resource", "{}"))
        .push(Script::tool_call(
            "c2",
            dsh_mcp::LIST_RESOURCES,
            r#"{"server":"t"}"#,
        ))
        .push(Script::text("done"));
    let handle = w.agent("a").await;
    w.run(handle.agent(), "go").await;
    let results = tool_results(handle.agent());
    assert_eq!(results[0].1, "added");
    let listed: serde_json::Value = serde_json::from_str(&results[1].1).unwrap();
    let uris: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["test://greeting", "test://dot", "test://added"]);
}
