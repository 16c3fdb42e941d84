//! The reload seam: what `POST /-/reload` asks of the application
//! ([`super::Lifecycle`]) and the typed outcome it gets back: a summary,
//! or why the reload was refused ([`ReloadError`]: the config error, the
//! problems that make the new config count nothing, ...). The previous
//! configuration keeps serving after a refusal.

use super::config::WebConfigError;
use crate::bounded::watch::ReadTimeout;
use crate::config::ConfigError;
use crate::pmu::PmuError;
use crate::report::NothingToCount;
use std::sync::Arc;

/// The outcome of a reload: its summary, or why it was refused (shared:
/// every request a reload served gets the same outcome).
pub type Reloaded = Result<String, Arc<ReloadError>>;

/// Why a load was refused (at start-up it ends the start; on reload the
/// previous configuration keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The config file is invalid or unreadable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The web config file is invalid or unreadable.
    #[error("--web.config.file={file}: {err}")]
    WebConfig {
        /// The file.
        file: String,
        /// Why (in the message, printed once).
        err: WebConfigError,
    },
    /// PMU discovery failed.
    #[error("PMU discovery: {0}")]
    Pmu(PmuError),
    /// Nothing in the new config can be counted on this host.
    #[error(transparent)]
    NothingToCount(NothingToCount),
    /// The new web config would weaken the running listener.
    #[error("the new web config {0}; the running listener keeps its web config (to allow this, start with --web.config.allow-downgrade)")]
    Downgrade(&'static str),
    /// A read did not return within `--config.read-timeout`.
    #[error(transparent)]
    ReadTimeout(#[from] ReadTimeout),
    /// The reload thread has stopped: no reload can run.
    #[error("the reload thread has stopped")]
    Stopped,
}
