//! How the engine reaches the masters: one master and its group commit, the fan-out
//! to every master and the majority rules, how a batch is grouped by slot or node,
//! what the scripts answer, and deadlines.

pub(crate) mod clock;
pub(crate) mod master;
pub(crate) mod plain_ops;
pub(crate) mod quorum;
pub(crate) mod replies;
pub(crate) mod shards;
