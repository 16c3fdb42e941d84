//! The push loop: at each interval one engine collection (the same reads
//! a scrape makes), converted to one request, sent with the transport,
//! bounded by the timeout; results counted and failures logged at most
//! once a minute. At shutdown an export in flight is cancelled and the
//! latest counts are pushed once more.

use super::convert::Converter;
use super::derived::DerivedGauges;
use super::parse::redact_url;
use super::stats::{ExportStats, FailureLog};
use super::transport::{ExportError, Transport};
use super::{Collect, OtlpError, OtlpSettings};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The push loop's state.
pub(super) struct PushLoop {
    settings: OtlpSettings,
    /// The endpoint as logged (secrets redacted).
    endpoint: String,
    collect: Collect,
    stats: Arc<ExportStats>,
    converter: Converter,
    transport: Transport,
    log: FailureLog,
    succeeded_once: bool,
    derived: DerivedGauges,
}

impl PushLoop {
    /// Builds the transport (inside a tokio runtime). `counting_since`:
    /// when counting began, the start of series whose own is unknown.
    pub(super) fn new(
        settings: OtlpSettings,
        collect: Collect,
        stats: Arc<ExportStats>,
        counting_since: SystemTime,
    ) -> Result<Self, OtlpError> {
        let transport = Transport::build(&settings)?;
        Ok(PushLoop {
            endpoint: redact_url(&settings.endpoint),
            converter: Converter::new(&settings.resource, counting_since),
            settings,
            collect,
            stats,
            transport,
            log: FailureLog::new(Duration::from_secs(60)),
            succeeded_once: false,
            derived: DerivedGauges::default(),
        })
    }

    /// One engine collection, as a request, with the derived gauges over
    /// the window since the previous one's.
    /// The export results so far go with the metrics: with `--otlp.only`
    /// nothing else shows them (the failures up to now arrive with the
    /// next export that succeeds).
    fn gather(&mut self) -> ExportMetricsServiceRequest {
        let c = (self.collect)();
        let mut snap = c.snapshot;
        let derived = self
            .derived
            .families(&snap.families, Instant::now(), &c.derived);
        snap.families.extend(derived);
        snap.families.push(self.stats.family());
        self.converter.request(&snap, SystemTime::now())
    }

    /// One export cycle: [`Self::gather`], then the export, bounded by
    /// `timeout`.
    async fn cycle(&mut self, timeout: Duration) -> Result<(), ExportError> {
        let req = self.gather();
        let t0 = tokio::time::Instant::now();
        match tokio::time::timeout(timeout, self.transport.export(req)).await {
            Ok(Ok(())) => Ok(()),
            // The client's own deadlines are the same timeout and may fire
            // first, with vaguer errors: say what happened.
            Ok(Err(e)) if t0.elapsed() + Duration::from_millis(100) >= timeout => {
                Err(ExportError::Timeout(timeout, Some(Box::new(e))))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ExportError::Timeout(timeout, None)),
        }
    }

    fn record(&mut self, r: Result<(), ExportError>) {
        self.stats.record(r.is_ok());
        let endpoint = &self.endpoint;
        match r {
            Ok(()) => {
                if let Some(n) = self.log.success() {
                    tracing::info!(%endpoint, failures = n, "OTLP export recovered");
                } else if !self.succeeded_once {
                    tracing::info!(%endpoint, "first OTLP export succeeded");
                }
                self.succeeded_once = true;
                tracing::debug!("OTLP export succeeded");
            }
            Err(error) => {
                if let Some(suppressed) = self.log.failure(Instant::now()) {
                    tracing::warn!(%endpoint, %error, suppressed, "OTLP export failed (logged at most once a minute; counted in perf_otlp_exports_total, which /metrics shows and each export pushes)");
                } else {
                    tracing::debug!(%error, "OTLP export failed");
                }
            }
        }
    }

