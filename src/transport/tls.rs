//! TLS for `rediss://` masters (cargo feature `tls`): rustls with the `ring` crypto
//! provider, the certificates a [`Config`](crate::Config) names, checked before any
//! connection is opened.
//!
//! The redis crate builds its rustls configuration with the process-level default
//! crypto provider, which rustls cannot pick by itself when no backend feature (or two)
//! is enabled; [`install_crypto_provider`] makes `ring` that default unless the
//! application installed one first.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// Where a PEM document comes from: given in memory or read from a file at connect time.
#[derive(Clone)]
pub(crate) enum Pem {
    Bytes(Vec<u8>),
    File(PathBuf),
}

impl Pem {
    fn load(&self, what: &str) -> Result<Vec<u8>> {
        match self {
            Pem::Bytes(b) => Ok(b.clone()),
            Pem::File(path) => std::fs::read(path).map_err(|e| {
                Error::config_from(format!("cannot read {what} file {}", path.display()), e)
            }),
        }
    }
}

/// Never prints the contents: a key is a secret.
impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::Bytes(_) => f.write_str("<in-memory PEM>"),
            Pem::File(path) => write!(f, "{:?}", path.display()),
        }
    }
}

impl fmt::Display for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::Bytes(_) => f.write_str("(in-memory PEM)"),
            Pem::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The TLS settings of a [`Config`](crate::Config). Empty: webpki roots, no client
/// certificate.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsOptions {
    pub(crate) root_ca: Option<Pem>,
    /// Certificate chain and private key.
    pub(crate) client: Option<(Pem, Pem)>,
}

impl TlsOptions {
    pub(crate) fn is_set(&self) -> bool {
        self.root_ca.is_some() || self.client.is_some()
    }

    /// Reads and checks the configured PEMs; `None` when nothing is configured (the
    /// redis crate then trusts the webpki roots and sends no client certificate).
    ///
    /// Every problem is an [`Error::Config`] naming the file, never quoting its
    /// contents.
    pub(crate) fn certificates(&self) -> Result<Option<redis::TlsCertificates>> {
        if !self.is_set() {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config_from("TLS", e))?;
        let mut roots = rustls::RootCertStore::empty();
        let root_cert = match &self.root_ca {
            Some(source) => {
                let pem = source.load("TLS CA")?;
                for cert in certs(&pem, "TLS CA", source)? {
                    roots.add(cert).map_err(|e| {
                        Error::config_from(format!("TLS CA {source}: unusable CA certificate"), e)
                    })?;
                }
                Some(pem)
            }
            None => None,
        };
        let builder = builder.with_root_certificates(roots);
        let client_tls = match &self.client {
            Some((cert_source, key_source)) => {
                let cert_pem = cert_source.load("TLS client certificate")?;
                let key_pem = key_source.load("TLS client key")?;
                let chain = certs(&cert_pem, "TLS client certificate", cert_source)?;
                let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
                    Error::config(format!(
                        "TLS client key {key_source}: no PEM private key (PKCS#8, PKCS#1 or \
                         SEC1) in it"
                    ))
                })?;
                // Checks the key type and that key and certificate belong together.
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    let what =
                        format!("TLS client certificate {cert_source} with key {key_source}");
                    Error::config_from(what, e)
                })?;
                Some(redis::ClientTlsConfig {
                    client_cert: cert_pem,
                    client_key: key_pem,
                })
            }
            None => None,
        };
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
    }
}

/// The certificates of a PEM document: at least one, all well-formed.
fn certs(pem: &[u8], what: &str, source: &Pem) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config_from(format!("{what} {source}: bad PEM"), e))?;
    if certs.is_empty() {
        return Err(Error::config(format!(
            "{what} {source}: no CERTIFICATE in it"
        )));
    }
    Ok(certs)
}

/// Whether `info` is a `rediss://` address.
pub(crate) fn is_tls(info: &redis::ConnectionInfo) -> bool {
    matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
}

/// Makes `ring` the process-level rustls crypto provider, unless one is installed
/// already (by the application or an earlier call).
pub(crate) fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only when a provider is installed already: that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_the_application_installed_first_is_kept() {
        // The tests of this binary may share a process: only assert "kept" when this
        // test's provider is the one that got installed.
        // Told apart from ring's default by its single cipher suite.
        let mut mine = rustls::crypto::ring::default_provider();
        mine.cipher_suites.truncate(1);
        let installed_mine = mine.install_default().is_ok();
        install_crypto_provider();
        install_crypto_provider();
        let current = rustls::crypto::CryptoProvider::get_default().expect("a provider");
        if installed_mine {
            assert_eq!(current.cipher_suites.len(), 1);
        }
    }

    #[test]
    fn pem_debug_and_display_never_show_the_contents() {
        let pem = Pem::Bytes(b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n".to_vec());
        assert!(!format!("{pem:?} {pem}").contains("c2VjcmV0"));
    }
}
