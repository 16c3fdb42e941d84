#!/usr/bin/env python3
"""A pipe ping-pong between two processes, each in its own cgroup: every
hand-off is a context switch from one cgroup to the other (both pinned to
one CPU, so no switch goes through idle).

    pingpong.py CGROUP_A CGROUP_B ROUND_TRIPS

Prints the nanoseconds per context switch twice: by the wall clock
(elapsed / (2 * ROUND_TRIPS)) and by the CPU time of the two processes
(user + system time of both / (2 * ROUND_TRIPS)). The second leaves out the
time other processes ran on that CPU meanwhile (a shared machine's main
noise) and keeps the switch path: the kernel charges the time of
__schedule(), BPF programs on sched_switch included, to the two tasks it
switches between.
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
        os.read(ping_r, 1)  # go
        c = time.process_time_ns()
        for _ in range(n):
            os.read(ping_r, 1)
            os.write(pong_w, b"x")
        os.write(pong_w, (time.process_time_ns() - c).to_bytes(8, "little"))
        os._exit(0)
    join(a)
    os.read(pong_r, 1)
    t = time.perf_counter_ns()
    c = time.process_time_ns()
    os.write(ping_w, b"g")
    for _ in range(n):
        os.write(ping_w, b"x")
        os.read(pong_r, 1)
    dt = time.perf_counter_ns() - t
    dc = time.process_time_ns() - c
    dc += int.from_bytes(os.read(pong_r, 8), "little")
    os.waitpid(pid, 0)
    print(f"{dt / (2 * n):.0f} {dc / (2 * n):.0f}")


if __name__ == "__main__":
    main()
