#!/usr/bin/env python3
"""Checks of scale_report.py's targets: per-call times are judged on the fixed load only
(run by scripts/test.sh)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_report  # noqa: E402


def raw(ns_at_4, ns_at_32):
    """Rows for 4 and 32 CPUs: every load's dispatch cost, the other counts level."""
    v = {}
    for n, ns in ((4, ns_at_4), (32, ns_at_32)):
        for load in scale_report.LOADS:
            v[(n, "scx_gmp", load)] = {"seconds": 10, "sysmon_runs": 1000,
                                       "sysmon_visits": 1000 * n, "ns_gmp_dispatch": ns[load],
                                       "kernel_share": 0.1}
            v[(n, "eevdf", load)] = {"kernel_share": 0.05}
    return v


def verdict(lines, name):
    return next(line for line in lines if line.startswith("- " + name + ":"))


class Targets(unittest.TestCase):
    def test_fixed_load_judges_per_call_time(self):
        v = raw({"hogs": 1, "hackbench": 1, "fixed": 1000},
                {"hogs": 1, "hackbench": 1, "fixed": 1400})
        self.assertIn("(met)", verdict(scale_report.targets(v, [4, 32], "fixed"),
                                       "ns/call dispatch"))
        v[(32, "scx_gmp", "fixed")]["ns_gmp_dispatch"] = 1600
        self.assertIn("(MISSED)", verdict(scale_report.targets(v, [4, 32], "fixed"),
                                          "ns/call dispatch"))

    def test_growing_loads_do_not_judge_per_call_time(self):
        v = raw({"hogs": 100, "hackbench": 100, "fixed": 1},
                {"hogs": 1000, "hackbench": 1000, "fixed": 1})
        for load in ("hogs", "hackbench"):
            line = verdict(scale_report.targets(v, [4, 32], load), "ns/call dispatch")
            self.assertIn("not judged", line)
            self.assertNotIn("MISSED", line)

    def test_counted_work_is_judged_on_every_load(self):
        v = raw({"hogs": 1, "hackbench": 1, "fixed": 1}, {"hogs": 1, "hackbench": 1, "fixed": 1})
        v[(32, "scx_gmp", "hogs")]["sysmon_visits"] = 1000 * 32 * 4
        self.assertIn("(MISSED)", verdict(scale_report.targets(v, [4, 32], "hogs"),
                                          "sysmon visits per CPU per s"))


if __name__ == "__main__":
    unittest.main()
