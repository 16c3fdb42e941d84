/*
 * The emulated-PMU tests' workload (tests/arm64_guest.rs, scripts/arm64-guest.sh):
 * a loop of a known instruction count that measures itself with
 * perf_event_open, for the arm64 guest under QEMU (-icount shift=0).
 *
 *   workload ITERATIONS [CGROUP_DIR|-] [instructions-only|cycles-only]
 *   workload hold K SECONDS
 *
 * With `instructions-only` it leaves the cycle counter to others (the
 * sampling scenario: QEMU delivers overflow interrupts promptly only for
 * the cycle counter; cycles=0 is printed). With `cycles-only` it counts on
 * the dedicated cycle counter alone and leaves every programmable counter
 * to others (the multiplexing scenario); instructions=0 is printed, and
 * under -icount shift=0 user-mode cycles equal user-mode instructions
 * exactly (the exact-counts scenario asserts it).
 *
 * `hold K SECONDS` is another user of the PMU: K pinned CPU-wide
 * instruction counters on CPU 0 (each its own group, so each holds one
 * programmable counter whatever task runs), held for SECONDS; it prints
 * "holding K" once they are open. With CGROUP_DIR it first moves itself into that cgroup (writes "0" to its
 * cgroup.procs), so a per-cgroup counter sees only this process from then
 * on. It then counts user-mode instructions and cycles (one group, pinned:
 * first on the PMU, never multiplexed by the exporter's groups) around a
 * loop of ITERATIONS x 8 instructions and prints one line:
 *
 *   workload iterations=N instructions=I cycles=C enabled=E running=R
 *
 * No C library: a static freestanding program whose whole user-mode life is
 * a few hundred instructions besides the loop, so that a per-cgroup count
 * of the process equals the self-measured count within that margin. Built
 * with aarch64-linux-gnu-gcc -static -nostdlib -ffreestanding -O2.
 */
#include <linux/perf_event.h>
#include <linux/fcntl.h>

typedef unsigned long u64;

#define SYS_ioctl 29
#define SYS_openat 56
#define SYS_close 57
#define SYS_read 63
#define SYS_write 64
#define SYS_exit_group 94
#define SYS_nanosleep 101
#define SYS_perf_event_open 241

static long sys6(long n, long a, long b, long c, long d, long e)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4)
			 : "memory");
	return x0;
}

void *memset(void *s, int c, unsigned long n)
{
	unsigned char *p = s;
	while (n--)
		*p++ = (unsigned char)c;
	return s;
}

static unsigned long len(const char *s)
{
	unsigned long n = 0;
	while (s[n])
		n++;
	return n;
}

static void out(const char *s)
{
	sys6(SYS_write, 1, (long)s, (long)len(s), 0, 0);
}

static void die(const char *what, long err)
{
	out("workload: FAILED ");
	out(what);
	out("\n");
	sys6(SYS_exit_group, err < 0 ? (int)-err : 1, 0, 0, 0, 0);
	for (;;)
		;
}

static void num(u64 v)
{
	char b[24];
	int i = 23;
	b[i] = 0;
	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	out(b + i);
}

static u64 parse(const char *s)
{
	u64 v = 0;
	while (*s >= '0' && *s <= '9')
		v = v * 10 + (u64)(*s++ - '0');
	return v;
}

/* Filled before the process moves into its cgroup: their memset is not
 * part of what the cgroup counts. */
static struct perf_event_attr attrs[2];

static void prepare(struct perf_event_attr *a, u64 config, int leader)
{
	memset(a, 0, sizeof *a);
	a->type = PERF_TYPE_HARDWARE;
	a->size = sizeof *a;
	a->config = config;
	a->disabled = leader;
	/* first on the PMU, so the exporter's groups never multiplex it */
	a->pinned = leader;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
			 PERF_FORMAT_TOTAL_TIME_RUNNING;
}

static long open_counter(struct perf_event_attr *a, long group)
{
	/* this process, any CPU */
	return sys6(SYS_perf_event_open, (long)a, 0, -1, group, 0);
}

/* ITERATIONS x 8 instructions: six adds, subs, b.ne. */
static void loop(u64 n)
{
	__asm__ volatile("1:\n"
			 "add x9, x9, #1\n"
			 "add x10, x10, #1\n"
			 "add x11, x11, #1\n"
			 "add x12, x12, #1\n"
			 "add x13, x13, #1\n"
			 "add x14, x14, #1\n"
			 "subs %0, %0, #1\n"
			 "b.ne 1b\n"
			 : "+r"(n)
			 :
			 : "x9", "x10", "x11", "x12", "x13", "x14", "cc");
}

