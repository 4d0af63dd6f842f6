//! `agentry model ...`: the embedded local models.

use std::path::PathBuf;

use agentry::a2a::server::listen;
use agentry::local::LocalProvider;
use agentry::local::provider::{LocalConfig, shared_chat_model, shared_embedder};
use agentry::local::serve::{ServeState, router};
use clap::Subcommand;

use crate::error::CliError;

#[derive(Subcommand)]
pub(crate) enum ModelCommand {
    /// Serve the local chat model and embedder over an OpenAI-compatible API
    /// (/v1/chat/completions, /v1/embeddings, /v1/models).
    Serve {
        #[arg(long, default_value_t = 8090)]
        port: u16,
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// GGUF chat model (default: the fetched SmolLM2-135M-Instruct).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Embedder folder for /v1/embeddings (default: the fetched all-MiniLM-L6-v2).
        #[arg(long)]
        embedder: Option<PathBuf>,
        /// The tool router's embedder folder (default: the fetched all-mpnet-base-v2).
        #[arg(long)]
        router_embedder: Option<PathBuf>,
    },
}

pub(crate) async fn run(cmd: ModelCommand) -> Result<(), CliError> {
    match cmd {
        ModelCommand::Serve {
            port,
            host,
            model,
            embedder,
            router_embedder,
        } => {
            // The provider as an agent's `[model] provider = "local"` builds it (the models
            // are shared in the process, so `chat` is the provider's own).
            let (provider, chat, emb) = tokio::task::spawn_blocking(move || {
                let cfg = LocalConfig {
                    model: model.clone(),
                    router_embedder,
                    ..Default::default()
                };
                Ok::<_, agentry::local::LocalError>((
                    LocalProvider::new(cfg)?,
                    shared_chat_model(model)?,
                    shared_embedder(embedder)?,
                ))
            })
            .await
            .map_err(|e| CliError::Failed(format!("loading the models: {e}")))?
            .map_err(agentry::Error::from)?;
            let state = ServeState {
                chat: provider,
                embedder: Some(emb),
                embedder_name: "all-minilm-l6-v2".into(),
            };
            let listener = agentry::a2a::server::listen::bind((host.as_str(), port))
                .await
                .map_err(|source| agentry::Error::Listen {
                    addr: format!("{host}:{port}"),
                    source,
                })?;
            let addr = listener.local_addr().map_err(|e| agentry::Error::Io {
                what: "listener".into(),
                source: e,
            })?;
            eprintln!(
                "serving {} (OpenAI-compatible) at http://{addr}/v1",
                chat.name()
            );
            let app = crate::guarded(router(state), &format!("{host}:{port}"));
            listen::serve_router(
                listener,
                app,
                listen::Limits::default(),
                agentry::shutdown_signal(),
            )
            .await
            .map_err(|e| {
                agentry::Error::Io {
                    what: "model server failed".into(),
                    source: e,
                }
                .into()
            })
        }
    }
}
