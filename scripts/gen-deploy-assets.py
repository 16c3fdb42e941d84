#!/usr/bin/env python3
"""Generates the Grafana dashboards and keeps the Helm chart's copies in step.

    scripts/gen-deploy-assets.py          # write
    scripts/gen-deploy-assets.py --check  # exit 1 (and say what) if anything is stale

Writes:
  grafana/dashboards/perf-exporter-node.json     node dashboard
  grafana/dashboards/perf-exporter-cluster.json  cluster dashboard
  grafana/dashboards/perf-exporter-pods.json     pods dashboard (scripts/pods_dashboard.py)
  deploy/helm/perf-exporter/files/dashboards/*   copies, for the dashboards ConfigMap
  deploy/helm/perf-exporter/files/perf-exporter.rules.yml
                                                 copy of grafana/rules/perf-exporter.rules.yml,
                                                 for the PrometheusRule
  deploy/helm/perf-exporter/values.yaml          the `config:` block = config/default.yaml

The dashboards follow the conventions of the well-kept community dashboards
(Node Exporter Full, the monitoring mixins): a data source variable, job and
instance variables that every query is filtered by, $__rate_interval in every
rate, a unit on every panel. tests/deploy/test_dashboards.py lints exactly that;
tests/e2e/dashboards.rs runs every query against a real Prometheus.

Only the standard library: it runs before any test tool is installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pods_dashboard import pods_dashboard

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy/helm/perf-exporter"

NOT_AVAILABLE = "Not available on this system"
DS = {"type": "prometheus", "uid": "${datasource}"}
# Every selector carries these two matchers.
SEL = 'job=~"$job", instance=~"$instance"'
# Unavailable metrics with their class and reason code (a perf_event_available
# series that is 0 carries both, from small fixed sets, and the encoding tried);
# the value stays 0 for the value mapping.
UNAVAILABLE_WITH_REASON = f"perf_event_available{{{SEL}}} == 0"
RI = "$__rate_interval"


def rate(metric: str, extra: str = "") -> str:
    """rate() of a counter, filtered by the dashboard's job and instance."""
    matchers = SEL + (", " + extra if extra else "")
    return f"rate({metric}{{{matchers}}}[{RI}])"


def sum_rate(metric: str, by: str = "") -> str:
    by_clause = f" by ({by})" if by else ""
    return f"sum{by_clause} ({rate(metric)})"


def ratio(num: str, den: str, by: str = "", scale: str = "") -> str:
    return f"{scale}{sum_rate(num, by)}\n/\n{sum_rate(den, by)}"


def dram_total(by: str = "") -> str:
    """Read + write, or the total where only the total is counted (AMD Zen 3)."""
    return (
        f"(\n  {sum_rate('perf_dram_read_bytes_total', by)}\n  +\n"
        f"  {sum_rate('perf_dram_write_bytes_total', by)}\n)\nor\n"
        f"{sum_rate('perf_dram_bytes_total', by)}"
    )


# The labels of a per-CPU panel: the level its sets are exported at (`per:` in
# the exporter's config: `cpu`, `core`, `socket` or none, and `pmu` for the core
# types of a hybrid part), so each panel works on the default config (per socket)
# and on a per-CPU one.
LEVEL = "cpu, core, socket, pmu"
LEVEL_LEGEND = "{{at}} {{pmu}}"


def at_level(expr: str) -> str:
    """`expr` with an `at` label naming its level: "cpu 3", "core 2", "socket 0" or "node"."""
    out = f'label_replace(\n{expr}\n, "at", "node", "", "")'
    for lab in ("socket", "core", "cpu"):
        out = f'label_replace(\n{out}\n, "at", "{lab} $1", "{lab}", "(.+)")'
    return out


def running_ratio(by: str) -> str:
    return ratio("perf_group_running_seconds_total", "perf_group_enabled_seconds_total", by)


# Counter health (issue 27): the states of the counters, the lowest running
# share of a counter (perf_counter_running_ratio has series only for counters
# not counting: 1 where every counter counts), and the measured budget.
COUNTER_HEALTH_ROW = "Counter health"


def lowest_running_share(by: str = "") -> str:
    by_clause = f" by ({by})" if by else ""
    return (f"min{by_clause} (perf_counter_running_ratio{{{SEL}}})\n"
            f"or\n(max{by_clause} (perf_counter_states{{{SEL}}}) * 0 + 1)")


