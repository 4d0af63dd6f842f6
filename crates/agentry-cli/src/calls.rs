//! `agentry a2a card|send|get|cancel|resubscribe`: any A2A agent from the shell.

use agentry::a2a::client::{A2aClient, Auth, Binding, ClientConfig, fetch_card};
use agentry::a2a::model::*;
use agentry::a2a::version::ProtocolVersion;
use clap::{Args, Subcommand};
use futures_util::StreamExt;

use crate::error::CliError;
use crate::output;

#[derive(Args, Clone)]
pub(crate) struct CallOpts {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Bearer token.
    #[arg(long, global = true, env = "AGENTRY_TOKEN")]
    token: Option<String>,
    /// API key as HEADER=VALUE.
    #[arg(long, global = true)]
    api_key: Option<String>,
    /// Request timeout in seconds.
    #[arg(long, global = true, default_value_t = 60)]
    timeout: u64,
    /// Preferred binding when the card offers several: jsonrpc, rest (HTTP+JSON) or grpc.
    #[arg(long, global = true, value_enum, default_value_t = BindingArg::Jsonrpc)]
    binding: BindingArg,
    /// Speak this A2A version instead of the newest both sides support: 1.0 or 0.3.
    #[arg(long = "a2a-version", global = true)]
    a2a_version: Option<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BindingArg {
    Jsonrpc,
    Rest,
    /// A2A 1.0's gRPC binding (HTTP/2).
    Grpc,
}

#[derive(Subcommand)]
pub(crate) enum A2aCommand {
    /// Show an agent's card.
    Card {
        url: String,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Send a message.
    Send {
        url: String,
        text: String,
        /// Stream events as they happen.
        #[arg(long)]
        stream: bool,
        /// Continue this task.
        #[arg(long)]
        task: Option<String>,
        /// Continue this context.
        #[arg(long)]
        context: Option<String>,
        /// Return at once instead of waiting for the turn to end.
        #[arg(long)]
        no_wait: bool,
        /// The task envelope's correlation id (one per user request, across every hop).
        #[arg(long)]
        correlation: Option<String>,
        /// The envelope's idempotency key (a retry with it gets the first task).
        #[arg(long)]
        idempotency_key: Option<String>,
        /// The trigger the request comes from (`[[triggers]]` id).
        #[arg(long)]
        trigger: Option<String>,
        /// The agent's skill the request is for (its scopes apply).
        #[arg(long)]
        skill: Option<String>,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Show a task.
    Get {
        url: String,
        task: String,
        /// At most this many history messages.
        #[arg(long)]
        history: Option<i64>,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Cancel a task.
    Cancel {
        url: String,
        task: String,
        #[command(flatten)]
        opts: CallOpts,
    },
    /// Follow a running task's events.
    Resubscribe {
        url: String,
        task: String,
        #[command(flatten)]
        opts: CallOpts,
    },
}

fn client_config(opts: &CallOpts) -> Result<ClientConfig, CliError> {
    let auth = match (&opts.token, &opts.api_key) {
        (Some(t), _) => Auth::Bearer(t.clone()),
        (None, Some(kv)) => {
            let (h, v) = kv.split_once('=').ok_or_else(|| {
                CliError::Usage("--api-key takes HEADER=VALUE, e.g. X-API-Key=secret".into())
            })?;
            Auth::ApiKey(h.to_owned(), v.to_owned())
        }
        (None, None) => Auth::None,
    };
    Ok(ClientConfig {
        request_timeout: std::time::Duration::from_secs(opts.timeout),
        auth,
        binding: match opts.binding {
            BindingArg::Jsonrpc => Binding::JsonRpc,
            BindingArg::Rest => Binding::HttpJson,
            BindingArg::Grpc => Binding::Grpc,
        },
        ..ClientConfig::default()
    })
}

async fn connect(url: &str, opts: &CallOpts) -> Result<A2aClient, CliError> {
    let client = A2aClient::discover(url, client_config(opts)?).await?;
    match opts.a2a_version.as_deref() {
        None => Ok(client),
        Some(v) => {
            let version = ProtocolVersion::parse(v)
                .ok_or_else(|| CliError::Usage(format!("--a2a-version {v:?}: use 1.0 or 0.3")))?;
            Ok(client.with_version(version))
        }
    }
}

pub(crate) async fn run(cmd: A2aCommand) -> Result<(), CliError> {
    match cmd {
        A2aCommand::Card { url, opts } => {
            let card = fetch_card(&url, &client_config(&opts)?).await?;
            output::card(&card, opts.json);
        }
        A2aCommand::Send {
            url,
            text,
            stream,
            task,
            context,
            no_wait,
            correlation,
            idempotency_key,
            trigger,
            skill,
            opts,
        } => {
            let client = connect(&url, &opts).await?;
            let mut message = Message::text(Role::User, text);
            message.task_id = task;
            message.context_id = context;
            if correlation.is_some()
                || idempotency_key.is_some()
                || trigger.is_some()
                || skill.is_some()
            {
                let mut e = agentry::a2a::envelope::Envelope::default();
                e.correlation_id = correlation;
                e.idempotency_key = idempotency_key;
                e.trigger_id = trigger;
                e.skill = skill;
                e.check().map_err(|e| CliError::Usage(e.message))?;
                e.attach(&mut message);
            }
            let mut params = MessageSendParams::new(message);
            if no_wait {
                params.configuration = Some(MessageSendConfiguration {
                    blocking: Some(false),
                    ..Default::default()
                });
            }
            if stream {
                let mut events = Box::pin(client.stream_message(params));
                while let Some(ev) = events.next().await {
                    output::event(&ev?, opts.json);
                }
            } else {
                match client.send_message(params).await? {
                    SendMessageResult::Task(t) => output::task(&t, opts.json),
                    SendMessageResult::Message(m) => output::message(&m, opts.json),
                }
            }
        }
        A2aCommand::Get {
            url,
            task,
            history,
            opts,
        } => {
            let client = connect(&url, &opts).await?;
            output::task(&client.get_task(&task, history).await?, opts.json);
        }
        A2aCommand::Cancel { url, task, opts } => {
            let client = connect(&url, &opts).await?;
            output::task(&client.cancel_task(&task).await?, opts.json);
        }
        A2aCommand::Resubscribe { url, task, opts } => {
            let client = connect(&url, &opts).await?;
            let mut events = Box::pin(client.resubscribe(&task));
            while let Some(ev) = events.next().await {
                output::event(&ev?, opts.json);
            }
        }
    }
    Ok(())
}
