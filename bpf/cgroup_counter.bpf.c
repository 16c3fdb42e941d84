// SPDX-License-Identifier: GPL-2.0
//
// perf-exporter's per-cgroup counter (the `bpf` backend of `cgroups:`).
//
// User space opens the counters of `cgroups.sets` once per CPU and puts their
// fds in `events<k>` at index `cpu` (k: the k-th counter opened on that CPU;
// one map per k, as loaders size a PERF_EVENT_ARRAY to the possible CPUs).
// `on_switch` is attached to the `sched_switch` raw tracepoint, which
// __schedule() hits before the switch, while the previous task is still
// `current`. When the next task is in the same css_set as the previous one
// (the same cgroup), it does nothing: the interval since the last charge
// still belongs to that one cgroup, and is charged at the next switch to
// another css_set or at a read. Otherwise it reads every counter of this CPU
// and charges the delta since the last charge on this CPU to the cgroup that
// was running and to each of its ancestors that user space selected (`slots`:
// cgroup id -> slot). User space also runs it on each CPU with
// BPF_PROG_TEST_RUN at every scrape (with no previous task: it always
// charges), so the running cgroup's time since the last charge is not
// missing.
//
// Why sched_switch and not the `cgroup-switches` software event (bperf's
// choice): measured here with it, 1-3 % too much CPU time and switches for a
// cgroup next to busy ones; with sched_switch, within 0.3 % of cpu.stat. A
// BPF program on a sampling perf event runs from the event's overflow
// handler, which the kernel skips while another BPF program is active on the
// CPU (bpf_prog_active) and throttles above perf_event_max_sample_rate / HZ
// overflows per tick; every skipped charge lands its interval on the next
// cgroup charged. (Which of the two happened here was not isolated.) The
// price: the program runs at every context switch, not only at cgroup
// changes; a switch within one css_set costs two reads of a task's field.
// Its cost does not depend on the number of cgroups.
//
// What a charge costs is almost all the counter reads (one helper call per
// counter, mostly cache misses on the kernel's perf_event structures).
//
// Built by scripts/build-bpf.sh; the object is committed and embedded.

#include <linux/types.h>
#include <linux/bpf.h>

#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

// Counters per CPU (and per slot): user space refuses more.
#define MAX_EVENTS 16
// Cgroup levels walked from the root (cgroup v2 nests far less).
#define MAX_LEVELS 16
// Selected cgroups one task can be charged to (itself and selected
// ancestors: a pod and its container are two).
#define MAX_OWNERS 8

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_perf_event_read_value)(void *map, __u64 flags, struct bpf_perf_event_value *buf,
					 __u32 size) = (void *)BPF_FUNC_perf_event_read_value;
static __u64 (*bpf_perf_event_read)(void *map, __u64 flags) = (void *)BPF_FUNC_perf_event_read;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)BPF_FUNC_get_smp_processor_id;
static __u64 (*bpf_get_current_ancestor_cgroup_id)(int level) =
	(void *)BPF_FUNC_get_current_ancestor_cgroup_id;
static __u64 (*bpf_get_current_cgroup_id)(void) = (void *)BPF_FUNC_get_current_cgroup_id;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) =
	(void *)BPF_FUNC_probe_read_kernel;

// The one field of the kernel's task_struct read here (its css_set: the
// cgroups it is in). Its offset is the running kernel's: a CO-RE
// relocation, fixed up by the loader from the kernel's BTF.
struct css_set;
struct task_struct {
	struct css_set *cgroups;
} __attribute__((preserve_access_index));

// Set by the loader: counters opened on the CPU with the most of them.
volatile const __u32 nr_events = 0;
// Set by the loader when it had the kernel's BTF, so the offset of
// task_struct's `cgroups` below is the running kernel's (without BTF the
// loader leaves CO-RE offsets as compiled): else every switch is charged.
volatile const __u32 same_css_skip = 0;

#define EVENTS(k)                                                                                  \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);                                       \
		__uint(key_size, sizeof(__u32));                                                   \
		__uint(value_size, sizeof(__u32));                                                 \
		__uint(max_entries, 0); /* possible CPUs, set by the loader */                     \
	} events##k SEC(".maps")
EVENTS(0);
EVENTS(1);
EVENTS(2);
EVENTS(3);
EVENTS(4);
EVENTS(5);
EVENTS(6);
EVENTS(7);
EVENTS(8);
EVENTS(9);
EVENTS(10);
EVENTS(11);
EVENTS(12);
EVENTS(13);
EVENTS(14);
EVENTS(15);

