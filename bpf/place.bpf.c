/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Placement: a task's home node, the NUMA-aware idle pick, wakep (waking one idle CPU for new
 * work), and ops.select_cpu (runnext, or an idle proc of the home node; it notes which runners
 * wake others synchronously, for wakeup preemption).
 *
 * Invariant: a CPU handed back to the kernel as a direct dispatch target was picked from
 * p->cpus_ptr (ANDed with the procs), so SCX_DSQ_LOCAL there respects the task's mask.
 */

/*
 * Go's wakep(): wake one idle CPU of @node for new work, but only if no CPU kicked earlier is
 * still on its way (Go allows one new spinning M at a time). The kicked CPU clears the
 * pending mark when it reaches ops.dispatch, and may call wakep again if work remains, so
 * idle CPUs wake in a chain rather than a storm. A stale mark expires after
 * WAKEP_PENDING_NS so a lost kick cannot block wakeups.
 */
static void wakep(u32 node, const struct cpumask *allowed)
{
	u64 now = now_ns(), last;
	struct cpu_ctx *cctx;
	s32 cpu;

	node = node_idx(node);
	last = node_kick_at[node];
	if (last && now - last < WAKEP_PENDING_NS)
		return;
	/* Only procs are woken for shared work; a non-proc serves nothing but its own queue. */
	if (procs_subset)
		allowed = cast_mask(procs_mask);
	if (!allowed)
		return;
	cpu = numa_on ? __COMPAT_scx_bpf_pick_idle_cpu_node(allowed, node, 0) :
			scx_bpf_pick_idle_cpu(allowed, 0);
	if (cpu < 0)
		return;
	node_kick_at[node_idx(node_of(cpu))] = now;
	cctx = cpu_ctx(cpu);
	if (cctx)
		cctx->kicked = 1;
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
	stat_add(ST_KICK_IDLE, 1);
}

/* wakep over every online CPU, for callers without a task at hand. */
static void wakep_any(u32 node)
{
	const struct cpumask *online = scx_bpf_get_online_cpumask();

	wakep(node, online);
	scx_bpf_put_cpumask(online);
}

/*
 * Whether @p may run on node @n, judged by the node's representative CPU: a cpuset that
 * covers part of a node without it counts as outside, which costs that task only the memory
 * hint below, never a CPU.
 */
static __always_inline bool may_run_on_node(struct task_struct *p, u32 n)
{
	return n < nr_nodes && bpf_cpumask_test_cpu(node_rep_cpu[node_idx(n)], p->cpus_ptr);
}

/* The nodes @p's memory policy binds it to or prefers (numactl --membind/--preferred); 0: none. */
static __always_inline u64 policy_nodes(struct task_struct *p)
{
	struct mempolicy *mp = BPF_CORE_READ(p, mempolicy);
	u16 mode;

	if (!mp)
		return 0;
	mode = BPF_CORE_READ(mp, mode);
	if (mode != MPOL_BIND && mode != MPOL_PREFERRED && mode != MPOL_PREFERRED_MANY)
		return 0;
	return BPF_CORE_READ(mp, nodes.bits[0]);
}

/*
 * The node @p's cpuset confines its memory to (cpuset.mems of one node: a container or a pod
 * placed on a NUMA node), or 0 where it may allocate on several, which says nothing. Where
 * only one node has memory, every task is confined to it, and that says nothing either.
 */
static __always_inline u64 cpuset_node(struct task_struct *p)
{
	u64 bits;

	if (nr_mem_nodes < 2 || !bpf_core_field_exists(p->mems_allowed))
		return 0;
	bits = BPF_CORE_READ(p, mems_allowed.bits[0]);
	return bits & (bits - 1) ? 0 : bits;
}

/*
 * The node @p's memory is on, as far as the task says: the node its memory policy names, else
 * the one node its cpuset lets it allocate on; -1 if neither names one. The kernel's NUMA
 * balancing never scans sched_ext tasks (it runs from the fair class's tick), so these are
 * the signals a task's memory placement gives us. Memory on a node the task may not run on is
 * remote to every CPU it may use: no home to wait for, and no procs to grow there (a
 * container pinned to node 1 with its memory on node 0 spreads over its cpuset, instead of
 * queueing behind a home it can never reach).
 */
