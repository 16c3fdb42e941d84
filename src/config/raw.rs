//! The configuration as serde reads it: strings, before any spec is
//! parsed. [`super::Config::parse`] turns it into the validated types.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    /// `None` for a bare `sets:` (refused with a reason, not a type error).
    pub sets: Spanned<Option<Vec<RawSet>>>,
    /// The per-workload section, if any.
    #[serde(default)]
    pub cgroups: Option<Spanned<super::cgroups::RawCgroups>>,
    /// Sampled attribution, if any.
    #[serde(default)]
    pub sampling: Option<super::sampling::RawSampling>,
    /// Derived metrics, if any.
    #[serde(default)]
    pub derived: Option<Vec<super::derived::RawDerived>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSet {
    pub name: Spanned<String>,
    /// `per: cpu | core | socket | node` (default `cpu`).
    #[serde(default)]
    pub per: Option<Spanned<super::Per>>,
    /// The boolean `per` replaced: refused with the replacement named.
    #[serde(default)]
    pub per_cpu: Option<Spanned<bool>>,
    pub events: Vec<RawMetric>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetric {
    pub metric: Spanned<String>,
    #[serde(default)]
    pub help: Option<String>,
    #[serde(default)]
    pub gauge: bool,
    pub event: Spanned<RawEventField>,
}

/// `event:` as written: one alternative or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawEventField {
    One(RawAlternative),
    Chain(Vec<RawAlternative>),
}

impl RawEventField {
    pub(super) fn into_vec(self) -> Vec<RawAlternative> {
        match self {
            RawEventField::One(a) => vec![a],
            RawEventField::Chain(v) => v,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawAlternative {
    Spec(String),
    Detailed(RawDetailed),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDetailed {
    #[serde(default)]
    pub event: Option<String>,
    #[serde(default)]
    pub sum_of: Option<Vec<String>>,
    #[serde(default)]
    pub scale: Option<f64>,
    #[serde(default)]
    pub unit: Option<String>,
    #[serde(default)]
    pub requires_format: Option<String>,
    #[serde(default)]
    pub requires_cpu: Option<String>,
}
