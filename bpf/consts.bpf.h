/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scheduler's named constants: each says where its value came from. Included by gmp.bpf.h
 * after the knobs, which some of them scale.
 */
#ifndef __GMP_CONSTS_BPF_H
#define __GMP_CONSTS_BPF_H

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

#endif /* __GMP_CONSTS_BPF_H */