static s32 mem_node_of(struct task_struct *p)
{
	u64 bits = policy_nodes(p);
	u32 n;

	if (!bits)
		bits = cpuset_node(p);
	if (!bits)
		return -1;
	n = ilog2_u64(bits & -bits);  /* the lowest node of the mask */
	return may_run_on_node(p, n) ? (s32)n : -1;
}

static __always_inline bool away_from_home(struct task_ctx *tctx, u32 node)
{
	return numa_on && tctx && tctx->home_node >= 0 && tctx->home_node < nr_nodes &&
	       tctx->home_node != node;
}

/*
 * The home node follows the task once it has settled elsewhere (HOME_ADOPT_RUNS starts in a
 * row), unless its memory node (mem_node_of) or the kernel's NUMA balancing names a node:
 * then that node is home. Called as the task starts on @node.
 */
static void update_home(struct task_struct *p, struct task_ctx *tctx, s32 node)
{
	if (tctx->mem_node >= 0) {
		tctx->home_node = tctx->mem_node;
	} else if (numa_on && bpf_core_field_exists(p->numa_preferred_nid)) {
		s32 pref = BPF_CORE_READ(p, numa_preferred_nid);

		if (pref >= 0 && pref < nr_nodes)
			tctx->home_node = pref;
	}
	if (tctx->home_node < 0 || tctx->home_node == node) {
		tctx->home_node = node;
		tctx->away_runs = 0;
		stat_add(ST_NUMA_LOCAL, 1);
	} else {
		stat_add(ST_NUMA_REMOTE, 1);
		if (++tctx->away_runs >= HOME_ADOPT_RUNS) {
			tctx->home_node = node;
			tctx->away_runs = 0;
		}
	}
}

/* An idle proc of node @home that @p may use, claimed; -1 if there is none. */
static s32 idle_at_home(struct task_struct *p, s32 home)
{
	const struct cpumask *procs;
	s32 cpu;

	if (!procs_subset)
		return __COMPAT_scx_bpf_pick_idle_cpu_node(p->cpus_ptr, home, 0);
	/* Separate calls per mask kind: the verifier wants one pointer type per call site. */
	procs = cast_mask(procs_mask);
	if (!procs)
		return -1;
	cpu = __COMPAT_scx_bpf_pick_idle_cpu_node(procs, home, 0);
	if (cpu >= 0 && !bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
		/* Claimed but unusable for @p: wake it so it goes idle again properly. */
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		return -1;
	}
	return cpu;
}

/*
 * NUMA-aware idle pick among @allowed (procs, or the task's own mask when every CPU is a
 * proc): the home node first (the previous CPU, its LLC, then the node, in the kernel's
 * order), other nodes only when the home node has no idle CPU and the task would otherwise
 * queue behind at least numa_steal_min - 1 others there: a short wait at home is cheaper than
 * running every memory access remotely. A task without a home (new: it has not run yet, so
 * no memory is its own, and mem_node_of names no node) has no such trade to make, and
 * takes an idle CPU of any node at once, as the kernel balances forks over every node.
 * Returns a claimed idle CPU or a negative value.
 */
static s32 pick_idle(struct task_struct *p, s32 prev_cpu, u64 wake_flags, s32 home,
		     const struct cpumask *allowed)
{
	s32 hint = prev_cpu, cpu;
	u32 backlog;

	/* One node, or a new task: the kernel's order (prev_cpu's LLC and node first). */
	if (!numa_on || nr_nodes < 2 || home < 0)
		return scx_bpf_select_cpu_and(p, prev_cpu, wake_flags, allowed, 0);
	/* A task moved away by a steal goes home when home has room (hint: a home CPU). */
	if (home < nr_nodes && home != node_of(prev_cpu))
		hint = node_rep_cpu[node_idx(home)];
	cpu = scx_bpf_select_cpu_and(p, hint, wake_flags, allowed, SCX_PICK_IDLE_IN_NODE);
	if (cpu >= 0)
		return cpu;
	backlog = scx_bpf_dsq_nr_queued(shared_dsq(node_of(hint)));
	if ((u32)hint < nr_cpus)
		backlog += scx_bpf_dsq_nr_queued(hint);
	if (backlog + 1 < numa_steal_min)
		return -1;
	return scx_bpf_select_cpu_and(p, hint, wake_flags, allowed, 0);
}

/*
 * Whether @p and its waker @cur hand off to each other (a pipe's two ends): @cur was itself
 * last woken through runnext by @p. A pair's waker sleeps as it wakes its partner, so the
 * partner may skip the steal-visible queue (enqueue_runnext). One waker and many wakees (a
 * hackbench sender) is not a pair: its wakees must stay where idle CPUs can steal them.
 */
