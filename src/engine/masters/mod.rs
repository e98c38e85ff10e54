//! How the engine reaches the masters: one master and its group commit, the fan-out
//! to every master and the majority rules, how a batch is grouped by slot or node,
//! what the scripts answer, and deadlines.

pub(crate) mod clock;
pub(crate) mod master;
pub(crate) mod plain_ops;
pub(crate) mod quorum;
pub(crate) mod replies;
pub(crate) mod shards;

use std::sync::Arc;
use std::time::Duration;

use crate::transport::Transport;
use master::Master;
use plain_ops::PlainScripts;

/// The masters of one client, in configuration order, and the majority they need
/// (`n / 2 + 1`): the masters part's own state. Every request the engine sends goes
/// to [`all`](Self::all) (fan-out, `quorum`) or to [`first`](Self::first) (the only
/// master of a single-master deployment).
pub(crate) struct Masters {
    all: Vec<Arc<Master>>,
    quorum: usize,
}

impl Masters {
    /// One [`Master`] per link, each with its group commit sending the plain lock's
    /// `scripts` (kinds/plain.rs).
    pub(crate) fn new(links: &[Arc<dyn Transport>], scripts: &'static PlainScripts) -> Masters {
        Masters {
            all: (links.iter().cloned())
                .map(|l| Master::new(l, scripts))
                .collect(),
            quorum: links.len() / 2 + 1,
        }
    }

    /// Every master, in configuration order.
    pub(crate) fn all(&self) -> &[Arc<Master>] {
        &self.all
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Arc<Master>> {
        self.all.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }

    /// The first master: the only one of a single-master deployment (the counters',
    /// elections' and hand-overs' master).
    pub(crate) fn first(&self) -> &Arc<Master> {
        &self.all[0]
    }

    /// Masters needed for a majority.
    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    /// The longest one request may take when its master answers (the slowest master's
    /// [`Master::bound`]).
    pub(crate) fn request_bound(&self) -> Duration {
        self.all.iter().map(|m| m.bound()).max().unwrap_or_default()
    }
}
