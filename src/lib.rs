#![doc = include_str!("../README.md")]
#![deny(missing_docs, unsafe_code)]
#![warn(rust_2018_idioms, unreachable_pub, clippy::all)]

mod attempt;
mod batch;
mod client;
mod config;
mod error;
mod gate;
mod guard;
mod holder;
mod holds;
mod lock;
mod master;
mod names;
mod offers;
mod pubsub;
mod quorum;
mod scripts;
mod status;
mod wait;
mod watchdog;

pub use client::Client;
pub use config::{Config, ENV_VAR, MAX_LEASE, MIN_LEASE};
pub use error::{Error, Result};
pub use guard::LockGuard;
pub use lock::{Kind, Lock};
pub use names::MAX_NAME_LEN;
pub use scripts::sources as script_sources;
pub use status::MasterStatus;
