/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Turn lengths: how long a turn may run and when it must end. A turn's slice is the task's
 * weighted slice within the round cap, corrected by the debt of earlier turns (preemption
 * lands late, on a tick or an IPI) so that turns average the weighted slice; sysmon's
 * deadline for the turn, and the CPU's turn timer where the tick would miss it; the deficit
 * round robin that gives back a pinned task's owed turn.
 */

/*
 * Whether a turn's preemption limit @limit must be kept exactly, for a run whose slice is
 * @slice and a task whose full weighted slice is @wslice. A limit inside the slice is
 * sysmon's alone. Otherwise the slice runs out first and the CPU's own tick ends the turn,
 * locally; a kick would be an IPI doing the same a little earlier. The overrun (up to a tick)
 * is paid back from the next turn (settle_debt), which works while it is at most half a turn:
 * tasks whose weighted slice is under two ticks keep the exact deadline. The test is on
 * @wslice, not on this turn's @slice, which is shorter while it pays back the last overrun.
 */
static __always_inline bool exact_deadline(u64 limit, u64 slice, u64 wslice)
{
	return limit < slice || wslice < 2 * tick_ns();
}

/*
 * When sysmon preempts the run: at an exact limit, else one tick past the slice, as the
 * backstop for a tick that does not come.
 */
static __always_inline u64 sysmon_deadline(u64 limit, u64 slice, u64 wslice)
{
	u64 backstop = slice + tick_ns();

	if (exact_deadline(limit, slice, wslice))
		return limit;
	return limit > backstop ? limit : backstop;
}

/*
 * An exact deadline: arm this CPU's turn timer for it. sysmon's pass comes only every
 * SYSMON_PERIOD_NS, so without it a low-weight task would run on to the next tick and its
 * share would grow. Pinned to this CPU: the check and the preemption stay local.
 */
static void arm_turn_timer(s32 cpu, struct cpu_ctx *cctx, u64 limit)
{
	struct turn_timer *tt;
	u32 key = cpu_idx(cpu);

	tt = bpf_map_lookup_elem(&turn_timers, &key);
	if (!tt)
		return;
	tt->since = cctx->running_since;
	bpf_timer_start(&tt->timer, limit, BPF_F_TIMER_CPU_PIN);
}

/*
 * The longest turn @cpu may start now: ROUND_MAX_NS shared by the tasks waiting for it, those
 * in its own queue and its part of the node's shared queue (as of sysmon's last pass). In a
 * FIFO of k tasks behind turns of T the last waits k * T, so without the cap five waiting
 * tasks at --slice-us 250000 waited half the watchdog. Every turn on a crowded CPU gets the
 * same cap, so there weights give way to the wait bound.
 */
static __always_inline u64 round_cap(s32 cpu)
{
	u32 n = node_idx(node_of(cpu)), procs = node_procs[n];
	s32 q = scx_bpf_dsq_nr_queued(cpu);
	u64 waiting = q > 0 ? q : 0, cap;

	if (procs)
		waiting += (shared_queued[n] + procs - 1) / procs;
	cap = ROUND_MAX_NS / (waiting + 1);
	return cap > SLICE_MIN_NS ? cap : SLICE_MIN_NS;
}

/* A task without state: its weighted slice within the round cap, no debt. */
static __always_inline void start_untracked(struct cpu_ctx *cctx, struct task_struct *p, u64 cgf,
					    s32 cpu)
{
	u64 slice = weighted(slice_ns, p, cgf), cap = round_cap(cpu);

	if (slice > cap)
		slice = cap;

	cctx->run_limit_ns = sysmon_deadline(weighted(preempt_ns, p, cgf), slice, slice);
	scx_bpf_task_set_slice(p, slice);
}

/*
 * This turn's slice: the rest of a turn a wakeup preempted (turn_ran keeps what it ran
 * before), or the turn's goal (the weighted slice, at most @cap) less what earlier turns
 * overran (or plus what they fell short), so that the time per turn averages the goal.
 */
