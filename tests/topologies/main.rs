//! The library on deployments of several servers: Redis Cluster (also under faults and
//! slot migrations), Sentinel, Redlock over 3 and 5 masters, replicas, restarts. One
//! test binary, one module per former tests/NAME.rs; the harness is redlatch-testkit.
//!
//! The tests on `shared_cluster()` share one cluster for the whole binary: each uses
//! its own keys and leaves the topology and configuration alone (cluster_batch, which
//! counts script calls and fills a primary's memory, has a cluster of its own).

mod batch_node_script;
mod batch_script_migrating;
mod bounds;
mod bounds_shutdown;
mod cluster;
mod cluster_batch;
mod cluster_faults;
mod election_deployments;
mod fair_redlock;
mod faster_multi_lock_cluster;
mod fence_clock;
mod fence_failover;
mod fencing_restart;
mod force_notice;
mod guarded;
mod guarded_revoke_sentinel;
mod harness_cluster;
mod jobs_deployments;
mod listing;
mod non_reentrant_spin_cluster;
mod pubsub_modes;
mod redlock;
mod redlock_faults;
mod redlock_restart;
mod replica_resync;
mod replicas;
mod replicated_renewals;
mod revoke;
mod sentinel;
mod simple_redlock;
