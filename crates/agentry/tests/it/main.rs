//! Integration tests of the library: configs as files, the one serve path.
//!
//! One test binary per crate (each binary links the whole dependency tree): the files below
//! are its modules, grouped by concern.

mod config;
mod events;
mod governance;
#[cfg(feature = "postgres")]
mod replicas;
mod serve;
mod tls;

/// Serves `config` on a free loopback port (its public URL set to it); the base URL.
pub(crate) async fn serve(mut config: agentry::config::Config) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    config.server.public_url = Some(format!("http://{addr}"));
    let service = agentry::Service::build(config).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, service.router).await });
    format!("http://{addr}")
}