def counter_health_node(lay) -> list[dict]:
    return [
        lay.row(COUNTER_HEALTH_ROW),
        timeseries(lay, "Counter states", "How many counters (metric × CPU or uncore instance) are in each state: counting, "
                   "multiplexed (time-sliced: scaled estimates), stalled (cycles or instructions on the PMU but not moving), "
                   "never_ran (enabled but never on the PMU: no value), implausible (a count the CPU cannot produce). "
                   "The status page (/) and `perf-exporter check` say why and what to do.",
                   "short", targets((f"sum by (state) (perf_counter_states{{{SEL}}})", "{{state}}")), w=8),
        timeseries(lay, "Lowest running share of a counter", "The smallest share of the last collection's window any counter "
                   "was on the PMU (running / enabled): 100% when every counter counts, below when multiplexed, 0 when one never ran.",
                   "percentunit", targets((lowest_running_share(), "lowest")), w=8, max_=1),
        timeseries(lay, "General-purpose counters per core PMU", "The core PMU's general-purpose counters free for one group "
                   "(measured at start-up and at most every 5 minutes) and, where known, its total. Fewer free than total: "
                   "the NMI watchdog or another user holds the rest (the status page names them). Not measured where there is "
                   "no core PMU.",
                   "short", targets((f'perf_pmu_counters{{{SEL}, kind=~"free|total"}}', "{{pmu}} {{kind}}")), w=8),
    ]


def counter_health_cluster(lay) -> list[dict]:
    return [
        lay.row(COUNTER_HEALTH_ROW),
        timeseries(lay, "Counters not counting per node", "Per node, the counters multiplexed, stalled, never run or implausible.",
                   "short", targets((f'sum by (instance) (perf_counter_states{{{SEL}, state!="counting"}})', "{{instance}}")),
                   w=8, legend_table=True),
        timeseries(lay, "Multiplex ratio per node", "Per node, the smallest share of the window a counter was on the PMU "
                   "(running / enabled): 100% when every counter counts.",
                   "percentunit", targets((lowest_running_share("instance"), "{{instance}}")), w=8, max_=1, legend_table=True),
        timeseries(lay, "Free counters per node", "Per node, the fewest general-purpose counters free on a core PMU "
                   "(measured). A node with fewer than its peers: the NMI watchdog, another agent, or an instance type that "
                   "exposes fewer.",
                   "short", targets((f'min by (instance) (perf_pmu_counters{{{SEL}, kind="free"}})', "{{instance}}")),
                   w=8, legend_table=True),
    ]


# Top-down level 1 (the topdown set): the same derivations as the recording
# rules (grafana/rules/perf-exporter.rules.yml), over $__rate_interval: slots
# per second of each category per CPU, derived where the hardware has no
# direct count (Skylake, AMD Zen 4; cpu_atom has no slots event), then each
# category's share of the node's slots.
TOPDOWN_CATEGORIES = (
    ("retiring", "retiring"),
    ("bad_speculation", "bad speculation"),
    ("frontend_bound", "frontend bound"),
    ("backend_bound", "backend bound"),
    ("smt_contention", "SMT contention"),
)


def td_rate(family: str) -> str:
    """Slots per second of a top-down family, per CPU (or the set's level)."""
    return sum_rate(f"perf_topdown_{family}_total", f"job, instance, {LEVEL}")


def td_slots_of(cat: str) -> str:
    """Per-CPU slots per second of a level-1 category."""
    direct = td_rate(f"{cat}_slots")
    if cat == "bad_speculation":
        # Skylake: issued - retired + recovery; Zen 4: dispatched - retired.
        issued = td_rate("issued_slots")
        return (f"{direct}\nor\n(\n  {issued}\n  - {td_rate('retiring_slots')}\n"
                f"  + ({td_rate('recovery_slots')} or 0 * {issued})\n)")
    if cat == "backend_bound":
        # Skylake: the slots no other category took.
        return (f"{direct}\nor\n(\n  {td_rate('slots')}\n  - {td_rate('retiring_slots')}\n"
                f"  - ({td_slots_of('bad_speculation')})\n  - {td_rate('frontend_bound_slots')}\n)")
    return direct


def td_slots() -> str:
    """Per-CPU slots per second; a CPU without a slots event (cpu_atom) has
    the sum of its four categories."""
    parts = "\n  + ".join(f"({td_slots_of(c)})" for c, _ in TOPDOWN_CATEGORIES[:4])
    return f"{td_rate('slots')}\nor\n(\n  {parts}\n)"


# Arm (the topdown_arm set, per node): perf's level-1 formulas
# (config/metrics/neoverse-*.json, the derived `frontend_bound` ..
# `retiring` entries and their recording rules), over the slots metric of
# the core's formula: Neoverse N2 r0p0-r0p2, whose STALL_SLOT and
# STALL_SLOT_FRONTEND count one slot too many per cycle (5 slots a cycle:
# the cycles are the slots over 5), and Neoverse V2 and N2 r0p3 and later
# (no correction).
ARM_SLOTS_CORRECTED = "perf_topdown_arm_slots_total"
ARM_SLOTS_UNCORRECTED = ("perf_topdown_arm_v2_slots_total", "perf_topdown_arm_n2_slots_total")


