//! The landing page: the live view's cards (filled by `assets/live.js`
//! from `/api/v1/stream`), then the resolution table with each metric's
//! status and reason. The assets are embedded; no CDN, no build step.

use super::State;
use crate::bounded::lock;
use crate::config::derived::Source;
use crate::problem::{Class, Problem};
use crate::resolve::chain::{ResolvedMetric, Status};
use std::collections::BTreeMap;

/// HTML-escaped, after controls and bidi overrides (a cgroup named with
/// U+202E shows reversed) are written as visible escapes
/// ([`crate::terminal::escape`]).
fn esc(s: &str) -> String {
    crate::terminal::escape(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The reason cell of a metric on the landing page: every alternative's
/// problem for an unavailable metric (then what to do about the one that
/// matters), or the open failures of a counted one.
fn landing_reason<'a>(m: &ResolvedMetric, runtime: impl Iterator<Item = &'a Problem>) -> String {
    if m.status == Status::Unavailable {
        let what = m
            .problem()
            .map(|p| format!(". What to do: {}", p.what_to_do()))
            .unwrap_or_default();
        return format!("{}{what}", m.reason());
    }
    runtime.map(Problem::explain).collect::<Vec<_>>().join("; ")
}

/// Why each metric the page would show as unavailable is unavailable:
/// the live view's (and `stat`'s) reasons.
pub fn reasons(e: &crate::engine::Engine) -> crate::export::live::Reasons {
    let problems = e.problems();
    e.runtime()
        .iter()
        .zip(&e.resolution().metrics)
        .filter(|(rt, m)| m.status == Status::Unavailable || rt.open_fds == 0)
        .map(|(rt, m)| {
            let runtime = problems
                .iter()
                .filter(|(n, _)| n == &rt.metric)
                .map(|(_, p)| p);
            let why = landing_reason(m, runtime);
            let why = if why.is_empty() {
                "no counter could be opened".to_string()
            } else {
                why
            };
            (rt.metric.clone(), why)
        })
        .collect()
}

/// The cause of each metric and derived value that [`reasons`] gives a
/// reason for: the problem that explains it best (a derived value takes
/// its first unavailable input's), so that a cause shared by many is said
/// once ([`crate::problem::group`]) by `stat` and the page's cards.
pub fn causes(e: &crate::engine::Engine) -> BTreeMap<String, Problem> {
    let problems = e.problems();
    let mut out = BTreeMap::new();
    for (rt, m) in e.runtime().iter().zip(&e.resolution().metrics) {
        let p = if m.status == Status::Unavailable {
            m.problem()
        } else if rt.open_fds == 0 {
            problems
                .iter()
                .find(|(n, _)| n == &rt.metric)
                .map(|(_, p)| p)
        } else {
            None
        };
        if let Some(p) = p {
            out.insert(rt.metric.clone(), p.clone());
        }
    }
    // The config's derived values, in evaluation order (so a derived
    // input's cause is known before its readers').
    for d in &e.derived().metrics {
        let cause = d.formula.inputs.iter().find_map(|i| match &i.source {
            Source::Metric(m) | Source::Derived(m) => out.get(m),
            Source::Duration => None,
        });
        if let Some(p) = cause.cloned() {
            out.insert(d.name.clone(), p);
        }
    }
    out
}

pub(super) fn landing(state: &State) -> String {
    let e = lock(&state.engine);
    let mut rows = String::new();
    let problems = e.problems();
    for (rt, m) in e.runtime().iter().zip(&e.resolution().metrics) {
        let reason = landing_reason(
            m,
            problems
                .iter()
                .filter(|(n, _)| n == &rt.metric)
                .map(|(_, p)| p),
        );
        let status = match m.class() {
            Some(Class::NotOnPlatform) => "unavailable: not on this platform",
            Some(Class::Failed) => "unavailable: failed",
            None if rt.open_fds == 0 => "unavailable: open failed",
            None => m.status.as_str(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&rt.metric),
            esc(status),
            esc(rt.event.as_deref().unwrap_or("-")),
            esc(&rt.pmus.join(", ")),
            rt.open_fds,
            esc(&reason)
        ));
    }
    let cgroups = format!(
        "{}{}{}{}",
        states_section(&e.metric_states()),
        counters_section(e.counter_budgets()),
        self_test_section(e.self_test()),
        e.cgroups().map(cgroup_section).unwrap_or_default()
    );
    let causes = causes(&e);
    let cards = cards(e.derived(), &e.host_derived().resolution);
    drop(e);
    page(state, &rows, &cgroups, &causes, &cards)
}

