//! `serve --otlp.profiles`: the profiles the OTLP push takes, one per
//! interval, sampled as `record` and `/api/v1/profile` sample (the same
//! event choice and call chains), by process, every CPU at 99 Hz. The
//! samplers are open only while the push runs.

use super::host::{Host, HostSettings};
use super::record::{sample, ProfileSettings, PROFILE_RING_PAGES};
use crate::engine::sample::{By, ProfileFilter};
use crate::export::otlp::TakeProfile;
use crate::perf::{CallchainSpec, Kernel};
use std::sync::Arc;
use std::time::Duration;

/// Samples per second per CPU of the pushed profiles.
pub(super) const PUSHED_PROFILE_HZ: u64 = 99;

/// Takes a profile of the given length through `kernel`.
pub(super) fn take(kernel: Arc<dyn Kernel>, host: HostSettings) -> TakeProfile {
    Arc::new(move |duration: Duration| {
        let (kernel, host) = (kernel.clone(), host.clone());
        Box::pin(async move {
            let s = ProfileSettings {
                duration,
                event: None,
                freq: PUSHED_PROFILE_HZ,
                by: By::Process,
                filter: ProfileFilter::All,
                callchain: CallchainSpec::default(),
                ring_pages: PROFILE_RING_PAGES,
            };
            let h = Host::open(&host).map_err(|e| e.to_string())?;
            sample(&kernel, &host, &h, &s)
                .await
                .map_err(|e| e.to_string())
        })
    })
}
