/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gmp: Go's GMP run-queue model as a sched_ext scheduler.
 *
 * Every CPU is a Go "P" with a local run queue (cpu_dsq, a user DSQ so that other CPUs can
 * steal from it). Each NUMA node has a shared_dsq, Go's global run queue. A task woken
 * synchronously by the running task goes to the head of the waker's queue (runnext) and
 * inherits the rest of the waker's slice. An idle CPU looks at its own queue, then its node's
 * shared queue, then steals half of another CPU's queue (same LLC, same node, other nodes).
 * A BPF timer (sysmon) preempts tasks that ran past preempt_ns while others wait; where the
 * slice ends first, the tick ends the turn and sysmon is the backstop a tick later.
 *
 * Invariants that keep it safe:
 *  - A task is inserted into cpu_dsq[c] only if it may run on c (checked against
 *    p->cpus_ptr at insertion; steals check the thief's CPU before moving). An affinity
 *    change dequeues and re-enqueues the task, so a stale placement never survives it, and
 *    scx_bpf_dsq_move_to_local() skips tasks that may not run on the consuming CPU.
 *  - A task is inserted into shared_dsq[n] only if it may run on some CPU of node n (the node
 *    of a CPU taken from its own cpumask). Sending a task home inserts it into the local DSQ
 *    of an idle CPU picked from its own cpumask.
 *  - No task waits forever: every CPU calls ops.dispatch at least once a slice while it has
 *    work; the local queue is served first but the shared queue is served first on every
 *    fair_tick-th dispatch; a runnext chain shares one slice; sysmon preempts long runners when
 *    work waits; idle CPUs are kicked when work is queued.
 *  - procs (GOMAXPROCS): ordinary work goes only to CPUs in the processor set. A task that may
 *    run on no proc (pinned tasks, per-CPU kthreads) is queued on its own CPU, and a CPU outside
 *    the set still serves its own queue, so no task is stranded. Non-procs never take from the
 *    shared queues and never steal, so nothing that may run on a proc lingers there.
 *  - Weights scale slice lengths (and sysmon's threshold with them); slices are clamped to
 *    [SLICE_MIN_NS, SLICE_MAX_MUL * slice_ns]. The one place weights touch queue order is
 *    shared_pick, which may take a task with less weighted CPU time ahead of the head, but
 *    never once the head has waited SHARED_PICK_WAIT_SLICES slices, so a shared-queue wait
 *    stays within that bound plus its FIFO wait, for any weight.
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

/* Set by the loader before load. */
const volatile u32 nr_cpus = 1;           /* nr_cpu_ids, <= MAX_CPUS */
const volatile u32 nr_nodes = 1;          /* <= MAX_NODES */
const volatile u64 slice_ns = 10000000;   /* 10 ms, Go's forcePreemptNS */
const volatile u64 preempt_ns = 10000000; /* sysmon preempts runs longer than this */
const volatile u64 sysmon_ns = 0;         /* 0: adaptive, 20 us .. 10 ms */
const volatile u32 local_cap = 256;       /* Go's runq size */
const volatile u32 fair_tick = 61;        /* Go's schedtick%61 global-queue poll */
const volatile u32 steal_max = 32;
const volatile u32 numa_steal_min = 2;
const volatile bool runnext_on = true;
const volatile u64 wakeup_preempt_ns = 1000000; /* 0: wakeups never preempt */
const volatile u32 cpu_node[MAX_CPUS];
/*
 * TEST ONLY (--test-stall, hidden): stop dispatching so the kernel's watchdog must eject the
 * scheduler. Never set in normal use.
 */
const volatile bool test_stall = false;
const volatile u32 cpu_llc[MAX_CPUS];
const volatile bool numa_on = true;          /* false: --no-numa, the machine as one node */
const volatile u32 node_rep_cpu[MAX_NODES];  /* one online CPU per node: a placement hint */
const volatile bool cgroup_weights_on = true;
const volatile u64 starve_warn_ns = 500000000ULL;

/* The kernel's tick rate (libbpf reads it from the kernel config); 0 if the config is missing. */
extern unsigned int CONFIG_HZ __kconfig __weak;

#define SYSMON_MIN_NS (20 * 1000ULL)
#define SYSMON_MAX_NS (10 * 1000 * 1000ULL)
#define RUNNEXT_MIN_NS (20 * 1000ULL)   /* below this, a wakeup is not worth a runnext slot */
#define WAKEP_PENDING_NS (2 * 1000 * 1000ULL)
#define WEIGHT_ONE 100                   /* p->scx.weight and cpu.weight of nice 0 */
#define FP_ONE (1ULL << 16)              /* 16.16 fixed point for weight factors */
#define SLICE_MIN_NS (250 * 1000ULL)
#define SLICE_MAX_MUL 16
#define MAX_CG_DEPTH 16                  /* cgroup levels followed for weights */
#define STARVE_SCAN_NS (10 * 1000 * 1000ULL)
/*
 * Queue jumps (a wakeup preempting, an interactive wakeup queued at the head) run ahead of the
 * tasks waiting in order in a CPU's queue. What they cost those tasks is the CPU time the
 * jumping wakees run (a task a jump preempted resumes with the rest of the turn it had anyway),
 * so that time is what is bounded: once wakees that jumped have run half a slice here since a
 * task that waited in order last started, wakeups queue in order while tasks wait. A waiting
 * task so loses at most half a slice, plus one slice for each wakee that was already queued
 * ahead of it when the budget ran out, each time a task ahead of it starts in order. (A count
 * of 4 jumps bounded it before: up to 4 slices, yet under CPU hogs it refused 1-3% of
 * cyclictest's wakeups, which then waited behind a hog's turn, often two.) A jump ahead of an
 * interactive task is also charged a quarter of the budget (see wakeup_preempt).
 */
#define JUMP_US_MAX 65535  /* cpu_ctx.jump_us is a u16 */

static u32 jump_budget_us(void)
{
	u64 us = slice_ns / 2000;

	return us < JUMP_US_MAX ? us : JUMP_US_MAX;
}
/* tctx->jumped: how a task came to be queued ahead of waiting tasks. */
#define JUMP_WAKEE 1    /* an interactive wakeup that preempted or went to the head: charged */
#define JUMP_RESUMED 2  /* the task such a wakeup preempted, resuming its turn: not charged */
/*
 * A proc serving its node's shared queue takes the task with the least weighted CPU time
 * among the first SHARED_PICK_WINDOW, unless the head has waited SHARED_PICK_WAIT_SLICES
 * slices: then the head (see shared_pick).
 */
#define SHARED_PICK_WINDOW 8
#define SHARED_PICK_WAIT_SLICES 4

/* Per-CPU state, shared with the loader through the skeleton's bss. One cache line each. */
struct cpu_ctx {
	u64 running_since;  /* when the current scx_gmp task started; 0: none */
	u64 schedtick;      /* ops.dispatch calls, drives the fair tick */
	u64 burst_base;     /* now - burst_base: CPU time of the current task since it last slept */
	s32 running_pid;
	s32 runnext_pid;    /* the task in this CPU's runnext slot, 0: empty */
	u32 queued;         /* cpu_dsq length at the last sysmon pass */
	u32 steal_moved;    /* scratch: tasks moved by the steal in progress */
	u32 pick_seen;      /* scratch: shared-queue entries looked at by shared_pick */
	s32 pick_pid;       /* scratch: the entry shared_pick chose; -1: none */
	u64 run_limit_ns;   /* sysmon preempts the current task after this (see sysmon_deadline) */
	u8 kicked;          /* woken by wakep and not yet dispatching */
	u8 sysmon_kicked;   /* the current task was preempted by sysmon */
	u8 running_misplaced; /* a task that may run on a proc is running on a non-proc */
	u8 wake_preempting; /* a wakeup was sent here to preempt the current task */
	u16 jump_us;        /* CPU time (us) run here by jumping wakees since an in-order start */
	u8 running_interactive; /* the current task is interactive (see interactive()) */
	u8 stuck_passes;    /* sysmon passes that found no scx task running here and a task in its local DSQ or own queue */
} __attribute__((aligned(64)));

struct cpu_ctx cpu_ctxs[MAX_CPUS];
u32 shared_queued[MAX_NODES];     /* shared_dsq lengths at the last sysmon pass */
u32 busy_procs[MAX_NODES];        /* procs running a task, per node, at the last sysmon pass */
u64 saturated_at;                 /* since when every proc has run a task with work waiting; 0: not */
u64 saturated_ns;                 /* how long that has lasted, as of the last sysmon pass */
u64 node_kick_at[MAX_NODES];      /* when wakep last kicked a CPU of the node; 0: none pending */
u64 sysmon_interval_ns;
u64 sysmon_next_at;                       /* when the sysmon timer fires next */
u64 vclock;                               /* the highest vtime of a task that started */
u64 starve_scan_at;
struct gmp_wait_rec wait_recs[MAX_CPUS];  /* read and cleared by the loader each interval */
s64 nr_runnable_total;                    /* runnable scx tasks counted for cgroup weights */
s64 nr_task_ctxs, nr_cgrp_ctxs;           /* live entries of task_ctxs and cgrp_ctxs */
s64 last_ctx_err;                         /* errno of the last failed state allocation */

/*
 * The processor set, written by the loader: proc_on[c] says whether CPU c is a proc,
 * procs_subset that some CPU is not (false: the fast path), and procs_gen is bumped after
 * each change. sysmon mirrors proc_on into procs_mask, the cpumask the idle-CPU kfuncs take.
 */
u8 proc_on[MAX_CPUS];
bool procs_subset;    /* 0: every CPU is a proc */
u64 procs_gen;
u64 procs_mask_gen;
u32 node_procs[MAX_NODES];  /* procs per node, as of the last sync_procs_mask */
private(GMP) struct bpf_cpumask __kptr *procs_mask;

struct task_ctx {
	u64 ready_at;       /* when the task last became runnable */
	u64 runnext_slice;  /* set by select_cpu: the slice inherited from the waker */
	u64 burst_ns;       /* CPU time since the task last slept */
	u64 last_burst_ns;  /* CPU time it used between its last two sleeps */
	u64 avg_burst_ns;   /* moving average of its bursts, each capped (see end_burst) */
	u64 wslice;         /* slice from the task's weight and cgroup share, set at running */
	s64 debt_ns;        /* CPU time run past (> 0) or short of (< 0) its slices while contended */
	u64 turn_ns;        /* the slice of its current turn */
	u64 turn_ran;       /* CPU time run in earlier parts of a turn split by wakeup preemption */
	u64 resume_ns;      /* what a wakeup preemption left of its turn; 0: none */
	u64 vtime;          /* weighted CPU time: ns run * slice_ns / wslice */
	u64 cgid;           /* cgroup counted at runnable, undone at quiescent */
	s32 home_node;      /* where its memory is, or where it has been running */
	s32 mem_node;       /* the node its memory policy binds or prefers; -1: none */
	s32 last_cpu;
	u32 away_runs;      /* consecutive runs away from home_node */
	u8 jumped;          /* queued ahead of waiting tasks (JUMP_WAKEE, JUMP_RESUMED); 0 at stopping */
	u8 cg_counted;
};

/* Per-cgroup state for cpu.weight (see cg_activate). */
struct cgrp_ctx {
	s64 child_weight_sum; /* weights of active child cgroups + WEIGHT_ONE per runnable task */
	s64 nr_active;        /* active child cgroups + runnable tasks directly in this cgroup */
	u64 weight;           /* cpu.weight, 1..10000, 100 by default */
};

/*
 * Task and cgroup state live in hash maps keyed by the task_struct's address and the cgroup's
 * id, not in BPF task/cgroup local storage. Freeing a local-storage map waits for an RCU
 * tasks-trace grace period inside a worker that has disabled migration; if a CPU goes offline
 * under that worker, the offline waits for the worker and the grace period waits for the
 * offline's hotplug lock, and CPU hotplug deadlocks (seen on 6.16 and 6.18 whenever scx_gmp
 * exited or restarted while a CPU was changing). A hash map's free defers its grace-period
 * waits to an ordinary worker, so unloading is safe at any time.
 *
 * A task_struct's address names one task from ops.init_task to ops.exit_task: the kernel
 * calls exit_task before it frees the struct, and exit_task deletes the entry, so a later task
 * at the same address never sees its predecessor's state. The loader sizes task_ctxs from
 * kernel.threads-max (see src/sched.rs); cgrp_ctxs holds up to 65536 cgroups and a cgroup
 * beyond that runs with the default weight rather than failing its mkdir.
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

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sysmon_timer);
} sysmon_timer SEC(".maps");

/*
 * The clock for every timestamp here. Timestamps are compared across CPUs (a wait starts on
 * the waker's CPU and ends on the runner's; sysmon reads every CPU's running_since), so they
 * come from bpf_ktime_get_ns(), one clock for all CPUs. scx_bpf_now() is a per-CPU cache of
 * the rq clock with no cross-CPU guarantee: in the VM it read up to ~600 ms behind on waking
 * CPUs, which showed as 100-600 ms "waits" on an idle machine whose real waits (by ktime)
 * were under 5 ms.
 */
static __always_inline u64 now_ns(void)
{
	return bpf_ktime_get_ns();
}

static __always_inline void stat_add(u32 idx, u64 v)
{
	u32 zero = 0;
	struct gmp_pcpu_stats *s = bpf_map_lookup_elem(&stats, &zero);

	if (s && idx < GMP_NR_STATS)
		s->cnt[idx] += v;
}

/*
 * Array indexes: clamp with a mask after an opaque barrier, so the compiler cannot drop the
 * mask and the verifier sees the bound on the very register used for the access.
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

/* CPU ids index arrays as unsigned values: a negative id becomes large and fails the bound. */
/* Add to another CPU's slot of a per-CPU counter. */
static void stat_add_on(s32 cpu, u32 idx, u64 v)
{
	u32 zero = 0;
	struct gmp_pcpu_stats *s = bpf_map_lookup_percpu_elem(&stats, &zero, cpu);

	if (s && idx < GMP_NR_STATS)
		s->cnt[idx] += v;
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

/*
 * Insert a fresh state into task_ctxs or cgrp_ctxs and count it in @live. An entry can
 * only exist already if its task or cgroup failed to delete it on exit; that owner is gone,
 * so overwrite it. Allocation can fail (map full, or the allocator's per-CPU cache empty for
 * the moment): counted, and the caller goes on without a state.
 */
static __always_inline long ctx_insert(void *map, u64 *key, void *init, s64 *live)
{
	long ret = bpf_map_update_elem(map, key, init, BPF_NOEXIST);

	if (!ret)
		__sync_fetch_and_add(live, 1);
	else if (ret == -EEXIST)
		ret = bpf_map_update_elem(map, key, init, BPF_EXIST);
	if (ret) {
		stat_add(ST_CTX_ALLOC_FAIL, 1);
		last_ctx_err = ret;
	}
	return ret;
}

/* Delete a state on its owner's exit; uncount it only if it was there. */
static __always_inline void ctx_delete(void *map, u64 *key, s64 *live)
{
	if (!bpf_map_delete_elem(map, key))
		__sync_fetch_and_sub(live, 1);
}

/* A fresh state for @p, or NULL (see ctx_insert). */
static struct task_ctx *task_ctx_create(struct task_struct *p)
{
	struct task_ctx init = {
		.home_node = -1,
		.mem_node = -1,
		.last_cpu = -1,
		/*
		 * Neither interactive nor a hog until it has slept a few times; a task that never
		 * sleeps (a CPU hog) must not count as one whose last burst was short.
		 */
		.avg_burst_ns = wakeup_preempt_ns,
		.last_burst_ns = wakeup_preempt_ns,
	};
	u64 key = (u64)p;

	if (ctx_insert(&task_ctxs, &key, &init, &nr_task_ctxs))
		return NULL;
	return bpf_map_lookup_elem(&task_ctxs, &key);
}

static u32 ilog2_u64(u64 v)
{
	u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* Log-linear bucket: exact below 4 us, then 4 buckets per power of two. */
static u32 lat_bucket(u64 us)
{
	u32 msb, b;

	if (us < 4)
		return us;
	msb = ilog2_u64(us);
	b = (msb - 1) * 4 + ((us >> (msb - 2)) & 3);
	return b < NR_LAT_BUCKETS ? b : NR_LAT_BUCKETS - 1;
}

static void record_latency(u64 lat_ns)
{
	u32 zero = 0, b;
	u64 us = lat_ns / 1000;
	struct gmp_pcpu_stats *s = bpf_map_lookup_elem(&stats, &zero);

	if (!s)
		return;
	b = lat_bucket(us);
	barrier_var(b);
	if (b < NR_LAT_BUCKETS)
		s->lat[b]++;
	s->cnt[ST_LAT_SUM_US] += us;
	s->cnt[ST_LAT_COUNT]++;
}

/* Remember the longest wait this CPU has seen since the loader last looked. */
static void note_wait(s32 cpu, struct task_struct *p, u64 wait, u32 still_waiting)
{
	struct gmp_wait_rec *rec;
	u32 c = cpu;

	if (c >= MAX_CPUS)
		return;
	rec = &wait_recs[cpu_idx(c)];
	if (wait <= rec->wait_ns)
		return;
	rec->wait_ns = wait;
	rec->pid = p->pid;
	rec->still_waiting = still_waiting;
	bpf_probe_read_kernel_str(rec->comm, sizeof(rec->comm), p->comm);
}

static __always_inline bool is_proc(s32 cpu)
{
	u32 c = cpu;

	if (!procs_subset)
		return true;
	return c < MAX_CPUS && proc_on[cpu_idx(c)];
}

/*
 * A proc @p may run on, or -1 if none. Within the mask any proc will do: the queue it lands
 * in is stealable by its neighbours. Callers are non-sleepable ops, which run inside an RCU
 * read-side section, so the kptr may be read without taking the lock (taking and dropping it
 * would end the section that iterator-held task pointers rely on).
 */
static s32 proc_for(struct task_struct *p)
{
	const struct cpumask *m = cast_mask(procs_mask);
	s32 cpu = -1;

	if (m)
		cpu = bpf_cpumask_any_and_distribute(m, p->cpus_ptr);
	return cpu >= 0 && cpu < nr_cpus ? cpu : -1;
}

/* Copy proc_on into procs_mask if the loader changed it. Bits flip in place, one by one. */
static void sync_procs_mask(void)
{
	struct bpf_cpumask *m;
	u64 gen = procs_gen;
	u32 i;

	if (gen == procs_mask_gen)
		return;
	bpf_rcu_read_lock();
	m = procs_mask;
	if (m) {
		bpf_for(i, 0, MAX_NODES)
			node_procs[i] = 0;
		bpf_for(i, 0, nr_cpus) {
			if (proc_on[cpu_idx(i)]) {
				bpf_cpumask_set_cpu(i, m);
				node_procs[node_idx(node_of(i))]++;
			} else {
				bpf_cpumask_clear_cpu(i, m);
			}
		}
		procs_mask_gen = gen;
	}
	bpf_rcu_read_unlock();
}

/*
 * cgroup cpu.weight, CFS's semantics flattened into one factor per task. A cgroup is active
 * while a task in it or below it is runnable. Each cgroup's child_weight_sum adds the weights
 * of its active children and WEIGHT_ONE per runnable task directly in it (tasks compete with
 * sibling cgroups as nice-0 entities, as in CFS). A task's share of the machine is then the
 * product, down its path, of weight / parent's child_weight_sum; times the number of runnable
 * tasks it becomes a slice factor (1.0 when everyone is equal). Counts are atomics: racing
 * transitions of one cgroup pair up, so the sums converge.
 */
static struct cgrp_ctx *cgrp_ctx(struct cgroup *cg)
{
	u64 id = cg->kn->id;

	return bpf_map_lookup_elem(&cgrp_ctxs, &id);
}

/* The state of @cg's ancestor at @level (@cg itself at its own level). */
static struct cgrp_ctx *cg_level_ctx(struct cgroup *cg, u32 level)
{
	struct cgroup *anc = bpf_cgroup_ancestor(cg, level);
	struct cgrp_ctx *c;

	if (!anc)
		return NULL;
	c = cgrp_ctx(anc);
	bpf_cgroup_release(anc);
	return c;
}

static __always_inline u64 cg_weight(struct cgrp_ctx *c)
{
	return c->weight ? c->weight : WEIGHT_ONE;
}

/* Count @p runnable (@dir 1) or not (@dir -1) in cgroup @cg and, on transitions, its parents. */
static void cg_account(struct cgroup *cg, s64 dir)
{
	s64 amount = WEIGHT_ONE, prev;
	u32 top = cg->level, i;

	if (top > MAX_CG_DEPTH)
		top = MAX_CG_DEPTH;
	bpf_for(i, 0, MAX_CG_DEPTH + 1) {
		struct cgrp_ctx *c;

		if (i > top)
			break;
		c = cg_level_ctx(cg, top - i);
		if (!c)
			break;
		__sync_fetch_and_add(&c->child_weight_sum, dir * amount);
		prev = __sync_fetch_and_add(&c->nr_active, dir);
		/* Only a cgroup turning active (0 -> 1) or idle (1 -> 0) changes its parent. */
		if (prev != (dir > 0 ? 0 : 1))
			break;
		amount = cg_weight(c);
	}
}

static void cg_runnable(struct task_struct *p, struct task_ctx *tctx)
{
	struct cgroup *cg;

	if (!cgroup_weights_on || tctx->cg_counted)
		return;
	cg = scx_bpf_task_cgroup(p);
	if (!cg)
		return;
	tctx->cgid = cg->kn->id;
	cg_account(cg, 1);
	bpf_cgroup_release(cg);
	tctx->cg_counted = 1;
	__sync_fetch_and_add(&nr_runnable_total, 1);
}

static void cg_quiescent(struct task_ctx *tctx)
{
	struct cgroup *cg;

	if (!tctx->cg_counted)
		return;
	tctx->cg_counted = 0;
	__sync_fetch_and_add(&nr_runnable_total, -1);
	cg = bpf_cgroup_from_id(tctx->cgid);
	if (!cg)
		return;
	cg_account(cg, -1);
	bpf_cgroup_release(cg);
}

/* The slice factor of @p's cgroup path (FP_ONE: an equal share). */
static u64 cg_factor(struct task_struct *p)
{
	struct cgrp_ctx *parent = NULL, *c = NULL;
	s64 t = nr_runnable_total;
	struct cgroup *cg;
	u64 f, top, i;

	if (t < 1)
		t = 1;
	cg = scx_bpf_task_cgroup(p);
	if (!cg)
		return FP_ONE;
	top = cg->level;
	if (top > MAX_CG_DEPTH)
		top = MAX_CG_DEPTH;
	f = (u64)t * FP_ONE;
	bpf_for(i, 0, MAX_CG_DEPTH + 1) {
		if (i > top)
			break;
		c = cg_level_ctx(cg, i);
		if (!c)
			break;
		if (parent && parent->child_weight_sum > 0)
			f = f * cg_weight(c) / (u64)parent->child_weight_sum;
		if (f > ((u64)SLICE_MAX_MUL << 32))
			f = (u64)SLICE_MAX_MUL << 32;
		parent = c;
	}
	bpf_cgroup_release(cg);
	/* The task's own part of its cgroup. */
	if (c && c->child_weight_sum > 0)
		f = f * WEIGHT_ONE / (u64)c->child_weight_sum;
	return f;
}

/* Slice and sysmon threshold for @p: scaled by its weight and its cgroup's share. */
static u64 weighted(u64 base, struct task_struct *p, u64 cgf)
{
	u64 f = (u64)p->scx.weight * FP_ONE / WEIGHT_ONE, v;

	if (cgroup_weights_on)
		f = f * cgf / FP_ONE;
	if (f > SLICE_MAX_MUL * FP_ONE)
		f = SLICE_MAX_MUL * FP_ONE;
	v = base * f / FP_ONE;
	if (v < SLICE_MIN_NS)
		v = SLICE_MIN_NS;
	return v;
}

/*
 * Go's wakep(): wake one idle CPU of @node for new work, but only if no CPU kicked earlier is
 * still on its way (Go allows one new spinning M at a time). The kicked CPU clears the
 * pending mark when it reaches ops.dispatch, and may call wakep again if work remains, so
 * idle CPUs wake in a chain rather than a storm. A stale mark expires after
 * WAKEP_PENDING_NS so a lost kick cannot block wakeups.
 */
static void wakep(u32 node, const struct cpumask *allowed)
{
	u64 now = now_ns(), last;
	struct cpu_ctx *cctx;
	s32 cpu;

	node = node_idx(node);
	last = node_kick_at[node];
	if (last && now - last < WAKEP_PENDING_NS)
		return;
	/* Only procs are woken for shared work; a non-proc serves nothing but its own queue. */
	if (procs_subset)
		allowed = cast_mask(procs_mask);
	if (!allowed)
		return;
	cpu = numa_on ? __COMPAT_scx_bpf_pick_idle_cpu_node(allowed, node, 0) :
			scx_bpf_pick_idle_cpu(allowed, 0);
	if (cpu < 0)
		return;
	node_kick_at[node_idx(node_of(cpu))] = now;
	cctx = cpu_ctx(cpu);
	if (cctx)
		cctx->kicked = 1;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_add(ST_KICK_IDLE, 1);
}

/*
 * The node @p's memory policy binds it to or prefers (numactl --membind/--preferred), or -1.
 * The kernel's NUMA balancing never scans sched_ext tasks (it runs from the fair class's
 * tick), so the memory policy is the signal a task's memory placement gives us.
 */
static s32 mem_node_of(struct task_struct *p)
{
	struct mempolicy *mp = BPF_CORE_READ(p, mempolicy);
	u64 bits;
	u16 mode;
	u32 n;

	if (!mp)
		return -1;
	mode = BPF_CORE_READ(mp, mode);
	if (mode != MPOL_BIND && mode != MPOL_PREFERRED && mode != MPOL_PREFERRED_MANY)
		return -1;
	bits = BPF_CORE_READ(mp, nodes.bits[0]);
	if (!bits)
		return -1;
	n = ilog2_u64(bits & -bits);  /* the lowest node of the mask */
	return n < nr_nodes ? (s32)n : -1;
}

static __always_inline bool away_from_home(struct task_ctx *tctx, u32 node)
{
	return numa_on && tctx && tctx->home_node >= 0 && tctx->home_node < nr_nodes &&
	       tctx->home_node != node;
}

/* An idle proc of node @home that @p may use, claimed; -1 if there is none. */
static s32 idle_at_home(struct task_struct *p, s32 home)
{
	const struct cpumask *procs;
	s32 cpu;

	if (!procs_subset)
		return __COMPAT_scx_bpf_pick_idle_cpu_node(p->cpus_ptr, home, 0);
	/* Separate calls per mask kind: the verifier wants one pointer type per call site. */
	procs = cast_mask(procs_mask);
	if (!procs)
		return -1;
	cpu = __COMPAT_scx_bpf_pick_idle_cpu_node(procs, home, 0);
	if (cpu >= 0 && !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		/* Claimed but unusable for @p: wake it so it goes idle again properly. */
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return -1;
	}
	return cpu;
}

/*
 * NUMA-aware idle pick among @allowed (procs, or the task's own mask when every CPU is a
 * proc): the home node first (the previous CPU, its LLC, then the node, in the kernel's
 * order), other nodes only when the home node has no idle CPU and the task would otherwise
 * queue behind at least numa_steal_min - 1 others there: a short wait at home is cheaper than
 * running every memory access remotely. Returns a claimed idle CPU or a negative value.
 */
static s32 pick_idle(struct task_struct *p, s32 prev_cpu, u64 wake_flags, s32 home,
		     const struct cpumask *allowed)
{
	s32 hint = prev_cpu, cpu;
	u32 backlog;

	if (!numa_on || nr_nodes < 2)
		return scx_bpf_select_cpu_and(p, prev_cpu, wake_flags, allowed, 0);
	/* A task moved away by a steal goes home when home has room (hint: a home CPU). */
	if (home >= 0 && home < nr_nodes && home != node_of(prev_cpu))
		hint = node_rep_cpu[node_idx(home)];
	cpu = scx_bpf_select_cpu_and(p, hint, wake_flags, allowed, SCX_PICK_IDLE_IN_NODE);
	if (cpu >= 0)
		return cpu;
	backlog = scx_bpf_dsq_nr_queued(shared_dsq(node_of(hint)));
	if ((u32)hint < nr_cpus)
		backlog += scx_bpf_dsq_nr_queued(hint);
	if (backlog + 1 < numa_steal_min)
		return -1;
	return scx_bpf_select_cpu_and(p, hint, wake_flags, allowed, 0);
}

/* wakep over every online CPU, for callers without a task at hand. */
static void wakep_any(u32 node)
{
	const struct cpumask *online = scx_bpf_get_online_cpumask();

	wakep(node, online);
	scx_bpf_put_cpumask(online);
}

s32 BPF_STRUCT_OPS(gmp_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu, home = tctx ? tctx->home_node : -1;

	/*
	 * runnext: a synchronous wakeup by the scx_gmp task running here. The wakee goes to the
	 * head of this CPU's queue and inherits the waker's remaining slice, so a chain of
	 * hand-offs shares one slice and cannot hold the queue head for longer than slice_ns.
	 */
	if (runnext_on && tctx && (wake_flags & SCX_WAKE_SYNC)) {
		struct task_struct *cur = bpf_get_current_task_btf();
		s32 this_cpu = bpf_get_smp_processor_id();
		struct cpu_ctx *cctx = cpu_ctx(this_cpu);

		if (cctx && cur && cctx->running_pid == cur->pid && cur->pid != p->pid &&
		    cur->scx.slice >= RUNNEXT_MIN_NS && is_proc(this_cpu) &&
		    bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr)) {
			tctx->runnext_slice = cur->scx.slice;
			return this_cpu;
		}
	}

	if (!procs_subset) {
		cpu = pick_idle(p, prev_cpu, wake_flags, home, p->cpus_ptr);
	} else {
		/* select_cpu_and() ANDs procs with p->cpus_ptr: only a proc can be picked. */
		const struct cpumask *procs = cast_mask(procs_mask);

		cpu = procs ? pick_idle(p, prev_cpu, wake_flags, home, procs) : -1;
	}
	if (cpu < 0 || test_stall)
		return cpu < 0 ? prev_cpu : cpu;

	/* The kernel claimed an idle CPU from p->cpus_ptr (and procs): run there now. */
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	stat_add(ST_ENQ_DIRECT_IDLE, 1);
	stat_add_on(cpu, home < 0 || node_of(cpu) == home ? ST_PLACE_HOME : ST_PLACE_REMOTE, 1);
	return cpu;
}

/*
 * Interactive: its last burst or its average burst was short. The average keeps a periodic
 * task interactive through the odd long burst (catching up after a delay, an interrupt storm);
 * the last burst lets a task that changed its ways count at once.
 */
static bool interactive(struct task_ctx *tctx)
{
	return tctx->last_burst_ns < wakeup_preempt_ns || tctx->avg_burst_ns < wakeup_preempt_ns;
}

/* Charge @us to this CPU's jump budget, saturating. */
static __always_inline void charge_jump(struct cpu_ctx *cctx, u64 us)
{
	us += cctx->jump_us;
	cctx->jump_us = us < JUMP_US_MAX ? us : JUMP_US_MAX;
}

/*
 * Wakeup preemption (not in Go, which leaves it to sysmon's 10 ms): an interactive task
 * (interactive()) waking on a busy CPU preempts the current task there, which goes back to
 * the head of this CPU's queue with the rest of its turn (ST_ENQ_RESUMED): sleepers see
 * sub-slice latency and frequent wakeups cannot shrink a heavy task's share. If the current
 * task is interactive too and inside its first wakeup_preempt_ns, it will sleep soon: the
 * wakee is queued at the head and runs then (ST_WAKE_HEAD). A hog whose burst is short
 * because it slept once is not interactive, so it is preempted rather than waited for.
 * Both are queue jumps, refused while tasks wait in this CPU's queue once jumping wakees have
 * used the jump budget (jump_budget_us), which bounds what a waiting task can lose to them.
 * Callers pass a @cpu in p->cpus_ptr (checked under the task's rq lock), so LOCAL_ON is safe.
 * This matters for per-CPU kthreads too: softirq work (sysmon's own timer among it) falls back
 * to ksoftirqd.
 */
static bool wakeup_preempt(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 enq_flags)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);

	if (!wakeup_preempt_ns || !(enq_flags & SCX_ENQ_WAKEUP) || !cctx || !tctx ||
	    !cctx->running_pid || !interactive(tctx))
		return false;
	if (cctx->jump_us >= jump_budget_us() && scx_bpf_dsq_nr_queued(cpu) != 0) {
		stat_add(ST_WAKE_NO_JUMP, 1);
		return false;
	}
	tctx->jumped = JUMP_WAKEE;
	/*
	 * Jumping ahead of an interactive task buys little (it sleeps soon) and costs a context
	 * switch each time; among tasks that all wake often (hackbench), charging only run time
	 * let jumps multiply (4-5x the preemptions, runs 1.4x longer). So such a jump is charged
	 * a quarter of the budget up front: at most 4 per in-order start, as the old count had.
	 */
	if (cctx->running_interactive) {
		charge_jump(cctx, jump_budget_us() / 4);
		if (now_ns() - cctx->burst_base < wakeup_preempt_ns) {
			scx_bpf_dsq_insert(p, cpu, slice_ns, enq_flags | SCX_ENQ_HEAD);
			stat_add(ST_WAKE_HEAD, 1);
			return true;
		}
	}
	cctx->wake_preempting = 1;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags | SCX_ENQ_PREEMPT);
	stat_add(ST_PREEMPT_WAKEUP, 1);
	return true;
}