/// The cards that are not available for one cause, said once: a note per
/// cause shared by two cards or more, naming the cards, and for each such
/// card the short reason it shows (the cause, without the alternatives
/// and what to do, which the note has). A card with a cause of its own
/// shows the frame's reason, as before.
fn card_notes(
    cards: &[Card],
    causes: &BTreeMap<String, Problem>,
) -> (BTreeMap<String, String>, String) {
    let unavailable = cards
        .iter()
        .filter_map(|c| Some((c.title(), causes.get(&c.name)?)));
    let mut short = BTreeMap::new();
    let mut notes = String::new();
    for (i, g) in crate::problem::group(unavailable).iter().enumerate() {
        if g.subjects.len() < 2 {
            continue;
        }
        for c in cards {
            if g.subjects.iter().any(|s| *s == c.title()) {
                short.insert(
                    c.name.clone(),
                    format!("{} (see below the cards)", g.problem.cause()),
                );
            }
        }
        notes.push_str(&format!(
            "<p class=\"note\" id=\"why-{i}\">{}</p>\n",
            esc(&g.explain("cards"))
        ));
    }
    if !notes.is_empty() {
        notes = format!(
            "<section class=\"card wide notes\" id=\"not-available\"><h2>Not available on this host</h2>\n{notes}</section>\n"
        );
    }
    (short, notes)
}

/// The per-workload section: the backend, then every matched cgroup,
/// counted or left out with the reason and what to do (the rows of
/// `check`'s listing).
/// Each metric's counter states at the last collection: its worst state
/// as perf says it (`<not counted>`, `(xx.xx%)`), how many of its
/// counters (CPUs, uncore instances) are in each state, and why with
/// what to do; nothing before the first collection judged any.
fn states_section(states: &[crate::problem::MetricStates]) -> String {
    use crate::problem::CounterState;
    if states.iter().all(|m| m.worst().is_none()) {
        return String::new();
    }
    let mut rows = String::new();
    for m in states {
        let counts: Vec<String> = CounterState::ALL
            .into_iter()
            .filter(|s| m.cpus[s.index()] > 0)
            .map(|s| format!("{} {}", s.as_str(), m.cpus[s.index()]))
            .collect();
        let why = m.why().map_or_else(String::new, |w| {
            format!("{}. What to do: {}", w.reason, w.what_to_do)
        });
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&m.metric),
            esc(m.state()),
            esc(&m.perf_text()),
            esc(&counts.join(", ")),
            esc(&why)
        ));
    }
    format!(
        "<a id=\"states\"></a><h2>Counter states</h2>\n<p>Each metric's worst counter state at the last collection (counting, multiplexed, stalled, never_ran, implausible), with how many of its counters (CPUs, uncore instances) are in each state.</p>\n\
<table><thead><tr><th>metric</th><th>state</th><th>as perf says it</th><th>counters per state</th><th>why / what to do</th></tr></thead><tbody>\n{rows}</tbody></table>\n"
    )
}