    pub(super) async fn run(mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let interval = self.settings.interval;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = tick.tick() => {}
            }
            let timeout = self.settings.timeout;
            let r = tokio::select! {
                r = self.cycle(timeout) => Some(r),
                _ = stop.changed() => None,
            };
            match r {
                Some(r) => self.record(r),
                None => break,
            }
        }
        // One final push of the latest counts, bounded.
        let bound = self.settings.shutdown_timeout();
        let r = self.cycle(bound).await;
        match &r {
            Ok(()) => tracing::info!("final OTLP export at shutdown succeeded"),
            Err(error) => {
                tracing::warn!(endpoint = %self.endpoint, %error, "final OTLP export at shutdown failed")
            }
        }
        self.stats.record(r.is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::super::naming::otel_metric;
    use super::super::settings::tests::{on, only};
    use super::*;
    use crate::snapshot::{Family, Kind, Snapshot};
    use opentelemetry_proto::tonic::common::v1::any_value;
    use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point, Metric};
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    type Series = BTreeMap<Vec<(String, String)>, f64>;

    fn snapshot_series(f: &Family) -> Series {
        f.samples
            .iter()
            .map(|s| {
                let mut l: Vec<(String, String)> = s
                    .labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect();
                l.sort();
                (l, s.value)
            })
            .collect()
    }

    fn pushed_series(
        m: &opentelemetry_proto::tonic::metrics::v1::Metric,
        kind: Kind,
        t0: u64,
    ) -> Series {
        let points = match (m.data.as_ref().unwrap(), kind) {
            (metric::Data::Sum(s), Kind::Counter) => {
                assert!(s.is_monotonic);
                for p in &s.data_points {
                    assert!(
                        p.start_time_unix_nano >= t0 && p.start_time_unix_nano < p.time_unix_nano,
                        "{}",
                        m.name
                    );
                }
                &s.data_points
            }
            (metric::Data::Gauge(g), Kind::Gauge) => &g.data_points,
            (d, k) => panic!("{}: {k:?} pushed as {d:?}", m.name),
        };
        points
            .iter()
            .map(|p| {
                let mut l: Vec<(String, String)> = p
                    .attributes
                    .iter()
                    .map(
                        |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(any_value::Value::StringValue(s)) => (kv.key.clone(), s.clone()),
                            v => panic!("{}: {v:?}", kv.key),
                        },
                    )
                    .collect();
                l.sort();
                let Some(number_data_point::Value::AsDouble(v)) = p.value else {
                    panic!("{:?}", p.value)
                };
                (l, v)
            })
            .collect()
    }

    #[tokio::test]
    async fn one_engine_collection_per_export_carries_every_sample() {
        use crate::engine::{Engine, Fds};
        use crate::perf::sim::SimKernel;
        use crate::pmu::PmuTable;

        // Before the engine opens its groups: every start is at or after it.
        let t0 = SystemTime::now();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/intel-skx");
        let table = PmuTable::discover(&root).unwrap();
        let k = Arc::new(SimKernel::with_manual_clock(table.clone()));
        let cfg = crate::config::Config::default_config();
        let engine = Mutex::new(Engine::for_config(k.clone(), table, &cfg, Fds::Unbounded));
        let calls = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(Mutex::new(Snapshot::default()));
        let (c2, l2) = (calls.clone(), last.clone());
        let derived = Arc::new(cfg.derived.clone());
        let collect: Collect = Arc::new(move || {
            c2.fetch_add(1, Ordering::SeqCst);
            k.advance(1_000_000_000);
            let s = engine.lock().unwrap().collect();
            *l2.lock().unwrap() = s.clone();
            super::super::Collection {
                snapshot: s,
                derived: derived.clone(),
            }
        });
        let mut p = PushLoop::new(
            on(&only(), &[]),
            collect,
            Arc::new(ExportStats::default()),
            t0,
        )
        .unwrap();
        let t0 = super::super::convert::unix_nanos(t0);
        for round in 1..=3 {
            let req = p.gather();
            assert_eq!(
                calls.load(Ordering::SeqCst),
                round,
                "one collection per export"
            );
            let mut snap = last.lock().unwrap().clone();
            // The export results go with the metrics (issue 24 item 15:
            // with --otlp.only nothing else showed them).
            snap.families.push(p.stats.family());
            let all = &req.resource_metrics[0].scope_metrics[0].metrics;
            // The derived gauges, over the window since the previous
            // export (none at the first): the simulated IPC is 1.5.
            let ipc = all.iter().find(|m| m.name == "perf.derived.ipc");
            match ipc.and_then(|m| m.data.as_ref()) {
                Some(metric::Data::Gauge(g)) => {
                    assert!(round > 1);
                    assert_eq!(
                        g.data_points[0].value,
                        Some(number_data_point::Value::AsDouble(1.5))
                    );
                }
                None => assert_eq!(round, 1),
                Some(other) => panic!("not a gauge: {other:?}"),
            }
            let metrics: Vec<&Metric> = all
                .iter()
                .filter(|m| !m.name.starts_with("perf.derived."))
                .collect();
            assert!(
                metrics.iter().any(|m| m.name == "perf.otlp.exports"),
                "{:?}",
                metrics.iter().map(|m| &m.name).collect::<Vec<_>>()
            );
            let pushed: Vec<&Family> = snap
                .families
                .iter()
                .filter(|f| !f.samples.is_empty())
                .collect();
            assert!(pushed.len() > 20, "{}", pushed.len());
            assert_eq!(metrics.len(), pushed.len());
            for f in pushed {
                let (name, unit) = otel_metric(&f.name, f.kind);
                let m = metrics
                    .iter()
                    .find(|m| m.name == name)
                    .unwrap_or_else(|| panic!("{name} not pushed"));
                assert_eq!(m.unit, unit);
                assert_eq!(pushed_series(m, f.kind, t0), snapshot_series(f), "{name}");
            }
        }
        let req = p.gather();
        let dram = req.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .find(|m| m.name == "perf.dram.read")
            .expect("uncore DRAM reads on the simulated Skylake-SP");
        assert_eq!(dram.unit, "By");
        let keys: Vec<Vec<String>> = pushed_series(dram, Kind::Counter, t0)
            .into_keys()
            .map(|l| l.into_iter().map(|(k, _)| k).collect())
            .collect();
        assert!(
            keys.iter()
                .all(|k| k.contains(&"pmu".to_string()) && k.contains(&"socket".to_string())),
            "{keys:?}"
        );
    }
}
