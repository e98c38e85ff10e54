//! Connection set-up and topology discovery: from plain settings (which servers, how
//! they are deployed, how to reach them) to the transports of one deployment, each
//! checked to answer. The engine calls [`connect`]; neither it nor the API opens a
//! connection or asks a server what it is.
//!
//! * Plain masters: one [`Standalone`] per address, PINGed at once; a majority must
//!   answer. Two addresses of one server (same `run_id`) are refused.
//! * A lone address that turns out to be a Redis Cluster node, or an explicit cluster:
//!   a [`Cluster`] through the first seed that answered.
//! * Sentinel: the primary the sentinels name, with the primary's own credentials.
//! * `SyncReplicas::Aof` needs `WAITAOF` on every server, checked here, not at the
//!   first acquisition.

use std::sync::Arc;

use futures_util::future::join_all;
use redis::{ConnectionInfo, Value};

use super::cluster::Cluster;
use super::replicas::SyncReplicas;
use super::sentinel::{Sentinel, SentinelSetup};
use super::standalone::{LinkSettings, Standalone};
#[cfg(feature = "tls")]
use super::tls::{self, is_tls, TlsOptions};
use super::{Dialect, Lane, Request, Transport};
use crate::error::{Error, MasterError, Result};

/// How the servers of a deployment relate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Independent masters (one: single mode; several: Redlock). A lone master that is
    /// a cluster node is taken as a cluster seed.
    Masters,
    /// The addresses are seeds of one Redis Cluster.
    Cluster,
    /// The addresses are sentinels watching the primary `master_name`.
    Sentinel { master_name: String },
}

/// Everything needed to reach a deployment, in plain values (the API's `Config`,
/// validated and parsed).
pub(crate) struct Deployment {
    /// The masters, seeds or sentinels.
    pub(crate) servers: Vec<ConnectionInfo>,
    pub(crate) shape: Shape,
    /// The primary's `(username, password)` when it differs from the sentinels'.
    pub(crate) master_auth: Option<(Option<String>, String)>,
    /// Connections per server (the lanes).
    pub(crate) pool_size: usize,
    /// A request's time limit.
    pub(crate) timeout: std::time::Duration,
    /// Time to open a connection, and to answer the discovery commands.
    pub(crate) connect_timeout: std::time::Duration,
    /// Replica sync mode and its timeout.
    pub(crate) sync: (SyncReplicas, std::time::Duration),
    /// Certificates of `rediss://` servers.
    #[cfg(feature = "tls")]
    pub(crate) tls: TlsOptions,
}

/// A deployment reached: its transports (one per Redlock master; one for a cluster
/// or a Sentinel primary) and whether it is a Redis Cluster.
pub(crate) struct Connected {
    pub(crate) links: Vec<Arc<dyn Transport>>,
    pub(crate) cluster: bool,
}

/// Opens the deployment `d`.
pub(crate) async fn connect(d: Deployment) -> Result<Connected> {
    let clients = clients(&d)?;
    let link = LinkSettings {
        pool_size: d.pool_size,
        timeout: d.timeout,
        connect_timeout: d.connect_timeout,
        sync: d.sync,
    };
    let connected = match &d.shape {
        Shape::Sentinel { master_name } => {
            let primary = sentinel(&d, master_name.clone(), clients, link).await?;
            Connected {
                links: vec![Arc::new(primary)],
                cluster: false,
            }
        }
        shape => masters(shape, clients, link).await?,
    };
    if d.sync.0 == SyncReplicas::Aof {
        for link in &connected.links {
            require_waitaof(&**link).await?;
        }
    }
    let n = connected.links.len();
    if n > 1 && n.is_multiple_of(2) {
        tracing::warn!(
            n,
            "an even number of masters tolerates no more failures than one fewer"
        );
    }
    Ok(connected)
}

/// One redis client per server, with its TLS certificates (read and checked here,
/// before any connection is opened).
fn clients(d: &Deployment) -> Result<Vec<redis::Client>> {
    #[cfg(feature = "tls")]
    if d.tls.is_set() && !d.servers.iter().any(is_tls) {
        return Err(Error::config(
            "TLS certificates are configured but no master URL is rediss:// (or valkeys://)",
        ));
    }
    #[cfg(feature = "tls")]
    let certs = match d.servers.iter().any(is_tls) {
        true => {
            tls::install_crypto_provider();
            d.tls.certificates()?
        }
        false => None,
    };
    (d.servers.iter().cloned())
        .map(|info| {
            let addr = info.addr().to_string();
            #[cfg(feature = "tls")]
            if let (Some(certs), true) = (&certs, is_tls(&info)) {
                return redis::Client::build_with_tls(info, certs.clone())
                    .map_err(|e| Error::config_from(format!("master {addr}: TLS"), e));
            }
            redis::Client::open(info).map_err(|source| Error::Redis { addr, source })
        })
        .collect()
}