/// The core PMUs' counter budget: free of total, who holds the others,
/// what to do (nothing when no core PMU was measured).
fn counters_section(budgets: &[crate::engine::PmuCounters]) -> String {
    use crate::problem::Reason;
    if budgets.is_empty() {
        return String::new();
    }
    let mut rows = String::new();
    for b in budgets {
        let held: Vec<String> = b
            .held
            .iter()
            .map(|h| format!("<li>{}</li>", esc(&h.explain())))
            .collect();
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><ul>{}</ul></td></tr>\n",
            esc(&b.pmu),
            b.cpu,
            b.free.map_or_else(
                || "not measured".into(),
                |f| format!("{}{f}", if b.at_least { "≥ " } else { "" })
            ),
            b.total.map_or_else(|| "-".into(), |t| t.to_string()),
            held.join("")
        ));
    }
    format!(
        "<a id=\"counters\"></a><h2>Counter budget</h2>\n<p>General-purpose counters of each core PMU free for one group, measured at start-up and at most every 5 minutes; a set larger than them is split (and multiplexes).</p>\n\
<table><thead><tr><th>PMU</th><th>CPU</th><th>Free</th><th>Total</th><th>Who holds the others / what to do</th></tr></thead><tbody>\n{rows}</tbody></table>\n"
    )
}

/// The start-up self-test (`--collector.self-test`) per core PMU:
/// passed, failed (why and what to do) or skipped (nothing when it did
/// not run).
fn self_test_section(tests: &[crate::engine::selftest::SelfTest]) -> String {
    use crate::engine::selftest::Outcome;
    if tests.is_empty() {
        return String::new();
    }
    let mut rows = String::new();
    for t in tests {
        let todo = match &t.outcome {
            Outcome::Failed(p) => p.what_to_do(),
            _ => String::new(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&t.pmu),
            t.result(),
            esc(&t.summary()),
            esc(&todo)
        ));
    }
    format!(
        "<a id=\"self-test\"></a><h2>Self-test</h2>\n<p>At start-up, a calibrated loop on one CPU of each core PMU: its instructions and cycles must move by what it ran.</p>\n\
<table><thead><tr><th>PMU</th><th>result</th><th>what it found</th><th>what to do</th></tr></thead><tbody>\n{rows}</tbody></table>\n"
    )
}

fn cgroup_section(c: &crate::engine::cgroup::CgroupCounting) -> String {
    let rows = crate::report::cgroup_rows(c.selection());
    let counted = rows.iter().filter(|r| r.status == "counted").count();
    let mut out = format!(
        "<a id=\"cgroups\"></a><h2>Workloads (cgroups)</h2>\n<p>Backend: {}. {counted} counted, {} left out.</p>\n\
<table><tr><th>cgroup</th><th>status</th><th>kind</th><th>reason</th><th>what to do</th></tr>\n",
        esc(c.backend().name()),
        rows.len() - counted
    );
    for r in &rows {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(&r.cgroup),
            r.status,
            r.kind.unwrap_or("-"),
            esc(r.reason.as_deref().unwrap_or("")),
            esc(r.what_to_do.as_deref().unwrap_or(""))
        ));
    }
    out.push_str("</table>\n");
    if let Some(ch) = c.choice() {
        let todo = ch.why.what_to_do();
        out.push_str(&format!(
            "<p>Why {}: {}.{}</p>\n",
            ch.kind.name(),
            esc(&ch.why.to_string()),
            if todo.is_empty() {
                String::new()
            } else {
                format!(" What to do: {}.", esc(&todo))
            }
        ));
    }
    let issues = c.issues();
    if !issues.is_empty() {
        out.push_str("<h3>Not counted per cgroup</h3>\n<table><tr><th>code</th><th>what</th><th>what to do</th></tr>\n");
        for i in &issues {
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                i.code(),
                esc(&i.to_string()),
                esc(&i.what_to_do())
            ));
        }
        out.push_str("</table>\n");
    }
    out
}

