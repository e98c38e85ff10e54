//! When a cluster is settled: every live node agrees on roles, primaries and slots,
//! and every slot has one live owner; and reading a node's `CLUSTER NODES`.

use super::{entry, ClusterNode, RedisCluster, Role, Shape, PROBE_TIMEOUT, SLOTS};
use crate::info_field;

impl RedisCluster {
    /// The agreed view if the cluster is settled (see [`RedisCluster::wait_until_settled`]),
    /// else why not.
    pub(super) fn settled_view(&self) -> Result<Vec<ClusterNode>, String> {
        let live = self.live();
        if live.is_empty() {
            return Err("no live node".into());
        }
        // What must be the same in every view: role, primary and slots of each live node.
        let shape = |view: &[ClusterNode]| -> Vec<Option<Shape>> {
            live.iter()
                .map(|&j| entry(view, j).map(|n| (n.role, n.primary, n.slots.clone())))
                .collect()
        };
        let mut agreed: Option<(usize, Vec<ClusterNode>)> = None;
        for &i in &live {
            let view = self.node_settled(i, &live)?;
            match &agreed {
                None => agreed = Some((i, view)),
                Some((first, first_view)) => {
                    if shape(first_view) != shape(&view) {
                        return Err(format!(
                            "nodes {first} and {i} disagree: {:?} vs {:?}",
                            shape(first_view),
                            shape(&view)
                        ));
                    }
                }
            }
        }
        let (_, view) = agreed.expect("at least one live node");
        let mut owners = vec![0u8; usize::from(SLOTS)];
        for n in view.iter().filter(|n| live.contains(&n.index)) {
            for &(a, b) in &n.slots {
                for s in a..=b {
                    owners[usize::from(s)] += 1;
                }
            }
        }
        if let Some(s) = owners.iter().position(|&o| o != 1) {
            return Err(format!("slot {s} has {} live owners", owners[s]));
        }
        Ok(view)
    }

    /// Node `i`'s own view if it sees the cluster settled: state ok, every node known,
    /// no live node flagged, its replication as `CLUSTER NODES` says; else why not.
    fn node_settled(&self, i: usize, live: &[usize]) -> Result<Vec<ClusterNode>, String> {
        let node = &self.nodes[i];
        let info: String = node
            .try_cmd(PROBE_TIMEOUT, &["CLUSTER", "INFO"])
            .map_err(|e| format!("node {i}: CLUSTER INFO: {e}"))?;
        let state = info_field(&info, "cluster_state");
        if state != Some("ok") {
            return Err(format!("node {i}: cluster_state {state:?}"));
        }
        let known = info_field(&info, "cluster_known_nodes");
        if known != Some(&self.nodes.len().to_string()) {
            return Err(format!("node {i}: cluster_known_nodes {known:?}"));
        }
        let view = self.view_of(i)?;
        for &j in live {
            match entry(&view, j) {
                None => return Err(format!("node {i} does not list node {j}")),
                Some(n) => {
                    if let Some(f) = n
                        .flags
                        .iter()
                        .find(|f| matches!(f.as_str(), "fail" | "fail?" | "handshake" | "noaddr"))
                    {
                        return Err(format!("node {i} flags live node {j} {f}"));
                    }
                }
            }
        }
        let me = entry(&view, i).expect("listed above");
        let repl: String = node
            .try_cmd(PROBE_TIMEOUT, &["INFO", "replication"])
            .map_err(|e| format!("node {i}: INFO replication: {e}"))?;
        match (me.role, me.primary) {
            (Role::Primary, _) => {
                if info_field(&repl, "role") != Some("master") {
                    return Err(format!("node {i}: a primary in CLUSTER NODES, not in INFO"));
                }
            }
            (Role::Replica, Some(p)) => {
                let port = self.nodes[p].port().to_string();
                if info_field(&repl, "master_port") != Some(port.as_str())
                    || info_field(&repl, "master_link_status") != Some("up")
                {
                    return Err(format!("node {i}: replication link to node {p} not up"));
                }
            }
            (Role::Replica, None) => {
                return Err(format!("node {i}: a replica of an unknown primary"))
            }
        }
        Ok(view)
    }
}

/// Parse `CLUSTER NODES` into entries sorted by index; ids map to indices through `ids`.
pub(super) fn parse_nodes(text: &str, ids: &[String]) -> Result<Vec<ClusterNode>, String> {
    let index_of = |id: &str| {
        ids.iter()
            .position(|known| known == id)
            .ok_or_else(|| format!("unknown node id {id} in CLUSTER NODES:\n{text}"))
    };
    let mut view = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(format!("short CLUSTER NODES line: {line}"));
        }
        let port = fields[1]
            .split(['@', ','])
            .next()
            .and_then(|hostport| hostport.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("bad address in CLUSTER NODES line: {line}"))?;
        let flags: Vec<String> = fields[2].split(',').map(String::from).collect();
        let role = if flags.iter().any(|f| f == "master") {
            Role::Primary
        } else if flags.iter().any(|f| f == "slave") {
            Role::Replica
        } else {
            return Err(format!("no role in CLUSTER NODES line: {line}"));
        };
        let primary = match fields[3] {
            "-" => None,
            id => Some(index_of(id)?),
        };
        let mut slots = Vec::new();
        // `[slot->-id]` / `[slot-<-id]`: migration state, not ownership.
        for range in fields[8..].iter().filter(|f| !f.starts_with('[')) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) => slots.push((a, b)),
                _ => return Err(format!("bad slot range {range} in: {line}")),
            }
        }
        view.push(ClusterNode {
            index: index_of(fields[0])?,
            id: fields[0].to_string(),
            port,
            role,
            primary,
            slots,
            flags,
        });
    }
    view.sort_by_key(|n| n.index);
    Ok(view)
}
