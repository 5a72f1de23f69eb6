//! Typed tools: schemas derived from the argument type, arguments validated before `run`.

#![allow(clippy::unwrap_used)] // Integration tests: a panic is the failure report.

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use common::{exec, runtime};
use dsh_tools::{
    ExecutionMode, INVALID_ARGUMENTS, Tool, ToolCallContext, ToolError, ToolKind, ToolOutput,
    ToolPresentation, TypedTool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// How a command's output is returned.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // Only its schema matters here.
enum OutputMode {
    /// All of it.
    Full,
    /// The last lines.
    Tail,
}

/// Nested options, to check that nested types are inlined.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)] // Only its schema matters here.
struct Options {
    /// Output handling.
    output: OutputMode,
}

/// Arguments of the test `bash` tool.
#[derive(Deserialize, JsonSchema)]
struct BashArgs {
    /// The command to run.
    command: String,
    /// Whether the command only reads.
    #[serde(default)]
    read_only: bool,
    /// Extra options.
    #[serde(default)]
    #[allow(dead_code)] // Only its schema matters here.
    options: Option<Options>,
}

struct Bash;

#[async_trait]
impl TypedTool for Bash {
    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "runs a command"
    }

    fn is_concurrency_safe(&self, args: &BashArgs) -> bool {
        args.read_only
    }

    async fn run(&self, args: BashArgs, _call: &ToolCallContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("ran {}", args.command)))
    }

    fn present_call(&self, args: &BashArgs) -> Option<ToolPresentation> {
        Some(ToolPresentation::Terminal {
            command: args.command.clone(),
            output: None,
            exit: None,
        })
    }
}

#[tokio::test]
async fn parameters_come_from_the_argument_type() {
    let params = Tool::parameters(&Bash);
    assert_eq!(params["type"], "object");
    assert_eq!(params["properties"]["command"]["type"], "string");
    assert_eq!(
        params["properties"]["command"]["description"],
        "The command to run."
    );
    assert_eq!(params["required"], json!(["command"]));
    assert!(params.get("$schema").is_none());
    assert!(params.get("title").is_none());
    // Nested types are inlined: no `$ref` a simple server would fail to resolve.
    let text = params.to_string();
    assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
    assert!(text.contains(r#""const":"tail""#), "{text}");
}

#[tokio::test]
async fn valid_arguments_run_and_invalid_ones_are_specific_error_results() {
    let (ctx, rt) = runtime();
    let _ = rt.register(&ctx, Arc::new(Bash)).unwrap();
    let ok = rt.run(&exec("bash", r#"{"command":"ls"}"#, None)).await;
    assert_eq!(ok.text(), "ran ls");

    let missing = rt.run(&exec("bash", "{}", None)).await;
    assert!(missing.is_error);
    assert_eq!(missing.code(), Some(INVALID_ARGUMENTS));
    assert_eq!(
        missing.text(),
        "Error: invalid arguments for `bash`: missing field `command`"
    );

    let wrong = rt.run(&exec("bash", r#"{"command":42}"#, None)).await;
    assert!(
        wrong
            .text()
            .starts_with("Error: invalid arguments for `bash`: invalid type: integer `42`"),
        "{}",
        wrong.text()
    );

    let garbled = rt.run(&exec("bash", r#"{"command":"ls""#, None)).await;
    assert!(
        garbled
            .text()
            .starts_with("Error: invalid arguments for `bash`: arguments are not valid JSON"),
        "{}",
        garbled.text()
    );
}

#[tokio::test]
async fn classification_and_presentation_use_validated_arguments() {
    let (ctx, rt) = runtime();
    let _ = rt.register(&ctx, Arc::new(Bash)).unwrap();
    let mode = |args: &str| rt.execution_mode(&exec("bash", args, None));
    assert_eq!(
        mode(r#"{"command":"ls","read_only":true}"#),
        ExecutionMode::Parallel
    );
    assert_eq!(mode(r#"{"command":"rm x"}"#), ExecutionMode::Exclusive);
    assert_eq!(mode(r#"{"read_only":true}"#), ExecutionMode::Exclusive);

    let card = Tool::present_call(&Bash, &json!({"command": "ls"})).unwrap();
    assert_eq!(
        serde_json::to_value(&card).unwrap(),
        json!({"card": "terminal", "command": "ls", "output": null, "exit": null})
    );
    assert_eq!(Tool::present_call(&Bash, &json!({})), None);
    let generic = ToolPresentation::Generic {
        title: "Read a.rs".into(),
        kind: ToolKind::Read,
    };
    assert_eq!(
        serde_json::to_value(&generic).unwrap(),
        json!({"card": "generic", "title": "Read a.rs", "kind": "read"})
    );
}
