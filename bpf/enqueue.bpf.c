/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ops.enqueue: which queue a runnable task joins, as a ladder of cases. Whether a wakeup
 * preempts the running task instead is preempt.bpf.c's.
 *
 * Invariants: a task enters cpu_dsq[c] only if it may run on c (enq.cpu is the task's CPU,
 * checked against p->cpus_ptr, or a proc picked from it), and shared_dsq[n] only if it may run
 * on a CPU of node n (n is the node of such a CPU).
 */

/* One enqueue in progress: the task, its state, and the CPU and flags as the ladder refines them. */
struct enq {
	struct task_struct *p;
	struct task_ctx *tctx;
	u64 flags;
	u64 runnext_slice;  /* the waker's slice, if select_cpu chose runnext; 0 otherwise */
	s32 cpu;
};

/* Wake the queue's owner if it idles; otherwise one idle CPU that may steal. */
static __always_inline void kick_owner(struct enq *e)
{
	if (scx_bpf_test_and_clear_cpu_idle(e->cpu)) {
		scx_bpf_kick_cpu(e->cpu, SCX_KICK_IDLE);
		stat_add(ST_KICK_IDLE, 1);
	} else if (e->p->nr_cpus_allowed > 1) {
		wakep(node_of(e->cpu), e->p->cpus_ptr);
	}
}

/* Into e->cpu's own queue (cpu_dsq), with @slice and @extra flags. */
static __always_inline void queue_local(struct enq *e, u64 slice, u64 extra, u32 stat)
{
	scx_bpf_dsq_insert(e->p, e->cpu, slice, e->flags | extra);
	stat_add(stat, 1);
	kick_owner(e);
}

/* Into the shared queue of e->cpu's node, and wake a CPU of the node for it. */
static __always_inline void queue_shared(struct enq *e, u32 stat)
{
	u32 node = node_of(e->cpu);

	if (e->tctx)
		e->tctx->shared_seq = shared_picks[node_idx(node)].n;
	scx_bpf_dsq_insert(e->p, shared_dsq(node), slice_ns, e->flags);
	stat_add(stat, 1);
	wakep(node, e->p->cpus_ptr);
}

/*
 * SCX_ENQ_LAST for a task that may stay (keep_prev normally keeps those before it comes to
 * this): back to this CPU's local DSQ. The CPU is already switching to idle, so kick it to
 * pick the task up.
 */
static __always_inline void keep_running(struct enq *e)
{
	scx_bpf_dsq_insert(e->p, SCX_DSQ_LOCAL, task_slice(e->tctx), e->flags);
	scx_bpf_kick_cpu(scx_bpf_task_cpu(e->p), 0);
	stat_add(ST_DISP_KEEP_PREV, 1);
}

/*
 * Preempted by a short wakeup: it keeps its place (the head of its CPU's queue) and the rest
 * of its turn. Only the wakee's run time is charged to the jump budget: this turn was due.
 */
static __always_inline bool resume_turn(struct enq *e)
{
	if ((e->flags & SCX_ENQ_WAKEUP) || !e->tctx || !e->tctx->resume_ns)
		return false;
	e->tctx->jumped = JUMP_RESUMED;
	queue_local(e, e->tctx->resume_ns, SCX_ENQ_HEAD, ST_ENQ_RESUMED);
	return true;
}

/*
 * A task that may run only where it is: keep running there, or take back the place and turn
 * a wakeup preempted, or join the tail of that CPU's queue.
 */
static __always_inline void queue_own_cpu(struct enq *e, u32 stat)
{
	if (e->flags & SCX_ENQ_LAST)
		keep_running(e);
	else if (!resume_turn(e))
		queue_local(e, slice_ns, 0, stat);
}

/* The task's CPU may have left its mask (affinity change): pick one inside it. */
static __always_inline bool fix_cpu(struct enq *e)
{
	struct task_struct *p = e->p;

	if (!bpf_cpumask_test_cpu(e->cpu, p->cpus_ptr))
		e->cpu = bpf_cpumask_any_distribute(p->cpus_ptr);
	if (e->cpu < 0 || e->cpu >= nr_cpus || e->cpu >= MAX_CPUS) {
		scx_bpf_error("enqueue: %s[%d] has no usable CPU (%d)", p->comm, p->pid, e->cpu);
		return false;
	}
	return true;
}

/*
 * TEST ONLY (test_strand_shared): the state a shrink of the procs can leave, a task that no
 * proc may run in its node's shared queue. No CPU serves it there; sysmon's rescue_stranded
 * must move it.
 */
