//! How `top` prints: a refreshing terminal table (the screen cleared at
//! each refresh when standard output is a terminal), or a JSON object per
//! refresh; and the summary. With `--call-graph`, the hottest stacks
//! under each refresh's table.

use super::ViewError;
use crate::engine::sample::{By, CpuHealth, Entry, ProfileSample, Table};
use crate::terminal::escape;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// One entry of the JSON contract.
#[derive(Debug, Serialize)]
pub(crate) struct JsonEntry<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    samples: u64,
    share: f64,
    events: u64,
}

/// One refresh (or the summary) in the JSON contract.
#[derive(Debug, Serialize)]
pub(crate) struct JsonTable<'a> {
    event: &'a str,
    samples: u64,
    lost: u64,
    throttled: u64,
    entries: Vec<JsonEntry<'a>>,
}

/// The table as the contract's object (every entry).
pub(crate) fn json<'a>(event: &'a str, t: &'a Table, by: By) -> JsonTable<'a> {
    let pid = matches!(by, By::Process | By::Thread);
    JsonTable {
        event,
        samples: t.samples,
        lost: t.lost,
        throttled: t.throttled,
        entries: t
            .entries
            .iter()
            .map(|e| JsonEntry {
                name: &e.name,
                pid: e.pid.filter(|_| pid),
                samples: e.sums.samples,
                share: share(e, t),
                events: e.sums.events,
            })
            .collect(),
    }
}

/// One CPU's ring health in the JSON summary (the text summary's
/// `CPUn: lost ...` lines, for every CPU).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct JsonCpu {
    cpu: u32,
    lost: u64,
    lost_records: u64,
    throttled: u64,
    errors: u64,
}

/// The JSON summary: the table over the whole run and each CPU's ring
/// health.
#[derive(Debug, Serialize)]
pub(crate) struct JsonSummary<'a> {
    #[serde(flatten)]
    table: JsonTable<'a>,
    per_cpu: Vec<JsonCpu>,
}

/// The summary as the contract's object.
pub(crate) fn json_summary<'a>(
    event: &'a str,
    t: &'a Table,
    by: By,
    health: &[(u32, CpuHealth)],
) -> JsonSummary<'a> {
    JsonSummary {
        table: json(event, t, by),
        per_cpu: health
            .iter()
            .map(|(c, h)| JsonCpu {
                cpu: *c,
                lost: h.lost,
                lost_records: h.lost_records,
                throttled: h.throttled,
                errors: h.errors,
            })
            .collect(),
    }
}

fn share(e: &Entry, t: &Table) -> f64 {
    if t.samples == 0 {
        0.0
    } else {
        e.sums.samples as f64 / t.samples as f64
    }
}

/// What the table shows, and how.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    /// `--json`: an object per refresh.
    pub json: bool,
    /// `--by`: what an entry is.
    pub by: By,
    /// `-n`: rows of the table.
    pub rows: usize,
}

/// How often the event is sampled.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rate {
    /// `-F`: samples per second per CPU.
    Freq(u64),
    /// `-c`: a sample every this many events.
    Period(u64),
}

/// The printer.
#[derive(Debug)]
pub(crate) struct View {
    json: bool,
    by: By,
    rows: usize,
    event: String,
    title: String,
    clear: bool,
}

impl View {
    /// A view of `event` sampled at `rate` on `cpus` CPUs.
    pub(crate) fn new(layout: Layout, event: &str, rate: Rate, cpus: usize) -> View {
        let rate = match rate {
            Rate::Freq(hz) => format!("{hz} Hz"),
            Rate::Period(p) => format!("every {p} events"),
        };
        View {
            json: layout.json,
            by: layout.by,
            rows: layout.rows,
            event: event.to_string(),
            title: format!(
                "perf-exporter top: {} at {rate} on {cpus} CPUs, by {}",
                escape(event),
                layout.by.as_str()
            ),
            clear: !layout.json && std::io::stdout().is_terminal(),
        }
    }

    fn line(&self, out: &mut impl Write, t: &Table) -> Result<(), ViewError> {
        let line = serde_json::to_string(&json(&self.event, t, self.by))?;
        writeln!(out, "{line}")?;
        Ok(())
    }

    /// One refresh: the interval's table.
    pub(crate) fn refresh(
        &self,
        out: &mut impl Write,
        t: &Table,
        note: &Option<String>,
        at: Duration,
    ) -> Result<(), ViewError> {
        if self.json {
            self.line(out, t)?;
            return Ok(out.flush()?);
        }
        if self.clear {
            write!(out, "\x1b[H\x1b[2J")?;
        }
        writeln!(out, "{}  [{:.1}s]", self.title, at.as_secs_f64())?;
        if let Some(n) = note {
            writeln!(out, "note: {}", escape(n))?;
        }
        self.table(out, t)?;
        Ok(out.flush()?)
    }

