"""The pods dashboard (grafana/dashboards/perf-exporter-pods.json), built with
the panel helpers of scripts/gen-deploy-assets.py (passed in as `k`).

It reads the per-cgroup families of the `kubernetes` preset (`perf_cgroup_*`
with `pod_uid`, `qos_class`, and `container_id` on container series) and
names pods by joining kube-state-metrics' `kube_pod_info` on `uid`, as the
recording rules in grafana/rules/perf-exporter.rules.yml do. Only pod-level
series (`container_id=""`) are read: a pod's cgroup already counts its
containers. kube_pod_info is filtered by the namespace (and, in the
drill-down, pod) variables instead of job/instance: it comes from
kube-state-metrics, not from the exporter. Static pods (`static_pod="true"`)
have the kubelet's config hash as their cgroup uid, which kube_pod_info
does not list (it has their mirror pods): they are named through the
mirror pod's `kubernetes.io/config.hash` annotation (kube_pod_annotations,
when kube-state-metrics exports it), and listed by uid where it does not.
"""

from __future__ import annotations

TOP = 10
# Pod-level series of the selected nodes.
POD = 'container_id=""'
# The metrics the panels read, for the availability table (node-level names:
# a per-cgroup metric is counted with the node-level metric's encoding).
READ = ("perf_cpu_cycles_total", "perf_instructions_total", "perf_cache_misses_total",
        "perf_context_switches_total", "perf_cpu_migrations_total", "perf_page_faults_total",
        "perf_cpu_clock_seconds_total")


# The pods' CPU time from the kernel's cpu.stat (read by the exporter every
# cgroups.rank_interval, 30 s by default): robust where perf's cgroup clock
# counts a pod that switches context often low (README "Accuracy of
# per-cgroup CPU time").
USAGE = "perf_cgroup_cpu_usage_seconds_total"
USAGE_NOTE = ("From the kernel's own accounting (cpu.stat usage_usec, as cAdvisor's "
              "container_cpu_usage_seconds_total), which the exporter reads every cgroups.rank_interval "
              "(30 s by default), not at each scrape: over a range shorter than about two of those the "
              "line steps.")


# The static pods' config hash, as kube-state-metrics exports the mirror
# pod's annotation (only when allowed: --metric-annotations-allowlist).
HASH = "annotation_kubernetes_io_config_hash"


def static_info(matchers: str) -> str:
    """kube_pod_annotations of the mirror pods, by the static pod's cgroup uid."""
    sel = f'{matchers}, ' if matchers else ""
    return (f'label_replace(max by ({"namespace, pod, " if matchers else ""}{HASH}) '
            f'(kube_pod_annotations{{{sel}{HASH}=~".+"}}), "pod_uid", "$1", "{HASH}", "(.+)")')


def pod_info(pod_filter: bool) -> str:
    """kube_pod_info with the exporter's label name for the uid, one series per
    pod, and the static pods by their mirror pod's config hash annotation."""
    matchers = 'namespace=~"$namespace"' + (', pod=~"$pod"' if pod_filter else "")
    return (f'(\nlabel_replace(max by (namespace, pod, uid) (kube_pod_info{{{matchers}}}), '
            f'"pod_uid", "$1", "uid", "(.+)")\nor\n{static_info(matchers)}\n)')


def named(expr: str, pod_filter: bool = False) -> str:
    """expr (by instance, pod_uid) with the namespace and pod name; pods not in
    the selected namespaces (or not the selected pod) drop out."""
    return f"{expr}\n* on (pod_uid) group_left (namespace, pod)\n{pod_info(pod_filter)}"


def per_pod(k, metric: str, extra: str = "", by: str = "instance, pod_uid") -> str:
    return f"sum by ({by}) ({k.rate(metric, POD + (', ' + extra if extra else ''))})"


def ipc(k) -> str:
    return f"{per_pod(k, 'perf_cgroup_instructions_total')}\n/\n{per_pod(k, 'perf_cgroup_cpu_cycles_total')}"


def mpki(k) -> str:
    return (f"1000 * {per_pod(k, 'perf_cgroup_cache_misses_total')}\n/\n"
            f"{per_pod(k, 'perf_cgroup_instructions_total')}")


def cycles_share(k) -> str:
    """A pod's cycles over all cycles of its node (node-level family)."""
    return (f"{per_pod(k, 'perf_cgroup_cpu_cycles_total')}\n/ on (instance) group_left ()\n"
            f"{k.sum_rate('perf_cpu_cycles_total', 'instance')}")


def ranked(k, lay, title: str, desc: str, unit: str, expr: str, top: str, **kw) -> dict:
    """A bar gauge of the TOP pods by expr (highest first; `bottomk` lowest first)."""
    order = "sort_desc" if top == "topk" else "sort"
    p = k.bargauge(lay, title, desc, unit, f"{order}(\n{top}({TOP},\n{named(expr)}\n)\n)", **kw)
    p["targets"][0]["legendFormat"] = "{{namespace}}/{{pod}}"
    return p


