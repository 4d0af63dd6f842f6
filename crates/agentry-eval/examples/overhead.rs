//! What the harness costs per turn, and how many simulations it keeps going at once, against
//! a fast agent (agentry's A2A server answering at once), measured beside the same agent
//! called directly with the A2A client in the same run.
//!
//! `cargo run --release -p agentry-eval --example overhead` (bench/eval.sh).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentry_a2a::client::{A2aClient, ClientConfig};
use agentry_a2a::model::{AgentCard, Message, MessageSendParams, Role};
use agentry_a2a::server::{
    A2aServer, AgentExecutor, AgentService, EventSink, ExecutorError, RequestContext,
};
use agentry_a2a::store::MemoryStore;
use agentry_eval::domain::Domain;
use agentry_eval::metrics;
use agentry_eval::run::agent::{A2aAgent, A2aAgentConfig};
use agentry_eval::run::sim::Limits;
use agentry_eval::run::user::{ScriptTurn, ScriptedUser};
use agentry_eval::run::{EvalConfig, run};

/// Answers every message at once.
struct Fast;
impl AgentExecutor for Fast {
    async fn execute(&self, _ctx: RequestContext, events: EventSink) -> Result<(), ExecutorError> {
        events
            .complete(Some(events.agent_text("Understood. Anything else?")))
            .await
    }
}

const TURNS: usize = 10;

#[tokio::main]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let card = AgentCard::new("fast", "Answers at once.", &base);
    let svc = AgentService::new(card, Fast, Arc::new(MemoryStore::default()));
    let server = A2aServer::new().agent("/", svc);
    tokio::spawn(async move { server.serve(listener, std::future::pending()).await });

    let mock = Domain::builtin("mock").unwrap();
    let task = mock.task("create_task_1").unwrap().clone();
    let client = A2aClient::discover(&base, ClientConfig::default())
        .await
        .unwrap();
    println!("harness overhead against a fast agent (A2A over loopback, non-streaming)");
    println!(
        "concurrency  direct turns/s  harness turns/s  ratio  direct ms/turn  harness ms/turn  overhead ms/turn"
    );
    for concurrency in [1usize, 8, 32, 64] {
        let sims = (concurrency * 4).max(8);
        let turns = sims * TURNS;
        // Direct: the same number of message/send calls, `concurrency` conversations at once.
        let started = Instant::now();
        let mut handles = Vec::new();
        for c in 0..concurrency {
            let client = client.clone();
            let per = turns / concurrency + usize::from(c < turns % concurrency);
            handles.push(tokio::spawn(async move {
                let mut ctx: Option<String> = None;
                for i in 0..per {
                    let mut m = Message::text(Role::User, format!("turn {i}"));
                    m.context_id = ctx.clone();
                    let r = client
                        .send_message(MessageSendParams::new(m))
                        .await
                        .unwrap();
                    if let agentry_a2a::model::SendMessageResult::Task(t) = r {
                        ctx = Some(t.context_id);
                    }
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let direct = started.elapsed();

        // The harness: `sims` simulations of TURNS user turns each.
        let mut tasks = Vec::new();
        let mut scripts = BTreeMap::new();
        for i in 0..sims {
            let mut t = task.clone();
            t.id = format!("t{i}");
            scripts.insert(
                t.id.clone(),
                (0..TURNS - 1)
                    .map(|k| ScriptTurn::Say(format!("message {k}")))
                    .collect::<Vec<_>>(),
            );
            tasks.push(t);
        }
        let agent = A2aAgent::connect(A2aAgentConfig {
            endpoint: base.clone(),
            stream: Some(false),
            timeout: Duration::from_secs(30),
            ..Default::default()
        })
        .await
        .unwrap();
        let cfg = EvalConfig {
            domain: mock.clone(),
            tasks,
            trials: 1,
            concurrency,
            limits: Limits::default(),
            max_retries: 0,
            seed: 300,
            save_to: None,
        };
        let started = Instant::now();
        let results = run(
            cfg,
            Arc::new(agent),
            Arc::new(ScriptedUser::new(scripts)),
            None,
            |_| {},
        )
        .await
        .unwrap();
        let harness = started.elapsed();
        let m = metrics::compute(&results.simulations, 1);
        let harness_turns = m.turn_latency.count;
        assert_eq!(m.infrastructure_errors, 0);
        let d_rate = turns as f64 / direct.as_secs_f64();
        let h_rate = harness_turns as f64 / harness.as_secs_f64();
        let d_ms = direct.as_secs_f64() * 1000.0 * concurrency as f64 / turns as f64;
        let h_ms = harness.as_secs_f64() * 1000.0 * concurrency as f64 / harness_turns as f64;
        println!(
            "{concurrency:>11}  {d_rate:>14.0}  {h_rate:>15.0}  {:>5.2}  {d_ms:>14.2}  {h_ms:>15.2}  {:>16.2}",
            h_rate / d_rate,
            h_ms - d_ms
        );
    }
}
