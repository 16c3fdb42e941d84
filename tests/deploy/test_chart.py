"""The Helm chart deploy/helm/perf-exporter, rendered and linted by Helm's own
SDK (helm-python-sdk, no helm binary) for the default values and for every
ci/*-values.yaml; the manifests validated with kubernetes-validate --strict
(core kinds) and against prometheus-operator's API (custom resources); and
the security and wiring properties asserted on the rendered objects."""

from __future__ import annotations

import copy
import json
import re
import socket
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

from conftest import CGROUP_FIXTURE, CHART, FIXTURES, REPO, RULES, node_bin, run, tsc_check

CI_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
VARIANTS = ["default"] + [f.name for f in CI_FILES]
# Kubernetes versions every variant must validate against: the oldest the
# default values support (recursiveReadOnly is 1.30+) and the newest known.
K8S_VERSIONS = ["1.30.0", kubernetes_validate.utils.latest_version()]
# ci/sysadmin-values.yaml is the older-cluster variant (no recursiveReadOnly).
EXTRA_VERSIONS = {"sysadmin-values.yaml": ["1.25.0"]}
CR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
RELEASE, NAMESPACE = "perf", "monitoring"


def merge(a: dict, b: dict) -> dict:
    """b over a, maps merged deeply and everything else replaced (as Helm does with -f)."""
    out = copy.deepcopy(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def variant_values(variant: str) -> dict:
    if variant == "default":
        return {}
    return yaml.safe_load((CHART / "ci" / variant).read_text()) or {}


class Rendered:
    """The rendered chart: files by template path and the parsed objects."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.notes = files.get("perf-exporter/templates/NOTES.txt", "")
        self.objects: list[dict] = []
        for path, text in sorted(files.items()):
            if path.endswith("NOTES.txt"):
                continue
            for doc in yaml.safe_load_all(text):
                if doc:
                    doc["__template"] = path
                    self.objects.append(doc)

    def kinds(self, kind: str) -> list[dict]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str) -> dict:
        found = self.kinds(kind)
        assert len(found) == 1, f"expected one {kind}, got {len(found)}"
        return found[0]

    def pod_spec(self) -> dict:
        return self.one("DaemonSet")["spec"]["template"]["spec"]

    def container(self) -> dict:
        (c,) = self.pod_spec()["containers"]
        return c


def render(values: dict | None = None) -> Rendered:
    with helm.Chart.load(CHART) as chart:
        return Rendered(chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True))


def render_error(values: dict) -> str:
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmError) as e:
            chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return str(e.value)


@pytest.fixture(scope="module", params=VARIANTS)
def variant(request) -> tuple[str, Rendered]:
    return request.param, render(variant_values(request.param))


def clean(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k != "__template"}


# ---- render, lint, validate -------------------------------------------------


def test_ci_values_exist():
    assert len(CI_FILES) >= 5, CI_FILES


@pytest.mark.parametrize("name", VARIANTS)
def test_lint(name):
    report = helm.lint(CHART, variant_values(name), strict=True, namespace=NAMESPACE)
    bad = [m for m in report["messages"] if m["severity"] >= 2]
    assert not bad and not report["errors"], json.dumps(report, indent=2)


def test_schema_is_enforced_on_values():
    with helm.Chart.load(CHART) as chart:
        assert chart.schema is not None
        chart.validate_schema(chart.values)
        for f in CI_FILES:
            chart.validate_schema(chart.merge_values(yaml.safe_load(f.read_text())))
        bad_values = [
            {"privilege": {"capabilities": ["SYS_PTRACE"]}},
            {"privilege": {"mode": "privileged"}},
            {"unknownKey": 1},
            {"resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": None}},
            {"prometheus": {"monitor": {"interval": "30 seconds"}}},
            {"config": {"sets": [{"name": "core", "events": [{"metric": "bad name", "event": "cycles"}]}]}},
            {"config": {"sets": [{"name": "core", "events": [{"metric": "m", "event": {"scale": 2}}]}]}},
            {"otlp": {"endpoint": "collector:4318"}},
            {"extraArgs": ["config.file=x"]},
            {"resources": None},
            {"seccompProfile": {"type": "Unconfined", "extra": 1}},
        ]
        for v in bad_values:
            # What install and template do: coalesce, then validate against the schema.
            with pytest.raises(helm.HelmError, match="schema"):
                chart.render(v, name=RELEASE, namespace=NAMESPACE)


def k8s_validate(obj: dict, version: str) -> bool:
    """True if validated; False if kubernetes-validate has no schema (a CRD kind)."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
        return True
    except SchemaNotFoundError:
        return False
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} ({obj['__template']}) is invalid "
                    f"for Kubernetes {version}: {path}: {e.message}")


