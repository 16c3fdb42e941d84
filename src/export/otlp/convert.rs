//! A [`Snapshot`] as an OTLP `ExportMetricsServiceRequest`.
//!
//! The data points are built here, from the snapshot, rather than through
//! the OpenTelemetry SDK's observable instruments: the SDK (0.33) keeps
//! one start time per metric, set when its aggregation began, so it can
//! neither say when each series' count began nor start a series anew when
//! its count restarts. Here each point of a cumulative sum carries its
//! series' own start: [`Sample::start_unix_nanos`] (when its group was
//! opened, or its count last restarted), or, where the engine does not
//! know it (0), when the exporter started counting; never the time of an
//! export. A series of unknown start whose value goes down has restarted:
//! it starts anew at the time of its previous point (the OTLP data model's
//! rule for a reset cumulative stream), so a restarted count is never
//! reported under its old start. Counters are cumulative monotonic sums,
//! gauges gauges (no start time); labels are string attributes.

use super::naming::otel_metric;
use crate::snapshot::{Family, Kind, Labels, Sample, Snapshot};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use std::collections::{HashMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (0 before it).
pub(super) fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The attribute key of a label, chosen so that the Prometheus
/// translation of OTLP (`.` becomes `_`) gives back the label of
/// `/metrics`, so the shipped recording rules and dashboards work on
/// OTLP-ingested data unchanged. A semantic-convention name is taken
/// where its translation is the label itself (`container_id` ->
/// `container.id`); elsewhere the label is kept: `pod_uid` (the
/// convention's `k8s.pod.uid` would be stored as `k8s_pod_uid`), `cpu`
/// (`cpu.logical_number` would be `cpu_logical_number`), `process`
/// (`process.executable.name`); `cgroup`, `qos_class`, `set`, `pmu`,
/// `socket`, `event` have no registered name.
fn attribute_key(label: &str) -> &str {
    match label {
        "container_id" => "container.id",
        other => other,
    }
}

pub(super) fn string_kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.to_string(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.to_string())),
        }),
        ..Default::default()
    }
}

/// Builds requests from snapshots; remembers each family's OTel name.
#[derive(Debug)]
pub(super) struct Converter {
    resource: Resource,
    scope: InstrumentationScope,
    /// When the exporter started counting: the start of a series whose
    /// own start is unknown.
    counting_since: u64,
    /// Prometheus name -> OTel name and unit; `None` for a family whose
    /// OTel name another family has (not pushed).
    names: HashMap<String, Option<(String, String)>>,
    taken: HashSet<String>,
    /// Series of unknown start: what was pushed of them last.
    unknown: Series,
}

/// Series of unknown start, by family and labels.
type Series = HashMap<(String, Labels), Pushed>;

/// What was pushed of a series of unknown start.
#[derive(Debug, Clone, Copy)]
struct Pushed {
    value: f64,
    time: u64,
    start: u64,
}

impl Converter {
    /// A converter for this resource; `counting_since` is when counting
    /// began (the process' start, about when the engine opened its
    /// groups).
    pub(super) fn new(resource: &[(String, String)], counting_since: SystemTime) -> Self {
        Converter {
            resource: Resource {
                attributes: resource.iter().map(|(k, v)| string_kv(k, v)).collect(),
                ..Default::default()
            },
            scope: InstrumentationScope {
                name: "perf-exporter".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                ..Default::default()
            },
            counting_since: unix_nanos(counting_since),
            names: HashMap::new(),
            taken: HashSet::new(),
            unknown: HashMap::new(),
        }
    }

    /// The OTel name and unit of a family, or `None` when another family
    /// took that name first (warned once).
    fn name(&mut self, f: &Family) -> Option<(String, String)> {
        if let Some(n) = self.names.get(&*f.name) {
            return n.clone();
        }
        let (name, unit) = otel_metric(&f.name, f.kind);
        let v = if self.taken.insert(name.clone()) {
            Some((name, unit))
        } else {
            tracing::warn!(metric = %f.name, otel = %name, "two metrics map to the same OTel name; the second is not pushed");
            None
        };
        self.names.insert(f.name.to_string(), v.clone());
        v
    }

    /// The start of a series the engine gives none for: when counting
    /// began, until its value goes down (a restart), then the time of its
    /// previous point. `seen` collects the series of this export.
    fn unknown_start(&self, key: (String, Labels), value: f64, now: u64, seen: &mut Series) -> u64 {
        let start = match self.unknown.get(&key) {
            Some(p) if value < p.value => p.time,
            Some(p) => p.start,
            None => self.counting_since,
        }
        .min(now);
        seen.insert(
            key,
            Pushed {
                value,
                time: now,
                start,
            },
        );
        start
    }

