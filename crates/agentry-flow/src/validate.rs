//! Checks a workflow before anything runs: every problem found, each naming its step.

use std::collections::{BTreeMap, BTreeSet};

use crate::registry::AgentRegistry;
use crate::template::references;
use crate::workflow::{OnFailure, Workflow, WorkflowStep};

/// One problem in a workflow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", step.as_ref().map(|s| format!("step `{s}`: ")).unwrap_or_default())]
pub struct ValidationError {
    /// The step the problem is in (`None`: the workflow as a whole).
    pub step: Option<String>,
    /// What is wrong.
    pub message: String,
}

fn err(step: Option<&str>, message: String) -> ValidationError {
    ValidationError {
        step: step.map(str::to_owned),
        message,
    }
}

/// Whether `target` is among the steps `step` transitively depends on. Direct dependencies are
/// checked first, so the common case costs nothing; otherwise a search with early exit.
fn is_upstream(deps: &BTreeMap<&str, &[String]>, step: &str, target: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = deps
        .get(step)
        .map(|d| d.iter().map(String::as_str).collect())
        .unwrap_or_default();
    if stack.contains(&target) {
        return true;
    }
    while let Some(d) = stack.pop() {
        if d == target {
            return true;
        }
        if seen.insert(d) {
            stack.extend(
                deps.get(d)
                    .into_iter()
                    .flat_map(|v| v.iter().map(String::as_str)),
            );
        }
    }
    false
}

/// Validates `wf` against the agents that exist.
pub fn validate(wf: &Workflow, agents: &AgentRegistry) -> Result<(), Vec<ValidationError>> {
    check(wf, Some(agents))
}

/// Validates what `wf` says of itself (step ids, dependencies, cycles, templates, timeouts),
/// not which agents exist: what a run resumed from its checkpoint must still satisfy, even
/// after an agent it already used was removed.
pub fn validate_structure(wf: &Workflow) -> Result<(), Vec<ValidationError>> {
    check(wf, None)
}

