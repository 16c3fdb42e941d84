#!/usr/bin/env python3
"""A pipe ping-pong between two processes, each in its own cgroup: every
hand-off is a context switch from one cgroup to the other (both pinned to
one CPU, so no switch goes through idle).

    pingpong.py CGROUP_A CGROUP_B ROUND_TRIPS

Prints the nanoseconds per context switch (elapsed / (2 * ROUND_TRIPS)).
"""

import os
import sys
import time


def join(cgroup: str) -> None:
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def main() -> None:
    a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    ping_r, ping_w = os.pipe()
    pong_r, pong_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        join(b)
        os.write(pong_w, b"r")  # ready
        for _ in range(n):
            os.read(ping_r, 1)
            os.write(pong_w, b"x")
        os._exit(0)
    join(a)
    os.read(pong_r, 1)
    t = time.perf_counter_ns()
    for _ in range(n):
        os.write(ping_w, b"x")
        os.read(pong_r, 1)
    dt = time.perf_counter_ns() - t
    os.waitpid(pid, 0)
    print(dt / (2 * n))


if __name__ == "__main__":
    main()