/* K pinned CPU-wide counters on CPU 0, held for SECONDS. */
static void hold(long argc, char **argv)
{
	if (argc < 4)
		die("usage: workload hold K SECONDS", 2);
	u64 k = parse(argv[2]), secs = parse(argv[3]);
	for (u64 i = 0; i < k; i++) {
		prepare(&attrs[0], PERF_COUNT_HW_INSTRUCTIONS, 1);
		attrs[0].disabled = 0;
		long fd = sys6(SYS_perf_event_open, (long)&attrs[0], -1, 0, -1, 0);
		if (fd < 0)
			die("perf_event_open a pinned counter on CPU 0", fd);
	}
	out("holding ");
	num(k);
	out("\n");
	long ts[2] = {(long)secs, 0};
	sys6(SYS_nanosleep, (long)ts, 0, 0, 0, 0);
}

static void run(long argc, char **argv)
{
	if (argc < 2)
		die("usage: workload ITERATIONS [CGROUP_DIR|-] [instructions-only|cycles-only]", 2);
	if (argv[1][0] == 'h') {
		hold(argc, argv);
		return;
	}
	u64 n = parse(argv[1]);
	if (n == 0)
		die("ITERATIONS must be a positive number", 2);
	/* cycles-only: the cycle counter leads alone */
	int only_cycles = argc > 3 && argv[3][0] == 'c';
	prepare(&attrs[0], only_cycles ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_HW_INSTRUCTIONS, 1);
	prepare(&attrs[1], PERF_COUNT_HW_CPU_CYCLES, 0);
	int cycles = !only_cycles && !(argc > 3 && argv[3][0] == 'i');
	long back = -1;
	if (argc > 2 && !(argv[2][0] == '-' && argv[2][1] == 0)) {
		/* Both paths are built and the parent's cgroup.procs opened
		 * before the move, and the process moves back to the parent
		 * right after reading its counters: the cgroup sees only the
		 * counted loop and a few dozen instructions around it. */
		char path[512], parent[512];
		unsigned long l = len(argv[2]);
		const char *tail = "/cgroup.procs";
		const char *up = "/../cgroup.procs";
		if (l + len(up) + 1 > sizeof path)
			die("cgroup path too long", 2);
		for (unsigned long i = 0; i < l; i++)
			path[i] = parent[i] = argv[2][i];
		for (unsigned long i = 0; i <= len(tail); i++)
			path[l + i] = tail[i];
		for (unsigned long i = 0; i <= len(up); i++)
			parent[l + i] = up[i];
		back = sys6(SYS_openat, AT_FDCWD, (long)parent, O_WRONLY, 0, 0);
		if (back < 0)
			die("open the parent's cgroup.procs", back);
		long fd = sys6(SYS_openat, AT_FDCWD, (long)path, O_WRONLY, 0, 0);
		if (fd < 0)
			die("open cgroup.procs", fd);
		long w = sys6(SYS_write, fd, (long)"0", 1, 0, 0);
		if (w != 1)
			die("write cgroup.procs", w);
		sys6(SYS_close, fd, 0, 0, 0, 0);
	}
	long ins = open_counter(&attrs[0], -1);
	if (ins < 0)
		die(only_cycles ? "perf_event_open cycles" : "perf_event_open instructions", ins);
	if (cycles) {
		long cyc = open_counter(&attrs[1], ins);
		if (cyc < 0)
			die("perf_event_open cycles", cyc);
	}
	sys6(SYS_ioctl, ins, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP, 0, 0);
	loop(n);
	sys6(SYS_ioctl, ins, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP, 0, 0);
	/* nr, time_enabled, time_running, value[nr] */
	u64 r[5] = {0};
	u64 nr = cycles ? 2 : 1;
	long got = sys6(SYS_read, ins, (long)r, (3 + nr) * sizeof(u64), 0, 0);
	if (back >= 0 && sys6(SYS_write, back, (long)"0", 1, 0, 0) != 1)
		die("write the parent's cgroup.procs", -1);
	if (got != (long)((3 + nr) * sizeof(u64)) || r[0] != nr)
		die("read group", got);
	out("workload iterations=");
	num(n);
	out(" instructions=");
	num(only_cycles ? 0 : r[3]);
	out(" cycles=");
	num(only_cycles ? r[3] : r[4]);
	out(" enabled=");
	num(r[1]);
	out(" running=");
	num(r[2]);
	out("\n");
}

/* The entry point: sp holds argc, then argv. */
void start_c(long *sp)
{
	run(sp[0], (char **)(sp + 1));
	sys6(SYS_exit_group, 0, 0, 0, 0, 0);
	for (;;)
		;
}

__asm__(".text\n"
	".global _start\n"
	"_start:\n"
	"mov x0, sp\n"
	"bl start_c\n");
