/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ops.dispatch: Go's findRunnable. Own queue, the node's shared queue (least weighted CPU
 * time within a window), another node's lagging head, then steal; with nothing found the
 * previous task keeps the CPU.
 *
 * Why no task waits forever: the fair tick serves the shared queue first every fair_tick-th
 * dispatch and while its head is stale, so a busy local queue cannot shut it out;
 * shared_pick falls back to FIFO once the head is due (pick_due); sysmon preempts runners
 * when work waits.
 */

/*
 * How crowded shared queue @dsq_id, holding @nq tasks, is, weights counted: the weighted slices
 * of its first SHARED_PICK_WINDOW tasks, scaled to @nq. A weighted slice is what a task takes
 * of each round, so this is the length of the queue's round: six light tasks make a shorter
 * one than four heavy ones, where counting tasks says the opposite.
 */
__noinline u64 backlog_ns(s32 cpu, u64 dsq_id, s32 nq)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_struct *p;
	u64 sum = 0;

	if (!cctx || nq <= 0)
		return 0;
	/* Scratch in memory, not registers: see steal_from. */
	cctx->backlog_seen = 0;
	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		sum += task_slice(task_ctx(p));
		if (++cctx->backlog_seen >= SHARED_PICK_WINDOW)
			break;
	}
	if (cctx->backlog_seen && (u32)nq > cctx->backlog_seen)
		sum = sum * (u32)nq / cctx->backlog_seen;
	return sum;
}

/*
 * Fairness across nodes: every node serves its own shared queue, so tasks on a node crowded
 * with more (or heavier) work than another fall behind their share. A proc about to serve
 * its node takes another node's head instead when that task's weighted CPU time trails what
 * this proc would run next by more than LAG_SLICES slices: its own head, or, with nothing
 * queued here, @prev_vt (the task ending its turn, which keeps the CPU otherwise; U64_MAX if
 * there is none, and then @prev_w is 0).
 *
 * The other node must be at least as crowded: its queue holds at least as many tasks as ours
 * counting prev, so a move leaves at most one more waiting here than there. Or, holding fewer,
 * its weighted backlog (backlog_ns) exceeds ours, counting prev's slice @prev_w, by at least
 * the head's own slice: a few heavy tasks crowd a node more than many light ones, and counting
 * tasks alone, weights flattened across such nodes. Either way a move leaves at most one task's
 * worth more waiting here than there, the backlogs stay level, and two nodes cannot pull one
 * task to and fro faster than the lag builds up again. The backlogs are summed only when the
 * counts refuse a lagging head. Tasks with a memory node stay put (movable_head).
 */
__noinline int lag_steal(s32 cpu, u32 node, u64 prev_vt, u64 prev_w)
{
	u64 mine_dsq = shared_dsq(node), mine_w = (u64)-1, mine;
	s32 queued = scx_bpf_dsq_nr_queued(mine_dsq), mine_q, q;
	struct task_ctx *head;
	u32 n;

	if (queued < 0)
		queued = 0;
	mine = prev_vt;
	if (queued > 0) {
		head = movable_head(mine_dsq);
		mine = head ? head->vtime : (u64)-1;
	}
	if (mine == (u64)-1)
		return 0;
	mine_q = queued + (prev_vt != (u64)-1);
	bpf_for(n, 0, nr_nodes) {
		if (n == node || n >= MAX_NODES)
			continue;
		q = scx_bpf_dsq_nr_queued(shared_dsq(n));
		if (q <= 0)
			continue;
		head = movable_head(shared_dsq(n));
		if (!head || head->vtime + LAG_SLICES * slice_ns >= mine)
			continue;
		if (q < mine_q) {
			if (mine_w == (u64)-1)
				mine_w = backlog_ns(cpu, mine_dsq, queued) + prev_w;
			if (backlog_ns(cpu, shared_dsq(n), q) < mine_w + task_slice(head))
				continue;
		}
		if (scx_bpf_dsq_move_to_local(shared_dsq(n), 0))
			return 1;
	}
	return 0;
}

/*
 * The weighted CPU time of @prev, ending its turn on @cpu, as lag_steal weighs it: with the
 * turn it ran (ops.stopping adds that only after this dispatch); its weighted slice in @w.
 * U64_MAX (and @w untouched) unless prev is an ordinary runnable task without a memory node,
 * that could yield the CPU to another node's.
 */
static u64 prev_vtime(s32 cpu, struct task_struct *prev, u64 *w)
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
	*w = task_slice(tctx);
	v = tctx->vtime;
	if (cctx->running_since && now > cctx->running_since)
		v += vtime_of(tctx, now - cctx->running_since);
	return v;
}

