/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Turns: what happens as a task becomes runnable, starts, stops and sleeps (ops.runnable,
 * ops.running, ops.stopping, ops.quiescent). Each start takes its slice from slices.bpf.c;
 * each stop charges what ran: bursts (CPU time between sleeps) for interactivity, vtime
 * (weighted CPU time) for the shared queues, the debt of the turn; and the wait and migration
 * counters.
 */

/*
 * The task woke at @now: its sleep ended. One cycle enters the run share's average (1/8 each,
 * like the bursts'): the burst over the wait for a CPU after the wakeup before it, the burst
 * and the sleep. The wait counts so that lateness cannot raise the share: a task released on
 * a fixed grid that waited sleeps that much less before its next release. Waits within a
 * burst do not count, so a task that never sleeps reads one whatever waits beside it. Each
 * sleep and burst is at least 1 ns, so the share is defined. It makes the task a sleeper at
 * SLEEPER_RUN_SHARE and unmakes it only past SLEEPER_KEEP_RUN_SHARE (docs/design.md).
 */
static void end_sleep(struct task_ctx *tctx, u64 now)
{
	u64 b = tctx->last_burst_ns + 1, s = now - tctx->slept_at + tctx->wake_wait_ns + 1;
	u64 share = b * RUN_SHARE_ONE / (b + s);

	tctx->run_share = tctx->run_share - tctx->run_share / 8 + share / 8;
	if (tctx->run_share <= SLEEPER_RUN_SHARE)
		tctx->sleeper = 1;
	else if (tctx->run_share > SLEEPER_KEEP_RUN_SHARE)
		tctx->sleeper = 0;
}

void BPF_STRUCT_OPS(gmp_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	u64 now = now_ns();

	if (!tctx)
		tctx = task_ctx_create(p);	/* init_task could not allocate it */
	if (!tctx)
		return;
	tctx->ready_at = now;
	if ((enq_flags & SCX_ENQ_WAKEUP) && tctx->slept_at && now > tctx->slept_at)
		end_sleep(tctx, now);
	/* The wait that starts now is this cycle's wake wait (note_started_wait). */
	tctx->woken = !!(enq_flags & SCX_ENQ_WAKEUP);
	tctx->wake_wait_ns = 0;
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

/* Mark @cpu as running @p from @now; returns whether @p came through the runnext slot. */
static __always_inline bool start_on_cpu(struct cpu_ctx *cctx, s32 cpu, struct task_struct *p,
					 struct task_ctx *tctx, u64 now)
{
	bool runnext = false;

	cctx->running_since = now;
	cctx->running_pid = p->pid;
	/* mem_node is one @p may run on (mem_node_of): growing the procs there brings it home. */
	cctx->running_mem_node = tctx ? tctx->mem_node : -1;
	cctx->burst_base = now - (tctx ? tctx->burst_ns : 0);
	cctx->runner_woke = tctx ? tctx->woke_sync : 0;
	if (cctx->runnext_pid == p->pid) {
		cctx->runnext_pid = 0;
		runnext = true;
		stat_add(ST_DISP_RUNNEXT, 1);
	}
	/* A task that could run on a proc but landed here: sysmon moves it (see sysmon_fn). */
	cctx->running_misplaced = !is_proc(cpu) && p->nr_cpus_allowed > 1 && proc_for(p) >= 0;
	return runnext;
}

/*
 * Where the runner's vtime stands from running_since on, and its weight, for wakees' ranking
 * (trails_runner, lighter_than_runner); a runner without state (@tctx NULL) has neither.
 */
static __always_inline void note_runner_vtime(struct cpu_ctx *cctx, struct task_ctx *tctx)
{
	if (!tctx) {
		cctx->running_vtime = (u64)-1;
		cctx->running_set_weight = 0;
		return;
	}
	cctx->running_vtime = tctx->vtime;
	cctx->running_wslice = task_slice(tctx);
	cctx->running_set_weight = tctx->set_weight;
}

/* An in-order start resets this CPU's jump budget; note whether the runner is interactive. */
static __always_inline void note_jump_state(struct cpu_ctx *cctx, struct task_ctx *tctx)
{
	if (!tctx || !tctx->jumped)
		cctx->jump_us = 0;
	cctx->running_interactive = tctx && interactive(tctx);
}

/* The wait that ended now: histogram, longest-wait record, starvation count. */
static __always_inline void note_started_wait(struct task_struct *p, struct task_ctx *tctx,
					      s32 cpu, u64 now)
{
	u64 wait;

	if (!tctx->ready_at)
		return;
	/* One clock for all CPUs (now_ns); the guard only keeps a racing update from wrapping. */
	wait = now > tctx->ready_at ? now - tctx->ready_at : 0;
	if (tctx->woken)
		tctx->wake_wait_ns = wait;
	tctx->woken = 0;
	record_latency(wait);
	note_wait(cpu, p, wait, 0);
	if (starve_warn_ns && wait >= starve_warn_ns)
		stat_add(ST_STARVE_OVER, 1);
	tctx->ready_at = 0;
}

static __always_inline void count_migration(struct task_ctx *tctx, s32 cpu, s32 node)
{
	if (tctx->last_cpu >= 0 && tctx->last_cpu != cpu) {
		stat_add(ST_MIGRATIONS, 1);
		if (node_of(tctx->last_cpu) != node)
			stat_add(ST_MIGRATIONS_NODE, 1);
	}
	tctx->last_cpu = cpu;
}

void BPF_STRUCT_OPS(gmp_running, struct task_struct *p)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_ctx *tctx = task_ctx(p);
	u64 now = now_ns(), cgf = FP_ONE, set_w = p->scx.weight;
	s32 node = node_of(cpu);
	bool runnext;

	if (!cctx)
		return;
	runnext = start_on_cpu(cctx, cpu, p, tctx, now);
	if (cgroup_weights_on)
		cgf = cg_factor(p, &set_w);
	note_jump_state(cctx, tctx);
	if (!tctx) {
		note_runner_vtime(cctx, NULL);
		start_untracked(cctx, p, cgf, cpu);
		return;
	}
	tctx->set_weight = set_w;
	start_turn(cctx, p, tctx, cgf, runnext, cpu);
	note_runner_vtime(cctx, tctx);
	give_back_owed_turn(p, tctx, cpu);
	if (tctx->vtime > cctx->vtime_max)
		cctx->vtime_max = tctx->vtime;
	note_started_wait(p, tctx, cpu, now);
	count_migration(tctx, cpu, node);
	update_home(p, tctx, node);
}

