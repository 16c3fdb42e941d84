// SPDX-License-Identifier: GPL-2.0
//
// perf-exporter's per-cgroup counter (the `bpf` backend of `cgroups:`).
//
// User space opens the counters of `cgroups.sets` once per CPU and puts their
// fds in `events<k>` at index `cpu` (k: the k-th counter opened on that CPU;
// one map per k, as loaders size a PERF_EVENT_ARRAY to the possible CPUs).
// `on_switch_btf` (`on_switch` without the kernel's BTF) is attached to
// the `sched_switch` tracepoint, which
// __schedule() hits before the switch, while the previous task is still
// `current`. It reads every counter of this CPU and charges the delta since
// the last charge on this CPU (an "interval") to the cgroup that was running
// and to each of its ancestors that user space selected (`slots`: cgroup id
// -> slot), except at a switch between two tasks of the css_set the interval
// began with (the same cgroup), and at a switch between two cgroups nobody
// selected (neither one nor any of its ancestors) when the interval began in
// the first: the interval then goes on, and is charged at the first switch
// to or from another css_set (a selected one, in the second case), at a
// read, or when a task moves itself to another cgroup (`on_attach`). User space also runs
// `on_switch` on each CPU with BPF_PROG_TEST_RUN at every scrape (with no
// previous task: it always charges), so the running cgroup's time since
// the last charge is not missing.
//
// An interval's owners are those of the css_set it began with: found at
// its first skipped switch (the task leaving is then in that css_set) and
// kept with it, so a task leaving that css_set while it runs cannot take
// the interval's earlier tasks' time with it. A task that moves itself
// (a shell's `echo $$ > cgroup.procs`) is charged at the move
// (`on_attach`, the `cgroup_attach_task` tracepoint, which the kernel hits
// after the move): the interval up to then goes to the owners it began
// with, the rest to the new cgroup. A task moved by another while it runs
// here is noticed at its switch: its own run since it was switched in is
// charged whole to one of the two cgroups, as without the skip.
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
// changes; a switch within one css_set costs two reads of a task's field,
// one between two unselected cgroups a few more and two lookups in the
// owner cache. Its cost does not depend on the number of cgroups.
//
// What a charge costs is almost all the counter reads: one helper call per
// counter (perf_event_read_local: interrupts off, the event's checks, its
// PMU's read through an indirect call), about 45 ns each for a software
// counter read with bpf_perf_event_read and about 85 ns for a group leader
// read with bpf_perf_event_read_value (its times too), measured on a 2-vCPU
// Intel VM. So a read is left out where the kernel makes it redundant: the
// times of a group of software counters with a clock (user space takes them
// from the clock's count), `context-switches` and `cpu-migrations` (counted
// here), `minor-faults` and `major-faults` after runs with no fault (see
// `cpu_counters`). With the default `software` set a charge then reads two
// counters (the clock and `page-faults`), or four after a fault. The rest
// is kept to one lookup per owner (a slot's counts are one element) and,
// with BTF, no helper call for the css_sets, the cgroup ids, the faults or
// the migration bit (plain loads through the typed task pointers).
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
static __u64 (*bpf_get_current_task)(void) = (void *)BPF_FUNC_get_current_task;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)BPF_FUNC_get_current_pid_tgid;

// The fields of the kernel's task_struct read here (its css_set: the
// cgroups it is in; its thread group), and the way from a css_set to the
// id of its cgroup v2 cgroup (css_set->dfl_cgrp->kn->id, what
// bpf_get_current_cgroup_id() returns for the running task). Their offsets are the running
// kernel's: CO-RE relocations, fixed up by the loader from the kernel's BTF.
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));
struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));
struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));
struct task_struct {
	struct css_set *cgroups;
	int tgid;
	unsigned long min_flt;
	unsigned long maj_flt;
	unsigned sched_migrated : 1;
} __attribute__((preserve_access_index));

