/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the BPF scheduler and the loader share: limits, DSQ ids, stat slots and the wait
 * record. The loader's side is generated from this file at build time (build.rs, bindgen
 * into src/bpf_intf.rs); src/stats.rs names and describes each stat slot in one table whose
 * length and order the compiler checks against enum gmp_stat.
 */
#ifndef __GMP_INTF_H
#define __GMP_INTF_H

#define MAX_CPUS 512
#define MAX_NODES 64
#define MAX_LLCS 512

/*
 * Turn bounds (us), shared with the loader, whose flags accept the same range. SLICE_MIN_US
 * is the floor of every weighted slice (untuned: a few context switches' worth), so a
 * shorter --slice-us would change nothing. TURN_MAX_US cuts every turn (weighted turns reach
 * 16 slices for nice -20, a paid-back one two), so that one turn stays a small part of the
 * kernel's 5 s watchdog; the turns of a crowded CPU are cut further (ROUND_MAX_NS, consts.bpf.h).
 * Untuned beyond that.
 */
#define SLICE_MIN_US 250
#define TURN_MAX_US 250000

/*
 * A node's shared queue whose head has waited this long is served first by its procs,
 * whatever the fair tick's count (FAIR_TICK_MAX_NS, consts.bpf.h). The kernel's watchdog checks
 * in every half timeout (2.5 s of 5 s) from an unbound worker, which passes through a shared
 * queue like any task, maybe several times (it is woken, and preempted if it runs long). Go's
 * bound (61 ticks of 10 ms, 610 ms) left room for three passes, and under emulation, where
 * sysmon ran late, the watchdog ejected the scheduler. A fraction of the watchdog rather than
 * Go's count: a twentieth (docs/design.md).
 */
#define FAIR_TICK_MAX_MS 250

/*
 * Where a CPU looks for work to steal: the online CPUs sorted by node, then LLC (the loader's
 * steal_order), and for each CPU the ranges of that order holding its LLC and its node. The
 * victim search looks at a bounded number of each range from a random point.
 */
struct steal_ring {
	unsigned short llc_first, llc_len;
	unsigned short node_first, node_len;
};

/* DSQ ids: cpu_dsq of CPU c is c; shared_dsq of node n is SHARED_DSQ_BASE + n. */
#define SHARED_DSQ_BASE 0x100000ULL

/* Latency histogram: 4 buckets per power of two of microseconds, up to ~2^24 us. */
#define LAT_SUB_BITS 2
#define NR_LAT_BUCKETS 100

