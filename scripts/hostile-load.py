#!/usr/bin/env python3
"""Measurements under hostile load (docs/src/performance.md, "Reloads, floods and hostile clients"); reports, never
assertions. Run through scripts/sighup-storm.sh.

  storm: a storm of SIGHUPs (100 by default, 10 ms apart) on a simulated
         512-CPU, 2-socket node (the shape of benches/support/sysfs_gen.rs,
         SHAPE_512, which the benchmarks use), while one client scrapes
         /metrics back to back: the scrape latency before and during the
         storm, and how many reloads actually ran (they are coalesced).
  flood: 2,000 connections at once, each asking for /metrics, on the same
         node: the exporter's RSS before, at the peak and after the flood.

Usage: hostile-load.py storm|flood EXPORTER [--sighups N] [--connections N]
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKX = os.path.join(ROOT, "tests/fixtures/sysfs/intel-skx/bus/event_source/devices")


def generate_512(root, cpus=512, sockets=2, imcs=8):
    """The 512-CPU tree of benches/support/sysfs_gen.rs (SHAPE_512)."""
    dst = os.path.join(root, "bus/event_source/devices")
    os.makedirs(dst)
    per_socket = cpus // sockets
    last = cpus - 1
    firsts = ",".join(str(s * per_socket) for s in range(sockets))
    for pmu in ["breakpoint", "cpu", "kprobe", "msr", "software", "tracepoint",
                "uprobe", "power", "cstate_pkg", "cstate_core"]:
        shutil.copytree(os.path.join(SKX, pmu), os.path.join(dst, pmu))
    for pmu, mask in [("power", firsts), ("cstate_pkg", firsts), ("cstate_core", f"0-{last}")]:
        with open(os.path.join(dst, pmu, "cpumask"), "w") as f:
            f.write(mask + "\n")
    for i in range(imcs):
        d = os.path.join(dst, f"uncore_imc_{i}")
        shutil.copytree(os.path.join(SKX, "uncore_imc_0"), d)
        with open(os.path.join(d, "type"), "w") as f:
            f.write(f"{100 + i}\n")
        with open(os.path.join(d, "cpumask"), "w") as f:
            f.write(firsts + "\n")
    cpu = os.path.join(root, "devices/system/cpu")
    os.makedirs(cpu)
    for n in ["online", "possible", "present"]:
        with open(os.path.join(cpu, n), "w") as f:
            f.write(f"0-{last}\n")
    with open(os.path.join(cpu, "offline"), "w") as f:
        f.write("\n")
    for c in range(cpus):
        t = os.path.join(cpu, f"cpu{c}/topology")
        os.makedirs(t)
        for n, v in [("physical_package_id", c // per_socket), ("die_id", 0),
                     ("core_id", c % per_socket)]:
            with open(os.path.join(t, n), "w") as f:
                f.write(f"{v}\n")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(port, path, timeout=30.0):
    """One GET over a fresh connection: (status, body bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, body


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Exporter:
    def __init__(self, exe, sysfs, extra=()):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        self.p = subprocess.Popen(
            [exe, "serve", "--simulate", "--path.sysfs", sysfs,
             f"--web.listen-address=127.0.0.1:{self.port}", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if get(self.port, "/-/ready", 2)[0] == 200:
                    return
            except OSError:
                pass
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"the exporter did not become ready:\n{self.output()}")

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def storm(exe, sysfs, sighups):
    e = Exporter(exe, sysfs)
    try:
        baseline = []
        for _ in range(20):
            t = time.monotonic()
            status, _ = get(e.port, "/metrics")
            baseline.append(time.monotonic() - t)
            assert status == 200, status
        during, failed = [], 0
        stop = threading.Event()

        def scraper():
            nonlocal failed
            while not stop.is_set():
                t = time.monotonic()
                try:
                    status, _ = get(e.port, "/metrics")
                except OSError:
                    status = 0
                during.append(time.monotonic() - t)
                failed += status != 200

        th = threading.Thread(target=scraper)
        th.start()
        t0 = time.monotonic()
        for _ in range(sighups):
            e.p.send_signal(signal.SIGHUP)
            time.sleep(0.01)
        sent = time.monotonic() - t0
        # Scrape on until the reloads asked for have run (the log stops
        # growing for a second), at most 120 s.
        deadline, last, quiet = time.monotonic() + 120, -1, 0.0
        while time.monotonic() < deadline and quiet < 1.0:
            n = e.output().count("configuration reloaded")
            quiet = quiet + 0.1 if n == last else 0.0
            last = n
            time.sleep(0.1)
        stop.set()
        th.join()
        reloads = e.output().count("configuration reloaded")
        ms = lambda x: f"{x * 1e3:.0f} ms"
        print(f"SIGHUP storm: {sighups} SIGHUPs in {sent:.2f} s, simulated 512-CPU node")
        print(f"  reloads run: {reloads} (coalesced; at most one running and one pending)")
        print(f"  scrape latency before: median {ms(quantile(baseline, 0.5))}, "
              f"worst {ms(max(baseline))} ({len(baseline)} scrapes)")
        print(f"  scrape latency during: median {ms(quantile(during, 0.5))}, "
              f"p99 {ms(quantile(during, 0.99))}, worst {ms(max(during))} "
              f"({len(during)} scrapes, {failed} failed)")
        print(f"  RSS after: {rss_kib(e.p.pid) / 1024:.1f} MiB")
    finally:
        e.stop()


def flood(exe, sysfs, connections):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, connections + 64)), hard))
    e = Exporter(exe, sysfs)
    try:
        for _ in range(3):
            get(e.port, "/metrics")
        print(f"connection flood: {connections} connections asking for /metrics at once, "
              f"simulated 512-CPU node; RSS before: {rss_kib(e.p.pid) / 1024:.1f} MiB")
        for round_ in (1, 2):
            flood_once(e, connections, round_)
    finally:
        e.stop()