def arm_node(metric: str) -> str:
    return sum_rate(metric, "job, instance")


def arm_share(cat: str, slots: str, correction: str) -> str:
    """One Arm level-1 share at node level; `correction` is subtracted from
    STALL_SLOT and STALL_SLOT_FRONTEND."""
    def stall(m: str) -> str:
        return f"({arm_node(m)}{correction})" if correction else arm_node(m)
    used = f"(1 - {stall('perf_topdown_stall_slots_total')} / {slots})"
    retired = f"{arm_node('perf_pipeline_ops_retired_total')} / {arm_node('perf_pipeline_ops_speculated_total')}"
    return {
        "retiring": f"{retired} * {used}",
        "bad_speculation": f"(1 - {retired}) * {used}",
        "frontend_bound": f"{stall('perf_topdown_frontend_stall_slots_total')} / {slots}",
        "backend_bound": f"{arm_node('perf_topdown_backend_stall_slots_total')} / {slots}",
    }[cat]


def td_share(cat: str) -> str:
    share = (f"sum by (job, instance) (\n{td_slots_of(cat)}\n)\n/\n"
             f"sum by (job, instance) (\n{td_slots()}\n)")
    if cat == "smt_contention":
        return share
    n2 = arm_node(ARM_SLOTS_CORRECTED)
    uncorrected = "(" + " or ".join(arm_node(m) for m in ARM_SLOTS_UNCORRECTED) + ")"
    return (f"{share}\nor\n{arm_share(cat, n2, f' - {n2} / 5')}\n"
            f"or\n{arm_share(cat, uncorrected, '')}")


class Layout:
    """Hands out panel ids and grid positions, row by row (24 columns)."""

    def __init__(self) -> None:
        self.next_id = 1
        self.x = 0
        self.y = 0
        self.row_h = 0

    def id(self) -> int:
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title: str) -> dict:
        self.newline()
        p = {
            "type": "row",
            "id": self.id(),
            "title": title,
            "collapsed": False,
            "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
        }
        self.y += 1
        return p

    def newline(self) -> None:
        if self.x:
            self.y += self.row_h
        self.x = 0
        self.row_h = 0

    def place(self, w: int, h: int) -> dict:
        if self.x + w > 24:
            self.newline()
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos


def target(ref: str, expr: str, legend: str = "__auto", instant: bool = False,
           fmt: str = "time_series") -> dict:
    return {
        "refId": ref,
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend,
        "range": not instant,
        "instant": instant,
        "format": fmt,
    }


def targets(*specs) -> list[dict]:
    """(expr, legend) pairs, refIds A, B, ..."""
    return [target(chr(ord("A") + i), e, l) for i, (e, l) in enumerate(specs)]


def timeseries(lay: Layout, title: str, desc: str, unit: str, tgts: list[dict],
               w: int = 12, h: int = 8, max_: float | None = None, decimals: int | None = None,
               legend_table: bool = False) -> dict:
    defaults: dict = {
        "unit": unit,
        "noValue": NOT_AVAILABLE,
        "min": 0,
        "color": {"mode": "palette-classic"},
        "custom": {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "gradientMode": "none",
            "showPoints": "never",
            "spanNulls": False,
            "axisSoftMin": 0,
        },
    }
    if max_ is not None:
        defaults["max"] = max_
    if decimals is not None:
        defaults["decimals"] = decimals
    legend = {"showLegend": True, "placement": "bottom", "calcs": [], "displayMode": "list"}
    if legend_table:
        legend = {"showLegend": True, "placement": "right", "calcs": ["mean", "min"],
                  "displayMode": "table", "sortBy": "Mean", "sortDesc": False}
    return {
        "type": "timeseries",
        "id": lay.id(),
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": lay.place(w, h),
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": legend,
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": tgts,
    }


def thresholds(*steps) -> dict:
    return {
        "mode": "absolute",
        "steps": [{"color": c, "value": v} for c, v in steps],
    }


def stat(lay: Layout, title: str, desc: str, unit: str, expr: str, w: int = 4, h: int = 4,
         decimals: int | None = None, steps=(("green", None),), no_value: str = NOT_AVAILABLE) -> dict:
    defaults: dict = {
        "unit": unit,
        "noValue": no_value,
        "color": {"mode": "thresholds"},
        "thresholds": thresholds(*steps),
    }
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "type": "stat",
        "id": lay.id(),
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": lay.place(w, h),
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "auto",
            "textMode": "auto",
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "wideLayout": True,
            "showPercentChange": False,
            "percentChangeColorMode": "standard",
        },
        "targets": [target("A", expr, "__auto", instant=True)],
    }


