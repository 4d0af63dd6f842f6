//! The domains agentry ports from tau2's Python, checked against tau2 itself: every task's
//! expected actions, run on a fresh environment, must leave the same database (tau2's hash)
//! and return the same results and error messages.

use agentry_eval::domain::Domain;
use agentry_eval::message::ToolCall;
use serde_json::Value;

use crate::common::{retail, tau2_check, tau2_python};

#[test]
fn the_initial_databases_hash_as_in_tau2() {
    // Golden values from tau2 at the pinned commit (../shared/NOTES-tau2.md).
    let mock = Domain::builtin("mock").unwrap().environment();
    assert_eq!(
        mock.db_hash(),
        "107f83a70b7bf4f616e283b0b0b8451346fe7681173398d4498a1ec15c5fdfc6"
    );
    assert_eq!(
        mock.user_db_hash().as_deref(),
        Some("4cf3d22eed6962ba202c8738421d8a2286d2b5a0cad1372922c928be09ccbfac")
    );
    let Some(retail) = retail() else { return };
    let env = retail.environment();
    assert_eq!(
        env.db_hash(),
        "b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c"
    );
    assert_eq!(env.user_db_hash(), None);
}

/// Every task's expected actions through agentry's port, as `tau2_check.py actions` runs them.
fn run_actions(domain: &Domain) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for task in &domain.tasks {
        let mut env = domain.environment();
        env.set_state(task.initial_state.as_ref(), task.message_history())
            .unwrap();
        let mut outputs = Vec::new();
        let actions = task
            .evaluation_criteria
            .as_ref()
            .and_then(|c| c.actions.clone())
            .unwrap_or_default();
        for (i, a) in actions.iter().enumerate() {
            let r = env.respond(&ToolCall {
                id: format!("a{i}"),
                name: a.name.clone(),
                arguments: a.arguments.clone(),
                requestor: a.requestor,
            });
            outputs.push(serde_json::json!({"content": r.text(), "error": r.error}));
        }
        out.insert(
            task.id.clone(),
            serde_json::json!({"db": env.db_hash(), "user_db": env.user_db_hash(), "outputs": outputs}),
        );
    }
    out
}

fn same_output(ours: &Value, theirs: &Value) -> bool {
    let parse = |v: &Value| {
        let s = v["content"].as_str().unwrap_or_default().to_owned();
        serde_json::from_str::<Value>(&s).unwrap_or(Value::String(s))
    };
    ours["error"] == theirs["error"] && agentry_eval::pyjson::py_eq(&parse(ours), &parse(theirs))
}

fn compare(domain: &Domain, python: &std::path::PathBuf) {
    let theirs = tau2_check(python, &["actions", &domain.name]);
    let ours = run_actions(domain);
    assert_eq!(ours.len(), theirs.as_object().unwrap().len());
    let mut checked_outputs = 0;
    let mut errors = 0;
    for (id, o) in &ours {
        let t = &theirs[id];
        assert_eq!(
            o["db"], t["db"],
            "{} task {id}: database differs",
            domain.name
        );
        assert_eq!(
            o["user_db"], t["user_db"],
            "{} task {id}: user database",
            domain.name
        );
        let (oo, to) = (
            o["outputs"].as_array().unwrap(),
            t["outputs"].as_array().unwrap(),
        );
        assert_eq!(oo.len(), to.len());
        for (a, b) in oo.iter().zip(to) {
            assert!(
                same_output(a, b),
                "{} task {id}: ours {a} tau2 {b}",
                domain.name
            );
            checked_outputs += 1;
            errors += usize::from(b["error"] == true);
        }
    }
    eprintln!(
        "{}: {} tasks, {checked_outputs} tool results ({errors} of them errors) equal to tau2's",
        domain.name,
        ours.len()
    );
}

#[test]
fn every_mock_task_ends_in_tau2s_state() {
    let Some(python) = tau2_python() else { return };
    compare(&Domain::builtin("mock").unwrap(), &python);
}

#[test]
fn every_retail_task_ends_in_tau2s_state() {
    let Some(python) = tau2_python() else { return };
    let Some(retail) = retail() else { return };
    compare(&retail, &python);
}

fn compare_user_prompts(domain: &Domain, python: &std::path::PathBuf) {
    let theirs = tau2_check(python, &["user", &domain.name]);
    for task in &domain.tasks {
        let (system, tools) = agentry_eval::run::user::user_prompt(domain, task);
        let t = &theirs[&task.id];
        assert_eq!(
            t["system"].as_str().unwrap(),
            system,
            "{} task {}",
            domain.name,
            task.id
        );
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            t["tools"],
            serde_json::json!(names),
            "{} task {}",
            domain.name,
            task.id
        );
    }
}

/// The simulated user is told exactly what tau2's is told, for every task of both domains.
#[test]
fn the_user_simulators_prompt_is_tau2s() {
    let Some(python) = tau2_python() else { return };
    compare_user_prompts(&Domain::builtin("mock").unwrap(), &python);
    let Some(retail) = retail() else { return };
    compare_user_prompts(&retail, &python);
}
