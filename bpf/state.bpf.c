/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Task and cgroup state: entries of the task_ctxs and cgrp_ctxs hash maps, created at
 * ops.init_task / ops.cgroup_init and deleted at ops.exit_task / ops.cgroup_exit.
 *
 * Invariant: a task_struct's address names one task from ops.init_task to ops.exit_task (the
 * kernel calls exit_task before it frees the struct, and exit_task deletes the entry), so a
 * later task at the same address never sees its predecessor's state. Every op copes with a
 * missing state: allocation may fail, and the task is still scheduled.
 */

/*
 * Insert a fresh state into task_ctxs or cgrp_ctxs and count it in @live. An entry can
 * only exist already if its task or cgroup failed to delete it on exit; that owner is gone,
 * so overwrite it. Allocation can fail (map full, or the allocator's per-CPU cache empty for
 * the moment): counted, and the caller goes on without a state.
 */
static __always_inline long ctx_insert(void *map, u64 *key, void *init, s64 *live)
{
	long ret = bpf_map_update_elem(map, key, init, BPF_NOEXIST);

	if (!ret)
		__sync_fetch_and_add(live, 1);
	else if (ret == -EEXIST)
		ret = bpf_map_update_elem(map, key, init, BPF_EXIST);
	if (ret) {
		stat_add(ST_CTX_ALLOC_FAIL, 1);
		last_ctx_err = ret;
	}
	return ret;
}

/* Delete a state on its owner's exit; uncount it only if it was there. */
static __always_inline void ctx_delete(void *map, u64 *key, s64 *live)
{
	if (!bpf_map_delete_elem(map, key))
		__sync_fetch_and_sub(live, 1);
}

/* A fresh state for @p, or NULL (see ctx_insert). */
static struct task_ctx *task_ctx_create(struct task_struct *p)
{
	struct task_ctx init = {
		.home_node = -1,
		.mem_node = -1,
		.last_cpu = -1,
		/*
		 * Neither interactive nor a hog until it has slept a few times; a task that never
		 * sleeps (a CPU hog) must not count as one whose last burst was short.
		 */
		.avg_burst_ns = wakeup_preempt_ns,
		.last_burst_ns = wakeup_preempt_ns,
		.run_share = RUN_SHARE_ONE,
	};
	u64 key = (u64)p;

	if (ctx_insert(&task_ctxs, &key, &init, &nr_task_ctxs))
		return NULL;
	return bpf_map_lookup_elem(&task_ctxs, &key);
}

s32 BPF_STRUCT_OPS(gmp_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	/* Failing here would fail the fork or the whole load; gmp_runnable tries again. */
	task_ctx_create(p);
	return 0;
}

void BPF_STRUCT_OPS(gmp_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	u64 key = (u64)p;

	ctx_delete(&task_ctxs, &key, &nr_task_ctxs);
}
