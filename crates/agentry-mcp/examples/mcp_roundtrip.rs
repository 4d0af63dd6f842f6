//! `tools/call` round trips through agentry's MCP client and through raw rmcp, over stdio and
//! Streamable HTTP, against npm server-everything; and a `tools/list` fan-out to five servers.
//! Prints `KEY=value` lines for `bench/mcp_roundtrip.sh`.
//!
//!     cargo run --release -p agentry-mcp --example mcp_roundtrip -- PATH/TO/server-everything/dist/index.js

use std::time::{Duration, Instant};

use agentry_mcp::rmcp::model::CallToolRequestParams;
use agentry_mcp::*;
use serde_json::{Map, json};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn rounds(client: &McpClient, n: usize) -> (f64, f64) {
    let args: Map<String, serde_json::Value> =
        json!({"message": "hi"}).as_object().cloned().unwrap();
    let mut ours = Vec::new();
    let mut raw = Vec::new();
    let session = client.session().await.unwrap();
    for _ in 0..20 {
        client.call("echo", args.clone()).await.unwrap();
    }
    // Alternate the two so machine noise hits both alike.
    for _ in 0..n {
        let t = Instant::now();
        client.call("echo", args.clone()).await.unwrap();
        ours.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        session
            .peer()
            .call_tool(CallToolRequestParams::new("echo").with_arguments(args.clone()))
            .await
            .unwrap();
        raw.push(t.elapsed().as_secs_f64() * 1e6);
    }
    (median(ours), median(raw))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let js = std::env::args()
        .nth(1)
        .expect("path to server-everything's dist/index.js");
    let n = 300;
    let stdio = McpClient::connect(
        McpServerSpec::stdio("e", "node", &[&js, "stdio"]),
        &LaunchPolicy::any(),
    )
    .await
    .unwrap();
    let (ours, raw) = rounds(&stdio, n).await;
    println!("agentry stdio tools/call: median {ours:.0} µs (raw rmcp {raw:.0} µs)");
    println!("MCP_STDIO_US={ours:.1}\nRMCP_STDIO_US={raw:.1}");

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new("node")
        .args([js.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let http = McpClient::connect(
        McpServerSpec::http("h", &format!("http://127.0.0.1:{port}/mcp")),
        &LaunchPolicy::any(),
    )
    .await
    .unwrap();
    let (ours, raw) = rounds(&http, n).await;
    println!("agentry HTTP tools/call: median {ours:.0} µs (raw rmcp {raw:.0} µs)");
    println!("MCP_HTTP_US={ours:.1}\nRMCP_HTTP_US={raw:.1}");
    let _ = child.start_kill();

    // Fan-out: tools/list on five servers at once vs each alone.
    let mut servers = Vec::new();
    for i in 0..5 {
        servers.push(
            McpClient::connect(
                McpServerSpec::stdio(&format!("s{i}"), "node", &[&js, "stdio"]),
                &LaunchPolicy::any(),
            )
            .await
            .unwrap(),
        );
    }
    let mut slowest = 0f64;
    for s in &servers {
        let mut v = Vec::new();
        for _ in 0..30 {
            let t = Instant::now();
            s.list_tools().await.unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        slowest = slowest.max(median(v));
    }
    let mut fan = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        futures_util::future::join_all(servers.iter().map(|s| s.list_tools())).await;
        fan.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let fan = median(fan);
    println!(
        "fan-out tools/list to 5 servers: {fan:.0} µs wall (slowest single server {slowest:.0} µs)"
    );
    println!("FANOUT_US={fan:.1}\nSLOWEST_US={slowest:.1}");

    // Latency-bound fan-out: five Python SDK servers whose tool waits 100 ms.
    if let (Some(python), Some(script)) = (std::env::args().nth(2), std::env::args().nth(3)) {
        let mut py = Vec::new();
        for i in 0..5 {
            let spec = McpServerSpec::stdio(&format!("p{i}"), &python, &[&script, "stdio"]);
            py.push(
                McpClient::connect(spec, &LaunchPolicy::any())
                    .await
                    .unwrap(),
            );
        }
        let sleep: Map<String, serde_json::Value> =
            json!({"seconds": 0.1}).as_object().cloned().unwrap();
        let mut single = 0f64;
        for s in &py {
            let t = Instant::now();
            s.call("sleep", sleep.clone()).await.unwrap();
            single = single.max(t.elapsed().as_secs_f64() * 1e3);
        }
        let mut v = Vec::new();
        for _ in 0..5 {
            let calls = py
                .iter()
                .map(|c| (c.clone(), "sleep".to_owned(), sleep.clone()))
                .collect();
            let t = Instant::now();
            let r = fan_out(calls, 1, Duration::from_secs(5)).await;
            assert!(r.iter().all(|x| x.result.is_ok()));
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let wall = median(v);
        println!(
            "fan-out of a 100 ms tool to 5 servers: {wall:.1} ms wall (slowest single call {single:.1} ms)"
        );
        println!("FANOUT_SLEEP_MS={wall:.2}\nSINGLE_SLEEP_MS={single:.2}");
    }
}