void BPF_STRUCT_OPS(gmp_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu = scx_bpf_task_cpu(p);
	u64 runnext_slice = 0;
	struct cpu_ctx *cctx;
	u32 node;

	if (tctx) {
		runnext_slice = tctx->runnext_slice;
		tctx->runnext_slice = 0;
	}

	/* Migration-disabled tasks can run only where they are. */
	if (is_migration_disabled(p)) {
		if (enq_flags & SCX_ENQ_LAST)
			goto keep_running;
		scx_bpf_dsq_insert(p, cpu, slice_ns, enq_flags);
		stat_add(ST_ENQ_PINNED, 1);
		goto kick_target;
	}

	/* The task's CPU may have left its mask (affinity change): pick one inside it. */
	if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr))
		cpu = bpf_cpumask_any_distribute(p->cpus_ptr);
	if (cpu < 0 || cpu >= nr_cpus || cpu >= MAX_CPUS) {
		scx_bpf_error("enqueue: %s[%d] has no usable CPU (%d)", p->comm, p->pid, cpu);
		return;
	}

	if (p->nr_cpus_allowed == 1) {
		if (enq_flags & SCX_ENQ_LAST)
			goto keep_running;
		/* ksoftirqd, kworkers: a pinned waker must not wait a whole slice behind a hog. */
		if (wakeup_preempt(p, tctx, cpu, enq_flags))
			return;
		scx_bpf_dsq_insert(p, cpu, slice_ns, enq_flags);
		stat_add(ST_ENQ_PINNED, 1);
		goto kick_target;
	}

	/* Ordinary work belongs on a proc; what may run on none stays on its own CPU. */
	if (!is_proc(cpu)) {
		s32 pc = proc_for(p);

		if (pc < 0) {
			if (enq_flags & SCX_ENQ_LAST)
				goto keep_running;
			scx_bpf_dsq_insert(p, cpu, slice_ns, enq_flags);
			stat_add(ST_ENQ_STRANDED, 1);
			goto kick_target;
		}
		if (enq_flags & SCX_ENQ_LAST)
			stat_add(ST_EVICTED, 1);
		cpu = pc;
		/* runnext and wakeup preemption target this CPU; it is not the waker's now. */
		runnext_slice = 0;
		enq_flags &= ~SCX_ENQ_LAST;
	}
	node = node_of(cpu);

	/*
	 * Away from home (a steal moved it, or its memory is elsewhere) with room at home: go
	 * home. Wakeups were placed by select_cpu, which looked at home first.
	 */
	if (!(enq_flags & SCX_ENQ_WAKEUP) && away_from_home(tctx, node)) {
		s32 hc = idle_at_home(p, tctx->home_node);

		if (hc >= 0) {
			/* hc is in p->cpus_ptr (idle_at_home checked it): LOCAL_ON is safe. */
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | hc, slice_ns, enq_flags);
			scx_bpf_kick_cpu(hc, SCX_KICK_IDLE);
			stat_add_on(hc, ST_PLACE_HOME, 1);
			return;
		}
	}
	if (enq_flags & SCX_ENQ_LAST)
		goto keep_running;

	if (enq_flags & SCX_ENQ_REENQ) {
		/* A higher class took the CPU: let another CPU of the node run it. */
		scx_bpf_dsq_insert(p, shared_dsq(node), slice_ns, enq_flags);
		stat_add(ST_ENQ_REENQ, 1);
		wakep(node, p->cpus_ptr);
		return;
	}

	if (!(enq_flags & SCX_ENQ_WAKEUP) && tctx && tctx->resume_ns) {
		/*
		 * Preempted by a short wakeup: it keeps its place (the head of its CPU's queue) and
		 * the rest of its turn, so frequent wakeups cannot shrink a heavy task's share. Only
		 * the wakee's run time is charged to the jump budget: this turn was due anyway.
		 */
		tctx->jumped = JUMP_RESUMED;
		scx_bpf_dsq_insert(p, cpu, tctx->resume_ns, enq_flags | SCX_ENQ_HEAD);
		stat_add(ST_ENQ_RESUMED, 1);
		goto kick_target;
	}

	if (!(enq_flags & SCX_ENQ_WAKEUP) && p->scx.slice == 0) {
		/*
		 * Preempted (slice used up, sysmon kick) or yielded: the shared queue's tail, as
		 * Go does with preempted goroutines, so a long runner lets others go first.
		 */
		scx_bpf_dsq_insert(p, shared_dsq(node), slice_ns, enq_flags);
		stat_add(ST_ENQ_PREEMPTED, 1);
		wakep(node, p->cpus_ptr);
		return;
	}
	/* Wakeups, new tasks and tasks re-queued by an attribute change use the local queue. */

	if (scx_bpf_dsq_nr_queued(cpu) >= local_cap) {
		/*
		 * The local queue is full. Go moves half of it to the global queue in one batch; a
		 * DSQ cannot be drained from ops.enqueue (the rq lock is held), so the new task
		 * alone overflows and thieves rebalance the rest in batches.
		 */
		scx_bpf_dsq_insert(p, shared_dsq(node), slice_ns, enq_flags);
		stat_add(ST_ENQ_OVERFLOW, 1);
		wakep(node, p->cpus_ptr);
		return;
	}

	cctx = cpu_ctx(cpu);
	/*
	 * runnext only while the local queue is empty: a head insertion ahead of waiting tasks
	 * could, with ping-pong pairs handing off on this CPU, keep a pinned task at the tail
	 * waiting forever (Go moves a displaced runnext to the tail; a DSQ cannot reorder here).
	 */
	if (runnext_slice && cctx && cpu == bpf_get_smp_processor_id() &&
	    scx_bpf_dsq_nr_queued(cpu) == 0) {
		cctx->runnext_pid = p->pid;
		scx_bpf_dsq_insert(p, cpu, runnext_slice, enq_flags | SCX_ENQ_HEAD);
		stat_add(ST_ENQ_RUNNEXT, 1);
		return;
	}

	if (wakeup_preempt(p, tctx, cpu, enq_flags))
		return;

	scx_bpf_dsq_insert(p, cpu, slice_ns, enq_flags);
	stat_add(ST_ENQ_LOCAL, 1);

