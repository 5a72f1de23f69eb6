//! The `dsh` binary.

use clap::Parser;

/// dsh: a harness that runs coding agents against real LLM providers.
#[derive(Parser, Debug)]
#[command(name = "dsh", version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    println!("dsh {}", env!("CARGO_PKG_VERSION"));
    Ok(())
}
