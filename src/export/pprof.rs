//! Profiles in pprof's format: the `perftools.profiles.Profile` protobuf
//! message (as `go tool pprof`, Grafana Pyroscope and Parca read it),
//! gzipped. The messages are written here from the format's field
//! numbers (only the fields used), encoded with `prost`.
//!
//! Each distinct (key, process, stack) is one sample with two values,
//! `samples/count` and the event (`cpu-clock`/`task-clock` in
//! nanoseconds, any other in events), and labels: the attribution key
//! under its label (`pod_uid`, `cgroup`, `process`, `thread`) and `pid`.
//! A frame is a location (one line: its function when symbolized) in a
//! mapping per module, with the module's path and build-id; the location's
//! address is the frame's offset in the file (kernel frames: the address),
//! so a symbolizer can resolve it later against the same build-id.

use crate::engine::sample::{Frame, ProfileSample};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// `ValueType`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// Index in the string table.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Index in the string table.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Label`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// Index in the string table.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// Index in the string table (a string label).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// A numeric label.
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// `Sample`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Locations, innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per `sample_type`.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Mapping`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Start of the mapped range.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End of the mapped range.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// The file offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// Index in the string table.
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Index in the string table.
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether its locations carry functions.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// `Line`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// A `Function`'s id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

/// `Location`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping's id.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Its function (none when not symbolized).
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `Function`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Index in the string table.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Index in the string table.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
}

/// `Profile`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each sample's values are.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The mappings.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// The locations.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// The functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Strings; the first is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Start, Unix nanoseconds.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// Length of the profile.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What a period is.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Comments (string table indexes).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// What a profile was taken of.
#[derive(Debug, Clone)]
pub struct Meta {
    /// The sampled event.
    pub event: String,
    /// The label the attribution keys go under (`pod_uid`, `cgroup`,
    /// `process`, `thread`).
    pub label: &'static str,
    /// When sampling started.
    pub start: SystemTime,
    /// How long it sampled.
    pub duration: Duration,
    /// Comments (the fallback note, dropped stacks, ...).
    pub comments: Vec<String>,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The unit of `event`'s values.
pub(crate) fn unit(event: &str) -> &'static str {
    let base = event.split(':').next().unwrap_or(event);
    if matches!(base, "cpu-clock" | "task-clock") {
        "nanoseconds"
    } else {
        "count"
    }
}

/// The tables a profile's samples refer to, each entry once.
#[derive(Default)]
struct Tables {
    st: Strings,
    mappings: HashMap<(Arc<str>, Option<Arc<str>>), u64>,
    mapping: Vec<Mapping>,
    functions: HashMap<Arc<str>, u64>,
    function: Vec<Function>,
    locations: HashMap<Frame, u64>,
    location: Vec<Location>,
}

impl Tables {
    fn mapping(&mut self, f: &Frame) -> u64 {
        let mk = (f.module.clone(), f.build_id.clone());
        if let Some(&id) = self.mappings.get(&mk) {
            return id;
        }
        let id = self.mapping.len() as u64 + 1;
        self.mapping.push(Mapping {
            id,
            memory_start: 0,
            memory_limit: u64::MAX,
            file_offset: 0,
            filename: self.st.id(&mk.0),
            build_id: mk.1.as_deref().map_or(0, |b| self.st.id(b)),
            has_functions: false,
        });
        self.mappings.insert(mk, id);
        id
    }

    fn function(&mut self, name: &Arc<str>) -> u64 {
        if let Some(&id) = self.functions.get(name) {
            return id;
        }
        let id = self.function.len() as u64 + 1;
        let n = self.st.id(name);
        self.function.push(Function {
            id,
            name: n,
            system_name: n,
        });
        self.functions.insert(name.clone(), id);
        id
    }

    fn location(&mut self, f: &Frame) -> u64 {
        if let Some(&id) = self.locations.get(f) {
            return id;
        }
        let mapping_id = self.mapping(f);
        let line = match &f.function {
            Some(name) => {
                if let Some(m) = self.mapping.get_mut(mapping_id as usize - 1) {
                    m.has_functions = true;
                }
                vec![Line {
                    function_id: self.function(name),
                }]
            }
            None => Vec::new(),
        };
        let id = self.location.len() as u64 + 1;
        self.location.push(Location {
            id,
            mapping_id,
            address: f.address,
            line,
        });
        self.locations.insert(f.clone(), id);
        id
    }
}