    fn table(&self, out: &mut impl Write, t: &Table) -> Result<(), ViewError> {
        writeln!(
            out,
            "samples {}  lost {}  throttled {}",
            t.samples, t.lost, t.throttled
        )?;
        let pid = matches!(self.by, By::Process | By::Thread);
        let ipc = t.entries.iter().any(|e| e.sums.members.len() >= 2);
        let mut head = format!("{:>7} {:>9} {:>14}", "SHARE", "SAMPLES", "EVENTS");
        if ipc {
            head.push_str(&format!(" {:>6}", "IPC"));
        }
        if pid {
            head.push_str(&format!(
                " {:>8}",
                if self.by == By::Thread { "TID" } else { "PID" }
            ));
        }
        head.push_str(&format!("  {}", name_header(self.by)));
        writeln!(out, "{head}")?;
        for e in t.entries.iter().take(self.rows) {
            let mut l = format!(
                "{:>6.1}% {:>9} {:>14}",
                share(e, t) * 100.0,
                e.sums.samples,
                e.sums.events
            );
            if ipc {
                let m = &e.sums.members;
                let v = match (m.first(), m.get(1)) {
                    (Some(&c), Some(&i)) if c > 0 => format!("{:.2}", i as f64 / c as f64),
                    _ => "-".into(),
                };
                l.push_str(&format!(" {v:>6}"));
            }
            if let (true, Some(p)) = (pid, e.pid) {
                l.push_str(&format!(" {p:>8}"));
            }
            l.push_str(&format!("  {}", escape(&e.name)));
            writeln!(out, "{l}")?;
        }
        if t.entries.len() > self.rows {
            writeln!(out, "  ... {} more", t.entries.len() - self.rows)?;
        }
        Ok(())
    }

    /// `--call-graph`: the hottest stacks since the start (text only),
    /// each's share of the `total` samples, innermost frame first; a frame without a symbol is its module's
    /// file name and offset.
    pub(crate) fn stacks(
        &self,
        out: &mut impl Write,
        stacks: &[ProfileSample],
        total: u64,
    ) -> Result<(), ViewError> {
        if self.json {
            return Ok(());
        }
        writeln!(out, "hottest stacks (since the start, innermost first):")?;
        for s in stacks.iter().take(STACK_ROWS) {
            let frames: Vec<String> = s
                .frames
                .iter()
                .take(STACK_FRAMES)
                .map(|f| match &f.function {
                    Some(n) => escape(n).into_owned(),
                    None => {
                        let m = f.module.rsplit('/').next().unwrap_or(&f.module);
                        format!("{}+{:#x}", escape(m), f.address)
                    }
                })
                .collect();
            let more = if s.frames.len() > STACK_FRAMES {
                " <- ..."
            } else {
                ""
            };
            writeln!(
                out,
                "{:>6.1}%  {}: {}{more}",
                s.samples as f64 * 100.0 / total.max(1) as f64,
                escape(&s.name),
                frames.join(" <- ")
            )?;
        }
        Ok(out.flush()?)
    }

    /// The summary over the whole run, with ring health per CPU.
    pub(crate) fn summary(
        &self,
        out: &mut impl Write,
        t: &Table,
        over: Duration,
        health: &[(u32, CpuHealth)],
    ) -> Result<(), ViewError> {
        if self.json {
            #[derive(Serialize)]
            struct Summary<'a> {
                summary: JsonSummary<'a>,
            }
            let v = Summary {
                summary: json_summary(&self.event, t, self.by, health),
            };
            let line = serde_json::to_string(&v)?;
            writeln!(out, "{line}")?;
            return Ok(out.flush()?);
        }
        writeln!(
            out,
            "\nSummary over {:.1} s: {}",
            over.as_secs_f64(),
            self.title
        )?;
        self.table(out, t)?;
        let bad: Vec<String> = health
            .iter()
            .filter(|(_, h)| h.lost + h.throttled + h.errors > 0)
            .map(|(c, h)| {
                format!(
                    "CPU{c}: lost {} ({} LOST records), throttled {}, errors {}",
                    h.lost, h.lost_records, h.throttled, h.errors
                )
            })
            .collect();
        for b in bad {
            writeln!(out, "{b}")?;
        }
        Ok(out.flush()?)
    }
}

/// Stacks shown by `--call-graph`.
pub(crate) const STACK_ROWS: usize = 5;
/// Frames shown of each.
const STACK_FRAMES: usize = 8;

fn name_header(by: By) -> &'static str {
    match by {
        By::Process | By::Thread => "COMMAND",
        By::Cgroup => "CGROUP",
        By::Pod => "POD",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24 item 15: the JSON summary lacked the text summary's
    /// per-CPU lost/throttle lines.
    #[test]
    fn the_json_summary_has_each_cpus_ring_health() {
        let t = Table {
            samples: 10,
            lost: 7,
            throttled: 1,
            entries: Vec::new(),
        };
        let health = [
            (0, CpuHealth::default()),
            (
                1,
                CpuHealth {
                    lost: 7,
                    lost_records: 2,
                    throttled: 1,
                    errors: 0,
                },
            ),
        ];
        let v =
            serde_json::to_string(&json_summary("cycles", &t, By::Process, &health)).expect("json");
        assert_eq!(
            v,
            r#"{"event":"cycles","samples":10,"lost":7,"throttled":1,"entries":[],"per_cpu":[{"cpu":0,"lost":0,"lost_records":0,"throttled":0,"errors":0},{"cpu":1,"lost":7,"lost_records":2,"throttled":1,"errors":0}]}"#
        );
    }
}