static __always_inline u64 next_turn(struct task_ctx *tctx, u64 cap)
{
	u64 turn;

	if (tctx->resume_ns) {
		turn = tctx->resume_ns;
		tctx->resume_ns = 0;
		return turn;
	}
	tctx->turn_ran = 0;
	tctx->turn_goal = tctx->wslice < cap ? tctx->wslice : cap;
	turn = tctx->turn_goal;
	if (tctx->debt_ns > 0)
		turn = (u64)tctx->debt_ns + SLICE_MIN_NS >= turn ? SLICE_MIN_NS :
								 turn - tctx->debt_ns;
	else if (tctx->debt_ns < 0)
		turn += (u64)-tctx->debt_ns;
	/* Paying back a short turn never makes one longer than the caps (intf.h, round_cap). */
	if (cap > TURN_MAX_NS)
		cap = TURN_MAX_NS;
	return turn < cap ? turn : cap;
}

/*
 * Start a turn on @cpu: weighted slice, this turn's slice (a runnext task keeps the shorter
 * slice it inherited from its waker), and the preemption deadline, scaled with the turn.
 */
static __always_inline void start_turn(struct cpu_ctx *cctx, struct task_struct *p,
				       struct task_ctx *tctx, u64 cgf, bool runnext, s32 cpu)
{
	u64 turn, limit;

	tctx->wslice = weighted(slice_ns, p, cgf);
	turn = next_turn(tctx, round_cap(cpu));
	tctx->turn_ns = turn;
	if (!runnext || p->scx.slice > turn)
		scx_bpf_task_set_slice(p, turn);
	limit = turn * preempt_ns / slice_ns;
	if (limit < SLICE_MIN_NS)
		limit = SLICE_MIN_NS;
	/* p->scx.slice is the slice in force: turn, or the shorter one a runnext task inherited. */
	cctx->run_limit_ns = sysmon_deadline(limit, p->scx.slice, tctx->turn_goal);
	if (exact_deadline(limit, p->scx.slice, tctx->turn_goal))
		arm_turn_timer(cpu, cctx, limit);
}

/*
 * Deficit round robin for pinned tasks, whose per-CPU queue is FIFO: a task that owes a
 * whole turn (preemption landed late, turn after turn) gives this one back at once while
 * others wait here, paying a turn of its debt; otherwise a low-weight pinned task would run
 * at least the preemption latency every round. The debt is capped (DEBT_MAX_TURNS), so at
 * most that many turns in a row are given back. Unpinned tasks need no give-back: the shared
 * queues serve the least vtime first, and an overrun turn raises the task's vtime.
 *
 * The give-back pays one weighted slice of the debt here, not what the switch away took: a
 * switch that takes a whole turn (a vCPU its host deschedules) would pay nothing, and every
 * turn after would be given back too, the task never running again (seen as RCU stalls: a
 * reader preempted in its read section, on a CPU of weight-1 pinned tasks).
 */
static __always_inline void give_back_owed_turn(struct task_struct *p, struct task_ctx *tctx,
						s32 cpu)
{
	if (p->nr_cpus_allowed == 1 && !tctx->turn_ran && tctx->debt_ns >= (s64)tctx->wslice &&
	    scx_bpf_dsq_nr_queued(cpu) > 0) {
		tctx->debt_ns -= tctx->wslice;
		tctx->given_back = 1;
		scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
		stat_add(ST_TURN_GIVEN_BACK, 1);
	}
}

/* A contended turn ended: carry what it ran past (or short of) its goal, within bounds. */
static void settle_debt(struct task_ctx *tctx, u64 ran)
{
	s64 w = tctx->turn_goal ? tctx->turn_goal : tctx->wslice;
	s64 d = tctx->debt_ns + (s64)ran - w;

	if (d > DEBT_MAX_TURNS * w)
		d = DEBT_MAX_TURNS * w;
	if (d < -w)
		d = -w;
	tctx->debt_ns = d;
}
