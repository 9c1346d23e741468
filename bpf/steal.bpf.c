/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Moving queued tasks between CPUs: Go's stealWork (victim search, steal half), the
 * cross-node take from another node's shared queue, and evicting tasks from a non-proc.
 *
 * Invariant: a task moves only to a CPU in its mask (steal_from checks the thief against
 * p->cpus_ptr; scx_bpf_dsq_move_to_local skips tasks the consuming CPU may not run).
 * The functions that walk a DSQ are global (__noinline), so the verifier checks each walk
 * once instead of once per path through ops.dispatch.
 */

/* The state of the task at the head of @dsq_id; NULL if the queue is empty. */
static struct task_ctx *head_tctx(u64 dsq_id)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, dsq_id, 0)
		return task_ctx(p);
	return NULL;
}

/* How long the task at the head of @dsq_id has waited; 0 if the queue is empty. */
static u64 head_wait_ns(u64 dsq_id, u64 now)
{
	struct task_ctx *tctx = head_tctx(dsq_id);

	return tctx && tctx->ready_at && now > tctx->ready_at ? now - tctx->ready_at : 0;
}

/*
 * The state of the task at the head of @dsq_id if it may leave its node; NULL if the queue is
 * empty or the head has a memory node (mem_node_of: it must not be pulled from its memory).
 */
static struct task_ctx *movable_head(u64 dsq_id)
{
	struct task_ctx *tctx = head_tctx(dsq_id);

	return tctx && tctx->mem_node < 0 ? tctx : NULL;
}

/* Move up to half of @victim's queue to @cpu: the first task to run now, the rest queued. */
__noinline u32 steal_from(s32 cpu, s32 victim)
{
	struct cpu_ctx *vctx = cpu_ctx(victim), *cctx = cpu_ctx(cpu);
	struct task_struct *p;
	s32 runnext_pid, nq;
	u32 want, moved;

	if (!vctx || !cctx)
		return 0;
	nq = scx_bpf_dsq_nr_queued(victim);
	if (nq <= 0)
		return 0;
	want = ((u32)nq + 1) / 2;
	if (want > steal_max)
		want = steal_max;
	runnext_pid = vctx->runnext_pid;

	/*
	 * The count lives in memory, not in a register: as a register constant the verifier
	 * would walk the loop once per value; loaded from memory it is an unknown it checks once.
	 * The walk is bounded by the queue's length and by want.
	 */
	cctx->steal_moved = 0;
	bpf_for_each(scx_dsq, p, victim, 0) {
		u64 target;

		/* The victim's runnext task runs next there; Go leaves it alone too. */
		if (runnext_pid && p->pid == runnext_pid && nq > 1)
			continue;
		/* Respect the task's CPU mask: only tasks allowed on the thief move. */
		if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr) || is_migration_disabled(p))
			continue;
		/* The first task runs now; the rest wait in the thief's own queue. */
		target = cctx->steal_moved ? (u64)cpu : SCX_DSQ_LOCAL;
		if (!scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, target, 0))
			continue;
		if (++cctx->steal_moved >= want)
			break;
	}
	moved = cctx->steal_moved;
	if (moved)
		stat_add_on(victim, ST_STOLEN_OUT, moved);
	return moved;
}

/* Steal from @victim if there is one; count the event as @stat. */
static __always_inline bool steal_counted(s32 cpu, s32 victim, u32 stat)
{
	u32 moved;

	if (victim < 0 || !(moved = steal_from(cpu, victim)))
		return false;
	stat_add(stat, 1);
	stat_add(ST_STOLEN_TASKS, moved);
	return true;
}

/*
 * Look at up to @looks CPUs of steal_order[@first, @first + @len) from a random point (Go's
 * stealWork order) and steal from the first with at least @min_nq queued from which a steal
 * moves anything. A victim whose queue holds only tasks the thief may not run (pinned ones)
 * costs one walk of its queue and the search goes on. CPUs of @skip_llc (already looked at
 * in the LLC ring) are passed over without counting. Lengths are read without the victims'
 * locks: a stale one costs one empty steal_from.
 */
