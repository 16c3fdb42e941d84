#!/usr/bin/env python3
"""Per-cgroup CPU time as perf counts it, against the cgroup's cpu.stat.

    cgroup-cpu-time.py EXPORTER [SECONDS] [ROUNDS]

As root, on a cgroup2 host (the root is the cgroup2 mount of
/proc/self/mountinfo, e.g. /sys/fs/cgroup/unified on a hybrid host). For
each backend (perf, bpf) and ROUNDS times, it creates three cgroups:

* `busy`: a python busy loop (almost no context switches);
* `ping`, `pong`: the two ends of a pipe ping-pong, pinned to one CPU, so
  every hand-off is a context switch from one cgroup to the other (tens of
  thousands per second);

starts `EXPORTER serve` counting them (cpu-clock, task-clock,
context-switches), and over SECONDS (default 10) compares each cgroup's
cpu-clock and task-clock increase with its cpu.stat usage_usec increase
(each read right after a scrape), and the ping-pong cgroup's cpu-clock with
`perf stat -a -G` over the same window. Prints one line per cgroup and run
and the range of the ratios. Removes what it created, also on Ctrl-C.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CONFIG = """sets:
  - name: software
    per_cpu: false
    events:
      - metric: perf_cpu_clock_seconds_total
        event: cpu-clock
      - metric: perf_task_clock_seconds_total
        event: {{ event: task-clock, scale: 1e-9, unit: seconds }}
      - metric: perf_context_switches_total
        event: context-switches
cgroups:
  preset: none
  backend: {backend}
  paths: [{paths}]
  sets: [software]
"""

BUSY = "while True: pass\n"

PING = """
import os, sys
cpu = min(os.sched_getaffinity(0)); os.sched_setaffinity(0, {cpu})
pr, pw = os.pipe(); qr, qw = os.pipe()
if os.fork() == 0:
    open(sys.argv[2] + '/cgroup.procs', 'w').write(str(os.getpid()))
    while True:
        os.read(pr, 1); os.write(qw, b'x')
open(sys.argv[1] + '/cgroup.procs', 'w').write(str(os.getpid()))
while True:
    os.write(pw, b'x'); os.read(qr, 1)
"""


def cgroup2_root() -> str:
    for line in open("/proc/self/mountinfo"):
        left, _, right = line.partition(" - ")
        if right.split(" ")[0] == "cgroup2":
            return left.split(" ")[4]
    sys.exit("no cgroup2 mount")


def usage_s(cg: str) -> float:
    for line in open(os.path.join(cg, "cpu.stat")):
        k, v = line.split()
        if k == "usage_usec":
            return int(v) * 1e-6
    raise RuntimeError("no usage_usec")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r'^(perf_cgroup_\w+)\{(.*)\} (\S+)$', line)
        if m:
            cg = re.search(r'cgroup="([^"]*)"', m.group(2))
            if cg:
                out[(m.group(1), cg.group(1))] = float(m.group(3))
    return out


def wait_ready(port: int, proc) -> None:
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("the exporter exited")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2)
            return
        except Exception:
            time.sleep(0.1)
    sys.exit("the exporter never got ready")


def remove(path: str) -> None:
    for _ in range(500):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


def run(exporter: str, backend: str, seconds: float, root: str, tag: str) -> list:
    top = os.path.join(root, f"pe-cputime-{os.getpid()}-{tag}")
    names = ["busy", "ping", "pong"]
    dirs = {n: os.path.join(top, n) for n in names}
    procs = []
    exp = None
    tmp = tempfile.mkdtemp()
    try:
        os.mkdir(top)
        for d in dirs.values():
            os.mkdir(d)
        rel = {n: os.path.relpath(d, root) for n, d in dirs.items()}
        busy = subprocess.Popen(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec python3 -c "$2"', "sh", dirs["busy"], BUSY])
        procs.append(busy)
        procs.append(subprocess.Popen(["python3", "-c", PING, dirs["ping"], dirs["pong"]]))
        cfg = os.path.join(tmp, "c.yaml")
        open(cfg, "w").write(CONFIG.format(backend=backend, paths=", ".join(json.dumps(r) for r in rel.values())))
        port = free_port()
        exp = subprocess.Popen([exporter, "--config.file", cfg, "--web.listen-address", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
        wait_ready(port, exp)
        time.sleep(1)  # the ping-pong and the busy loop settle
        perf = subprocess.Popen(["perf", "stat", "-a", "-x", ",", "-e", "cpu-clock,context-switches",
                                 "-G", f"{rel['ping']},{rel['ping']}", "--", "sleep", str(seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        s0 = scrape(port)
        u0 = {n: usage_s(d) for n, d in dirs.items()}
        perf_err = perf.communicate()[1]
        s1 = scrape(port)
        u1 = {n: usage_s(d) for n, d in dirs.items()}
        perf_ms = None
        for line in perf_err.splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2] == "cpu-clock":
                perf_ms = float(f[0])
        rows = []
        for n in names:
            r = rel[n]
            d = lambda fam: s1.get((fam, r), 0.0) - s0.get((fam, r), 0.0)
            stat = u1[n] - u0[n]
            row = {
                "backend": backend, "cgroup": n, "cpu_stat_s": stat,
                "cpu_clock_s": d("perf_cgroup_cpu_clock_seconds_total"),
                "task_clock_s": d("perf_cgroup_task_clock_seconds_total"),
                "switches_per_s": d("perf_cgroup_context_switches_total") / seconds,
            }
            if n == "ping" and perf_ms is not None:
                row["perf_stat_cpu_clock_s"] = perf_ms / 1e3
            rows.append(row)
        return rows
    finally:
        if exp is not None:
            exp.send_signal(signal.SIGTERM)
            exp.wait()
        for p in procs:
            p.kill()
            p.wait()
        # The ping-pong's child is in `pong`: kill what is left in the cgroups.
        for d in dirs.values():
            try:
                for pid in open(os.path.join(d, "cgroup.procs")).read().split():
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        for d in dirs.values():
            remove(d)
        remove(top)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    exporter = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    root = cgroup2_root()
    ratios = {}
    for i in range(rounds):
        for backend in ["perf", "bpf"]:
            for row in run(exporter, backend, seconds, root, f"{backend}{i}"):
                ratio = row["cpu_clock_s"] / row["cpu_stat_s"] if row["cpu_stat_s"] else float("nan")
                extra = ""
                if "perf_stat_cpu_clock_s" in row:
                    p = row["perf_stat_cpu_clock_s"] / row["cpu_stat_s"]
                    extra = f"  perf stat -G {row['perf_stat_cpu_clock_s']:.3f} s ({p:.3f})"
                    ratios.setdefault("perf stat", []).append(p)
                ratios.setdefault((backend, row["cgroup"]), []).append(ratio)
                print(f"{backend:4} {row['cgroup']:4} {row['switches_per_s']:8.0f} switches/s  "
                      f"cpu.stat {row['cpu_stat_s']:.3f} s  cpu-clock {row['cpu_clock_s']:.3f} s ({ratio:.3f})  "
                      f"task-clock {row['task_clock_s']:.3f} s{extra}", flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"ratios cpu-clock / cpu.stat (load {load}, {os.cpu_count()} CPUs):")
    for k, v in ratios.items():
        print(f"  {k}: {min(v):.3f} .. {max(v):.3f}")


if __name__ == "__main__":
    main()
