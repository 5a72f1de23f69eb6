//! The MCP server of dsh's tests; see `dsh_mcp::test_server`.

fn main() {
    dsh_mcp::test_server::main();
}