static __always_inline bool steal_ring(s32 cpu, u32 first, u32 len, u32 looks, s32 min_nq,
				       u32 skip_llc, u32 stat)
{
	u32 i, k, v, start;

	if (!len)
		return false;
	if (looks > len)
		looks = len;
	start = bpf_get_prandom_u32() % len;
	bpf_for(i, 0, looks) {
		k = start + i;
		if (k >= len)
			k -= len;
		k += first;
		if (k >= MAX_CPUS)
			break;
		v = steal_order[k];
		if (v == (u32)cpu || v >= nr_cpus || v >= MAX_CPUS || cpu_llc[v] == skip_llc)
			continue;
		stat_add(ST_STEAL_LOOKS, 1);
		if (scx_bpf_dsq_nr_queued(v) < min_nq)
			continue;
		if (steal_counted(cpu, v, stat))
			return true;
	}
	return false;
}

/*
 * Another node's shared queue, when its backlog pays for remote memory, when its head has
 * waited LAG_SLICES slices (so an imbalance of one task cannot starve it for long), or when
 * that node has no proc to serve it.
 */
static __always_inline bool steal_remote_shared(u32 node)
{
	u32 n;

	bpf_for(n, 0, nr_nodes) {
		s32 nq;

		if (n == node || n >= MAX_NODES)
			continue;
		nq = scx_bpf_dsq_nr_queued(shared_dsq(n));
		if (nq <= 0)
			continue;
		if ((nq >= (s32)numa_steal_min || !node_procs[node_idx(n)] ||
		     head_wait_ns(shared_dsq(n), now_ns()) >= LAG_SLICES * slice_ns) &&
		    scx_bpf_dsq_move_to_local(shared_dsq(n), 0)) {
			stat_add(ST_DISP_STEAL_REMOTE, 1);
			stat_add(ST_STOLEN_TASKS, 1);
			return true;
		}
	}
	return false;
}

/*
 * Go's stealWork, topology-aware and bounded: a few CPUs of this LLC, then of the rest of the
 * node, then of one other node (if its queue pays for remote memory), then other nodes' shared
 * queues. The looks per attempt do not grow with the CPU count (STEAL_LOOKS_*); an idle CPU
 * comes back on its next dispatch, and wakep sends one where work is queued, so a missed victim
 * is found on a later attempt rather than by scanning every CPU each time.
 */
__noinline int steal(s32 cpu, u32 node)
{
	u32 c = cpu_idx(cpu), llc = cpu_llc[c], other;
	struct steal_ring r = steal_rings[c];

	stat_add(ST_STEAL_TRIES, 1);
	if (steal_ring(cpu, r.llc_first, r.llc_len, STEAL_LOOKS_LLC, 1, (u32)-1,
		       ST_DISP_STEAL_LLC) ||
	    steal_ring(cpu, r.node_first, r.node_len, STEAL_LOOKS_NODE, 1, llc,
		       ST_DISP_STEAL_NODE))
		return 1;
	if (nr_nodes > 1) {
		other = bpf_get_prandom_u32() % (nr_nodes - 1);
		if (other >= node)
			other++;
		r = steal_rings[cpu_idx(node_rep_cpu[node_idx(other)])];
		if (steal_ring(cpu, r.node_first, r.node_len, STEAL_LOOKS_REMOTE,
			       (s32)numa_steal_min, (u32)-1, ST_DISP_STEAL_REMOTE))
			return 1;
	}
	return steal_remote_shared(node);
}

/*
 * A non-proc's queue may hold tasks that could run on a proc (queued before the set shrank):
 * move them to a proc's node queue. Bounded by the queue's length and steal_max.
 */
__noinline u32 evict_from(s32 cpu)
{
	struct cpu_ctx *cctx = cpu_ctx(cpu);
	struct task_struct *p;
	u32 to_node = 0;

	if (!cctx)
		return 0;
	cctx->steal_moved = 0;
	bpf_for_each(scx_dsq, p, cpu, 0) {
		s32 pc;

		if (p->nr_cpus_allowed == 1 || is_migration_disabled(p))
			continue;
		pc = proc_for(p);
		/* pc is in p->cpus_ptr, so the task may run on a CPU of that node's queue. */
		if (pc < 0 || !scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, shared_dsq(node_of(pc)), 0))
			continue;
		to_node = node_of(pc);
		if (++cctx->steal_moved >= steal_max)
			break;
	}
	if (cctx->steal_moved) {
		stat_add(ST_EVICTED, cctx->steal_moved);
		/* A proc must come for them; sysmon wakes one for any other node they went to. */
		wakep_any(to_node);
	}
	return cctx->steal_moved;
}
