/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The shared header of the BPF scheduler: knobs the loader sets, the globals and maps, and the
 * small accessors every file uses; the named constants are in consts.bpf.h and the per-CPU and
 * per-task state in ctx.bpf.h, both included here. main.bpf.c includes it once, before the
 * other files (one compilation unit; see docs/design.md for why).
 */
#ifndef __GMP_BPF_H
#define __GMP_BPF_H

#include <scx/common.bpf.h>
#include <bpf_atomic.h>
#include "intf.h"

/* ---- Knobs, set by the loader before load (see src/ for the flags) ---- */

const volatile u32 nr_cpus = 1;           /* nr_cpu_ids, <= MAX_CPUS */
const volatile u32 nr_nodes = 1;          /* <= MAX_NODES */
const volatile u64 slice_ns = 10000000;   /* Go's forcePreemptNS, 10 ms */
const volatile u64 preempt_ns = 10000000; /* sysmon preempts runs longer than this */
const volatile u64 sysmon_ns = 0;         /* 0: SYSMON_PERIOD_NS; else >= SYSMON_MIN_NS */
const volatile u32 local_cap = 256;       /* Go's runq size */
const volatile u32 fair_tick = 61;        /* Go's schedtick % 61 global-queue poll */
const volatile u32 steal_max = 32;
const volatile u32 numa_steal_min = 2;
const volatile bool runnext_on = true;
const volatile u64 wakeup_preempt_ns = 1000000; /* 0: wakeups never preempt */
const volatile u32 cpu_node[MAX_CPUS];
const volatile u32 cpu_llc[MAX_CPUS];
const volatile bool numa_on = true;          /* false: --no-numa, the machine as one node */
const volatile u32 node_rep_cpu[MAX_NODES];  /* one online CPU per node: a placement hint */
const volatile u32 nr_mem_nodes = 1;         /* nodes with memory (the kernel's has_memory) */
const volatile u16 steal_order[MAX_CPUS];    /* online CPUs by node, LLC, id (struct steal_ring) */
const volatile struct steal_ring steal_rings[MAX_CPUS];
const volatile bool cgroup_weights_on = true;
const volatile u64 starve_warn_ns = 500000000ULL;
/*
 * TEST ONLY (--test-stall, hidden): stop dispatching so the kernel's watchdog must eject the
 * scheduler. Never set in normal use.
 */
const volatile bool test_stall = false;
/*
 * TEST ONLY (--test-strand-shared, hidden): queue tasks that no proc may run on their node's
 * shared queue, where a shrink of the procs can leave one, so that only sysmon's
 * rescue_stranded takes them out. Never set in normal use.
 */
const volatile bool test_strand_shared = false;

/* The kernel's tick rate (libbpf reads it from the kernel config); 0 if the config is missing. */
extern unsigned int CONFIG_HZ __kconfig __weak;

#include "consts.bpf.h"  /* named constants */
#include "ctx.bpf.h"     /* per-CPU and per-task state */

/* ---- Globals (bss: the loader reads several of them) ---- */

struct cpu_ctx cpu_ctxs[MAX_CPUS];
/* Written by sysmon alone (its own cache lines): samples and per-CPU pass state. */
u32 cpu_queued[MAX_CPUS];         /* cpu_dsq lengths at the last sysmon pass */
u8 stuck_passes[MAX_CPUS];        /* passes in a row that found a CPU asleep on a queued task */
u8 shared_stale[MAX_NODES];       /* the shared_dsq head had waited FAIR_TICK_MAX_NS */
u32 shared_queued[MAX_NODES];     /* shared_dsq lengths at the last sysmon pass */
u32 busy_procs[MAX_NODES];        /* procs running a task, per node, at the last sysmon pass */
/*
 * Per node: CPUs running a task whose memory node it is, elsewhere, while none of its procs
 * is idle (it has none, or all run tasks), at the last pass. --procs auto grows the set there:
 * the procs grow where the memory is. away_running is the count the pass is making.
 */
u32 homeless_running[MAX_NODES];
u32 away_running[MAX_NODES];
u64 saturated_at;                 /* since when every proc has run a task with work waiting; 0: not */
u64 saturated_ns;                 /* how long that has lasted, as of the last sysmon pass */
/*
 * Tasks shared_pick has taken from each node's shared queue: the clock a shared task's wait is
 * counted in (task_ctx.shared_seq). A line per node: the procs of a node write only its own.
 */
struct node_picks {
	u64 n;
} __attribute__((aligned(64)));
struct node_picks shared_picks[MAX_NODES];
u64 node_kick_at[MAX_NODES];      /* when wakep last kicked a CPU of the node; 0: none pending */
u64 vclock;                               /* the highest vtime_max, as of the last pass */
u64 starve_scan_at;
struct gmp_wait_rec wait_recs[MAX_CPUS];  /* read and cleared by the loader each interval */
s64 nr_runnable_total;                    /* the sum of runnable_delta, as of the last pass */
s64 nr_task_ctxs, nr_cgrp_ctxs;           /* live entries of task_ctxs and cgrp_ctxs */
u64 cg_root_id;                           /* the root cgroup's id, from its ops.cgroup_init */
s64 last_ctx_err;                         /* errno of the last failed state allocation */