def bargauge(lay: Layout, title: str, desc: str, unit: str, expr: str, w: int = 12,
             h: int = 10, max_: float | None = None, decimals: int | None = None) -> dict:
    defaults: dict = {
        "unit": unit,
        "noValue": NOT_AVAILABLE,
        "min": 0,
        "color": {"mode": "continuous-BlYlRd"},
        "thresholds": thresholds(("green", None)),
    }
    if max_ is not None:
        defaults["max"] = max_
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "type": "bargauge",
        "id": lay.id(),
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": lay.place(w, h),
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
            "displayMode": "gradient",
            "valueMode": "color",
            "namePlacement": "left",
            "showUnfilled": True,
            "sizing": "manual",
            "minVizHeight": 16,
            "minVizWidth": 8,
            "maxVizHeight": 24,
            "legend": {"showLegend": False, "placement": "bottom", "calcs": [], "displayMode": "list"},
        },
        "targets": [target("A", expr, "{{instance}}", instant=True)],
    }


def table(lay: Layout, title: str, desc: str, unit: str, expr: str, no_value: str,
          mappings: list | None = None, exclude=(), rename: dict | None = None,
          w: int = 24, h: int = 8) -> dict:
    return {
        "type": "table",
        "id": lay.id(),
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": lay.place(w, h),
        "fieldConfig": {
            "defaults": {
                "unit": unit,
                "noValue": no_value,
                "mappings": mappings or [],
                "custom": {"align": "auto", "cellOptions": {"type": "auto"}, "filterable": True, "inspect": False},
            },
            "overrides": [],
        },
        "options": {"showHeader": True, "frameIndex": 0, "cellHeight": "sm"},
        "transformations": [
            {
                "id": "organize",
                "options": {
                    "excludeByName": {k: True for k in ("Time", "__name__", *exclude)},
                    "renameByName": rename or {},
                },
            }
        ],
        "targets": [target("A", expr, "__auto", instant=True, fmt="table")],
    }


def query_var(name: str, label: str, query: str, multi: bool) -> dict:
    """A query variable refreshed on time range change; multi: with "All" (.+)."""
    v = {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DS,
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "sort": 1,
        "hide": 0,
        "includeAll": multi,
        "multi": multi,
        "regex": "",
    }
    if multi:
        v["allValue"] = ".+"
        v["current"] = {"text": "All", "value": "$__all"}
    return v


def variables(instance_multi: bool) -> list[dict]:
    ds_var = {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "regex": "",
        "hide": 0,
        "refresh": 1,
        "includeAll": False,
        "multi": False,
        "current": {"text": "default", "value": "default"},
    }
    job = query_var("job", "Job", "label_values(perf_exporter_build_info, job)", multi=False)
    instance = query_var("instance", "Instance" if not instance_multi else "Instances",
                         'label_values(perf_exporter_build_info{job=~"$job"}, instance)', multi=instance_multi)
    return [ds_var, job, instance]


def dashboard(uid: str, title: str, desc: str, panels: list[dict], instance_multi: bool,
              links_to: str, template_vars: list[dict] | None = None) -> dict:
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["perf-exporter", "perf", "pmu"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "links": [
            {
                "title": links_to,
                "type": "dashboards",
                "tags": ["perf-exporter"],
                "asDropdown": False,
                "icon": "external link",
                "includeVars": True,
                "keepTime": True,
                "targetBlank": False,
                "tooltip": "",
                "url": "",
            }
        ],
        "templating": {"list": template_vars or variables(instance_multi)},
        "panels": panels,
    }