kick_target:
	/* Wake the queue's owner if it idles; otherwise one idle CPU that may steal. */
	if (scx_bpf_test_and_clear_cpu_idle(cpu)) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		stat_add(ST_KICK_IDLE, 1);
	} else if (p->nr_cpus_allowed > 1) {
		wakep(node_of(cpu), p->cpus_ptr);
	}
	return;

keep_running:
	/*
	 * SCX_ENQ_LAST for a task that may stay (keep_prev normally keeps those before it comes to
	 * this): back to this CPU's local DSQ. The CPU is already switching to idle, so kick it
	 * to pick the task up.
	 */
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, tctx && tctx->wslice ? tctx->wslice : slice_ns,
			   enq_flags);
	scx_bpf_kick_cpu(scx_bpf_task_cpu(p), 0);
	stat_add(ST_DISP_KEEP_PREV, 1);
}

/*
 * Move up to half of @victim's queue to @cpu: the first task to run now, the rest queued.
 * A global (separately verified) function, so the verifier checks the DSQ walk once instead
 * of once per path through ops.dispatch.
 */
__noinline u32 steal_from(s32 cpu, s32 victim)
{
	struct cpu_ctx *vctx = cpu_ctx(victim), *cctx = cpu_ctx(cpu);
	struct task_struct *p;
	s32 runnext_pid, nq;
	u32 want, moved;

	if (!vctx || !cctx)
		return 0;
	nq = scx_bpf_dsq_nr_queued(victim);
	if (nq <= 0)
		return 0;
	want = ((u32)nq + 1) / 2;
	if (want > steal_max)
		want = steal_max;
	runnext_pid = vctx->runnext_pid;

	/*
	 * The count lives in memory, not in a register: as a register constant the verifier
	 * would walk the loop once per value; loaded from memory it is an unknown it checks once.
	 * The walk is bounded by the queue's length and by want.
	 */
	cctx->steal_moved = 0;
	bpf_for_each(scx_dsq, p, victim, 0) {
		u64 target;

		/* The victim's runnext task runs next there; Go leaves it alone too. */
		if (runnext_pid && p->pid == runnext_pid && nq > 1)
			continue;
		/* Respect the task's CPU mask: only tasks allowed on the thief move. */
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || is_migration_disabled(p))
			continue;
		/* The first task runs now; the rest wait in the thief's own queue. */
		target = cctx->steal_moved ? (u64)cpu : SCX_DSQ_LOCAL;
		if (!scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, target, 0))
			continue;
		if (++cctx->steal_moved >= want)
			break;
	}
	moved = cctx->steal_moved;
	if (moved)
		stat_add_on(victim, ST_STOLEN_OUT, moved);
	return moved;
}