enum gmp_stat {
	/* how ops.dispatch found work */
	ST_DISP_LOCAL,       /* own cpu_dsq (includes runnext, except a pair's) */
	ST_DISP_RUNNEXT,     /* counted when a runnext task starts running */
	ST_DISP_SHARED,      /* node's shared_dsq because the local queue was empty */
	ST_DISP_FAIR_TICK,   /* shared_dsq first on the fair tick */
	ST_DISP_STEAL_LLC,   /* steal events from a CPU in the same LLC */
	ST_DISP_STEAL_NODE,  /* ... same node, other LLC */
	ST_DISP_STEAL_REMOTE,/* ... other node */
	ST_DISP_KEEP_PREV,   /* nothing else: the previous task keeps the CPU */
	ST_STOLEN_TASKS,     /* tasks moved by steals (>= steal events) */
	/* where ops.enqueue / ops.select_cpu put tasks */
	ST_ENQ_LOCAL,        /* a cpu_dsq tail */
	ST_ENQ_RUNNEXT,      /* runnext: a cpu_dsq head, or the local DSQ for a pair */
	ST_ENQ_OVERFLOW,     /* local queue at --local-cap: to the shared queue */
	ST_ENQ_PREEMPTED,    /* preempted / slice expired: shared queue tail */
	ST_ENQ_DIRECT_IDLE,  /* select_cpu found an idle CPU: straight to its local DSQ */
	ST_ENQ_PINNED,       /* could run on one CPU only: that CPU's queue */
	ST_ENQ_REENQ,        /* re-enqueued after a higher class took the CPU */
	/* preemption */
	ST_PREEMPT_SYSMON,   /* kicked by sysmon after running >= preempt_ns with work waiting */
	ST_PREEMPT_SLICE,    /* slice ran out */
	ST_KICK_IDLE,        /* idle CPUs woken for new work (wakep) */
	ST_KICK_PREEMPT,     /* preempt kicks sent by sysmon */
	/* NUMA */
	ST_NUMA_LOCAL,       /* task starts on its home node */
	ST_NUMA_REMOTE,      /* task starts away from its home node */
	ST_MIGRATIONS,       /* task starts on a CPU other than its last */
	ST_MIGRATIONS_NODE,  /* ... on another node */
	ST_SYSMON_RUNS,      /* sysmon timer callbacks */
	ST_BUSY_NS,          /* ns this CPU ran scx_gmp tasks */
	ST_LAT_SUM_US,       /* sum of wakeup-to-run latencies */
	ST_LAT_COUNT,        /* number of latency samples */
	ST_STOLEN_OUT,       /* tasks other CPUs stole from this CPU's queue (victim's slot) */
	ST_PREEMPT_WAKEUP,   /* interactive wakeups that preempted the running task */
	/* procs and NUMA placement */
	ST_PLACE_HOME,       /* select_cpu put a waking task on an idle CPU of its home node */
	ST_PLACE_REMOTE,     /* ... on another node's idle CPU */
	ST_ENQ_STRANDED,     /* allowed on no proc: queued on its own CPU outside the procs */
	ST_EVICTED,          /* tasks moved from a CPU outside the procs to a proc's queue */
	/* starvation early warning */
	ST_STARVE_OVER,      /* tasks that waited longer than starve_warn_ns before running */
	ST_DISP_LAG,         /* another node's shared head taken: it trailed in weighted CPU time */
	ST_ENQ_RESUMED,      /* preempted by a wakeup: back to its queue's head with its turn's rest */
	ST_WAKE_IN_ORDER,    /* interactive wakeups queued in order: the current task is interactive too */
	ST_WAKE_NO_JUMP,     /* interactive wakeups queued in order: the CPU had spent its queue-jump budget */
	ST_CTX_ALLOC_FAIL,   /* task or cgroup states not allocated (map full, no memory): see task_ctxs */
	ST_KICK_STUCK,       /* sysmon kicks (SCX_KICK_IDLE) to CPUs running no scx task whose local DSQ held one two passes running */
	ST_TURN_GIVEN_BACK,  /* turns given back at once by a pinned task that owed a whole turn (deficit round robin) */
	ST_STEAL_TRIES,      /* steal attempts: dispatches that found nothing local or shared */
	ST_STEAL_LOOKS,      /* CPU queues looked at by those attempts */
	ST_SYSMON_VISITS,    /* CPUs sysmon's passes looked at */
	ST_TURN_TIMER,       /* turn-timer runs: exact deadlines checked on their own CPU */
	ST_SYSMON_NS,        /* ns sysmon's passes took */
	ST_PICK_DUE,         /* shared_pick took the head in order: it was due (pick_due) */
	ST_ENQ_BURST_REST,   /* turn ran out within BURST_LOCAL_TURNS of a wakeup: its CPU's queue tail */
	ST_ENQ_RUNNEXT_PAIR, /* runnext wakees of a pair, put straight into the local DSQ (of ST_ENQ_RUNNEXT) */
	ST_CG_FOLDS,         /* folds of a CPU's held cgroup counts into the cgroup's shared ones */
	ST_PREEMPT_STALE,    /* turns cut by a sysmon kick meant for the turn before: resumed (stale_kick) */
	ST_WAKE_NOT_OWED,    /* sleepers with long bursts queued in order behind a heavier runner not trailing them */
	GMP_NR_STATS,
};

/*
 * The longest wait a CPU saw since the loader last read it: a task that started after
 * waiting (still_waiting 0) or a queue head still waiting when sysmon looked (1).
 */
struct gmp_wait_rec {
	unsigned long long wait_ns;
	int pid;
	unsigned int still_waiting;
	char comm[16];
};

/*
 * Per-cgroup state for cpu.weight (bpf/weights.bpf.c), in the cgrp_ctxs map keyed by cgroup
 * id. The loader reads the root cgroup's to report nr_active.
 */
struct cgrp_ctx {
	long long child_weight_sum; /* weights of active child cgroups + 100 per runnable task */
	long long nr_active;        /* active child cgroups + runnable tasks directly in this cgroup */
	unsigned long long weight;  /* cpu.weight, 1..10000, 100 by default */
};

struct gmp_pcpu_stats {
	unsigned long long cnt[GMP_NR_STATS];
	unsigned long long lat[NR_LAT_BUCKETS];
};

#endif /* __GMP_INTF_H */
