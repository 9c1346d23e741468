/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Counters: the per-CPU stat slots of enum gmp_stat, the wait latency histogram and the
 * longest-wait records the loader reads and clears each interval.
 */

static __always_inline void stat_add(u32 idx, u64 v)
{
	u32 zero = 0;
	struct gmp_pcpu_stats *s = bpf_map_lookup_elem(&stats, &zero);

	if (s && idx < GMP_NR_STATS)
		s->cnt[idx] += v;
}

/* Add to another CPU's slot of a per-CPU counter. */
static void stat_add_on(s32 cpu, u32 idx, u64 v)
{
	u32 zero = 0;
	struct gmp_pcpu_stats *s = bpf_map_lookup_percpu_elem(&stats, &zero, cpu);

	if (s && idx < GMP_NR_STATS)
		s->cnt[idx] += v;
}

static u32 ilog2_u64(u64 v)
{
	u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

/* Log-linear bucket: exact below 4 us, then 4 buckets per power of two (LAT_SUB_BITS). */
static u32 lat_bucket(u64 us)
{
	u32 msb, b;

	if (us < 4)
		return us;
	msb = ilog2_u64(us);
	b = (msb - 1) * 4 + ((us >> (msb - 2)) & 3);
	return b < NR_LAT_BUCKETS ? b : NR_LAT_BUCKETS - 1;
}

static void record_latency(u64 lat_ns)
{
	u32 zero = 0, b;
	u64 us = lat_ns / 1000;
	struct gmp_pcpu_stats *s = bpf_map_lookup_elem(&stats, &zero);

	if (!s)
		return;
	b = lat_bucket(us);
	barrier_var(b);
	if (b < NR_LAT_BUCKETS)
		s->lat[b]++;
	s->cnt[ST_LAT_SUM_US] += us;
	s->cnt[ST_LAT_COUNT]++;
}

/* Remember the longest wait this CPU has seen since the loader last looked. */
static void note_wait(s32 cpu, struct task_struct *p, u64 wait, u32 still_waiting)
{
	struct gmp_wait_rec *rec;
	u32 c = cpu;

	if (c >= MAX_CPUS)
		return;
	rec = &wait_recs[cpu_idx(c)];
	if (wait <= rec->wait_ns)
		return;
	rec->wait_ns = wait;
	rec->pid = p->pid;
	rec->still_waiting = still_waiting;
	bpf_probe_read_kernel_str(rec->comm, sizeof(rec->comm), p->comm);
}
