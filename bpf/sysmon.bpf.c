/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sysmon: Go's retake() as a BPF timer. Each pass preempts CPUs whose task ran past its
 * deadline while work waits, kicks CPUs that sleep on a queued task (lost wakeups), wakes a
 * proc for shared work nobody will come for, samples queue lengths for the loader, scans
 * queue heads for the starvation warning, and tracks saturation for --procs auto.
 *
 * Adaptive period: it sleeps until the earliest running task could reach its deadline, and
 * doubles its sleep up to SYSMON_MAX_NS while nothing waits.
 */

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
static void rescue_local(u32 cpu, struct cpu_ctx *cctx, u64 since, s32 nq)
{
	s32 lq = scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL_ON | cpu);

	if (since || (lq <= 0 && nq <= 0)) {
		cctx->stuck_passes = 0;
		return;
	}
	if (++cctx->stuck_passes < 2)
		return;
	cctx->stuck_passes = 0;
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

/* What one sysmon pass carries from CPU to CPU. */
struct sysmon_pass {
	u64 now;
	u64 next;           /* ns until the earliest deadline of a running task */
	s32 budget[MAX_NODES]; /* shared tasks per node not yet given a preempted CPU */
	s32 self;           /* this CPU: the slot for starvation records */
	bool scan;          /* look at queue heads for the starvation warning */
	bool waiting_any;   /* some queue holds a task */
};

/* Sample every node's shared queue; reset the per-node busy counts. */
static __always_inline void scan_shared(struct sysmon_pass *sp)
{
	u32 n;

	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		s32 q = scx_bpf_dsq_nr_queued(shared_dsq(n));

		if (q < 0)
			q = 0;
		sp->budget[node_idx(n)] = q;
		shared_queued[node_idx(n)] = q;
		busy_procs[node_idx(n)] = 0;
		if (q)
			sp->waiting_any = true;
		if (q && sp->scan)
			note_head_wait(shared_dsq(n), sp->now, sp->self);
	}
}

/* Preempt @cpu's task now, as sysmon. */
static __always_inline void sysmon_kick(u32 cpu, struct cpu_ctx *cctx)
{
	cctx->sysmon_kicked = 1;
	scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
	stat_add(ST_KICK_PREEMPT, 1);
}

/*
 * One CPU's check: sample its queue, rescue a lost wakeup, move a misplaced runner off a
 * non-proc, and preempt a runner past its deadline while work waits for this CPU (its own
 * queue, or its node's shared queue, one CPU per waiting shared task). Returns false when
 * the walk must stop (a CPU id past the arrays).
 */
static __always_inline bool check_cpu(struct sysmon_pass *sp, u32 cpu)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	u32 node = node_of(cpu);
	s32 nq = scx_bpf_dsq_nr_queued(cpu);
	u64 since, ran, limit;
	bool waits;

	if (!cctx || node >= MAX_NODES)
		return false;
	cctx->queued = nq > 0 ? nq : 0;
	node = node_idx(node);
	if (nq > 0 && sp->scan)
		note_head_wait(cpu, sp->now, sp->self);
	since = cctx->running_since;
	rescue_local(cpu, cctx, since, nq);
	/* A task that may run on a proc leaves a non-proc at once (set shrank under it). */
	if (since && cctx->running_misplaced) {
		cctx->running_misplaced = 0;
		sysmon_kick(cpu, cctx);
		return true;
	}
	if (since && is_proc(cpu))
		busy_procs[node]++;
	/* Non-procs never serve the shared queues, so only their own queue waits on them. */
	waits = nq > 0 || (is_proc(cpu) && node < nr_nodes && sp->budget[node] > 0);
	if (nq > 0)
		sp->waiting_any = true;
	if (!since || !waits || sp->now <= since)
		return true;
	ran = sp->now - since;
	limit = cctx->run_limit_ns ? cctx->run_limit_ns : preempt_ns;
	if (ran >= limit) {
		if (nq <= 0)
			sp->budget[node_idx(node)]--;
		sysmon_kick(cpu, cctx);
	} else if (limit - ran < sp->next) {
		sp->next = limit - ran;
	}
	return true;
}

/*
 * Shared work that no proc will come for: every proc of its node is idle (a wakeup was lost,
 * or a non-proc evicted the tasks there), or the node has no proc left after the set shrank.
 * Wake an idle proc, of that node first; steal() lets a proc take a proc-less node's queue at
 * once. This bounds any shared-queue wait by sysmon's period.
 */
static __always_inline void rescue_shared(struct sysmon_pass *sp)
{
	u32 n;

	bpf_for(n, 0, nr_nodes) {
		if (n >= MAX_NODES)
			break;
		if (sp->budget[n] > 0 && !busy_procs[n]) {
			/* wakep reads the procs_mask kptr: 6.16 wants an explicit RCU section. */
			bpf_rcu_read_lock();
			wakep_any(n);
			bpf_rcu_read_unlock();
		}
	}
}

/* Arm the next pass: the fixed period, the earliest deadline, or a doubled idle sleep. */
static __always_inline void sysmon_schedule(struct sysmon_pass *sp, struct bpf_timer *timer)
{
	u64 next = sp->next;

	if (sysmon_ns) {
		next = sysmon_ns;
	} else if (!sp->waiting_any) {
		next = sysmon_interval_ns * 2;
		if (next > SYSMON_MAX_NS)
			next = SYSMON_MAX_NS;
	}
	if (next < SYSMON_MIN_NS)
		next = SYSMON_MIN_NS;
	sysmon_interval_ns = next;
	sysmon_next_at = sp->now + next;
	bpf_timer_start(timer, next, 0);
}

static int sysmon_fn(void *map, int *key, struct bpf_timer *timer)
{
	struct sysmon_pass sp = {
		.now = now_ns(),
		.next = SYSMON_MAX_NS,
		.self = bpf_get_smp_processor_id(),
	};
	u32 cpu;

	stat_add(ST_SYSMON_RUNS, 1);
	sync_procs_mask();
	if (starve_warn_ns && sp.now - starve_scan_at >= STARVE_SCAN_NS) {
		starve_scan_at = sp.now;
		sp.scan = true;
	}
	scan_shared(&sp);
	bpf_for(cpu, 0, nr_cpus) {
		if (!check_cpu(&sp, cpu))
			break;
	}
	note_saturation(sp.now, sp.waiting_any);
	rescue_shared(&sp);
	sysmon_schedule(&sp, timer);
	return 0;
}
