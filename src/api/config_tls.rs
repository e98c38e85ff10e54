//! The TLS settings of a [`Config`] (cargo feature `tls`): the CA and client
//! certificates of `rediss://` masters.

use crate::api::config::Config;
use crate::engine::facade::Pem;
#[cfg(doc)]
use crate::error::Error;

/// TLS (`rediss://` masters), with the cargo feature `tls`.
///
/// By default a master's certificate must chain to one of the Mozilla root
/// certificates bundled with the crate (webpki-roots) and match the URL's host name
/// (or IP address), and no client certificate is sent. The settings apply to every
/// `rediss://` master; setting any of them with no `rediss://` master is a
/// configuration error. Files are read, and every certificate and key checked, by
/// [`Client::connect`](crate::Client::connect), which reports a problem as
/// [`Error::Config`] naming the file (never its contents).
#[cfg(feature = "tls")]
impl Config {
    /// Trusts the CA certificates of this PEM document (one or more `CERTIFICATE`
    /// blocks) instead of the bundled roots. Default: the webpki roots.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// // Usually the contents of the CA file, e.g. include_bytes!("ca.crt"). The PEM is
    /// // checked by connect, before any connection is opened:
    /// let config = Config::single("rediss://redis.internal:6380")
    ///     .tls_root_ca_pem(b"not a certificate".to_vec());
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config { .. }));
    /// assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
    /// # }
    /// ```
    pub fn tls_root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_ca = Some(Pem::Bytes(pem.into()));
        self
    }

    /// Like [`tls_root_ca_pem`](Self::tls_root_ca_pem), with the PEM read from a file
    /// when connecting.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// let config = Config::single("rediss://redis.internal:6380")
    ///     .tls_root_ca_file("/nonexistent/redis-ca.crt");
    /// // The file is read by connect; a missing one is a configuration error naming it.
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config { .. }));
    /// assert!(err.to_string().contains("/nonexistent/redis-ca.crt"), "{err}");
    /// # }
    /// ```
    pub fn tls_root_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.root_ca = Some(Pem::File(path.into()));
        self
    }

    /// Presents this client certificate (PEM chain, leaf first) with its private key
    /// (PEM: PKCS#8, PKCS#1 or SEC1), for masters that require one
    /// (`tls-auth-clients yes`). Default: none.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// // TLS settings need a rediss:// master: with none they are refused, not ignored.
    /// let config = Config::single("redis://127.0.0.1:6380")
    ///     .tls_client_cert_pem(b"certificate PEM".to_vec(), b"key PEM".to_vec());
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config { .. }));
    /// assert!(err.to_string().contains("rediss://"), "{err}");
    /// # }
    /// ```
    pub fn tls_client_cert_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((Pem::Bytes(cert_pem.into()), Pem::Bytes(key_pem.into())));
        self
    }

    /// Like [`tls_client_cert_pem`](Self::tls_client_cert_pem), with both PEMs read from
    /// files when connecting (they may be the same file).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// let config = Config::single("rediss://redis.internal:6380")
    ///     .tls_root_ca_file("/etc/redis/ca.crt")
    ///     .tls_client_cert_files("/nonexistent/client.crt", "/nonexistent/client.key");
    /// // Debug shows the paths, never key material.
    /// assert!(format!("{config:?}").contains("/nonexistent/client.key"));
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config { .. }));
    /// # }
    /// ```
    pub fn tls_client_cert_files(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }
}
