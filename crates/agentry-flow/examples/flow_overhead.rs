//! Orchestration overhead: a 1,000-step chain of instant steps, and a fan-out of 100 steps that
//! each wait 100 ms. Prints `FLOW_CHAIN_MS`, `FLOW_CHAIN_DB_MS` (with SQLite checkpoints) and
//! `FLOW_FANOUT_MS` for `bench/flow_overhead.sh`.
//!
//!     cargo run --release -p agentry-flow --example flow_overhead

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_flow::*;
use serde_json::json;

struct Instant0;
impl AgentHandle for Instant0 {
    fn name(&self) -> String {
        "instant".into()
    }
    fn description(&self) -> String {
        String::new()
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        single(async move {
            Ok(Reply {
                text: format!("{}+", ask.text.len()),
                ..Default::default()
            })
        })
    }
}

struct Sleeper;
impl AgentHandle for Sleeper {
    fn name(&self) -> String {
        "sleeper".into()
    }
    fn description(&self) -> String {
        String::new()
    }
    fn stream(&self, _ask: Ask) -> UpdateStream<'_> {
        single(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(Reply {
                text: "slept".into(),
                ..Default::default()
            })
        })
    }
}

fn chain(n: usize) -> Workflow {
    let steps = (0..n)
        .map(|i| WorkflowStep {
            id: format!("s{i}"),
            agent: "instant".into(),
            skill: None,
            input: if i == 0 {
                "start".into()
            } else {
                format!("${{steps.s{}.output}}", i - 1)
            },
            depends_on: if i == 0 {
                vec![]
            } else {
                vec![format!("s{}", i - 1)]
            },
            timeout_secs: None,
            retry: Retry::default(),
            on_failure: OnFailure::Fail,
            condition: None,
        })
        .collect();
    Workflow {
        name: "chain".into(),
        description: String::new(),
        inputs: vec![],
        steps,
        output: None,
        max_parallel: None,
    }
}

fn fanout(n: usize) -> Workflow {
    let mut wf = chain(0);
    wf.name = "fanout".into();
    wf.max_parallel = Some(n);
    wf.steps = (0..n)
        .map(|i| WorkflowStep {
            id: format!("f{i}"),
            agent: "sleeper".into(),
            skill: None,
            input: "wait".into(),
            depends_on: vec![],
            timeout_secs: None,
            retry: Retry::default(),
            on_failure: OnFailure::Fail,
            condition: None,
        })
        .collect();
    wf
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut reg = AgentRegistry::new(Mode::Direct);
    reg.add_local(Arc::new(Instant0))
        .add_local(Arc::new(Sleeper));
    let reg = Arc::new(reg);
    let engine = Engine::new(reg.clone());
    // Warm-up.
    engine.run(chain(50), json!({}), None, None).await.unwrap();

    let best = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[0]
    };
    let mut chain_ms = Vec::new();
    for _ in 0..5 {
        let t0 = Instant::now();
        let s = engine
            .run(chain(1000), json!({}), None, None)
            .await
            .unwrap();
        assert_eq!(s.status, RunStatus::Completed);
        chain_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let chain_ms = best(&mut chain_ms);
    println!("agentry: 1,000-step chain: {chain_ms:.1} ms (in memory)");
    println!("FLOW_CHAIN_MS={chain_ms:.2}");

    let db = std::env::temp_dir().join(format!("agentry-bench-{}.db", std::process::id()));
    let store = Arc::new(agentry_core::runs::SqliteRunStore::open(&db).unwrap());
    let durable = Engine::new(reg.clone()).with_store(store);
    let t0 = Instant::now();
    let s = durable
        .run(chain(1000), json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(s.status, RunStatus::Completed);
    let db_ms = t0.elapsed().as_secs_f64() * 1e3;
    println!("agentry: 1,000-step chain: {db_ms:.1} ms (checkpointed to SQLite after every step)");
    println!("FLOW_CHAIN_DB_MS={db_ms:.2}");
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }

    let mut fan_ms = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        let s = engine
            .run(fanout(100), json!({}), None, None)
            .await
            .unwrap();
        assert_eq!(s.status, RunStatus::Completed);
        fan_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let fan = best(&mut fan_ms);
    println!("agentry: fan-out of 100 x 100 ms: {fan:.1} ms wall");
    println!("FLOW_FANOUT_MS={fan:.2}");
}