/* The state of the task at the head of @dsq_id; NULL if the queue is empty. */
static struct task_ctx *head_tctx(u64 dsq_id)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, dsq_id, 0)
		return task_ctx(p);
	return NULL;
}

/* How long the task at the head of @dsq_id has waited; 0 if the queue is empty. */
static u64 head_wait_ns(u64 dsq_id, u64 now)
{
	struct task_ctx *tctx = head_tctx(dsq_id);

	return tctx && tctx->ready_at && now > tctx->ready_at ? now - tctx->ready_at : 0;
}

/*
 * vtime of the task at the head of @dsq_id; U64_MAX if the queue is empty or its head is
 * bound to its node by its memory policy (it must not be pulled away from its memory).
 */
static u64 head_vtime(u64 dsq_id)
{
	struct task_ctx *tctx = head_tctx(dsq_id);

	return tctx && tctx->mem_node < 0 ? tctx->vtime : (u64)-1;
}

/* @ran ns of CPU time as vtime: scaled by slice / weighted slice (see task_ctx.vtime). */
static __always_inline u64 vtime_of(struct task_ctx *tctx, u64 ran)
{
	return ran * slice_ns / (tctx->wslice ? tctx->wslice : slice_ns);
}

/*
 * Fairness across nodes: every node serves its own shared queue, so tasks on a node crowded
 * with more (or heavier) work than another fall behind their share: 5 hogs on 2+2 CPUs split
 * 3:2 get 2/3 of a CPU on one node and a whole CPU on the other (Jain 0.96). A proc about to
 * serve its node takes another node's head instead when that task's weighted CPU time trails
 * what this proc would run next by more than two slices: its own head, or, with nothing
 * queued here, @prev_vt (the task ending its turn, which keeps the CPU otherwise; U64_MAX if
 * there is none). The other node must be the more crowded one: its backlog is at least
 * numa_steal_min (like any cross-node steal), or at least ours counting prev, which queues
 * here once it yields, so a move never leaves more waiting here than there and two nodes
 * cannot pull one task to and fro faster than the lag builds up again. Tasks with a memory
 * node stay put (head_vtime). Global for the same reason as steal_from().
 */
