//! TLS for the listener, with client certificates (mTLS) when a client CA is configured: a
//! certificate that CA signed is a credential (`mtls:` and its subject's common name), see
//! [`super::Credentials::client_certs`].
//!
//! The verified name reaches the handlers through a request header that the router itself
//! removes from every incoming request before it sets it ([`VERIFIED_CLIENT_HEADER`]), so a
//! client cannot send it, however the router is served.

use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;

/// The internal header carrying the verified client certificate's common name.
pub(crate) const VERIFIED_CLIENT_HEADER: &str = "x-agentry-verified-client";

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A certificate or key file that cannot be read or holds no usable PEM.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The certificates and key do not make a TLS configuration (a key that does not match
    /// the certificate, say).
    #[error("TLS: {0}")]
    Config(#[source] rustls::Error),
}

/// A client certificate the TLS layer verified against the configured client CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The subject's common name (CN), when it has one.
    pub common_name: Option<String>,
}

/// The listener's TLS settings (see [`super::listen::serve_router_tls`]).
#[derive(Clone)]
pub struct ServerTls {
    acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::File {
            path: path.display().to_string(),
            reason: format!("not PEM certificates: {e}"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            path: path.display().to_string(),
            reason: "no certificate in it".into(),
        });
    }
    Ok(certs)
}

impl ServerTls {
    /// TLS with the certificate chain and key in `cert` and `key` (PEM). With `client_ca`,
    /// clients may present a certificate that CA signed (one it did not sign fails the
    /// handshake); with `require_client_cert` too, clients without one are refused at the
    /// handshake.
    pub fn from_pem_files(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        require_client_cert: bool,
    ) -> Result<ServerTls, TlsError> {
        let chain = certs(cert)?;
        let key_pem = read(key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::File {
            path: key.display().to_string(),
            reason: format!("no PEM private key: {e}"),
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for c in certs(ca)? {
                    roots.add(c).map_err(TlsError::Config)?;
                }
                let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let v = if require_client_cert {
                    v
                } else {
                    v.allow_unauthenticated()
                };
                let v = v.build().map_err(|e| {
                    TlsError::Config(rustls::Error::General(format!("client CA: {e}")))
                })?;
                builder.with_client_cert_verifier(v)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // gRPC over TLS negotiates HTTP/2 (the listener speaks both when it serves gRPC).
        #[cfg(feature = "grpc")]
        config.alpn_protocols.insert(0, b"h2".to_vec());
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// The handshake; the client's certificate when it presented one (verified by then).
    pub(crate) async fn accept(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<(
        tokio_rustls::server::TlsStream<TcpStream>,
        Option<ClientCert>,
    )> {
        let tls = self.acceptor.accept(stream).await?;
        let cert = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| ClientCert {
                common_name: subject_cn(c.as_ref()),
            });
        Ok((tls, cert))
    }
}

/// One DER element: its tag, its contents and what follows it.
fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, r) = b.split_first()?;
    let (&first, mut r) = r.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, rest) = r.split_at_checked(n)?;
        r = rest;
        bytes.iter().fold(0usize, |a, &x| (a << 8) | usize::from(x))
    };
    let (content, rest) = r.split_at_checked(len)?;
    Some((tag, content, rest))
}

/// The subject common name of an X.509 certificate (DER), read by walking the
/// TBSCertificate's fields: version, serial, signature, issuer, validity, subject.
fn subject_cn(der: &[u8]) -> Option<String> {
    const SEQUENCE: u8 = 0x30;
    fn expect(b: &[u8], tag: u8) -> Option<(u8, &[u8], &[u8])> {
        tlv(b).filter(|(t, ..)| *t == tag)
    }
    let (_, cert, _) = expect(der, SEQUENCE)?;
    let (_, tbs, _) = expect(cert, SEQUENCE)?;
    let mut r = tbs;
    if let Some((0xA0, _, rest)) = tlv(r) {
        r = rest;
    }
    let (_, _, r) = expect(r, 0x02)?; // serial
    let (_, _, r) = expect(r, SEQUENCE)?; // signature algorithm
    let (_, _, r) = expect(r, SEQUENCE)?; // issuer
    let (_, _, r) = expect(r, SEQUENCE)?; // validity
    let (_, mut subject, _) = expect(r, SEQUENCE)?;
    while !subject.is_empty() {
        let (_, mut set, rest) = expect(subject, 0x31)?;
        subject = rest;
        while !set.is_empty() {
            let (_, atv, rest) = expect(set, SEQUENCE)?;
            set = rest;
            let (_, oid, value) = expect(atv, 0x06)?;
            if oid == [0x55, 0x04, 0x03] {
                let (tag, v, _) = tlv(value)?;
                // UTF8String, PrintableString, IA5String, TeletexString.
                return matches!(tag, 0x0C | 0x13 | 0x16 | 0x14)
                    .then(|| String::from_utf8(v.to_vec()).ok())
                    .flatten();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_that_is_not_a_certificate_has_no_name_and_does_not_panic() {
        for bad in [
            &[][..],
            &[0x30][..],
            &[0x30, 0x85, 1, 2, 3, 4, 5][..],
            &[0x30, 0x05, 0x30, 0x03, 0x02, 0x01][..],
            &[0x30, 0x82, 0xff, 0xff][..],
        ] {
            assert_eq!(subject_cn(bad), None);
        }
    }
}