def test_manifests_validate_strict(variant, node_modules, tmp_path):
    name, r = variant
    assert r.objects, "nothing rendered"
    crs = []
    for obj in r.objects:
        for v in K8S_VERSIONS + EXTRA_VERSIONS.get(name, []):
            if not k8s_validate(clean(obj), v):
                assert obj["kind"] in CR_KINDS, f"no schema for {obj['apiVersion']} {obj['kind']}"
                crs.append(clean(obj))
                break
    if not crs:
        return
    # Custom resources: prometheus-operator's API (types, patterns, required)...
    res = run([node_bin(), Path(__file__).parent / "validate-crs.mjs"], input=json.dumps(crs),
              env={"NODE_MODULES_DIR": str(node_modules), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert res.returncode == 0, f"custom resources are invalid:\n{res.stdout}\n{res.stderr}"
    # ...and no field unknown to it (TypeScript excess-property checks).
    lines = ['import type { IServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";',
             'import type { IPodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";',
             'import type { IPrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";']
    for i, cr in enumerate(crs):
        lines.append(f"export const o{i}: I{cr['kind']} = {json.dumps(cr, indent=1)};")
    tsc_check(node_modules, {"crs.ts": "\n".join(lines) + "\n"}, tmp_path)


def test_crd_validation_catches_errors(node_modules, tmp_path):
    """The custom-resource checks above are not vacuous."""
    r = render({"prometheus": {"monitor": {"enabled": True}}})
    sm = clean(r.one("ServiceMonitor"))
    bad = copy.deepcopy(sm)
    bad["spec"]["endpoints"][0]["interval"] = "thirty"
    res = run([node_bin(), Path(__file__).parent / "validate-crs.mjs"], input=json.dumps([bad]),
              env={"NODE_MODULES_DIR": str(node_modules), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert res.returncode == 1 and "interval" in res.stdout, res.stdout + res.stderr
    typo = copy.deepcopy(sm)
    typo["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(AssertionError, match="intervall"):
        tsc_check(node_modules, {"crs.ts": 'import type { IServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";\n'
                                 f"export const o: IServiceMonitor = {json.dumps(typo)};\n"}, tmp_path)


# ---- least privilege --------------------------------------------------------


def all_containers(r: Rendered):
    for o in r.objects:
        spec = o.get("spec", {})
        pod = spec.get("template", {}).get("spec") if o["kind"] == "DaemonSet" else spec if o["kind"] == "Pod" else None
        if pod:
            for c in pod.get("initContainers", []) + pod.get("containers", []):
                yield o, pod, c


def test_nothing_privileged(variant):
    _, r = variant
    seen = 0
    for o, pod, c in all_containers(r):
        seen += 1
        sc = c.get("securityContext", {})
        assert sc.get("privileged") is not True, (o["kind"], c["name"])
        assert sc.get("readOnlyRootFilesystem") is True, (o["kind"], c["name"])
        assert sc["capabilities"]["drop"] == ["ALL"], (o["kind"], c["name"])
        for k in ("hostPID", "hostIPC", "hostNetwork"):
            assert pod.get(k) is not True, (o["kind"], k)
        assert c.get("resources", {}).get("limits"), (o["kind"], c["name"], "no limits")
        assert c.get("resources", {}).get("requests"), (o["kind"], c["name"], "no requests")
    assert seen >= 1
    assert "privileged: true" not in "\n".join(r.files.values())


def test_capabilities_default():
    r = render()
    c = r.container()
    sc = c["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["PERFMON"]}
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["privileged"] is False
    assert sc["readOnlyRootFilesystem"] is True
    pod = r.pod_spec()
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["hostPID"] is False and pod["hostNetwork"] is False
    assert pod["securityContext"]["runAsUser"] == 0  # holding PERFMON only
    assert pod["automountServiceAccountToken"] is False
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]


def test_capabilities_sys_admin_switch():
    r = render(variant_values("sysadmin-values.yaml"))
    sc = r.container()["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["PERFMON", "SYS_ADMIN"]}
    assert sc["allowPrivilegeEscalation"] is False
    r = render({"privilege": {"capabilities": ["SYS_ADMIN"]}})
    assert r.container()["securityContext"]["capabilities"]["add"] == ["SYS_ADMIN"]


def test_bpf_backend_adds_the_bpf_capability_only():
    """cgroups.backend bpf adds BPF (and nothing else) to the container's
    capabilities; auto and perf add nothing (auto then counts with perf
    unless the container may load BPF anyway), nor does bpf with cgroups
    off."""
    r = render({"cgroups": {"backend": "bpf"}})
    assert r.container()["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["PERFMON", "BPF"]}
    for backend in ("auto", "perf"):
        r = render({"cgroups": {"backend": backend}})
        assert r.container()["securityContext"]["capabilities"]["add"] == ["PERFMON"], backend
    r = render({"cgroups": {"backend": "bpf", "enabled": False}})
    assert r.container()["securityContext"]["capabilities"]["add"] == ["PERFMON"]


def test_file_capabilities_mode():
    r = render(variant_values("filecapabilities-values.yaml"))
    pod, c = r.pod_spec(), r.container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    # no_new_privs does not stop the file capability where the runtime fills
    # the permitted set (proven under containerd: test_container.py).
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["PERFMON"]}
    assert c["image"] == ("registry.example.com/infra/perf-exporter@sha256:"
                          "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
    err = render_error({"privilege": {"mode": "fileCapabilities", "capabilities": ["SYS_ADMIN"]}})
    assert "cap_perfmon" in err


def test_sys_read_only():
    r = render()
    pod, c = r.pod_spec(), r.container()
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host == {"sys": "/sys", "cgroup": "/sys/fs/cgroup"}, "only /sys and the cgroup root come from the host"
    for m in c["volumeMounts"]:
        assert m.get("readOnly") is True, m
    (sys_mount,) = [m for m in c["volumeMounts"] if m["name"] == "sys"]
    assert sys_mount["mountPath"] == "/host/sys"
    assert sys_mount["recursiveReadOnly"] == "IfPossible"
    assert "--path.sysfs=/host/sys" in c["args"]
    m = [m for m in render(variant_values("sysadmin-values.yaml")).container()["volumeMounts"] if m["name"] == "sys"]
    assert m[0]["readOnly"] is True and "recursiveReadOnly" not in m[0]


def test_cgroup_root_read_only():
    """The host's cgroup root, read-only, at /host/cgroup (--path.cgroupfs);
    no capability is added for it (opening a cgroup directory needs none:
    test_container.py proves it), and it goes away with cgroups.enabled."""
    r = render()
    pod, c = r.pod_spec(), r.container()
    (vol,) = [v for v in pod["volumes"] if v["name"] == "cgroup"]
    assert vol["hostPath"] == {"path": "/sys/fs/cgroup", "type": "Directory"}
    (m,) = [m for m in c["volumeMounts"] if m["name"] == "cgroup"]
    assert m == {"name": "cgroup", "mountPath": "/host/cgroup", "readOnly": True, "recursiveReadOnly": "IfPossible"}
    assert "--path.cgroupfs=/host/cgroup" in c["args"]
    assert c["securityContext"]["capabilities"]["add"] == ["PERFMON"]
    # A hybrid host: its v2 mount, propagation from the host, and so no recursiveReadOnly.
    r = render(variant_values("cgroups-values.yaml"))
    (vol,) = [v for v in r.pod_spec()["volumes"] if v["name"] == "cgroup"]
    assert vol["hostPath"]["path"] == "/sys/fs/cgroup/unified"
    (m,) = [m for m in r.container()["volumeMounts"] if m["name"] == "cgroup"]
    assert m == {"name": "cgroup", "mountPath": "/host/cgroup", "readOnly": True, "mountPropagation": "HostToContainer"}
    assert r.container()["securityContext"]["capabilities"]["add"] == ["PERFMON"]
    # Off: no mount, no flag, no section.
    r = render({"cgroups": {"enabled": False}})
    assert "cgroup" not in {v["name"] for v in r.pod_spec()["volumes"]}
    assert not [a for a in r.container()["args"] if "cgroupfs" in a]
    cm = [o for o in r.kinds("ConfigMap") if "config.yaml" in o["data"]][0]
    assert "cgroups" not in yaml.safe_load(cm["data"]["config.yaml"])


def test_cgroups_values_make_the_config_section():
    r = render(variant_values("cgroups-values.yaml"))
    cm = [o for o in r.kinds("ConfigMap") if "config.yaml" in o["data"]][0]
    assert yaml.safe_load(cm["data"]["config.yaml"])["cgroups"] == {
        "backend": "perf", "preset": "kubernetes", "containers": True,
        "paths": ["system.slice/containerd.service", "system.slice/kubelet.service"],
        "max_cgroups": 64, "sets": ["core", "software"], "per": "cpu"}
    r = render({"cgroups": {"preset": "none", "paths": ["app/*"]}})
    cm = [o for o in r.kinds("ConfigMap") if "config.yaml" in o["data"]][0]
    section = yaml.safe_load(cm["data"]["config.yaml"])["cgroups"]
    assert section["preset"] == "none" and section["paths"] == ["app/*"]


@pytest.mark.parametrize("values,error", [
    ({"cgroups": {"sets": ["core", "caches"]}}, "cgroups.sets: caches is not a set of config (it has core, cache, "),
    ({"cgroups": {"mountPropagation": "HostToContainer"}}, 'set cgroups.recursiveReadOnly to ""'),
])
def test_cgroups_values_refused(values, error):
    assert error in render_error(values)


@pytest.mark.parametrize("values", [
    {"config": {"sets": [{"name": "core", "events": [{"metric": "m_total", "event": "cycles"}]}],
                "cgroups": {"preset": "kubernetes"}}},
    {"cgroups": {"preset": "k8s"}},
    {"cgroups": {"maxCgroups": 0}},
    {"cgroups": {"mountPropagation": "Bidirectional"}},
    {"cgroups": {"unknown": 1}},
])
def test_cgroups_schema(values):
    """The section comes from cgroups.* only; Bidirectional (privileged only) is refused."""
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmError, match="schema"):
            chart.render(values, name=RELEASE, namespace=NAMESPACE)


# ---- wiring -----------------------------------------------------------------


def test_daemonset_on_every_linux_node():
    r = render()
    pod = r.pod_spec()
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert {"effect": "NoSchedule", "operator": "Exists"} in pod["tolerations"]
    ds = r.one("DaemonSet")
    assert ds["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "perf-exporter", "app.kubernetes.io/instance": RELEASE}


def env_of(c: dict) -> dict:
    return {e["name"]: e for e in c.get("env", [])}


def test_downward_api_env():
    env = env_of(render().container())
    assert env["K8S_NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["K8S_POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert not any(k.startswith("OTEL_") for k in env), "no OTLP unless configured"


def test_otlp_endpoint_from_values():
    r = render(variant_values("networkpolicy-values.yaml"))
    env = env_of(r.container())
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.monitoring.svc:4318"
    attrs = env["OTEL_RESOURCE_ATTRIBUTES"]["value"].split(",")
    assert "k8s.node.name=$(K8S_NODE_NAME)" in attrs and "k8s.cluster.name=prod-eu1" in attrs
    # $(VAR) expansion only sees variables defined earlier in the list.
    names = [e["name"] for e in r.container()["env"]]
    assert names.index("K8S_NODE_NAME") < names.index("OTEL_RESOURCE_ATTRIBUTES")


def test_config_from_configmap():
    r = render()
    cm = [o for o in r.kinds("ConfigMap") if "config.yaml" in o["data"]]
    assert len(cm) == 1
    # The embedded default plus the kubernetes preset (cgroups.* values).
    cfg = yaml.safe_load(cm[0]["data"]["config.yaml"])
    assert cfg.pop("cgroups") == {"backend": "auto", "preset": "kubernetes", "containers": False, "paths": [],
                                  "max_cgroups": 256, "sets": ["core", "cache", "software"], "per": "node"}
    default = yaml.safe_load((REPO / "config/default.yaml").read_text())
    # The chart leaves `derived:` out: a config without one gets the
    # binary's default table (these same entries), also when a user
    # replaces `sets`.
    default.pop("derived")
    assert cfg == default
    c = r.container()
    assert "--config.file=/etc/perf-exporter/config.yaml" in c["args"]
    vols = {v["name"]: v for v in r.pod_spec()["volumes"]}
    assert vols["config"]["configMap"]["name"] == cm[0]["metadata"]["name"]
    # A config change rolls the pods.
    a = r.one("DaemonSet")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    b = render(variant_values("custom-config-values.yaml")).one("DaemonSet")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    assert a != b


@pytest.mark.parametrize("name", ["default", "custom-config-values.yaml"])
def test_binary_accepts_configmap_and_args(name, exporter_bin, tmp_path):
    """The real exporter accepts the rendered config and every flag the DaemonSet passes."""
    r = render(variant_values(name))
    cm = [o for o in r.kinds("ConfigMap") if "config.yaml" in o["data"]][0]
    cfg = tmp_path / "config.yaml"
    cfg.write_text(cm["data"]["config.yaml"])
    fixture = FIXTURES / "intel-skx"
    args = [a.replace("/etc/perf-exporter/config.yaml", str(cfg)).replace("/host/sys", str(fixture))
            .replace("/host/cgroup", str(CGROUP_FIXTURE))
            for a in r.container()["args"]]
    # Serve-only flags (--web.*) are refused by `check`: it gets the others.
    check_args = [a for a in args if not a.startswith("--web.")]
    res = run([exporter_bin, *check_args, "--simulate", "check", "--json"])
    assert res.returncode == 0, f"perf-exporter {check_args} check: {res.stdout}\n{res.stderr}"
    metrics = {m["metric"] for m in json.loads(res.stdout)["metrics"]}
    want = {e["metric"] for s in yaml.safe_load(cfg.read_text())["sets"] for e in s["events"]}
    assert metrics == want
    # Every flag, as the DaemonSet passes them, starts `serve` (on a free
    # loopback port instead of :9659) until it is ready.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve_args = [f"--web.listen-address=127.0.0.1:{port}" if a.startswith("--web.listen-address") else a
                  for a in args]
    proc = subprocess.Popen([str(exporter_bin), *serve_args, "--simulate"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1) as r:
                    ready = r.status == 200
                    break
            except OSError:
                time.sleep(0.05)  # poll interval inside a deadline
        assert ready, f"serve {serve_args} did not become ready (exit {proc.poll()})"
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, f"serve exited {proc.returncode}:\n{out}"


def test_service():
    r = render()
    svc = r.one("Service")
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9659, "targetPort": "metrics", "protocol": "TCP"}]
    assert svc["spec"]["selector"] == r.one("DaemonSet")["spec"]["selector"]["matchLabels"]
    ports = r.container()["ports"]
    assert ports == [{"name": "metrics", "containerPort": 9659, "protocol": "TCP"}]
    probes = r.container()
    assert probes["livenessProbe"]["httpGet"] == {"path": "/-/healthy", "port": "metrics", "scheme": "HTTP"}
    assert probes["readinessProbe"]["httpGet"] == {"path": "/-/ready", "port": "metrics", "scheme": "HTTP"}


def test_service_monitor_only_when_enabled():
    assert render().kinds("ServiceMonitor") == []
    r = render(variant_values("monitoring-values.yaml"))
    sm = r.one("ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kps"
    svc_labels = r.one("Service")["metadata"]["labels"]
    for k, v in sm["spec"]["selector"]["matchLabels"].items():
        assert svc_labels[k] == v
    assert sm["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert svc_labels["app.kubernetes.io/name"] == "perf-exporter"  # job="perf-exporter", as the rules expect
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == "metrics" and ep["interval"] == "30s" and ep["path"] == "/metrics"
    assert ep["relabelings"][0] == {"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                    "targetLabel": "instance", "action": "replace"}
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert r.kinds("PodMonitor") == []


def test_pod_monitor_only_when_enabled():
    assert render().kinds("PodMonitor") == []
    r = render(variant_values("podmonitor-values.yaml"))
    pm = r.one("PodMonitor")
    assert pm["metadata"]["namespace"] == "monitoring"
    assert pm["spec"]["selector"]["matchLabels"] == r.one("DaemonSet")["spec"]["selector"]["matchLabels"]
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    assert r.kinds("ServiceMonitor") == [] and r.kinds("Service") == []
    err = render_error({"prometheus": {"monitor": {"enabled": True}, "podMonitor": {"enabled": True}}})
    assert "not both" in err


def test_prometheus_rule_only_when_enabled():
    assert render().kinds("PrometheusRule") == []
    rules = yaml.safe_load(RULES.read_text())
    pr = render(variant_values("monitoring-values.yaml")).one("PrometheusRule")
    assert pr["spec"]["groups"] == rules["groups"]
    pr = render(variant_values("podmonitor-values.yaml")).one("PrometheusRule")
    text = json.dumps(pr["spec"]["groups"])
    assert 'job=\\"node-perf\\"' in text and "perf-exporter\\\"" not in text.replace('job=\\"node-perf\\"', "")


def test_dashboards_configmap():
    r = render()
    (cm,) = [o for o in r.kinds("ConfigMap") if o["metadata"]["name"].endswith("-dashboards")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    want = {p.name: p.read_text().rstrip("\n") for p in (REPO / "grafana/dashboards").glob("*.json")}
    assert {k: v.rstrip("\n") for k, v in cm["data"].items()} == want
    for text in cm["data"].values():
        json.loads(text)
    r = render(variant_values("monitoring-values.yaml"))
    (cm,) = [o for o in r.kinds("ConfigMap") if o["metadata"]["name"].endswith("-dashboards")]
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Performance"}
    assert not [o for o in render({"dashboards": {"enabled": False}}).kinds("ConfigMap")
                if o["metadata"]["name"].endswith("-dashboards")]


def test_network_policy():
    assert render().kinds("NetworkPolicy") == []
    r = render(variant_values("networkpolicy-values.yaml"))
    np = r.one("NetworkPolicy")
    assert np["spec"]["podSelector"]["matchLabels"] == r.one("DaemonSet")["spec"]["selector"]["matchLabels"]
    assert np["spec"]["policyTypes"] == ["Ingress", "Egress"]
    (ing,) = np["spec"]["ingress"]
    assert ing["ports"] == [{"port": 9659, "protocol": "TCP"}]
    peers = ing["from"]
    assert peers[0] == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    # the helm test pod may scrape too
    test_pod = r.one("Pod")
    assert any(p.get("podSelector", {}).get("matchLabels") == test_pod["metadata"]["labels"] for p in peers)
    egress_ports = [p for rule in np["spec"]["egress"] for p in rule["ports"]]
    assert {"port": 4318, "protocol": "TCP"} in egress_ports
    assert {"port": 53, "protocol": "UDP"} in egress_ports
    # no OTLP: no egress at all
    np = render({"networkPolicy": {"enabled": True}}).one("NetworkPolicy")
    assert np["spec"]["egress"] == [] and "from" not in np["spec"]["ingress"][0]
    np = render({"networkPolicy": {"enabled": True}, "otlp": {"endpoint": "https://otlp.example.com/v1"}}).one("NetworkPolicy")
    assert {"port": 443, "protocol": "TCP"} in [p for rule in np["spec"]["egress"] for p in rule["ports"]]


def test_helm_test_pod():
    r = render()
    pod = r.one("Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    ds_sel = r.one("DaemonSet")["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in ds_sel.items()), "the test pod must not match the DaemonSet/Service selector"
    cmd = " ".join(pod["spec"]["containers"][0]["command"])
    assert f"http://{RELEASE}-perf-exporter.{NAMESPACE}.svc:9659/metrics" in cmd and "perf_exporter_build_info" in cmd
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert render({"tests": {"enabled": False}}).kinds("Pod") == []


def test_notes():
    r = render()
    assert "PERFMON" in r.notes and "helm test perf" in r.notes
    assert "kubectl port-forward" in r.notes


# ---- chart metadata, docs and generated files ----------------------------------


def test_app_version_is_the_crate_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    cargo = tomllib.loads((REPO / "Cargo.toml").read_text())
    assert chart["appVersion"] == cargo["package"]["version"]
    assert chart["name"] == "perf-exporter"


def test_generated_files_are_current():
    """values.yaml's config, the dashboards and the chart's copies of them and of
    the rules are what scripts/gen-deploy-assets.py generates."""
    res = run(["python3", REPO / "scripts/gen-deploy-assets.py", "--check"])
    assert res.returncode == 0, res.stderr


def leaf_keys(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v and k not in ("config", "resources", "nodeSelector", "seccompProfile", "annotations",
                                                     "updateStrategy", "livenessProbe", "readinessProbe"):
            out += leaf_keys(v, path + ".")
        else:
            out.append(path)
    return out


def test_readme_documents_every_value():
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    missing = [k for k in leaf_keys(values) if f"`{k}`" not in readme]
    assert not missing, f"values not documented in {CHART / 'README.md'}: {missing}"
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(schema["properties"]) == set(values), "schema and values.yaml disagree on the top-level keys"