__noinline int lag_steal(u32 node, u64 prev_vt)
{
	s32 mine_q = scx_bpf_dsq_nr_queued(shared_dsq(node)), q;
	u64 mine = mine_q > 0 ? head_vtime(shared_dsq(node)) : prev_vt, theirs;
	u32 n;

	if (mine == (u64)-1)
		return 0;
	if (mine_q < 0)
		mine_q = 0;
	if (prev_vt != (u64)-1)
		mine_q++;
	bpf_for(n, 0, nr_nodes) {
		if (n == node || n >= MAX_NODES)
			continue;
		q = scx_bpf_dsq_nr_queued(shared_dsq(n));
		if (q <= 0 || (q < (s32)numa_steal_min && q < mine_q))
			continue;
		theirs = head_vtime(shared_dsq(n));
		if (theirs != (u64)-1 && theirs + 2 * slice_ns < mine &&
		    scx_bpf_dsq_move_to_local(shared_dsq(n), 0))
			return 1;
	}
	return 0;
}

/*
 * The weighted CPU time of @prev, ending its turn on @cpu, as lag_steal weighs it: with the
 * turn it ran (ops.stopping adds that only after this dispatch). U64_MAX unless prev is an
 * ordinary runnable task without a memory node, that could yield the CPU to another node's.
 */
static u64 prev_vtime(s32 cpu, struct task_struct *prev)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_ctx *tctx;
	u64 now = now_ns(), v;

	if (!prev || !(prev->scx.flags & SCX_TASK_QUEUED) || prev->nr_cpus_allowed == 1 ||
	    is_migration_disabled(prev) || !cctx)
		return (u64)-1;
	tctx = task_ctx(prev);
	if (!tctx || tctx->mem_node >= 0)
		return (u64)-1;
	v = tctx->vtime;
	if (cctx->running_since && now > cctx->running_since)
		v += vtime_of(tctx, now - cctx->running_since);
	return v;
}

/*
 * Serve @node's shared queue on @cpu. With every task's turn scaled by its weight, a plain
 * FIFO shared by several CPUs gives each task one turn per wait, and the wait is the same for
 * all: a short-turn (low-weight) task comes round more often, which flattened cpu.weight
 * 300:100 to ~2.1:1 in the VM (a simulation of 4 CPUs with +-30% turn jitter gives 1.9:1).
 * So the task with the least weighted CPU time (vtime) among the first SHARED_PICK_WINDOW goes
 * first, as in a vtime queue; but the head goes first once it has waited
 * SHARED_PICK_WAIT_SLICES slices. Why nothing starves: every task behind the head entered the
 * queue after it and has waited less, so once a task has waited that long so has every task
 * ahead of it, and from then on the queue is served in FIFO order up to it. No task waits more
 * than that bound plus what plain FIFO would have made it wait. (A pure vtime order was tried
 * and taken out: a task ahead in vtime waited seconds behind a stream of woken tasks.)
 * Only tasks allowed on @cpu are chosen (the same mask checks as steal_from); if the chosen
 * one has left the queue meanwhile, or none fits, the FIFO move below, which skips tasks
 * that may not run here, serves. Global for the same reason as steal_from().
 */
__noinline int shared_pick(s32 cpu, u32 node)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u64 dsq = shared_dsq(node), now = now_ns(), best = (u64)-1;
	struct task_struct *p;

	if (!cctx)
		return 0;
	if (scx_bpf_dsq_nr_queued(dsq) < 2)
		return scx_bpf_dsq_move_to_local(dsq, 0);
	/* Scratch in memory, not registers: see steal_from. */
	cctx->pick_seen = 0;
	cctx->pick_pid = -1;
	bpf_for_each(scx_dsq, p, dsq, 0) {
		struct task_ctx *tctx = task_ctx(p);

		/* The head has waited long enough (or is unknown): FIFO (pick_pid stays -1). */
		if (!cctx->pick_seen && (!tctx || !tctx->ready_at ||
		    now - tctx->ready_at >= SHARED_PICK_WAIT_SLICES * slice_ns))
			break;
		if (++cctx->pick_seen > SHARED_PICK_WINDOW)
			break;
		if (!tctx || !bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || is_migration_disabled(p))
			continue;
		if (tctx->vtime < best) {
			best = tctx->vtime;
			cctx->pick_pid = p->pid;
		}
	}
	if (cctx->pick_pid >= 0) {
		cctx->pick_seen = 0;
		bpf_for_each(scx_dsq, p, dsq, 0) {
			if (++cctx->pick_seen > SHARED_PICK_WINDOW)
				break;
			if (p->pid != cctx->pick_pid)
				continue;
			/* Still queued here (the move checks) and allowed on @cpu (checked above;
			 * an affinity change dequeues the task first, so the check still holds). */
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
				return 1;
			break;
		}
	}
	return scx_bpf_dsq_move_to_local(dsq, 0);
}

/*
 * Go's stealWork, topology-aware: same LLC, then same node, then other nodes if worth it.
 * Global for the same reason as steal_from(). Returns 1 if a task was moved to @cpu.
 */
