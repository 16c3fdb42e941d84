//! Profiles with call stacks: `perf-exporter record -d 10s -o out.pb.gz`
//! and `serve`'s `GET /api/v1/profile` ([`ServeProfiler`]: the samples,
//! which the web layer writes as pprof or a flame graph), one code path. The samplers are `top`'s (the same event choice: `cycles`, or
//! `cpu-clock` without a hardware PMU, said so) with
//! `PERF_SAMPLE_CALLCHAIN`, opened for the profile only and closed after
//! it; the stacks are named, filtered, symbolized and written as a
//! gzipped pprof profile ([`crate::export::pprof`]).

use super::host::{Host, HostSettings};
use super::top::{self, TopSettings};
use super::AppError;
use crate::engine::sample::{By, ProfileFilter, ProfileSample};
use crate::export::pprof;
use crate::perf::{CallchainSpec, Kernel};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What to profile.
#[derive(Debug, Clone)]
pub struct ProfileSettings {
    /// How long.
    pub duration: Duration,
    /// The event (default `cycles`, falling back to `cpu-clock`).
    pub event: Option<String>,
    /// Samples per second per CPU.
    pub freq: u64,
    /// What samples are attributed to (their label).
    pub by: By,
    /// Which samples are kept.
    pub filter: ProfileFilter,
    /// The call chains asked of the kernel.
    pub callchain: CallchainSpec,
    /// Data pages of each CPU's ring.
    pub ring_pages: usize,
}

/// `record`'s settings: a profile and where to write it.
#[derive(Debug, Clone)]
pub struct RecordSettings {
    /// The profile.
    pub profile: ProfileSettings,
    /// `-o`: the file (`.pb.gz`).
    pub output: PathBuf,
}

/// Rings of a profile: 64 data pages (256 KiB with 4 KiB pages) per CPU,
/// as call chains make samples up to ~1 KiB.
pub const PROFILE_RING_PAGES: usize = 64;

/// How often a profile's rings are drained at the latest.
const DRAIN_EVERY: Duration = Duration::from_millis(250);

/// Samples `s.duration` and returns the gzipped pprof profile and the
/// notes said about it (the fallback event, CPUs not sampled). Runs on
/// the current tokio runtime (with I/O).
pub(super) async fn profile(
    kernel: &Arc<dyn Kernel>,
    host: &HostSettings,
    h: &Host,
    s: &ProfileSettings,
) -> Result<(Vec<u8>, Vec<String>), AppError> {
    let (meta, samples) = sample(kernel, host, h, s).await?;
    let gz = pprof::encode(&meta, &samples).map_err(AppError::Runtime)?;
    Ok((gz, meta.comments))
}

/// Samples `s.duration`: the profile's samples and what it was taken of
/// (its comments: the notes said about it). Runs on the current tokio
/// runtime (with I/O).
pub(super) async fn sample(
    kernel: &Arc<dyn Kernel>,
    host: &HostSettings,
    h: &Host,
    s: &ProfileSettings,
) -> Result<(pprof::Meta, Vec<ProfileSample>), AppError> {
    let ts = TopSettings {
        freq: s.freq,
        period: None,
        duration: Some(s.duration),
        interval: s.duration,
        event: s.event.clone(),
        by: s.by,
        json: false,
        ring_pages: s.ring_pages,
        cpus: None,
        rows: 0,
        callchain: Some(s.callchain),
    };
    let (mut smp, r) = top::open(kernel, host, h, &ts)?;
    let mut notes: Vec<String> = r.note.iter().cloned().collect();
    notes.extend(smp.failed.iter().map(|e| format!("not sampled: {e}")));
    let start = SystemTime::now();
    let began = tokio::time::Instant::now();
    let end = began + s.duration;
    // Drained at least every DRAIN_EVERY: the maps of the processes seen
    // are read then, while they run (one that exits later keeps its
    // symbols).
    loop {
        let now = tokio::time::Instant::now();
        if now >= end {
            break;
        }
        smp.wait(end.min(now + DRAIN_EVERY)).await;
    }
    smp.drain();
    let samples = smp.profile(&s.filter).unwrap_or_default();
    let health = smp.health();
    let lost: u64 = health.iter().map(|(_, h)| h.lost).sum();
    if lost > 0 {
        notes.push(format!("{lost} records lost (rings full)"));
    }
    let dropped = smp.stacks_dropped();
    if dropped > 0 {
        notes.push(format!(
            "{dropped} samples over the bound of distinct stacks kept without their stack"
        ));
    }
    let meta = pprof::Meta {
        event: r.event.clone(),
        label: s.by.label(),
        start,
        duration: began.elapsed(),
        comments: notes,
    };
    Ok((meta, samples))
}

/// `perf-exporter record`: writes the profile to `-o`.
pub(super) fn record(host: HostSettings, s: RecordSettings) -> Result<String, AppError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AppError::Runtime)?;
    rt.block_on(async {
        let h = Host::open(&host)?;
        let Some(kernel) = h.kernel.clone() else {
            return Err(AppError::NotLive(host.sysfs.display().to_string()));
        };
        let (gz, notes) = profile(&kernel, &host, &h, &s.profile).await?;
        for n in &notes {
            eprintln!("perf-exporter record: {n}");
        }
        std::fs::write(&s.output, &gz)
            .map_err(|e| AppError::Record(format!("cannot write {}: {e}", s.output.display())))?;
        Ok(format!(
            "wrote {} ({} bytes)\n",
            s.output.display(),
            gz.len()
        ))
    })
}

/// `serve`'s profiler: each profile on a thread of its own, with its own
/// runtime, while `serve` goes on.
#[derive(Debug)]
pub(super) struct ServeProfiler {
    pub(super) kernel: Arc<dyn Kernel>,
    pub(super) host: HostSettings,
}

impl crate::web::Profiler for ServeProfiler {
    fn profile(
        &self,
        req: &crate::web::ProfileRequest,
    ) -> Result<(pprof::Meta, Vec<ProfileSample>), String> {
        let s = ProfileSettings {
            duration: req.duration,
            event: req.event.clone(),
            freq: req.freq,
            by: req.by,
            filter: req.filter.clone(),
            callchain: CallchainSpec::default(),
            ring_pages: PROFILE_RING_PAGES,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let h = Host::open(&self.host).map_err(|e| e.to_string())?;
            sample(&self.kernel, &self.host, &h, &s)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
