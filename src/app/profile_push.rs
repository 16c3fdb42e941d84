//! `serve --otlp.profiles`: the profiles the OTLP push takes, one per
//! interval, sampled as `record` and `/api/v1/profile` sample (the same
//! event choice and call chains), every CPU at 99 Hz, attributed as
//! `--otlp.profiles-by` says. The samplers are open only while the push
//! runs.

use super::host::{Host, HostSettings};
use super::record::{sample, ProfileSettings, PROFILE_RING_PAGES};
use super::AppError;
use crate::engine::sample::{By, ProfileFilter};
use crate::export::otlp::{self, OtlpFlags, OtlpSettings, TakeProfile};
use crate::export::Push;
use crate::perf::{CallchainSpec, Kernel};
use std::sync::Arc;
use std::time::Duration;

/// Samples per second per CPU of the pushed profiles.
pub(super) const PUSHED_PROFILE_HZ: u64 = 99;

/// Takes a profile of the given length through `kernel`, its samples
/// attributed by `by`.
pub(super) fn take(kernel: Arc<dyn Kernel>, host: HostSettings, by: By) -> TakeProfile {
    Arc::new(move |duration: Duration| {
        let (kernel, host) = (kernel.clone(), host.clone());
        Box::pin(async move {
            let s = ProfileSettings {
                duration,
                event: None,
                freq: PUSHED_PROFILE_HZ,
                by,
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

/// Starts the profile push when `--otlp.profiles` asks (with the metrics'
/// settings `otlp`, which it needs).
pub(super) fn start(
    otlp: Option<&OtlpSettings>,
    flags: &OtlpFlags,
    kernel: &Arc<dyn Kernel>,
    host: &HostSettings,
) -> Result<Option<Box<dyn Push>>, AppError> {
    let Some(settings) = otlp.filter(|_| flags.profiles) else {
        return Ok(None);
    };
    let take = take(kernel.clone(), host.clone(), flags.profiles_by);
    let p = otlp::start_profiles(settings.clone(), take)?;
    Ok(Some(Box::new(p)))
}