__noinline int steal(s32 cpu, u32 node)
{
	s32 llc_victim = -1, node_victim = -1, remote_victim = -1;
	u32 llc = cpu_llc[cpu_idx(cpu)], start, i, n;
	u32 moved;

	start = nr_cpus ? bpf_get_prandom_u32() % nr_cpus : 0;
	bpf_for(i, 0, nr_cpus) {
		u32 v = start + i;
		s32 nq;

		if (v >= nr_cpus)
			v -= nr_cpus;
		if (v == cpu || v >= MAX_CPUS)
			continue;
		v = cpu_idx(v);
		if (cpu_llc[v] == llc) {
			if (llc_victim >= 0)
				continue;
			nq = scx_bpf_dsq_nr_queued(v);
			if (nq > 0) {
				llc_victim = v;
				break;
			}
		} else if ((cpu_node[v] & (MAX_NODES - 1)) == node) {
			if (node_victim >= 0)
				continue;
			nq = scx_bpf_dsq_nr_queued(v);
			if (nq > 0)
				node_victim = v;
		} else {
			if (remote_victim >= 0)
				continue;
			nq = scx_bpf_dsq_nr_queued(v);
			if (nq >= (s32)numa_steal_min)
				remote_victim = v;
		}
	}

	if (llc_victim >= 0 && (moved = steal_from(cpu, llc_victim))) {
		stat_add(ST_DISP_STEAL_LLC, 1);
		stat_add(ST_STOLEN_TASKS, moved);
		return 1;
	}
	if (node_victim >= 0 && (moved = steal_from(cpu, node_victim))) {
		stat_add(ST_DISP_STEAL_NODE, 1);
		stat_add(ST_STOLEN_TASKS, moved);
		return 1;
	}
	if (remote_victim >= 0 && (moved = steal_from(cpu, remote_victim))) {
		stat_add(ST_DISP_STEAL_REMOTE, 1);
		stat_add(ST_STOLEN_TASKS, moved);
		return 1;
	}
	/*
	 * Another node's shared queue, when its backlog pays for remote memory, or when its head
	 * has waited two slices (so an imbalance of one task cannot starve it for long).
	 */
	bpf_for(n, 0, nr_nodes) {
		s32 nq;

		if (n == node || n >= MAX_NODES)
			continue;
		nq = scx_bpf_dsq_nr_queued(shared_dsq(n));
		if (nq <= 0)
			continue;
		/* A node without procs has nobody else to serve its queue. */
		if ((nq >= (s32)numa_steal_min || !node_procs[node_idx(n)] ||
		     head_wait_ns(shared_dsq(n), now_ns()) >= 2 * slice_ns) &&
		    scx_bpf_dsq_move_to_local(shared_dsq(n), 0)) {
			stat_add(ST_DISP_STEAL_REMOTE, 1);
			stat_add(ST_STOLEN_TASKS, 1);
			return 1;
		}
	}
	return 0;
}

/*
 * A non-proc's queue may hold tasks that could run on a proc (queued before the set shrank):
 * move them to a proc's node queue. Global for the same reason as steal_from(); bounded by
 * the queue's length and steal_max.
 */
__noinline u32 evict_from(s32 cpu)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_struct *p;
	u32 to_node = 0;

	if (!cctx)
		return 0;
	cctx->steal_moved = 0;
	bpf_for_each(scx_dsq, p, cpu, 0) {
		s32 pc;

		if (p->nr_cpus_allowed == 1 || is_migration_disabled(p))
			continue;
		pc = proc_for(p);
		/* pc is in p->cpus_ptr, so the task may run on a CPU of that node's queue. */
		if (pc < 0 || !scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, shared_dsq(node_of(pc)), 0))
			continue;
		to_node = node_of(pc);
		if (++cctx->steal_moved >= steal_max)
			break;
	}
	if (cctx->steal_moved) {
		stat_add(ST_EVICTED, cctx->steal_moved);
		/* A proc must come for them; sysmon wakes one for any other node they went to. */
		wakep_any(to_node);
	}
	return cctx->steal_moved;
}

/*
 * Nothing else to run: the previous task keeps the CPU with a fresh slice (the kernel keeps
 * a runnable prev whose slice ops.dispatch refilled), unless it is on a non-proc and may run
 * on a proc: then it is left alone, and SCX_OPS_ENQ_LAST hands it to ops.enqueue, which moves
 * it to a proc.
 */
static void keep_prev(s32 cpu, struct task_struct *prev)
{
	struct task_ctx *tctx;

	if (!prev || !(prev->scx.flags & SCX_TASK_QUEUED))
		return;
	if (!is_proc(cpu) && prev->nr_cpus_allowed > 1 && !is_migration_disabled(prev) &&
	    proc_for(prev) >= 0)
		return;
	tctx = task_ctx(prev);
	/* Away from home: let SCX_OPS_ENQ_LAST bring it to ops.enqueue, which may send it home. */
	if (away_from_home(tctx, node_of(cpu)))
		return;
	scx_bpf_task_set_slice(prev, tctx && tctx->wslice ? tctx->wslice : slice_ns);
	stat_add(ST_DISP_KEEP_PREV, 1);
}

void BPF_STRUCT_OPS(gmp_dispatch, s32 cpu, struct task_struct *prev)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u32 node = node_of(cpu);
	bool was_kicked;

	if (!cctx || test_stall)
		return;
	was_kicked = cctx->kicked;
	if (was_kicked) {
		cctx->kicked = 0;
		node_kick_at[node_idx(node)] = 0;
	}
	cctx->schedtick++;

	/* A non-proc runs only its own queue: tasks allowed on no proc (see evict_from). */
	if (!is_proc(cpu)) {
		if (scx_bpf_dsq_nr_queued(cpu) > 0)
			evict_from(cpu);
		if (scx_bpf_dsq_move_to_local(cpu, 0))
			stat_add(ST_DISP_LOCAL, 1);
		else
			keep_prev(cpu, prev);
		return;
	}

	/* Go's fairness tick: serve the shared queue first now and then. */
	if (fair_tick && cctx->schedtick % fair_tick == 0 &&
	    scx_bpf_dsq_move_to_local(shared_dsq(node), 0)) {
		stat_add(ST_DISP_FAIR_TICK, 1);
		return;
	}
	if (scx_bpf_dsq_move_to_local(cpu, 0)) {
		stat_add(ST_DISP_LOCAL, 1);
		return;
	}
	if (nr_nodes > 1 && lag_steal(node, prev_vtime(cpu, prev))) {
		stat_add(ST_DISP_LAG, 1);
		return;
	}
	if (shared_pick(cpu, node)) {
		stat_add(ST_DISP_SHARED, 1);
		/* A woken CPU that found work passes the baton while work remains (Go's spinning). */
		if (was_kicked && scx_bpf_dsq_nr_queued(shared_dsq(node)) > 0)
			wakep_any(node);
		return;
	}
	if (steal(cpu, node)) {
		if (was_kicked)
			wakep_any(node);
		return;
	}
	keep_prev(cpu, prev);
}

void BPF_STRUCT_OPS(gmp_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);

	if (!tctx)
		tctx = task_ctx_create(p);	/* init_task could not allocate it */

	if (!tctx)
		return;
	tctx->ready_at = now_ns();
	if (numa_on && nr_nodes > 1)
		tctx->mem_node = mem_node_of(p);
	/* A sleeper (or a new task) comes back at most one slice behind the busiest. */
	if (tctx->vtime + slice_ns < vclock)
		tctx->vtime = vclock - slice_ns;
	cg_runnable(p, tctx);
}

void BPF_STRUCT_OPS(gmp_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *tctx = task_ctx(p);

	if (tctx)
		cg_quiescent(tctx);
}

/* One scheduler tick; 4 ms (HZ=250, Debian's and Ubuntu's) when the config is unknown. */
static __always_inline u64 tick_ns(void)
{
	return CONFIG_HZ ? 1000000000ULL / CONFIG_HZ : 4000000ULL;
}

/*
 * When sysmon preempts a run whose slice is @slice and whose preemption limit is @limit, for
 * a task whose full weighted slice is @wslice. A limit inside the slice is sysmon's alone.
 * Otherwise the slice runs out first and the CPU's own tick ends the turn at its next tick,
 * locally; a sysmon kick then would be a cross-CPU IPI that takes the target's rq lock to do
 * the same a little earlier (under emulation each cost about 1.7 ms of guest kernel time). So
 * sysmon waits one tick past the slice, as the backstop for a tick that does not come. The
 * overrun (up to a tick) is paid back from the next turn (settle_debt), which works while it
 * is at most half a turn: tasks whose weighted slice is under two ticks (low weights) keep
 * sysmon's exact deadline. The test is on @wslice, not on this turn's @slice: a turn that is
 * short because it pays back the last one's overrun (10 ms less up to a tick) would otherwise
 * get the exact deadline, and every other turn of a hog ended with a kick (~190 a second
 * under 8 hogs on 4 CPUs).
 */
static __always_inline u64 sysmon_deadline(u64 limit, u64 slice, u64 wslice)
{
	u64 tick = tick_ns(), backstop = slice + tick;

	if (limit < slice || wslice < 2 * tick)
		return limit;
	return limit > backstop ? limit : backstop;
}

/*
 * A task with a short weighted limit started: make sure sysmon looks at it in time, or a
 * low-weight task would run on to the next tick (4 ms at HZ=250) and its share would grow.
 */
static void sysmon_rearm(u64 now, u64 limit)
{
	struct sysmon_timer *st;
	u32 zero = 0;

	if (limit >= preempt_ns || now + limit + SYSMON_MIN_NS >= sysmon_next_at)
		return;
	st = bpf_map_lookup_elem(&sysmon_timer, &zero);
	if (!st)
		return;
	sysmon_next_at = now + limit;
	bpf_timer_start(&st->timer, limit, 0);
}

