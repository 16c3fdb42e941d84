"""The image, built for real from the Dockerfile (buildah, on the stand-in
base images of scripts/images.sh) and run under real runtimes with the Helm
chart's securityContext: containerd (its default seccomp profile, which is
what the chart's RuntimeDefault means there) and podman (its own default
profile). Each case asserts on /metrics, the log and the exit code.

What these tests measure is what docs/src/guide/deploy.md claims; a runtime
that is missing fails the tests loudly (scripts/images.sh installs them)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

import pytest

from conftest import REPO
from test_chart import render, variant_values
from containers import (BUILD_TIMEOUT, CACHE, RUNTIME_BASE, RUNTIME_BASE_ARM64, RUST_BASE, STAMP, Containerd, Store, free_port, get, poll,
                        sh)

IMAGE = "localhost/perf-exporter:test"
ROOT = "localhost/perf-exporter:test-root"
NOCAP = "localhost/perf-exporter:test-nocap"
# Counted on any Linux host, PMU or not: software events.
# Sample lines (not HELP/TYPE), summed per node by the default config or
# per CPU by another: with or without labels.
SOFTWARE = ("\nperf_cpu_clock_seconds_total", "\nperf_context_switches_total")
CAP_PERFMON_BIT = 38


@pytest.fixture(scope="session")
def store():
    if not STAMP.exists():
        pytest.fail(f"{STAMP} missing: run scripts/images.sh (stand-in base images, runtimes)")
    return Store()


@pytest.fixture(scope="session")
def image(store):
    """The Dockerfile built for real (layers cached in the private store, the
    cargo registry and target dir in buildah's cache mounts)."""
    t0 = time.monotonic()
    # The machine's trust store for the build only (cargo through a TLS proxy).
    store.buildah("bud", "--layers", "--network", "host", "--pull-never", "--volume", "/etc/ssl/certs:/etc/ssl/certs:ro",
                  "--build-arg", f"RUST_IMAGE={RUST_BASE}", "--build-arg", f"RUNTIME_IMAGE={RUNTIME_BASE}",
                  "-t", IMAGE, "-f", REPO / "Dockerfile", REPO, timeout=BUILD_TIMEOUT)
    # The build stage's cached steps of older sources: kept a week, then dropped.
    # Housekeeping only: podman refuses a store its database recorded under
    # another path (the shared .cache reached through another checkout's
    # symlink), which must not fail the tests.
    pruned = store.podman("image", "prune", "--force", "--filter", "until=168h", check=False)
    if pruned.returncode != 0:
        print(f"\nimage prune skipped: {pruned.stderr.strip()}", file=sys.stderr)
    size = store.buildah("images", "--format", "{{.Size}}", IMAGE).stdout.strip()
    print(f"\nimage {IMAGE}: built in {time.monotonic() - t0:.0f} s, size {size}", file=sys.stderr)
    store.derive(IMAGE, ROOT, user="0:0")
    store.derive(IMAGE, NOCAP, drop_file_caps=True)
    return IMAGE


# containerd releases: Debian bookworm's (installed), trixie's and sid's
# (unpacked by scripts/images.sh).
CONTAINERD = {"bookworm": None, "trixie": CACHE / "containerd/trixie/usr/bin",
              "sid": CACHE / "containerd/sid/usr/bin"}


@pytest.fixture(scope="session", params=list(CONTAINERD))
def containerd(request, store, image):
    bindir = CONTAINERD[request.param]
    if bindir and not (bindir / "containerd").exists():
        pytest.fail(f"{bindir}/containerd missing: run scripts/images.sh")
    ctrd = Containerd(bindir)
    print(f"\ncontainerd {ctrd.version()} (Debian {request.param})", file=sys.stderr)
    try:
        for i in (IMAGE, ROOT, NOCAP):
            ctrd.import_image(store, i)
        yield ctrd
    finally:
        ctrd.stop()


def args(port: int) -> list[str]:
    return ["--path.sysfs=/host/sys", f"--web.listen-address=127.0.0.1:{port}", "--log.level=info"]


def scrape(port: int, log) -> str:
    """/metrics once it answers 200 with the software counters."""
    def ok():
        r = get(f"http://127.0.0.1:{port}/metrics")
        return r and r[0] == 200 and all(s in r[1] for s in SOFTWARE) and r[1]
    try:
        return poll("/metrics serves the software counters", ok, 30)
    except AssertionError as e:
        raise AssertionError(f"{e}\nlog:\n{log()}") from None


def caps_of(pid: int) -> tuple[int, int]:
    """(effective uid, effective capability mask) of a host pid; its
    bounding set must hold PERFMON alone (every other capability dropped),
    and a seccomp filter must be on (the runtime's default profile)."""
    status = Path(f"/proc/{pid}/status").read_text()
    assert re.search(r"(?m)^Seccomp:\s+2$", status), "no seccomp filter"
    assert re.search(r"(?m)^NoNewPrivs:\s+1$", status), "no_new_privs is off"
    uid = int(re.search(r"(?m)^Uid:\s+\d+\s+(\d+)", status).group(1))
    eff = int(re.search(r"(?m)^CapEff:\s+([0-9a-f]+)", status).group(1), 16)
    bnd = int(re.search(r"(?m)^CapBnd:\s+([0-9a-f]+)", status).group(1), 16)
    assert bnd == 1 << CAP_PERFMON_BIT, f"bounding set {bnd:#x}: more than CAP_PERFMON"
    return uid, eff


def test_image_binary_is_stripped_and_carries_the_file_capability(store, image):
    c = store.buildah("from", "--pull-never", image).stdout.strip()
    try:
        root = Path(store.buildah("mount", c).stdout.strip())
        binary = root / "bin/perf-exporter"
        sections = sh(["readelf", "-SW", binary]).stdout
        assert ".symtab" not in sections, "the release binary is stripped (profile.release strip = true)"
        assert sh(["getcap", binary]).stdout.split()[-1] == "cap_perfmon=ep"
        print(f"\nbinary: {binary.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    finally:
        store.buildah("rm", c, check=False)
    cfg = store.buildah("inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}}", image).stdout.strip()
    assert cfg == "65532:65532"


def test_multi_arch_image_builds_for_arm64(store):
    """The Dockerfile's multi-arch build, tried for linux/arm64 on this host
    without emulation: the build stage runs on the host and cross-compiles,
    the final stage (the arm64 stand-in base) runs nothing. The image says
    arm64, and its binary is an AArch64 executable for the arm64 dynamic
    loader, stripped, with the file capability. (Running it is the emulated
    guest's business: tests/arm64_guest.rs.)"""
    tag = "localhost/perf-exporter:test-arm64"
    t0 = time.monotonic()
    host = sh(["dpkg", "--print-architecture"]).stdout.strip()
    # buildah 1.28 (Debian 12) sets neither BUILDPLATFORM nor BUILDARCH; newer builders do.
    store.buildah("bud", "--layers", "--network", "host", "--pull-never", "--platform", "linux/arm64",
                  "--build-arg", f"BUILDPLATFORM=linux/{host}", "--build-arg", f"BUILDARCH={host}",
                  "--volume", "/etc/ssl/certs:/etc/ssl/certs:ro",
                  "--build-arg", f"RUST_IMAGE={RUST_BASE}", "--build-arg", f"RUNTIME_IMAGE={RUNTIME_BASE_ARM64}",
                  "-t", tag, "-f", REPO / "Dockerfile", REPO, timeout=BUILD_TIMEOUT)
    print(f"\nimage {tag}: built in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    fmt = "{{.OCIv1.OS}}/{{.OCIv1.Architecture}} {{.OCIv1.Config.User}}"
    assert store.buildah("inspect", "--type", "image", "--format", fmt, tag).stdout.split() == \
        ["linux/arm64", "65532:65532"]
    c = store.buildah("from", "--pull-never", "--arch", "arm64", tag).stdout.strip()
    try:
        root = Path(store.buildah("mount", c).stdout.strip())
        binary = root / "bin/perf-exporter"
        header = sh(["readelf", "-hlW", binary]).stdout
        assert re.search(r"Machine:\s+AArch64", header), header
        assert "[Requesting program interpreter: /lib/ld-linux-aarch64.so.1]" in header, header
        assert (root / "lib/ld-linux-aarch64.so.1").exists(), "the arm64 base has no arm64 loader"
        assert ".symtab" not in sh(["readelf", "-SW", binary]).stdout
        assert sh(["getcap", binary]).stdout.split()[-1] == "cap_perfmon=ep"
    finally:
        store.buildah("rm", c, check=False)


def chart_context(ci: str | None) -> dict:
    """The rendered chart's securityContext (default values, or a ci file),
    as the ctr run options that carry it out."""
    r = render(variant_values(ci) if ci else {})
    pod, sc = r.pod_spec()["securityContext"], r.container()["securityContext"]
    assert sc["capabilities"]["drop"] == ["ALL"] and sc["readOnlyRootFilesystem"] is True
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}  # ctr --seccomp: the runtime's default
    return {"image": {0: ROOT, 65532: IMAGE}[pod["runAsUser"]], "caps": sc["capabilities"]["add"],
            "allow_new_privs": sc["allowPrivilegeEscalation"]}


def test_containerd_root_with_perfmon_serves(containerd):
    """privilege.mode root (the chart's default): uid 0, only CAP_PERFMON,
    no_new_privs (allowPrivilegeEscalation false), containerd's default
    seccomp profile."""
    ctx = chart_context(None)
    assert ctx == {"image": ROOT, "caps": ["PERFMON"], "allow_new_privs": False}
    port = free_port()
    task = containerd.run(ctx["image"], "root-perfmon", args(port), ctx["caps"], allow_new_privs=ctx["allow_new_privs"])
    body = scrape(port, task.log)
    assert "perf_exporter_build_info{" in body
    uid, eff = caps_of(task.pid())
    assert uid == 0 and eff == 1 << CAP_PERFMON_BIT, f"uid {uid}, CapEff {eff:#x}"
    assert "CAP_PERFMON=yes" in task.log(), task.log()
    assert task.status() == "RUNNING"


def test_containerd_non_root_file_capability_serves_with_no_new_privs(containerd):
    """privilege.mode fileCapabilities: uid 65532 gains CAP_PERFMON from the
    binary's file capability, even with no_new_privs (allowPrivilegeEscalation
    false): the runtime puts the added capabilities in the permitted set
    before exec, and the kernel caps exec-time gains under no_new_privs only
    to that set."""
    ctx = chart_context("filecapabilities-values.yaml")
    assert ctx == {"image": IMAGE, "caps": ["PERFMON"], "allow_new_privs": False}
    port = free_port()
    task = containerd.run(ctx["image"], "nonroot-filecap", args(port), ctx["caps"],
                          allow_new_privs=ctx["allow_new_privs"])
    scrape(port, task.log)
    uid, eff = caps_of(task.pid())
    assert uid == 65532 and eff == 1 << CAP_PERFMON_BIT, f"uid {uid}, CapEff {eff:#x}"
    assert "CAP_PERFMON=yes" in task.log(), task.log()


def test_containerd_non_root_without_file_capability_explains_and_exits(containerd):
    """The image pipeline lost the xattr: uid 65532 holds nothing; the
    exporter says why and what to do, and exits non-zero."""
    r = containerd.run_to_exit(NOCAP, "nonroot-nocap", args(free_port()), ["PERFMON"])
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "nothing can be counted" in out and "CAP_PERFMON=no" in out, out
    assert "setcap cap_perfmon=ep" in out, out


def podman(store, image: str, caps: list[str], *, no_new_privs: bool = True, user: str = "0") -> tuple[bool, int | None, str]:
    """Runs image under podman as the chart's securityContext says (podman's
    default seccomp profile), until /metrics serves the software counters or
    the exporter exits: (served, exit code or None, log)."""
    port = free_port()
    name = f"pe-test-{port}"
    # Explicit nofile and nproc limits: podman 4.3 would raise them above the
    # inherited hard limits, which needs CAP_SYS_RESOURCE (dropped here).
    flags = ["run", "--detach", "--name", name, "--network", "host", "--read-only", "--cap-drop", "all",
             "--user", user, "--ulimit", "nofile=8192:8192", "--ulimit", "nproc=4096:4096", "--pull", "never",
             "-v", "/sys:/host/sys:ro"]
    flags += [f for c in caps for f in ("--cap-add", c)]
    if no_new_privs:
        flags += ["--security-opt", "no-new-privileges"]
    try:
        store.podman(*flags, image, *args(port))
        def outcome():
            r = get(f"http://127.0.0.1:{port}/metrics")
            if r and r[0] == 200 and all(s in r[1] for s in SOFTWARE):
                return "served"
            r = store.podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name, check=False)
            if r.returncode != 0 and "no such process" in r.stderr:
                # podman reads the container's /proc/PID/cgroup while it
                # exits: a race of its own, polled again.
                return None
            if r.returncode != 0:
                raise AssertionError(f"podman inspect {name} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
            state = r.stdout.split()
            return state[0] == "exited" and f"exited {state[1]}"
        got = poll(f"podman {image} serves or exits", outcome, 30)
        log = store.podman("logs", name, check=False)
        return got == "served", None if got == "served" else int(got.split()[1]), log.stdout + log.stderr
    finally:
        store.podman("rm", "--force", "--time", "0", name, check=False)


def test_podman_default_seccomp_perfmon_alone_cannot_count(store, image):
    """Podman's default seccomp profile allows perf_event_open only with
    CAP_SYS_ADMIN: with CAP_PERFMON alone every open fails with EPERM although
    the capability is held, and the exporter exits."""
    served, code, log = podman(store, ROOT, ["PERFMON"])
    assert not served and code == 1, log
    assert "CAP_PERFMON=yes" in log and "permission denied (errno 1)" in log and "nothing can be counted" in log, log


def test_podman_default_seccomp_message_names_seccomp(store, image):
    """Issue 10, defect 9: the cause named is the seccomp profile, with what
    to change; a process that holds CAP_PERFMON is not told to grant it."""
    served, code, log = podman(store, ROOT, ["PERFMON"])
    assert not served and code == 1, log
    assert "a seccomp profile (or an LSM) is the likely cause" in log, f"the message names seccomp:\n{log}"
    assert "--security-opt seccomp=" in log, log
    assert "grant CAP_PERFMON" not in log, log


def test_podman_default_seccomp_with_sys_admin_serves(store, image):
    served, code, log = podman(store, ROOT, ["PERFMON", "SYS_ADMIN"])
    assert served, f"exit {code}:\n{log}"


def test_podman_non_root_file_capability_serves_with_no_new_privs(store, image):
    """As under containerd: podman puts the added capabilities in a non-root
    user's permitted set too, so no_new_privs does not stop the file
    capability (fileCapabilities works with allowPrivilegeEscalation false)."""
    caps = ["PERFMON", "SYS_ADMIN"]  # SYS_ADMIN: podman's seccomp profile (the binary gains PERFMON only)
    served, code, log = podman(store, image, caps, user="65532")
    assert served, f"exit {code}:\n{log}"
    assert "euid=65532 CAP_PERFMON=yes CAP_SYS_ADMIN=no" in log, log


# ---- per-pod counting: a cgroup opened with CAP_PERFMON only ---------------------

# The host's cgroup v2 root on this machine (a hybrid host).
CGROUP_V2 = Path("/sys/fs/cgroup/unified")


@contextlib.contextmanager
def cgroup_with_workload(name: str):
    """A cgroup CGROUP_V2/<name>/app holding a process that sleeps 1 ms in a
    loop (context switches, a little CPU time); killed and removed on exit,
    also when the test fails."""
    top = CGROUP_V2 / name
    app = top / "app"
    app.mkdir(parents=True)
    proc = None
    try:
        proc = subprocess.Popen(["python3", "-c", "import time\nwhile True: time.sleep(0.001)"])
        (app / "cgroup.procs").write_text(str(proc.pid))
        yield f"{name}/app"
    finally:
        if proc:
            proc.kill()
            proc.wait(10)
        for d in (app, top):
            poll(f"rmdir {d}", lambda d=d: not d.exists() or _rmdir(d), 10)


def _rmdir(d: Path) -> bool:
    try:
        d.rmdir()
        return True
    except OSError:
        return False


def cgroup_values(rel: str) -> dict:
    """The chart's values for counting one explicit cgroup (preset none,
    the software set: this machine has no PMU) on this host's v2 root."""
    return {"cgroups": {"hostPath": str(CGROUP_V2), "preset": "none", "paths": [rel], "sets": ["software"]}}


def series(body: str, metric: str, rel: str) -> float:
    """The value of metric{cgroup="rel"} in an exposition."""
    for line in body.splitlines():
        if line.startswith(metric + "{") and f'cgroup="{rel}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {metric}{{cgroup={rel!r}}} in:\n" + "\n".join(
        line for line in body.splitlines() if line.startswith("perf_cgroup_")))


