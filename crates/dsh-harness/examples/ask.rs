//! Embedding dsh: open a session in a directory, ask one thing, stream the answer and the tool
//! calls to the terminal, exit. The configuration is dsh's own (`~/.dsh/config.toml`, the
//! environment: `DEEPSEEK_API_KEY` for the default provider).
//!
//! `cargo run -p dsh-harness --example ask -- /path/to/project "what does this project do?"`

use dsh_harness::{FrontEnd, Harness, HarnessOptions, Overrides, SessionReference, SessionRequest};
use dsh_session::{EventKind, Message, SessionEventFired, StreamChunk};
use std::io::Write as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(task)) = (args.next(), args.next()) else {
        return Err("usage: ask DIR TASK".into());
    };
    let settings = dsh_harness::Settings::load(&Overrides::default())?;
    settings.check_credentials(&dsh_harness::env::process_env)?;
    let harness = Harness::start(settings, HarnessOptions::new(FrontEnd::Headless)).await?;
    let opened = harness
        .open(SessionRequest::new(SessionReference::New).in_dir(dir))
        .await?;
    let id = opened.id().clone();
    // The durable feed carries every event of every session: keep this one's.
    let _listener = harness.context().on::<SessionEventFired>(move |notice| {
        if notice.session.id() != &id {
            return;
        }
        match &notice.event.kind {
            EventKind::AssistantChunk(c) => {
                if let StreamChunk::TextDelta { text, .. } = &c.chunk {
                    print!("{text}");
                    let _ = std::io::stdout().flush();
                }
            }
            EventKind::ToolCall(call) => println!("\n[{}] {}", call.name, call.arguments),
            _ => {}
        }
    })?;
    opened.agent().followup(Message::user_text(task))?;
    harness.when_quiet(opened.agent()).await;
    println!();
    opened.handle.dispose().await;
    harness.shutdown().await;
    Ok(())
}