/* lag_steal on @cpu of @node, weighing @prev, which ends its turn there. */
static __always_inline int take_lagging(s32 cpu, u32 node, struct task_struct *prev)
{
	u64 prev_w = 0, prev_vt = prev_vtime(cpu, prev, &prev_w);

	return lag_steal(cpu, node, prev_vt, prev_w);
}

/* Whether shared_pick must take the head of @node's shared queue, @tctx's task, next. */
static __always_inline bool pick_due(struct task_ctx *tctx, u32 node, u64 now)
{
	u32 n = node_idx(node);
	u64 picks = shared_picks[n].n - tctx->shared_seq;

	if (picks < SHARED_PICK_WAIT_TURNS * (u64)(node_procs[n] ?: 1) &&
	    now - tctx->ready_at < SHARED_PICK_WAIT_MAX_NS)
		return false;
	stat_add(ST_PICK_DUE, 1);
	return true;
}

/* A task left @node's shared queue through shared_pick: the queue's wait clock ticks. */
static __always_inline int picked(u32 node)
{
	__sync_fetch_and_add(&shared_picks[node_idx(node)].n, 1);
	return 1;
}

/*
 * shared_pick met @p in the queue: the first entry sets the weight and cgroup to compare with;
 * one that differs widens the window, since only then does FIFO order flatten weights.
 */
static __always_inline void widen_for_weights(struct cpu_ctx *cctx, struct task_struct *p,
					      struct task_ctx *tctx)
{
	if (!cctx->pick_weight) {
		cctx->pick_weight = p->scx.weight ?: 1;
		cctx->pick_cgid = tctx->cgid;
	} else if (p->scx.weight != cctx->pick_weight || tctx->cgid != cctx->pick_cgid) {
		cctx->pick_window = SHARED_PICK_WINDOW_MIXED;
	}
}

/*
 * Serve @node's shared queue on @cpu. A plain FIFO shared by several CPUs gives every task
 * one turn per wait, so tasks with short (low-weight) turns come round more often and weights
 * flatten. So the task with the least vtime among the first SHARED_PICK_WINDOW (or, with
 * weights that differ among them, SHARED_PICK_WINDOW_MIXED) goes first, but the head goes
 * first once it is due (pick_due).
 *
 * Why nothing starves: every task behind the head joined the queue after it, so the node's
 * picks and the clock have moved less for it; once a task is due, so is every task ahead of
 * it, and from then on the queue is served in FIFO order up to it. No task waits more than
 * SHARED_PICK_WAIT_MAX_NS plus what plain FIFO would have made it wait.
 *
 * Only tasks allowed on @cpu are chosen (the same mask checks as steal_from); if the chosen
 * one has left the queue meanwhile, or none fits, the FIFO move at the end serves.
 */
__noinline int shared_pick(s32 cpu, u32 node)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u64 dsq = shared_dsq(node), now = now_ns(), best = (u64)-1;
	struct task_struct *p;

	if (!cctx)
		return 0;
	if (scx_bpf_dsq_nr_queued(dsq) < 2)
		return scx_bpf_dsq_move_to_local(dsq, 0) && picked(node);
	/* Scratch in memory, not registers: see steal_from. */
	cctx->pick_seen = 0;
	cctx->pick_pid = -1;
	cctx->pick_window = SHARED_PICK_WINDOW;
	cctx->pick_weight = 0;
	bpf_for_each(scx_dsq, p, dsq, 0) {
		struct task_ctx *tctx = task_ctx(p);

		/* The head is due (or unknown): FIFO (pick_pid stays -1). */
		if (!cctx->pick_seen && (!tctx || !tctx->ready_at || pick_due(tctx, node, now)))
			break;
		if (++cctx->pick_seen > cctx->pick_window)
			break;
		if (!tctx)
			continue;
		widen_for_weights(cctx, p, tctx);
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || is_migration_disabled(p))
			continue;
		if (tctx->vtime < best) {
			best = tctx->vtime;
			cctx->pick_pid = p->pid;
		}
	}
	if (cctx->pick_pid >= 0) {
		cctx->pick_seen = 0;
		bpf_for_each(scx_dsq, p, dsq, 0) {
			if (++cctx->pick_seen > cctx->pick_window)
				break;
			if (p->pid != cctx->pick_pid)
				continue;
			/* Still queued here (the move checks) and allowed on @cpu (checked above;
			 * an affinity change dequeues the task first, so the check still holds). */
			if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0))
				return picked(node);
			break;
		}
	}
	return scx_bpf_dsq_move_to_local(dsq, 0) && picked(node);
}