def over_time(k, lay, title: str, desc: str, unit: str, expr: str, top: str = "topk", **kw) -> dict:
    """The TOP pods by expr over time (each step's top)."""
    return k.timeseries(lay, title, desc, unit,
                        k.targets((f"{top}({TOP},\n{named(expr)}\n)", "{{namespace}}/{{pod}}")),
                        legend_table=True, **kw)


def drill(k, lay, title: str, desc: str, unit: str, *specs, **kw) -> dict:
    """The selected pod ($pod): (expr, legend) pairs, each named by the join."""
    return k.timeseries(lay, title, desc, unit,
                        k.targets(*((named(e, pod_filter=True), l) for e, l in specs)), **kw)


def variables(k) -> list[dict]:
    return k.variables(instance_multi=True) + [
        k.query_var("namespace", "Namespace", "label_values(kube_pod_info, namespace)", multi=True),
        k.query_var("pod", "Pod (drill-down)", 'label_values(kube_pod_info{namespace=~"$namespace"}, pod)', multi=False),
    ]


def availability(k, lay) -> dict:
    metrics = "|".join(READ)
    sel = f'{k.SEL}, metric=~"{metrics}"'
    expr = f"perf_event_available{{{sel}}} == 0"
    return k.table(lay, "Metrics these nodes cannot count, for any pod",
                   "The metrics this dashboard reads that a node cannot count (perf_event_available == 0): "
                   "a per-pod counter uses the node-level metric's encoding, so the pods of that node lack it too. "
                   "With the class (not_on_platform: expected, e.g. no core PMU in a VM; failed: should be "
                   "countable) and the reason code. The exporter's status page (/) and `perf-exporter check` "
                   "explain each; `perf-exporter check` also lists the cgroups counted and left out "
                   "(cgroups.max_cgroups).",
                   "short", expr, no_value="Every metric of this dashboard is counted on every selected node",
                   mappings=[{"type": "value", "options": {"0": {"text": k.NOT_AVAILABLE, "color": "orange", "index": 0}}}],
                   exclude=("job",),
                   rename={"instance": "Node", "metric": "Metric", "event": "Encoding tried", "pmu": "PMU",
                           "Value": "Status", "class": "Class", "reason": "Reason"})


def unnamed_static(k, lay) -> dict:
    """The static pods no annotation names, by uid, with their CPU."""
    cpu = per_pod(k, USAGE, 'static_pod="true"')
    expr = f"{cpu}\nunless on (pod_uid)\n{static_info('')}"
    return k.table(lay, "Static pods without a name",
                   "Static pods (etcd, kube-apiserver, ... from the kubelet's manifest directory, "
                   "static_pod=\"true\") that the other panels cannot name, with their CPU time (cores). A static "
                   "pod's cgroup carries the kubelet's config hash as its uid, while kube-state-metrics' "
                   "kube_pod_info lists its mirror pod under another uid; the panels above name it through the "
                   "mirror pod's kubernetes.io/config.hash annotation, which kube-state-metrics exports in "
                   "kube_pod_annotations only when started with "
                   "--metric-annotations-allowlist=pods=[kubernetes.io/config.hash]. Listed here until it does.",
                   "short", expr, no_value="Every static pod is named (or there is none)",
                   rename={"instance": "Node", "pod_uid": "Pod uid (config hash)", "Value": "CPU (cores)"},
                   h=6)


