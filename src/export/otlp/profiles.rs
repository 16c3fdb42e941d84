//! OTLP profiles: a profile's samples ([`ProfileSample`], the same the
//! pprof writer takes) as an `ExportProfilesServiceRequest` of the
//! `profiles` signal, whose protocol is still **development**
//! (`opentelemetry.proto.collector.profiles.v1development`): its messages
//! may change incompatibly between releases of the protocol, and
//! receivers must take that version. The types are
//! `opentelemetry-proto`'s (feature `profiles`); over gRPC the method is
//! `/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export`.
//!
//! # Data model
//!
//! One request carries one profile of one resource (the metrics'
//! resource: `host.*`, `service.*`, `k8s.node.name`, ...) and the
//! dictionary every index points into. Each table starts with its zero
//! value (the protocol's "null" entry at index 0). A frame is a location
//! (its address: the offset in the module's file, kernel frames the
//! address) in a mapping per (module, build-id), with one line naming its
//! function when symbolized; the build-id is the mapping's
//! `process.executable.build_id.gnu` attribute. Each distinct
//! (key, process, stack) is a sample of the dictionary's stack, with one
//! value (the sum of the periods: the event's count, or nanoseconds of
//! `cpu-clock`) and two attributes: the attribution key
//! (`k8s.pod.uid`, `cgroup`, `process.executable.name` or `thread.name`)
//! and `process.pid`.

use super::convert::{string_kv, unix_nanos};
use crate::engine::sample::{Frame, ProfileSample};
use crate::export::pprof::{unit, Meta};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope};
use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary,
    ResourceProfiles, ScopeProfiles, Stack, ValueType,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};

/// What is said once at start: the signal's protocol is not stable.
pub(crate) const DEVELOPMENT_NOTE: &str = "OTLP profiles: the profiles signal is still in development in the OpenTelemetry protocol (opentelemetry.proto.collector.profiles.v1development): receivers must take that version, and it may change incompatibly";

/// The path OTLP/HTTP receivers take profiles at, in place of
/// `/v1/metrics`.
pub(crate) const HTTP_PATH: &str = "/v1development/profiles";

/// The attribute key of a pprof label (semantic conventions where one is
/// registered; `cgroup` has none).
fn key_attribute(label: &str) -> &str {
    match label {
        "pod_uid" => "k8s.pod.uid",
        "process" => "process.executable.name",
        "thread" => "thread.name",
        other => other,
    }
}

/// A table whose entries are deduplicated by a key; index 0 is the
/// zero value.
struct Table<K, V> {
    items: Vec<V>,
    index: HashMap<K, i32>,
}

impl<K: Hash + Eq, V: Default> Table<K, V> {
    fn new() -> Self {
        Table {
            items: vec![V::default()],
            index: HashMap::new(),
        }
    }

    /// The index of `k`, made by `make` the first time.
    fn id(&mut self, k: K, make: impl FnOnce() -> V) -> i32 {
        if let Some(&i) = self.index.get(&k) {
            return i;
        }
        let i = i32::try_from(self.items.len()).unwrap_or(i32::MAX);
        self.items.push(make());
        self.index.insert(k, i);
        i
    }
}

/// An attribute's value, as a hashable key.
#[derive(Hash, PartialEq, Eq)]
enum Val {
    Str(String),
    Int(i64),
}

/// The dictionary being built.
struct Dict {
    strings: Table<String, String>,
    mappings: Table<(String, Option<String>), Mapping>,
    locations: Table<Frame, Location>,
    functions: Table<String, Function>,
    attributes: Table<(i32, Val), KeyValueAndUnit>,
    stacks: Table<Vec<i32>, Stack>,
}

