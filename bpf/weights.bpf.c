/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Priorities: nice and cgroup cpu.weight as slice factors, and the cgroup ops.
 *
 * cgroup cpu.weight is CFS's semantics flattened into one factor per task. A cgroup is
 * active while a task in it or below it is runnable. Each cgroup's child_weight_sum adds the
 * weights of its active children and WEIGHT_ONE per runnable task directly in it (tasks
 * compete with sibling cgroups as nice-0 entities, as in CFS). A task's share of the machine
 * is the product, down its path, of weight / parent's child_weight_sum; times the number of
 * runnable tasks it becomes a slice factor (1.0 when everyone is equal).
 *
 * Each CPU holds the count changes of one cgroup and folds them into the cgroup's shared
 * counters now and then (cg_hold), so a wakeup does not take the cgroup's cache line from
 * every CPU. The counts steer slice lengths only, which stay within [SLICE_MIN_NS,
 * TURN_MAX_NS] whatever they read, so a count that lags cannot make any task wait longer
 * than the turn bounds allow.
 */

static struct cgrp_ctx *cgrp_ctx(struct cgroup *cg)
{
	u64 id = cg->kn->id;

	return bpf_map_lookup_elem(&cgrp_ctxs, &id);
}

/* The state of @cg's ancestor at @level (@cg itself at its own level). */
static struct cgrp_ctx *cg_level_ctx(struct cgroup *cg, u32 level)
{
	struct cgroup *anc = bpf_cgroup_ancestor(cg, level);
	struct cgrp_ctx *c;

	if (!anc)
		return NULL;
	c = cgrp_ctx(anc);
	bpf_cgroup_release(anc);
	return c;
}

static __always_inline u64 cg_weight(struct cgrp_ctx *c)
{
	return c->weight ? c->weight : WEIGHT_ONE;
}

/*
 * Add @n runnable tasks (negative: gone quiescent) to cgroup @cg, each weighing @amount in its
 * child_weight_sum (WEIGHT_ONE; a child cgroup's weight when @n counts active children), and,
 * where that turns it active (a count above 0) or idle, to its parents. Folds from several
 * CPUs reach a count in any order, so it may cross 0 back and forth and dip below it for a
 * while; each fold's atomic add returns the count before it, so every crossing is seen once,
 * and the parents' sums agree with the counts once every CPU has folded.
 */
static void cg_account(struct cgroup *cg, s64 n, s64 amount)
{
	u32 top = cg->level, i;
	s64 prev;
	bool was, now;

	if (top > MAX_CG_DEPTH)
		top = MAX_CG_DEPTH;
	bpf_for(i, 0, MAX_CG_DEPTH + 1) {
		struct cgrp_ctx *c;

		if (i > top)
			break;
		c = cg_level_ctx(cg, top - i);
		if (!c)
			break;
		__sync_fetch_and_add(&c->child_weight_sum, n * amount);
		prev = __sync_fetch_and_add(&c->nr_active, n);
		was = prev > 0;
		now = prev + n > 0;
		/* Only a cgroup turning active or idle changes its parent. */
		if (was == now)
			break;
		n = now ? 1 : -1;
		amount = cg_weight(c);
	}
}

/* cg_account for the cgroup of id @cgid, if it still exists (its state goes with it). */
static void cg_account_id(u64 cgid, s64 n)
{
	struct cgroup *cg = bpf_cgroup_from_id(cgid);

	if (!cg)
		return;
	cg_account(cg, n, WEIGHT_ONE);
	bpf_cgroup_release(cg);
}

/* Fold what @cctx holds into its cgroup's counters. */
static void cg_fold(struct cpu_ctx *cctx, u64 now)
{
	s64 n = cctx->cg_held_n;

	cctx->cg_folded_at = now;
	if (!n)
		return;
	cctx->cg_held_n = 0;
	stat_add(ST_CG_FOLDS, 1);
	cg_account_id(cctx->cg_held_id, n);
}

/* Fold what @cctx holds if CG_FOLD_NS has passed since it last folded. */
static __always_inline void cg_fold_due(struct cpu_ctx *cctx, u64 now)
{
	if (cctx->cg_held_n && now - cctx->cg_folded_at >= CG_FOLD_NS)
		cg_fold(cctx, now);
}

/*
 * Count @n runnable tasks of cgroup @cgid on this CPU. Held until CG_FOLD_NS has passed since
 * the CPU last folded (checked here and at each dispatch), until another cgroup's task comes
 * by, or until the CPU runs out of work or yields to a higher class: a wakeup and a sleep in
 * one cgroup on one CPU, message passing's pattern, cancel without touching shared memory.
 * Held only while the CPU runs a task of ours, so it dispatches within a turn: an idle CPU
 * waking a task from an interrupt folds at once, as it may stay idle for seconds.
 * Only this CPU writes its holds, under an rq lock with interrupts off, as runnable_delta.
 */
static void cg_hold(u64 cgid, s64 n)
{
	struct cpu_ctx *cctx = cpu_ctx(bpf_get_smp_processor_id());
	u64 now = now_ns();

	if (!cctx) {
		cg_account_id(cgid, n);
		return;
	}
	if (cctx->cg_held_id != cgid) {
		cg_fold(cctx, now);
		cctx->cg_held_id = cgid;
	}
	cctx->cg_held_n += n;
	if (!cctx->running_since)
		cg_fold(cctx, now);
	else
		cg_fold_due(cctx, now);
}

/*
 * Count a task in or out of nr_runnable_total on the CPU doing it (a remote wakeup runs on
 * the waker's CPU): a plain add is safe, each CPU writes only its own delta, under the rq
 * lock with interrupts off; sysmon sums the deltas each pass.
 */