fn check(wf: &Workflow, agents: Option<&AgentRegistry>) -> Result<(), Vec<ValidationError>> {
    let mut errors = Vec::new();
    if wf.steps.is_empty() {
        errors.push(err(None, "a workflow needs at least one step".into()));
    }
    let mut ids = BTreeSet::new();
    for s in &wf.steps {
        let id = Some(s.id.as_str());
        if s.id.is_empty()
            || !s
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            errors.push(err(id, "ids use letters, digits, `_` and `-`".into()));
        }
        if !ids.insert(s.id.as_str()) {
            errors.push(err(id, "duplicate step id".into()));
        }
    }
    for s in &wf.steps {
        let id = Some(s.id.as_str());
        if let Some(agents) = agents {
            check_agents(s, agents, &mut errors);
        }
        for d in &s.depends_on {
            if d == &s.id {
                errors.push(err(id, "depends on itself".into()));
            } else if !ids.contains(d.as_str()) {
                errors.push(err(id, format!("depends on unknown step `{d}`")));
            }
        }
        if s.timeout_secs.is_some_and(|t| !(t > 0.0 && t.is_finite())) {
            errors.push(err(id, "timeout_secs must be positive".into()));
        }
    }
    // Cycles: Kahn's algorithm over the known dependencies.
    let mut indeg: BTreeMap<&str, usize> = wf.steps.iter().map(|s| (s.id.as_str(), 0)).collect();
    for s in &wf.steps {
        let n = s
            .depends_on
            .iter()
            .filter(|d| ids.contains(d.as_str()) && *d != &s.id)
            .count();
        indeg.insert(s.id.as_str(), n);
    }
    let mut ready: Vec<&str> = indeg
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(k, _)| *k)
        .collect();
    let mut done = 0;
    let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for s in &wf.steps {
        for d in &s.depends_on {
            if d != &s.id {
                dependents
                    .entry(d.as_str())
                    .or_default()
                    .push(s.id.as_str());
            }
        }
    }
    while let Some(r) = ready.pop() {
        done += 1;
        for &dep in dependents.get(r).map(Vec::as_slice).unwrap_or_default() {
            if let Some(n) = indeg.get_mut(dep) {
                *n -= 1;
                if *n == 0 {
                    ready.push(dep);
                }
            }
        }
    }
    if done < indeg.len() {
        let cyclic: Vec<&str> = indeg
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| *k)
            .collect();
        errors.push(err(
            None,
            format!("dependency cycle among steps: {}", cyclic.join(", ")),
        ));
    }
    // Templates: only the input and upstream steps' results can be named.
    let deps: BTreeMap<&str, &[String]> = wf
        .steps
        .iter()
        .map(|s| (s.id.as_str(), s.depends_on.as_slice()))
        .collect();
    let mut check_refs = |step: Option<&str>, what: &str, t: &str| {
        let refs = match references(t) {
            Ok(r) => r,
            Err(e) => {
                errors.push(err(step, format!("{what}: {e}")));
                return;
            }
        };
        for r in refs {
            let path = r.join(".");
            match r.first().map(String::as_str) {
                Some("input") => {
                    if let Some(name) = r.get(1)
                        && !wf.inputs.is_empty()
                        && !wf.inputs.contains(name)
                    {
                        errors.push(err(step, format!("{what}: `${{{path}}}` names an input the workflow does not declare (inputs: {})", wf.inputs.join(", "))));
                    }
                }
                Some("steps") => {
                    let Some(target) = r.get(1) else {
                        errors.push(err(step, format!("{what}: `${{{path}}}` names no step")));
                        continue;
                    };
                    if !ids.contains(target.as_str()) {
                        errors.push(err(
                            step,
                            format!("{what}: `${{{path}}}` names unknown step `{target}`"),
                        ));
                    } else if step.is_some_and(|s| !is_upstream(&deps, s, target)) {
                        errors.push(err(step, format!("{what}: `${{{path}}}` reads step `{target}`, which is not among its dependencies")));
                    }
                    match r.get(2).map(String::as_str) {
                        Some("output" | "data" | "artifacts" | "status") => {}
                        Some(f) => errors.push(err(step, format!("{what}: `${{{path}}}`: a step has output, data, artifacts and status, not `{f}`"))),
                        None => errors.push(err(step, format!("{what}: `${{{path}}}`: say which result (e.g. `${{steps.{target}.output}}`)"))),
                    }
                }
                _ => errors.push(err(
                    step,
                    format!("{what}: `${{{path}}}` must start with `input.` or `steps.`"),
                )),
            }
        }
    };
    for s in &wf.steps {
        check_refs(Some(&s.id), "input", &s.input);
        if let Some(c) = &s.condition {
            check_refs(Some(&s.id), "condition", c);
        }
    }
    if let Some(o) = &wf.output {
        check_refs(None, "output", o);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The checks that depend on which agents exist: the step's agent, its skill, its fallback.
fn check_agents(s: &WorkflowStep, agents: &AgentRegistry, errors: &mut Vec<ValidationError>) {
    let id = Some(s.id.as_str());
    if !agents.knows(&s.agent) {
        let known: Vec<String> = agents.describe().into_iter().map(|a| a.name).collect();
        errors.push(err(
            id,
            format!("unknown agent `{}` (known: {})", s.agent, known.join(", ")),
        ));
    } else if let (Some(skill), Some(skills)) = (&s.skill, agents.skills(&s.agent))
        && !skills.is_empty()
        && !skills.contains(skill)
    {
        errors.push(err(
            id,
            format!(
                "agent `{}` has no skill `{skill}` (skills: {})",
                s.agent,
                skills.join(", ")
            ),
        ));
    }
    if let OnFailure::Fallback(f) = &s.on_failure
        && !agents.knows(f)
    {
        errors.push(err(id, format!("unknown fallback agent `{f}`")));
    }
}
