//! perf's event modifiers (`:u`, `:k`, `:G`, ...): which are supported,
//! what each excludes, and what the others would mean.

use super::terms::SyntaxError;
use crate::sys::abi;
use std::fmt;

/// perf's event modifiers that choose what is counted, as a set (their
/// order means nothing to perf, nor here). perf's rules, which
/// [`Modifiers::exclude`] follows (`tools/perf/util/parse-events.c`, and
/// `perf stat -vv` shows them): the first of `u`, `k`, `h` excludes every
/// privilege level, and each of them then includes its own; the first of
/// `G`, `H` excludes both sides, and each includes its own; `u` without
/// `G` or `H` also excludes the guest (perf on a host counts the host's
/// user space, not a guest's). So `u` is `exclude_kernel, exclude_hv,
/// exclude_guest`, `k` is `exclude_user, exclude_hv`, `uk` is
/// `exclude_hv, exclude_guest`, `G` is `exclude_host`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Modifiers {
    /// `u`: user-space counting.
    pub user: bool,
    /// `k`: kernel counting.
    pub kernel: bool,
    /// `h`: hypervisor counting.
    pub hv: bool,
    /// `G`: guest counting (in KVM guests).
    pub guest: bool,
    /// `H`: host counting (not in KVM guests).
    pub host: bool,
}

/// The supported modifiers, for messages.
pub const SUPPORTED_MODIFIERS: &str =
    "`u` (user), `k` (kernel), `h` (hypervisor), `G` (guest), `H` (host), and combinations such as `uk`";

/// perf's other modifiers: what each means, for a refusal that says so.
const OTHER_MODIFIERS: &[(char, &str)] = &[
    ('p', "precise skid level"),
    ('P', "maximum precise level"),
    ('I', "non-idle counting"),
    ('S', "read the group on samples"),
    ('D', "pinned to the PMU"),
    ('W', "weak group"),
    ('e', "exclusive use of the PMU"),
    ('b', "BPF aggregation"),
    ('R', "retire latency"),
];

impl Modifiers {
    /// None: count every privilege level, host and guest.
    pub fn is_empty(self) -> bool {
        self == Modifiers::default()
    }

    /// The `perf_event_attr` exclude bits perf sets for these modifiers.
    pub fn exclude(self) -> abi::Exclude {
        let levels = self.user || self.kernel || self.hv;
        let sides = self.guest || self.host;
        abi::Exclude {
            user: levels && !self.user,
            kernel: levels && !self.kernel,
            hv: levels && !self.hv,
            host: sides && !self.host,
            guest: if sides { !self.guest } else { self.user },
        }
    }

    /// Parses the modifiers `text` of the event spec `spec` (for
    /// messages); `column` is the 1-based column of `text`'s first
    /// character in the spec as written.
    pub fn parse(spec: &str, text: &str, column: usize) -> Result<Modifiers, SyntaxError> {
        let mut m = Modifiers::default();
        for (i, c) in text.char_indices() {
            match c {
                'u' => m.user = true,
                'k' => m.kernel = true,
                'h' => m.hv = true,
                'G' => m.guest = true,
                'H' => m.host = true,
                _ => {
                    let col = column + text[..i].chars().count();
                    let what = match OTHER_MODIFIERS.iter().find(|(o, _)| *o == c) {
                        Some((_, what)) => format!("perf's `{c}` ({what}) is not supported"),
                        None => format!("`{c}` is not an event modifier"),
                    };
                    return Err(SyntaxError(format!(
                        "`{spec}`, column {col}: {what}; the supported modifiers are {SUPPORTED_MODIFIERS}"
                    )));
                }
            }
        }
        Ok(m)
    }
}

impl fmt::Display for Modifiers {
    /// perf's letters, in the order `ukhGH` (empty for none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (on, c) in [
            (self.user, 'u'),
            (self.kernel, 'k'),
            (self.hv, 'h'),
            (self.guest, 'G'),
            (self.host, 'H'),
        ] {
            if on {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}
