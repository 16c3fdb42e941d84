#!/usr/bin/env python3
"""A busy loop's per-cgroup cpu-clock against its cpu.stat while cgroups are
created and removed around it (issue 24, item 9).

    cgroup-cpu-time-churn.py EXPORTER perf|bpf WINDOWS SECONDS

As root, on a cgroup2 host. Starts a busy loop in `busy`, two more in `load`
(not counted), three threads that each create a cgroup, run a 0.2 s busy
process in it and remove it, over and over, and `EXPORTER serve` counting
`busy` and every `churn-*` cgroup (so slots are assigned and released all
the time). Per window it prints `busy`'s cpu-clock increase and its
cpu.stat increase bracketed (read before and after each scrape: the true
value lies between), how far cpu-clock falls outside the bracket, and the
steal time of each CPU (/proc/stat: with CONFIG_PARAVIRT_TIME_ACCOUNTING,
cpu.stat leaves steal time out and cpu-clock does not).
"""

import importlib.util, os, sys, time, subprocess, threading, signal, tempfile, shutil
spec = importlib.util.spec_from_file_location(
    "cct", os.path.join(os.path.dirname(os.path.abspath(__file__)), "cgroup-cpu-time.py"))
cct = importlib.util.module_from_spec(spec); spec.loader.exec_module(cct)

def steal():
    out = {}
    for l in open("/proc/stat"):
        f = l.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            out[f[0]] = int(f[8]) / 100.0
    return out

def main(exporter, backend, windows, secs):
    root = cct.cgroup2_root()
    top = os.path.join(root, f"pe-over-{os.getpid()}-{backend}")
    os.mkdir(top)
    busy = os.path.join(top, "busy"); os.mkdir(busy)
    load = os.path.join(top, "load"); os.mkdir(load)
    procs = [subprocess.Popen(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec python3 -c "$2"', "sh", d, cct.BUSY]) for d in (busy, load, load)]
    stop = threading.Event()
    made = [0]
    def churn():
        i = 0
        me = threading.get_ident()
        while not stop.is_set():
            d = os.path.join(top, f"churn-{me}-{i}"); i += 1
            os.mkdir(d)
            p = subprocess.Popen(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec python3 -c "import time; t=time.time()\nwhile time.time()-t<0.2: pass"', "sh", d])
            p.wait()
            cct.remove(d)
            made[0] += 1
    ths = [threading.Thread(target=churn) for _ in range(3)]
    [t.start() for t in ths]
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "c.yaml")
    rel = os.path.relpath(top, root)
    open(cfg, "w").write(cct.CONFIG.format(backend=backend, paths=f'"{rel}/busy", "{rel}/churn-*"'))
    port = cct.free_port()
    exp = subprocess.Popen([exporter, "--config.file", cfg, "--web.listen-address", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
    try:
        cct.wait_ready(port, exp)
        time.sleep(1)
        r = f"{rel}/busy"
        def snap():
            a = cct.usage_s(busy); s = cct.scrape(port); b = cct.usage_s(busy)
            return s, a, b
        s0, a0, b0 = snap(); st0 = steal()
        for w in range(windows):
            time.sleep(secs)
            s1, a1, b1 = snap(); st1 = steal()
            c = s1.get(("perf_cgroup_cpu_clock_seconds_total", r), 0) - s0.get(("perf_cgroup_cpu_clock_seconds_total", r), 0)
            lo, hi = a1 - b0, b1 - a0
            dst = {k: round(st1[k] - st0[k], 2) for k in st1}
            over = (c - hi) / hi if c > hi else 0.0
            under = (lo - c) / lo if c < lo else 0.0
            print(f"{backend} window {w}: cpu-clock {c:.3f} s cpu.stat {lo:.3f}..{hi:.3f} s over {over*100:.1f}% under {under*100:.1f}% steal {dst} churned {made[0]} load {open('/proc/loadavg').read().split()[0]}", flush=True)
            s0, a0, b0, st0 = s1, a1, b1, st1
    finally:
        stop.set(); [t.join() for t in ths]
        exp.send_signal(signal.SIGTERM); exp.wait()
        for p in procs: p.kill(); p.wait()
        for d in (busy, load): cct.remove(d)
        for e in os.listdir(top):
            if e.startswith("churn-"): cct.remove(os.path.join(top, e))
        cct.remove(top)
        shutil.rmtree(tmp, ignore_errors=True)

main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
