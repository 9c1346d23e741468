/* Frame-time workload for tests/bench/guest.sh: a periodic task like a game's render loop.
 *
 *   frames --calibrate MS          print the loop count that takes MS ms of CPU on this machine
 *   frames ITERS HZ SECONDS        run: one frame of ITERS loop iterations released every 1/HZ s
 *
 * Frames are released on the 1/HZ grid from t0 (absolute, so a late frame does not shift the
 * ones after it), each doing a fixed amount of work. A frame that ends after the next release
 * has missed its display refresh ("missed"), and, as a game under vsync does, the next frame
 * starts at the first release after it ended instead of queueing behind it: a backlog would
 * make every later frame late for one slow one. A frame's lateness is the time from its
 * release to its end minus the CPU time it used: the time it spent waiting for a CPU, which
 * is what the scheduler decides. Wall time alone would also count the emulated vCPU running
 * slower while the host shares its cores among the vCPUs, which no guest scheduler changes.
 *
 * A scheduler that makes frames miss delivers fewer of them, so late_gt2ms alone, counted over
 * the frames delivered, favours it; late_or_skipped counts per refresh: the frames that waited
 * more than 2 ms plus the refreshes skipped after a miss, out of the run's releases (the same
 * under every scheduler).
 *
 * Prints "key value" lines: frames, late_gt2ms, late_gt2ms_pct, skipped, late_or_skipped,
 * p50_late_ms, p99_late_ms, max_late_ms, missed_pct, cpu_ms_per_frame.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

/* The work: integer arithmetic the compiler cannot fold away (the result is returned). */
static uint64_t work(uint64_t iters)
{
	volatile uint64_t x = 88172645463325252ull;
	for (uint64_t i = 0; i < iters; i++) {
		uint64_t v = x;
		v ^= v << 13;
		v ^= v >> 7;
		v ^= v << 17;
		x = v;
	}
	return x;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The loop count for MS ms of thread CPU time: the median of 15 timed runs, so that one run
 * interrupted by the host does not set it. */
static int calibrate(double ms)
{
	const uint64_t probe = 200000;
	uint64_t t[15];
	for (int i = 0; i < 15; i++) {
		uint64_t a = ns(CLOCK_THREAD_CPUTIME_ID);
		work(probe);
		t[i] = ns(CLOCK_THREAD_CPUTIME_ID) - a;
	}
	qsort(t, 15, sizeof(t[0]), cmp_u64);
	printf("%llu\n", (unsigned long long)(probe * ms * 1e6 / (double)(t[7] ? t[7] : 1)));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--calibrate"))
		return calibrate(atof(argv[2]));
	if (argc != 4) {
		fprintf(stderr, "usage: frames --calibrate MS | frames ITERS HZ SECONDS\n");
		return 2;
	}
	uint64_t iters = strtoull(argv[1], NULL, 10);
	double hz = atof(argv[2]), secs = atof(argv[3]);
	uint64_t period = (uint64_t)(1e9 / hz);
	size_t cap = (size_t)(secs * hz) + 1, n = 0;
	uint64_t *late = calloc(cap, sizeof(*late));
	uint64_t missed = 0, skipped = 0, cpu_total = 0;
	if (!late)
		return 1;

	uint64_t rel = ns(CLOCK_MONOTONIC) + period, stop = rel + (uint64_t)(secs * 1e9);
	while (rel < stop && n < cap) {
		struct timespec ts = { .tv_sec = rel / 1000000000ull, .tv_nsec = rel % 1000000000ull };
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID);
		work(iters);
		uint64_t end = ns(CLOCK_MONOTONIC), cpu = ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		uint64_t wall = end > rel ? end - rel : 0;
		late[n++] = wall > cpu ? wall - cpu : 0;
		cpu_total += cpu;
		if (end > rel + period) {
			uint64_t overran = (end - rel) / period; /* releases that got no frame */
			uint64_t in_run = (stop - rel - 1) / period; /* releases left before stop */
			missed++;
			skipped += overran < in_run ? overran : in_run;
			rel += overran * period; /* the last release it overran */
		}
		rel += period;
	}

	size_t over = 0;
	for (size_t k = 0; k < n; k++)
		over += late[k] > 2000000;
	qsort(late, n, sizeof(late[0]), cmp_u64);
	double div = n ? (double)n : 1;
	printf("frames %zu\n", n);
	printf("late_gt2ms %zu\n", over);
	printf("late_gt2ms_pct %.2f\n", 100.0 * over / div);
	printf("skipped %llu\n", (unsigned long long)skipped);
	printf("late_or_skipped %llu\n", (unsigned long long)(over + skipped));
	printf("p50_late_ms %.3f\n", n ? late[n / 2] / 1e6 : 0);
	printf("p99_late_ms %.3f\n", n ? late[(size_t)(0.99 * (n - 1))] / 1e6 : 0);
	printf("max_late_ms %.3f\n", n ? late[n - 1] / 1e6 : 0);
	printf("missed_pct %.2f\n", 100.0 * missed / div);
	printf("cpu_ms_per_frame %.3f\n", cpu_total / div / 1e6);
	free(late);
	return 0;
}