static __always_inline void count_runnable(s64 d)
{
	struct cpu_ctx *cctx = cpu_ctx(bpf_get_smp_processor_id());

	if (cctx)
		cctx->runnable_delta += d;
}

static void cg_runnable(struct task_struct *p, struct task_ctx *tctx)
{
	struct cgroup *cg;

	if (!cgroup_weights_on || tctx->cg_counted)
		return;
	cg = scx_bpf_task_cgroup(p);
	if (!cg)
		return;
	tctx->cgid = cg->kn->id;
	bpf_cgroup_release(cg);
	cg_hold(tctx->cgid, 1);
	tctx->cg_counted = 1;
	count_runnable(1);
}

static void cg_quiescent(struct task_ctx *tctx)
{
	if (!tctx->cg_counted)
		return;
	tctx->cg_counted = 0;
	count_runnable(-1);
	cg_hold(tctx->cgid, -1);
}

/* Set weights past this many nice-0 tasks' (or below one) rank as equal. */
#define SET_WEIGHT_MAX ((u64)WEIGHT_ONE << 32)
static __always_inline u64 clamp_set_weight(u64 w)
{
	return w < 1 ? 1 : w > SET_WEIGHT_MAX ? SET_WEIGHT_MAX : w;
}

/*
 * The slice factor of @p's cgroup path (FP_ONE: an equal share). @set_w, @p's nice weight on
 * entry, is scaled by each cpu.weight down the path (per WEIGHT_ONE): the weight its user set,
 * whatever the runnable counts read (lighter_than_runner).
 */
static u64 cg_factor(struct task_struct *p, u64 *set_w)
{
	struct cgrp_ctx *parent = NULL, *c = NULL;
	s64 t = nr_runnable_total;
	struct cgroup *cg;
	u64 f, top, i;

	if (t < 1)
		t = 1;
	cg = scx_bpf_task_cgroup(p);
	if (!cg)
		return FP_ONE;
	top = cg->level;
	if (top > MAX_CG_DEPTH)
		top = MAX_CG_DEPTH;
	f = (u64)t * FP_ONE;
	bpf_for(i, 0, MAX_CG_DEPTH + 1) {
		if (i > top)
			break;
		c = cg_level_ctx(cg, i);
		if (!c)
			break;
		if (parent && parent->child_weight_sum > 0)
			f = f * cg_weight(c) / (u64)parent->child_weight_sum;
		if (f > ((u64)SLICE_MAX_MUL << 32))
			f = (u64)SLICE_MAX_MUL << 32;
		if (parent)
			*set_w = clamp_set_weight(*set_w * cg_weight(c) / WEIGHT_ONE);
		parent = c;
	}
	bpf_cgroup_release(cg);
	/* The task's own part of its cgroup. */
	if (c && c->child_weight_sum > 0)
		f = f * WEIGHT_ONE / (u64)c->child_weight_sum;
	return f;
}

/* Slice and sysmon threshold for @p: scaled by its weight and its cgroup's share. */
static u64 weighted(u64 base, struct task_struct *p, u64 cgf)
{
	u64 f = (u64)p->scx.weight * FP_ONE / WEIGHT_ONE, v;

	if (cgroup_weights_on)
		f = f * cgf / FP_ONE;
	if (f > SLICE_MAX_MUL * FP_ONE)
		f = SLICE_MAX_MUL * FP_ONE;
	v = base * f / FP_ONE;
	if (v < SLICE_MIN_NS)
		v = SLICE_MIN_NS;
	if (v > TURN_MAX_NS)
		v = TURN_MAX_NS;
	return v;
}

s32 BPF_STRUCT_OPS(gmp_cgroup_init, struct cgroup *cgrp, struct scx_cgroup_init_args *args)
{
	struct cgrp_ctx init = { .weight = args->weight };
	u64 id = cgrp->kn->id;

	if (!cgrp->level)
		cg_root_id = id;
	/* Full or failing map: the cgroup is still created. cg_account stops at a cgroup
	 * without state, so its tasks run as if their cgroups had default weights. */
	ctx_insert(&cgrp_ctxs, &id, &init, &nr_cgrp_ctxs);
	return 0;
}

/*
 * A cgroup going away may still count as active: the last of its tasks' sleeps can be held on
 * a CPU (cg_hold), and a fold after this finds no state. Take its count to zero and its weight
 * out of its parent now. The exchange and a racing fold's add are atomic on the same counter:
 * whichever comes second sees the other's result, so the parent is changed once.
 */
static void cg_retire(struct cgroup *cgrp)
{
	struct cgrp_ctx *c = cgrp_ctx(cgrp);
	struct cgroup *parent;

	if (!c || !cgrp->level || __sync_lock_test_and_set(&c->nr_active, 0) <= 0)
		return;
	parent = bpf_cgroup_ancestor(cgrp, cgrp->level - 1);
	if (!parent)
		return;
	cg_account(parent, -1, cg_weight(c));
	bpf_cgroup_release(parent);
}

void BPF_STRUCT_OPS(gmp_cgroup_exit, struct cgroup *cgrp)
{
	u64 id = cgrp->kn->id;

	if (cgroup_weights_on)
		cg_retire(cgrp);
	ctx_delete(&cgrp_ctxs, &id, &nr_cgrp_ctxs);
}

void BPF_STRUCT_OPS(gmp_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	struct cgrp_ctx *c = cgrp_ctx(cgrp), *pc;
	s64 old;

	if (!c)
		return;
	old = cg_weight(c);
	c->weight = weight;
	/* An active cgroup's weight is part of its parent's sum: move the sum with it. */
	if (c->nr_active <= 0 || !cgrp->level)
		return;
	pc = cg_level_ctx(cgrp, cgrp->level - 1);
	if (pc)
		__sync_fetch_and_add(&pc->child_weight_sum, (s64)weight - old);
}
