//! The engine's façade: what the API layer calls. The API sees [`Engine`] through
//! these methods and the types the engine module re-exports, never its fields or its
//! inner modules.

use std::sync::Arc;

use super::{scripts, Deployment, Engine, Settings};
use crate::error::Result;
use crate::transport::connect;

impl Engine {
    /// Connects to `deployment` (transport/connect.rs: PING, topology discovery,
    /// duplicate masters, WAITAOF) and starts an engine over it.
    pub(crate) async fn connect(deployment: Deployment, settings: Settings) -> Result<Arc<Engine>> {
        let connected = connect::connect(deployment, scripts::all()).await?;
        let settings = Settings {
            cluster: connected.cluster,
            ..settings
        };
        Ok(Engine::start(connected.links, settings))
    }

    /// The deployment is a Redis Cluster (configured, or found by asking a lone seed).
    pub(crate) fn is_cluster(&self) -> bool {
        self.settings.cluster
    }
}
