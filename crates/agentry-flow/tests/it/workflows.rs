//! Workflows end to end: dependency graphs, templates, parallelism, retries, failure policies,
//! conditions, local/remote with fallback, cancellation, crash and resume.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentry_core::agent::AgentError;
use agentry_core::handle::{AgentHandle, Ask, Reply, UpdateStream, single};
use agentry_core::llm::BoxFuture;
use agentry_core::runs::{RunStore, SqliteRunStore};
use agentry_flow::*;
use serde_json::json;

type Behaviour =
    Arc<dyn Fn(&str, usize) -> BoxFuture<'static, Result<String, AgentError>> + Send + Sync>;

/// An agent under orchestration, answering by a closure (what it was asked, call number).
struct TestAgent {
    name: String,
    calls: AtomicUsize,
    f: Behaviour,
}

impl AgentHandle for TestAgent {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        format!("the {} agent", self.name)
    }
    fn skills(&self) -> Vec<String> {
        vec![self.name.clone()]
    }
    fn stream(&self, ask: Ask) -> UpdateStream<'_> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let fut = (self.f)(&ask.text, n);
        single(async move {
            Ok(Reply {
                text: fut.await?,
                context_id: ask.context_id,
                ..Default::default()
            })
        })
    }
}

fn agent<F, Fut>(name: &str, f: F) -> Arc<TestAgent>
where
    F: Fn(String, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, AgentError>> + Send + 'static,
{
    Arc::new(TestAgent {
        name: name.into(),
        calls: AtomicUsize::new(0),
        f: Arc::new(move |t, n| Box::pin(f(t.to_owned(), n))),
    })
}

fn registry(agents: &[Arc<TestAgent>]) -> AgentRegistry {
    let mut r = AgentRegistry::new(Mode::A2a);
    for a in agents {
        r.add_local(a.clone());
    }
    r
}

fn wf(yaml: &str) -> Workflow {
    serde_yaml::from_str(yaml).unwrap()
}

async fn run(
    reg: AgentRegistry,
    w: Workflow,
    input: serde_json::Value,
) -> (RunState, Vec<FlowEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let state = Engine::new(Arc::new(reg))
        .run(w, input, Some(tx), None)
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    (state, events)
}

#[tokio::test]
async fn order_fulfilment_runs_in_dependency_order_with_templated_inputs() {
    let inventory = agent("inventory", |t, _| async move {
        assert_eq!(t, r#"Reserve ["book","pen"] for ada"#);
        Ok(r#"{"reservation": "R-17", "total": 12.5}"#.to_owned())
    });
    let payment = agent("payment", |t, _| async move {
        assert_eq!(t, "Charge 12.5 for R-17");
        Ok(r#"{"receipt": "P-9"}"#.to_owned())
    });
    let shipping = agent("shipping", |t, _| async move {
        assert_eq!(t, "Ship R-17 paid by P-9 to ada");
        Ok("Shipped: tracking T-1".to_owned())
    });
    let w = wf(r#"
name: fulfil-order
inputs: [order]
steps:
  - id: inventory
    agent: inventory
    skill: inventory
    input: "Reserve ${input.order.items} for ${input.order.customer}"
  - id: payment
    agent: payment
    depends_on: [inventory]
    input: "Charge ${steps.inventory.output.total} for ${steps.inventory.output.reservation}"
  - id: shipping
    agent: shipping
    depends_on: [payment]
    input: "Ship ${steps.inventory.data.reservation} paid by ${steps.payment.output.receipt} to ${input.order.customer}"
output: "Order done. ${steps.shipping.output}"
"#);
    let (state, events) = run(
        registry(&[inventory, payment, shipping]),
        w,
        json!({"order": {"items": ["book", "pen"], "customer": "ada"}}),
    )
    .await;
    assert_eq!(state.status, RunStatus::Completed, "{state:?}");
    assert_eq!(
        state.final_output.as_deref(),
        Some("Order done. Shipped: tracking T-1")
    );
    let order: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            FlowEvent::StepFinished { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["inventory", "payment", "shipping"]);
    assert!(matches!(
        events.last(),
        Some(FlowEvent::RunFinished {
            status: RunStatus::Completed,
            ..
        })
    ));
}

#[test]
fn invalid_workflows_are_refused_with_every_problem_named() {
    let reg = registry(&[agent("a", |_, _| async { Ok(String::new()) })]);
    let w = wf(r#"
name: broken
inputs: [topic]
steps:
  - id: one
    agent: a
    skill: nope
    input: "${input.subject}"
  - id: two
    agent: ghost
    depends_on: [three, missing]
    input: "${steps.one.output}"
  - id: three
    agent: a
    depends_on: [two]
    input: "${steps.four.output} ${steps.one.answer} ${whatever}"
  - id: four
    agent: a
    input: "${steps.three.output}"
"#);
    let errs: Vec<String> = validate::validate(&w, &reg)
        .unwrap_err()
        .iter()
        .map(|e| e.to_string())
        .collect();
    let has = |s: &str| errs.iter().any(|e| e.contains(s));
    assert!(
        has("step `one`: agent `a` has no skill `nope`"),
        "{errs:#?}"
    );
    assert!(
        has("step `one`: input: `${input.subject}` names an input the workflow does not declare"),
        "{errs:#?}"
    );
    assert!(has("step `two`: unknown agent `ghost`"), "{errs:#?}");
    assert!(
        has("step `two`: depends on unknown step `missing`"),
        "{errs:#?}"
    );
    assert!(
        has(
            "step `two`: input: `${steps.one.output}` reads step `one`, which is not among its dependencies"
        ),
        "{errs:#?}"
    );
    assert!(has("dependency cycle among steps: three, two"), "{errs:#?}");
    assert!(
        has(
            "step `three`: input: `${steps.one.answer}`: a step has output, data, artifacts and status, not `answer`"
        ),
        "{errs:#?}"
    );
    assert!(
        has("step `three`: input: `${whatever}` must start with `input.` or `steps.`"),
        "{errs:#?}"
    );
    assert!(
        has("step `four`: input: `${steps.three.output}` reads step `three`"),
        "{errs:#?}"
    );
}

#[tokio::test]
async fn independent_steps_run_concurrently_within_the_bound() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (f, p) = (in_flight.clone(), peak.clone());
    // Jobs go on in threes, together: three must be running at once for any to finish (no
    // guessed delay), and a fourth running beside them would show in the peak.
    let together = Arc::new(tokio::sync::Barrier::new(3));
    let worker = agent("worker", move |t, _| {
        let (f, p, together) = (f.clone(), p.clone(), together.clone());
        async move {
            let now = f.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            if t.starts_with("job") {
                together.wait().await;
            }
            f.fetch_sub(1, Ordering::SeqCst);
            Ok(format!("did {t}"))
        }
    });
    let steps: String = (0..6)
        .map(|i| format!("  - {{id: s{i}, agent: worker, input: \"job {i}\"}}\n"))
        .collect();
    let w = wf(&format!(
        "name: fan\nmax_parallel: 3\nsteps:\n{steps}  - {{id: join, agent: worker, depends_on: [s0, s1, s2, s3, s4, s5], input: \"${{steps.s0.output}} .. ${{steps.s5.output}}\"}}\n"
    ));
    let (state, _) = run(registry(&[worker]), w, json!({})).await;
    assert_eq!(state.status, RunStatus::Completed);
    assert_eq!(peak.load(Ordering::SeqCst), 3, "three at once, never more");
    assert_eq!(
        state.final_output.as_deref(),
        Some("did did job 0 .. did job 5")
    );
}

#[tokio::test]
async fn retries_then_failure_policies() {
    let flaky = agent("flaky", |_, n| async move {
        if n < 3 {
            Err(AgentError::failed(format!("try {n} failed")))
        } else {
            Ok("finally".into())
        }
    });
    let broken = agent("broken", |_, _| async {
        Err(AgentError::failed("always down"))
    });
    let backup = agent(
        "backup",
        |t, _| async move { Ok(format!("backup did: {t}")) },
    );
    let after = agent("after", |_, _| async { Ok("ran".into()) });
    let w = wf(r#"
name: policies
steps:
  - {id: retry, agent: flaky, input: x, retry: {max: 2, backoff_secs: 0.01}}
  - {id: fallback, agent: broken, input: y, on_failure: {fallback: backup}}
  - {id: tolerated, agent: broken, input: z, on_failure: continue}
  - {id: dependent, agent: after, depends_on: [tolerated], input: "${steps.tolerated.output}"}
  - {id: independent, agent: after, depends_on: [retry, fallback], input: w}
"#);
    let (state, events) = run(
        registry(&[flaky, broken.clone(), backup, after]),
        w,
        json!({}),
    )
    .await;
    assert_eq!(state.status, RunStatus::Completed, "{state:#?}");
    let r = &state.steps["retry"];
    assert_eq!(
        (r.attempts, r.output.as_ref().unwrap().text.as_str()),
        (3, "finally")
    );
    let f = &state.steps["fallback"];
    assert_eq!(f.agent.as_deref(), Some("backup"));
    assert_eq!(f.output.as_ref().unwrap().text, "backup did: y");
    assert_eq!(state.steps["tolerated"].status, StepStatus::Failed);
    assert_eq!(state.steps["dependent"].status, StepStatus::Skipped);
    assert_eq!(state.steps["independent"].status, StepStatus::Done);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, FlowEvent::StepSkipped { step, .. } if step == "dependent"))
    );

    // With the default policy a failure stops the run and cancels what runs.
    struct SetOnDrop(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = dropped.clone();
    let started = Arc::new(tokio::sync::Notify::new());
    let s = started.clone();
    let slow = agent("slow", move |_, _| {
        let guard = SetOnDrop(d.clone());
        let s = s.clone();
        async move {
            let _guard = guard;
            s.notify_one();
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok("late".into())
        }
    });
    // `late_fail` fails once `slow` is running (told so, not guessed).
    let late_fail = agent("late_fail", move |_, _| {
        let started = started.clone();
        async move {
            started.notified().await;
            Err(AgentError::failed("always down"))
        }
    });
    let _ = broken;
    let w = wf(
        "name: stop\nsteps:\n  - {id: bad, agent: late_fail, input: a}\n  - {id: slow, agent: slow, input: b}\n",
    );
    let engine = Engine::new(Arc::new(registry(&[late_fail, slow])))
        .with_cancel_grace(Duration::from_millis(50));
    let state = engine.run(w, json!({}), None, None).await.unwrap();
    assert_eq!(state.status, RunStatus::Failed);
    assert!(state.error.unwrap().contains("step `bad` failed"));
    assert_eq!(state.steps["slow"].error.as_deref(), Some("canceled"));
    assert!(
        dropped.load(Ordering::SeqCst),
        "the running step was stopped, not left running"
    );
}

#[tokio::test]
async fn conditions_choose_branches_and_timeouts_fail_steps() {
    let check = agent("check", |_, _| async { Ok("approved".into()) });
    let yes = agent("yes", |_, _| async { Ok("shipping".into()) });
    let no = agent("no", |_, _| async { Ok("refunding".into()) });
    let sleepy = agent("sleepy", |_, _| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok("late".into())
    });
    let w = wf(r#"
name: branch
steps:
  - {id: check, agent: check, input: review}
  - {id: ship, agent: yes, depends_on: [check], condition: "${steps.check.output} == approved", input: go}
  - {id: refund, agent: no, depends_on: [check], condition: "${steps.check.output} != approved", input: go}
  - {id: nap, agent: sleepy, input: zz, timeout_secs: 0.05, on_failure: continue}
"#);
    let (state, _) = run(registry(&[check, yes, no, sleepy]), w, json!({})).await;
    assert_eq!(state.steps["ship"].status, StepStatus::Done);
    assert_eq!(state.steps["refund"].status, StepStatus::Skipped);
    assert!(
        state.steps["nap"]
            .error
            .as_deref()
            .unwrap()
            .contains("timed out")
    );
}

/// A checkpoint edited or damaged on disk: unreadable, or readable with a step that has no
/// record or a step twice. Resuming it is refused with what is wrong, nothing runs.
#[tokio::test]
async fn a_checkpoint_that_does_not_hold_together_is_refused() {
    let store = Arc::new(agentry_core::runs::MemoryRunStore::default());
    let hangs = agent("hangs", |_, _| async {
        std::future::pending::<()>().await;
        Ok(String::new())
    });
    let engine =
        Engine::new(Arc::new(registry(std::slice::from_ref(&hangs)))).with_store(store.clone());
    let prepared = engine
        .prepare(
            wf(r#"
name: edited
steps:
  - {id: a, agent: hangs, input: x}
  - {id: b, agent: hangs, depends_on: [a], input: y}
"#),
            json!({}),
        )
        .unwrap();
    let run_id = prepared.run_id.clone();
    let interrupted = tokio::time::timeout(
        Duration::from_millis(200),
        engine.execute(prepared, None, None),
    )
    .await;
    assert!(interrupted.is_err(), "the run was interrupted");
    let key = format!("workflow:{run_id}");
    let saved: serde_json::Value =
        serde_json::from_str(&store.get(&key).await.unwrap().unwrap()).unwrap();
    let calls = hangs.calls.load(Ordering::SeqCst);

    let mut no_record = saved.clone();
    no_record["steps"].as_object_mut().unwrap().remove("b");
    let mut twice = saved.clone();
    let first = twice["workflow"]["steps"][0].clone();
    twice["workflow"]["steps"]
        .as_array_mut()
        .unwrap()
        .push(first);
    let mut cyclic = saved.clone();
    cyclic["workflow"]["steps"][0]["depends_on"] = json!(["b"]);
    for (body, expect) in [
        (no_record.to_string(), "step `b` has no record"),
        (twice.to_string(), "step `a` appears twice"),
        (cyclic.to_string(), "dependency cycle among steps: a, b"),
        ("{\"run_id\": 1".to_owned(), "is unreadable"),
    ] {
        store.put(&key, &body).await.unwrap();
        let e = engine.resume(&run_id, None, None).await.unwrap_err();
        assert!(e.to_string().contains(expect), "{e}");
    }
    assert_eq!(
        hangs.calls.load(Ordering::SeqCst),
        calls,
        "nothing ran again"
    );
}

#[tokio::test]
async fn a_crashed_run_resumes_without_rerunning_finished_steps() {
    let db = std::env::temp_dir().join(format!("agentry-flow-{}.db", agentry_a2a::new_id()));
    let store = Arc::new(SqliteRunStore::open(&db).unwrap());
    let first = agent("first", |_, _| async { Ok("one".into()) });
    let second = agent("second", |_, _| async { Ok("two".into()) });
    // In the first process the third step hangs (the process dies there).
    let hangs = agent("third", |_, _| async {
        std::future::pending::<()>().await;
        Ok(String::new())
    });
    let w = wf(r#"
name: durable
steps:
  - {id: a, agent: first, input: x}
  - {id: b, agent: second, depends_on: [a], input: "${steps.a.output}"}
  - {id: c, agent: third, depends_on: [b], input: "${steps.b.output}"}
"#);
    let engine = Engine::new(Arc::new(registry(&[first.clone(), second.clone(), hangs])))
        .with_store(store.clone());
    let prepared = engine.prepare(w, json!({})).unwrap();
    let run_id = prepared.run_id.clone();
    let crashed = tokio::time::timeout(
        Duration::from_millis(300),
        engine.execute(prepared, None, None),
    )
    .await;
    assert!(crashed.is_err(), "the run was interrupted");
    let state = engine.load(&run_id).await.unwrap();
    assert_eq!(state.steps["b"].status, StepStatus::Done);
    assert_ne!(state.steps["c"].status, StepStatus::Done);

    // A new process: same store, a working third agent.
    let third = agent(
        "third",
        |t, _| async move { Ok(format!("three after {t}")) },
    );
    let store2 = Arc::new(SqliteRunStore::open(&db).unwrap());
    let engine2 = Engine::new(Arc::new(registry(&[
        first.clone(),
        second.clone(),
        third.clone(),
    ])))
    .with_store(store2);
    let done = engine2.resume(&run_id, None, None).await.unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.final_output.as_deref(), Some("three after two"));
    assert_eq!(
        first.calls.load(Ordering::SeqCst),
        1,
        "finished steps are not re-run"
    );
    assert_eq!(second.calls.load(Ordering::SeqCst), 1);
    assert_eq!(third.calls.load(Ordering::SeqCst), 1);
    let _ = std::fs::remove_file(&db);
}
