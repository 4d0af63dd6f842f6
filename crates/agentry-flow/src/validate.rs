//! Checks a workflow before anything runs: every problem found, each naming its step.

use std::collections::{BTreeMap, BTreeSet};

use crate::registry::AgentRegistry;
use crate::template::references;
use crate::workflow::{OnFailure, Workflow};

/// One problem in a workflow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", step.as_ref().map(|s| format!("step `{s}`: ")).unwrap_or_default())]
pub struct ValidationError {
    pub step: Option<String>,
    pub message: String,
}

fn err(step: Option<&str>, message: String) -> ValidationError {
    ValidationError {
        step: step.map(str::to_owned),
        message,
    }
}

/// The step ids each step transitively depends on.
pub fn ancestors(wf: &Workflow) -> BTreeMap<String, BTreeSet<String>> {
    let deps: BTreeMap<&str, &[String]> = wf
        .steps
        .iter()
        .map(|s| (s.id.as_str(), s.depends_on.as_slice()))
        .collect();
    let mut out = BTreeMap::new();
    for s in &wf.steps {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&str> = s.depends_on.iter().map(String::as_str).collect();
        while let Some(d) = stack.pop() {
            if seen.insert(d.to_owned()) {
                stack.extend(
                    deps.get(d)
                        .into_iter()
                        .flat_map(|v| v.iter().map(String::as_str)),
                );
            }
        }
        out.insert(s.id.clone(), seen);
    }
    out
}

/// Validates `wf` against the agents that exist.
pub fn validate(wf: &Workflow, agents: &AgentRegistry) -> Result<(), Vec<ValidationError>> {
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
    while let Some(r) = ready.pop() {
        done += 1;
        for s in wf
            .steps
            .iter()
            .filter(|s| s.depends_on.iter().any(|d| d == r))
        {
            if let Some(n) = indeg.get_mut(s.id.as_str()) {
                *n -= 1;
                if *n == 0 {
                    ready.push(s.id.as_str());
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
    let anc = ancestors(wf);
    let mut check_refs = |step: Option<&str>,
                          what: &str,
                          t: &str,
                          upstream: Option<&BTreeSet<String>>| {
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
                    } else if upstream.is_some_and(|u| !u.contains(target)) {
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
        check_refs(Some(&s.id), "input", &s.input, anc.get(&s.id));
        if let Some(c) = &s.condition {
            check_refs(Some(&s.id), "condition", c, anc.get(&s.id));
        }
    }
    if let Some(o) = &wf.output {
        check_refs(None, "output", o, None);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}