/// Independent masters, or a cluster through its seeds: every server is PINGed; a
/// lone master is asked in the same round trip whether it is a cluster node.
async fn masters(
    shape: &Shape,
    clients: Vec<redis::Client>,
    link: LinkSettings,
) -> Result<Connected> {
    let links = (clients.into_iter())
        .map(|client| link.open(client, Dialect::Classic))
        .collect::<Result<Vec<_>>>()?;
    // On the lock lane: the connection every lock call takes is opened here, not by
    // the first call.
    let (pings, single_cluster) = match (shape, &links[..]) {
        (Shape::Masters, [lone]) => {
            let (ping, cluster) = probe_lone(lone).await;
            (vec![ping], cluster)
        }
        _ => {
            let ping = redis::cmd("PING");
            let pings =
                join_all(links.iter().map(|link| {
                    link.send(Lane::Lock, link.connect_timeout(), Request::Cmd(&ping))
                }))
                .await;
            (pings, false)
        }
    };
    if *shape == Shape::Cluster || single_cluster {
        let cluster = cluster(links, pings, link).await?;
        return Ok(Connected {
            links: vec![Arc::new(cluster)],
            cluster: true,
        });
    }
    let addrs: Vec<&str> = links.iter().map(|l| l.addr()).collect();
    majority_answered(&addrs, &pings, links.len() / 2 + 1)?;
    let links: Vec<Arc<dyn Transport>> = (links.into_iter())
        .map(|l| Arc::new(l) as Arc<dyn Transport>)
        .collect();
    if links.len() > 1 {
        refuse_duplicates(&links).await?;
    }
    Ok(Connected {
        links,
        cluster: false,
    })
}

/// Ok when at least `quorum` servers answered; otherwise the lone server's own error,
/// or [`Error::NoQuorum`] with every server's error (as the engine judges a read).
/// `addrs[i]` is the address of the server that gave `pings[i]`.
fn majority_answered(addrs: &[&str], pings: &[Result<Value>], quorum: usize) -> Result<()> {
    let ok = pings.iter().filter(|p| p.is_ok()).count();
    if ok >= quorum {
        return Ok(());
    }
    let mut errors: Vec<MasterError> = (addrs.iter().zip(pings))
        .filter_map(|(addr, p)| Some(MasterError::new(*addr, p.as_ref().err()?.clone())))
        .collect();
    if pings.len() == 1 && errors.len() == 1 {
        return Err(errors.remove(0).error);
    }
    Err(Error::NoQuorum {
        acquired: ok,
        needed: quorum,
        errors: errors.into(),
    })
}

/// Refuses [`SyncReplicas::Aof`] at connect, rather than failing every acquisition
/// later, on a server without `WAITAOF` (Redis < 7.2) or without an append-only file
/// (`appendonly no`: `WAITAOF` then refuses to count the primary's own fsync).
async fn require_waitaof(link: &dyn Transport) -> Result<()> {
    let mut cmd = redis::cmd("COMMAND");
    cmd.arg("INFO").arg("WAITAOF");
    let reply = link
        .send(Lane::Side, link.connect_timeout(), Request::Cmd(&cmd))
        .await?;
    match reply {
        Value::Array(items) if items.first().is_some_and(|i| *i != Value::Nil) => {}
        _ => {
            return Err(Error::config(format!(
                "SyncReplicas::Aof needs WAITAOF (Redis >= 7.2), which {} lacks; use \
                 SyncReplicas::Auto or Count",
                link.addr()
            )))
        }
    }
    let mut cmd = redis::cmd("INFO");
    cmd.arg("persistence");
    let reply = link
        .send(Lane::Side, link.connect_timeout(), Request::Cmd(&cmd))
        .await?;
    let info: String = redis::from_redis_value(reply).unwrap_or_default();
    if info.lines().any(|l| l.trim() == "aof_enabled:0") {
        return Err(Error::config(format!(
            "SyncReplicas::Aof needs an append-only file on {} (appendonly yes), which \
             it has off; use SyncReplicas::Auto or Count",
            link.addr()
        )));
    }
    Ok(())
}