// A bitfield of a task read through CO-RE: the loader gives the byte offset
// and size of the word holding it and the shifts that extract it (as
// libbpf's BPF_CORE_READ_BITFIELD and its _PROBED form). `t` is a BTF-typed
// pointer (plain load) or, with `probed`, any kernel pointer (probe read).
#define FIELD_INFO(t, f, kind) __builtin_preserve_field_info((t)->f, kind)
#define BITFIELD_AT(t, f, raw)                                                                     \
	({                                                                                         \
		unsigned long long v_ = (raw);                                                     \
		v_ <<= FIELD_INFO(t, f, 4 /* BPF_FIELD_LSHIFT_U64 */);                             \
		v_ >>= FIELD_INFO(t, f, 5 /* BPF_FIELD_RSHIFT_U64 */);                             \
		v_;                                                                                \
	})
#define READ_BITFIELD(t, f)                                                                        \
	({                                                                                         \
		const void *p_ = (const void *)(t) + FIELD_INFO(t, f, 0 /* BYTE_OFFSET */);        \
		unsigned long long w_ = 0;                                                         \
		asm volatile("" : "=r"(p_) : "0"(p_));                                             \
		switch (FIELD_INFO(t, f, 1 /* BYTE_SIZE */)) {                                     \
		case 1: w_ = *(const __u8 *)p_; break;                                             \
		case 2: w_ = *(const __u16 *)p_; break;                                            \
		case 4: w_ = *(const __u32 *)p_; break;                                            \
		case 8: w_ = *(const __u64 *)p_; break;                                            \
		}                                                                                  \
		BITFIELD_AT(t, f, w_);                                                             \
	})
