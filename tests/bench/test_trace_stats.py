#!/usr/bin/env python3
"""Checks of trace_stats.py's accounting on hand-made traces (run by scripts/test.sh)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_stats  # noqa: E402


def sw(cpu, t, prev, state, nxt, prev_comm="t", next_comm="t"):
    return (f"  x-{prev} [{cpu:03d}] d..2. {t:.6f}: sched_switch: prev_comm={prev_comm} "
            f"prev_pid={prev} prev_prio=120 prev_state={state} ==> next_comm={next_comm} "
            f"next_pid={nxt} next_prio=120")


def wk(cpu, t, pid, comm="t"):
    return f"  x-1 [{cpu:03d}] d..2. {t:.6f}: sched_waking: comm={comm} pid={pid} prio=120 target_cpu=000"


def run(lines, comm=None):
    tr = trace_stats.Trace(comm)
    for line in lines:
        tr.feed(line)
    return dict(tr.report())


class TraceStats(unittest.TestCase):
    def test_idle_while_waiting(self):
        # CPU 0 idles 0-4 ms; task 12 waits 1-2 ms, task 11 (preempted) 2-4 ms: 3 of 10 ms.
        r = run([sw(1, 100.0, 0, "R", 11), sw(0, 100.0, 0, "R", 0), wk(1, 100.001, 12),
                 sw(1, 100.002, 11, "R+", 12), sw(0, 100.004, 0, "R", 11),
                 sw(1, 100.005, 12, "S", 0)])
        self.assertAlmostEqual(r["idle_waiting_pct"], 30.0, places=3)
        # Task 12 ran on CPU 1 while CPU 0 idled (left); task 11 ran on CPU 0 (picked up late).
        self.assertAlmostEqual(r["idle_waiting_left_pct"], 10.0, places=3)
        self.assertAlmostEqual(r["idle_waiting_pickup_pct"], 20.0, places=3)
        self.assertAlmostEqual(r["idle_pct"], 40.0, places=3)
        self.assertAlmostEqual(r["preempt_pct"], 50.0, places=3)

    def test_shares_by_name_prefix(self):
        # CPU 0 runs a-worker 0-4 ms; CPU 1 runs b 0-2 ms, then idles: 8 ms of CPU time in all.
        tr = trace_stats.Trace(None, ["a-", "b"])
        for line in [sw(0, 100.0, 0, "R", 11, next_comm="a-worker"),
                     sw(1, 100.0, 0, "R", 12, next_comm="b"),
                     sw(1, 100.002, 12, "S", 0, prev_comm="b", next_comm="swapper/1"),
                     sw(0, 100.004, 11, "R", 13, prev_comm="a-worker", next_comm="c")]:
            tr.feed(line)
        r = dict(tr.report())
        self.assertAlmostEqual(r["share_a__pct"], 50.0, places=3)
        self.assertAlmostEqual(r["share_b_pct"], 25.0, places=3)

    def test_restart_counts_from_there(self):
        # The idle wait before the restart (task 12, 1-2 ms) is not counted; task 11, preempted
        # before it and still waiting, is counted from it (3-4 ms of the 4 ms after 101.0).
        tr = trace_stats.Trace(None)
        lines = [sw(1, 100.0, 0, "R", 11), sw(0, 100.0, 0, "R", 0), wk(1, 100.001, 12),
                 sw(1, 100.002, 11, "R+", 12), sw(1, 100.003, 12, "S", 13),
                 sw(0, 100.004, 0, "R", 11), sw(1, 100.005, 13, "S", 0)]
        for line in lines[:4]:
            tr.feed(line)
        tr.advance(100.003)
        tr.restart()
        for line in lines[4:]:
            tr.feed(line)
        r = dict(tr.report())
        self.assertAlmostEqual(r["span_s"], 0.002, places=6)
        self.assertAlmostEqual(r["idle_waiting_pct"], 25.0, places=3)
        self.assertAlmostEqual(r["idle_waiting_pickup_pct"], 25.0, places=3)
        self.assertEqual(r["wakeups"], 0)

    def test_wakeup_latency_and_remote(self):
        # Woken on CPU 1, runs 500 us later on CPU 0: one remote wakeup.
        r = run([sw(0, 1.0, 0, "R", 5), sw(1, 1.0, 0, "R", 6), sw(0, 1.0001, 5, "S", 0),
                 wk(1, 1.001, 5), sw(0, 1.0015, 0, "R", 5)])
        self.assertEqual(r["wakeups"], 1)
        self.assertAlmostEqual(r["wake_p50_us"], 500.0, places=3)
        self.assertEqual(r["wake_remote_pct"], 100.0)

    def test_waking_a_running_task_is_not_a_wakeup(self):
        # Woken while still running (ignored), then asleep, woken again and run 1 ms later.
        r = run([sw(0, 1.0, 0, "R", 5), wk(1, 1.001, 5), sw(0, 1.002, 5, "S", 0),
                 wk(1, 1.005, 5), sw(0, 1.006, 0, "R", 5)])
        self.assertEqual(r["wakeups"], 1)
        self.assertAlmostEqual(r["wake_p50_us"], 1000.0, places=3)

    def test_task_figures(self):
        r = run([sw(0, 1.0, 0, "R", 0), wk(1, 1.001, 7, "frames"),
                 sw(0, 1.003, 0, "R", 7, "swapper/0", "frames"),
                 sw(0, 1.007, 7, "R", 0, "frames", "swapper/0")], "frames")
        self.assertAlmostEqual(r["task_wake_p50_us"], 2000.0, places=3)
        self.assertAlmostEqual(r["task_run_ms"], 4.0, places=3)
        self.assertEqual(r["task_preempt_pct"], 100.0)


if __name__ == "__main__":
    unittest.main()
