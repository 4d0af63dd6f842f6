//! Reports of a run: a terminal summary, `metrics.json`, JUnit XML (one test case per task,
//! for CI), Prometheus text exposition, and a self-contained HTML page.

use std::fmt::Write as _;
use std::path::Path;

use crate::metrics::Metrics;
use crate::results::Results;
use crate::score::Termination;

/// The terminal summary (`agentry eval view`).
pub fn summary(results: &Results, m: &Metrics) -> String {
    let mut s = String::new();
    let domain = results.info["environment_info"]["domain_name"]
        .as_str()
        .unwrap_or("?");
    let agent = results.info["agent_info"]["endpoint"]
        .as_str()
        .or_else(|| results.info["agent_info"]["implementation"].as_str())
        .unwrap_or("?");
    let _ = writeln!(s, "agentry eval: {domain} domain, agent {agent}");
    let scored = m.simulations - m.infrastructure_errors;
    let _ = writeln!(
        s,
        "  {} simulations ({} tasks x {} trials): {scored} scored, {} infrastructure errors (excluded), {} unjudged",
        m.simulations,
        m.tasks.len(),
        results.info["num_trials"].as_u64().unwrap_or(0),
        m.infrastructure_errors,
        m.unjudged
    );
    let _ = writeln!(s, "  average reward  {:.3}", m.avg_reward);
    for p in &m.pass_hat_k {
        let _ = writeln!(
            s,
            "  pass^{}          {:.3}  (95% CI {:.3}-{:.3})",
            p.k, p.value, p.ci95.0, p.ci95.1
        );
    }
    let l = &m.turn_latency;
    let _ = writeln!(
        s,
        "  agent turn      p50 {:.3}s  p95 {:.3}s  p99 {:.3}s  ({} turns)",
        l.p50, l.p95, l.p99, l.count
    );
    if m.time_to_first_event.count > 0 {
        let t = &m.time_to_first_event;
        let _ = writeln!(
            s,
            "  first event     p50 {:.3}s  p95 {:.3}s  p99 {:.3}s",
            t.p50, t.p95, t.p99
        );
    }
    let est = if m.tokens.estimated_turns > 0 {
        format!(
            " ({} of {} turns estimated at 4 chars/token)",
            m.tokens.estimated_turns,
            m.tokens.estimated_turns + m.tokens.reported_turns
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "  tokens          {} in, {} out{est}",
        m.tokens.prompt, m.tokens.completion
    );
    let _ = writeln!(
        s,
        "  retries {}, hallucinated tool calls {}, protocol errors {}",
        m.retries,
        m.hallucinated_tool_calls,
        if m.protocol_errors.is_empty() {
            "none".to_owned()
        } else {
            m.protocol_errors
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let _ = writeln!(
        s,
        "  terminations: {}",
        m.terminations
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "  task                              trials  ok  reward  flips"
    );
    for t in &m.tasks {
        let _ = writeln!(
            s,
            "  {:<33} {:>6} {:>3}  {:>6.3}  {:>5.2}",
            t.task_id, t.trials, t.successes, t.avg_reward, t.flip_rate
        );
    }
    for sim in &results.simulations {
        if sim.termination_reason == Termination::InfrastructureError {
            let _ = writeln!(
                s,
                "  infrastructure error: task {} trial {}: {}",
                sim.task_id,
                sim.trial,
                sim.info["error"].as_str().unwrap_or("")
            );
        }
    }
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JUnit XML: one test case per task, failed unless every trial succeeded; infrastructure
/// errors are errors, unjudged runs are skipped.
pub fn junit(results: &Results, m: &Metrics) -> String {
    let mut cases = String::new();
    let (mut failures, mut errors, mut skipped) = (0, 0, 0);
    for t in &m.tasks {
        let sims: Vec<_> = results
            .simulations
            .iter()
            .filter(|s| s.task_id == t.task_id)
            .collect();
        let time: f64 = sims.iter().map(|s| s.duration).sum();
        let _ = write!(
            cases,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{time:.3}\">",
            xml(results.info["environment_info"]["domain_name"]
                .as_str()
                .unwrap_or("")),
            xml(&t.task_id)
        );
        let unjudged = sims
            .iter()
            .any(|s| s.reward_info.as_ref().is_some_and(|r| r.unjudged()));
        if unjudged {
            skipped += 1;
            cases.push_str("<skipped message=\"NL assertions not judged (no judge model)\"/>");
        } else if t.successes < t.trials {
            failures += 1;
            let why: Vec<String> = sims
                .iter()
                .filter(|s| !s.reward_info.as_ref().is_some_and(|r| r.success()))
                .map(|s| {
                    format!(
                        "trial {}: reward {:.2} ({}) {}",
                        s.trial,
                        s.reward_info.as_ref().map_or(0.0, |r| r.reward),
                        s.termination_reason.as_str(),
                        s.reward_info
                            .as_ref()
                            .and_then(|r| r.reward_breakdown.as_ref())
                            .map(|b| serde_json::to_string(b).unwrap_or_default())
                            .unwrap_or_default()
                    )
                })
                .collect();
            let _ = write!(
                cases,
                "<failure message=\"{} of {} trials succeeded\">{}</failure>",
                t.successes,
                t.trials,
                xml(&why.join("\n"))
            );
        }
        cases.push_str("</testcase>\n");
    }
    for s in &results.simulations {
        if s.termination_reason == Termination::InfrastructureError {
            errors += 1;
            let _ = writeln!(
                cases,
                "    <testcase classname=\"infrastructure\" name=\"{} trial {}\"><error message=\"{}\"/></testcase>",
                xml(&s.task_id),
                s.trial,
                xml(s.info["error"].as_str().unwrap_or(""))
            );
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"agentry eval\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n{cases}  </testsuite>\n</testsuites>\n",
        m.tasks.len() + errors
    )
}

/// Prometheus text exposition of the run's figures.
pub fn prometheus(results: &Results, m: &Metrics) -> String {
    let domain = results.info["environment_info"]["domain_name"]
        .as_str()
        .unwrap_or("");
    prometheus_text(domain, m)
}

/// [`prometheus`] for a run in progress (its domain and its figures so far).
pub fn prometheus_text(domain: &str, m: &Metrics) -> String {
    let l = format!("domain=\"{domain}\"");
    let mut s = String::new();
    let mut gauge = |name: &str, help: &str, lines: Vec<(String, f64)>| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, v) in lines {
            let _ = writeln!(s, "{name}{{{labels}}} {v}");
        }
    };
    gauge(
        "agentry_eval_simulations",
        "Simulations finished.",
        vec![(l.clone(), m.simulations as f64)],
    );
    gauge(
        "agentry_eval_infrastructure_errors",
        "Simulations excluded as infrastructure errors.",
        vec![(l.clone(), m.infrastructure_errors as f64)],
    );
    gauge(
        "agentry_eval_average_reward",
        "Mean reward over scored simulations.",
        vec![(l.clone(), m.avg_reward)],
    );
    gauge(
        "agentry_eval_pass_hat_k",
        "pass^k over tasks.",
        m.pass_hat_k
            .iter()
            .map(|p| (format!("{l},k=\"{}\"", p.k), p.value))
            .collect(),
    );
    let t = &m.turn_latency;
    gauge(
        "agentry_eval_turn_latency_seconds",
        "Agent turn latency quantiles.",
        vec![
            (format!("{l},quantile=\"0.5\""), t.p50),
            (format!("{l},quantile=\"0.95\""), t.p95),
            (format!("{l},quantile=\"0.99\""), t.p99),
        ],
    );
    gauge(
        "agentry_eval_retries",
        "Agent requests retried.",
        vec![(l.clone(), m.retries as f64)],
    );
    gauge(
        "agentry_eval_hallucinated_tool_calls",
        "Calls to tools the domain does not have.",
        vec![(l.clone(), m.hallucinated_tool_calls as f64)],
    );
    gauge(
        "agentry_eval_protocol_errors",
        "Protocol errors by code.",
        m.protocol_errors
            .iter()
            .map(|(c, n)| (format!("{l},code=\"{}\"", c.replace('"', "'")), *n as f64))
            .collect(),
    );
    s
}

/// A self-contained HTML page: the headline figures, pass^k with its intervals and the
/// per-task outcomes as inline SVG bars, and every conversation.
pub fn html(results: &Results, m: &Metrics) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>agentry eval</h1><pre>{}</pre>",
        xml(&summary(results, m))
    );
    // pass^k bars with interval whiskers.
    let w = 60.0;
    let h = 160.0;
    let mut svg = format!(
        "<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"pass^k\">",
        40.0 + w * m.pass_hat_k.len() as f64,
        h + 30.0
    );
    for (i, p) in m.pass_hat_k.iter().enumerate() {
        let x = 30.0 + i as f64 * w;
        let bh = p.value * h;
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{bh}\" fill=\"#4a7\"/><line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#222\"/><text x=\"{}\" y=\"{}\" font-size=\"12\">k={} {:.2}</text>",
            h - bh,
            w - 12.0,
            x + (w - 12.0) / 2.0,
            x + (w - 12.0) / 2.0,
            h - p.ci95.0 * h,
            h - p.ci95.1 * h,
            x,
            h + 16.0,
            p.k,
            p.value
        );
    }
    svg.push_str("</svg>");
    let _ = write!(body, "<h2>pass^k (95% CI)</h2>{svg}");
    body.push_str("<h2>Conversations</h2>");
    for s in &results.simulations {
        let reward = s.reward_info.as_ref().map_or(0.0, |r| r.reward);
        let _ = write!(
            body,
            "<details><summary>task {} trial {}: reward {reward:.2}, {}</summary><table>",
            xml(&s.task_id),
            s.trial,
            s.termination_reason.as_str()
        );
        for msg in &s.messages {
            let role = format!("{:?}", msg.role).to_lowercase();
            let mut text = msg.content.clone().unwrap_or_default();
            for c in msg.tool_calls.iter().flatten() {
                text.push_str(&format!(
                    "\n→ {}({})",
                    c.name,
                    serde_json::Value::Object(c.arguments.clone())
                ));
            }
            let _ = write!(
                body,
                "<tr class=\"{role}\"><th>{role}</th><td><pre>{}</pre></td></tr>",
                xml(&text)
            );
        }
        body.push_str("</table></details>");
    }
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>agentry eval</title><style>body{{font-family:sans-serif;max-width:70em;margin:auto}}pre{{white-space:pre-wrap;margin:0}}th{{text-align:left;vertical-align:top;padding-right:1em}}tr.tool td{{color:#555}}tr.user td{{color:#035}}</style></head><body>{body}</body></html>"
    )
}

/// Writes `metrics.json`, `junit.xml`, `metrics.prom` and `report.html` into `dir`.
pub fn write_all(dir: &Path, results: &Results, m: &Metrics) -> std::io::Result<()> {
    std::fs::write(
        dir.join("metrics.json"),
        serde_json::to_string_pretty(m).unwrap_or_default(),
    )?;
    std::fs::write(dir.join("junit.xml"), junit(results, m))?;
    std::fs::write(dir.join("metrics.prom"), prometheus(results, m))?;
    std::fs::write(dir.join("report.html"), html(results, m))
}