void BPF_STRUCT_OPS(gmp_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_ctx *tctx = task_ctx(p);
	u64 now = now_ns();
	s32 node = node_of(cpu);

	bool runnext = false;
	u64 cgf = FP_ONE, turn, limit;

	if (!cctx)
		return;
	cctx->running_since = now;
	cctx->running_pid = p->pid;
	cctx->burst_base = now - (tctx ? tctx->burst_ns : 0);
	if (cctx->runnext_pid == p->pid) {
		cctx->runnext_pid = 0;
		runnext = true;
		stat_add(ST_DISP_RUNNEXT, 1);
	}
	/* A task that could run on a proc but landed here: sysmon moves it (see sysmon_fn). */
	cctx->running_misplaced = !is_proc(cpu) && p->nr_cpus_allowed > 1 && proc_for(p) >= 0;

	/*
	 * Weighted slice: nice and cgroup share scale the time a task runs per turn, and sysmon's
	 * threshold with it. A runnext task keeps the shorter slice it inherited from its waker.
	 */
	if (cgroup_weights_on)
		cgf = cg_factor(p);
	if (!tctx || !tctx->jumped)
		cctx->jump_us = 0;
	cctx->running_interactive = tctx && interactive(tctx);
	if (!tctx) {
		u64 slice = weighted(slice_ns, p, cgf);

		cctx->run_limit_ns = sysmon_deadline(weighted(preempt_ns, p, cgf), slice, slice);
		scx_bpf_task_set_slice(p, slice);
		return;
	}
	tctx->wslice = weighted(slice_ns, p, cgf);
	/*
	 * This turn pays back what earlier turns overran (preemption lands late: ticks, IPIs)
	 * or makes up what they fell short, so that the time per turn averages wslice.
	 */
	turn = tctx->wslice;
	if (tctx->resume_ns) {
		/* The rest of a turn a wakeup preempted; turn_ran keeps what it ran before. */
		turn = tctx->resume_ns;
		tctx->resume_ns = 0;
	} else {
		tctx->turn_ran = 0;
		if (tctx->debt_ns > 0)
			turn = (u64)tctx->debt_ns + SLICE_MIN_NS >= turn ? SLICE_MIN_NS :
									 turn - tctx->debt_ns;
		else if (tctx->debt_ns < 0)
			turn += (u64)-tctx->debt_ns;
	}
	tctx->turn_ns = turn;
	if (!runnext || p->scx.slice > turn)
		scx_bpf_task_set_slice(p, turn);
	limit = turn * preempt_ns / slice_ns;
	if (limit < SLICE_MIN_NS)
		limit = SLICE_MIN_NS;
	/* p->scx.slice is the slice in force: turn, or the shorter one a runnext task inherited. */
	cctx->run_limit_ns = sysmon_deadline(limit, p->scx.slice, tctx->wslice);
	sysmon_rearm(now, cctx->run_limit_ns);
	/*
	 * Deficit round robin for pinned tasks, whose per-CPU queue is FIFO: a task that owes a
	 * whole turn (preemption landed late, turn after turn) gives this one back at once while
	 * others wait here, paying a turn of its debt. Otherwise a low-weight pinned task runs at
	 * least the preemption latency every round (nice 0 : nice 10 ran 3.7:1, not 9.3:1, in one
	 * slow VM run). The debt is capped at 4 turns, so at most 4 turns in a row are given back.
	 * Unpinned tasks need no give-back: the shared queues serve the least vtime first (see
	 * shared_pick), and an overrun turn raises the task's vtime. (Giving back unpinned turns
	 * too was tried: over 1000 give-backs in 12 s left cpu.weight 300:100 at 2.15:1.)
	 */
	if (p->nr_cpus_allowed == 1 && !tctx->turn_ran && tctx->debt_ns >= (s64)tctx->wslice &&
	    scx_bpf_dsq_nr_queued(cpu) > 0) {
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		stat_add(ST_TURN_GIVEN_BACK, 1);
	}

	if (tctx->vtime > vclock)
		vclock = tctx->vtime;

	if (tctx->ready_at) {
		/* One clock for all CPUs (now_ns); the guard only keeps a racing update from wrapping. */
		u64 wait = now > tctx->ready_at ? now - tctx->ready_at : 0;

		record_latency(wait);
		note_wait(cpu, p, wait, 0);
		if (starve_warn_ns && wait >= starve_warn_ns)
			stat_add(ST_STARVE_OVER, 1);
		tctx->ready_at = 0;
	}
	if (tctx->last_cpu >= 0 && tctx->last_cpu != cpu) {
		stat_add(ST_MIGRATIONS, 1);
		if (node_of(tctx->last_cpu) != node)
			stat_add(ST_MIGRATIONS_NODE, 1);
	}
	tctx->last_cpu = cpu;

	/*
	 * The home node follows the task once it has settled elsewhere (8 runs in a row), unless
	 * the kernel's NUMA balancing has found where its memory is: then that node is home.
	 */
	if (tctx->mem_node >= 0) {
		tctx->home_node = tctx->mem_node;
	} else if (numa_on && bpf_core_field_exists(p->numa_preferred_nid)) {
		s32 pref = BPF_CORE_READ(p, numa_preferred_nid);

		if (pref >= 0 && pref < nr_nodes)
			tctx->home_node = pref;
	}
	if (tctx->home_node < 0 || tctx->home_node == node) {
		tctx->home_node = node;
		tctx->away_runs = 0;
		stat_add(ST_NUMA_LOCAL, 1);
	} else {
		stat_add(ST_NUMA_REMOTE, 1);
		if (++tctx->away_runs >= 8) {
			tctx->home_node = node;
			tctx->away_runs = 0;
		}
	}
}

/*
 * The task slept: its burst ended. Each burst enters the average capped at twice the
 * interactivity threshold, so one long burst cannot undo a history of short ones alone.
 */
static void end_burst(struct task_ctx *tctx)
{
	u64 b = tctx->burst_ns, cap = 2 * wakeup_preempt_ns;

	tctx->last_burst_ns = b;
	tctx->avg_burst_ns = tctx->avg_burst_ns - tctx->avg_burst_ns / 8 + (b < cap ? b : cap) / 8;
	tctx->burst_ns = 0;
	tctx->debt_ns = 0;
}

/* A contended turn ended: carry what it ran past (or short of) wslice, within bounds. */
static void settle_debt(struct task_ctx *tctx, u64 ran)
{
	s64 d = tctx->debt_ns + (s64)ran - (s64)tctx->wslice;
	s64 w = tctx->wslice;

	if (d > 4 * w)
		d = 4 * w;
	if (d < -w)
		d = -w;
	tctx->debt_ns = d;
}

void BPF_STRUCT_OPS(gmp_stopping, struct task_struct *p, bool runnable)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u64 now = now_ns();
	struct task_ctx *tctx;

	if (!cctx)
		return;
	tctx = task_ctx(p);
	if (cctx->running_since && now > cctx->running_since) {
		u64 ran = now - cctx->running_since;

		stat_add(ST_BUSY_NS, ran);
		if (tctx) {
			/* Rounded up: even the shortest jump costs 1 us of the budget. */
			if (tctx->jumped == JUMP_WAKEE)
				charge_jump(cctx, (ran + 999) / 1000);
			tctx->burst_ns += ran;
			tctx->vtime += vtime_of(tctx, ran);
			/*
			 * A turn split by wakeup preemptions is one turn: its parts add up in
			 * turn_ran, and only the whole is weighed against the slice.
			 */
			if (runnable && cctx->wake_preempting && tctx->turn_ns > ran + SLICE_MIN_NS) {
				tctx->resume_ns = tctx->turn_ns - ran;
				tctx->turn_ran += ran;
			} else if (runnable && tctx->wslice) {
				settle_debt(tctx, tctx->turn_ran + ran);
			}
		}
	}
	/* A task that sleeps ends its burst (remember how long it was) and owes nothing. */
	if (tctx && !runnable)
		end_burst(tctx);
	cctx->running_since = 0;
	cctx->running_pid = 0;
	if (tctx)
		tctx->jumped = 0;
	if (runnable) {
		if (tctx)
			tctx->ready_at = now;
		/* A wakeup preemption zeroes the slice too; it is counted as ST_PREEMPT_WAKEUP. */
		if (p->scx.slice == 0 && !cctx->wake_preempting)
			stat_add(cctx->sysmon_kicked ? ST_PREEMPT_SYSMON : ST_PREEMPT_SLICE, 1);
	}
	cctx->wake_preempting = 0;
	cctx->sysmon_kicked = 0;
}

void BPF_STRUCT_OPS(gmp_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	/* A higher class took this CPU: hand what waits in its local DSQ back to ops.enqueue. */
	scx_bpf_reenqueue_local();
}

/*
 * Starvation scan: the head of @dsq_id has waited longest there; note it in @slot's record.
 * Runs in sysmon's timer callback. The DSQ iterator needs an RCU read-side section, and
 * 6.16's verifier does not count that callback as one (it is set up in the sleepable ops.init;
 * "expected an RCU CS"), so the section is taken here; 6.18 and 7.3 accept it either way.
 */
static void note_head_wait(u64 dsq_id, u64 now, s32 slot)
{
	struct task_struct *p;

	bpf_rcu_read_lock();
	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		struct task_ctx *tctx = task_ctx(p);

		if (tctx && tctx->ready_at && now > tctx->ready_at)
			note_wait(slot, p, now - tctx->ready_at, 1);
		break;
	}
	bpf_rcu_read_unlock();
}

/*
 * A task queued for an idle CPU runs as soon as that CPU reschedules, which the enqueue's kick
 * asks for. Two ways that wakeup can be lost: the kernel queues a CPU's hotplug thread in its
 * local DSQ without calling ops.enqueue (seen as a CPU comes online), and a task inserted into
 * a CPU's own queue by ops.enqueue lands there only after ops.enqueue returns, so a CPU that
 * was still busy when enqueue tested its idle bit can go idle before the task arrives. Either
 * task would wait for the CPU's next interrupt (hundreds of ms on a quiet machine, with no
 * other proc to steal it) or the watchdog. So a CPU that sysmon finds with no scx_gmp task
 * running and a task in its local DSQ or its own queue twice in a row gets another kick;
 * SCX_KICK_IDLE makes it a no-op unless the CPU runs its idle task (a CPU busy in a higher
 * class picks the task when that class lets go). Normally such a queue empties within
 * microseconds of the first kick.
 */
