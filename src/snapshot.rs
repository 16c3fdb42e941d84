//! The plain data model of one collection: families of samples with their
//! label sets rendered once. The exporters (Prometheus text, OpenMetrics,
//! OTLP, the live view) depend on this module, not on the engine.

use std::fmt;
use std::sync::Arc;

/// A metric family in a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The metric name, with `_total` for counters.
    pub name: Text,
    /// HELP text.
    pub help: Text,
    /// Counter or gauge.
    pub kind: Kind,
    /// Samples.
    pub samples: Vec<Sample>,
}

/// A family's name or help: the code's own text, or text made once
/// (from the config) and shared by reference count, so that the families
/// of every collection are made without copying either. Compared, ordered
/// and hashed as its text, whichever it is.
#[derive(Clone)]
pub enum Text {
    /// The code's own text.
    Static(&'static str),
    /// Text made at run time, shared.
    Shared(Arc<str>),
}

impl Text {
    /// The code's own text, not copied.
    pub const fn of(s: &'static str) -> Text {
        Text::Static(s)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            Text::Static(s) => s,
            Text::Shared(s) => s,
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for Text {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h);
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&'static str> for Text {
    fn from(s: &'static str) -> Text {
        Text::of(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::Shared(s.into())
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// A family as the code defines it: its name, type, help and the label
/// names its series may carry. The tables of these (the sampler's, the
/// per-cgroup counting's, the web server's) are what the encoder emits and
/// what the reference of metrics lists, so the two cannot drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyDef {
    /// The metric name, with `_total` for counters.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// HELP text; `{x}` stands for a value the encoder fills in
    /// ([`FamilyDef::family_with`]).
    pub help: &'static str,
    /// The label names its series may carry; `a|b` is one of them.
    pub labels: &'static [&'static str],
}

impl FamilyDef {
    /// The family with these samples.
    pub fn family(&self, samples: Vec<Sample>) -> Family {
        Family {
            name: self.name.into(),
            help: self.help.into(),
            kind: self.kind,
            samples,
        }
    }

    /// The family with these samples, each `{key}` of the help replaced
    /// by its value.
    pub fn family_with(&self, fill: &[(&str, &str)], samples: Vec<Sample>) -> Family {
        let mut help = self.help.to_string();
        for (k, v) in fill {
            help = help.replace(&format!("{{{k}}}"), v);
        }
        Family {
            name: self.name.into(),
            help: help.into(),
            kind: self.kind,
            samples,
        }
    }

    /// Every label name it may carry (`a|b` split).
    pub fn label_names(&self) -> impl Iterator<Item = &'static str> {
        self.labels.iter().flat_map(|l| l.split('|'))
    }
}

/// The Prometheus type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic.
    Counter,
    /// A reading.
    Gauge,
}

/// One sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label pairs, in order.
    pub labels: Labels,
    /// The value, in base units.
    pub value: f64,
    /// When this series' count began, in nanoseconds since the Unix epoch:
    /// the time its group was opened, or its last restart (a reopen that
    /// did not carry its total over, a reload that changed its encoding).
    /// 0 for gauges and wherever it is not known.
    pub start_unix_nanos: u64,
}

/// An immutable, shared label set with its exposition form rendered once:
/// `{cpu="3"}` (escaped as both the Prometheus text format and OpenMetrics
/// require), or the empty string for no labels. Cloning is a reference
/// count, so putting a series in a snapshot allocates nothing.
///
/// Derefs to the pairs: `labels.iter()`, `labels[0].1`, `labels.to_vec()`.
#[derive(Clone)]
pub struct Labels(Arc<LabelsInner>);

struct LabelsInner {
    pairs: Vec<(&'static str, String)>,
    rendered: String,
}

impl Labels {
    /// A label set, rendered.
    pub fn new(pairs: Vec<(&'static str, String)>) -> Self {
        let mut rendered = String::new();
        if !pairs.is_empty() {
            rendered.push('{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    rendered.push(',');
                }
                rendered.push_str(k);
                rendered.push_str("=\"");
                escape_label_value(v, &mut rendered);
                rendered.push('"');
            }
            rendered.push('}');
        }
        Labels(Arc::new(LabelsInner { pairs, rendered }))
    }

    /// `{k="v",...}` with values escaped (`\\`, `\"`, `\n`), or `""`.
    pub fn rendered(&self) -> &str {
        &self.0.rendered
    }

    /// Whether both are the very same label set (one allocation, shared
    /// by cloning): equal without comparing a string.
    pub fn same(&self, other: &Labels) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Escapes a label value for the text formats: backslash, double quote
/// and line feed.
pub fn escape_label_value(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

impl std::ops::Deref for Labels {
    type Target = [(&'static str, String)];
    fn deref(&self) -> &Self::Target {
        &self.0.pairs
    }
}

impl From<Vec<(&'static str, String)>> for Labels {
    fn from(pairs: Vec<(&'static str, String)>) -> Self {
        Labels::new(pairs)
    }
}

impl PartialEq for Labels {
    fn eq(&self, other: &Self) -> bool {
        self.0.pairs == other.0.pairs
    }
}

impl Eq for Labels {}

impl std::hash::Hash for Labels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.pairs.hash(state);
    }
}

impl PartialOrd for Labels {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Labels {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.pairs.cmp(&other.0.pairs)
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.pairs.iter()).finish()
    }
}

/// Everything one collection produced: plain data, no perf types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Families in a stable order.
    pub families: Vec<Family>,
}

/// The families at full resolution: `families` (as exported) with each
/// family that `detail` also has (the per-CPU families of metrics summed
/// before export, `Engine::detail_families`) replaced by the detail one,
/// in place. What the live view and `stat` read.
pub fn full_resolution(mut families: Vec<Family>, detail: Vec<Family>) -> Vec<Family> {
    for d in detail {
        if let Some(f) = families.iter_mut().find(|f| f.name == d.name) {
            *f = d;
        }
    }
    families
}

impl Snapshot {
    /// The number of samples over every family.
    pub fn series(&self) -> usize {
        self.families.iter().map(|f| f.samples.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Text;
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn hash(t: &Text) -> u64 {
        let mut h = DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    }

    /// The code's own text and the same text made at run time are one
    /// name: equal, ordered and hashed alike, and shown as the text.
    #[test]
    fn static_and_shared_text_are_the_same_name() {
        let a = Text::of("perf_cpu_cycles_total");
        let b = Text::from(String::from("perf_cpu_cycles_total"));
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        assert_eq!(a.cmp(&b), std::cmp::Ordering::Equal);
        let b_shared = Text::from(String::from("b"));
        assert_eq!(Text::of("a").cmp(&b_shared), std::cmp::Ordering::Less);
        assert_eq!(a, "perf_cpu_cycles_total");
        assert_eq!(b.to_string(), "perf_cpu_cycles_total");
        assert_eq!(format!("{b:?}"), "\"perf_cpu_cycles_total\"");
        // A clone of shared text is the same allocation.
        let c = b.clone();
        assert!(std::ptr::eq(b.as_str(), c.as_str()));
    }
}