static __always_inline void note_runnext_pair(struct task_struct *cur, struct task_struct *p,
					      struct task_ctx *tctx)
{
	struct task_ctx *wctx = task_ctx(cur);

	tctx->runnext_pair = wctx && wctx->runnext_waker == p->pid;
	tctx->runnext_waker = cur->pid;
}

/*
 * Whether @cur, the task current on the CPU of @cctx, is that CPU's scx_gmp runner and not
 * @p: a task waking @p from its own context (a pipe write, a futex wake).
 */
static __always_inline bool runner_wakes(struct cpu_ctx *cctx, struct task_struct *cur,
					 struct task_struct *p)
{
	return cctx && cur && cctx->running_pid == cur->pid && cur->pid != p->pid;
}

/*
 * runnext: a synchronous wakeup by the scx_gmp task running here. The wakee goes to the head
 * of this CPU's queue, or a pair's into its local DSQ (ops.enqueue puts it there), and
 * inherits the waker's remaining slice, so a chain of hand-offs shares one slice and cannot
 * hold the queue head for longer than slice_ns. Returns this CPU, or -1 if the wakeup does
 * not qualify. Either way a synchronous waker running here is marked (runner_woke).
 */
static __always_inline s32 select_runnext(struct task_struct *p, struct task_ctx *tctx,
					  u64 wake_flags)
{
	struct task_struct *cur;
	struct cpu_ctx *cctx;
	s32 this_cpu;

	if (!(wake_flags & SCX_WAKE_SYNC))
		return -1;
	cur = bpf_get_current_task_btf();
	this_cpu = bpf_get_smp_processor_id();
	cctx = cpu_ctx(this_cpu);
	if (!runner_wakes(cctx, cur, p))
		return -1;
	/* The runner passes messages: its burst is not a spinner's (runner_turned_hog). */
	cctx->runner_woke = 1;
	if (!runnext_on || !tctx || cur->scx.slice < RUNNEXT_MIN_NS || !is_proc(this_cpu) ||
	    !bpf_cpumask_test_cpu(this_cpu, p->cpus_ptr))
		return -1;
	tctx->runnext_slice = cur->scx.slice;
	note_runnext_pair(cur, p, tctx);
	return this_cpu;
}

/*
 * An idle CPU for @p among the procs it may use (claimed), or a negative value. A task
 * allowed on no proc (a container's cpuset outside them) has its cpuset for a processor set:
 * an idle CPU of it, so that the cpuset's work spreads over the cpuset as it would under the
 * kernel's scheduler, instead of queueing on the one CPU it woke on. proc_for() is asked
 * only once no idle proc was found, off the common path.
 */
static __always_inline s32 select_idle(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
				       s32 home)
{
	const struct cpumask *procs;
	s32 cpu;

	if (!procs_subset)
		return pick_idle(p, prev_cpu, wake_flags, home, p->cpus_ptr);
	/* select_cpu_and() ANDs procs with p->cpus_ptr: only a proc can be picked. */
	procs = cast_mask(procs_mask);
	if (!procs)
		return -1;
	cpu = pick_idle(p, prev_cpu, wake_flags, home, procs);
	if (cpu >= 0 || proc_for(p) >= 0)
		return cpu;
	return pick_idle(p, prev_cpu, wake_flags, home, p->cpus_ptr);
}

s32 BPF_STRUCT_OPS(gmp_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	struct task_ctx *tctx = task_ctx(p);
	s32 cpu, home = tctx ? tctx->home_node : -1;

	/* A new task bound to a node's memory (numactl) has that home before its first run. */
	if (home < 0 && numa_on && nr_nodes > 1)
		home = mem_node_of(p);
	cpu = select_runnext(p, tctx, wake_flags);
	if (cpu >= 0)
		return cpu;
	cpu = select_idle(p, prev_cpu, wake_flags, home);
	if (cpu < 0 || test_stall)
		return cpu < 0 ? prev_cpu : cpu;

	/* The kernel claimed an idle CPU from p->cpus_ptr (and procs): run there now. */
	scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_ns, 0);
	stat_add(ST_ENQ_DIRECT_IDLE, 1);
	stat_add_on(cpu, home < 0 || node_of(cpu) == home ? ST_PLACE_HOME : ST_PLACE_REMOTE, 1);
	return cpu;
}