static __always_inline void strand_shared(struct enq *e)
{
	scx_bpf_dsq_insert(e->p, shared_dsq(node_of(e->cpu)), slice_ns, e->flags);
}

/*
 * On a non-proc: ordinary work belongs on a proc, so retarget a proc the task may use; what
 * may run on none stays on its own CPU (true: done).
 */
static __always_inline bool enqueue_off_procs(struct enq *e)
{
	s32 pc = proc_for(e->p);

	if (pc < 0) {
		if (test_strand_shared && !(e->flags & SCX_ENQ_LAST))
			strand_shared(e);
		else
			queue_own_cpu(e, ST_ENQ_STRANDED);
		return true;
	}
	if (e->flags & SCX_ENQ_LAST)
		stat_add(ST_EVICTED, 1);
	e->cpu = pc;
	/* runnext and wakeup preemption target this CPU; it is not the waker's now. */
	e->runnext_slice = 0;
	e->flags &= ~SCX_ENQ_LAST;
	return false;
}

/*
 * Away from home (a steal moved it, or its memory is elsewhere) with room at home: go home.
 * Wakeups were placed by select_cpu, which looked at home first.
 */
static __always_inline bool send_home(struct enq *e)
{
	s32 hc;

	if ((e->flags & SCX_ENQ_WAKEUP) || !away_from_home(e->tctx, node_of(e->cpu)))
		return false;
	hc = idle_at_home(e->p, e->tctx->home_node);
	if (hc < 0)
		return false;
	/* hc is in p->cpus_ptr (idle_at_home checked it): LOCAL_ON is safe. */
	scx_bpf_dsq_insert(e->p, SCX_DSQ_LOCAL_ON | hc, slice_ns, e->flags);
	scx_bpf_kick_cpu(hc, SCX_KICK_IDLE);
	stat_add_on(hc, ST_PLACE_HOME, 1);
	return true;
}

/* Preempted (slice used up, sysmon kick) or yielded: Go sends it to the global queue's tail. */
static __always_inline bool turn_used(struct enq *e)
{
	return !(e->flags & SCX_ENQ_WAKEUP) && e->p->scx.slice == 0;
}

/*
 * A turn that ran out within BURST_LOCAL_TURNS of the task's own turns since it woke: the
 * burst's rest goes to the tail of this CPU's queue, where the wakeup that began the burst
 * went, not behind the hogs of the shared queue, which procs serve only once their own queues
 * are empty. It gains no place it could not take by sleeping: a brief sleep would queue it on
 * the same tail. Only a task that has slept qualifies, and only for its burst's first turns,
 * so CPU hogs still go to the shared queue, as in Go.
 */
static __always_inline bool burst_rest(struct enq *e)
{
	struct task_ctx *tctx = e->tctx;

	return tctx && tctx->slept_at && tctx->wslice &&
	       tctx->burst_ns <= BURST_LOCAL_TURNS * tctx->wslice;
}

/*
 * runnext only while nothing waits for this CPU, in its queue or in the kernel's local DSQ: a
 * runnext ahead of waiting tasks could, with ping-pong pairs handing off on this CPU, keep a
 * task at the tail waiting forever (Go moves a displaced runnext to the tail; a DSQ cannot be
 * reordered here).
 *
 * A pair's wakee, or a wakee pinned to this CPU, goes straight into the local DSQ: the CPU
 * switches to it as the waker sleeps, without an ops.dispatch pass, and no thief could have
 * used it. Skipping dispatch skips its fairness tick too, as Go's runnext inherits the time
 * slice without a schedtick; the chain shares the waker's one slice, so the tick resumes
 * within slice_ns. Any other wakee goes to the head of this CPU's queue, where an idle CPU can
 * steal it if the waker runs on.
 */
static __always_inline bool enqueue_runnext(struct enq *e)
{
	struct cpu_ctx *cctx = cpu_ctx(e->cpu);

	if (!e->runnext_slice || !cctx || e->cpu != bpf_get_smp_processor_id() ||
	    scx_bpf_dsq_nr_queued(e->cpu) != 0 || scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) != 0)
		return false;
	cctx->runnext_pid = e->p->pid;
	/*
	 * e->cpu is this CPU, the task's CPU: picked from p->cpus_ptr by select_runnext, or the
	 * one CPU of a pinned task (fix_cpu).
	 */
	if (e->p->nr_cpus_allowed == 1) {
		scx_bpf_dsq_insert(e->p, SCX_DSQ_LOCAL, e->runnext_slice, e->flags);
	} else if (e->tctx && e->tctx->runnext_pair) {
		scx_bpf_dsq_insert(e->p, SCX_DSQ_LOCAL, e->runnext_slice, e->flags);
		stat_add(ST_ENQ_RUNNEXT_PAIR, 1);
	} else {
		scx_bpf_dsq_insert(e->p, e->cpu, e->runnext_slice, e->flags | SCX_ENQ_HEAD);
	}
	stat_add(ST_ENQ_RUNNEXT, 1);
	return true;
}

