/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Wakeup preemption and the queue-jump budget that bounds it: which waking tasks count as
 * interactive, when one may jump the task running on its CPU, and what jumps cost the tasks
 * waiting in order there. ops.enqueue (enqueue.bpf.c) asks wakeup_preempt before queueing a
 * wakeup; ops.running and ops.stopping (turns.bpf.c) reset and charge the budget.
 */

/* Jumping wakees may run half a slice per in-order start (see wakeup_preempt). Untuned. */
static u32 jump_budget_us(void)
{
	u64 us = slice_ns / 2000;

	return us < JUMP_US_MAX ? us : JUMP_US_MAX;
}

/* Interactive by its bursts alone: the last one or the average is short. */
static __always_inline bool short_bursts(struct task_ctx *tctx)
{
	return tctx->last_burst_ns < wakeup_preempt_ns || tctx->avg_burst_ns < wakeup_preempt_ns;
}

/*
 * Interactive: its last burst or its average burst was short, or it sleeps at least as long
 * as it runs. The average keeps a periodic task interactive through the odd long burst
 * (catching up after a delay, an interrupt storm); the last burst lets a task that changed its
 * ways count at once. The run share admits a periodic task whose bursts are long (a frame
 * loop): it uses about half a CPU or less, so it is owed time whenever it wakes on a CPU that
 * has more than itself to run (tctx->sleeper, set in end_sleep).
 */
static bool interactive(struct task_ctx *tctx)
{
	return short_bursts(tctx) || tctx->sleeper;
}

/*
 * Whether @tctx's task trails the runner of @cctx in weighted CPU time (vtime), with the
 * runner's turn so far counted. A runner without state has no vtime: every wakee trails it.
 * The runner's fields are read from another CPU without its lock: a stale pair only decides
 * one wakeup either way, and either way is safe (in order waits at most the runner's turn).
 */
static __always_inline bool trails_runner(struct cpu_ctx *cctx, struct task_ctx *tctx)
{
	u64 v = cctx->running_vtime, since = cctx->running_since, now = now_ns();

	if (v == (u64)-1)
		return true;
	if (since && now > since)
		v += vtime_at(now - since, cctx->running_wslice);
	return tctx->vtime < v;
}

/*
 * Whether @tctx's task carries a lower weight than the runner of @cctx, as their users set it
 * (nice, cpu.weight). The weighted slices would not do: their cgroup factor moves with
 * runnable counts read at different starts, by more than a nice level between equals.
 */
static __always_inline bool lighter_than_runner(struct cpu_ctx *cctx, struct task_ctx *tctx)
{
	return tctx->set_weight && tctx->set_weight < cctx->running_set_weight;
}

/*
 * A sleeper by its run share alone (its bursts are long) claims to be owed time, and a jump
 * takes that time from the runner. Past a runner of heavier set weight the claim is checked
 * in vtime, which the weights scale: a lighter task that has run more weighted time than the
 * runner is owed nothing by it. A task that waits long after each wakeup reads as a sleeper
 * even when it asks for most of a CPU; unchecked, it jumped past its cgroup's weight. Between
 * equal weights the run share alone decides: a frame loop at half a CPU beside a hog barely
 * trails it, and lost its frames when ranked by vtime.
 */
static __always_inline bool claim_outweighed(struct cpu_ctx *cctx, struct task_ctx *tctx)
{
	return !short_bursts(tctx) && lighter_than_runner(cctx, tctx) && !trails_runner(cctx, tctx);
}

/* The most of one burst that counts in a task's average (end_burst). */
static __always_inline u64 burst_cap_ns(void)
{
	return 2 * wakeup_preempt_ns;
}

/*
 * Whether the interactive runner of @cctx has turned hog: its burst so far is past
 * burst_cap_ns and it woke no task synchronously in it. A task that stopped sleeping keeps
 * the history of its last burst, so without this wakeups would wait behind a spinner turn
 * after turn; a message passer's long burst (a writer with room, a reader with a backlog)
 * wakes its peers as it goes, and is left to finish it.
 */
static __always_inline bool runner_turned_hog(struct cpu_ctx *cctx)
{
	return !cctx->runner_woke && now_ns() - cctx->burst_base >= burst_cap_ns();
}

/* Charge @us to this CPU's jump budget, saturating. */
static __always_inline void charge_jump(struct cpu_ctx *cctx, u64 us)
{
	us += cctx->jump_us;
	cctx->jump_us = us < JUMP_US_MAX ? us : JUMP_US_MAX;
}

/*
 * Wakeup preemption (not in Go, which leaves it to sysmon's 10 ms): an interactive task
 * waking on a CPU that runs a task judged a hog preempts it; the hog goes back to the head of
 * this CPU's queue with the rest of its turn (ST_ENQ_RESUMED), so frequent wakeups cannot
 * shrink a heavy task's share. A runner that is interactive itself is left to sleep, as it
 * soon will, and the wakee queues in order: a jump ahead of it ends a message passer's batch
 * early, so the same messages cost more wakeups and switches (ST_WAKE_IN_ORDER). One that
 * has run on past the point where its history can vouch for it is a hog (runner_turned_hog).
 * Whatever its history, a runner is never preempted by the task it woke synchronously
 * (@by_runner: runnext's wakee, placed here by select_runnext): the waker said it will sleep
 * soon, and its wakee runs when it does, at the end of its turn, or on an idle CPU that steals
 * it. Preempted, a writer with room handed the CPU to its reader at every message. A lighter
 * wakee whose only claim is its run share must trail the runner in vtime (claim_outweighed).
 *
 * Why no waiting task starves: a preemption is a queue jump, and what it costs the tasks
 * waiting in order is the CPU time the wakee runs. Once jumping wakees have run
 * jump_budget_us here since a task that waited in order last started, wakeups queue in order
 * while tasks wait.
 *
 * Callers pass a @cpu in p->cpus_ptr (checked under the task's rq lock), so LOCAL_ON is safe.
 */
static bool wakeup_preempt(struct task_struct *p, struct task_ctx *tctx, s32 cpu, u64 enq_flags,
			   bool by_runner)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);

	if (!wakeup_preempt_ns || !(enq_flags & SCX_ENQ_WAKEUP) || !cctx || !tctx ||
	    !cctx->running_pid || !interactive(tctx))
		return false;
	if (by_runner || (cctx->running_interactive && !runner_turned_hog(cctx))) {
		stat_add(ST_WAKE_IN_ORDER, 1);
		return false;
	}
	if (claim_outweighed(cctx, tctx)) {
		stat_add(ST_WAKE_NOT_OWED, 1);
		return false;
	}
	if (cctx->jump_us >= jump_budget_us() && scx_bpf_dsq_nr_queued(cpu) != 0) {
		stat_add(ST_WAKE_NO_JUMP, 1);
		return false;
	}
	tctx->jumped = JUMP_WAKEE;
	cctx->wake_preempting = 1;
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice_ns, enq_flags | SCX_ENQ_PREEMPT);
	stat_add(ST_PREEMPT_WAKEUP, 1);
	return true;
}