/*
 * The task slept at @now: its burst ended. Each burst enters the average capped at twice the
 * interactivity threshold, so one long burst cannot undo a history of short ones alone.
 */
static void end_burst(struct task_ctx *tctx, u64 now)
{
	u64 b = tctx->burst_ns, cap = burst_cap_ns();

	tctx->slept_at = now;
	tctx->last_burst_ns = b;
	tctx->avg_burst_ns = tctx->avg_burst_ns - tctx->avg_burst_ns / 8 + (b < cap ? b : cap) / 8;
	tctx->burst_ns = 0;
	tctx->debt_ns = 0;
}

/*
 * Charge @ran ns just run on this CPU: busy time, jump budget, burst, vtime, turn and debt.
 * @cut: someone else's preemption ended the turn early (a wakeup, or a stale sysmon kick).
 */
static __always_inline void charge_run(struct cpu_ctx *cctx, struct task_ctx *tctx, u64 ran,
				       bool runnable, bool cut)
{
	stat_add(ST_BUSY_NS, ran);
	if (!tctx)
		return;
	/* Rounded up: even the shortest jump costs 1 us of the budget. */
	if (tctx->jumped == JUMP_WAKEE)
		charge_jump(cctx, (ran + 999) / 1000);
	tctx->burst_ns += ran;
	tctx->vtime += vtime_of(tctx, ran);
	/* A turn split by preemptions it was not due is one turn: only the whole is weighed. */
	if (runnable && cut && tctx->turn_ns > ran + SLICE_MIN_NS) {
		tctx->resume_ns = tctx->turn_ns - ran;
		tctx->turn_ran += ran;
	} else if (runnable && tctx->wslice && !tctx->given_back) {
		settle_debt(tctx, tctx->turn_ran + ran);
	}
	tctx->given_back = 0;
}

/* Charge what the CPU's current task ran since it started or last renewed its turn. */
static __always_inline void charge_since_start(struct cpu_ctx *cctx, struct task_ctx *tctx,
					       u64 now, bool runnable, bool cut)
{
	if (cctx->running_since && now > cctx->running_since)
		charge_run(cctx, tctx, now - cctx->running_since, runnable, cut);
}

/*
 * A task whose turn ended with nothing else to run keeps its CPU (keep_prev): the kernel
 * calls neither ops.stopping nor ops.running for it, so end the turn here and start the
 * next. Without this a lone hog would be charged only when it finally stopped: busy time
 * read zero meanwhile (and --procs auto shrank under a full job), and the one charge of
 * minutes of running overflowed vtime_of(). Charged per turn, @ran stays about a slice.
 */
