/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Priorities: nice and cgroup cpu.weight as slice factors, and the cgroup ops.
 *
 * cgroup cpu.weight is CFS's semantics flattened into one factor per task. A cgroup is
 * active while a task in it or below it is runnable. Each cgroup's child_weight_sum adds the
 * weights of its active children and WEIGHT_ONE per runnable task directly in it (tasks
 * compete with sibling cgroups as nice-0 entities, as in CFS). A task's share of the machine
 * is the product, down its path, of weight / parent's child_weight_sum; times the number of
 * runnable tasks it becomes a slice factor (1.0 when everyone is equal). Counts are atomics:
 * racing transitions of one cgroup pair up, so the sums converge.
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

/* Count @p runnable (@dir 1) or not (@dir -1) in cgroup @cg and, on transitions, its parents. */
static void cg_account(struct cgroup *cg, s64 dir)
{
	s64 amount = WEIGHT_ONE, prev;
	u32 top = cg->level, i;

	if (top > MAX_CG_DEPTH)
		top = MAX_CG_DEPTH;
	bpf_for(i, 0, MAX_CG_DEPTH + 1) {
		struct cgrp_ctx *c;

		if (i > top)
			break;
		c = cg_level_ctx(cg, top - i);
		if (!c)
			break;
		__sync_fetch_and_add(&c->child_weight_sum, dir * amount);
		prev = __sync_fetch_and_add(&c->nr_active, dir);
		/* Only a cgroup turning active (0 -> 1) or idle (1 -> 0) changes its parent. */
		if (prev != (dir > 0 ? 0 : 1))
			break;
		amount = cg_weight(c);
	}
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
	cg_account(cg, 1);
	bpf_cgroup_release(cg);
	tctx->cg_counted = 1;
	count_runnable(1);
}

static void cg_quiescent(struct task_ctx *tctx)
{
	struct cgroup *cg;

	if (!tctx->cg_counted)
		return;
	tctx->cg_counted = 0;
	count_runnable(-1);
	cg = bpf_cgroup_from_id(tctx->cgid);
	if (!cg)
		return;
	cg_account(cg, -1);
	bpf_cgroup_release(cg);
}

/* The slice factor of @p's cgroup path (FP_ONE: an equal share). */
static u64 cg_factor(struct task_struct *p)
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

	/* Full or failing map: the cgroup is still created. cg_account stops at a cgroup
	 * without state, so its tasks run as if their cgroups had default weights. */
	ctx_insert(&cgrp_ctxs, &id, &init, &nr_cgrp_ctxs);
	return 0;
}

void BPF_STRUCT_OPS(gmp_cgroup_exit, struct cgroup *cgrp)
{
	u64 id = cgrp->kn->id;

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
