//! `agentry chat --config agent.toml`: an interactive session with one configured agent; each
//! line is a turn of one conversation, and its tool calls are shown as they happen.

use std::io::{BufRead, Write};
use std::path::Path;

use agentry::core::a2a::describe_step;
use agentry::core::llm::BoxFuture;
use agentry::core::react::{Outcome, Step};
use agentry::core::run::RunHooks;

use crate::error::CliError;

/// Prints steps as they happen.
struct Printer;

impl RunHooks for Printer {
    fn on_steps<'a>(&'a self, steps: &'a [Step]) -> BoxFuture<'a, ()> {
        for s in steps {
            if !matches!(s, Step::Answer { .. }) {
                eprintln!("  · {}", describe_step(s));
            }
        }
        Box::pin(async {})
    }
}

pub(crate) async fn run(path: &Path) -> Result<(), CliError> {
    let agent = agentry::agent_from_file(path).await?;
    let context = agentry::a2a::new_id();
    let tools = agent.tools().names().join(", ");
    eprintln!(
        "agentry: chatting with `{}` (tools: {}). Empty line or /exit to quit.",
        agent.config.name,
        if tools.is_empty() { "none" } else { &tools }
    );
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        eprint!("> ");
        let _ = std::io::stderr().flush();
        let Some(Ok(line)) = lines.next() else { break };
        let line = line.trim();
        if line.is_empty() || line == "/exit" {
            break;
        }
        let result = agent.run(line, Some(&context), &Printer, None).await;
        match result.outcome {
            Outcome::Answered { answer } => println!("{answer}"),
            Outcome::NeedsInput { question } => println!("{question}"),
            other => println!("(no answer: {})", describe_outcome(&other)),
        }
    }
    Ok(())
}

fn describe_outcome(o: &Outcome) -> String {
    match o {
        Outcome::MaxIterations => "reached max_iterations".into(),
        Outcome::TokenBudget => "reached token_budget".into(),
        Outcome::Stopped => "stopped by policy".into(),
        Outcome::Canceled => "canceled".into(),
        Outcome::Failed { error } => error.clone(),
        Outcome::Answered { .. } | Outcome::NeedsInput { .. } => "answered".into(),
    }
}
