//! Reading and parsing a config file: the YAML read (bounded), parsed
//! into the raw types and converted ([`super::convert`]), with the file,
//! line and column of whatever is wrong, and the YAML library's messages
//! rewritten for a user. The only I/O of the config stage is here.

use super::convert::convert_set;
use super::raw::RawConfig;
use super::{cgroups, derived, sampling, Config, ConfigError, Per, DEFAULT_CONFIG};
use crate::bounded::{read_string, CONFIG_BYTES};
use serde_saphyr::Location;
use std::collections::BTreeMap;
use std::path::Path;

/// The name the embedded default is parsed under.
const DEFAULT_NAME: &str = "<default>";

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        // Bounded: a FIFO or a device is refused at once instead of
        // blocking start-up or a reload, and so is a huge file.
        let text = read_string(path, CONFIG_BYTES).map_err(|source| ConfigError::Io {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// The embedded default.
    pub fn default_config() -> Self {
        // The embedded default is checked by a unit test; failing here
        // would be a build defect, so fall back to an empty config rather
        // than panic.
        Self::parse(DEFAULT_CONFIG, DEFAULT_NAME).unwrap_or(Config {
            sets: Vec::new(),
            cgroups: None,
            sampling: None,
            derived: derived::DerivedTable::default(),
        })
    }

    /// Parses and validates YAML text; `file` names it in errors. Every
    /// event spec is parsed here, once.
    pub fn parse(text: &str, file: &str) -> Result<Self, ConfigError> {
        let invalid = |loc: &Location, msg: String| ConfigError::Invalid {
            file: file.into(),
            line: loc.line(),
            column: loc.column(),
            msg,
        };
        if is_empty_document(text) {
            return Err(ConfigError::Invalid {
                file: file.into(),
                line: 0,
                column: 0,
                msg: EMPTY.into(),
            });
        }
        let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            // The crate renders a snippet; keep its first line as the
            // message and our own location prefix.
            let full = e.to_string();
            let first = full.lines().next().unwrap_or("invalid YAML");
            // The snippet's first line repeats the place we already name
            // (`error: line 3 column 5: ...`): keep only the message.
            let msg = first
                .strip_prefix("error: line ")
                .and_then(|r| r.split_once(": "))
                .map_or(first, |(_, m)| m)
                .to_string();
            ConfigError::Invalid {
                file: file.into(),
                line,
                column,
                msg: hint_for(&msg),
            }
        })?;
        let sets = match raw.sets.value {
            Some(v) if !v.is_empty() => v,
            _ => return Err(invalid(&raw.sets.referenced, EMPTY.into())),
        };
        let mut out = Vec::new();
        let mut set_names = BTreeMap::new();
        let mut families: BTreeMap<String, String> = BTreeMap::new();
        for s in sets {
            out.push(convert_set(s, &mut set_names, &mut families, &invalid)?);
        }
        let cgroups = match raw.cgroups {
            Some(c) => {
                let names: Vec<&str> = out.iter().map(|s| s.name.value.as_str()).collect();
                Some(cgroups::convert(c.value, &c.referenced, &names, &invalid)?)
            }
            None => None,
        };
        let sampling = match raw.sampling {
            Some(s) => Some(sampling::convert(s, &invalid)?),
            None => None,
        };
        // Without a `derived:` section, the default config's entries
        // whose inputs this config counts (by the default's metric
        // names); the others are left out, and said so (`check`, the
        // log). `derived: []` has none.
        let derived = match raw.derived {
            Some(d) => derived::convert(d, &out, file)?,
            None if file == DEFAULT_NAME => derived::DerivedTable::default(),
            None => {
                let counted = out
                    .iter()
                    .flat_map(|s| &s.events)
                    .map(|m| m.metric.value.as_str())
                    .collect();
                Self::default_config().derived.for_metrics(&counted)
            }
        };
        Ok(Config {
            sets: out,
            cgroups,
            sampling,
            derived,
        })
    }

    /// Sums every set over the node, as if each had `per: node`
    /// (`--config.aggregate-cpus`).
    pub fn aggregate_cpus(&mut self) {
        for s in &mut self.sets {
            s.per = Per::Node;
        }
    }
}

const EMPTY: &str = "the configuration has no sets: it needs `sets:` with at least one set of metrics (an empty configuration would count nothing)";

/// Whether the text is an empty YAML document (nothing, comments only,
/// or a bare null such as `~`).
fn is_empty_document(text: &str) -> bool {
    let content: Vec<&str> = text
        .lines()
        .map(|l| l.split_once(" #").map_or(l, |(a, _)| a).trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#') && *l != "---" && *l != "...")
        .collect();
    matches!(content.as_slice(), [] | ["~" | "null" | "Null" | "NULL"])
}

/// Rewrites the YAML library's messages for a user: no repeated location
/// (the prefix `file:line:column` has it), no advice about the library's
/// own options.
fn hint_for(msg: &str) -> String {
    let msg = strip_location(msg);
    if msg.contains("did not match any variant") {
        format!("{msg}: `event` must be a spec string, a list of alternatives, or {{event: SPEC, scale: N, unit: U}} / {{sum_of: [SPEC, ...], scale: N, unit: U}}")
    } else if let Some(rest) = msg.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(", set ").next().unwrap_or(rest).trim();
        format!("the key `{key}` is given twice in the same mapping: keep one")
    } else if let Some(head) = msg.strip_suffix(" rejected by the configured policy") {
        format!("{head} is not allowed here: give a finite number")
    } else if msg.contains("from_str_multiple") || msg.contains("multiple YAML documents") {
        "the file holds several YAML documents (separated by `---`): a configuration is one document".into()
    } else if let Some((head, _)) = msg
        .split_once(", set ")
        .or_else(|| msg.split_once("; use "))
    {
        head.to_string()
    } else {
        msg.to_string()
    }
}

/// Drops a leading `error: line N column M: `.
fn strip_location(msg: &str) -> &str {
    let m = msg.strip_prefix("error: ").unwrap_or(msg);
    match m.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((loc, rest)) if loc.split_whitespace().count() == 3 => rest,
        _ => m,
    }
}