static void renew_turn(struct cpu_ctx *cctx, struct task_struct *p, struct task_ctx *tctx)
{
	u64 now = now_ns(), turn = slice_ns;

	if (!cctx)
		return;
	charge_since_start(cctx, tctx, now, true, cctx->wake_preempting);
	cctx->running_since = now;
	note_runner_vtime(cctx, tctx);
	/* Nothing waited, so the new turn starts in order: no jump is in progress. */
	cctx->jump_us = 0;
	if (tctx && tctx->wslice) {
		tctx->jumped = 0;
		/* Nothing waits for this CPU (keep_prev found nothing): no round to share. */
		turn = next_turn(tctx, TURN_MAX_NS);
		tctx->turn_ns = turn;
	}
	scx_bpf_task_set_slice(p, turn);
}

/*
 * Whether @p's turn, ending now with its slice at 0, was cut by a sysmon kick meant for the
 * turn before. sysmon judges the turn that started at kick_since, and its kick zeroes the
 * slice of whatever runs when it lands: a newer turn if the judged task stopped or renewed
 * meanwhile. That turn was not due; it resumes with its rest, as one a wakeup cut. A kick
 * lands within microseconds, so one sent over a tick ago cannot be what ended this turn.
 *
 * sysmon writes kick_since and kick_at from its own CPU; the kick's IPI orders them before
 * the stop it causes. A stop that reads them before a kick lands sees older values and can
 * only miss a stale kick. A turn ending by itself within a tick of a kick that landed while
 * the CPU idled is taken for cut; it then runs no more than the rest of its own turn.
 */
static __always_inline bool stale_kick(struct cpu_ctx *cctx, struct task_struct *p,
				       struct task_ctx *tctx, bool runnable, u64 now)
{
	return runnable && p->scx.slice == 0 && cctx->kick_since &&
	       cctx->kick_since != cctx->running_since && now < cctx->kick_at + tick_ns() &&
	       !cctx->wake_preempting && !(tctx && tctx->given_back);
}

/* How a runnable task's turn ended with its slice at 0, unless a wakeup preempted it. */
static __always_inline u32 turn_end_stat(struct cpu_ctx *cctx, bool stale)
{
	if (stale)
		return ST_PREEMPT_STALE;
	if (cctx->kick_since && cctx->kick_since == cctx->running_since)
		return ST_PREEMPT_SYSMON;
	return ST_PREEMPT_SLICE;
}

/*
 * A kick has landed once the turn it was meant for ends cut, and any kick has by the time a
 * later turn ends: forget it then, so that it is never taken for what ends a turn after.
 */
static __always_inline void forget_kick(struct cpu_ctx *cctx, struct task_struct *p, bool runnable)
{
	if (cctx->kick_since &&
	    (cctx->kick_since != cctx->running_since || (runnable && p->scx.slice == 0)))
		cctx->kick_since = 0;
}

void BPF_STRUCT_OPS(gmp_stopping, struct task_struct *p, bool runnable)
{
	s32 cpu = scx_bpf_task_cpu(p);
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u64 now = now_ns();
	struct task_ctx *tctx;
	u32 end_stat;
	bool stale;

	if (!cctx)
		return;
	tctx = task_ctx(p);
	stale = stale_kick(cctx, p, tctx, runnable, now);
	end_stat = turn_end_stat(cctx, stale);
	charge_since_start(cctx, tctx, now, runnable, cctx->wake_preempting || stale);
	forget_kick(cctx, p, runnable);
	/* A task that sleeps ends its burst (remember how long it was) and owes nothing. */
	if (tctx && !runnable)
		end_burst(tctx, now);
	cctx->running_since = 0;
	cctx->running_pid = 0;
	if (tctx) {
		tctx->jumped = 0;
		tctx->given_back = 0;
		/* A burst that goes on keeps the mark of having woken others (runner_turned_hog). */
		tctx->woke_sync = runnable && cctx->runner_woke;
	}
	if (runnable) {
		if (tctx)
			tctx->ready_at = now;
		/* A wakeup preemption zeroes the slice too; it is counted as ST_PREEMPT_WAKEUP. */
		if (p->scx.slice == 0 && !cctx->wake_preempting)
			stat_add(end_stat, 1);
	}
	cctx->wake_preempting = 0;
}
