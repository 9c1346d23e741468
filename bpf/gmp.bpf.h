/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The shared header of the BPF scheduler: knobs the loader sets, named constants, the state
 * kept per CPU, per task and per cgroup, the globals and maps, and the small accessors every
 * file uses. main.bpf.c includes it once, before the other files (one compilation unit; see
 * docs/design.md for why).
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

/* ---- Named constants ---- */

/*
 * sysmon's pass period, and the floor of --sysmon-us. Go's sysmon sleeps 20 us .. 10 ms. The
 * pass here is the backstop (lost ticks and wakeups, sampling, the starvation scan), so it
 * keeps Go's longest sleep at every load: the CPUs it visits per second grow with the
 * machine, the visits per CPU do not. Deadlines that must be exact are each CPU's own timer.
 */
#define SYSMON_MIN_NS (20 * 1000ULL)
#define SYSMON_PERIOD_NS (10 * 1000 * 1000ULL)
/* Below this much slice left, a wakeup is not worth a runnext slot. Untuned. */
#define RUNNEXT_MIN_NS (20 * 1000ULL)
/* A wakep kick older than this is taken as lost. Untuned: well above a kick's latency. */
#define WAKEP_PENDING_NS (2 * 1000 * 1000ULL)
/* p->scx.weight and cpu.weight of nice 0 (the kernel's scale). */
#define WEIGHT_ONE 100
/* 16.16 fixed point for weight factors. */
#define FP_ONE (1ULL << 16)
/*
 * Weighted slices are clamped to [SLICE_MIN_NS, SLICE_MAX_MUL * slice_ns], and to TURN_MAX_NS
 * (bpf/intf.h says why). SLICE_MAX_MUL is untuned.
 */
#define SLICE_MIN_NS (SLICE_MIN_US * 1000ULL)
#define SLICE_MAX_MUL 16
#define TURN_MAX_NS (TURN_MAX_US * 1000ULL)
/* cgroup levels followed for weights; deeper levels count as their ancestor. Untuned. */
#define MAX_CG_DEPTH 16
/*
 * A busy CPU running one cgroup's tasks folds the count changes it holds into the cgroup's
 * shared counters at most once per CG_FOLD_NS (cg_hold says when else it folds): CFS's rate
 * for folding a CPU's share of a task group's load into the group's (update_tg_load_avg,
 * once a millisecond).
 */
#define CG_FOLD_NS (1000 * 1000ULL)
/* sysmon looks at queue heads for the starvation warning this often. Untuned. */
#define STARVE_SCAN_NS (10 * 1000 * 1000ULL)
/* A task settles on a new home node after this many starts in a row there. Untuned. */
#define HOME_ADOPT_RUNS 8
/*
 * shared_pick looks at the first SHARED_PICK_WINDOW tasks of a shared queue, unless the head
 * is due: shared_pick took SHARED_PICK_WAIT_TURNS tasks per proc of the node from the queue
 * since the head joined it (about that many turns of each proc), or the head has waited
 * SHARED_PICK_WAIT_MAX_NS (the round). Counted in turns, not time: where turns run long (vCPUs
 * sharing host cores) a bound of 4 slices fell due within the turns a low-weight task is meant
 * to wait, and FIFO order flattened cpu.weight. 8, not 4: with 4 the llc layout still read
 * 2.43:1 for 300:100 (docs/design.md).
 *
 * Weights hold while the window covers the queue: beyond it the queue is FIFO, which flattens
 * them. A node's queue holds about two tasks per CPU at three runnable per CPU, so once the
 * window holds tasks of different weights (nice or cgroup) it widens to
 * SHARED_PICK_WINDOW_MIXED, 32, which covers nodes of 16 CPUs (scripts/sim_shared_pick.py);
 * 8 covers 4. Among equal weights FIFO is fair, and walking 32 on every pick slowed
 * hackbench, whose queues are long (docs/benchmarks.md). Fixed bounds, not the queue's
 * length: the work per pick stays the same on any machine.
 */
#define SHARED_PICK_WINDOW 8
#define SHARED_PICK_WINDOW_MIXED 32
#define SHARED_PICK_WAIT_TURNS 8
#define SHARED_PICK_WAIT_MAX_NS ROUND_MAX_NS
/*
 * A shared queue whose head has waited this long is served first by every proc of its node,
 * whatever the fair tick's count (its value: intf.h). Without it the count alone let turns of
 * 160 ms (nice -20), --slice-us 85000 or --fair-tick 0 keep a shared task waiting past the
 * kernel's 5 s watchdog behind pinned tasks.
 */