static void rescue_local(u32 cpu, struct cpu_ctx *cctx, u64 since, s32 nq)
{
	s32 lq = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);

	if (since || (lq <= 0 && nq <= 0)) {
		cctx->stuck_passes = 0;
		return;
	}
	if (++cctx->stuck_passes < 2)
		return;
	cctx->stuck_passes = 0;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_add(ST_KICK_STUCK, 1);
}

/*
 * For --procs auto: the loader grows the set as soon as saturated_ns passes its threshold,
 * rather than at its once-a-second check, so a burst of work does not queue for a second on
 * a set that shrank while the machine was quiet. A change of the set starts the count over.
 */
static void note_saturation(u64 now, bool waiting)
{
	u32 n, busy = 0, procs = 0;

	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		busy += busy_procs[n];
		procs += node_procs[n];
	}
	if (!waiting || !procs || busy < procs || procs_mask_gen != procs_gen) {
		saturated_at = 0;
		saturated_ns = 0;
		return;
	}
	if (!saturated_at)
		saturated_at = now;
	saturated_ns = now - saturated_at;
}

/*
 * sysmon: Go's retake(). Preempt a CPU whose task has run past its deadline (preempt_ns, or a
 * tick past the slice: sysmon_deadline) while work waits for it (its own queue, or its node's
 * shared queue, one CPU per waiting shared task).
 * Adaptive period: it sleeps until the earliest running task could reach its deadline, and
 * doubles its sleep up to 10 ms while nothing waits.
 */
static int sysmon_fn(void *map, int *key, struct bpf_timer *timer)
{
	u64 now = now_ns(), next = SYSMON_MAX_NS;
	s32 budget[MAX_NODES] = {};
	bool waiting_any = false, scan = false;
	s32 self = bpf_get_smp_processor_id();
	u32 cpu, n;

	stat_add(ST_SYSMON_RUNS, 1);
	sync_procs_mask();
	/* Starvation early warning: look at queue heads every STARVE_SCAN_NS. */
	if (starve_warn_ns && now - starve_scan_at >= STARVE_SCAN_NS) {
		starve_scan_at = now;
		scan = true;
	}
	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		s32 q = scx_bpf_dsq_nr_queued(shared_dsq(n));

		if (q < 0)
			q = 0;
		budget[node_idx(n)] = q;
		shared_queued[node_idx(n)] = q;
		busy_procs[node_idx(n)] = 0;
		if (q)
			waiting_any = true;
		if (q && scan)
			note_head_wait(shared_dsq(n), now, self);
	}

	bpf_for(cpu, 0, nr_cpus) {
		struct cpu_ctx *cctx = cpu_ctx(cpu);
		u32 node = node_of(cpu);
		s32 nq = scx_bpf_dsq_nr_queued(cpu);
		u64 since, ran, limit;
		bool waits;

		if (!cctx || node >= MAX_NODES)
			break;
		cctx->queued = nq > 0 ? nq : 0;
		node = node_idx(node);
		if (nq > 0 && scan)
			note_head_wait(cpu, now, self);
		since = cctx->running_since;
		rescue_local(cpu, cctx, since, nq);
		/* A task that may run on a proc leaves a non-proc at once (set shrank under it). */
		if (since && cctx->running_misplaced) {
			cctx->running_misplaced = 0;
			cctx->sysmon_kicked = 1;
			scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
			stat_add(ST_KICK_PREEMPT, 1);
			continue;
		}
		if (since && is_proc(cpu))
			busy_procs[node]++;
		/* Non-procs never serve the shared queues, so only their own queue waits on them. */
		waits = nq > 0 || (is_proc(cpu) && node < nr_nodes && budget[node] > 0);
		if (nq > 0)
			waiting_any = true;
		if (!since || !waits || now <= since)
			continue;
		ran = now - since;
		limit = cctx->run_limit_ns ? cctx->run_limit_ns : preempt_ns;
		if (ran >= limit) {
			if (nq <= 0)
				budget[node_idx(node)]--;
			cctx->sysmon_kicked = 1;
			scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
			stat_add(ST_KICK_PREEMPT, 1);
		} else if (limit - ran < next) {
			next = limit - ran;
		}
	}

	note_saturation(now, waiting_any);

	/*
	 * Shared work that no proc will come for: every proc of its node is idle (a wakeup was
	 * lost, or the tasks were evicted there by a non-proc), or the node has no proc left
	 * after the set shrank. Wake an idle proc, of that node first; steal() lets a proc take
	 * a proc-less node's queue at once. This bounds any shared-queue wait by sysmon's period.
	 */
	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		if (budget[n] > 0 && !busy_procs[n]) {
			/* wakep reads the procs_mask kptr: 6.16 wants an explicit RCU section here
			 * (see note_head_wait). */
			bpf_rcu_read_lock();
			wakep_any(n);
			bpf_rcu_read_unlock();
		}
	}

	if (sysmon_ns) {
		next = sysmon_ns;
	} else if (!waiting_any) {
		next = sysmon_interval_ns * 2;
		if (next > SYSMON_MAX_NS)
			next = SYSMON_MAX_NS;
	}
	if (next < SYSMON_MIN_NS)
		next = SYSMON_MIN_NS;
	sysmon_interval_ns = next;
	sysmon_next_at = now + next;
	bpf_timer_start(timer, next, 0);
	return 0;
}

s32 BPF_STRUCT_OPS(gmp_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	/* A task without state is still scheduled (every op copes with a NULL task_ctx), and
	 * gmp_runnable tries again; failing here would fail the fork or the whole load. */
	task_ctx_create(p);
	return 0;
}

void BPF_STRUCT_OPS(gmp_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	u64 key = (u64)p;

	ctx_delete(&task_ctxs, &key, &nr_task_ctxs);
}

s32 BPF_STRUCT_OPS(gmp_cgroup_init, struct cgroup *cgrp, struct scx_cgroup_init_args *args)
{
	struct cgrp_ctx init = { .weight = args->weight };
	u64 id = cgrp->kn->id;

	/* Full or failing map: the cgroup is still created. cg_account stops at a cgroup
	 * without state, so its tasks run as if their cgroups had default weights. */
	ctx_insert(&cgrp_ctxs, &id, &init, &nr_cgrp_ctxs);
	return 0;
}

void BPF_STRUCT_OPS(gmp_cgroup_exit, struct cgroup *cgrp)
{
	u64 id = cgrp->kn->id;

	ctx_delete(&cgrp_ctxs, &id, &nr_cgrp_ctxs);
}

void BPF_STRUCT_OPS(gmp_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	struct cgrp_ctx *c = cgrp_ctx(cgrp), *pc;
	s64 old;

	if (!c)
		return;
	old = cg_weight(c);
	c->weight = weight;
	/* An active cgroup's weight is part of its parent's sum: move the sum with it. */
	if (c->nr_active <= 0 || !cgrp->level)
		return;
	pc = cg_level_ctx(cgrp, cgrp->level - 1);
	if (pc)
		__sync_fetch_and_add(&pc->child_weight_sum, (s64)weight - old);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(gmp_init)
{
	struct sysmon_timer *st;
	struct bpf_cpumask *mask;
	u32 zero = 0, i;
	s32 ret;

	if (nr_cpus > MAX_CPUS || nr_nodes > MAX_NODES || !nr_nodes) {
		scx_bpf_error("unsupported topology: %u CPUs, %u nodes", nr_cpus, nr_nodes);
		return -EINVAL;
	}
	bpf_for(i, 0, nr_cpus) {
		ret = scx_bpf_create_dsq(i, node_of(i));
		if (ret) {
			scx_bpf_error("failed to create cpu_dsq %u: %d", i, ret);
			return ret;
		}
	}
	bpf_for(i, 0, nr_nodes) {
		ret = scx_bpf_create_dsq(shared_dsq(i), i);
		if (ret) {
			scx_bpf_error("failed to create shared_dsq %u: %d", i, ret);
			return ret;
		}
	}

	/* procs_mask starts empty; sync_procs_mask fills it from proc_on before attach returns. */
	mask = bpf_cpumask_create();
	if (!mask) {
		scx_bpf_error("failed to create the procs cpumask");
		return -ENOMEM;
	}
	mask = bpf_kptr_xchg(&procs_mask, mask);
	if (mask)
		bpf_cpumask_release(mask);
	procs_mask_gen = 0;
	sync_procs_mask();

	st = bpf_map_lookup_elem(&sysmon_timer, &zero);
	if (!st) {
		scx_bpf_error("sysmon timer map lookup failed");
		return -ENOENT;
	}
	bpf_timer_init(&st->timer, &sysmon_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&st->timer, sysmon_fn);
	sysmon_interval_ns = sysmon_ns ? sysmon_ns : SYSMON_MIN_NS;
	ret = bpf_timer_start(&st->timer, sysmon_interval_ns, 0);
	if (ret) {
		scx_bpf_error("failed to start sysmon: %d", ret);
		return ret;
	}
	return 0;
}

void BPF_STRUCT_OPS(gmp_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(gmp_ops,
	       .select_cpu = (void *)gmp_select_cpu,
	       .enqueue = (void *)gmp_enqueue,
	       .dispatch = (void *)gmp_dispatch,
	       .runnable = (void *)gmp_runnable,
	       .quiescent = (void *)gmp_quiescent,
	       .running = (void *)gmp_running,
	       .stopping = (void *)gmp_stopping,
	       .cpu_release = (void *)gmp_cpu_release,
	       .init_task = (void *)gmp_init_task,
	       .exit_task = (void *)gmp_exit_task,
	       .cgroup_init = (void *)gmp_cgroup_init,
	       .cgroup_exit = (void *)gmp_cgroup_exit,
	       .cgroup_set_weight = (void *)gmp_cgroup_set_weight,
	       .init = (void *)gmp_init,
	       .exit = (void *)gmp_exit,
	       .flags = SCX_OPS_BUILTIN_IDLE_PER_NODE | SCX_OPS_ENQ_LAST,
	       .timeout_ms = 5000,
	       .name = "scx_gmp");