    /// A point of a sample of family `f` taken at `now`; with its series'
    /// start for a cumulative sum (never after `now`).
    fn point(&self, f: &Family, s: &Sample, now: u64, seen: &mut Series) -> NumberDataPoint {
        let start = match f.kind {
            Kind::Gauge => 0,
            Kind::Counter if s.start_unix_nanos != 0 => s.start_unix_nanos.min(now),
            Kind::Counter => {
                self.unknown_start((f.name.to_string(), s.labels.clone()), s.value, now, seen)
            }
        };
        NumberDataPoint {
            attributes: s
                .labels
                .iter()
                .map(|(k, v)| string_kv(attribute_key(k), v))
                .collect(),
            start_time_unix_nano: start,
            time_unix_nano: now,
            value: Some(number_data_point::Value::AsDouble(s.value)),
            ..Default::default()
        }
    }

    fn metric(&mut self, f: &Family, now: u64, seen: &mut Series) -> Option<Metric> {
        if f.samples.is_empty() {
            return None;
        }
        let (name, unit) = self.name(f)?;
        let data_points = f.samples.iter().map(|s| self.point(f, s, now, seen));
        let data = match f.kind {
            Kind::Counter => metric::Data::Sum(Sum {
                data_points: data_points.collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
            Kind::Gauge => metric::Data::Gauge(Gauge {
                data_points: data_points.collect(),
            }),
        };
        Some(Metric {
            name,
            description: f.help.to_string(),
            unit,
            data: Some(data),
            ..Default::default()
        })
    }

    /// The request for one snapshot, taken at `now`.
    pub(super) fn request(
        &mut self,
        snap: &Snapshot,
        now: SystemTime,
    ) -> ExportMetricsServiceRequest {
        let now = unix_nanos(now);
        let mut seen = HashMap::new();
        let metrics = snap
            .families
            .iter()
            .filter_map(|f| self.metric(f, now, &mut seen))
            .collect();
        // Series gone from the snapshot are forgotten.
        self.unknown = seen;
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(self.resource.clone()),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(self.scope.clone()),
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn family(name: &str, kind: Kind, samples: &[(&str, f64, u64)]) -> Family {
        Family {
            name: name.to_string().into(),
            help: format!("{name} help").into(),
            kind,
            samples: samples
                .iter()
                .map(|(cpu, v, start)| Sample {
                    labels: vec![("cpu", cpu.to_string())].into(),
                    value: *v,
                    start_unix_nanos: *start,
                })
                .collect(),
        }
    }

    fn points(r: &ExportMetricsServiceRequest, name: &str) -> Vec<NumberDataPoint> {
        let m = r.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        match m.data.as_ref().unwrap() {
            metric::Data::Sum(s) => {
                assert!(s.is_monotonic);
                assert_eq!(
                    s.aggregation_temporality,
                    AggregationTemporality::Cumulative as i32
                );
                s.data_points.clone()
            }
            metric::Data::Gauge(g) => g.data_points.clone(),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn each_series_carries_its_own_start_and_a_restart_gets_a_new_one() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ns = |s: u64| unix_nanos(t0 + Duration::from_secs(s));
        let mut c = Converter::new(&[("service.name".into(), "x".into())], t0);
        // cpu 0's group opened 1 s after the exporter started; cpu 1's start
        // is unknown: the exporter's start, not the export's time.
        let snap = |v0: f64, start0: u64| Snapshot {
            families: vec![
                family(
                    "perf_cpu_cycles_total",
                    Kind::Counter,
                    &[("0", v0, start0), ("1", 7.0, 0)],
                ),
                family("perf_event_available", Kind::Gauge, &[("0", 1.0, 0)]),
                family("perf_empty_total", Kind::Counter, &[]),
            ],
        };
        let r = c.request(&snap(12682.0, ns(1)), t0 + Duration::from_secs(60));
        let p = points(&r, "perf.cpu.cycles");
        assert_eq!(p[0].start_time_unix_nano, ns(1));
        assert_eq!(p[1].start_time_unix_nano, ns(0));
        assert!(p.iter().all(|p| p.time_unix_nano == ns(60)));
        assert_eq!(
            p[0].value,
            Some(number_data_point::Value::AsDouble(12682.0))
        );
        let g = points(&r, "perf.event.available");
        assert_eq!(g[0].start_time_unix_nano, 0);
        assert_eq!(r.resource_metrics[0].scope_metrics[0].metrics.len(), 2);
        // A reload restarts cpu 0's count (12682 -> 33) with a new start.
        let r = c.request(&snap(33.0, ns(90)), t0 + Duration::from_secs(120));
        let p = points(&r, "perf.cpu.cycles");
        assert_eq!(p[0].start_time_unix_nano, ns(90));
        assert_eq!(p[1].start_time_unix_nano, ns(0));
        // A start after the point's time (clock stepped back) is clamped.
        let r = c.request(&snap(40.0, ns(500)), t0 + Duration::from_secs(130));
        assert_eq!(
            points(&r, "perf.cpu.cycles")[0].start_time_unix_nano,
            ns(130)
        );
    }

    #[test]
    fn a_series_of_unknown_start_that_goes_down_starts_anew() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let ns = |s: u64| unix_nanos(at(s));
        let mut c = Converter::new(&[], t0);
        let snap = |v: f64| Snapshot {
            families: vec![family(
                "perf_cpu_cycles_total",
                Kind::Counter,
                &[("0", v, 0)],
            )],
        };
        let start = |c: &mut Converter, v: f64, t: u64| {
            points(&c.request(&snap(v), at(t)), "perf.cpu.cycles")[0].start_time_unix_nano
        };
        assert_eq!(start(&mut c, 12682.0, 60), ns(0));
        assert_eq!(start(&mut c, 12682.0, 120), ns(0));
        // 12682 -> 33: restarted after the point at 120 s.
        assert_eq!(start(&mut c, 33.0, 180), ns(120));
        assert_eq!(start(&mut c, 90.0, 240), ns(120));
        // Gone for one export, then back: when it began is unknown, so
        // the exporter's start again.
        c.request(&Snapshot::default(), at(300));
        assert_eq!(start(&mut c, 5.0, 360), ns(0));
    }

    /// Issue 24 item 5: `pod_uid` was pushed as `k8s.pod.uid`, which
    /// Prometheus-compatible stores keep as `k8s_pod_uid`: the pod rules
    /// and dashboard found nothing on OTLP data. Every attribute's
    /// Prometheus translation is its label now.
    #[test]
    fn cgroup_labels_become_attributes_that_translate_back_to_the_labels() {
        let mut c = Converter::new(&[], SystemTime::now());
        let labels: Labels = vec![
            ("cgroup", "kubepods.slice/p/c".to_string()),
            ("pod_uid", "0b2e".to_string()),
            ("qos_class", "burstable".to_string()),
            ("container_id", "abc".to_string()),
        ]
        .into();
        let snap = Snapshot {
            families: vec![Family {
                name: "perf_cgroup_cpu_cycles_total".into(),
                help: "h".into(),
                kind: Kind::Counter,
                samples: vec![Sample {
                    labels,
                    value: 1.0,
                    start_unix_nanos: 1,
                }],
            }],
        };
        let r = c.request(&snap, SystemTime::now());
        assert_eq!(
            points(&r, "perf.cgroup.cpu.cycles")[0].attributes,
            vec![
                string_kv("cgroup", "kubepods.slice/p/c"),
                string_kv("pod_uid", "0b2e"),
                string_kv("qos_class", "burstable"),
                string_kv("container.id", "abc"),
            ]
        );
        let translated = |k: &str| k.replace('.', "_");
        for (l, a) in snap.families[0].samples[0]
            .labels
            .iter()
            .zip(&points(&r, "perf.cgroup.cpu.cycles")[0].attributes)
        {
            assert_eq!(translated(&a.key), l.0, "{a:?}");
        }
    }

    #[test]
    fn names_units_attributes_and_collisions() {
        let mut c = Converter::new(&[("service.name".into(), "x".into())], SystemTime::now());
        let snap = Snapshot {
            families: vec![
                family(
                    "perf_dram_read_bytes_total",
                    Kind::Counter,
                    &[("0", 1.0, 1)],
                ),
                family("perf_dram_read_total", Kind::Counter, &[("0", 1.0, 1)]),
            ],
        };
        let r = c.request(&snap, SystemTime::now());
        let rm = &r.resource_metrics[0];
        assert_eq!(
            rm.resource.as_ref().unwrap().attributes[0],
            string_kv("service.name", "x")
        );
        let sm = &rm.scope_metrics[0];
        assert_eq!(sm.scope.as_ref().unwrap().name, "perf-exporter");
        // perf_dram_read_total would be perf.dram.read too: not pushed.
        assert_eq!(sm.metrics.len(), 1);
        let m = &sm.metrics[0];
        assert_eq!((m.name.as_str(), m.unit.as_str()), ("perf.dram.read", "By"));
        assert_eq!(m.description, "perf_dram_read_bytes_total help");
        assert_eq!(
            points(&r, "perf.dram.read")[0].attributes,
            vec![string_kv("cpu", "0")]
        );
    }
}
