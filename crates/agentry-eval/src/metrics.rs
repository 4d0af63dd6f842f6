//! A run's figures: tau2's average reward and pass^k (`src/tau2/metrics/agent_metrics.py`),
//! with bootstrap confidence intervals over tasks, flakiness across trials, and the
//! protocol-level measurements tau2 does not take (latency percentiles, time to first
//! event, tokens, retries, error codes, hallucinated tool names).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::Simulation;
use crate::score::Termination;

/// pass^k for one task: `C(c, k) / C(n, k)`, the chance that k trials drawn without
/// replacement from n all succeed.
pub fn pass_hat_k(n: usize, c: usize, k: usize) -> f64 {
    if k > n {
        return f64::NAN;
    }
    // The ratio of products, without overflowing factorials.
    let mut r = 1.0;
    for i in 0..k {
        if c < i + 1 {
            return 0.0;
        }
        r *= (c - i) as f64 / (n - i) as f64;
    }
    r
}

/// One k's figure.
#[derive(Debug, Clone, Serialize)]
pub struct PassK {
    /// k.
    pub k: usize,
    /// The mean over tasks.
    pub value: f64,
    /// 95% bootstrap interval over tasks (2.5th and 97.5th percentiles).
    pub ci95: (f64, f64),
}

/// Distribution of a duration, seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    /// How many values.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values`.
    pub fn of(mut values: Vec<f64>) -> Percentiles {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        };
        Percentiles {
            count: values.len(),
            p50: at(50.0),
            p95: at(95.0),
            p99: at(99.0),
            max: values[values.len() - 1],
        }
    }
}

/// Per task: trials, successes, and whether outcomes differed across trials.
#[derive(Debug, Clone, Serialize)]
pub struct TaskOutcome {
    /// The task.
    pub task_id: String,
    /// Scored trials.
    pub trials: usize,
    /// Successful ones.
    pub successes: usize,
    /// Mean reward.
    pub avg_reward: f64,
    /// Share of consecutive trial pairs whose outcome differs (0 = stable).
    pub flip_rate: f64,
}

/// Everything a report shows.
#[derive(Debug, Clone, Serialize)]
pub struct Metrics {
    /// Simulations in the file.
    pub simulations: usize,
    /// Excluded as infrastructure errors (listed beside the score, never in it).
    pub infrastructure_errors: usize,
    /// Scored 0 because NL assertions were not judged (no judge configured).
    pub unjudged: usize,
    /// Mean reward over scored simulations.
    pub avg_reward: f64,
    /// pass^1..k.
    pub pass_hat_k: Vec<PassK>,
    /// Per task.
    pub tasks: Vec<TaskOutcome>,
    /// Why simulations ended.
    pub terminations: BTreeMap<String, usize>,
    /// Time the agent took per turn.
    pub turn_latency: Percentiles,
    /// Time to the first streamed event per turn (streaming agents only).
    pub time_to_first_event: Percentiles,
    /// Tokens the agent reported, or estimated at 4 characters each when it did not.
    pub tokens: Tokens,
    /// Requests retried after a transport error or 5xx.
    pub retries: u64,
    /// Protocol errors by code (`-32603`, `http 503`, `timeout`).
    pub protocol_errors: BTreeMap<String, u64>,
    /// Calls to tools the domain does not have.
    pub hallucinated_tool_calls: u64,
}

/// Token counts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tokens {
    /// In, all turns.
    pub prompt: u64,
    /// Out, all turns.
    pub completion: u64,
    /// How many turns' counts were estimated (the agent reported none).
    pub estimated_turns: u64,
    /// How many turns' counts the agent reported.
    pub reported_turns: u64,
}