#define FAIR_TICK_MAX_NS (FAIR_TICK_MAX_MS * 1000 * 1000ULL)
/*
 * CPU queues a steal attempt looks at in this LLC, in the rest of the node, and in one other
 * node. Go's stealWork looks at every P (four times); a fixed count keeps an idle CPU's
 * dispatch from growing with the machine. Untuned: small enough that a 4-CPU and a 512-CPU
 * machine do the same work per attempt.
 */
#define STEAL_LOOKS_LLC 2
#define STEAL_LOOKS_NODE 2
#define STEAL_LOOKS_REMOTE 2
/* Shared-queue entries a sysmon pass checks for tasks no proc may run. Untuned. */
#define STRANDED_LOOKS 4
/* lag_steal and the cross-node shared steal act once a lag or wait reaches this many slices. */
#define LAG_SLICES 2
/* Debt carried between turns is clamped to [-1, DEBT_MAX_TURNS] weighted slices. Untuned. */
#define DEBT_MAX_TURNS 4
/*
 * The most the turns of the tasks waiting for one CPU add up to (round_cap): a turn is cut to
 * this over the tasks waiting for its CPU, never below SLICE_MIN_NS. A task in a CPU's queue
 * waits about two rounds at most (a stale shared queue alternates with it), a fifth of the 5 s
 * watchdog, at any --slice-us and weight. At the default 10 ms slice it takes 50 tasks waiting
 * for one CPU to cut a nice-0 turn.
 */
#define ROUND_MAX_NS (500 * 1000 * 1000ULL)
/*
 * run_share is in parts of RUN_SHARE_ONE. A task that runs at most SLEEPER_RUN_SHARE of the
 * time from one wakeup to the next, leaving out waits within its bursts (it sleeps, or waits
 * to be served after waking, at least as long as it runs), uses at most half a CPU, less than
 * its share wherever a CPU's queue holds two tasks or more. Untuned: the natural split, where
 * a 60 Hz frame loop sits (docs/design.md, "Interactive").
 */
#define RUN_SHARE_ONE 1024
#define SLEEPER_RUN_SHARE (RUN_SHARE_ONE / 2)
/*
 * A sleeper keeps its status until its share passes this: from the threshold it takes three
 * wakeups in a row with no sleep before them (each moves the 1/8 average by about 1/16). The
 * margin is for a task that asks for about half a CPU (a frame loop at 48%, more under
 * emulation's overheads): the odd long frame must not cost it its preemption.
 */
#define SLEEPER_KEEP_RUN_SHARE (RUN_SHARE_ONE * 5 / 8)
/*
 * How many of its own turns a woken task's burst may take before a turn that runs out sends it
 * to the shared queue (burst_rest). Four: at two, a frame whose 8 ms of work stretched to 20-30
 * ms while its CPU was taken by interrupts or, in a VM, by the host, went to the shared queue
 * and waited 80-180 ms there (docs/benchmarks.md); four turns cover a burst of twice that.
 */
#define BURST_LOCAL_TURNS 4
/* cpu_ctx.jump_us is a u16. */
#define JUMP_US_MAX 65535
/* tctx->jumped: how a task came to be queued ahead of waiting tasks. */
#define JUMP_WAKEE 1    /* an interactive wakeup that preempted: charged */
#define JUMP_RESUMED 2  /* the task such a wakeup preempted, resuming its turn: not charged */

/* ---- State ---- */

