/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_gmp: Go's GMP run-queue model as a sched_ext scheduler.
 *
 * The policy, in Go's terms (docs/design.md has the whole model):
 *  1. Every CPU is a P with a local run queue, cpu_dsq (a user DSQ, so other CPUs can steal
 *     from it). Each NUMA node has a shared_dsq, Go's global run queue.
 *  2. A task woken synchronously by the running task goes to the head of the waker's queue
 *     (runnext) and inherits the rest of the waker's slice; a pair handing off to each other
 *     skips the queue for the CPU's local DSQ.
 *  3. An idle CPU looks at its own queue, then its node's shared queue, then steals half of
 *     another CPU's queue (same LLC, same node, other nodes): findRunnable and stealWork.
 *  4. A BPF timer, sysmon, preempts tasks that ran past preempt_ns while others wait; where
 *     the slice ends first, the tick ends the turn and sysmon is the backstop. A deadline
 *     the tick would miss is kept by the CPU's own turn timer.
 *  5. The procs (GOMAXPROCS) are the CPUs that run ordinary work; the loader sizes the set.
 *  6. Weights scale each turn's slice; the shared queues prefer the least weighted CPU time
 *     within a bounded window. Interactive wakeups may preempt hogs, within a per-CPU budget.
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
 *    work; the shared queue is served first on every fair_tick-th dispatch; a runnext chain
 *    shares one slice; a CPU's waiting tasks share a round of ROUND_MAX_NS, so a FIFO of
 *    any length at any slice waits a bounded time; queue jumps are bounded by a per-CPU
 *    budget; shared_pick turns FIFO once the head is due (pick_due); sysmon preempts long
 *    runners when work waits and wakes CPUs whose wakeup was lost; idle CPUs are kicked for
 *    new work.
 *  - A task that may run on no proc (pinned tasks, per-CPU kthreads) is queued on its own
 *    CPU, and a CPU outside the set still serves its own queue, so no task is stranded.
 *    Non-procs never take from the shared queues and never steal.
 *
 * One compilation unit: the files below are included in dependency order, so that helpers
 * stay static (and inlined where marked) as the verifier checked them before the split.
 */
#include "gmp.bpf.h"

char _license[] SEC("license") = "GPL";

UEI_DEFINE(uei);

#include "stats.bpf.c"     /* counters, latency histogram, wait records */
#include "state.bpf.c"     /* task and cgroup state in hash maps */
#include "procs.bpf.c"     /* the processor set */
#include "weights.bpf.c"   /* nice and cgroup cpu.weight */
#include "place.bpf.c"     /* home node, idle pick, wakep, ops.select_cpu */
#include "preempt.bpf.c"   /* wakeup preemption, jump budget */
#include "enqueue.bpf.c"   /* ops.enqueue: which queue a task joins */
#include "steal.bpf.c"     /* stealWork, evicting from non-procs */
#include "dispatch.bpf.c"  /* ops.dispatch: findRunnable */
#include "slices.bpf.c"    /* turn lengths: weighted slice, debt, deadlines, give-back */
#include "turns.bpf.c"     /* running/stopping: bursts, vtime, charging what ran */
#include "sysmon.bpf.c"    /* the sysmon timer */

void BPF_STRUCT_OPS(gmp_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);

	/* A higher class took this CPU: hand what waits in its local DSQ back to ops.enqueue. */
	scx_bpf_reenqueue_local();
	/* It may not dispatch for a while: fold what it holds (cg_hold). */
	if (cctx)
		cg_fold(cctx, now_ns());
}

/* One cpu_dsq per CPU and one shared_dsq per node, each on its node's memory. */
static s32 create_dsqs(void)
{
	u32 i;
	s32 ret;

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
	return 0;
}

/* procs_mask starts empty; sync_procs_mask fills it from proc_on before attach returns. */
static s32 init_procs_mask(void)
{
	struct bpf_cpumask *mask = bpf_cpumask_create();

	if (!mask) {
		scx_bpf_error("failed to create the procs cpumask");
		return -ENOMEM;
	}
	mask = bpf_kptr_xchg(&procs_mask, mask);
	if (mask)
		bpf_cpumask_release(mask);
	procs_mask_gen = 0;
	sync_procs_mask();
	return 0;
}

static s32 start_sysmon(void)
{
	struct sysmon_timer *st;
	u32 zero = 0;
	s32 ret;

	st = bpf_map_lookup_elem(&sysmon_timer, &zero);
	if (!st) {
		scx_bpf_error("sysmon timer map lookup failed");
		return -ENOENT;
	}
	bpf_timer_init(&st->timer, &sysmon_timer, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&st->timer, sysmon_fn);
	ret = bpf_timer_start(&st->timer, sysmon_period_ns(), 0);
	if (ret)
		scx_bpf_error("failed to start sysmon: %d", ret);
	return ret;
}

/* Each CPU's turn timer: ready, never armed until a turn with an exact deadline starts. */
static s32 init_turn_timers(void)
{
	struct turn_timer *tt;
	u32 i;

	bpf_for(i, 0, nr_cpus) {
		tt = bpf_map_lookup_elem(&turn_timers, &i);
		if (!tt) {
			scx_bpf_error("turn timer %u lookup failed", i);
			return -ENOENT;
		}
		bpf_timer_init(&tt->timer, &turn_timers, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&tt->timer, turn_timer_fn);
	}
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(gmp_init)
{
	s32 ret;

	if (nr_cpus > MAX_CPUS || nr_nodes > MAX_NODES || !nr_nodes) {
		scx_bpf_error("unsupported topology: %u CPUs, %u nodes", nr_cpus, nr_nodes);
		return -EINVAL;
	}
	ret = create_dsqs();
	if (!ret)
		ret = init_procs_mask();
	if (!ret)
		ret = init_turn_timers();
	if (!ret)
		ret = start_sysmon();
	return ret;
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
	       /* The watchdog: production schedulers' value; SCX_TIMEOUT_MS overrides it. */
	       .timeout_ms = 5000,
	       .name = "scx_gmp");