def node_dashboard() -> dict:
    lay = Layout()
    p: list[dict] = []
    ipc = ratio("perf_instructions_total", "perf_cpu_cycles_total")

    p.append(lay.row("Overview"))
    p.append(stat(lay, "IPC", "Instructions retired per CPU cycle, all CPUs together.",
                  "short", ipc, decimals=2,
                  steps=(("red", None), ("orange", 0.5), ("green", 1.0))))
    p.append(stat(lay, "DRAM bandwidth", "Bytes read from and written to DRAM per second, all memory controllers.",
                  "Bps", dram_total()))
    p.append(stat(lay, "Cache miss ratio", "cache-misses / cache-references (usually the last-level cache).",
                  "percentunit", ratio("perf_cache_misses_total", "perf_cache_references_total"), decimals=1))
    p.append(stat(lay, "Branch miss ratio", "Mispredicted branches / branch instructions.",
                  "percentunit", ratio("perf_branch_misses_total", "perf_branch_instructions_total"), decimals=2))
    p.append(stat(lay, "Counting time", "The lowest share of its enabled time any counter set was on the PMU (running / enabled). Below 100% the counts are scaled estimates (multiplexing).",
                  "percentunit", f"min(\n{running_ratio('set')}\n)", decimals=0,
                  steps=(("red", None), ("orange", 0.5), ("green", 0.99))))
    p.append(stat(lay, "Failed metrics", "How many configured metrics this host should count but does not (privilege, seccomp, file descriptors, tracefs, the PMU refusing the encoding: perf_event_available 0 with class=\"failed\"). Metrics of other platforms (class=\"not_on_platform\", e.g. hardware events in a VM without a PMU) are not counted here; the Availability row lists both.",
                  "short", f'count(count by (metric) (perf_event_available{{{SEL}, class="failed"}} == 0)) or vector(0)',
                  steps=(("green", None), ("red", 1)), no_value="No data"))

    p.append(lay.row("Instructions per cycle"))
    p.append(timeseries(lay, "IPC", "Instructions retired per CPU cycle, all CPUs together: work done per clock. Low IPC with high cache miss ratios usually means memory stalls.",
                        "short", targets((ipc, "IPC")), decimals=2))
    p.append(timeseries(lay, "IPC per CPU", "Instructions per cycle of each CPU, core, socket or node: the level the core set is exported at (its `per:`; the default config sums per node, per core type on a hybrid part).", "short",
                        targets((at_level(ratio("perf_instructions_total", "perf_cpu_cycles_total", LEVEL)), LEVEL_LEGEND)),
                        decimals=2, legend_table=True))
    p.append(timeseries(lay, "Cycles and instructions", "CPU cycles and instructions retired per second, all CPUs together.",
                        "short", targets((sum_rate("perf_cpu_cycles_total"), "cycles/s"),
                                         (sum_rate("perf_instructions_total"), "instructions/s")), w=24))

    p.append(lay.row("Caches"))
    p.append(timeseries(lay, "Cache miss ratio", "cache-misses / cache-references, as the CPU defines them (usually the last-level cache).",
                        "percentunit", targets((ratio("perf_cache_misses_total", "perf_cache_references_total"), "cache misses / references")),
                        w=8, max_=1))
    p.append(timeseries(lay, "L1d load misses per 1000 instructions", "L1 data cache load misses per 1000 instructions retired (MPKI).",
                        "short", targets((ratio("perf_l1d_read_misses_total", "perf_instructions_total", scale="1000 * "), "L1d MPKI")),
                        w=8, decimals=1))
    p.append(timeseries(lay, "LLC load misses per 1000 instructions", "Last-level cache load misses per 1000 instructions retired (MPKI).",
                        "short", targets((ratio("perf_llc_read_misses_total", "perf_instructions_total", scale="1000 * "), "LLC MPKI")),
                        w=8, decimals=2))
    p.append(timeseries(lay, "Load miss ratios", "Load misses / loads of the L1 data cache, the L1 instruction cache and the last-level cache (the cache_levels and icache sets). A cache whose loads this CPU cannot count is left out.",
                        "percentunit", targets((ratio("perf_l1d_read_misses_total", "perf_l1d_reads_total"), "L1d"),
                                               (ratio("perf_l1i_read_misses_total", "perf_l1i_reads_total"), "L1i"),
                                               (ratio("perf_llc_read_misses_total", "perf_llc_reads_total"), "LLC")),
                        max_=1, decimals=2))
    p.append(timeseries(lay, "L1i load misses per 1000 instructions", "L1 instruction cache load misses per 1000 instructions retired (MPKI): high with large code footprints (JITs, big binaries, many processes taking turns).",
                        "short", targets((ratio("perf_l1i_read_misses_total", "perf_instructions_total", scale="1000 * "), "L1i MPKI")),
                        decimals=2))

    p.append(lay.row("Branches"))
    p.append(timeseries(lay, "Branch miss ratio", "Mispredicted branches / branch instructions, all CPUs together.",
                        "percentunit", targets((ratio("perf_branch_misses_total", "perf_branch_instructions_total"), "branch misses / branches"))))
    p.append(timeseries(lay, "Branch miss ratio per CPU", "Mispredicted branches / branch instructions of each CPU, core or socket (the core set's `per:` level).",
                        "percentunit", targets((at_level(ratio("perf_branch_misses_total", "perf_branch_instructions_total", LEVEL)), LEVEL_LEGEND)),
                        legend_table=True))

    p.append(lay.row("Top-down (level 1)"))
    td = timeseries(lay, "Pipeline slots by top-down category",
                    "Where the issue (dispatch) slots of all CPUs went: retired operations, bad speculation, "
                    "frontend bound (nothing delivered), backend bound (not accepted), and on AMD Zen 4 SMT "
                    "contention (the other thread was picked). The shares add up to 100%. Intel Ice Lake and "
                    "later count them in hardware (perf metrics); Skylake and AMD Zen 4 derive bad speculation "
                    "(and Skylake backend bound) from raw counts; Arm Neoverse N2 and V2 by perf's formulas over "
                    "their slot events (STALL_SLOT*, OP_SPEC, OP_RETIRED); CPUs without slot events show nothing "
                    "here (Arm Neoverse N1: see the stall cycles).",
                    "percentunit", targets(*((td_share(c), name) for c, name in TOPDOWN_CATEGORIES)),
                    w=16, max_=1)
    td["fieldConfig"]["defaults"]["custom"]["stacking"] = {"mode": "normal", "group": "A"}
    td["fieldConfig"]["defaults"]["custom"]["fillOpacity"] = 60
    p.append(td)
    p.append(timeseries(lay, "Stall cycles (Arm)",
                        "Share of cycles in which the frontend delivered no operation or the backend accepted "
                        "none (Arm STALL_FRONTEND / STALL_BACKEND over cycles): a cycle approximation of top-down "
                        "where the CPU has no slot events. Not slots, and not a partition.",
                        "percentunit",
                        targets((ratio("perf_topdown_frontend_stall_cycles_total", "perf_cpu_cycles_total"), "frontend stall cycles"),
                                (ratio("perf_topdown_backend_stall_cycles_total", "perf_cpu_cycles_total"), "backend stall cycles")),
                        w=8, max_=1))

    p.append(lay.row("Memory bandwidth"))
    p.append(timeseries(lay, "DRAM bandwidth per socket", "Bytes per second read from and written to DRAM, per socket (summed over its memory controllers).",
                        "Bps", targets((sum_rate("perf_dram_read_bytes_total", "socket"), "socket {{socket}} read"),
                                       (sum_rate("perf_dram_write_bytes_total", "socket"), "socket {{socket}} write"),
                                       (sum_rate("perf_dram_bytes_total", "socket"), "socket {{socket}} read+write"))))
    p.append(timeseries(lay, "DRAM bandwidth", "Bytes per second read from and written to DRAM, all sockets. Where the hardware counts only the total (AMD Zen 3 data fabric), only the total.",
                        "Bps", targets((sum_rate("perf_dram_read_bytes_total"), "read"),
                                       (sum_rate("perf_dram_write_bytes_total"), "write"),
                                       (dram_total(), "total"))))

    p.append(lay.row("Multiplexing"))
    p.append(timeseries(lay, "Counting time per set (running / enabled)", "The share of its enabled time each counter set was on the PMU. 100%: counted all the time. Less: the PMU time-sliced the groups and the counts are scaled estimates.",
                        "percentunit", targets((running_ratio("set"), "{{set}}")), max_=1))
    p.append(timeseries(lay, "Counting time per CPU (lowest set)", "Per CPU (core, socket or node: the sets' `per:` levels), the lowest running / enabled share of its counter sets.",
                        "percentunit", targets((at_level(f"min by (cpu, core, socket) (\n{running_ratio('cpu, core, socket, set')}\n)"), "{{at}}")),
                        max_=1, legend_table=True))

    p.extend(counter_health_node(lay))

    p.append(lay.row("Software events"))
    p.append(timeseries(lay, "Context switches and migrations", "Context switches and task migrations per second, all CPUs.",
                        "short", targets((sum_rate("perf_context_switches_total"), "context switches/s"),
                                         (sum_rate("perf_cpu_migrations_total"), "CPU migrations/s")), w=8))
    p.append(timeseries(lay, "Page faults", "Page faults per second (minor: no I/O; major: read from disk).",
                        "short", targets((sum_rate("perf_page_faults_total"), "all/s"),
                                         (sum_rate("perf_minor_faults_total"), "minor/s"),
                                         (sum_rate("perf_major_faults_total"), "major/s")), w=8))
    p.append(timeseries(lay, "Counted CPU time", "cpu-clock seconds counted per second, all CPUs: the number of CPUs being counted.",
                        "s", targets((sum_rate("perf_cpu_clock_seconds_total"), "cpu-clock")), w=8))
    p.append(timeseries(lay, "Interrupts and softirqs", "Hardware interrupt handlers (irq:irq_handler_entry) and softirqs (irq:softirq_entry) run per second, all CPUs.",
                        "short", targets((sum_rate("perf_interrupts_total"), "interrupts/s"),
                                         (sum_rate("perf_softirqs_total"), "softirqs/s"))))
    p.append(timeseries(lay, "Interrupts per CPU", "Hardware interrupt handlers run per second on each CPU: an interrupt storm, or interrupts all steered to one CPU, shows here. The default config sums the interrupts set over the node (`per: node`): set `per: cpu` on it for one line per CPU; the live view always has them per CPU.",
                        "short", targets((at_level(sum_rate("perf_interrupts_total", "cpu, core, socket")), "{{at}}")), legend_table=True))

    p.append(lay.row("Power and temperature"))
    p.append(timeseries(lay, "Power (RAPL)", "Package and DRAM power per socket, from the RAPL energy counters.",
                        "watt", targets((sum_rate("perf_energy_package_joules_total", "socket"), "socket {{socket}} package"),
                                        (sum_rate("perf_energy_dram_joules_total", "socket"), "socket {{socket}} DRAM"))))
    p.append(timeseries(lay, "Thermal margin", "The smallest distance to the thermal throttling point over the CPUs.",
                        "celsius", targets((f'min(perf_cpu_thermal_margin_celsius{{{SEL}}})', "lowest margin"))))

    p.append(lay.row("Availability"))
    p.append(table(lay, "Metrics this host cannot count",
                   "Configured metrics this host cannot count (perf_event_available == 0), with the last encoding tried, "
                   "the class (not_on_platform: expected on this hardware, e.g. no core PMU in a VM or a memory controller "
                   "PMU this CPU does not have; failed: should be countable here) and the reason code. "
                   "The exporter's status page (http://<instance>/) and `perf-exporter check` explain each and say what to do. "
                   "Such metrics are never exported as zero: their panels say \"" + NOT_AVAILABLE + "\".",
                   "short", UNAVAILABLE_WITH_REASON,
                   no_value="Every configured metric is counted on this host",
                   mappings=[{"type": "value", "options": {"0": {"text": NOT_AVAILABLE, "color": "orange", "index": 0}}}],
                   exclude=("job",),
                   rename={"metric": "Metric", "event": "Encoding tried", "pmu": "PMU", "Value": "Status",
                           "instance": "Instance", "class": "Class", "reason": "Reason"}))

    p.append(lay.row("Exporter"))
    p.append(timeseries(lay, "Counter read time per scrape", "How long a scrape took to read every perf group.",
                        "s", targets((f'max(perf_scrape_duration_seconds{{{SEL}}})', "read time"))))
    p.append(timeseries(lay, "Read errors", "Failed perf group reads per second.",
                        "short", targets((sum_rate("perf_read_errors_total"), "read errors/s"))))

    return dashboard(
        "perf-exporter-node",
        "perf-exporter / Node",
        "One node's hardware counters: IPC, cache and branch misses, DRAM bandwidth, multiplexing, "
        "software events, and what this host cannot count.",
        p, instance_multi=False, links_to="perf-exporter",
    )