/// A card of the page: one entry of the served derived table (the
/// config's own `derived:`, or the default's entries whose inputs it
/// counts), as the table gives it. Nothing is listed by the page: every
/// entry is a card, in the table's order, and a value the config does
/// not compute has none (it would wait for it forever).
#[derive(Debug, Clone, PartialEq)]
struct Card {
    /// The entry's name (the key of the frame's `derived`).
    name: String,
    /// Its `help:`.
    help: Option<String>,
    /// Its `unit:`, as written.
    unit: Option<String>,
    /// How `assets/live.js` shows the value: the frame's format of it
    /// ([`Format::of`]), or `mbps` for a DRAM rate given per socket.
    format: &'static str,
    /// Whether the frame gives it per socket (`per_socket`).
    per_socket: bool,
}

impl Card {
    /// The heading: the name, `_` as spaces (as the page's other
    /// headings of derived values).
    fn title(&self) -> String {
        self.name.replace('_', " ")
    }
}

/// The cards of `table`, but for the entries that are another platform's
/// (every alternative reads events of another vendor or core type, as
/// `atom_*` on a host without E-cores, or Zen 4's `retiring_fastpath` on
/// Intel): a card that could never show a value on this host. An entry
/// unavailable for a reason the user can act on (a failure, no hardware
/// PMU in a VM) keeps its card, which says why.
fn cards(
    table: &crate::config::derived::DerivedTable,
    host: &crate::resolve::derived::DerivedResolution,
) -> Vec<Card> {
    use crate::export::live::{is_per_socket, Format};
    let elsewhere = |name: &str| {
        host.get(name).is_some_and(|r| {
            r.class() == Some(Class::NotOnPlatform)
                && !r
                    .tried
                    .iter()
                    .any(|t| matches!(t.problem, Some(Problem::NeedsHardwarePmu { .. })))
        })
    };
    table
        .metrics
        .iter()
        .filter(|d| !elsewhere(&d.name))
        .map(|d| {
            let per_socket = is_per_socket(&d.name);
            let format = match Format::of(d) {
                _ if per_socket => "mbps",
                Format::Percent => "percent",
                Format::Rate => "rate",
                Format::Ratio => "ratio",
            };
            Card {
                name: d.name.clone(),
                help: d.help.clone(),
                unit: d.unit.clone(),
                format,
                per_socket,
            }
        })
        .collect()
}

/// The cards' HTML, in the order of `table`; `short`: the short reason of
/// a card whose cause is said once below them ([`card_notes`]).
fn cards_html(table: &[Card], short: &BTreeMap<String, String>) -> String {
    let mut cards = String::new();
    for (i, c) in table.iter().enumerate() {
        let why = short
            .get(&c.name)
            .map(|w| format!(" data-why=\"{}\"", esc(w)))
            .unwrap_or_default();
        let mut class = String::from("card");
        if i == 0 {
            class.push_str(" big");
        }
        let sockets = if c.per_socket {
            class.push_str(" dram");
            "<ul class=\"sockets\"></ul>"
        } else {
            ""
        };
        let hint = c
            .help
            .as_deref()
            .map(|h| format!("<p class=\"hint\">{}</p>", esc(h)))
            .unwrap_or_default();
        let unit = c
            .unit
            .as_deref()
            .map(|u| format!("<p class=\"hint unit\">unit: {}</p>", esc(u)))
            .unwrap_or_default();
        cards.push_str(&format!(
            "<section class=\"{class}\" data-derived=\"{}\" data-unit=\"{}\"{why}><h2>{}</h2>{hint}{unit}\
<div class=\"value\">…</div><svg class=\"spark\" viewBox=\"0 0 180 40\" preserveAspectRatio=\"none\"><polyline/></svg>{sockets}<p class=\"reason\"></p></section>\n",
            esc(&c.name),
            c.format,
            esc(&c.title()),
        ));
    }
    cards
}