#define PROBE_READ_BITFIELD(t, f)                                                                  \
	({                                                                                         \
		unsigned long long w_ = 0;                                                         \
		bpf_probe_read_kernel(&w_, FIELD_INFO(t, f, 1 /* BYTE_SIZE */),                    \
				      (const void *)(t) + FIELD_INFO(t, f, 0 /* BYTE_OFFSET */));  \
		BITFIELD_AT(t, f, w_);                                                             \
	})

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
// counters they belong to (a CPU back online gets new counters from 0), the
// version of `slots` at that charge, and the interval since: the css_set it
// began with and, once found (`owned`), that css_set's owner slots.
struct last {
	__u64 generation;
	__u64 version;
	__u64 css;
	// The switches of this CPU (sched_switch hits), counted here for the
	// k in `cpu_counters.switches` (read there in place of the counter),
	// and those k at the last charge; the same for the migrations
	// (`cpu_counters.migrations`).
	__u64 switches;
	__u32 switches_k;
	__u32 migrations_k;
	__u64 migrations;
	// Whether a task that ran here since the fault counters
	// (`cpu_counters.faults`) were last read may have faulted; the task
	// that came in at the last switch (BTF-typed program only, else 0)
	// and its minor and major faults then.
	__u64 faulted;
	__u64 in_task;
	__u64 in_faults;
	__u32 owned;
	__u32 nowners;
	__u32 owner[MAX_OWNERS];
	struct bpf_perf_event_value v[MAX_EVENTS];
	// Scratch: the deltas of the charge running (too large for the stack).
	struct bpf_perf_event_value d[MAX_EVENTS];
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
// A group of software counters with a clock among them has no leader bit:
// the kernel always schedules such a group (group_can_go_on(): "Groups
// consisting entirely of software events can always go on"), so its
// running time is its enabled time, and both are the clock's count (user
// space takes them from it).
//
// Bit k of `switches`: the k-th counter is a `context-switches` software
// counter, which the kernel raises once per sched_switch hit (both in
// __schedule()'s prev != next branch: trace_sched_switch(), then
// context_switch() -> prepare_task_switch() -> perf_event_task_sched_out()
// -> perf_sw_event_sched(PERF_COUNT_SW_CONTEXT_SWITCHES)). The program
// counts those hits itself (`last.switches`) and takes that count as the
// counter's, saving a read per charge. It counts a switch before charging,
// so the switch is the task leaving's, as the kernel's counter in a perf
// cgroup event is (it is raised before the cgroup switch). User space sets
// it only for a group's member counting kernel mode (the kernel raises it
// with the scheduler's registers: a `:u` one counts nothing).
//
// Bit k of `migrations`: the k-th counter is a `cpu-migrations` software
// counter, which the kernel raises when a task that moved to this CPU is
// switched in here: set_task_cpu() -> perf_event_task_migrate() sets the
// task's `sched_migrated` bit (while any such counter exists), and
// finish_task_switch() -> perf_event_task_sched_in() raises the counter
// once and clears the bit, under this CPU's runqueue lock, taken before
// the sched_switch hit: what the task coming in has at the hit is what the
// kernel counts right after it. The program counts it itself
// (`last.migrations`) after charging: the migration is the task coming
// in's, as the kernel's counter in a perf cgroup event is. Set by user
// space, as `switches`, for a member counting kernel mode (the same
// scheduler's registers), and only with the kernel's BTF (the bit's place).
//
// Bit k of `faults`: the k-th counter is `minor-faults` or `major-faults`,
// which the kernel raises only where it also counts the fault in the
// faulting task's own `min_flt` or `maj_flt`: mm_account_fault() (since
// 5.9) increments current->min_flt or maj_flt, then, when the fault came
// with registers (not GUP's), raises the counter. So when no task that ran
// on this CPU since the counter was last read has more faults than when it
// came in, the counter has not moved: it is not read, its delta is 0.
// (`page-faults` is raised at every fault's entry, errors and faults with
// page faults disabled included, with nothing in the task to tell: it is
// always read.) One miss is possible: a task preempted between its
// increment and the raise is counted as faulted at that switch, and the
// raise then lands in its next run, which looks clean: that one fault is
// charged at the next read of the counter on that CPU, to whoever is
// charged there. It takes an interrupt in a window of a few instructions.
// Set by user space only with the kernel's BTF and from 5.9.
//
// While user space replaces a CPU's counters it sets `paused`: the program
// then leaves the CPU alone (a new counter must not be read against the old
// one's last reading).
struct cpu_counters {
	__u64 generation;
	__u32 leaders;
	__u32 paused;
	__u32 switches;
	__u32 migrations;
	__u32 faults;
	__u32 pad;
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
#define OWNER_CACHE 64

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

// Per CPU, at `slot`: the count, enabled and running time charged to the
// slot's cgroup by each counter of that CPU (the k-th at `v[k]`). One
// element per slot: a charge looks up each owner once, not once per
// counter, and a slot's counts are contiguous.
struct charged {
	struct bpf_perf_event_value v[MAX_EVENTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct charged);
	__uint(max_entries, 1); // slots, set by the loader
} counts SEC(".maps");

// How a charge reads each counter (bit k: the k-th): with its times,
// the program's switch or migration count in its place, or not at all (a
// fault counter that has not moved).
struct reads {
	__u32 leaders;
	__u32 switches;
	__u32 migrations;
	__u32 unmoved;
};

// Reads the k-th counter of this CPU (in `map`) into `prev->v[k]` and its
// delta since the last reading into `prev->d[k]` (0 when it cannot be read
// or has not moved).
static __always_inline void read_one(void *map, __u32 k, __u32 cpu, struct last *prev,
				     const struct reads *r)
{
	struct bpf_perf_event_value now = {};

	if (k >= nr_events)
		return;
	prev->d[k].counter = 0;
	prev->d[k].enabled = 0;
	prev->d[k].running = 0;
	if (r->leaders & (1u << k)) {
		if (bpf_perf_event_read_value(map, cpu, &now, sizeof(now)))
			return;
	} else if (r->switches & (1u << k)) {
		now.counter = prev->switches;
	} else if (r->migrations & (1u << k)) {
		now.counter = prev->migrations;
	} else if (r->unmoved & (1u << k)) {
		return;
	} else {
		__u64 v = bpf_perf_event_read(map, cpu);
		if ((__s64)v < 0 && (__s64)v >= -4095)
			return; // an errno: no counter at k on this CPU
		now.counter = v;
	}
	prev->d[k].counter = now.counter - prev->v[k].counter;
	prev->d[k].enabled = now.enabled - prev->v[k].enabled;
	prev->d[k].running = now.running - prev->v[k].running;
	prev->v[k] = now;
}

// The owners cached on this CPU for cgroup `id` at version `ver` of
// `slots`, or 0 when none are (no walk: it needs the task to be running).
static __always_inline struct owners *cached_owners(__u64 ver, __u64 id)
{
	__u32 at = id % OWNER_CACHE;
	struct owners *own = bpf_map_lookup_elem(&owners, &at);
	if (!own || own->id != id || own->version != ver)
		return 0;
	return own;
}

// The selected cgroups that own the running task (its cgroup and its
// ancestors) at version `ver` of `slots`, from this CPU's cache or found and
// cached. `id` is the running task's cgroup id when the caller has it (a
// BTF-typed program reads it with plain loads), else 0: then it is asked
// for (a helper call).
static __always_inline struct owners *owners_of_current(__u64 ver, __u64 id)
{
	if (!id)
		id = bpf_get_current_cgroup_id();
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
// charge to the `nowners` slots at `owner` (none: the counters are read all
// the same, the next charge starts here).
static __always_inline void charge(struct last *prev, __u32 *owner, int nowners, __u64 ver)
{
	__u32 cpu = bpf_get_smp_processor_id();

	struct cpu_counters *cc = bpf_map_lookup_elem(&generation, &cpu);
	if (!cc || cc->paused)
		return;
	struct reads r = {
		.leaders = cc->leaders,
		.switches = cc->switches,
		.migrations = cc->migrations,
		.unmoved = prev->faulted ? 0 : cc->faults,
	};
	if (prev->generation != cc->generation) {
		// New counters on this CPU: they count from 0 (and are read).
		// The program's own counts go on where they were the same k's
		// before.
		__u32 kept = (r.switches & prev->switches_k) | (r.migrations & prev->migrations_k);
#pragma clang loop unroll(disable)
		for (int k = 0; k < MAX_EVENTS; k++) {
			if (kept & (1u << k))
				continue;
			prev->v[k].counter = (r.switches & (1u << k))	  ? prev->switches
					     : (r.migrations & (1u << k)) ? prev->migrations
									  : 0;
			prev->v[k].enabled = 0;
			prev->v[k].running = 0;
		}
		prev->generation = cc->generation;
		prev->switches_k = r.switches;
		prev->migrations_k = r.migrations;
		r.unmoved = 0;
	}
	prev->version = ver;
	prev->faulted = 0;
	read_one(&events0, 0, cpu, prev, &r);
	read_one(&events1, 1, cpu, prev, &r);
	read_one(&events2, 2, cpu, prev, &r);
	read_one(&events3, 3, cpu, prev, &r);
	read_one(&events4, 4, cpu, prev, &r);
	read_one(&events5, 5, cpu, prev, &r);
	read_one(&events6, 6, cpu, prev, &r);
	read_one(&events7, 7, cpu, prev, &r);
	read_one(&events8, 8, cpu, prev, &r);
	read_one(&events9, 9, cpu, prev, &r);
	read_one(&events10, 10, cpu, prev, &r);
	read_one(&events11, 11, cpu, prev, &r);
	read_one(&events12, 12, cpu, prev, &r);
	read_one(&events13, 13, cpu, prev, &r);
	read_one(&events14, 14, cpu, prev, &r);
	read_one(&events15, 15, cpu, prev, &r);
#pragma clang loop unroll(disable)
	for (int o = 0; o < MAX_OWNERS && o < nowners; o++) {
		__u32 key = owner[o];
		struct charged *c = bpf_map_lookup_elem(&counts, &key);
		if (!c)
			continue;
#pragma clang loop unroll(full)
		for (int k = 0; k < MAX_EVENTS; k++) {
			if (k >= nr_events)
				break;
			c->v[k].counter += prev->d[k].counter;
			c->v[k].enabled += prev->d[k].enabled;
			c->v[k].running += prev->d[k].running;
		}
	}
}

// Keeps `own` (or nothing) as the owners of the interval `l` began.
static __always_inline void keep_owners(struct last *l, struct owners *own)
{
	l->owned = 0;
	if (!own)
		return;
	__u32 n = own->n;
#pragma clang loop unroll(disable)
	for (int o = 0; o < MAX_OWNERS; o++)
		l->owner[o] = own->slot[o];
	l->nowners = n;
	l->owned = 1;
}

// Ends the interval `l` when the task leaving (or running, at a read or a
// move) is in css_set `a`, and begins the next with the task coming in
// (css_set `b`; the same at a read or a move).
static __always_inline void switch_interval(struct last *l, __u64 ver, __u64 a, __u64 b,
					    struct owners *own)
{
	if (l->owned && l->version == ver && a != l->css) {
		// The task leaving left the interval's css_set while it ran
		// (moved by another task): the interval's earlier tasks were
		// that css_set's, charged to its owners.
		__u32 n = l->nowners;
		charge(l, l->owner, n, ver);
	} else if (own) {
		charge(l, own->slot, own->n, ver);
	} else {
		charge(l, 0, 0, ver);
	}
	l->css = b;
	keep_owners(l, a && a == b ? own : 0);
}

// A task's css_set, 0 if unknown.
static __always_inline __u64 css_of(struct task_struct *t)
{
	struct css_set *c = 0;
	if (!t || bpf_probe_read_kernel(&c, sizeof(c), &t->cgroups))
		return 0;
	return (__u64)c;
}

// Charges the interval `l`, or lets it go on, at a switch (`a`, `b`: the
// css_sets of the task leaving and of the task coming in, `is_switch` 1),
// or charges it at a read by user space (`is_switch` 0, `a` and `b` the
// running task's). The css_sets are read only with `same_css_skip`.
//
// A switch between two tasks of the css_set the interval began with is not
// charged (only while `slots` is at the version of the last charge: after a
// change the owners may differ, and the next switch charges). The first
// such switch of an interval finds the owners (of the task leaving, in that
// css_set) and keeps them with the interval.
//
// A switch between two cgroups nobody selected is not charged either when
// the interval began in the first (the task leaving is still in its
// css_set): the interval, which has no owners, goes on with the next task's
// css_set. The next task's owners are known only from this CPU's owner
// cache (filled when one of its cgroup's tasks last ran here at this
// version): the walk of the ancestors works only for the running task, so
// without a cached entry the switch is charged. Switches between two
// cgroups with the same non-empty owners are charged: a version skipping
// them charged a selected cgroup 5-17 % too much CPU time
// (tests/live/cgroup_bpf.rs, both switch tests).
static __always_inline void at_switch(struct last *l, __u64 ver, __u64 a, __u64 b, int is_switch,
				      __u64 id, __u64 next_id)
{
	if (!same_css_skip) {
		struct owners *own = owners_of_current(ver, id);
		if (own)
			charge(l, own->slot, own->n, ver);
		else
			charge(l, 0, 0, ver);
		return;
	}
	if (is_switch && a && a == b && a == l->css && l->version == ver) {
		if (!l->owned)
			keep_owners(l, owners_of_current(ver, id));
		return;
	}
	struct owners *own = owners_of_current(ver, id);
	if (is_switch && next_id && own && !own->n && a && a == l->css && l->version == ver) {
		// Nobody selected the interval's cgroup (that of the task
		// leaving): when nobody selected the next task's either (as
		// cached here at this version), the interval goes on with it.
		struct owners *next = cached_owners(ver, next_id);
		if (next && !next->n) {
			l->css = b;
			keep_owners(l, own);
			return;
		}
	}
	switch_interval(l, ver, a, b, own);
}

// What the BTF-typed program sees of the two tasks at a switch: the task
// leaving and the task coming in, each with its minor and major faults.
struct seen {
	__u64 out_task;
	__u64 out_faults;
	__u64 in_task;
	__u64 in_faults;
};

// Run at every switch (`is_switch`; `seen` from the BTF-typed program, else
// 0; `migrated`: the kernel counts a migration for the task coming in right
// after), and by user space at a read and by `on_attach` (no switch): counts
// the switch before any charge, judges whether the fault counters can have
// moved since their last read (see `cpu_counters.faults`), charges or not
// (`at_switch`), then counts the migration, which is the next interval's.
static __always_inline int switched(__u64 a, __u64 b, int is_switch, __u64 id, __u64 next_id,
				    const struct seen *seen, int migrated)
{
	__u32 zero = 0;

	struct last *l = bpf_map_lookup_elem(&last, &zero);
	__u64 *version = bpf_map_lookup_elem(&slots_version, &zero);
	if (!l || !version)
		return 0;
	// Read before the walk of the ancestors: a change of `slots` during it
	// bumps the version after, so what the walk found is not used past this
	// run.
	__u64 ver = *version;
	// Before any charge: the switch is the task leaving's.
	if (is_switch)
		l->switches++;
	// The task leaving ran here since it came in at the last switch: with
	// as many faults as then, it raised no fault counter. Anything else
	// (no `seen`, another task: a hit this program did not see) may have.
	if (!seen || l->in_task != seen->out_task || l->in_faults != seen->out_faults)
		l->faulted = 1;
	if (is_switch) {
		l->in_task = seen ? seen->in_task : 0;
		l->in_faults = seen ? seen->in_faults : 0;
	}
	at_switch(l, ver, a, b, is_switch, id, next_id);
	if (migrated)
		l->migrations++;
	return 0;
}

// Attached to the sched_switch raw tracepoint (args: preempt, prev, next,
// ...) where the kernel's BTF is missing (then `same_css_skip` is 0), and
// the program user space runs at a read (args all 0: no previous task).
// Its css_sets are probe reads (a helper call each).
SEC("raw_tp")
int on_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (void *)ctx->args[1], *next = (void *)ctx->args[2];
	__u64 a = 0, b = 0;
	int migrated = 0;

	if (same_css_skip) {
		if (!prev)
			prev = (void *)bpf_get_current_task();
		a = css_of(prev);
		b = next ? css_of(next) : a;
		if (next)
			migrated = PROBE_READ_BITFIELD(next, sched_migrated);
	}
	return switched(a, b, next != 0, 0, 0, 0, migrated);
}

// Attached to sched_switch where the kernel has BTF (the loader sets
// `same_css_skip` then): the same as `on_switch`, but the tasks are typed
// pointers, so their css_sets and prev's cgroup id are plain loads, not
// helper calls. (A
// BTF-typed tracepoint program cannot be run by user space: reads run
// `on_switch`.)
SEC("tp_btf/sched_switch")
int on_switch_btf(__u64 *ctx)
{
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	struct css_set *a = prev->cgroups, *b = next->cgroups;
	struct seen seen = {
		.out_task = (__u64)prev,
		.out_faults = prev->min_flt + prev->maj_flt,
		.in_task = (__u64)next,
		.in_faults = next->min_flt + next->maj_flt,
	};

	// prev is the running task: its cgroup id without a helper call (and
	// next's the same way).
	return switched((__u64)a, (__u64)b, 1, a->dfl_cgrp->kn->id, b->dfl_cgrp->kn->id, &seen,
			READ_BITFIELD(next, sched_migrated));
}

// Attached to the cgroup_attach_task tracepoint (args: dst_cgrp, path,
// task, threadgroup), which the kernel hits after moving `task` (and its
// thread group) to another cgroup, in the task that wrote cgroup.procs.
// When that is the task moved, the interval up to the move is charged to
// the owners it began with and a new one begins in the new cgroup.
SEC("raw_tp")
int on_attach(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (void *)ctx->args[2];
	struct task_struct *cur = (void *)bpf_get_current_task();
	__u32 zero = 0;
	int tgid = 0;

	if (!same_css_skip)
		return 0;
	if (task != cur) {
		if (!ctx->args[3] || bpf_probe_read_kernel(&tgid, sizeof(tgid), &task->tgid) ||
		    tgid != (int)(bpf_get_current_pid_tgid() >> 32))
			return 0;
	}
	struct last *l = bpf_map_lookup_elem(&last, &zero);
	__u64 *version = bpf_map_lookup_elem(&slots_version, &zero);
	if (!l || !version)
		return 0;
	__u64 ver = *version;
	__u64 a = css_of(cur);
	l->faulted = 1;
	switch_interval(l, ver, a, a, owners_of_current(ver, 0));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
