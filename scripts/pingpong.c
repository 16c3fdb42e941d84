// A pipe ping-pong between two processes, each in its own cgroup: every
// hand-off is a context switch from one cgroup to the other (both pinned to
// one CPU by the caller, so no switch goes through idle).
//
//     pingpong CGROUP_A CGROUP_B ROUND_TRIPS
//
// Prints the nanoseconds per context switch twice: by the wall clock
// (elapsed / (2 * ROUND_TRIPS)) and by the CPU time of the two processes
// (CLOCK_PROCESS_CPUTIME_ID of both / (2 * ROUND_TRIPS)). The second leaves
// out the time other processes ran on that CPU meanwhile and keeps the
// switch path: the kernel charges the time of __schedule(), BPF programs on
// sched_switch included, to the two tasks it switches between. In C, not an
// interpreter: a round trip is then little more than the kernel's two
// switches and four pipe system calls.
//
// Built by scripts/bench-ctx-switch.sh (cc -O2).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void join(const char *cgroup)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/cgroup.procs", cgroup);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || dprintf(fd, "%d", getpid()) < 0 || close(fd))
		die(path);
}

static long long now(clockid_t clock)
{
	struct timespec t;
	if (clock_gettime(clock, &t))
		die("clock_gettime");
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void put(int fd, const void *b, size_t n)
{
	if (write(fd, b, n) != (ssize_t)n)
		die("write");
}

static void get(int fd, void *b, size_t n)
{
	if (read(fd, b, n) != (ssize_t)n)
		die("read");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s CGROUP_A CGROUP_B ROUND_TRIPS\n", argv[0]);
		return 2;
	}
	long n = atol(argv[3]);
	int ping[2], pong[2];
	char c;
	if (n <= 0 || pipe(ping) || pipe(pong))
		die("setup");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		join(argv[2]);
		put(pong[1], "r", 1); // ready
		get(ping[0], &c, 1); // go
		long long t = now(CLOCK_PROCESS_CPUTIME_ID);
		for (long i = 0; i < n; i++) {
			get(ping[0], &c, 1);
			put(pong[1], "x", 1);
		}
		long long d = now(CLOCK_PROCESS_CPUTIME_ID) - t;
		put(pong[1], &d, sizeof d);
		_exit(0);
	}
	join(argv[1]);
	get(pong[0], &c, 1);
	long long w = now(CLOCK_MONOTONIC), t = now(CLOCK_PROCESS_CPUTIME_ID);
	put(ping[1], "g", 1);
	for (long i = 0; i < n; i++) {
		put(ping[1], "x", 1);
		get(pong[0], &c, 1);
	}
	long long dw = now(CLOCK_MONOTONIC) - w, dc = now(CLOCK_PROCESS_CPUTIME_ID) - t, other;
	get(pong[0], &other, sizeof other);
	if (waitpid(pid, 0, 0) != pid)
		die("waitpid");
	printf("%.0f %.0f\n", dw / (2.0 * n), (dc + other) / (2.0 * n));
	return 0;
}
