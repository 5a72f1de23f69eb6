//! The MCP server of dsh's tests; see `dsh_mcp::test_server`.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let flags = match dsh_mcp::test_server::Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(error) => {
            eprintln!("dsh-mcp-test-server: {error}");
            std::process::exit(2);
        }
    };
    if let Err(error) = dsh_mcp::test_server::run(flags).await {
        eprintln!("dsh-mcp-test-server: {error}");
        std::process::exit(1);
    }
}
