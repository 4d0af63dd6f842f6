//! Connects to an MCP server over stdio and prints the negotiated protocol revision (with
//! debug logs): `cargo run -p agentry-mcp --example probe -- COMMAND [ARGS...]`.
use agentry_mcp::*;
#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter("debug")
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let c = McpClient::connect(
        McpServerSpec::stdio("x", &args[0], &a),
        &LaunchPolicy::any(),
    )
    .await
    .unwrap();
    println!("{}", c.protocol_version().await.unwrap());
}
