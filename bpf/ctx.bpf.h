/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The state kept per CPU and per task (cpu_ctx, task_ctx and their companions). Included by
 * gmp.bpf.h after the constants that size it; state.bpf.c owns the tasks' lifetime.
 */
#ifndef __GMP_CTX_BPF_H
#define __GMP_CTX_BPF_H

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

#endif /* __GMP_CTX_BPF_H */
