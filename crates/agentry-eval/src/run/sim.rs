//! One simulation: tau2's half-duplex orchestrator (`src/tau2/orchestrator/orchestrator.py`).
//!
//! Turns alternate between the user, the agent and the environment. A message with tool
//! calls goes to the environment, which runs every call in order and answers whoever made
//! them; a text goes to the other party. The user ends the conversation with a stop token;
//! the step limit, the error limit and the wall clock end it otherwise.

use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::agent::{AgentFailure, AgentSession};
use super::user::{UserSession, is_stop};
use crate::domain::Domain;
use crate::env::{EnvError, SharedEnv};
use crate::message::{Message, Role};
use crate::score::Termination;
use crate::task::Task;

/// tau2's greeting, the first message of a conversation that has no history.
pub const GREETING: &str = "Hi! How can I help you today?";

/// Limits of one simulation (tau2's defaults: 200 steps, 10 tool errors, no timeout).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Hops between participants.
    pub max_steps: usize,
    /// Tool calls that raised.
    pub max_errors: usize,
    /// Wall clock.
    pub timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 200,
            max_errors: 10,
            timeout: None,
        }
    }
}

/// How a simulation ended.
#[derive(Debug)]
pub struct Outcome {
    /// The trajectory (history and greeting included).
    pub messages: Vec<Message>,
    /// Why it ended.
    pub termination: Termination,
    /// For an infrastructure error: what failed.
    pub infrastructure_error: Option<String>,
    /// agentry's measurements: per-turn figures, protocol errors, hallucinated names.
    pub info: Value,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Next {
    User,
    Agent,
}

/// Runs one conversation between `user` and `agent` on a fresh environment of `domain`.
pub async fn simulate(
    domain: &Domain,
    task: &Task,
    agent: &mut dyn AgentSession,
    user: &mut dyn UserSession,
    limits: Limits,
) -> Result<Outcome, EnvError> {
    let started = Instant::now();
    let mut fresh = domain.environment();
    let history = task.message_history().to_vec();
    fresh.set_state(task.initial_state.as_ref(), &history)?;
    let env: SharedEnv = Arc::new(Mutex::new(fresh));

    let mut messages: Vec<Message> = history.clone();
    let mut next = match history.last() {
        None => {
            let mut greeting = Message::assistant(GREETING);
            greeting.timestamp = Some(agentry_a2a::time::now_rfc3339());
            messages.push(greeting);
            Next::User
        }
        Some(m) => match m.role {
            Role::Assistant if !m.is_tool_call() => Next::User,
            Role::User if !m.is_tool_call() => Next::Agent,
            Role::Tool if m.requestor == Some(crate::message::Requestor::User) => Next::User,
            _ => Next::Agent,
        },
    };
    // What the agent has not seen yet. A history ending with the user's words is the
    // agent's first input (the rest of the history is in its first message's preamble).
    let mut agent_inbox: Vec<Message> = match (next, history.last()) {
        (Next::Agent, Some(m)) if m.role == Role::User => vec![m.clone()],
        _ => Vec::new(),
    };
    let mut turns: Vec<Value> = Vec::new();
    let mut protocol_errors: Vec<Value> = Vec::new();
    let mut hallucinated = 0u64;
    let mut steps = 0usize;
    let mut errors = 0usize;

    let finish = |messages: Vec<Message>,
                  termination: Termination,
                  infra: Option<String>,
                  turns: Vec<Value>,
                  protocol_errors: Vec<Value>,
                  hallucinated: u64| Outcome {
        messages,
        termination,
        infrastructure_error: infra,
        info: json!({"agentry": {
            "turns": turns,
            "protocol_errors": protocol_errors,
            "hallucinated_tool_calls": hallucinated,
        }}),
    };

    loop {
        // One hop of the speaker, then the environment's hop if it made calls.
        let msg = match next {
            Next::User => {
                let view = user_view(&messages);
                match user.respond(&view).await {
                    Ok(m) => m,
                    Err(e) => {
                        // The user simulator is the harness's part: retried, then excluded.
                        return Ok(finish(
                            messages,
                            Termination::InfrastructureError,
                            Some(e),
                            turns,
                            protocol_errors,
                            hallucinated,
                        ));
                    }
                }
            }
            Next::Agent => {
                let inbox = std::mem::take(&mut agent_inbox);
                match agent.turn(&inbox, &env).await {
                    Ok(t) => {
                        turns.push(serde_json::to_value(&t.measure).unwrap_or(Value::Null));
                        // Calls made through the harness's MCP endpoint during the turn, each
                        // already answered: a hop of the agent and one of the environment.
                        for (call, result) in t.observed {
                            errors += usize::from(result.error == Some(true));
                            steps += 2;
                            messages.push(call);
                            messages.push(result);
                        }
                        t.message
                    }
                    Err(AgentFailure::Infrastructure(e)) => {
                        return Ok(finish(
                            messages,
                            Termination::InfrastructureError,
                            Some(e),
                            turns,
                            protocol_errors,
                            hallucinated,
                        ));
                    }
                    Err(AgentFailure::Agent { code, message }) => {
                        protocol_errors.push(json!({"code": code, "message": message}));
                        return Ok(finish(
                            messages,
                            Termination::AgentError,
                            None,
                            turns,
                            protocol_errors,
                            hallucinated,
                        ));
                    }
                }
            }
        };
        let mut msg = msg;
        msg.timestamp
            .get_or_insert_with(agentry_a2a::time::now_rfc3339);
        let speaker = next;
        steps += 1;
        let stop = speaker == Next::User && !msg.is_tool_call() && is_stop(&msg);
        let calls = msg.tool_calls.clone().unwrap_or_default();
        messages.push(msg.clone());
        if stop {
            return Ok(finish(
                messages,
                Termination::UserStop,
                None,
                turns,
                protocol_errors,
                hallucinated,
            ));
        }
        if !calls.is_empty() {
            // The environment's hop: every call, in order, one result each.
            let mut results = Vec::new();
            for call in &calls {
                if domain.tools.tool_type(&call.name).is_none() {
                    hallucinated += 1;
                }
                let mut r = env.lock().unwrap_or_else(|p| p.into_inner()).respond(call);
                r.timestamp = Some(agentry_a2a::time::now_rfc3339());
                if r.error == Some(true) {
                    errors += 1;
                }
                messages.push(r.clone());
                results.push(r);
            }
            steps += 1;
            match speaker {
                Next::Agent => agent_inbox = results,
                Next::User => {}
            }
            next = speaker;
        } else {
            next = match speaker {
                Next::Agent => Next::User,
                Next::User => {
                    agent_inbox.push(msg);
                    Next::Agent
                }
            };
        }
        let limit = if steps >= limits.max_steps {
            Some(Termination::MaxSteps)
        } else if errors >= limits.max_errors {
            Some(Termination::TooManyErrors)
        } else if limits.timeout.is_some_and(|t| started.elapsed() >= t) {
            Some(Termination::Timeout)
        } else {
            None
        };
        if let Some(t) = limit {
            return Ok(finish(
                messages,
                t,
                None,
                turns,
                protocol_errors,
                hallucinated,
            ));
        }
    }
}

/// The conversation as the user sees it: the agent's texts, the user's own messages and
/// the results of the user's calls; never the agent's calls or their results.
fn user_view(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .filter(|m| match m.role {
            Role::Assistant => !m.is_tool_call(),
            Role::User => true,
            Role::Tool => m.requestor == Some(crate::message::Requestor::User),
            Role::System => false,
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use super::*;
    use crate::message::{Requestor, ToolCall};
    use crate::run::agent::{AgentTurn, BoxFuture, TurnMeasure};
    use crate::run::user::{ScriptTurn, ScriptedUser, UserFactory};

    /// An agent that says what it is given, in order, then repeats its last message.
    struct Canned(VecDeque<Message>, Message);
    impl AgentSession for Canned {
        fn turn<'a>(
            &'a mut self,
            _new: &'a [Message],
            _env: &'a SharedEnv,
        ) -> BoxFuture<'a, Result<AgentTurn, AgentFailure>> {
            let m = self.0.pop_front().unwrap_or_else(|| self.1.clone());
            Box::pin(async move {
                Ok(AgentTurn {
                    message: m,
                    observed: Vec::new(),
                    measure: TurnMeasure::default(),
                })
            })
        }
    }

    fn unknown_call() -> Message {
        Message::with_calls(
            Role::Assistant,
            None,
            vec![ToolCall {
                id: "x".into(),
                name: "delete_everything".into(),
                arguments: Default::default(),
                requestor: Requestor::Assistant,
            }],
        )
    }

    async fn simulate_with(agent: &mut Canned, turns: Vec<ScriptTurn>, limits: Limits) -> Outcome {
        let domain = Domain::builtin("mock").unwrap();
        let task = domain.task("create_task_1").unwrap().clone();
        let users = ScriptedUser::new(BTreeMap::from([(task.id.clone(), turns)]));
        let mut user = users.start(&domain, &task, 0, 0);
        simulate(&domain, &task, agent, user.as_mut(), limits)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn hallucinated_tools_and_empty_replies_are_kept_as_they_happened() {
        let mut agent = Canned(
            VecDeque::from([unknown_call(), Message::assistant("")]),
            Message::assistant("Bye."),
        );
        let out = simulate_with(
            &mut agent,
            vec![ScriptTurn::Say("Delete all my tasks.".into())],
            Limits::default(),
        )
        .await;
        assert_eq!(out.termination, Termination::UserStop);
        assert_eq!(out.info["agentry"]["hallucinated_tool_calls"], 1);
        let result = out.messages.iter().find(|m| m.role == Role::Tool).unwrap();
        assert_eq!(result.text(), "Error: Tool 'delete_everything' not found.");
        assert_eq!(result.error, Some(true));
        assert!(
            out.messages
                .iter()
                .any(|m| m.role == Role::Assistant && m.content.as_deref() == Some("")),
            "the empty reply is in the trajectory as it came"
        );
    }

    #[tokio::test]
    async fn the_error_and_step_limits_end_a_conversation() {
        let mut agent = Canned(VecDeque::new(), unknown_call());
        let out = simulate_with(
            &mut agent,
            vec![ScriptTurn::Say("Hello.".into())],
            Limits {
                max_errors: 3,
                ..Limits::default()
            },
        )
        .await;
        assert_eq!(out.termination, Termination::TooManyErrors);
        assert_eq!(out.info["agentry"]["hallucinated_tool_calls"], 3);

        let mut agent = Canned(VecDeque::new(), Message::assistant("Anything else?"));
        let chatter = (0..50)
            .map(|i| ScriptTurn::Say(format!("message {i}")))
            .collect();
        let out = simulate_with(
            &mut agent,
            chatter,
            Limits {
                max_steps: 7,
                ..Limits::default()
            },
        )
        .await;
        assert_eq!(out.termination, Termination::MaxSteps);
        // The greeting, then seven hops.
        assert_eq!(out.messages.len(), 8);
    }
}
