/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sysmon: Go's retake() as a BPF timer, and each CPU's turn timer. A pass preempts CPUs
 * whose task ran past its deadline while work waits (the backstop for a lost tick), kicks
 * CPUs that sleep on a queued task (lost wakeups), wakes a proc for shared work nobody will
 * come for, samples queue lengths for the loader, marks stale shared queues for the fair
 * tick, sums the per-CPU counters, scans queue heads for the starvation warning, and tracks
 * saturation for --procs auto.
 *
 * Cost: one pass every SYSMON_PERIOD_NS (or --sysmon-us) at any load, visiting each CPU once
 * and writing only sysmon's own arrays, so the work per CPU per second is fixed. A turn whose
 * deadline must be exact is preempted by its own CPU's turn timer, locally.
 */

/* The pass period: --sysmon-us, or SYSMON_PERIOD_NS. */
static __always_inline u64 sysmon_period_ns(void)
{
	if (!sysmon_ns)
		return SYSMON_PERIOD_NS;
	return sysmon_ns > SYSMON_MIN_NS ? sysmon_ns : SYSMON_MIN_NS;
}

/*
 * Starvation scan: the head of @dsq_id has waited longest there; note it in @slot's record.
 * The DSQ iterator needs an RCU read-side section, which 6.16's verifier does not assume in
 * this timer callback, so the section is taken here.
 */
static void note_head_wait(u64 dsq_id, u64 now, s32 slot)
{
	struct task_struct *p;

	bpf_rcu_read_lock();
	bpf_for_each(scx_dsq, p, dsq_id, 0) {
		struct task_ctx *tctx = task_ctx(p);

		if (tctx && tctx->ready_at && now > tctx->ready_at)
			note_wait(slot, p, now - tctx->ready_at, 1);
		break;
	}
	bpf_rcu_read_unlock();
}

/*
 * A task queued for an idle CPU runs as soon as that CPU reschedules, which the enqueue's
 * kick asks for. That wakeup can be lost: the kernel queues a CPU's hotplug thread in its
 * local DSQ without calling ops.enqueue, and a task ops.enqueue puts in a CPU's own queue
 * lands there only after enqueue tested the CPU's idle bit (docs/kernel-notes.md). So a CPU
 * found with no scx_gmp task running and a task in its local DSQ or own queue on two passes
 * in a row is kicked again; SCX_KICK_IDLE makes that a no-op unless the CPU is idle.
 */
static void rescue_local(u32 cpu, u64 since, s32 nq)
{
	u32 c = cpu_idx(cpu);
	s32 lq;

	if (since) {
		stuck_passes[c] = 0;
		return;
	}
	lq = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);
	if (lq <= 0 && nq <= 0) {
		stuck_passes[c] = 0;
		return;
	}
	if (++stuck_passes[c] < 2)
		return;
	stuck_passes[c] = 0;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_add(ST_KICK_STUCK, 1);
}

/*
 * For --procs auto: the loader grows the set as soon as saturated_ns passes its threshold,
 * rather than at its once-a-second check, so a burst of work does not queue for a second on
 * a set that shrank while the machine was quiet. A change of the set starts the count over.
 */
static void note_saturation(u64 now, bool waiting)
{
	u32 n, busy = 0, procs = 0;

	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		busy += busy_procs[n];
		procs += node_procs[n];
	}
	if (!waiting || !procs || busy < procs || procs_mask_gen != procs_gen) {
		saturated_at = 0;
		saturated_ns = 0;
		return;
	}
	if (!saturated_at)
		saturated_at = now;
	saturated_ns = now - saturated_at;
}

/*
 * What one sysmon pass carries from CPU to CPU. A global of sysmon's own rather than a stack
 * variable, so that the per-node and per-CPU steps can be global functions taking only
 * scalars. Safe because one pass runs at a time: sysmon_fn re-arms the timer only at its end,
 * and an hrtimer re-armed from its own callback stays on that CPU, so the next expiry runs
 * after this callback returns, never beside it.
 */
struct sysmon_pass {
	u64 now;
	u64 vtime_max;      /* the highest vtime_max seen so far */
	s64 runnable;       /* the sum of runnable_delta so far */
	s32 budget[MAX_NODES]; /* shared tasks per node not yet given a preempted CPU */
	s32 self;           /* this CPU: the slot for starvation records */
	bool scan;          /* look at queue heads for the starvation warning */
	bool waiting_any;   /* some queue holds a task */
};

struct sysmon_pass sysmon_pass;

/*
 * Whether node @n's shared queue is stale: its head has waited FAIR_TICK_MAX_NS. Stored only
 * when it changes, so the procs reading it in ops.dispatch keep their copy of the line.
 */
static void mark_stale(struct sysmon_pass *sp, u32 n)
{
	u64 wait;
	u8 stale;

	bpf_rcu_read_lock();
	wait = head_wait_ns(shared_dsq(n), sp->now);
	bpf_rcu_read_unlock();
	stale = wait >= FAIR_TICK_MAX_NS;
	if (shared_stale[node_idx(n)] != stale)
		shared_stale[node_idx(n)] = stale;
}