/// The page, with a card for each entry of the derived table
/// ([`cards`]); the first is shown large.
fn page(
    state: &State,
    rows: &str,
    cgroups: &str,
    causes: &BTreeMap<String, Problem>,
    table: &[Card],
) -> String {
    let (short, notes) = card_notes(table, causes);
    let cards = cards_html(table, &short);
    let version = format!(
        "{}{}",
        crate::LONG_VERSION,
        if state.simulated {
            " (simulated PMU)"
        } else {
            ""
        }
    );
    // One pass over the template: a value never meets a later placeholder.
    let mut out = String::with_capacity(
        PAGE.len() + CSS.len() + JS.len() + rows.len() + cards.len() + notes.len() + cgroups.len(),
    );
    let mut rest = PAGE;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find("}}") else { break };
        match &rest[i + 2..i + j] {
            "css" => out.push_str(CSS),
            "js" => out.push_str(JS),
            "version" => out.push_str(&esc(&version)),
            "config" => out.push_str(&esc(&state.config_name)),
            // Relative links: the page works under a reverse proxy's prefix.
            "metrics" => out.push_str(&esc(state.telemetry_path.trim_start_matches('/'))),
            "cards" => out.push_str(&cards),
            "notes" => out.push_str(&notes),
            "rows" => out.push_str(rows),
            "cgroups" => out.push_str(cgroups),
            other => out.push_str(other),
        }
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

const PAGE: &str = include_str!("assets/live.html");
const CSS: &str = include_str!("assets/live.css");
const JS: &str = include_str!("assets/live.js");

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24 item 14: on a host without a PMU the same paragraph was on
    /// 7 of 10 cards. A cause shared by cards is one note naming them;
    /// each such card shows the cause only.
    #[test]
    fn cards_with_one_cause_share_one_note() {
        let hw = Problem::NeedsHardwarePmu {
            event: "cycles".into(),
        };
        let imc = Problem::NotOnPlatform {
            event: "uncore_imc_*/cas_count_read/".into(),
            detail: "no PMU matches `uncore_imc_*` on this host".into(),
        };
        let tracefs = Problem::TracefsMissing {
            event: "irq:irq_handler_entry".into(),
            given: None,
        };
        let mut causes = BTreeMap::new();
        for k in [
            "ipc",
            "l1d_miss_ratio",
            "l1i_miss_ratio",
            "llc_miss_ratio",
            "branch_miss_ratio",
        ] {
            causes.insert(k.to_string(), hw.clone());
        }
        for k in ["dram_read_bytes_per_second", "dram_write_bytes_per_second"] {
            causes.insert(k.to_string(), imc.clone());
        }
        causes.insert("interrupts_per_second".into(), tracefs);
        // Not a card: not on the page.
        causes.insert("perf_cpu_cycles_total".into(), hw.clone());
        let table = crate::config::Config::parse(crate::config::DEFAULT_CONFIG, "<default>")
            .unwrap()
            .derived;
        let cards = cards(&table, &Default::default());
        let (short, notes) = card_notes(&cards, &causes);
        let hw_short =
            "needs a hardware PMU, which this host does not have (see below the cards)".to_string();
        let imc_short = format!("{imc} (see below the cards)");
        let want: BTreeMap<String, String> = [
            ("ipc", hw_short.clone()),
            ("l1d_miss_ratio", hw_short.clone()),
            ("l1i_miss_ratio", hw_short.clone()),
            ("llc_miss_ratio", hw_short.clone()),
            ("branch_miss_ratio", hw_short),
            ("dram_read_bytes_per_second", imc_short.clone()),
            ("dram_write_bytes_per_second", imc_short),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(short, want);
        assert_eq!(
            notes,
            format!(
                "<section class=\"card wide notes\" id=\"not-available\"><h2>Not available on this host</h2>\n\
<p class=\"note\" id=\"why-0\">5 cards need a hardware PMU, which this host does not have (no core PMU in sysfs: no `cpu`, `cpu_core`/`cpu_atom` or `armv8_pmuv3_*`; a VM without a virtual PMU?): ipc, l1d miss ratio, l1i miss ratio, llc miss ratio, branch miss ratio; what to do: {}</p>\n\
<p class=\"note\" id=\"why-2\">dram read bytes per second, dram write bytes per second: no PMU matches `uncore_imc_*` on this host; what to do: {}</p>\n\
</section>\n",
                esc(&hw.what_to_do()),
                esc(&imc.what_to_do())
            )
        );
        assert_eq!(
            card_notes(&cards, &BTreeMap::new()),
            (BTreeMap::new(), String::new())
        );
    }

    /// Issue 30: the cards are the served derived table's entries, as it
    /// gives them (name, help, unit, format), in its order; nothing is
    /// listed by the page, so a config's own entry has its card, and the
    /// default's `cpus_utilized` says it is a node-wide sum.
    #[test]
    fn the_cards_are_the_derived_tables_entries() {
        let yaml = "sets:\n  - name: s\n    events:\n      - metric: perf_context_switches_total\n        event: context-switches\n      - metric: perf_cpu_clock_seconds_total\n        event: cpu-clock\nderived:\n  - name: switches_per_cpu_second\n    help: Context switches per second of <CPU> time.\n    unit: per second\n    expr: perf_context_switches_total / perf_cpu_clock_seconds_total\n  - name: busy_share\n    unit: ratio\n    expr: perf_cpu_clock_seconds_total / (2 * duration_time)\n";
        let table = crate::config::Config::parse(yaml, "t.yaml")
            .unwrap()
            .derived;
        let own = cards(&table, &Default::default());
        let html = cards_html(&own, &BTreeMap::new());
        assert_eq!(
            html,
            "<section class=\"card big\" data-derived=\"switches_per_cpu_second\" data-unit=\"rate\"><h2>switches per cpu second</h2>\
<p class=\"hint\">Context switches per second of &lt;CPU&gt; time.</p><p class=\"hint unit\">unit: per second</p>\
<div class=\"value\">…</div><svg class=\"spark\" viewBox=\"0 0 180 40\" preserveAspectRatio=\"none\"><polyline/></svg><p class=\"reason\"></p></section>\n\
<section class=\"card\" data-derived=\"busy_share\" data-unit=\"percent\"><h2>busy share</h2><p class=\"hint unit\">unit: ratio</p>\
<div class=\"value\">…</div><svg class=\"spark\" viewBox=\"0 0 180 40\" preserveAspectRatio=\"none\"><polyline/></svg><p class=\"reason\"></p></section>\n"
        );
        // The default: a card per entry, in the table's order; the DRAM
        // rates with their sockets.
        let default = crate::config::Config::parse(crate::config::DEFAULT_CONFIG, "<default>")
            .unwrap()
            .derived;
        let cards = cards(&default, &Default::default());
        let names: Vec<&str> = cards.iter().map(|c| c.name.as_str()).collect();
        let want: Vec<&str> = default.metrics.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, want);
        let dram = cards
            .iter()
            .find(|c| c.name == "dram_read_bytes_per_second")
            .unwrap();
        assert!(dram.per_socket && dram.format == "mbps", "{dram:?}");
        let cpus = cards.iter().find(|c| c.name == "cpus_utilized").unwrap();
        assert_eq!(cpus.format, "ratio");
        assert!(
            cpus.help
                .as_deref()
                .unwrap()
                .starts_with("Node-wide sum over CPUs, not a per-CPU value"),
            "{cpus:?}"
        );
    }

    /// Issue 28 item 18: a cgroup named with U+202E (or a control) was on
    /// the page as is, showing text reversed; it is a visible escape.
    /// The budget shows free of total and each holder with what to do,
    /// escaped.
    #[test]
    fn the_counter_budget_says_who_holds_the_rest() {
        assert_eq!(counters_section(&[]), "");
        let b = crate::engine::PmuCounters {
            pmu: "cpu<x>".into(),
            cpu: 0,
            free: Some(3),
            at_least: false,
            total: Some(4),
            held: vec![crate::problem::budget::Held::NmiWatchdog { pmu: "cpu".into() }],
            watchdog: 1,
            others: Some(0),
            virtual_pmu: false,
        };
        let s = counters_section(&[b]);
        assert!(
            s.contains("<td>cpu&lt;x&gt;</td><td>0</td><td>3</td><td>4</td>"),
            "{s}"
        );
        assert!(
            s.contains("set kernel.nmi_watchdog=0 to free one counter"),
            "{s}"
        );
    }

    /// Issue 27: each metric's worst state, its counters per state, and
    /// why with what to do, escaped; nothing before a collection.
    #[test]
    fn the_counter_states_say_the_worst_with_counts_and_what_to_do() {
        use crate::problem::{CounterState, MetricStates};
        let none = MetricStates::unavailable("m", None);
        assert_eq!(states_section(std::slice::from_ref(&none)), "");
        let mut mux = MetricStates::unavailable("c<1>", None);
        mux.cpus = [6, 2, 0, 0, 0];
        mux.running_ratio = Some(0.25);
        let mut ok = MetricStates::unavailable("i", None);
        ok.cpus = [8, 0, 0, 0, 0];
        ok.running_ratio = Some(1.0);
        let s = states_section(&[mux, ok, none]);
        let m = CounterState::Multiplexed;
        let want = format!(
            "<tr><td>c&lt;1&gt;</td><td>multiplexed</td><td>multiplexed on 2 of 8 CPUs (25.00%)</td><td>counting 6, multiplexed 2</td><td>{}. What to do: {}</td></tr>\n\
<tr><td>i</td><td>counting</td><td>counting on 8 CPUs</td><td>counting 8</td><td></td></tr>\n\
<tr><td>m</td><td>not_judged</td><td>not judged yet</td><td></td><td></td></tr>\n",
            m.meaning(),
            m.what_to_do()
        );
        assert!(
            s.starts_with("<a id=\"states\"></a><h2>Counter states</h2>"),
            "{s}"
        );
        assert!(
            s.ends_with(&format!("<tbody>\n{want}</tbody></table>\n")),
            "{s}"
        );
    }

    #[test]
    fn bidi_overrides_and_controls_are_escaped_on_the_page() {
        assert_eq!(
            esc("pod\u{202E}gpj.exe\x1b<b>"),
            "pod\\u{202e}gpj.exe\\x1b&lt;b&gt;"
        );
        assert_eq!(esc("a&b"), "a&amp;b");
    }

    /// A card of another platform's entry (every alternative not on this
    /// platform) is left out; one that needs the hardware PMU the host
    /// lacks keeps its card, which says so.
    #[test]
    fn another_platforms_entries_have_no_card() {
        use crate::resolve::derived::{DerivedResolution, ResolvedDerived};
        let table = crate::config::Config::parse(crate::config::DEFAULT_CONFIG, "<default>")
            .unwrap()
            .derived;
        let unavailable = |name: &str, problem: Problem| ResolvedDerived {
            name: name.into(),
            status: Status::Unavailable,
            chosen: None,
            expr: None,
            tried: vec![crate::resolve::chain::Tried {
                event: "x".into(),
                problem: Some(problem),
            }],
        };
        let host = DerivedResolution {
            metrics: vec![
                unavailable(
                    "atom_retiring",
                    Problem::NotOnPlatform {
                        event: "cpu_atom/topdown-retiring/".into(),
                        detail: "no PMU matches `cpu_atom` on this host".into(),
                    },
                ),
                unavailable(
                    "ipc",
                    Problem::NeedsHardwarePmu {
                        event: "instructions".into(),
                    },
                ),
            ],
        };
        let names: Vec<String> = cards(&table, &host).into_iter().map(|c| c.name).collect();
        assert!(!names.iter().any(|n| n == "atom_retiring"), "{names:?}");
        assert!(names.iter().any(|n| n == "ipc"), "{names:?}");
        assert_eq!(names.len(), table.metrics.len() - 1);
    }
}
