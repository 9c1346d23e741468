#!/usr/bin/env python3
"""Summarise a sched_switch/sched_waking/sched_migrate_task trace (tracefs text, as guest.sh's
trace workload reads it) into the figures that say where a message-passing or frame run's
time went, as "metric value" lines:

    trace_stats.py TRACE [COMM]

  wake_p50_us, wake_p99_us  wakeup (sched_waking) to running (sched_switch in), per wakeup
  wake_remote_pct           wakeups that ran on another CPU than the one that woke them
  preempt_pct               switches out of a task that was still runnable (prev_state R)
  switches_per_s            context switches per CPU per second
  migrations_per_wake       sched_migrate_task events per wakeup
  idle_pct                  CPU time idle
  idle_waiting_pct          CPU time idle while a task waited to run: min(idle CPUs, waiting
                            tasks) summed over time, the work-conservation loss
With COMM, the same wakeup and preemption figures for that task name alone (prefixed "task_"),
and its mean run time between two switches.
"""
import re
import statistics
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")
SWITCH = re.compile(
    r"prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
    r"next_comm=(.*) next_pid=(\d+) next_prio=\d+")
WAKING = re.compile(r"pid=(\d+) prio=\d+")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


class Trace:
    """One pass over the events in time order (tracefs merges the CPUs' buffers by time)."""

    def __init__(self, comm):
        self.comm = comm
        self.running = {}    # cpu: pid on it (0 = idle); absent until its first switch
        self.idle = 0        # CPUs of self.running that idle, kept by switch()
        self.on_cpu = {}     # pid: cpu, for the tasks running now
        self.woken = {}      # pid: (time, waker cpu), woken and not yet running
        self.waiting = set()  # woken or preempted, not running
        self.last = None
        self.first = None
        self.lost_s = 0.0    # idle CPU time while work waited
        self.idle_s = 0.0
        self.cpu_s = 0.0
        self.switches = self.preempts = self.migrations = 0
        self.wake_us, self.remote, self.task_wake_us = [], 0, []
        self.task_out = self.task_preempts = 0
        self.task_run_s, self.task_in = [], {}

    def advance(self, t):
        if self.last is not None and t > self.last:
            dt = t - self.last
            self.idle_s += dt * self.idle
            self.cpu_s += dt * len(self.running)
            self.lost_s += dt * min(self.idle, len(self.waiting))
        if self.first is None:
            self.first = t
        self.last = t

    def waking(self, t, cpu, pid):
        if pid in self.on_cpu or pid in self.woken:  # still running, or a second wakeup
            return
        self.woken[pid] = (t, cpu)
        self.waiting.add(pid)

    def switch(self, t, cpu, prev, state, prev_comm, nxt, next_comm):
        # The idle count changes only with what this CPU ran before (if known) and runs now.
        self.idle += (nxt == 0) - (self.running.get(cpu) == 0)
        self.running[cpu] = nxt
        if prev:
            self.switches += 1
            self.on_cpu.pop(prev, None)
            runnable = state.startswith("R")
            self.preempts += runnable
            if runnable:
                self.waiting.add(prev)
            if prev_comm == self.comm:
                self.task_out += 1
                self.task_preempts += runnable
                if prev in self.task_in:
                    self.task_run_s.append(t - self.task_in.pop(prev))
        if nxt:
            self.on_cpu[nxt] = cpu
            self.waiting.discard(nxt)
            if next_comm == self.comm:
                self.task_in[nxt] = t
            w = self.woken.pop(nxt, None)
            if w:
                us = (t - w[0]) * 1e6
                self.wake_us.append(us)
                self.remote += w[1] != cpu
                if next_comm == self.comm:
                    self.task_wake_us.append(us)

    def feed(self, line):
        m = LINE.match(line)
        if not m:
            return
        cpu, t, event, args = int(m.group(3)), float(m.group(4)), m.group(5), m.group(6)
        self.advance(t)
        if event == "sched_switch":
            s = SWITCH.search(args)
            if s:
                self.switch(t, cpu, int(s.group(2)), s.group(3), s.group(1), int(s.group(5)),
                            s.group(4))
        elif event in ("sched_waking", "sched_wakeup_new"):
            w = WAKING.search(args)
            if w:
                self.waking(t, cpu, int(w.group(1)))
        elif event == "sched_migrate_task":
            self.migrations += 1

    def report(self):
        span = (self.last - self.first) if self.first is not None else 0
        ncpu = max(1, len(self.running))
        n = len(self.wake_us)
        out = [
            ("span_s", span),
            ("wakeups", n),
            ("wake_p50_us", pct(self.wake_us, 0.5)),
            ("wake_p99_us", pct(self.wake_us, 0.99)),
            ("wake_remote_pct", 100 * self.remote / n if n else float("nan")),
            ("preempt_pct", 100 * self.preempts / self.switches if self.switches else 0),
            ("switches_per_s", self.switches / span / ncpu if span else float("nan")),
            ("migrations_per_wake", self.migrations / n if n else float("nan")),
            ("idle_pct", 100 * self.idle_s / self.cpu_s if self.cpu_s else float("nan")),
            ("idle_waiting_pct", 100 * self.lost_s / self.cpu_s if self.cpu_s else float("nan")),
        ]
        if self.comm:
            out += [
                ("task_wake_p50_us", pct(self.task_wake_us, 0.5)),
                ("task_wake_p99_us", pct(self.task_wake_us, 0.99)),
                ("task_preempt_pct",
                 100 * self.task_preempts / self.task_out if self.task_out else float("nan")),
                ("task_run_ms",
                 1e3 * statistics.mean(self.task_run_s) if self.task_run_s else float("nan")),
            ]
        return out


def main():
    tr = Trace(sys.argv[2] if len(sys.argv) > 2 else None)
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            if not line.startswith("#"):
                tr.feed(line)
    for k, v in tr.report():
        print(k, f"{v:.4g}" if isinstance(v, float) else v)


if __name__ == "__main__":
    main()