// Per CPU: the readings of the last charge, the generation of this CPU's
// counters they belong to (a CPU back online gets new counters from 0), and
// the version of `slots` at that charge.
struct last {
	__u64 generation;
	__u64 version;
	struct bpf_perf_event_value v[MAX_EVENTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct last);
	__uint(max_entries, 1);
} last SEC(".maps");

// Per CPU number, set by user space: the generation of its counters (bumped
// when it reopens them), and which k lead a group. A group's members are on
// the PMU exactly when their leader is: only a leader's enabled and running
// times are read (bpf_perf_event_read_value), the members' counts alone
// (bpf_perf_event_read, cheaper) and user space scales them by the leader's.
// While user space replaces a CPU's counters it sets `paused`: the program
// then leaves the CPU alone (a new counter must not be read against the old
// one's last reading).
struct cpu_counters {
	__u64 generation;
	__u32 leaders;
	__u32 paused;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct cpu_counters);
	__uint(max_entries, 1); // possible CPUs, set by the loader
} generation SEC(".maps");

// Selected cgroups: cgroup id (cgroupfs inode number) -> slot.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, __u32);
	__uint(max_entries, 1); // slots, set by the loader
} slots SEC(".maps");

// Bumped by user space after every change of `slots`: the owners cached
// below are valid only for the version they were found at.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} slots_version SEC(".maps");

// Per CPU, direct-mapped by cgroup id: the owner slots (the selected cgroups
// among a cgroup and its ancestors) found for a cgroup at a version of
// `slots`. A cgroup's ancestors never change and ids are not reused, so
// while the version holds, the walk of the ancestors (a hash lookup per
// level) is skipped: a CPU switches among a few cgroups.
#define OWNER_CACHE 16

struct owners {
	__u64 version;
	__u64 id;
	__u32 n;
	__u32 slot[MAX_OWNERS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct owners);
	__uint(max_entries, OWNER_CACHE);
} owners SEC(".maps");

// Per CPU, at `slot * MAX_EVENTS + k`: the count, enabled and running time
// charged to the slot's cgroup by the k-th counter of that CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_perf_event_value);
	__uint(max_entries, 1); // slots * MAX_EVENTS, set by the loader
} counts SEC(".maps");

// Charges the k-th counter of this CPU (in `map`) to the owners.
static __always_inline void charge_one(void *map, __u32 k, __u32 cpu, struct last *prev,
				       __u32 leaders, __u32 *owner, int nowners)
{
	struct bpf_perf_event_value now = {};

	if (k >= nr_events)
		return;
	if (leaders & (1u << k)) {
		if (bpf_perf_event_read_value(map, cpu, &now, sizeof(now)))
			return;
	} else {
		__u64 v = bpf_perf_event_read(map, cpu);
		if ((__s64)v < 0 && (__s64)v >= -4095)
			return; // an errno: no counter at k on this CPU
		now.counter = v;
	}
	__u64 dc = now.counter - prev->v[k].counter;
	__u64 de = now.enabled - prev->v[k].enabled;
	__u64 dr = now.running - prev->v[k].running;
	prev->v[k] = now;
#pragma clang loop unroll(disable)
	for (int o = 0; o < MAX_OWNERS && o < nowners; o++) {
		__u32 key = owner[o] * MAX_EVENTS + k;
		struct bpf_perf_event_value *c = bpf_map_lookup_elem(&counts, &key);
		if (!c)
			continue;
		c->counter += dc;
		c->enabled += de;
		c->running += dr;
	}
}

// The selected cgroups that own the running task (its cgroup and its
// ancestors) at version `ver` of `slots`, from this CPU's cache or found and
// cached.
static __always_inline struct owners *owners_of_current(__u64 ver)
{
	__u64 id = bpf_get_current_cgroup_id();
	__u32 at = id % OWNER_CACHE;
	struct owners *own = bpf_map_lookup_elem(&owners, &at);
	if (!own)
		return 0;
	if (own->id == id && own->version == ver)
		return own;
	int n = 0;
#pragma clang loop unroll(disable)
	for (int level = 0; level < MAX_LEVELS && n < MAX_OWNERS; level++) {
		__u64 a = bpf_get_current_ancestor_cgroup_id(level);
		if (!a)
			break;
		__u32 *slot = bpf_map_lookup_elem(&slots, &a);
		if (slot)
			own->slot[n++] = *slot;
	}
	own->n = n;
	own->id = id;
	own->version = ver;
	return own;
}