impl Dict {
    fn new() -> Self {
        Dict {
            strings: Table::new(),
            mappings: Table::new(),
            locations: Table::new(),
            functions: Table::new(),
            attributes: Table::new(),
            stacks: Table::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if s.is_empty() {
            return 0;
        }
        self.strings.id(s.to_string(), || s.to_string())
    }

    fn attribute(&mut self, key: &str, v: Val) -> i32 {
        let k = self.string(key);
        let value = match &v {
            Val::Str(s) => any_value::Value::StringValue(s.clone()),
            Val::Int(i) => any_value::Value::IntValue(*i),
        };
        self.attributes.id((k, v), || KeyValueAndUnit {
            key_strindex: k,
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: 0,
        })
    }

    fn mapping(&mut self, f: &Frame) -> i32 {
        let k = (
            f.module.to_string(),
            f.build_id.as_deref().map(str::to_string),
        );
        if let Some(&i) = self.mappings.index.get(&k) {
            return i;
        }
        let filename = self.string(&f.module);
        let attrs = match &f.build_id {
            Some(b) => {
                vec![self.attribute("process.executable.build_id.gnu", Val::Str(b.to_string()))]
            }
            None => Vec::new(),
        };
        self.mappings.id(k, || Mapping {
            memory_start: 0,
            memory_limit: u64::MAX,
            file_offset: 0,
            filename_strindex: filename,
            attribute_indices: attrs,
        })
    }

    fn location(&mut self, f: &Frame) -> i32 {
        if let Some(&i) = self.locations.index.get(f) {
            return i;
        }
        let mapping = self.mapping(f);
        let lines = match &f.function {
            Some(name) => {
                let n = self.string(name);
                let function = self.functions.id(name.to_string(), || Function {
                    name_strindex: n,
                    system_name_strindex: n,
                    filename_strindex: 0,
                    start_line: 0,
                });
                vec![Line {
                    function_index: function,
                    line: 0,
                    column: 0,
                }]
            }
            None => Vec::new(),
        };
        self.locations.id(f.clone(), || Location {
            mapping_index: mapping,
            address: f.address,
            lines,
            attribute_indices: Vec::new(),
        })
    }

    fn stack(&mut self, frames: &[Frame]) -> i32 {
        let ids: Vec<i32> = frames.iter().map(|f| self.location(f)).collect();
        self.stacks.id(ids.clone(), || Stack {
            location_indices: ids,
        })
    }

    fn finish(self) -> ProfilesDictionary {
        ProfilesDictionary {
            mapping_table: self.mappings.items,
            location_table: self.locations.items,
            function_table: self.functions.items,
            link_table: vec![Link::default()],
            string_table: self.strings.items,
            attribute_table: self.attributes.items,
            stack_table: self.stacks.items,
        }
    }
}

/// A profile id: 16 bytes, never all zero, distinct per profile of this
/// process (the start time and a counter).
fn profile_id(start: u64) -> Vec<u8> {
    static N: AtomicU64 = AtomicU64::new(1);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let mut id = start.to_be_bytes().to_vec();
    id.extend(n.to_be_bytes());
    id
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The request of one profile: `samples` taken as `meta` says, of the
/// resource `resource` (the metrics' attributes).
pub(crate) fn request(
    resource: &[(String, String)],
    meta: &Meta,
    samples: &[ProfileSample],
) -> ExportProfilesServiceRequest {
    let mut d = Dict::new();
    let sample_type = ValueType {
        type_strindex: d.string(&meta.event),
        unit_strindex: d.string(unit(&meta.event)),
    };
    let key = key_attribute(meta.label);
    let out: Vec<opentelemetry_proto::tonic::profiles::v1development::Sample> = samples
        .iter()
        .map(|s| {
            let stack = d.stack(&s.frames);
            let attrs = vec![
                d.attribute(key, Val::Str(s.name.clone())),
                d.attribute("process.pid", Val::Int(i64::from(s.pid))),
            ];
            opentelemetry_proto::tonic::profiles::v1development::Sample {
                stack_index: stack,
                attribute_indices: attrs,
                link_index: 0,
                values: vec![i64_of(s.events)],
                timestamps_unix_nano: Vec::new(),
            }
        })
        .collect();
    let start = unix_nanos(meta.start);
    let profile = Profile {
        sample_type: Some(sample_type),
        samples: out,
        time_unix_nano: start,
        duration_nano: u64::try_from(meta.duration.as_nanos()).unwrap_or(u64::MAX),
        period_type: Some(sample_type),
        period: 0,
        profile_id: profile_id(start),
        dropped_attributes_count: 0,
        original_payload_format: String::new(),
        original_payload: Vec::new(),
        attribute_indices: Vec::new(),
    };
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: resource.iter().map(|(k, v)| string_kv(k, v)).collect(),
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "perf-exporter".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                profiles: vec![profile],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(d.finish()),
    }
}

/// The OTLP/HTTP URL of profiles, from the metrics one: its
/// `/v1/metrics` replaced by [`HTTP_PATH`]; `None` when it does not end
/// so (a metrics URL given whole, which says nothing of profiles).
pub(crate) fn http_url(metrics: &str) -> Option<String> {
    let mut u = reqwest::Url::parse(metrics).ok()?;
    let base = u.path().strip_suffix("/v1/metrics")?.to_string();
    u.set_path(&format!("{base}{HTTP_PATH}"));
    Some(u.to_string())
}

/// The OTLP/HTTP URL of profiles under a base URL (the generic
/// endpoint): [`HTTP_PATH`] appended to its path, as `/v1/metrics` is for
/// the metrics; `None` when it is not a URL.
pub(crate) fn http_url_under(base: &str) -> Option<String> {
    let mut u = reqwest::Url::parse(base).ok()?;
    let path = format!("{}{HTTP_PATH}", u.path().trim_end_matches('/'));
    u.set_path(&path);
    Some(u.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use prost::Message as _;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    /// Checks that every index of the request is in its table, and that
    /// each table starts with its zero value; returns the sum of the
    /// values.
    pub(crate) fn check_indexes(r: &ExportProfilesServiceRequest) -> i64 {
        let d = r.dictionary.as_ref().expect("a dictionary");
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.mapping_table[0], Mapping::default());
        assert_eq!(d.location_table[0], Location::default());
        assert_eq!(d.function_table[0], Function::default());
        assert_eq!(d.link_table[0], Link::default());
        assert_eq!(d.attribute_table[0], KeyValueAndUnit::default());
        assert_eq!(d.stack_table[0], Stack::default());
        let ok = |i: i32, n: usize| usize::try_from(i).is_ok_and(|i| i < n);
        let s = d.string_table.len();
        for a in &d.attribute_table {
            assert!(ok(a.key_strindex, s) && ok(a.unit_strindex, s));
        }
        for m in &d.mapping_table {
            assert!(ok(m.filename_strindex, s));
            assert!(m
                .attribute_indices
                .iter()
                .all(|&i| ok(i, d.attribute_table.len())));
        }
        for f in &d.function_table {
            assert!(ok(f.name_strindex, s) && ok(f.system_name_strindex, s));
            assert!(ok(f.filename_strindex, s));
        }
        for l in &d.location_table {
            assert!(ok(l.mapping_index, d.mapping_table.len()));
            assert!(l
                .lines
                .iter()
                .all(|x| ok(x.function_index, d.function_table.len())));
        }
        for st in &d.stack_table {
            assert!(st
                .location_indices
                .iter()
                .all(|&i| ok(i, d.location_table.len())));
        }
        let mut sum = 0;
        for rp in &r.resource_profiles {
            for sp in &rp.scope_profiles {
                for p in &sp.profiles {
                    let t = p.sample_type.expect("a sample type");
                    assert!(ok(t.type_strindex, s) && ok(t.unit_strindex, s));
                    for x in &p.samples {
                        assert!(ok(x.stack_index, d.stack_table.len()));
                        assert!(ok(x.link_index, d.link_table.len()));
                        assert!(x
                            .attribute_indices
                            .iter()
                            .all(|&i| ok(i, d.attribute_table.len())));
                        assert_eq!(x.values.len(), 1);
                        sum += x.values[0];
                    }
                }
            }
        }
        sum
    }

    fn frame(f: Option<&str>, module: &str, build_id: Option<&str>, address: u64) -> Frame {
        Frame {
            function: f.map(Arc::from),
            module: module.into(),
            build_id: build_id.map(Arc::from),
            address,
        }
    }

    #[test]
    fn a_profile_as_an_otlp_request_decodes_with_consistent_indexes() {
        let main = frame(Some("main"), "/w", Some("abcd"), 0x1200);
        let samples = vec![
            ProfileSample {
                frames: vec![frame(Some("hot"), "/w", Some("abcd"), 0x1100), main.clone()],
                name: "pod-1".into(),
                pid: 7,
                samples: 90,
                events: 900,
            },
            ProfileSample {
                frames: vec![frame(None, "/stripped", Some("ef01"), 0x42), main.clone()],
                name: "pod-1".into(),
                pid: 7,
                samples: 10,
                events: 100,
            },
            ProfileSample {
                frames: vec![
                    frame(
                        Some("do_syscall_64"),
                        "[kernel.kallsyms]",
                        None,
                        0xffff_ffff_8100_0000,
                    ),
                    main,
                ],
                name: "pod-2".into(),
                pid: 8,
                samples: 5,
                events: 50,
            },
        ];
        let meta = Meta {
            event: "cycles".into(),
            label: "pod_uid",
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            duration: Duration::from_secs(10),
            comments: Vec::new(),
        };
        let res = vec![("host.name".to_string(), "h1".to_string())];
        let bytes = request(&res, &meta, &samples).encode_to_vec();
        let r = ExportProfilesServiceRequest::decode(&bytes[..]).unwrap();
        assert_eq!(check_indexes(&r), 1050, "the values are the events sampled");
        let d = r.dictionary.as_ref().unwrap();
        let s = |i: i32| d.string_table[i as usize].as_str();
        // Deduplicated: the shared frame is one location, one function.
        assert_eq!(d.location_table.len(), 1 + 4);
        assert_eq!(d.function_table.len(), 1 + 3);
        assert_eq!(d.mapping_table.len(), 1 + 3);
        assert_eq!(d.stack_table.len(), 1 + 3);
        let rp = &r.resource_profiles[0];
        let attrs = &rp.resource.as_ref().unwrap().attributes;
        assert_eq!(attrs[0].key, "host.name");
        let p = &rp.scope_profiles[0].profiles[0];
        assert_eq!(p.time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(p.duration_nano, 10_000_000_000);
        assert_eq!(p.profile_id.len(), 16);
        let t = p.sample_type.unwrap();
        assert_eq!(
            (s(t.type_strindex), s(t.unit_strindex)),
            ("cycles", "count")
        );
        // The first sample: innermost `hot`, under pod-1, pid 7.
        let first = &p.samples[0];
        let stack = &d.stack_table[first.stack_index as usize];
        let leaf = &d.location_table[stack.location_indices[0] as usize];
        let f = &d.function_table[leaf.lines[0].function_index as usize];
        assert_eq!(s(f.name_strindex), "hot");
        assert_eq!(leaf.address, 0x1100);
        let m = &d.mapping_table[leaf.mapping_index as usize];
        assert_eq!(s(m.filename_strindex), "/w");
        let bid = &d.attribute_table[m.attribute_indices[0] as usize];
        assert_eq!(s(bid.key_strindex), "process.executable.build_id.gnu");
        let kv: Vec<(String, Option<any_value::Value>)> = first
            .attribute_indices
            .iter()
            .map(|&i| {
                let a = &d.attribute_table[i as usize];
                (
                    s(a.key_strindex).to_string(),
                    a.value.clone().and_then(|v| v.value),
                )
            })
            .collect();
        assert_eq!(
            kv,
            vec![
                (
                    "k8s.pod.uid".into(),
                    Some(any_value::Value::StringValue("pod-1".into()))
                ),
                ("process.pid".into(), Some(any_value::Value::IntValue(7))),
            ]
        );
        // An unsymbolized frame keeps its module and offset, no line.
        let unsym = d.location_table.iter().find(|l| l.address == 0x42).unwrap();
        assert!(unsym.lines.is_empty());
        let m = &d.mapping_table[unsym.mapping_index as usize];
        assert_eq!(s(m.filename_strindex), "/stripped");
    }

    #[test]
    fn an_empty_profile_is_a_valid_request() {
        let meta = Meta {
            event: "cpu-clock".into(),
            label: "process",
            start: SystemTime::UNIX_EPOCH,
            duration: Duration::from_secs(1),
            comments: Vec::new(),
        };
        let r = request(&[], &meta, &[]);
        assert_eq!(check_indexes(&r), 0);
        let d = r.dictionary.as_ref().unwrap();
        let t = r.resource_profiles[0].scope_profiles[0].profiles[0]
            .sample_type
            .unwrap();
        assert_eq!(d.string_table[t.unit_strindex as usize], "nanoseconds");
    }

    #[test]
    fn the_http_url_is_the_metrics_one_with_the_profiles_path() {
        assert_eq!(
            http_url("http://c:4318/v1/metrics").as_deref(),
            Some("http://c:4318/v1development/profiles")
        );
        assert_eq!(
            http_url("https://c/otlp/v1/metrics?k=v").as_deref(),
            Some("https://c/otlp/v1development/profiles?k=v")
        );
        assert_eq!(http_url("http://c:4318/custom"), None);
    }
}
