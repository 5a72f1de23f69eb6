//! What MCP servers add to the first model request.
//!
//! `cargo bench -p dsh-mcp --bench startup`. Composes the core with the scripted model, mounts
//! the MCP plugin with N test servers that each sleep `DELAY` before serving (a server's own
//! start-up work), creates an agent and sends a prompt, and measures from the mount to the
//! first request the model receives. Prints the median over several samples for no servers
//! and for three; the goal is that three servers starting in 20 ms each add at most 50 ms
//! (they start concurrently, and the request waits only for the slowest).

#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_agent::{AgentOptions, CreateAgentOptions};
use dsh_agent_loop::{CoreConfig, mount_core};
use dsh_guard::{GuardSupervision, SandboxMode, SandboxPolicy, SupervisorProgram};
use dsh_kernel::Context;
use dsh_mcp::{McpOptions, McpPlugin, ServerConfig};
use dsh_session::{Message, SessionMeta};
use dsh_shell::Supervision;
use dsh_testkit::{Script, ScriptedAdapter};

const SAMPLES: usize = 15;
const DELAY: &str = "20";

async fn first_request(servers: usize, delay: &str, sample: usize, confined: bool) -> Duration {
    let ctx = Context::new();
    if confined {
        let supervision = GuardSupervision::new(
            SandboxPolicy::new(SandboxMode::WorkspaceWrite, std::env::temp_dir()),
            SupervisorProgram {
                program: env!("CARGO_BIN_EXE_dsh-mcp-test-supervisor").into(),
                args: Vec::new(),
            },
        );
        ctx.provide::<dyn Supervision>(Arc::new(supervision))
            .unwrap();
    }
    let core = mount_core(&ctx, CoreConfig::default()).await.unwrap();
    let adapter = Arc::new(ScriptedAdapter::new());
    let _registration = adapter.register(&core.llm).unwrap();
    adapter.push(Script::text("done"));
    let configs: Vec<ServerConfig> = (0..servers)
        .map(|i| {
            ServerConfig::stdio(
                format!("s{i}"),
                env!("CARGO_BIN_EXE_dsh-mcp-test-server"),
                vec!["--startup-delay-ms".to_owned(), delay.to_owned()],
            )
        })
        .collect();
    let start = Instant::now();
    let plugin = ctx
        .plugin(McpPlugin::new(
            configs,
            McpOptions::new(std::env::temp_dir()),
        ))
        .await
        .unwrap();
    let handle = core
        .registry
        .create(
            &ctx,
            CreateAgentOptions {
                session_id: Some(format!("bench-{servers}-{sample}").as_str().into()),
                meta: SessionMeta {
                    cwd: Some(std::env::temp_dir()),
                    ..SessionMeta::default()
                },
                agent_options: AgentOptions::route(ScriptedAdapter::ROUTE, "bench"),
                ..CreateAgentOptions::default()
            },
        )
        .await
        .unwrap();
    handle.agent().followup(Message::user_text("go")).unwrap();
    adapter.wait_for_requests(1).await;
    let elapsed = start.elapsed();
    let offered = adapter.requests()[0]
        .tools
        .iter()
        .filter(|t| t.name.starts_with("mcp__"))
        .count();
    assert_eq!(
        offered,
        servers * 7,
        "every server's tools are in the first request"
    );
    handle.agent().when_idle().await;
    handle.dispose().await;
    plugin.dispose().await;
    core.shutdown().await;
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Warm-up: page in the server and supervisor binaries and the runtime.
        first_request(3, DELAY, usize::MAX, true).await;
        let (mut none, mut one, mut instant, mut three, mut confined) =
            (vec![], vec![], vec![], vec![], vec![]);
        for sample in 0..SAMPLES {
            none.push(first_request(0, "0", sample, false).await);
            one.push(first_request(1, DELAY, sample, false).await);
            instant.push(first_request(3, "0", sample, false).await);
            three.push(first_request(3, DELAY, sample, false).await);
            confined.push(first_request(3, DELAY, sample, true).await);
        }
        let (none, three, confined) = (median(none), median(three), median(confined));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!("first model request, median of {SAMPLES}:");
        println!(
            "  no MCP servers:                        {:>8.1} ms",
            ms(none)
        );
        println!(
            "  one server starting in {DELAY} ms:          {:>8.1} ms",
            ms(median(one))
        );
        println!(
            "  three servers starting at once:        {:>8.1} ms",
            ms(median(instant))
        );
        println!(
            "  three servers starting in {DELAY} ms each: {:>8.1} ms",
            ms(three)
        );
        println!(
            "  added by the servers:                  {:>8.1} ms (goal: at most 50 ms)",
            ms(three.saturating_sub(none))
        );
        println!(
            "  the same three, sandboxed:             {:>8.1} ms (adds {:.1} ms)",
            ms(confined),
            ms(confined.saturating_sub(none))
        );
    });
}