/// Finds the primary of `master_name` through the sentinels (`clients`).
async fn sentinel(
    d: &Deployment,
    master_name: String,
    sentinels: Vec<redis::Client>,
    link: LinkSettings,
) -> Result<Sentinel> {
    let mut master = sentinels[0].get_connection_info().clone();
    if let Some((username, password)) = &d.master_auth {
        let mut settings = master.redis_settings().clone().set_password(password);
        if let Some(username) = username {
            settings = settings.set_username(username);
        }
        master = master.set_redis_settings(settings);
    }
    Sentinel::connect(SentinelSetup {
        master_name,
        sentinels,
        master,
        link,
    })
    .await
}

/// Connects to a cluster through the first seed that answered the PING.
async fn cluster(
    seeds: Vec<Standalone>,
    pings: Vec<Result<Value>>,
    link: LinkSettings,
) -> Result<Cluster> {
    let mut last = None;
    for (seed, ping) in seeds.into_iter().zip(pings) {
        if let Err(e) = ping {
            last = Some(e);
            continue;
        }
        match Cluster::connect(seed, link.clone()).await {
            Ok(cluster) => return Ok(cluster),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::config("no cluster seed given")))
}

/// PINGs a lone master and asks, in the same round trip, whether it is a node of a
/// Redis Cluster (`cluster_enabled:1`): the PING's answer, and whether it is one. A
/// server that does not answer, or may not run INFO, is taken as not one.
async fn probe_lone(link: &Standalone) -> (Result<Value>, bool) {
    let mut pipe = redis::pipe();
    pipe.cmd("PING").cmd("INFO").arg("cluster").ignore_errors();
    let timeout = link.connect_timeout();
    let replies = link.send(Lane::Lock, timeout, Request::Pipe(&pipe)).await;
    match replies {
        Ok(Value::Array(replies)) if !matches!(replies.first(), Some(Value::ServerError(_))) => {
            let text: Option<String> =
                (replies.get(1).cloned()).and_then(|v| redis::from_redis_value(v).ok());
            let cluster = text.is_some_and(|t| t.lines().any(|l| l.trim() == "cluster_enabled:1"));
            (Ok(Value::Okay), cluster)
        }
        // The PING refused (NOAUTH, NOPERM): asked alone, for its error as the
        // transport types it.
        Ok(_) => {
            let ping = redis::cmd("PING");
            (
                link.send(Lane::Lock, timeout, Request::Cmd(&ping)).await,
                false,
            )
        }
        Err(e) => (Err(e), false),
    }
}

/// Refuses two masters that are one server (issue 11.8): `localhost:P` and
/// `127.0.0.1:P` look different but would cast two votes. Compared by `run_id` (from
/// `INFO server`), which differs for every server process. A master that does not
/// answer, or whose ACL user may not run INFO, is not compared.
async fn refuse_duplicates(links: &[Arc<dyn Transport>]) -> Result<()> {
    let mut info = redis::cmd("INFO");
    info.arg("server");
    let info = &info;
    let ids = join_all(links.iter().map(|link| async move {
        let timeout = link.connect_timeout();
        let reply = link.send(Lane::Side, timeout, Request::Cmd(info)).await?;
        let text: String = redis::from_redis_value(reply).map_err(|e| Error::Redis {
            addr: link.addr().to_string(),
            source: e.into(),
        })?;
        Ok::<_, Error>(
            text.lines()
                .find_map(|l| l.strip_prefix("run_id:"))
                .map(|id| id.trim().to_string()),
        )
    }))
    .await;
    let mut seen: Vec<(&str, String)> = Vec::new();
    for (link, id) in links.iter().zip(ids) {
        let Ok(Some(id)) = id else { continue };
        if let Some((first, _)) = seen.iter().find(|(_, other)| *other == id) {
            return Err(Error::config(format!(
                "masters {first} and {} are the same server (run_id {id}); Redlock needs \
                 independent masters",
                link.addr()
            )));
        }
        seen.push((link.addr(), id));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_of_answers_is_needed() {
        let refused = || Err(Error::config("down"));
        let addrs = ["a:1", "a:2", "a:3"];
        let two = [Ok(Value::Okay), refused(), Ok(Value::Okay)];
        assert!(majority_answered(&addrs, &two, 2).is_ok());
        let lone = majority_answered(&addrs[..1], &[refused()], 1).unwrap_err();
        assert!(matches!(lone, Error::Config { .. }), "{lone:?}");
        let split = majority_answered(&addrs, &[Ok(Value::Okay), refused(), refused()], 2);
        let Err(Error::NoQuorum {
            acquired: 1,
            needed: 2,
            errors,
        }) = split
        else {
            panic!("{split:?}");
        };
        let at: Vec<&str> = errors.iter().map(|m| m.addr.as_str()).collect();
        assert_eq!(at, ["a:2", "a:3"]);
    }
}