def cluster_dashboard() -> dict:
    lay = Layout()
    p: list[dict] = []
    ipc_by = ratio("perf_instructions_total", "perf_cpu_cycles_total", "instance")

    p.append(lay.row("Nodes"))
    p.append(stat(lay, "Nodes exporting", "Targets of the job up now.", "short",
                  f'sum(up{{{SEL}}})', w=6, no_value="No targets"))
    p.append(stat(lay, "Nodes down", "Targets of the job failing their scrapes.", "short",
                  f'sum(1 - up{{{SEL}}})', w=6, steps=(("green", None), ("red", 1)), no_value="No targets"))
    p.append(stat(lay, "Nodes with failed metrics", "Nodes that fail to count at least one configured metric their hardware has "
                  "(perf_event_available 0 with class=\"failed\": privilege, seccomp, file descriptors, tracefs, the PMU refusing the encoding). "
                  "Metrics of other platforms (class=\"not_on_platform\", e.g. AMD's DRAM total on Intel, hardware events in a VM) "
                  "are expected and not counted here; the table below lists both.",
                  "short", f'count(count by (instance) (perf_event_available{{{SEL}, class="failed"}} == 0)) or vector(0)', w=6,
                  steps=(("green", None), ("red", 1)), no_value="No data"))
    p.append(stat(lay, "Cluster IPC", "All instructions / all cycles over the selected nodes.", "short",
                  ratio("perf_instructions_total", "perf_cpu_cycles_total"), w=6, decimals=2,
                  steps=(("red", None), ("orange", 0.5), ("green", 1.0))))

    p.append(lay.row("Rankings"))
    p.append(bargauge(lay, "IPC by node", "Instructions per cycle of each node, highest first.",
                      "short", f"sort_desc(\n{ipc_by}\n)", decimals=2))
    p.append(bargauge(lay, "DRAM bandwidth by node", "Bytes per second read from and written to DRAM, highest first.",
                      "Bps", f"sort_desc(\n{dram_total('instance')}\n)"))
    p.append(bargauge(lay, "Cache miss ratio by node", "cache-misses / cache-references of each node, highest first.",
                      "percentunit", f"sort_desc(\n{ratio('perf_cache_misses_total', 'perf_cache_references_total', 'instance')}\n)",
                      max_=1, decimals=1))
    p.append(bargauge(lay, "Branch miss ratio by node", "Mispredicted branches / branch instructions of each node, highest first.",
                      "percentunit", f"sort_desc(\n{ratio('perf_branch_misses_total', 'perf_branch_instructions_total', 'instance')}\n)",
                      decimals=2))

    p.append(lay.row("Over time"))
    p.append(timeseries(lay, "IPC per node", "Instructions per cycle of each node.", "short",
                        targets((ipc_by, "{{instance}}")), decimals=2, legend_table=True))
    p.append(timeseries(lay, "DRAM bandwidth per node", "Bytes per second read from and written to DRAM, per node.", "Bps",
                        targets((dram_total("instance"), "{{instance}}")), legend_table=True))
    p.append(timeseries(lay, "LLC load misses per 1000 instructions per node", "Last-level cache load misses per 1000 instructions (MPKI), per node.",
                        "short", targets((ratio("perf_llc_read_misses_total", "perf_instructions_total", "instance", scale="1000 * "), "{{instance}}")),
                        decimals=2, legend_table=True))
    p.append(timeseries(lay, "Counting time per node (lowest set)", "Per node, the lowest running / enabled share of its counter sets; below 100% means multiplexing.",
                        "percentunit", targets((f"min by (instance) (\n{running_ratio('instance, set')}\n)", "{{instance}}")),
                        max_=1, legend_table=True))

    p.extend(counter_health_cluster(lay))

    p.append(lay.row("Availability"))
    p.append(table(lay, "Unavailable metrics by node",
                   "Per node, the configured metrics it cannot count (perf_event_available == 0), with the class "
                   "(not_on_platform: expected on that hardware; failed: should be countable there) and the reason code. "
                   "The explanation and what to do are on each exporter's status page (/) and in `perf-exporter check`.",
                   "short", UNAVAILABLE_WITH_REASON,
                   no_value="Every configured metric is counted on every selected node",
                   mappings=[{"type": "value", "options": {"0": {"text": NOT_AVAILABLE, "color": "orange", "index": 0}}}],
                   exclude=("job",),
                   rename={"instance": "Node", "metric": "Metric", "event": "Encoding tried", "pmu": "PMU",
                           "Value": "Status", "class": "Class", "reason": "Reason"}, h=10))

    return dashboard(
        "perf-exporter-cluster",
        "perf-exporter / Cluster",
        "Every node ranked by IPC, DRAM bandwidth and miss ratios; which nodes cannot count what.",
        p, instance_multi=True, links_to="perf-exporter",
    )