/*
 * Tasks in node @n's shared queue that no proc may run: queued there before the set shrank
 * away from their cpuset. Non-procs never serve the shared queues, so without this they
 * waited for the watchdog. Each goes to its own CPU's queue, where a non-proc serves it (its
 * CPU, or another of its mask: the cpu_dsq invariant), and that CPU is kicked. Looks at the
 * first STRANDED_LOOKS tasks a pass; the rest move up as those leave. Only while some CPU is
 * not a proc (procs_subset): otherwise every task may run on a proc.
 */
static void rescue_stranded(u32 n)
{
	struct task_struct *p;
	u32 seen = 0;
	s32 c;

	bpf_rcu_read_lock();
	bpf_for_each(scx_dsq, p, shared_dsq(n), 0) {
		if (++seen > STRANDED_LOOKS)
			break;
		if (proc_for(p) >= 0)
			continue;
		c = scx_bpf_task_cpu(p);
		if (!bpf_cpumask_test_cpu(c, p->cpus_ptr))
			c = bpf_cpumask_any_distribute(p->cpus_ptr);
		if (c < 0 || c >= nr_cpus)
			continue;
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, c, 0)) {
			scx_bpf_kick_cpu(c, SCX_KICK_IDLE);
			stat_add(ST_ENQ_STRANDED, 1);
		}
	}
	bpf_rcu_read_unlock();
}

/*
 * Node @n's part of a pass, before the CPU walk: sample its shared queue, reset its busy
 * counts, mark it stale, rescue stranded tasks, scan its head. Global: the verifier checks
 * it once rather than once per path through the pass. Returns 0 for a node past the arrays.
 */
__noinline int sysmon_scan_node(u32 n)
{
	struct sysmon_pass *sp = &sysmon_pass;
	s32 q;

	if (n >= MAX_NODES || n >= nr_nodes)
		return 0;
	q = scx_bpf_dsq_nr_queued(shared_dsq(n));
	if (q < 0)
		q = 0;
	sp->budget[node_idx(n)] = q;
	shared_queued[node_idx(n)] = q;
	busy_procs[node_idx(n)] = 0;
	away_running[node_idx(n)] = 0;
	if (q)
		sp->waiting_any = true;
	if (q || shared_stale[node_idx(n)])
		mark_stale(sp, n);
	if (q && procs_subset)
		rescue_stranded(n);
	if (q && sp->scan)
		note_head_wait(shared_dsq(n), sp->now, sp->self);
	return 1;
}

/*
 * Preempt @cpu's task now, as sysmon: the turn that started at @since. The kick zeroes the
 * slice of whatever runs when it lands; ops.stopping tells that turn from a newer one by
 * @since (stale_kick).
 */
static __always_inline void sysmon_kick(u32 cpu, struct cpu_ctx *cctx, u64 since)
{
	cctx->kick_since = since;
	cctx->kick_at = now_ns();
	scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	stat_add(ST_KICK_PREEMPT, 1);
}

/* A task runs on @node away from its memory node: count it there. */
static __always_inline void note_away(struct cpu_ctx *cctx, u32 node)
{
	s32 m = cctx->running_mem_node;

	if (m >= 0 && m < nr_nodes && m != node)
		away_running[node_idx(m)]++;
}

/*
 * Publish the tasks away from their memory node for the nodes whose procs are all busy (or
 * that have none): a node with an idle proc takes its tasks home by itself (send_home).
 * After the CPU walk, so that busy_procs is complete.
 */
static __always_inline void publish_homeless(void)
{
	u32 n, v;

	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		v = busy_procs[n] >= node_procs[n] ? away_running[n] : 0;
		if (homeless_running[n] != v)
			homeless_running[n] = v;
	}
}

/* Fold @cctx's counters into the pass's sums (reads only: the line stays its CPU's). */
static __always_inline void sum_counters(struct sysmon_pass *sp, struct cpu_ctx *cctx)
{
	sp->runnable += cctx->runnable_delta;
	if (cctx->vtime_max > sp->vtime_max)
		sp->vtime_max = cctx->vtime_max;
}

/*
 * One CPU's check: sample its queue and counters, rescue a lost wakeup, move a misplaced
 * runner off a non-proc, and preempt a runner past its deadline while work waits for this
 * CPU (its own queue, or its node's shared queue, one CPU per waiting shared task). Global,
 * like sysmon_scan_node. Returns 0 when the walk must stop (a CPU id past the arrays).
 */