@pytest.mark.parametrize("ci", [None, "filecapabilities-values.yaml"])
def test_containerd_counts_a_cgroup_with_perfmon_only(containerd, ci, tmp_path):
    """The chart's per-pod counting needs no capability beyond PERFMON: with
    the chart's securityContext (uid 0, or uid 65532 with the file
    capability), its cgroup mount (the host's root, read-only, at
    /host/cgroup) and its config, the exporter opens a cgroup directory for
    PERF_FLAG_PID_CGROUP and counts the workload in it."""
    rel = f"cgdeploy-{os.getpid()}-{'filecap' if ci else 'root'}"
    with cgroup_with_workload(rel) as rel:
        values = cgroup_values(rel)
        if ci:
            values.update(variant_values(ci))
        r = render(values)
        c = r.container()
        assert c["securityContext"]["capabilities"]["add"] == ["PERFMON"]
        (vol,) = [v for v in r.pod_spec()["volumes"] if v["name"] == "cgroup"]
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "cgroup"]
        assert mount["readOnly"] is True
        cm = [o for o in r.kinds("ConfigMap") if "config.yaml" in o["data"]][0]
        cfg = tmp_path / "config.yaml"
        cfg.write_text(cm["data"]["config.yaml"])
        cfg.chmod(0o644)
        tmp_path.chmod(0o755)
        assert yaml.safe_load(cfg.read_text())["cgroups"]["paths"] == [rel]
        port = free_port()
        flags = [a for a in c["args"] if a.startswith(("--config.file", "--path."))]
        assert "--path.cgroupfs=/host/cgroup" in flags
        ctx = chart_context(ci)
        task = containerd.run(ctx["image"], f"cgroup-{'filecap' if ci else 'root'}", [*flags, f"--web.listen-address=127.0.0.1:{port}"],
                              ctx["caps"], allow_new_privs=ctx["allow_new_privs"],
                              mounts=[(vol["hostPath"]["path"], mount["mountPath"]), (tmp_path, "/etc/perf-exporter")])

        def counted():
            got = get(f"http://127.0.0.1:{port}/metrics")
            if not got or got[0] != 200 or f'cgroup="{rel}"' not in got[1]:
                return None
            body = got[1]
            return series(body, "perf_cgroup_context_switches_total", rel) > 0 and body

        try:
            body = poll("/metrics counts the cgroup's context switches", counted, 30)
        except AssertionError as e:
            raise AssertionError(f"{e}\nlog:\n{task.log()}") from None
        assert series(body, "perf_cgroup_cpu_clock_seconds_total", rel) > 0
        uid, eff = caps_of(task.pid())
        assert eff == 1 << CAP_PERFMON_BIT and uid == (65532 if ci else 0), f"uid {uid}, CapEff {eff:#x}"
