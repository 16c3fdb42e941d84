"""grafana/rules/perf-exporter.rules.yml: checked and unit-tested by the real
promtool (Prometheus 2.53), and its conventions enforced. (tests/e2e/dashboards.rs
also loads it into a real Prometheus scraping the simulated exporter.)"""

from __future__ import annotations

import re

import yaml

from conftest import RULES, RULES_TEST, run
from test_chart import render


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_promtool_check_rules(promtool):
    r = run([promtool, "check", "rules", RULES])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_unit_tests(promtool):
    r = run([promtool, "test", "rules", RULES_TEST.name], cwd=RULES_TEST.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_every_alert_is_tested(promtool):
    tested = set(re.findall(r"alertname: (\w+)", RULES_TEST.read_text()))
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert alerts == tested


def test_alerts_have_summary_description_severity():
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} >= {
        "PerfExporterDown", "PerfCountersUnavailable", "PerfCountersHeavilyMultiplexed", "PerfExporterScrapeSlow"}
    for a in alerts:
        assert a["annotations"]["summary"].strip(), a["alert"]
        assert len(a["annotations"]["description"]) > 80, a["alert"]
        assert a["labels"]["severity"] in {"info", "warning", "critical"}, a["alert"]
        assert "for" in a, a["alert"]


def test_recording_rules_cover_the_ratios():
    recorded = {r["record"] for r in rules() if "record" in r}
    for name in ("instance:perf_ipc:ratio_rate5m", "instance_cpu:perf_ipc:ratio_rate5m",
                 "instance:perf_cache_miss:ratio_rate5m", "instance:perf_branch_miss:ratio_rate5m",
                 "instance:perf_l1d_read_misses:per_kilo_instructions_rate5m",
                 "instance:perf_llc_read_misses:per_kilo_instructions_rate5m",
                 "instance:perf_l1d_retired_load_misses:per_kilo_instructions_rate5m",
                 "instance:perf_l3_retired_load_misses:per_kilo_instructions_rate5m",
                 "instance:perf_l1d_read_miss:ratio_rate5m", "instance:perf_l1i_read_miss:ratio_rate5m",
                 "instance:perf_llc_read_miss:ratio_rate5m",
                 "instance:perf_l1i_read_misses:per_kilo_instructions_rate5m",
                 "instance:perf_interrupts:rate5m", "instance_cpu:perf_interrupts:rate5m",
                 "instance:perf_softirqs:rate5m", "instance_cpu:perf_softirqs:rate5m",
                 "instance_socket:perf_dram_read_bytes:rate5m", "instance_socket:perf_dram_write_bytes:rate5m",
                 "instance:perf_dram_bytes:rate5m", "instance_set:perf_group_running:ratio_rate5m",
                 *TOPDOWN_SHARES, "instance:perf_topdown_frontend_stall_cycles:ratio_rate5m",
                 "instance:perf_topdown_backend_stall_cycles:ratio_rate5m",
                 *POD_RULES):
        assert name in recorded, name
    for r in rules():
        if "record" in r:
            assert re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", r["record"]), f"level:metric:operations: {r['record']}"


TOPDOWN_SHARES = tuple(f"instance:perf_topdown_{c}:ratio_rate5m" for c in (
    "retiring", "bad_speculation", "frontend_bound", "backend_bound", "smt_contention"))


def test_topdown_shares_divide_slots_and_are_tested_to_add_up():
    """Each level-1 share is its category's slots over the node's slots, and
    the promtool tests check that the shares add up to 1 on every kind of node."""
    exprs = {r["record"]: r["expr"] for r in rules() if "record" in r}
    for share in TOPDOWN_SHARES:
        cat = share.split(":")[1].removeprefix("perf_topdown_")
        assert f"instance_cpu:perf_topdown_{cat}_slots:rate5m" in exprs[share], share
        assert "instance_cpu:perf_topdown_slots:rate5m" in exprs[share], share
    tests = RULES_TEST.read_text()
    added = re.search(r"sum by \(job, instance\) \(\{__name__=~\"instance:perf_topdown_\((.*?)\):ratio_rate5m\"\}\) - 1\) < bool 1e-9", tests)
    assert added, "no promtool test that the shares add up to 1"
    assert set(added.group(1).split("|")) == {s.split(":")[1].removeprefix("perf_topdown_") for s in TOPDOWN_SHARES}
    for node in ("icl", "skl", "zen4"):
        assert f"instance=\"{node}\"" in tests, node


POD_RULES = ("namespace_pod:perf_cgroup_ipc:ratio_rate5m", "namespace_pod:perf_cgroup_cpi:ratio_rate5m",
             "namespace_pod:perf_cgroup_cache_misses:per_kilo_instructions_rate5m")


def test_pod_rules_join_kube_pod_info_on_uid():
    """Pod-level series only, summed over CPUs, named through kube_pod_info's
    uid, or for a static pod through its mirror pod's config.hash annotation,
    and kept (with pod_uid only) for pods kube_pod_info lacks."""
    pods = {r["record"]: r["expr"] for r in rules() if r.get("record", "").startswith("namespace_pod:")}
    assert set(pods) == set(POD_RULES)
    for name, expr in pods.items():
        for sel in re.findall(r"perf_cgroup_[a-z_]+\{([^}]*)\}", expr):
            assert 'container_id=""' in sel, (name, sel)
        assert "by (job, instance, pod_uid, qos_class, static_pod)" in expr, name
        assert "* on (pod_uid) group_left (namespace, pod)" in expr, name
        assert 'label_replace(max by (namespace, pod, uid) (kube_pod_info), "pod_uid", "$1", "uid", "(.+)")' in expr, name
        assert 'kube_pod_annotations{annotation_kubernetes_io_config_hash=~".+"}), "pod_uid", "$1", "annotation_kubernetes_io_config_hash", "(.+)")' in expr, name
        assert "or on (job, instance, pod_uid)" in expr, name


def test_every_selector_has_the_job_matcher():
    """So prometheus.rules.jobSelector can retarget every rule. (kube_pod_info
    and kube_pod_annotations come from kube-state-metrics, whatever its job is
    called: no job matcher.)"""
    for r in rules():
        for name, matchers in re.findall(r"\b([a-z_:]+)\{([^}]*)\}", r["expr"]):
            if name.startswith("kube_pod_"):
                continue
            assert 'job="perf-exporter"' in matchers, (r.get("record") or r.get("alert"), name)
        # A recorded series (`level:perf_...:op`) is named with its colons.
        assert not re.search(r"(?<!:)\b(perf_[a-z_]+|up|scrape_duration_seconds)\b(?![{:])", r["expr"]), r["expr"]


def test_rendered_prometheus_rule_passes_promtool(promtool, tmp_path):
    pr = render({"prometheus": {"rules": {"enabled": True, "jobSelector": 'job="node-perf"'}}}).one("PrometheusRule")
    f = tmp_path / "rendered.rules.yml"
    f.write_text(yaml.safe_dump({"groups": pr["spec"]["groups"]}))
    r = run([promtool, "check", "rules", f])
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'job="perf-exporter"' not in f.read_text()
