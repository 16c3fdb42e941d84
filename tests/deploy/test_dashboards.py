"""The Grafana dashboards in grafana/dashboards/: type-checked against the npm
package @grafana/schema, and linted for the conventions of the well-kept
community dashboards. (tests/e2e/dashboards.rs runs every query against a real
Prometheus scraping the exporter.)"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from conftest import DASHBOARDS, tsc_check

NOT_AVAILABLE = "Not available on this system"
UNITS = {"Bps", "binBps", "percentunit", "short", "s", "watt", "celsius"}
DS_REF = {"type": "prometheus", "uid": "${datasource}"}
TYPES = Path(__file__).parent / "dashboard-types.ts"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def panels(dash: dict):
    """Every non-row panel, including those inside rows."""
    for p in dash["panels"]:
        if p["type"] == "row":
            yield from p.get("panels", [])
        else:
            yield p


def exprs(dash: dict):
    for p in panels(dash):
        for t in p.get("targets", []):
            yield p, t


def test_there_are_node_cluster_and_pods_dashboards():
    names = {p.name for p in DASHBOARDS}
    assert names == {"perf-exporter-node.json", "perf-exporter-cluster.json", "perf-exporter-pods.json"}


# ---- @grafana/schema ----------------------------------------------------------


def type_check(node_modules: Path, dashboards: dict[str, dict], tmp_path: Path) -> None:
    src = ['import type { PerfDashboard } from "./dashboard-types.js";']
    for name, d in dashboards.items():
        src.append(f"// {name}\nexport const {re.sub(r'[^a-zA-Z0-9]', '_', name)}: PerfDashboard = {json.dumps(d, indent=1)};")
    tsc_check(node_modules, {"dashboard-types.ts": TYPES.read_text(), "check.ts": "\n".join(src) + "\n"}, tmp_path)


def test_dashboards_type_check(node_modules, tmp_path):
    type_check(node_modules, {p.stem: load(p) for p in DASHBOARDS}, tmp_path)


@pytest.mark.parametrize("mutation,error", [
    ("unknown panel option", "known properties, and '\"lgend\"'"),
    ("wrong legend placement", '"middle"'),
    ("target without refId", "'refId' is missing"),
    ("unknown dashboard key", "known properties, and '\"refreshh\"'"),
    ("variable refresh out of range", "Type '9' is not assignable"),
])
def test_type_check_catches(mutation, error, node_modules, tmp_path):
    """The type check is not vacuous."""
    d = load(DASHBOARDS[0])
    p = next(panels(d))
    if mutation == "unknown panel option":
        p["options"]["lgend"] = {}
    elif mutation == "wrong legend placement":
        ts = next(x for x in panels(d) if x["type"] == "timeseries")
        ts["options"]["legend"]["placement"] = "middle"
    elif mutation == "target without refId":
        del p["targets"][0]["refId"]
    elif mutation == "unknown dashboard key":
        d["refreshh"] = "1m"
    elif mutation == "variable refresh out of range":
        d["templating"]["list"][1]["refresh"] = 9
    with pytest.raises(AssertionError, match="tsc found type errors") as e:
        type_check(node_modules, {"mutated": d}, tmp_path)
    assert error in str(e.value), str(e.value)[:3000]


# ---- conventions --------------------------------------------------------------


@pytest.fixture(params=[p.name for p in DASHBOARDS])
def dash(request) -> dict:
    return load(next(p for p in DASHBOARDS if p.name == request.param))


def test_variables(dash):
    vs = {v["name"]: v for v in dash["templating"]["list"]}
    assert vs["datasource"]["type"] == "datasource" and vs["datasource"]["query"] == "prometheus"
    for name in ("job", "instance"):
        v = vs[name]
        assert v["type"] == "query", name
        assert v["datasource"] == DS_REF, name
        assert v["refresh"] == 2, f"{name}: refresh on time range change"
    assert "label_values(" in vs["job"]["query"]["query"]
    assert 'job=~"$job"' in vs["instance"]["query"]["query"], "instance depends on job"


def test_uid_title_and_ids(dash):
    assert re.fullmatch(r"[a-z0-9-]{1,40}", dash["uid"])
    assert dash["title"].startswith("perf-exporter / ")
    ids = [p["id"] for p in dash["panels"]] + [p["id"] for r in dash["panels"] if r["type"] == "row" for p in r["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_no_hard_coded_datasource(dash):
    for p in panels(dash):
        assert p["datasource"] == DS_REF, p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DS_REF, p["title"]
    uids = re.findall(r'"uid":\s*"([^"]*)"', json.dumps(dash))
    assert set(uids) <= {"${datasource}", "-- Grafana --", dash["uid"]}, uids


def strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
# Joined for names, from kube-state-metrics (its own job and instance): filtered
# by the dashboard's namespace variable instead (kube_pod_annotations names
# static pods through their mirror pod's kubernetes.io/config.hash).
JOINED = {"kube_pod_info": 'namespace=~"$namespace"', "kube_pod_annotations": 'namespace=~"$namespace"'}
# Or taken out whole (the static pods no annotation names), in any namespace.
EXCLUDED = "unless on (pod_uid)"


def lint_expr(expr: str) -> list[str]:
    """Convention violations of one PromQL expression."""
    problems = []
    selectors = SELECTOR.findall(expr)
    if not selectors:
        problems.append("no metric selector")
    for name, matchers in selectors:
        if name in JOINED:
            if EXCLUDED in expr and name == "kube_pod_annotations":
                continue
            if JOINED[name] not in matchers or "group_left" not in expr:
                problems.append(f"{name}{{{matchers}}}: a join needs {JOINED[name]} and group_left")
            continue
        for m in ('job=~"$job"', 'instance=~"$instance"'):
            if m not in matchers:
                problems.append(f"{name}{{{matchers}}} lacks {m}")
    # A metric name with no {...} at all escapes the filters.
    bare = SELECTOR.sub("", strip_strings(expr))
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    for tok in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", bare):
        if tok not in KEYWORDS and not re.fullmatch(r"[0-9e]+|Inf|NaN", tok) and not tok.startswith("__"):
            problems.append(f"bare selector {tok} (no job/instance matchers)")
    for rng in re.findall(r"\[([^\]]*)\]", expr):
        if rng != "$__rate_interval":
            problems.append(f"range [{rng}] is not [$__rate_interval]")
    for fn in re.findall(r"\b(rate|irate|increase|delta|deriv|[a-z]+_over_time)\s*\(", expr):
        if "[$__rate_interval]" not in expr:
            problems.append(f"{fn}() without [$__rate_interval]")
    return problems


def test_lint_catches_violations():
    assert lint_expr('rate(perf_cpu_cycles_total{job=~"$job", instance=~"$instance"}[$__rate_interval])') == []
    assert lint_expr('sum by (cpu) (rate(perf_cpu_cycles_total{job=~"$job"}[$__rate_interval]))')
    assert lint_expr('rate(perf_cpu_cycles_total{job=~"$job", instance=~"$instance"}[5m])')
    assert lint_expr('perf_event_available == 0')
    assert lint_expr('up{job=~"$job", instance=~"$instance"} / perf_scrape_duration_seconds')
    ok = ('sum by (instance, pod_uid) (rate(perf_cgroup_cpu_cycles_total{job=~"$job", instance=~"$instance"}[$__rate_interval]))'
          ' * on (pod_uid) group_left (namespace, pod) '
          'label_replace(max by (namespace, pod, uid) (kube_pod_info{namespace=~"$namespace"}), "pod_uid", "$1", "uid", "(.+)")')
    assert lint_expr(ok) == []
    assert lint_expr(ok.replace('{namespace=~"$namespace"}', ""))
    assert lint_expr(ok.replace('namespace=~"$namespace"', 'pod=~"$pod"'))


def test_every_query_filtered_and_rate_interval(dash):
    problems = []
    for p, t in exprs(dash):
        for prob in lint_expr(t["expr"]):
            problems.append(f"{p['title']} / {t['refId']}: {prob}")
    assert not problems, "\n".join(problems)
    assert any("$__rate_interval" in t["expr"] for _, t in exprs(dash))


def test_every_panel_has_a_unit(dash):
    for p in panels(dash):
        unit = p["fieldConfig"]["defaults"].get("unit")
        assert unit in UNITS, f"{p['title']}: unit {unit!r} not one of {sorted(UNITS)}"
    units = {p["fieldConfig"]["defaults"]["unit"] for p in panels(dash)}
    assert {"percentunit", "short"} <= units


def test_not_available_instead_of_empty(dash):
    """Graph panels say so when the host cannot count their metrics; the
    availability table maps perf_event_available == 0 to that text."""
    tables = []
    for p in panels(dash):
        d = p["fieldConfig"]["defaults"]
        if p["type"] in ("timeseries", "bargauge"):
            assert d.get("noValue") == NOT_AVAILABLE, p["title"]
        elif p["type"] == "stat":
            assert d.get("noValue"), p["title"]
        elif p["type"] == "table":
            tables.append(p)
    avail = [p for p in tables if "perf_event_available" in p["targets"][0]["expr"]]
    assert len(avail) == 1
    t = avail[0]
    assert "== 0" in t["targets"][0]["expr"]
    assert t["targets"][0]["format"] == "table" and t["targets"][0]["instant"] is True
    (mapping,) = t["fieldConfig"]["defaults"]["mappings"]
    assert mapping["type"] == "value" and mapping["options"]["0"]["text"] == NOT_AVAILABLE
    assert "perf-exporter check" in t["description"], "says where the reason is"


def titles(dash: dict) -> dict[str, dict]:
    return {p["title"]: p for p in panels(dash)}


def test_node_dashboard_content():
    d = load(next(p for p in DASHBOARDS if p.name == "perf-exporter-node.json"))
    t = titles(d)
    need = {
        "IPC": "short", "IPC per CPU": "short", "Cache miss ratio": "percentunit",
        "L1d load misses per 1000 instructions": "short", "LLC load misses per 1000 instructions": "short",
        "Branch miss ratio": "percentunit", "DRAM bandwidth per socket": "Bps", "DRAM bandwidth": "Bps",
        "Counting time per set (running / enabled)": "percentunit", "Context switches and migrations": "short",
        "Page faults": "short", "Metrics this host cannot count": "short",
    }
    for title, unit in need.items():
        assert title in t, title
        assert t[title]["fieldConfig"]["defaults"]["unit"] == unit, title
    # IPC overall is a time series and a stat
    assert {p["type"] for p in panels(d) if p["title"] == "IPC"} == {"stat", "timeseries"}
    assert "by (cpu, core, socket, pmu)" in t["IPC per CPU"]["targets"][0]["expr"]
    assert "by (socket)" in t["DRAM bandwidth per socket"]["targets"][0]["expr"]
    exprs_ = " ".join(x["expr"] for x in t["DRAM bandwidth per socket"]["targets"])
    assert "perf_dram_read_bytes_total" in exprs_ and "perf_dram_write_bytes_total" in exprs_
    assert "perf_group_running_seconds_total" in t["Counting time per set (running / enabled)"]["targets"][0]["expr"]
    vs = {v["name"]: v for v in d["templating"]["list"]}
    assert vs["instance"]["multi"] is False, "a node dashboard shows one node"


def test_per_cpu_panels_work_at_every_level():
    """A query grouped by `cpu` also groups by `core` and `socket` (the
    `per:` levels of the exporter's sets), so it has data on the default
    config (per socket) as on a per-CPU one (issue 29)."""
    for path in DASHBOARDS:
        for p in panels(load(path)):
            for t in p.get("targets", []):
                for by in re.findall(r"\bby\s*\(([^)]*)\)", t.get("expr", "")):
                    labels = {x.strip() for x in by.split(",")}
                    if "cpu" in labels:
                        assert {"core", "socket"} <= labels, (path.name, p["title"], by)


def rankings(t: dict[str, dict], units: dict[str, str]):
    """The ranking panels (title: unit): instant bar gauges; yields (title, panel)."""
    for title, unit in units.items():
        p = t[title]
        assert p["type"] == "bargauge" and p["fieldConfig"]["defaults"]["unit"] == unit, title
        assert p["targets"][0]["instant"] is True, title
        yield title, p


def test_cluster_dashboard_content():
    d = load(next(p for p in DASHBOARDS if p.name == "perf-exporter-cluster.json"))
    t = titles(d)
    for title, p in rankings(t, {"IPC by node": "short", "DRAM bandwidth by node": "Bps",
                                 "Cache miss ratio by node": "percentunit",
                                 "Branch miss ratio by node": "percentunit"}):
        e = p["targets"][0]["expr"]
        assert e.startswith("sort_desc(") and "by (instance)" in e, title
    vs = {v["name"]: v for v in d["templating"]["list"]}
    assert vs["instance"]["multi"] is True and vs["instance"]["includeAll"] is True


def test_mutated_dashboard_fails_lint():
    d = copy.deepcopy(load(DASHBOARDS[0]))
    p = next(panels(d))
    p["targets"][0]["expr"] = p["targets"][0]["expr"].replace(', instance=~"$instance"', "")
    assert any(lint_expr(t["expr"]) for _, t in exprs(d))


def test_layout_has_no_overlaps(dash):
    cells = {}
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (p["title"], g)
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_pods_dashboard_content():
    d = load(next(p for p in DASHBOARDS if p.name == "perf-exporter-pods.json"))
    t = titles(d)
    for title, p in rankings(t, {"Top pods by cycles share": "percentunit", "Lowest IPC": "short",
                                 "LLC misses per kilo-instruction": "short", "Context switches": "short"}):
        e = p["targets"][0]["expr"]
        assert p["targets"][0]["legendFormat"] == "{{namespace}}/{{pod}}", title
        assert re.match(r"sort(_desc)?\(\n(top|bottom)k\(10,", e), title
    assert "bottomk" in t["Lowest IPC"]["targets"][0]["expr"]
    assert "perf_cpu_cycles_total{" in t["Top pods by cycles share"]["targets"][0]["expr"], "share of the node's cycles"
    for p in panels(d):
        for tgt in p["targets"]:
            e = tgt["expr"]
            for sel in re.findall(r"perf_cgroup_[a-z_]+\{([^}]*)\}", e):
                assert 'container_id=""' in sel, (p["title"], "pod-level series only: a pod counts its containers")
            if "perf_cgroup_" in e and EXCLUDED not in e:
                assert "* on (pod_uid) group_left (namespace, pod)" in e, p["title"]
                assert "kube_pod_annotations{" in e, (p["title"], "static pods named through their mirror pod")
    drill = [p for p in panels(d) if p["title"].endswith("of the pod") or "of the pod " in p["title"]]
    assert len(drill) >= 5
    for p in drill:
        for tgt in p["targets"]:
            assert 'kube_pod_info{namespace=~"$namespace", pod=~"$pod"}' in tgt["expr"], p["title"]
    vs = {v["name"]: v for v in d["templating"]["list"]}
    assert vs["namespace"]["multi"] is True and vs["namespace"]["query"]["query"] == "label_values(kube_pod_info, namespace)"
    assert vs["pod"]["multi"] is False and '$namespace' in vs["pod"]["query"]["query"], "the drill-down shows one pod"
    assert [v["name"] for v in d["templating"]["list"]] == ["datasource", "job", "instance", "namespace", "pod"]
    unnamed = t["Static pods without a name"]["targets"][0]["expr"]
    assert 'static_pod="true"' in unnamed and EXCLUDED in unnamed and "kube_pod_annotations{" in unnamed
