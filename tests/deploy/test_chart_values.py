"""The chart's values that follow prometheus-community's node-exporter chart:
the metrics path as one value, TLS/auth from the exporter's web config,
global.imageRegistry/imagePullSecrets, revisionHistoryLimit, the
annotation-based scrape annotations, headless Service options, the
monitors' options; and that the rules select the job each monitor example
yields."""

from __future__ import annotations

import json
import re

from test_chart import CI_FILES, NAMESPACE, RELEASE, render, render_error, variant_values


def args_of(r) -> list[str]:
    return r.container()["args"]


def test_metrics_path_is_one_value():
    r = render({"metricsPath": "/perf/metrics", "prometheus": {"monitor": {"enabled": True}}})
    assert "--web.telemetry-path=/perf/metrics" in args_of(r)
    assert r.one("ServiceMonitor")["spec"]["endpoints"][0]["path"] == "/perf/metrics"
    assert r.one("Service")["metadata"]["annotations"]["prometheus.io/path"] == "/perf/metrics"
    assert "svc:9659/perf/metrics" in " ".join(r.one("Pod")["spec"]["containers"][0]["command"])
    assert "/perf/metrics" in r.notes
    pm = render({"metricsPath": "/perf/metrics", "service": {"enabled": False},
                 "prometheus": {"podMonitor": {"enabled": True}}}).one("PodMonitor")
    assert pm["spec"]["podMetricsEndpoints"][0]["path"] == "/perf/metrics"
    # A monitor's own path wins.
    sm = render({"prometheus": {"monitor": {"enabled": True, "path": "/other"}}}).one("ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["path"] == "/other"
    # Through extraArgs it would silently break scraping: refused.
    for flag, value in (("--web.telemetry-path=/x", "metricsPath"), ("--web.config.file=/w.yml", "webConfig.file"),
                        ("--web.listen-address=:1", "port")):
        assert value in render_error({"extraArgs": [flag]})


def test_web_config_from_a_secret_switches_to_https():
    r = render(variant_values("tls-values.yaml"))
    c = r.container()
    assert "--web.config.file=/etc/perf-exporter/web/web.yml" in c["args"]
    assert {"name": "web-config", "mountPath": "/etc/perf-exporter/web", "readOnly": True} in c["volumeMounts"]
    vols = {v["name"]: v for v in r.pod_spec()["volumes"]}
    assert vols["web-config"]["secret"]["secretName"] == "perf-exporter-web-config"
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["scheme"] == "HTTPS", probe
    assert c["livenessProbe"]["httpGet"]["httpHeaders"][0]["name"] == "Authorization"
    ep = r.one("ServiceMonitor")["spec"]["endpoints"][0]
    assert ep["scheme"] == "https" and ep["path"] == "/perf/metrics"
    assert ep["basicAuth"]["password"] == {"name": "perf-exporter-scrape", "key": "password"}
    cmd = " ".join(r.one("Pod")["spec"]["containers"][0]["command"])
    assert "https://" in cmd and "--no-check-certificate" in cmd
    assert "webConfig.file" in render_error({"webConfig": {"tls": True}})
    # Plain HTTP by default.
    d = render({"prometheus": {"monitor": {"enabled": True}}})
    assert d.one("ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "http"
    assert not any(a.startswith("--web.config.file") for a in args_of(d))


def test_global_image_registry_and_pull_secrets():
    r = render(variant_values("tls-values.yaml"))
    assert r.container()["image"].startswith("mirror.example.com/perf-exporter/perf-exporter:")
    assert r.one("Pod")["spec"]["containers"][0]["image"] == "mirror.example.com/library/busybox:1.37"
    want = [{"name": "mirror-pull"}, {"name": "regcred"}]
    assert r.pod_spec()["imagePullSecrets"] == want
    assert r.one("Pod")["spec"]["imagePullSecrets"] == want
    d = render()
    assert d.container()["image"].startswith("ghcr.io/") and "imagePullSecrets" not in d.pod_spec()
    both = render({"global": {"imagePullSecrets": [{"name": "a"}, "b"]}, "imagePullSecrets": [{"name": "a"}]})
    assert both.pod_spec()["imagePullSecrets"] == [{"name": "a"}, {"name": "b"}]


def test_revision_history_limit():
    assert render().one("DaemonSet")["spec"]["revisionHistoryLimit"] == 10
    assert render(variant_values("tls-values.yaml")).one("DaemonSet")["spec"]["revisionHistoryLimit"] == 3


def test_prometheus_io_scrape_annotations():
    ann = render().one("Service")["metadata"]["annotations"]
    assert ann == {"prometheus.io/scrape": "true", "prometheus.io/path": "/metrics",
                   "prometheus.io/port": "9659", "prometheus.io/scheme": "http"}
    ann = render(variant_values("tls-values.yaml")).one("Service")["metadata"]["annotations"]
    assert ann == {"prometheus.io/scrape": "false"}
    ann = render({"service": {"annotations": {"prometheus.io/scrape": None}}}).one("Service")["metadata"]
    assert "annotations" not in ann


def test_headless_service_options():
    spec = render(variant_values("tls-values.yaml")).one("Service")["spec"]
    assert spec["clusterIP"] == "None" and spec["internalTrafficPolicy"] == "Local"
    spec = render({"service": {"ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv4", "IPv6"]}}).one("Service")["spec"]
    assert spec["ipFamilyPolicy"] == "PreferDualStack" and spec["ipFamilies"] == ["IPv4", "IPv6"]
    spec = render().one("Service")["spec"]
    assert not {"clusterIP", "ipFamilyPolicy", "ipFamilies", "internalTrafficPolicy"} & set(spec)


def test_monitor_options():
    opts = {"enabled": True, "honorLabels": True, "sampleLimit": 1000, "podTargetLabels": ["team"]}
    sm = render({"prometheus": {"monitor": {**opts, "targetLabels": ["app.kubernetes.io/instance"]}}}).one("ServiceMonitor")
    assert sm["spec"]["sampleLimit"] == 1000 and sm["spec"]["podTargetLabels"] == ["team"]
    assert sm["spec"]["targetLabels"] == ["app.kubernetes.io/instance"]
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True
    pm = render({"service": {"enabled": False}, "prometheus": {"podMonitor": opts}}).one("PodMonitor")
    assert pm["spec"]["sampleLimit"] == 1000 and pm["spec"]["podTargetLabels"] == ["team"]
    assert pm["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    d = render({"prometheus": {"monitor": {"enabled": True}}}).one("ServiceMonitor")
    assert not {"sampleLimit", "podTargetLabels", "targetLabels"} & set(d["spec"])
    assert "honorLabels" not in d["spec"]["endpoints"][0]


def monitor_job(r) -> str | None:
    """The job label Prometheus gives the targets of the rendered monitor
    (prometheus-operator: the value of the jobLabel label of the Service or
    pod; without it, the Service's name or "namespace/podmonitor")."""
    for kind, labels_of, default in (
            ("ServiceMonitor", lambda: r.one("Service")["metadata"]["labels"], lambda m: r.one("Service")["metadata"]["name"]),
            ("PodMonitor", lambda: r.one("DaemonSet")["spec"]["template"]["metadata"]["labels"],
             lambda m: f"{m['metadata']['namespace']}/{m['metadata']['name']}")):
        for m in r.kinds(kind):
            eps = m["spec"].get("endpoints") or m["spec"].get("podMetricsEndpoints")
            for ep in eps:
                for rl in ep.get("relabelings", []):
                    assert rl.get("targetLabel") != "job", "a relabeling rewrites job: teach this test"
            return labels_of().get(m["spec"].get("jobLabel", ""), default(m))
    return None


def test_rules_select_the_job_each_monitor_yields():
    checked = []
    for ci in CI_FILES:
        r = render(variant_values(ci.name))
        job = monitor_job(r)
        if job is None or not r.kinds("PrometheusRule"):
            continue
        text = json.dumps(r.one("PrometheusRule")["spec"]["groups"])
        selected = set(re.findall(r'job=\\"([^"\\]*)\\"', text))
        assert selected == {job}, f"{ci.name}: the monitor yields job={job!r}, the rules select {selected}"
        checked.append(ci.name)
    assert {"monitoring-values.yaml", "podmonitor-values.yaml"} <= set(checked), checked


def test_job_check_covers_service_and_pod_monitors():
    """The check above is not vacuous: both monitor kinds, a renamed job, and
    the mismatch it exists for."""
    jobs = {ci.name: monitor_job(render(variant_values(ci.name))) for ci in CI_FILES}
    assert jobs["monitoring-values.yaml"] == "perf-exporter"
    assert jobs["podmonitor-values.yaml"] == "node-perf"
    old = variant_values("podmonitor-values.yaml")
    del old["nameOverride"]
    assert monitor_job(render(old)) == "perf-exporter"  # what the old example yielded against job="node-perf"
    assert RELEASE and NAMESPACE


def test_kube_rbac_proxy():
    r = render(variant_values("kuberbacproxy-values.yaml"))
    pod = r.pod_spec()
    exporter, proxy = pod["containers"]
    assert proxy["name"] == "kube-rbac-proxy" and proxy["image"] == "quay.io/brancz/kube-rbac-proxy:v0.19.1"
    # The exporter on loopback only, without a port of its own; the proxy serves TLS on `port`.
    assert "--web.listen-address=127.0.0.1:9658" in exporter["args"]
    assert "ports" not in exporter and "livenessProbe" not in exporter
    assert proxy["ports"] == [{"name": "metrics", "containerPort": 9659, "protocol": "TCP"}]
    assert "--secure-listen-address=:9659" in proxy["args"]
    assert "--upstream=http://127.0.0.1:9658/" in proxy["args"]
    assert "--ignore-paths=/-/healthy,/-/ready" in proxy["args"]
    assert "--tls-cert-file=/etc/kube-rbac-proxy/tls/tls.crt" in proxy["args"]
    assert proxy["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["kube-rbac-proxy-tls"]["secret"]["secretName"] == "perf-exporter-tls"
    sc = proxy["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False
    # The proxy calls TokenReview and SubjectAccessReview with the mounted token.
    assert pod["automountServiceAccountToken"] is True
    (role,) = [o for o in r.kinds("ClusterRole") if not o["metadata"]["name"].endswith("-test")]
    assert {(g, res) for rule in role["rules"] for g in rule["apiGroups"] for res in rule["resources"]} == {
        ("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")}
    binding = [o for o in r.kinds("ClusterRoleBinding") if o["roleRef"]["name"] == role["metadata"]["name"]][0]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    ep = r.one("ServiceMonitor")["spec"]["endpoints"][0]
    assert ep["scheme"] == "https" and ep["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    # helm test scrapes with a token allowed to get metricsPath.
    test = r.one("Pod")
    assert "Authorization: Bearer" in " ".join(test["spec"]["containers"][0]["command"])
    (test_role,) = [o for o in r.kinds("ClusterRole") if o["metadata"]["name"].endswith("-test")]
    assert test_role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert test["spec"]["serviceAccountName"] == test_role["metadata"]["name"]
    assert "kubeRBACProxy" in render_error({"kubeRBACProxy": {"enabled": True}, "webConfig": {"file": "/w.yml"}})
    # Off by default: no RBAC, no token.
    d = render()
    assert not d.kinds("ClusterRole") and d.pod_spec()["automountServiceAccountToken"] is False
    assert len(d.pod_spec()["containers"]) == 1


def test_kube_rbac_proxy_with_a_pod_monitor_takes_a_token_secret():
    auth = {"type": "Bearer", "credentials": {"name": "prometheus-token", "key": "token"}}
    r = render({"kubeRBACProxy": {"enabled": True}, "service": {"enabled": False},
                "prometheus": {"podMonitor": {"enabled": True, "authorization": auth}}})
    ep = r.one("PodMonitor")["spec"]["podMetricsEndpoints"][0]
    assert ep["scheme"] == "https" and ep["authorization"] == auth and "bearerTokenFile" not in ep


def test_config_gauge_is_in_the_schema():
    """config/default.yaml declares readings `gauge: true`: the schema takes
    the boolean (the chart's lint failed on it) and nothing else."""
    sets = [{"name": "m", "events": [{"metric": "perf_margin_celsius", "gauge": True,
                                      "event": "msr/cpu_thermal_margin/"}]}]
    # A one-set config: without per-pod counting, whose default sets it lacks.
    gauge = {"config": {"sets": sets}, "cgroups": {"enabled": False}}
    assert "gauge: true" in [o for o in render(gauge).kinds("ConfigMap")
                             if "config.yaml" in o["data"]][0]["data"]["config.yaml"]
    gauge["config"]["sets"][0]["events"][0]["gauge"] = "yes"
    assert "schema" in render_error(gauge)
