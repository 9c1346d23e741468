/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The processor set (GOMAXPROCS for the machine): which CPUs run ordinary work.
 *
 * Publication: the loader writes proc_on[] and procs_subset, then bumps procs_gen (release);
 * sync_procs_mask (sysmon, ops.init) copies proc_on[] into procs_mask when procs_gen moved.
 * Between the two, is_proc() (proc_on) and procs_mask may disagree for one sysmon period;
 * either answer is a CPU that was a proc a moment ago, and no task is lost: a non-proc still
 * serves its own queue and evicts what may run elsewhere.
 */

/*
 * A proc @p may run on, or -1 if none. Within the mask any proc will do: the queue it lands
 * in is stealable by its neighbours. Callers are non-sleepable ops, which run inside an RCU
 * read-side section, so the kptr may be read without taking the lock (taking and dropping it
 * would end the section that iterator-held task pointers rely on).
 */
static s32 proc_for(struct task_struct *p)
{
	const struct cpumask *m = cast_mask(procs_mask);
	s32 cpu = -1;

	if (m)
		cpu = bpf_cpumask_any_and_distribute(m, p->cpus_ptr);
	return cpu >= 0 && cpu < nr_cpus ? cpu : -1;
}

/*
 * Copy proc_on into procs_mask if the loader changed it. Bits flip in place, one by one.
 * The acquire load pairs with the loader's release store of procs_gen (write_procs): having
 * seen generation g, this copy reads the proc_on[] written for g or later, never an older
 * mask recorded as g.
 */
static void sync_procs_mask(void)
{
	struct bpf_cpumask *m;
	u64 gen = smp_load_acquire(&procs_gen);
	u32 i;

	if (gen == procs_mask_gen)
		return;
	bpf_rcu_read_lock();
	m = procs_mask;
	if (m) {
		bpf_for(i, 0, MAX_NODES)
			node_procs[i] = 0;
		bpf_for(i, 0, nr_cpus) {
			if (proc_on[cpu_idx(i)]) {
				bpf_cpumask_set_cpu(i, m);
				node_procs[node_idx(node_of(i))]++;
			} else {
				bpf_cpumask_clear_cpu(i, m);
			}
		}
		procs_mask_gen = gen;
	}
	bpf_rcu_read_unlock();
}
