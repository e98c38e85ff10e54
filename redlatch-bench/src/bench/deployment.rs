//! Which servers a bench run is measured on: the masters, a cluster's primaries (with
//! their slot ranges) or a Sentinel-managed primary, found the way the library finds
//! them, so that server-side counters (`INFO commandstats`, `INFO cpu`) can be read
//! from every server that runs lock scripts and nowhere else.
//!
//! Invariants:
//! 1. `primaries` holds every server the library sends lock scripts to, once each: the
//!    masters as configured, a cluster's primaries as `CLUSTER SLOTS` lists them (in
//!    order of their first slot), or the primary the first answering sentinel names.
//! 2. For a cluster, `slots` maps every slot to an index of `primaries`; it is read
//!    once, so a topology change during a run makes the per-slot figures stale (the
//!    bench does not change the topology).

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use redlatch::{Client, Topology};

use super::server::Probe;

/// Hash slots of a Redis Cluster.
pub const SLOTS: usize = 16384;

/// The servers under measurement.
pub struct Deployment {
    /// `masters`, `cluster` or `sentinel`.
    pub kind: &'static str,
    /// Every server that runs lock scripts (invariant 1).
    pub primaries: Vec<ConnectionInfo>,
    /// `host:port` of each of `primaries`.
    pub labels: Vec<String>,
    /// Cluster only: the index in `primaries` of each slot's owner (invariant 2).
    pub slots: Option<Vec<u8>>,
    /// Replicas connected to the primaries (`connected_slaves`, summed).
    pub replicas: u64,
}

impl Deployment {
    /// Finds the servers `client` uses (its configuration after connecting, so a single
    /// URL detected as a cluster node counts as a cluster).
    pub async fn discover(client: &Client) -> Result<Deployment, String> {
        let config = client.config();
        let infos = config
            .urls()
            .iter()
            .map(|u| {
                u.as_str()
                    .into_connection_info()
                    .map_err(|e| format!("{u}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (kind, primaries, slots) = match config.topology() {
            Topology::Masters => ("masters", infos, None),
            Topology::Cluster => {
                let (primaries, slots) = cluster(&infos).await?;
                ("cluster", primaries, Some(slots))
            }
            Topology::Sentinel { master_name } => (
                "sentinel",
                vec![sentinel_primary(&infos, master_name).await?],
                None,
            ),
            other => return Err(format!("bench: unknown topology {other:?}")),
        };
        let mut replicas = 0;
        for info in &primaries {
            let mut probe = Probe::open(info.clone())
                .await
                .map_err(|e| format!("{}: {e}", label(info)))?;
            replicas += probe.connected_replicas().await.unwrap_or(0);
        }
        Ok(Deployment {
            kind,
            labels: primaries.iter().map(label).collect(),
            primaries,
            slots,
            replicas,
        })
    }

    /// One probe per primary, in order.
    pub async fn probes(&self) -> redis::RedisResult<Vec<Probe>> {
        let mut out = Vec::with_capacity(self.primaries.len());
        for info in &self.primaries {
            out.push(Probe::open(info.clone()).await?);
        }
        Ok(out)
    }

    /// Cluster only: the index of the primary serving `slot`.
    pub fn owner(&self, slot: u16) -> Option<usize> {
        self.slots
            .as_ref()
            .map(|s| usize::from(s[usize::from(slot)]))
    }
}

/// `host:port` of a connection.
pub fn label(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(h, p)
        | ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => {
            format!("{h}:{p}")
        }
        other => format!("{other:?}"),
    }
}

/// `base` with another host and port (credentials and TLS settings kept, as the
/// library does for cluster nodes).
fn with_addr(base: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let mut addr = base.addr().clone();
    match &mut addr {
        ConnectionAddr::Tcp(h, p)
        | ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => {
            *h = host.to_string();
            *p = port;
        }
        _ => {}
    }
    base.clone().set_addr(addr)
}

/// The primaries and slot owners of the cluster the first answering seed belongs to.
async fn cluster(seeds: &[ConnectionInfo]) -> Result<(Vec<ConnectionInfo>, Vec<u8>), String> {
    let mut last = String::from("no seed");
    for seed in seeds {
        let ranges = match Probe::open(seed.clone()).await {
            Ok(mut probe) => probe.cluster_slots().await,
            Err(e) => Err(e),
        };
        let ranges = match ranges {
            Ok(r) => r,
            Err(e) => {
                last = format!("{}: {e}", label(seed));
                continue;
            }
        };
        let seed_host = match seed.addr() {
            ConnectionAddr::Tcp(h, _) | ConnectionAddr::TcpTls { host: h, .. } => h.clone(),
            _ => String::new(),
        };
        let mut sorted = ranges;
        sorted.sort_by_key(|r| r.0);
        let mut addrs: Vec<(String, u16)> = Vec::new();
        let mut owners = vec![u8::MAX; SLOTS];
        for (start, end, host, port) in sorted {
            // An empty host means "the address you reached me on" (the seed's host).
            let host = if host.is_empty() {
                seed_host.clone()
            } else {
                host
            };
            let i = match addrs.iter().position(|a| *a == (host.clone(), port)) {
                Some(i) => i,
                None => {
                    addrs.push((host, port));
                    addrs.len() - 1
                }
            };
            let i = u8::try_from(i).map_err(|_| "more than 255 primaries".to_string())?;
            for s in start..=end.min(SLOTS as u16 - 1) {
                owners[usize::from(s)] = i;
            }
        }
        if let Some(s) = owners.iter().position(|&o| o == u8::MAX) {
            return Err(format!(
                "cluster slot {s} has no primary (cluster_state not ok?)"
            ));
        }
        let primaries = addrs.iter().map(|(h, p)| with_addr(seed, h, *p)).collect();
        return Ok((primaries, owners));
    }
    Err(format!("no cluster seed gave its slot map: {last}"))
}

/// The primary the first answering sentinel names for `master_name`.
async fn sentinel_primary(
    sentinels: &[ConnectionInfo],
    master_name: &str,
) -> Result<ConnectionInfo, String> {
    let mut last = String::from("no sentinel");
    for s in sentinels {
        let addr = match Probe::open(s.clone()).await {
            Ok(mut probe) => probe.sentinel_primary(master_name).await,
            Err(e) => Err(e),
        };
        match addr {
            Ok((host, port)) => {
                let url = format!("redis://{host}:{port}");
                return url.into_connection_info().map_err(|e| e.to_string());
            }
            Err(e) => last = format!("{}: {e}", label(s)),
        }
    }
    Err(format!("no sentinel named primary {master_name:?}: {last}"))
}
