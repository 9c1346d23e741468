#!/usr/bin/env python3
"""Checks of report.py's choice of the best peer, its per-host-CPU rows and its NUMA note
(run by scripts/test.sh)."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

KEY = ("hackbench_proc_g1", "time_s")


class BestPeer(unittest.TestCase):
    def test_lower_is_better(self):
        vals = {(KEY, "eevdf"): [2, 2, 2], (KEY, "a"): [1.5, 1.6, 1.4], (KEY, "b"): [1.2, 1.3, 1.1]}
        self.assertEqual(report.best_peer(KEY, "lower", ["a", "b"], vals), (1.2, "b"))
        self.assertEqual(report.best_peer(KEY, "higher", ["a", "b"], vals), (1.5, "a"))

    def test_peer_left_out_midway_is_not_chosen(self):
        # b was ejected after round 1: its one run must not stand as the best median.
        vals = {(KEY, "eevdf"): [2, 2, 2], (KEY, "a"): [1.5, 1.6, 1.4], (KEY, "b"): [0.5]}
        self.assertEqual(report.best_peer(KEY, "lower", ["a", "b"], vals), (1.5, "a"))

    def test_no_complete_peer(self):
        vals = {(KEY, "eevdf"): [2, 2, 2], (KEY, "b"): [0.5]}
        self.assertIsNone(report.best_peer(KEY, "lower", ["b"], vals))

    def test_overhead_rows_have_no_best_peer(self):
        key = ("overhead", "ns_x_dispatch")
        vals = {(key, "a"): [1.0]}
        self.assertIsNone(report.best_peer(key, "lower", ["a"], vals))


class Directions(unittest.TestCase):
    def test_background_cpu_rows(self):
        # How much CPU a stressor got has no better direction; what it bought per CPU-second
        # does, under the frame loop, its SCHED_FIFO floor and alone.
        for w in ("frametime", "frametime_rt_floor"):
            for s in ("cpu", "fork"):
                self.assertEqual(report.metric((w, f"bg_{s}_cpus")), ("-", None))
                self.assertEqual(report.metric((w, f"bg_{s}_per_cpu_s")), ("higher", None))
        self.assertEqual(report.metric(("stress_cpu", "cpus")), ("-", None))
        self.assertEqual(report.metric(("stress_cpu", "bogo_per_cpu_s")), ("higher", None))

    def test_frame_targets(self):
        # Late frames are judged per refresh, strictly fewer than EEVDF's; the count over the
        # frames delivered carries no target (a run that skips frames delivers fewer).
        self.assertEqual(report.metric(("frametime", "late_or_skipped")), ("lower", "ratio < 1.0"))
        self.assertEqual(report.metric(("frametime", "late_gt2ms")), ("lower", None))
        self.assertEqual(report.metric(("frametime", "bg_cpu_bogo_ops_s")),
                         ("higher", "ratio >= 0.95"))
        # The SCHED_FIFO floor runs under EEVDF only: its rows keep their direction, no target.
        self.assertEqual(report.metric(("frametime_rt_floor", "late_or_skipped")), ("lower", None))
        self.assertEqual(report.metric(("frametime_rt_floor", "bg_fork_per_cpu_s")),
                         ("higher", None))
        self.assertEqual(report.metric(("cyclictest_rt_floor", "p99_us")), ("lower", None))
        self.assertEqual(report.metric(("numa_balancing_off", "node0_share")), ("higher", None))
        self.assertFalse(report.meets(1.0, "<", "1.0"))
        self.assertTrue(report.meets(0.99, "<", "1.0"))
        self.assertTrue(report.meets(1.0, "<=", "1.0"))
        self.assertFalse(report.meets(0.94, ">=", "0.95"))


class HostRows(unittest.TestCase):
    def rows(self, raw):
        with tempfile.TemporaryDirectory() as out:
            with open(f"{out}/marks", "w") as f:
                f.write("1,eevdf,frametime,start\n1,eevdf,frametime,end\n")
            with open(f"{out}/host.samp", "w") as f:  # 3 s of host CPU over 2 s between marks
                f.write("100.0 10.0 0\n101.0 11.0 1\n103.0 14.0 2\n")
            return {r["metric"]: r["value"] for r in report.host_rows(out, raw)}

    def test_frame_background_per_host_cpu(self):
        raw = [{"round": "1", "sched": "eevdf", "workload": "frametime", "metric": m, "value": v}
               for m, v in (("bg_cpu_bogo_ops_s", "60"), ("bg_fork_bogo_ops_s", "300"),
                            ("late_gt2ms", "7"))]
        self.assertEqual(self.rows(raw), {"host_cpus": "1.500", "bg_cpu_per_host_cpu_s": "40.00",
                                          "bg_fork_per_host_cpu_s": "200.00"})

    def test_unmarked_run_has_no_rows(self):
        raw = [{"round": "2", "sched": "eevdf", "workload": "frametime",
                "metric": "bg_cpu_bogo_ops_s", "value": "60"}]
        self.assertEqual(self.rows(raw), {})


class NumaNote(unittest.TestCase):
    ON, OFF = (("numa", "bogo_ops_s"), "eevdf"), (("numa_balancing_off", "bogo_ops_s"), "eevdf")

    def note(self, nr_nodes):
        vals = {self.ON: [5.0], self.OFF: [5.0]}
        by_round = {self.ON: {"1": 5.0}, self.OFF: {"1": 5.0}}
        return report.numa_note(vals, by_round, "kernel x", nr_nodes)

    def test_two_nodes_have_a_note(self):
        self.assertEqual(len(self.note(2)), 1)

    def test_unknown_node_count_has_a_note(self):
        self.assertEqual(len(self.note(0)), 1)

    def test_one_node_says_the_load_was_left_out(self):
        self.assertEqual(report.numa_note({}, {}, "layout smt (8 CPUs, nodes 0)", 1),
                         [report.ONE_NODE])

    def test_one_node_rows_get_no_numa_note(self):
        # A run from before the guest skipped the load on one node: no NUMA balancing figure.
        self.assertEqual(self.note(1), [])


if __name__ == "__main__":
    unittest.main()