def flood_once(e, connections, round_):
    peak, done = rss_kib(e.p.pid), threading.Event()

    def watch():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_kib(e.p.pid))
            time.sleep(0.01)

    w = threading.Thread(target=watch)
    w.start()
    socks = []
    t0 = time.monotonic()
    for _ in range(connections):
        try:
            s = socket.create_connection(("127.0.0.1", e.port), timeout=60)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            socks.append(s)
        except OSError:
            pass
    answered = 0
    for s in socks:
        try:
            head = s.recv(64)
            answered += head.startswith(b"HTTP/1.1 200")
            while s.recv(1 << 16):
                pass
        except OSError:
            pass
        s.close()
    took = time.monotonic() - t0
    done.set()
    w.join()
    after = rss_kib(e.p.pid)
    time.sleep(5)
    settled = rss_kib(e.p.pid)
    print(f"  flood {round_}: {took:.1f} s, {answered} answered 200 (the rest closed or "
          f"answered 503 by the connection and request limits); RSS peak "
          f"{peak / 1024:.1f} MiB, right after {after / 1024:.1f} MiB, "
          f"5 s later {settled / 1024:.1f} MiB")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("storm", "flood"):
        raise SystemExit(__doc__)
    mode, exe = sys.argv[1], sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    with tempfile.TemporaryDirectory(prefix="perf-exporter-512-") as d:
        sysfs = os.path.join(d, "sys")
        generate_512(sysfs)
        with open("/proc/cpuinfo") as f:
            model = re.search(r"model name\s*:\s*(.*)", f.read())
        print(f"machine: {os.cpu_count()} CPUs, {model.group(1) if model else '?'}, "
              f"kernel {os.uname().release}, binary {exe}")
        if mode == "storm":
            storm(exe, sysfs, int(opts.get("--sighups", 100)))
        else:
            flood(exe, sysfs, int(opts.get("--connections", 2000)))


if __name__ == "__main__":
    main()
