//! The public API: [`Client`](client::Client), the lock kinds and their guards, the
//! configuration. Everything here is a thin shell over the engine (`crate::engine`).

pub mod blocking;
pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod config_books;
pub(crate) mod config_check;
pub(crate) mod config_observe;
#[cfg(feature = "serde")]
mod config_serde;
pub(crate) mod config_sources;
#[cfg(feature = "tls")]
mod config_tls;
pub(crate) mod election;
pub(crate) mod expirable_semaphore;
pub mod fence;
pub(crate) mod group;
pub(crate) mod guard;
pub(crate) mod guarded;
mod handles;
pub(crate) mod hold;
pub(crate) mod job;
pub(crate) mod latch;
pub(crate) mod listing;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod observe;
pub(crate) mod revoke;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod status;
pub(crate) mod urls;
pub mod wire;