/*
 * Nothing else to run: the previous task keeps the CPU with a fresh slice (the kernel keeps
 * a runnable prev whose slice ops.dispatch refilled), unless it is on a non-proc and may run
 * on a proc, or is away from home: then it is left alone, and SCX_OPS_ENQ_LAST hands it to
 * ops.enqueue, which moves it. Either way the CPU folds its held cgroup counts first: out of
 * work, nothing may come by that would fold them (cg_hold).
 */
static void keep_prev(s32 cpu, struct task_struct *prev)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_ctx *tctx;

	if (cctx)
		cg_fold(cctx, now_ns());
	if (!prev || !(prev->scx.flags & SCX_TASK_QUEUED))
		return;
	if (!is_proc(cpu) && prev->nr_cpus_allowed > 1 && !is_migration_disabled(prev) &&
	    proc_for(prev) >= 0)
		return;
	tctx = task_ctx(prev);
	if (away_from_home(tctx, node_of(cpu)))
		return;
	renew_turn(cctx, prev, tctx);
	stat_add(ST_DISP_KEEP_PREV, 1);
}

/* A CPU woken by wakep reached dispatch: the node may kick another. Returns whether it was. */
static __always_inline bool clear_kicked(struct cpu_ctx *cctx, u32 node)
{
	if (!cctx->kicked)
		return false;
	cctx->kicked = 0;
	node_kick_at[node_idx(node)] = 0;
	return true;
}

/* A non-proc runs only its own queue: tasks allowed on no proc (see evict_from). */
static __always_inline void dispatch_non_proc(s32 cpu, struct task_struct *prev)
{
	if (scx_bpf_dsq_nr_queued(cpu) > 0)
		evict_from(cpu);
	if (scx_bpf_dsq_move_to_local(cpu, 0))
		stat_add(ST_DISP_LOCAL, 1);
	else
		keep_prev(cpu, prev);
}

/*
 * Go's fairness tick: serve the shared queue first every fair_tick-th dispatch, and while its
 * head has waited FAIR_TICK_MAX_NS (shared_stale, set by sysmon). The count alone bounds how
 * often a CPU looks, not how long a task waits: a CPU dispatches once a turn, and a node whose
 * procs all hold pinned pairs served its shared queue one task per 61 turns of each CPU,
 * whatever the queue's length. A stale queue is served by every proc of its node, but by
 * each at most every other dispatch while its own queue holds work (fair_alt). Served as
 * always (shared_pick), not head first: where heads often waited past the threshold (turns
 * long in wall time), taking the head flattened cgroup weights.
 *
 * Why neither side starves: under a stale shared queue a CPU alternates it with its own
 * queue, so a task in cpu_dsq waits at most twice its queue's length in turns, and a shared
 * task at most SHARED_PICK_WAIT_MAX_NS (pick_due) plus twice the shared queue's length over
 * the node's procs. Served first on every dispatch instead, a shared queue at least 2.5 turns
 * long per proc (longer than the threshold) stayed stale for good and cpu_dsq tasks waited
 * for the watchdog.
 */
static __always_inline bool dispatch_fair_tick(s32 cpu, struct cpu_ctx *cctx, u32 node)
{
	bool tick = fair_tick && cctx->schedtick % fair_tick == 0, alt = cctx->fair_alt;

	cctx->fair_alt = 0;
	if (!tick && (!shared_stale[node_idx(node)] ||
		      (alt && scx_bpf_dsq_nr_queued(cpu) > 0)))
		return false;
	if (!shared_pick(cpu, node))
		return false;
	cctx->fair_alt = !tick;
	stat_add(ST_DISP_FAIR_TICK, 1);
	return true;
}

void BPF_STRUCT_OPS(gmp_dispatch, s32 cpu, struct task_struct *prev)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u32 node = node_of(cpu);
	bool was_kicked;

	if (!cctx || test_stall)
		return;
	was_kicked = clear_kicked(cctx, node);
	cctx->schedtick++;
	cg_fold_due(cctx, now_ns());

	if (!is_proc(cpu)) {
		dispatch_non_proc(cpu, prev);
		return;
	}
	if (dispatch_fair_tick(cpu, cctx, node))
		return;
	if (scx_bpf_dsq_move_to_local(cpu, 0)) {
		stat_add(ST_DISP_LOCAL, 1);
		return;
	}
	if (nr_nodes > 1 && take_lagging(cpu, node, prev)) {
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