// Reads every counter of this CPU and charges the deltas since the last
// charge to `own` (none: the counters are read all the same, the next
// charge starts here).
static __always_inline void charge(struct last *prev, struct owners *own, __u64 ver)
{
	__u32 cpu = bpf_get_smp_processor_id();
	__u32 *owner = 0;
	int nowners = 0;

	struct cpu_counters *cc = bpf_map_lookup_elem(&generation, &cpu);
	if (!cc || cc->paused)
		return;
	__u32 leaders = cc->leaders;
	if (prev->generation != cc->generation) {
		// New counters on this CPU: they count from 0.
		__builtin_memset(prev->v, 0, sizeof(prev->v));
		prev->generation = cc->generation;
	}
	prev->version = ver;
	if (own) {
		owner = own->slot;
		nowners = own->n;
	}
	charge_one(&events0, 0, cpu, prev, leaders, owner, nowners);
	charge_one(&events1, 1, cpu, prev, leaders, owner, nowners);
	charge_one(&events2, 2, cpu, prev, leaders, owner, nowners);
	charge_one(&events3, 3, cpu, prev, leaders, owner, nowners);
	charge_one(&events4, 4, cpu, prev, leaders, owner, nowners);
	charge_one(&events5, 5, cpu, prev, leaders, owner, nowners);
	charge_one(&events6, 6, cpu, prev, leaders, owner, nowners);
	charge_one(&events7, 7, cpu, prev, leaders, owner, nowners);
	charge_one(&events8, 8, cpu, prev, leaders, owner, nowners);
	charge_one(&events9, 9, cpu, prev, leaders, owner, nowners);
	charge_one(&events10, 10, cpu, prev, leaders, owner, nowners);
	charge_one(&events11, 11, cpu, prev, leaders, owner, nowners);
	charge_one(&events12, 12, cpu, prev, leaders, owner, nowners);
	charge_one(&events13, 13, cpu, prev, leaders, owner, nowners);
	charge_one(&events14, 14, cpu, prev, leaders, owner, nowners);
	charge_one(&events15, 15, cpu, prev, leaders, owner, nowners);
}

// Attached to sched_switch (args: preempt, prev, next, ...), and run by
// user space on each CPU at a read (args all 0: no previous task: always a
// charge).
//
// A switch between two tasks of one css_set (so of one cgroup) is not
// charged: the interval since the last charge stays that cgroup's, and is
// charged at the first switch to another css_set, or at a read. Only while
// `slots` is at the version of the last charge: after a change the owners of
// the interval so far may differ, and the next switch charges it.
//
// A task that moves itself to another cgroup while running takes the
// interval since the last charge with it: the whole run of same-css_set
// switches before (as without the skip it took its own run since it was
// switched in). Bounded by the next read. Switches between two cgroups with
// the same owners (e.g. two cgroups nobody selected, found in the owners
// cache) are not skipped as well: tried, it charged a selected cgroup 5-17 %
// too much CPU time (tests/live/cgroup_bpf.rs, both switch tests), most
// likely (not proven) because runs between unselected cgroups get long and
// a process moving itself into a selected cgroup (a shell's
// `echo $$ > cgroup.procs`, as the tests start their workloads) takes the
// whole run with it.
SEC("raw_tp")
int on_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (void *)ctx->args[1], *next = (void *)ctx->args[2];
	struct css_set *a = 0, *b = 0;
	__u32 zero = 0;

	struct last *l = bpf_map_lookup_elem(&last, &zero);
	__u64 *version = bpf_map_lookup_elem(&slots_version, &zero);
	if (!l || !version)
		return 0;
	// Read before the walk of the ancestors: a change of `slots` during it
	// bumps the version after, so what the walk found is not used past this
	// run.
	__u64 ver = *version;
	int known = same_css_skip && prev && next && l->version == ver &&
		    !bpf_probe_read_kernel(&a, sizeof(a), &prev->cgroups) &&
		    !bpf_probe_read_kernel(&b, sizeof(b), &next->cgroups) && a && b;
	if (known && a == b)
		return 0;
	charge(l, owners_of_current(ver), ver);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