__noinline int sysmon_check_cpu(u32 cpu)
{
	struct sysmon_pass *sp = &sysmon_pass;
	struct cpu_ctx *cctx;
	u64 since, ran, limit;
	u32 node;
	bool waits;
	s32 nq;

	if (cpu >= nr_cpus)
		return 0;
	cctx = cpu_ctx(cpu);
	node = node_of(cpu);
	if (!cctx || node >= MAX_NODES)
		return 0;
	nq = scx_bpf_dsq_nr_queued(cpu);
	cpu_queued[cpu_idx(cpu)] = nq > 0 ? nq : 0;
	sum_counters(sp, cctx);
	node = node_idx(node);
	if (nq > 0 && sp->scan)
		note_head_wait(cpu, sp->now, sp->self);
	since = cctx->running_since;
	rescue_local(cpu, since, nq);
	/* A task that may run on a proc leaves a non-proc at once (set shrank under it). */
	if (since && cctx->running_misplaced) {
		cctx->running_misplaced = 0;
		sysmon_kick(cpu, cctx, since);
		return 1;
	}
	if (since && is_proc(cpu))
		busy_procs[node]++;
	if (since)
		note_away(cctx, node);
	/* Non-procs never serve the shared queues, so only their own queue waits on them. */
	waits = nq > 0 || (is_proc(cpu) && node < nr_nodes && sp->budget[node] > 0);
	if (nq > 0)
		sp->waiting_any = true;
	if (!since || !waits || sp->now <= since)
		return 1;
	ran = sp->now - since;
	limit = cctx->run_limit_ns ? cctx->run_limit_ns : preempt_ns;
	if (ran >= limit) {
		if (nq <= 0)
			sp->budget[node]--;
		sysmon_kick(cpu, cctx, since);
	}
	return 1;
}

/*
 * Shared work that no proc will come for: every proc of node @n is idle (a wakeup was lost,
 * or a non-proc evicted the tasks there), or the node has no proc left after the set shrank.
 * Wake an idle proc, of that node first; steal() lets a proc take a proc-less node's queue at
 * once. This bounds any shared-queue wait by sysmon's period. Global, like sysmon_scan_node.
 */
__noinline int sysmon_rescue_node(u32 n)
{
	if (n >= MAX_NODES || n >= nr_nodes)
		return 0;
	if (sysmon_pass.budget[node_idx(n)] <= 0 || busy_procs[node_idx(n)])
		return 1;
	/* wakep reads the procs_mask kptr: 6.16 wants an explicit RCU section. */
	bpf_rcu_read_lock();
	wakep_any(n);
	bpf_rcu_read_unlock();
	return 1;
}

/* Publish the pass's sums: what cg_factor and ops.runnable read between passes. */
static __always_inline void publish_sums(struct sysmon_pass *sp)
{
	if (nr_runnable_total != sp->runnable)
		nr_runnable_total = sp->runnable;
	if (vclock != sp->vtime_max)
		vclock = sp->vtime_max;
}

/*
 * A turn's exact deadline (arm_turn_timer), on the CPU running it: preempt the turn if it is
 * still the one the timer was armed for and work waits for this CPU. Otherwise the tick ends
 * the turn with its slice, and sysmon's pass is the backstop.
 */
static int turn_timer_fn(void *map, int *key, struct turn_timer *tt)
{
	s32 cpu = bpf_get_smp_processor_id();
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	bool waits;

	stat_add(ST_TURN_TIMER, 1);
	/* A timer pinned to a CPU that went offline runs elsewhere: not that CPU's turn. */
	if (!cctx || cpu != *key || !cctx->running_since || cctx->running_since != tt->since)
		return 0;
	waits = scx_bpf_dsq_nr_queued(cpu) > 0 ||
		(is_proc(cpu) && scx_bpf_dsq_nr_queued(shared_dsq(node_of(cpu))) > 0);
	if (waits)
		sysmon_kick(cpu, cctx, tt->since);
	return 0;
}

/*
 * Start a pass: its time, its sums at zero, and whether it scans queue heads for the
 * starvation warning. budget[] needs no reset: sysmon_scan_node writes it for every node
 * below nr_nodes before the CPU walk, and no step reads a node at or past nr_nodes.
 */
static __always_inline void begin_pass(struct sysmon_pass *sp)
{
	sp->now = now_ns();
	sp->vtime_max = 0;
	sp->runnable = 0;
	sp->self = bpf_get_smp_processor_id();
	sp->waiting_any = false;
	sp->scan = false;
	if (starve_warn_ns && sp->now - starve_scan_at >= STARVE_SCAN_NS) {
		starve_scan_at = sp->now;
		sp->scan = true;
	}
}

static int sysmon_fn(void *map, int *key, struct bpf_timer *timer)
{
	struct sysmon_pass *sp = &sysmon_pass;
	u32 cpu, n, visited = 0;

	stat_add(ST_SYSMON_RUNS, 1);
	sync_procs_mask();
	begin_pass(sp);
	bpf_for(n, 0, nr_nodes) {
		if (!sysmon_scan_node(n))
			break;
	}
	bpf_for(cpu, 0, nr_cpus) {
		if (!sysmon_check_cpu(cpu))
			break;
		visited++;
	}
	stat_add(ST_SYSMON_VISITS, visited);
	publish_sums(sp);
	publish_homeless();
	note_saturation(sp->now, sp->waiting_any);
	bpf_for(n, 0, nr_nodes) {
		if (!sysmon_rescue_node(n))
			break;
	}
	bpf_timer_start(timer, sysmon_period_ns(), 0);
	stat_add(ST_SYSMON_NS, now_ns() - sp->now);
	return 0;
}