/*
 * The task running on e->cpu if it is waking user task e->p from its own context (a pipe
 * write, a futex wake); NULL if an interrupt that landed on it does (a timer beside a spinner,
 * where the current task is no waker). A kernel thread woken so (ksoftirqd, a kworker) is left
 * out: it is deferred work that others wait for, not a hand-off.
 */
static __always_inline struct task_struct *waking_runner(struct enq *e)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct cpu_ctx *cctx = cpu_ctx(e->cpu);

	if (!(e->flags & SCX_ENQ_WAKEUP) || (e->p->flags & PF_KTHREAD) || bpf_in_interrupt() ||
	    e->cpu != bpf_get_smp_processor_id() || !runner_wakes(cctx, cur, e->p))
		return NULL;
	return cur;
}

/*
 * Pinned to one CPU (ksoftirqd, kworkers, taskset): a pinned waker must not wait behind a
 * hog, and a pinned task a wakeup preempted keeps its place, as an unpinned one does. At the
 * tail instead, every wakeup handed the CPU to the next pinned task: turns were cut at
 * wakeups rather than at weighted slices, and weights flattened (300:100 read 2.4:1 on one CPU).
 *
 * A pinned wakee never passes select_cpu, so the wake flags that mark a synchronous waker are
 * not seen; a user task woken by the CPU's own runner is taken for one: it never preempts the
 * runner and takes runnext with the runner's slice, as select_runnext gives an unpinned wakee.
 * Preempted, a pipe's writer found its reply written when it resumed, never slept again, and
 * so read as a hog: every message cost a wakeup preemption from then on. Not preempting is
 * always safe: the wakee waits in order, at most the rest of the runner's turn.
 */
static __always_inline void enqueue_pinned(struct enq *e)
{
	struct task_struct *waker = waking_runner(e);
	bool by_runner = waker || e->runnext_slice;

	e->runnext_slice = 0;
	if (waker && runnext_on && waker->scx.slice >= RUNNEXT_MIN_NS)
		e->runnext_slice = waker->scx.slice;
	if (wakeup_preempt(e->p, e->tctx, e->cpu, e->flags, by_runner))
		return;
	if (enqueue_runnext(e))
		return;
	queue_own_cpu(e, ST_ENQ_PINNED);
}

void BPF_STRUCT_OPS(gmp_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct enq e = { .p = p, .tctx = task_ctx(p), .flags = enq_flags,
			 .cpu = scx_bpf_task_cpu(p) };

	if (e.tctx) {
		e.runnext_slice = e.tctx->runnext_slice;
		e.tctx->runnext_slice = 0;
	}
	if (is_migration_disabled(p)) {		/* can run only where it is */
		queue_own_cpu(&e, ST_ENQ_PINNED);
		return;
	}
	if (!fix_cpu(&e))
		return;
	if (p->nr_cpus_allowed == 1) {
		enqueue_pinned(&e);
		return;
	}
	if (!is_proc(e.cpu) && enqueue_off_procs(&e))
		return;
	if (send_home(&e))
		return;
	if (e.flags & SCX_ENQ_LAST) {
		keep_running(&e);
		return;
	}
	if (e.flags & SCX_ENQ_REENQ) {		/* a higher class took the CPU */
		queue_shared(&e, ST_ENQ_REENQ);
		return;
	}
	if (resume_turn(&e))
		return;
	if (turn_used(&e)) {
		if (burst_rest(&e))
			queue_local(&e, slice_ns, 0, ST_ENQ_BURST_REST);
		else
			queue_shared(&e, ST_ENQ_PREEMPTED);
		return;
	}
	/*
	 * Wakeups, new tasks and tasks re-queued by an attribute change use the local queue. When
	 * it is full Go moves half of it to the global queue; a DSQ cannot be drained from
	 * ops.enqueue (the rq lock is held), so the new task alone overflows and thieves
	 * rebalance the rest.
	 */
	if (scx_bpf_dsq_nr_queued(e.cpu) >= local_cap) {
		queue_shared(&e, ST_ENQ_OVERFLOW);
		return;
	}
	if (enqueue_runnext(&e))
		return;
	if (wakeup_preempt(p, e.tctx, e.cpu, e.flags, e.runnext_slice != 0))
		return;
	queue_local(&e, slice_ns, 0, ST_ENQ_LOCAL);
}