def dump_json(obj: dict) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def values_with_default_config(values: str, default_config: str) -> str:
    """values.yaml with the `config:` block replaced by config/default.yaml's sets (not its
    `derived:` table: a config without one gets the default's, which a values file replacing
    `sets` would otherwise keep, naming metrics its sets may not have)."""
    begin = "  # BEGIN default config"
    end = "  # END default config"
    head, rest = values.split(begin, 1)
    begin_line, rest = rest.split("\n", 1)
    _, tail = rest.split(end, 1)
    body = default_config[default_config.index("sets:"):]
    body = body.split("\n# Derived metrics", 1)[0]
    indented = "".join(("  " + line if line.strip() else line) + "\n" for line in body.rstrip("\n").split("\n"))
    return head + begin + begin_line + "\n" + indented + end + tail


def outputs() -> dict[Path, str]:
    out: dict[Path, str] = {}
    for name, dash in (("perf-exporter-node.json", node_dashboard()),
                       ("perf-exporter-cluster.json", cluster_dashboard()),
                       ("perf-exporter-pods.json", pods_dashboard(sys.modules[__name__]))):
        text = dump_json(dash)
        out[REPO / "grafana/dashboards" / name] = text
        out[CHART / "files/dashboards" / name] = text
    out[CHART / "files/perf-exporter.rules.yml"] = (REPO / "grafana/rules/perf-exporter.rules.yml").read_text()
    values = CHART / "values.yaml"
    out[values] = values_with_default_config(values.read_text(), (REPO / "config/default.yaml").read_text())
    return out


def main() -> int:
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        print(__doc__, file=sys.stderr)
        return 2
    stale = []
    for path, text in outputs().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path.relative_to(REPO))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if check and stale:
        print("stale (run scripts/gen-deploy-assets.py): " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    if not check:
        for s in stale:
            print(f"wrote {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