/// The profile message of `samples`.
pub fn profile(meta: &Meta, samples: &[ProfileSample]) -> Profile {
    let mut t = Tables::default();
    t.st.id("");
    let value_type = |t: &mut Tables| ValueType {
        r#type: t.st.id(&meta.event),
        unit: t.st.id(unit(&meta.event)),
    };
    let sample_type = vec![
        ValueType {
            r#type: t.st.id("samples"),
            unit: t.st.id("count"),
        },
        value_type(&mut t),
    ];
    let (key_label, pid_label) = (t.st.id(meta.label), t.st.id("pid"));
    let sample = samples
        .iter()
        .map(|s| Sample {
            location_id: s.frames.iter().map(|f| t.location(f)).collect(),
            value: vec![i64_of(s.samples), i64_of(s.events)],
            label: vec![
                Label {
                    key: key_label,
                    str: t.st.id(&s.name),
                    num: 0,
                },
                Label {
                    key: pid_label,
                    str: 0,
                    num: i64::from(s.pid),
                },
            ],
        })
        .collect();
    let comment = meta.comments.iter().map(|c| t.st.id(c)).collect();
    let period_type = Some(value_type(&mut t));
    let default_sample_type = t.st.id(&meta.event);
    let time_nanos = meta
        .start
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    Profile {
        sample_type,
        sample,
        mapping: t.mapping,
        location: t.location,
        function: t.function,
        string_table: t.st.table,
        time_nanos,
        duration_nanos: i64::try_from(meta.duration.as_nanos()).unwrap_or(i64::MAX),
        period_type,
        comment,
        default_sample_type,
    }
}

/// The profile of `samples`, encoded and gzipped (`.pb.gz`).
pub fn encode(meta: &Meta, samples: &[ProfileSample]) -> std::io::Result<Vec<u8>> {
    let bytes = prost::Message::encode_to_vec(&profile(meta, samples));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(f: Option<&str>, module: &str, address: u64) -> Frame {
        Frame {
            function: f.map(Arc::from),
            module: module.into(),
            build_id: Some("abcd".into()),
            address,
        }
    }

    #[test]
    fn a_profile_round_trips_through_prost() {
        let samples = vec![
            ProfileSample {
                frames: vec![
                    frame(Some("hot"), "/w", 0x1100),
                    frame(Some("main"), "/w", 0x1200),
                ],
                name: "pod-1".into(),
                pid: 7,
                samples: 90,
                events: 900,
            },
            ProfileSample {
                frames: vec![
                    frame(None, "/stripped", 0x42),
                    frame(Some("main"), "/w", 0x1200),
                ],
                name: "pod-1".into(),
                pid: 7,
                samples: 10,
                events: 100,
            },
        ];
        let meta = Meta {
            event: "cpu-clock".into(),
            label: "pod_uid",
            start: SystemTime::UNIX_EPOCH,
            duration: Duration::from_secs(1),
            comments: vec!["note".into()],
        };
        let gz = encode(&meta, &samples).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let p: Profile = prost::Message::decode(&raw[..]).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        assert_eq!(p.sample.len(), 2);
        assert_eq!(p.location.len(), 3, "the shared frame is one location");
        assert_eq!(p.function.len(), 2);
        assert_eq!(p.mapping.len(), 2);
        let unsym = p.location.iter().find(|l| l.line.is_empty()).unwrap();
        assert_eq!(unsym.address, 0x42);
        let m = &p.mapping[unsym.mapping_id as usize - 1];
        assert_eq!(
            (s(m.filename), s(m.build_id), m.has_functions),
            ("/stripped", "abcd", false)
        );
        let first = &p.sample[0];
        assert_eq!(first.value, vec![90, 900]);
        assert_eq!(s(first.label[0].key), "pod_uid");
        assert_eq!(s(first.label[0].str), "pod-1");
        assert_eq!((s(first.label[1].key), first.label[1].num), ("pid", 7));
        let top = &p.location[first.location_id[0] as usize - 1];
        assert_eq!(
            s(p.function[top.line[0].function_id as usize - 1].name),
            "hot"
        );
        assert_eq!(s(p.sample_type[1].unit), "nanoseconds");
        assert_eq!(s(p.comment[0]), "note");
    }
}