/* Per-CPU state, shared with the loader through the skeleton's bss; written by its CPU. */
struct cpu_ctx {
	u64 running_since;  /* when the current scx_gmp task started; 0: none */
	u64 schedtick;      /* ops.dispatch calls, drives the fair tick */
	u64 burst_base;     /* now - burst_base: CPU time of the current task since it last slept */
	s32 running_pid;
	s32 runnext_pid;    /* the task in this CPU's runnext slot, 0: empty */
	u32 steal_moved;    /* scratch: tasks moved by the steal in progress */
	u32 pick_seen;      /* scratch: shared-queue entries looked at by shared_pick */
	s32 pick_pid;       /* scratch: the entry shared_pick chose; -1: none */
	u32 pick_window;    /* scratch: how far shared_pick looks (widen_for_weights) */
	u32 pick_weight;    /* scratch: p->scx.weight of its first entry; 0: none yet */
	u64 pick_cgid;      /* scratch: cgroup of its first entry */
	u32 backlog_seen;   /* scratch: shared-queue entries backlog_ns has summed */
	u64 run_limit_ns;   /* sysmon preempts the current task after this (see sysmon_deadline) */
	u64 kick_since;     /* the turn (its running_since) sysmon's last kick here was meant for; 0: none */
	u64 kick_at;        /* when that kick was sent */
	u8 kicked;          /* woken by wakep and not yet dispatching */
	u8 running_misplaced; /* a task that may run on a proc is running on a non-proc */
	u8 wake_preempting; /* a wakeup was sent here to preempt the current task */
	u16 jump_us;        /* CPU time (us) run here by jumping wakees since an in-order start */
	u8 running_interactive; /* the current task is interactive (see interactive()) */
	u8 runner_woke;     /* the current task woke another synchronously since it last slept;
			     * written only by this CPU (select_cpu of its wakees, running) */
	u8 fair_alt;        /* the last dispatch served a stale shared queue first */
	s8 running_mem_node; /* the memory node of the current task (see mem_node_of); -1: none */
	/*
	 * Written only by this CPU, summed by sysmon: global atomics would take one cache line
	 * from every CPU on every wakeup.
	 */
	s64 runnable_delta; /* cgroup-counted tasks made runnable less those gone quiescent here */
	/* Held for one cgroup until folded into its cgrp_ctx (cg_hold, cg_fold). */
	u64 cg_held_id;     /* the cgroup; 0: none */
	u64 cg_folded_at;   /* when this CPU last folded, or took the cgroup */
	s64 cg_held_n;      /* its tasks made runnable less those gone quiescent, not yet folded */
	u64 vtime_max;      /* the highest vtime of a task that started here */
	/* The current task's vtime, weighted slice and set weight as of running_since. */
	u64 running_vtime;  /* U64_MAX: a task without state, which no wakee is ranked against */
	u64 running_wslice;
	u64 running_set_weight; /* 0: a task without state */
} __attribute__((aligned(64)));

struct task_ctx {
	u64 ready_at;       /* when the task last became runnable */
	u64 runnext_slice;  /* set by select_cpu: the slice inherited from the waker */
	u64 burst_ns;       /* CPU time since the task last slept */
	u64 last_burst_ns;  /* CPU time it used between its last two sleeps */
	u64 avg_burst_ns;   /* moving average of its bursts, each capped (see end_burst) */
	u64 slept_at;       /* when its last burst ended; 0: it has not slept */
	u64 wake_wait_ns;   /* how long it waited for a CPU after its last wakeup (end_sleep) */
	u64 wslice;         /* slice from the task's weight and cgroup share, set at running */
	s64 debt_ns;        /* CPU time run past (> 0) or short of (< 0) its slices while contended */
	u64 turn_ns;        /* the slice of its current turn */
	u64 turn_goal;      /* what its current turn should run: wslice, less on a crowded CPU */
	u64 turn_ran;       /* CPU time run in earlier parts of a turn split by wakeup preemption */
	u64 resume_ns;      /* what a wakeup preemption left of its turn; 0: none */
	u64 vtime;          /* weighted CPU time: ns run * slice_ns / wslice */
	u64 set_weight;     /* nice weight times each cpu.weight down its path (cg_factor) */
	u64 shared_seq;     /* shared_picks of its node when it last joined a shared queue */
	u64 cgid;           /* cgroup counted at runnable, undone at quiescent */
	s32 home_node;      /* where its memory is, or where it has been running */
	s32 mem_node;       /* where its memory is (mem_node_of), if it may run there; -1: none */
	s32 last_cpu;
	u32 away_runs;      /* consecutive runs away from home_node */
	u32 run_share;      /* moving average of burst / (wake wait + burst + sleep), see end_sleep */
	s32 runnext_waker;  /* pid of the task that last took it through runnext; 0: none */
	u8 runnext_pair;    /* set by select_cpu: its waker was last woken by it (a pair) */
	u8 woke_sync;       /* it woke another task synchronously since it last slept (runner_woke) */
	u8 jumped;          /* queued ahead of waiting tasks (JUMP_WAKEE, JUMP_RESUMED); 0 at stopping */
	u8 cg_counted;
	u8 given_back;      /* this turn was given back (give_back_owed_turn): its debt is paid */
	u8 sleeper;         /* set at SLEEPER_RUN_SHARE, cleared past SLEEPER_KEEP_RUN_SHARE */
	u8 woken;           /* runnable by a wakeup and not started since: its wait is wake_wait_ns */
};

/* struct cgrp_ctx, per-cgroup state for cpu.weight, is in intf.h: the loader reads it. */

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
