//! How `stat` prints: a block per interval (each counter's increase with
//! perf's `(xx.xx%)` where it was multiplexed, the derived values, the
//! counters that never ran as `<not counted>`), then the summary over the
//! whole run, with each cause of what is `<not available>` said once; or,
//! with `--json`, each frame on a line of its own, then
//! `{"summary": frame}`.

use super::ViewError;
use crate::export::live::Frame;
use crate::problem::{group, Problem};
use crate::terminal::escape;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// The printer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StatView {
    /// `--json`: a frame per line.
    pub json: bool,
    /// `--per-cpu`: a line per CPU.
    pub per_cpu: bool,
}

impl StatView {
    /// The column header (none in JSON).
    pub(crate) fn header(&self, out: &mut impl Write) -> Result<(), ViewError> {
        if self.json {
            return Ok(());
        }
        let cpu = if self.per_cpu { " cpu  " } else { "" };
        writeln!(out, "#          time{cpu}                counts  name")?;
        Ok(())
    }

    /// One interval's frame, `t` after the start.
    pub(crate) fn interval(
        &self,
        out: &mut impl Write,
        t: Duration,
        f: &Frame,
    ) -> Result<(), ViewError> {
        if self.json {
            writeln!(out, "{}", f.to_json())?;
        } else {
            let t = t.as_secs_f64();
            block(out, &format!("{t:>15.6}"), f, self.per_cpu, false)?;
        }
        out.flush()?;
        Ok(())
    }

    /// The summary over the whole run, with why what is not available is
    /// not (`causes`, by metric).
    pub(crate) fn summary(
        &self,
        out: &mut impl Write,
        f: &Frame,
        causes: &BTreeMap<String, Problem>,
    ) -> Result<(), ViewError> {
        if self.json {
            writeln!(out, "{{\"summary\":{}}}", f.to_json())?;
        } else {
            writeln!(out, "\n Summary over {:.6} s:\n", f.interval_seconds)?;
            block(out, "", f, self.per_cpu, true)?;
            why_not_available(out, f, causes)?;
        }
        out.flush()?;
        Ok(())
    }
}

/// A count: whole numbers as such, others with six decimals.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.6}")
    }
}

/// One interval's (or the summary's) lines, each starting with `lead`.
fn block(
    out: &mut impl Write,
    lead: &str,
    f: &Frame,
    per_cpu: bool,
    reasons: bool,
) -> std::io::Result<()> {
    if let (true, Some(c)) = (per_cpu, &f.per_cpu) {
        for (i, cpu) in c.cpus.iter().enumerate() {
            for (k, col) in c.counts() {
                if let Some(v) = col[i] {
                    writeln!(out, "{lead} CPU{cpu:<4}{:>20}  {}", num(v), escape(k))?;
                }
            }
            for k in c.derived_names() {
                let v = ratio(c.derived(k, *cpu));
                writeln!(out, "{lead} CPU{cpu:<4}{v:>20}  {}", escape(k))?;
            }
        }
    } else {
        for (k, v) in &f.counts {
            writeln!(out, "{lead}{:>22}  {}{}", num(*v), escape(k), share(f, k))?;
        }
    }
    let pad = if per_cpu { "      " } else { "" };
    for (k, v) in &f.derived {
        writeln!(out, "{lead}{pad}{:>22}  {}", ratio(*v), escape(k))?;
    }
    // What is not available is the same in every interval: only the
    // summary names it, with each cause said once. A counter that opened
    // and never ran is perf's `<not counted>`, in every interval.
    for k in f.unavailable.keys() {
        let not_counted = f.not_counted.contains(k);
        let implausible = f.implausible.contains(k);
        if reasons || not_counted || implausible {
            let what = if implausible {
                "<implausible>"
            } else if not_counted {
                "<not counted>"
            } else {
                "<not available>"
            };
            writeln!(out, "{lead}{pad}{what:>22}  {}", escape(k))?;
        }
    }
    Ok(())
}

/// Why the summary's `<not available>` rows are not available: a `#` line
/// per cause, naming the rows it applies to; a row without a known cause
/// (not in the config, ...) gets its own line.
fn why_not_available(
    out: &mut impl Write,
    f: &Frame,
    causes: &BTreeMap<String, Problem>,
) -> std::io::Result<()> {
    if f.unavailable.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    let known = f
        .unavailable
        .keys()
        .filter_map(|k| Some((k.as_str(), causes.get(k)?)));
    for g in group(known) {
        writeln!(out, "# {}", g.explain("of these"))?;
    }
    for (k, why) in f
        .unavailable
        .iter()
        .filter(|(k, _)| !causes.contains_key(*k))
    {
        writeln!(out, "# {k}: {why}")?;
    }
    Ok(())
}

/// perf's `  (xx.xx%)` after a multiplexed counter: the share of the
/// window it ran on the PMU; nothing for one that counted all the time.
fn share(f: &Frame, metric: &str) -> String {
    f.multiplexed
        .get(metric)
        .map_or_else(String::new, |r| format!("  ({:.2}%)", r * 100.0))
}

/// A derived value; `-` where its denominator did not move.
fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::CounterState;

    /// perf's conventions: a multiplexed count with its `(xx.xx%)`, a
    /// counter that never ran as `<not counted>` (never a number), one not
    /// counted on this host as `<not available>`.
    #[test]
    fn multiplexed_and_never_ran_counters_are_shown_as_perf_does() {
        let mut f = Frame {
            interval_seconds: 1.0,
            ..Frame::default()
        };
        f.counts.insert("perf_cpu_cycles_total".into(), 2e9);
        f.counts.insert("perf_instructions_total".into(), 3e9);
        f.multiplexed.insert("perf_cpu_cycles_total".into(), 0.75);
        let why = CounterState::NeverRan.explain().to_string();
        f.unavailable.insert("perf_branches_total".into(), why);
        f.not_counted.insert("perf_branches_total".into());
        f.unavailable
            .insert("perf_l1i_loads_total".into(), "not supported".into());
        // The summary (reasons: the causes follow in `#` lines) has every
        // row; an interval has the `<not counted>` one, not the one this
        // host cannot count at all.
        let mut out = Vec::new();
        block(&mut out, "", &f, false, true).unwrap();
        let expected = "            2000000000  perf_cpu_cycles_total  (75.00%)\n\
             \x20           3000000000  perf_instructions_total\n\
             \x20        <not counted>  perf_branches_total\n\
             \x20      <not available>  perf_l1i_loads_total\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        let mut out = Vec::new();
        block(&mut out, "", &f, false, false).unwrap();
        let expected = "            2000000000  perf_cpu_cycles_total  (75.00%)\n\
             \x20           3000000000  perf_instructions_total\n\
             \x20        <not counted>  perf_branches_total\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        // An implausible count is never shown as a number, in any
        // interval.
        f.counts.remove("perf_instructions_total");
        let why = CounterState::Implausible.explain().to_string();
        f.unavailable.insert("perf_instructions_total".into(), why);
        f.implausible.insert("perf_instructions_total".into());
        let mut out = Vec::new();
        block(&mut out, "", &f, false, false).unwrap();
        let expected = "            2000000000  perf_cpu_cycles_total  (75.00%)\n\
             \x20        <not counted>  perf_branches_total\n\
             \x20        <implausible>  perf_instructions_total\n";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }
}
