//! TLS (`rediss://`, cargo feature `tls`): a private CA and, for servers with
//! `tls-auth-clients yes`, a client certificate.
//!
//! Environment (the URL from `REDLATCH_REDIS`, the files read by this example):
//! - `REDLATCH_REDIS`: a `rediss://[user:password@]host:port` URL (default
//!   `rediss://127.0.0.1:6380`); the certificate must name its host;
//! - `REDLATCH_TLS_CA` (optional): the CA certificate (PEM) that signed the server's;
//!   without it, the bundled Mozilla roots are trusted;
//! - `REDLATCH_TLS_CERT` and `REDLATCH_TLS_KEY` (optional): a client certificate and
//!   its key (PEM).
//!
//! `REDLATCH_REDIS=rediss://127.0.0.1:6380 REDLATCH_TLS_CA=ca.crt cargo run --features tls --example tls`

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let mut config = Config::from_env_or(Config::single("rediss://127.0.0.1:6380"))?;
    if let Ok(ca) = std::env::var("REDLATCH_TLS_CA") {
        config = config.tls_root_ca_file(ca);
    }
    if let (Ok(cert), Ok(key)) = (
        std::env::var("REDLATCH_TLS_CERT"),
        std::env::var("REDLATCH_TLS_KEY"),
    ) {
        config = config.tls_client_cert_files(cert, key);
    }
    // Missing or bad files are Error::Config naming the file; a certificate the CA
    // does not vouch for fails the connection. Neither prints the URL's password.
    let client = Client::connect(config.clone()).await?;
    let other = Client::connect(config).await?;
    println!("tls: connected to {:?}", client.masters());
    let started = Instant::now();

    let workers: Vec<_> = [("client-1", &client), ("client-2", &other)]
        .into_iter()
        .map(|(who, c)| {
            let lock = c.lock("examples:tls:job");
            tokio::spawn(async move {
                for _ in 0..2 {
                    let guard = lock.lock().await?;
                    println!("{:>7.1?} {who}: holds the lock over TLS", started.elapsed());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    guard.unlock().await?;
                }
                redlatch::Result::Ok(())
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker panicked")?;
    }
    println!("tls: 4 turns done");
    client.close(Duration::from_secs(5)).await;
    other.close(Duration::from_secs(5)).await;
    Ok(())
}
