//! TLS to PostgreSQL (rustls on ring, already in the tree for the A2A listener).
//!
//! Asked for in the connection URL, with libpq's names: `sslmode=require`, `verify-ca` or
//! `verify-full`, and `sslrootcert=PATH` (PEM certificates to trust instead of the Mozilla
//! roots that `webpki-roots` ships). The server's certificate is always checked against
//! those roots, and its name against the host for `require` and `verify-full`: unlike
//! libpq, `require` does not mean "encrypted but unverified" here (a connection anyone on the
//! path can take over is refused). `verify-ca` checks the chain only, for servers reached by
//! an address their certificate does not name. `disable` and `prefer` (and no `sslmode`)
//! connect without TLS, as before.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

/// What a URL asks of TLS, taken out of it before the driver parses the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    /// `require`, `verify-ca` or `verify-full`; `None` without TLS.
    pub(crate) mode: Option<Mode>,
    /// `sslrootcert`.
    pub(crate) root_cert: Option<PathBuf>,
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The chain and the host name.
    Full,
    /// The chain only.
    Chain,
}

/// Splits agentry's TLS settings off a `postgres://` URL's query (`sslmode` values the
/// driver does not know, `sslrootcert`), leaving what the driver parses. A key=value string
/// is left as it is (the driver knows `sslmode=require`, which then means `verify-full`).
pub(crate) fn split(url: &str) -> (String, Asked) {
    let mut asked = Asked::default();
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), asked);
    };
    if !(base.starts_with("postgres://") || base.starts_with("postgresql://")) {
        return (url.to_owned(), asked);
    }
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (key, value) {
            ("sslmode", "require" | "verify-full") => {
                asked.mode = Some(Mode::Full);
                kept.push("sslmode=require".to_owned());
            }
            ("sslmode", "verify-ca") => {
                asked.mode = Some(Mode::Chain);
                kept.push("sslmode=require".to_owned());
            }
            ("sslrootcert", path) => asked.root_cert = Some(PathBuf::from(decode(path))),
            _ => kept.push(pair.to_owned()),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, asked)
}

/// Percent-decoding of a query value (a path may carry `%2F` or spaces).
fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The `sslrootcert` file cannot be read or holds no certificate.
    #[error("sslrootcert {path}: {reason}")]
    RootCert {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// rustls refused the settings.
    #[error("TLS settings: {0}")]
    Config(#[source] rustls::Error),
}

/// A TLS client configuration for `asked` (which asks for TLS).
pub(crate) fn client_config(mode: Mode, root_cert: Option<&Path>) -> Result<Connector, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        Some(path) => {
            let shown = path.display().to_string();
            let pem = std::fs::read(path).map_err(|e| TlsError::RootCert {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|e| TlsError::RootCert {
                    path: shown.clone(),
                    reason: format!("not PEM certificates: {e}"),
                })?;
            if certs.is_empty() {
                return Err(TlsError::RootCert {
                    path: shown,
                    reason: "no certificate in it".into(),
                });
            }
            for c in certs {
                roots.add(c).map_err(TlsError::Config)?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| TlsError::Config(rustls::Error::General(e.to_string())))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let config = match mode {
        Mode::Full => builder.with_webpki_verifier(verifier),
        Mode::Chain => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier))),
    }
    .with_no_client_auth();
    Ok(Connector(tokio_rustls::TlsConnector::from(Arc::new(
        config,
    ))))
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// tokio-postgres' TLS hook over rustls.
#[derive(Clone)]
pub(crate) struct Connector(tokio_rustls::TlsConnector);

impl<S> MakeTlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<Connect> {
        let name = ServerName::try_from(domain.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Connect(self.0.clone(), name))
    }
}

/// One connection's handshake, for the host it is made to.
pub(crate) struct Connect(tokio_rustls::TlsConnector, ServerName<'static>);

impl<S> TlsConnect<S> for Connect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = Stream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Stream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let Connect(connector, name) = self;
        Box::pin(async move { Ok(Stream(connector.connect(name, stream).await?)) })
    }
}

/// A TLS connection to the server.
pub(crate) struct Stream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Stream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Stream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for Stream<S> {
    /// No channel binding: SCRAM authenticates without it (tokio-postgres' default,
    /// `channel_binding=prefer`, accepts that).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}
