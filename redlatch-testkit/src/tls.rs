//! Certificates for the TLS tests, made with the `openssl` command at test time: a CA, a
//! server certificate it signs (SAN IP:127.0.0.1 and DNS:localhost), a client
//! certificate it signs, and a second, unrelated CA. ECDSA P-256 keys in PKCS#8 PEM.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The extensions of each certificate; `-config` makes the system's openssl.cnf irrelevant.
const OPENSSL_CNF: &str = "\
[req]
distinguished_name = dn
prompt = no

[dn]
CN = unused

[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash

[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
authorityKeyIdentifier = keyid

[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
";

/// A private directory of freshly generated certificates and keys, removed on drop.
pub struct TestCerts {
    dir: PathBuf,
}

impl TestCerts {
    /// Generates everything (a few openssl runs, well under a second).
    pub fn generate() -> TestCerts {
        let dir = std::env::temp_dir().join(format!(
            "redlatch-tls-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let certs = TestCerts { dir };
        std::fs::write(certs.path("openssl.cnf"), OPENSSL_CNF).expect("write openssl.cnf");
        certs.self_signed("ca", "redlatch test CA");
        certs.self_signed("other-ca", "redlatch unrelated CA");
        certs.signed("server", "localhost", 1);
        certs.signed("client", "redlatch test client", 2);
        certs
    }

    /// The CA that signed the server and client certificates (PEM file).
    pub fn ca(&self) -> PathBuf {
        self.path("ca.crt")
    }

    /// A CA that signed nothing used here (PEM file).
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.crt")
    }

    pub fn server_cert(&self) -> PathBuf {
        self.path("server.crt")
    }

    pub fn server_key(&self) -> PathBuf {
        self.path("server.key")
    }

    pub fn client_cert(&self) -> PathBuf {
        self.path("client.crt")
    }

    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }

    /// The contents of one of the files above.
    pub fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    #[rustfmt::skip]
    fn self_signed(&self, name: &str, cn: &str) {
        self.openssl(&[
            "req", "-x509", "-config", "openssl.cnf", "-extensions", "ca", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc", "-days", "2",
            "-subj", &format!("/CN={cn}"),
            "-keyout", &format!("{name}.key"), "-out", &format!("{name}.crt"),
        ]);
    }

    #[rustfmt::skip]
    fn signed(&self, name: &str, cn: &str, serial: u32) {
        self.openssl(&[
            "req", "-new", "-config", "openssl.cnf", "-newkey", "ec",
            "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc",
            "-subj", &format!("/CN={cn}"),
            "-keyout", &format!("{name}.key"), "-out", &format!("{name}.csr"),
        ]);
        self.openssl(&[
            "x509", "-req", "-in", &format!("{name}.csr"), "-CA", "ca.crt", "-CAkey", "ca.key",
            "-set_serial", &serial.to_string(), "-days", "2",
            "-extfile", "openssl.cnf", "-extensions", name, "-out", &format!("{name}.crt"),
        ]);
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run openssl (is it installed?): {e}"));
        assert!(
            out.status.success(),
            "openssl {args:?} failed with {}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TestCerts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the `redis-server` on the PATH was built with TLS (`BUILD_TLS=yes`; Debian's
/// is, a plain `make` is not), read once: started with a TLS port and no certificate,
/// a build with TLS stops complaining about the missing `tls-cert-file`; one without
/// stops saying it has no TLS support (or, before 7, not knowing the directive).
pub fn server_has_tls() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("redlatch-tls-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the TLS probe's dir");
        let out = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", "1", "--dir"])
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .expect("run redis-server");
        let _ = std::fs::remove_dir_all(&dir);
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        text.contains("tls-cert-file")
    })
}

/// True, with a note, when the `redis-server` on the PATH has no TLS: the TLS test
/// `what` then skips.
pub fn no_tls(what: &str) -> bool {
    let missing = !server_has_tls();
    if missing {
        eprintln!(
            "skipped: {what} needs a server built with TLS (this server: {}, built without)",
            super::server_version()
        );
    }
    missing
}