/*
 * The processor set, written by the loader: proc_on[c] says whether CPU c is a proc,
 * procs_subset that some CPU is not (false: the fast path), and procs_gen is bumped after
 * each change, with a release store that pairs with sync_procs_mask's acquire load. sysmon
 * mirrors proc_on into procs_mask, the cpumask the idle-CPU kfuncs take (sync_procs_mask).
 */
u8 proc_on[MAX_CPUS];
bool procs_subset;    /* 0: every CPU is a proc */
u64 procs_gen;
u64 procs_mask_gen;
u32 node_procs[MAX_NODES];  /* procs per node, as of the last sync_procs_mask */
private(GMP) struct bpf_cpumask __kptr *procs_mask;

/* ---- Maps ---- */

/*
 * Task and cgroup state live in hash maps keyed by the task_struct's address and the
 * cgroup's id, not in BPF local storage: freeing a local-storage map can deadlock CPU hotplug
 * (docs/kernel-notes.md), a hash map's free cannot. The loader sizes task_ctxs from
 * kernel.threads-max; a cgroup beyond cgrp_ctxs' capacity runs with the default weight.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct cgrp_ctx);
} cgrp_ctxs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);	/* resized by the loader before load */
	__type(key, u64);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct gmp_pcpu_stats);
} stats SEC(".maps");

struct sysmon_timer {
	struct bpf_timer timer;
};

/*
 * One per CPU (the key), armed and run on that CPU alone (BPF_F_TIMER_CPU_PIN): a turn's
 * exact deadline, when it falls before the tick would end the turn (see exact_deadline).
 */
struct turn_timer {
	struct bpf_timer timer;
	u64 since;          /* running_since of the turn it was armed for */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, struct turn_timer);
} turn_timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sysmon_timer);
} sysmon_timer SEC(".maps");

/* ---- Accessors ---- */

/*
 * The clock for every timestamp. Timestamps are compared across CPUs (a wait starts on the
 * waker's CPU and ends on the runner's), so they come from bpf_ktime_get_ns(), one clock for
 * all CPUs; scx_bpf_now() is a per-CPU cache with no cross-CPU guarantee.
 */
static __always_inline u64 now_ns(void)
{
	return bpf_ktime_get_ns();
}

/*
 * Array indexes: clamp with a mask after an opaque barrier, so the compiler cannot drop the
 * mask and the verifier sees the bound on the very register used for the access. CPU ids
 * index arrays as unsigned values: a negative id becomes large and fails the bound.
 */
static __always_inline u32 cpu_idx(u32 c)
{
	barrier_var(c);
	return c & (MAX_CPUS - 1);
}

static __always_inline u32 node_idx(u32 n)
{
	barrier_var(n);
	return n & (MAX_NODES - 1);
}

static __always_inline struct cpu_ctx *cpu_ctx(s32 cpu)
{
	u32 c = cpu;

	if (c >= MAX_CPUS)
		return NULL;
	/* The mask repeats the bound in a form the verifier cannot lose across registers. */
	return &cpu_ctxs[cpu_idx(c)];
}

static __always_inline u32 node_of(s32 cpu)
{
	u32 c = cpu;

	if (c >= MAX_CPUS)
		return 0;
	return cpu_node[cpu_idx(c)] & (MAX_NODES - 1);
}

static __always_inline u64 shared_dsq(u32 node)
{
	return SHARED_DSQ_BASE + node;
}

static __always_inline struct task_ctx *task_ctx(struct task_struct *p)
{
	u64 key = (u64)p;

	return bpf_map_lookup_elem(&task_ctxs, &key);
}

/* The slice a task keeps the CPU with: its weighted slice once it has one. */
static __always_inline u64 task_slice(struct task_ctx *tctx)
{
	return tctx && tctx->wslice ? tctx->wslice : slice_ns;
}

/* @ran ns of CPU time as vtime at weighted slice @wslice (0: none yet, an equal share). */
static __always_inline u64 vtime_at(u64 ran, u64 wslice)
{
	return ran * slice_ns / (wslice ? wslice : slice_ns);
}

/* @ran ns of CPU time as vtime: scaled by slice / weighted slice (see task_ctx.vtime). */
static __always_inline u64 vtime_of(struct task_ctx *tctx, u64 ran)
{
	return vtime_at(ran, tctx->wslice);
}

static __always_inline bool is_proc(s32 cpu)
{
	u32 c = cpu;

	if (!procs_subset)
		return true;
	return c < MAX_CPUS && proc_on[cpu_idx(c)];
}

/* One scheduler tick; 4 ms (HZ=250, Debian's and Ubuntu's) when the config is unknown. */
static __always_inline u64 tick_ns(void)
{
	return CONFIG_HZ ? 1000000000ULL / CONFIG_HZ : 4000000ULL;
}

/* Defined in turns.bpf.c, used by dispatch's keep_prev: prev keeps its CPU for a new turn. */
static void renew_turn(struct cpu_ctx *cctx, struct task_struct *p, struct task_ctx *tctx);

#endif /* __GMP_BPF_H */
