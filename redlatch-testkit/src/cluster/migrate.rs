//! Changing who serves what: a manual failover, and moving a hash slot between
//! primaries in the three steps of a real migration.

use std::time::Instant;

use super::{
    entry, ClusterNode, RedisCluster, Role, MIGRATE_BATCH, MIGRATE_TIMEOUT_MS, SETTLE_TIMEOUT,
};

impl RedisCluster {
    /// Manual failover: `CLUSTER FAILOVER` on `replica`, then wait until it is the primary
    /// and its old primary (if live) its replica, in a settled cluster.
    pub fn failover(&self, replica: usize) {
        let view = self.nodes();
        let old = match entry(&view, replica) {
            Some(ClusterNode {
                role: Role::Replica,
                primary: Some(p),
                ..
            }) => *p,
            _ => panic!("failover: node {replica} is not a replica: {view:#?}"),
        };
        let _: () = self.nodes[replica].cmd(&["CLUSTER", "FAILOVER"]);
        self.wait_settled(
            &format!("manual failover from node {old} to node {replica}"),
            |v| {
                if entry(v, replica).map(|n| n.role) != Some(Role::Primary) {
                    return Err(format!("node {replica} is not primary yet"));
                }
                if self.nodes[old].is_live()
                    && entry(v, old).and_then(|n| n.primary) != Some(replica)
                {
                    return Err(format!("node {old} is not a replica of {replica} yet"));
                }
                Ok(())
            },
        );
    }

    /// After a kill -9 (or a long pause) of primary `old_primary`: wait until one of its
    /// replicas (as of the last settled view) serves all its slots in a settled cluster, and
    /// return that replica's index.
    pub fn wait_for_failover(&self, old_primary: usize) -> usize {
        let before = self.settled_guard().clone();
        let old_slots = entry(&before, old_primary)
            .filter(|n| n.role == Role::Primary)
            .map(|n| n.slots.clone())
            .unwrap_or_else(|| {
                panic!("wait_for_failover: node {old_primary} was not a primary: {before:#?}")
            });
        let candidates: Vec<usize> = before
            .iter()
            .filter(|n| n.primary == Some(old_primary))
            .map(|n| n.index)
            .collect();
        assert!(
            !candidates.is_empty(),
            "wait_for_failover: node {old_primary} had no replica: {before:#?}"
        );
        let (_, promoted) = self.wait_settled(
            &format!("failover of primary {old_primary} to one of {candidates:?}"),
            |v| {
                let new = candidates
                    .iter()
                    .copied()
                    .find(|&c| entry(v, c).map(|n| n.role) == Some(Role::Primary))
                    .ok_or("no replica promoted yet")?;
                let me = entry(v, new).expect("candidate in view");
                for &(a, b) in &old_slots {
                    if let Some(s) = (a..=b).find(|&s| !me.owns(s)) {
                        return Err(format!("promoted node {new} does not serve slot {s}"));
                    }
                }
                Ok(new)
            },
        );
        promoted
    }

    /// Step 1 of a slot migration: `CLUSTER SETSLOT slot IMPORTING` on `to`, then
    /// `MIGRATING` on `from`. From here the source answers ASK for keys of the slot it no
    /// longer has, and the target serves them after ASKING.
    pub fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let _: () = self.nodes[to].cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &self.ids[from]]);
        let _: () = self.nodes[from].cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &self.ids[to]]);
    }

    /// Step 2: MIGRATE every key of `slot` from `from` to `to` (batches of 100, with their
    /// TTLs); returns how many keys were moved. Keys must be UTF-8. Fails on a key that
    /// already exists on the target (BUSYKEY), as a real migration would.
    pub fn move_slot_keys(&self, slot: u16, from: usize, to: usize) -> usize {
        let (s, port) = (slot.to_string(), self.nodes[to].port().to_string());
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let mut moved = 0;
        loop {
            let keys: Vec<String> =
                self.nodes[from].cmd(&["CLUSTER", "GETKEYSINSLOT", &s, &MIGRATE_BATCH.to_string()]);
            if keys.is_empty() {
                return moved;
            }
            assert!(
                Instant::now() < deadline,
                "slot {slot} still has keys on node {from} after {SETTLE_TIMEOUT:?} of MIGRATE"
            );
            let mut args = vec![
                "MIGRATE",
                "127.0.0.1",
                &port,
                "",
                "0",
                MIGRATE_TIMEOUT_MS,
                "KEYS",
            ];
            args.extend(keys.iter().map(String::as_str));
            let _: redis::Value = self.nodes[from].cmd(&args);
            moved += keys.len();
        }
    }

    /// Step 3: `CLUSTER SETSLOT slot NODE to` on `to`, `from`, then the other live
    /// primaries, and wait until the settled cluster has `to` serving `slot`.
    pub fn finish_migration(&self, slot: u16, from: usize, to: usize) {
        let s = slot.to_string();
        let mut order = vec![to, from];
        order.extend(
            self.primaries()
                .into_iter()
                .filter(|&p| p != to && p != from && self.nodes[p].is_live()),
        );
        for i in order {
            let _: () = self.nodes[i].cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &self.ids[to]]);
        }
        self.wait_settled(
            &format!("slot {slot} to move from node {from} to node {to}"),
            |v| match entry(v, to) {
                Some(n) if n.owns(slot) => Ok(()),
                _ => Err(format!("node {to} does not serve slot {slot} yet")),
            },
        );
    }

    /// The three steps in a row; returns the number of keys moved.
    pub fn migrate_slot(&self, slot: u16, from: usize, to: usize) -> usize {
        self.begin_migration(slot, from, to);
        let moved = self.move_slot_keys(slot, from, to);
        self.finish_migration(slot, from, to);
        moved
    }
}