def pods_dashboard(k) -> dict:
    lay = k.Layout()
    p: list[dict] = []
    need = ("Needs kube-state-metrics (kube_pod_info) for the pod names, and the exporter's kubernetes "
            "preset (cgroups.preset).")
    # docs/src/guide/per-workload.md, "Accuracy of per-cgroup CPU time".
    switchy = ("A pod switching context tens of thousands of times per second is counted low by the "
               "kernel's perf accounting (measured: cpu-clock 12-18% below cpu.stat at 50k-150k "
               "switches/s, both backends and perf stat alike); read it with the pod's CPU time (from "
               "cpu.stat, which does not lose it) and context switches.")

    p.append(lay.row("Noisy neighbours"))
    p.append(ranked(k, lay, "Top pods by cycles share",
                    f"The {TOP} pods using the largest share of their node's CPU cycles (the pod's cycles / all "
                    f"cycles of the node, counted by the core PMU). {switchy} {need}",
                    "percentunit", cycles_share(k), "topk", max_=1, decimals=1))
    p.append(ranked(k, lay, "Lowest IPC",
                    f"The {TOP} pods retiring the fewest instructions per cycle: stalled on memory, on "
                    f"branch mispredictions or on a noisy neighbour. An idle pod's IPC rests on few cycles; read it "
                    f"with its cycles share. {need}",
                    "short", ipc(k), "bottomk", decimals=2))
    p.append(ranked(k, lay, "LLC misses per kilo-instruction",
                    f"The {TOP} pods with the most cache misses (cache-misses: the CPU's definition, usually "
                    f"the last-level cache) per 1000 instructions: the pods that thrash the shared cache. {need}",
                    "short", mpki(k), "topk", decimals=2))
    p.append(ranked(k, lay, "Context switches",
                    f"The {TOP} pods switching context most often, per second (all their tasks, all CPUs). {need}",
                    "short", per_pod(k, "perf_cgroup_context_switches_total"), "topk"))
    p.append(ranked(k, lay, "Top pods by CPU time",
                    f"The {TOP} pods using the most CPU, in CPU seconds per second (cores). {USAGE_NOTE} {need}",
                    "short", per_pod(k, USAGE), "topk", decimals=2))

    p.append(lay.row("Over time"))
    p.append(over_time(k, lay, "Cycles share per pod", f"Each pod's share of its node's CPU cycles, the top {TOP}. {switchy}",
                       "percentunit", cycles_share(k), max_=1))
    p.append(over_time(k, lay, "IPC per pod", f"Instructions per cycle of the {TOP} pods with the lowest IPC.",
                       "short", ipc(k), top="bottomk", decimals=2))
    p.append(over_time(k, lay, "LLC misses per kilo-instruction per pod",
                       f"Cache misses per 1000 instructions, the top {TOP} pods.", "short", mpki(k), decimals=2))
    p.append(over_time(k, lay, "Context switches per pod", f"Context switches per second, the top {TOP} pods.",
                       "short", per_pod(k, "perf_cgroup_context_switches_total")))

    p.append(lay.row("Pod $pod"))
    p.append(drill(k, lay, "IPC of the pod", "Instructions per cycle of the selected pod (variable pod), on each node it ran on.",
                   "short", (ipc(k), "{{pod}} on {{instance}}"), w=8, decimals=2))
    p.append(drill(k, lay, "Cycles share of the pod", f"The selected pod's share of its node's CPU cycles. {switchy}",
                   "percentunit", (cycles_share(k), "{{pod}} on {{instance}}"), w=8, max_=1))
    p.append(drill(k, lay, "LLC misses per kilo-instruction of the pod",
                   "Cache misses (usually last-level) per 1000 instructions of the selected pod.",
                   "short", (mpki(k), "{{pod}} on {{instance}}"), w=8, decimals=2))
    p.append(drill(k, lay, "Cycles and instructions of the pod", "CPU cycles and instructions retired per second by the selected pod.",
                   "short", (per_pod(k, "perf_cgroup_cpu_cycles_total"), "cycles/s"),
                   (per_pod(k, "perf_cgroup_instructions_total"), "instructions/s")))
    p.append(drill(k, lay, "Software events of the pod", "Context switches, CPU migrations and page faults per second of the selected pod.",
                   "short", (per_pod(k, "perf_cgroup_context_switches_total"), "context switches/s"),
                   (per_pod(k, "perf_cgroup_cpu_migrations_total"), "CPU migrations/s"),
                   (per_pod(k, "perf_cgroup_page_faults_total"), "page faults/s")))
    p.append(drill(k, lay, "CPU time of the pod", "CPU seconds per second the selected pod's tasks ran: the CPUs it "
                   f"used. {USAGE_NOTE} perf's cpu-clock of the pod, for comparison, counts a pod that switches "
                   "context tens of thousands of times per second low.",
                   "s", (per_pod(k, USAGE), "cpu.stat, {{pod}} on {{instance}}"),
                   (per_pod(k, "perf_cgroup_cpu_clock_seconds_total"), "perf cpu-clock, {{pod}} on {{instance}}")))
    # A set whose groups could not open (no PMU for it) has no enabled time: no ratio.
    running = (f"{per_pod(k, 'perf_cgroup_group_running_seconds_total', by='instance, pod_uid, set')}\n/\n"
               f"({per_pod(k, 'perf_cgroup_group_enabled_seconds_total', by='instance, pod_uid, set')} > 0)")
    p.append(drill(k, lay, "Counting time of the pod (running / enabled)",
                   "The share of its enabled time each of the pod's counter sets was on the PMU. Below 100% the "
                   "pod's counts are scaled estimates (multiplexing).",
                   "percentunit", (running, "{{set}} on {{instance}}"), max_=1))

    p.append(lay.row("Availability"))
    p.append(availability(k, lay))
    p.append(unnamed_static(k, lay))

    return k.dashboard(
        "perf-exporter-pods",
        "perf-exporter / Pods",
        "Which pod has the low IPC, thrashes the last-level cache or switches context most: the noisy "
        "neighbours, ranked, and one pod in detail.",
        p, instance_multi=True, links_to="perf-exporter", template_vars=variables(k),
    )
