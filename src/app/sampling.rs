//! `serve`'s sampled attribution (the config's `sampling:` section): the
//! samplers `top` opens (same event choice: `cycles`, or `cpu-clock`
//! without a hardware PMU), drained by a task on the runtime whenever a
//! ring reaches its watermark and at least every second, publishing to
//! the engine's [`SampledFamilies`]. Set up at start-up; a reload keeps it
//! as it is (a changed `sampling:` section applies at the next start).

use super::host::Host;
use super::top::{self, TopSettings};
use super::HostSettings;
use crate::config::sampling::{SampleBy, SamplingConfig};
use crate::engine::sample::{By, SampledFamilies};
use crate::engine::Engine;
use crate::perf::Kernel;
use std::sync::Arc;
use std::time::Duration;

/// How often the rings are drained at the latest (and the table
/// published for collections).
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Stops the sampling task when dropped.
#[derive(Debug)]
pub(super) struct SamplingTask(tokio::task::JoinHandle<()>);

impl Drop for SamplingTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn settings(c: &SamplingConfig) -> TopSettings {
    TopSettings {
        freq: c.frequency,
        period: None,
        duration: None,
        interval: PUBLISH_EVERY,
        event: c.event.clone(),
        by: match c.by {
            SampleBy::Process => By::Process,
            SampleBy::Cgroup => By::Cgroup,
            SampleBy::Pod => By::Pod,
        },
        json: false,
        ring_pages: c.ring_pages,
        cpus: None,
        rows: c.top,
        callchain: None,
    }
}

/// Whether this host can sample the configured `sampling.event` (the
/// default, `cycles` falling back to `cpu-clock`, always can): `check`
/// fails, and `serve`'s warning names the file and the line, when not.
pub(super) fn check_event(
    c: Option<&SamplingConfig>,
    h: &Host,
    host: &HostSettings,
) -> Result<(), crate::config::ConfigError> {
    let Some((c, ev)) = c.and_then(|c| Some((c, c.event.as_deref()?))) else {
        return Ok(());
    };
    let (line, column) = c.event_at.unwrap_or((0, 0));
    top::per_cpu(h, ev, &h.table.topology.online)
        .map(|_| ())
        .map_err(|why| crate::config::ConfigError::Invalid {
            file: host
                .config_file
                .as_ref()
                .map_or("<embedded default>".into(), |p| p.display().to_string()),
            line,
            column,
            msg: format!("`sampling.event: {ev}` cannot be sampled on this host: {why}"),
        })
}

/// Starts sampling when the config asks for it; a failure is logged and
/// serving goes on without it. Must run on the runtime.
pub(super) fn attach(
    engine: &mut Engine,
    kernel: &Arc<dyn Kernel>,
    h: &Host,
    c: Option<&SamplingConfig>,
    host: &HostSettings,
) -> Option<SamplingTask> {
    if let Err(e) = check_event(c, h, host) {
        tracing::warn!(error = %e, "sampling: not started");
        return None;
    }
    let c = c?;
    let s = settings(c);
    let (mut smp, r) = match top::open(kernel, host, h, &s) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "sampling: not started");
            return None;
        }
    };
    if let Some(n) = &r.note {
        tracing::info!(note = %n, "sampling");
    }
    for e in &smp.failed {
        tracing::warn!(error = %e, "sampling: CPU not sampled");
    }
    tracing::info!(event = %r.event, frequency = c.frequency, by = s.by.as_str(), top = c.top, cpus = smp.cpus().len(), ring_bytes = smp.ring_bytes(), "sampling");
    let fam = Arc::new(SampledFamilies::new(&r.event, s.by.label(), c.top));
    engine.set_sampled(Some(fam.clone()));
    let sysfs = host.sysfs.clone();
    let task = tokio::spawn(async move {
        loop {
            smp.follow_hotplug(&sysfs);
            let until = tokio::time::Instant::now() + PUBLISH_EVERY;
            while tokio::time::Instant::now() < until {
                smp.wait(until).await;
            }
            fam.publish(smp.take_window(), smp.health());
            let (held, forgotten) = smp.tasks();
            fam.set_tasks(held, forgotten);
        }
    });
    Some(SamplingTask(task))
}