/// Computes the metrics of a set of simulations.
pub fn compute(sims: &[Simulation], num_trials: usize) -> Metrics {
    let scored: Vec<&Simulation> = sims
        .iter()
        .filter(|s| s.termination_reason != Termination::InfrastructureError)
        .collect();
    let reward = |s: &Simulation| s.reward_info.as_ref().map_or(0.0, |r| r.reward);
    let success = |s: &Simulation| s.reward_info.as_ref().is_some_and(|r| r.success());

    let mut by_task: BTreeMap<&str, Vec<&Simulation>> = BTreeMap::new();
    for s in &scored {
        by_task.entry(&s.task_id).or_default().push(s);
    }
    let tasks: Vec<TaskOutcome> = by_task
        .iter()
        .map(|(id, runs)| {
            let mut runs = runs.clone();
            runs.sort_by_key(|s| s.trial);
            let outcomes: Vec<bool> = runs.iter().map(|s| success(s)).collect();
            let flips = outcomes.windows(2).filter(|w| w[0] != w[1]).count();
            TaskOutcome {
                task_id: (*id).to_owned(),
                trials: runs.len(),
                successes: outcomes.iter().filter(|o| **o).count(),
                avg_reward: runs.iter().map(|s| reward(s)).sum::<f64>() / runs.len() as f64,
                flip_rate: if runs.len() > 1 {
                    flips as f64 / (runs.len() - 1) as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    // tau2: k runs up to the fewest scored trials of any task.
    let max_k = tasks
        .iter()
        .map(|t| t.trials)
        .min()
        .unwrap_or(0)
        .min(num_trials.max(1));
    let pass_hat_k = (1..=max_k)
        .map(|k| {
            let per_task: Vec<f64> = tasks
                .iter()
                .map(|t| pass_hat_k(t.trials, t.successes, k))
                .collect();
            PassK {
                k,
                value: mean(&per_task),
                ci95: bootstrap(&per_task, 1000),
            }
        })
        .collect();

    let mut terminations = BTreeMap::new();
    for s in sims {
        *terminations
            .entry(s.termination_reason.as_str().to_owned())
            .or_insert(0) += 1;
    }
    let mut latency = Vec::new();
    let mut ttfe = Vec::new();
    let mut tokens = Tokens::default();
    let mut retries = 0;
    let mut protocol_errors = BTreeMap::new();
    let mut hallucinated = 0;
    for s in sims {
        let info = &s.info["agentry"];
        for turn in info["turns"].as_array().into_iter().flatten() {
            if let Some(l) = turn["latency_s"].as_f64() {
                latency.push(l);
            }
            if let Some(t) = turn["first_event_s"].as_f64() {
                ttfe.push(t);
            }
            retries += turn["retries"].as_u64().unwrap_or(0);
            tokens.prompt += turn["prompt_tokens"].as_u64().unwrap_or(0);
            tokens.completion += turn["completion_tokens"].as_u64().unwrap_or(0);
            if turn["tokens_estimated"].as_bool().unwrap_or(false) {
                tokens.estimated_turns += 1;
            } else {
                tokens.reported_turns += 1;
            }
        }
        for e in info["protocol_errors"].as_array().into_iter().flatten() {
            if let Some(code) = e["code"].as_str() {
                *protocol_errors.entry(code.to_owned()).or_insert(0) += 1;
            }
        }
        hallucinated += info["hallucinated_tool_calls"].as_u64().unwrap_or(0);
    }
    Metrics {
        simulations: sims.len(),
        infrastructure_errors: sims.len() - scored.len(),
        unjudged: scored
            .iter()
            .filter(|s| s.reward_info.as_ref().is_some_and(|r| r.unjudged()))
            .count(),
        avg_reward: mean(&scored.iter().map(|s| reward(s)).collect::<Vec<_>>()),
        pass_hat_k,
        tasks,
        terminations,
        turn_latency: Percentiles::of(latency),
        time_to_first_event: Percentiles::of(ttfe),
        tokens,
        retries,
        protocol_errors,
        hallucinated_tool_calls: hallucinated,
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// 95% percentile-bootstrap interval of the mean, resampling tasks with a fixed seed (the
/// same run always reports the same interval).
fn bootstrap(xs: &[f64], rounds: usize) -> (f64, f64) {
    if xs.len() < 2 {
        let m = mean(xs);
        return (m, m);
    }
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        // xorshift64*: plenty for resampling indices.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut means: Vec<f64> = (0..rounds)
        .map(|_| {
            let total: f64 = (0..xs.len())
                .map(|_| xs[(next() % xs.len() as u64) as usize])
                .sum();
            total / xs.len() as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |p: f64| means[((p * rounds as f64) as usize).min(rounds - 1)];
    (at(0.025), at(0.975))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_hat_k_is_the_hypergeometric_ratio() {
        // C(3,2)/C(4,2) = 3/6.
        assert!((pass_hat_k(4, 3, 2) - 0.5).abs() < 1e-12);
        assert_eq!(pass_hat_k(4, 4, 4), 1.0);
        assert_eq!(pass_hat_k(4, 1, 2), 0.0);
        assert!((pass_hat_k(5, 2, 1) - 0.4).abs() < 1e-12);
        assert_eq!(pass_hat_k(4, 0, 1), 0.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
    }

    #[test]
    fn the_interval_holds_the_mean_and_is_reproducible() {
        let xs = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 0.25];
        let (lo, hi) = bootstrap(&xs, 1000);
        let m = mean(&xs);
        assert!(lo < m && m < hi, "{lo} {m} {hi}");
        assert_eq!(bootstrap(&xs, 1000), (lo, hi));
    }
}
