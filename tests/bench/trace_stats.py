#!/usr/bin/env python3
"""Summarise a sched_switch/sched_waking/sched_migrate_task trace (tracefs text, as guest.sh's
trace workload reads it) into the figures that say where a message-passing or frame run's
time went, as "metric value" lines:

    trace_stats.py TRACE [--after-forks] [--share PREFIX]... [COMM]

  wake_p50_us, wake_p99_us  wakeup (sched_waking) to running (sched_switch in), per wakeup
  wake_remote_pct           wakeups that ran on another CPU than the one that woke them
  preempt_pct               switches out of a task that was still runnable (prev_state R)
  switches_per_s            context switches per CPU per second
  migrations_per_wake       sched_migrate_task events per wakeup
  idle_pct                  CPU time idle
  idle_waiting_pct          CPU time idle while a task waited to run: min(idle CPUs, waiting
                            tasks) summed over time, the work-conservation loss
  idle_waiting_pickup_pct   the part of it where the waiting task later ran on the CPU that
                            idled: that CPU came to it late (a kick, or an idle exit, slow)
  idle_waiting_left_pct     the part where it ran on another CPU: the idle one never took it
                            (the loss is shared out evenly over the waiting tasks and idle CPUs)
--after-forks counts only what follows the trace's last task creation (sched_wakeup_new):
hackbench times its messages, not the forks that set them up, which idle CPUs as tasks are
made one by one. With COMM, the same wakeup and preemption figures for that task name alone
(prefixed "task_"), and its mean run time between two switches. Each --share PREFIX adds
share_PREFIX_pct: the CPU time of the tasks whose name starts with PREFIX, as a share of all
CPU time (idle included), to see which tasks a scheduler gives the machine to.
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

    def __init__(self, comm, shares=()):
        self.comm = comm
        self.shares = list(shares)  # task name prefixes whose CPU time is summed
        self.running = {}    # cpu: pid on it (0 = idle); absent until its first switch
        self.since = {}      # cpu: (when its task switched in, the share index or None)
        self.idle = 0        # CPUs of self.running that idle, kept by switch()
        self.on_cpu = {}     # pid: cpu, for the tasks running now
        self.woken = {}      # pid: (time, waker cpu), woken and not yet running
        self.waiting = set()  # woken or preempted, not running
        self.task_in = {}    # pid: when the task named comm last switched in
        self.last = None
        # The idle-while-waiting loss split by where each waiting task ran in the end, known
        # only then: per CPU, the running integral of the loss one waiting task owes while
        # that CPU idles; each waiting task keeps the integrals' values from when its wait began.
        self.owed = {}       # cpu: integral of min(I, W) / (I * W) dt while that CPU idles
        self.wait_from = {}  # pid: {cpu: owed[cpu]} when its wait began
        self.restart()

    def restart(self):
        """Counts from here on only; what runs and what waits carries over."""
        self.first = None
        self.wait_from = {pid: dict(self.owed) for pid in self.waiting}
        self.lost_s = 0.0    # idle CPU time while work waited
        self.pickup_s = self.left_s = 0.0
        self.idle_s = 0.0
        self.cpu_s = 0.0
        self.switches = self.preempts = self.migrations = 0
        self.wake_us, self.remote, self.task_wake_us = [], 0, []
        self.task_out = self.task_preempts = 0
        self.task_run_s = []
        self.share_s = [0.0] * len(self.shares)
        self.since = {cpu: (None, i) for cpu, (_, i) in self.since.items()}

    def advance(self, t):
        if self.last is not None and t > self.last:
            dt = t - self.last
            self.idle_s += dt * self.idle
            self.cpu_s += dt * len(self.running)
            lost = dt * min(self.idle, len(self.waiting))
            self.lost_s += lost
            if lost:
                share = lost / (self.idle * len(self.waiting))
                for cpu, pid in self.running.items():
                    if pid == 0:
                        self.owed[cpu] = self.owed.get(cpu, 0.0) + share
        if self.first is None:
            self.first = t
        self.last = t

    def waking(self, t, cpu, pid):
        if pid in self.on_cpu or pid in self.woken:  # still running, or a second wakeup
            return
        self.woken[pid] = (t, cpu)
        self.wait(pid)

    def wait(self, pid):
        if pid not in self.waiting:
            self.waiting.add(pid)
            self.wait_from[pid] = dict(self.owed)

    def ran(self, pid, cpu):
        """Settles the loss a task owes for its wait, now that it runs on cpu."""
        self.waiting.discard(pid)
        start = self.wait_from.pop(pid, None)
        if start is None:
            return
        for c, v in self.owed.items():
            owed = v - start.get(c, 0.0)
            if c == cpu:
                self.pickup_s += owed
            else:
                self.left_s += owed

    def share_of(self, comm):
        return next((i for i, p in enumerate(self.shares) if comm.startswith(p)), None)

    def ran_since(self, cpu, t):
        """(share index or None, seconds): what the task on cpu ran by t since it switched in
        or the restart."""
        t0, i = self.since.get(cpu, (None, None))
        return i, t - (t0 if t0 is not None else self.first)

    def switch(self, t, cpu, prev, state, prev_comm, nxt, next_comm):
        i, ran = self.ran_since(cpu, t)
        if i is not None:
            self.share_s[i] += ran
        self.since[cpu] = (t, self.share_of(next_comm) if nxt else None)
        # The idle count changes only with what this CPU ran before (if known) and runs now.
        self.idle += (nxt == 0) - (self.running.get(cpu) == 0)
        self.running[cpu] = nxt
        if prev:
            self.switches += 1
            self.on_cpu.pop(prev, None)
            runnable = state.startswith("R")
            self.preempts += runnable
            if runnable:
                self.wait(prev)
            if prev_comm == self.comm:
                self.task_out += 1
                self.task_preempts += runnable
                if prev in self.task_in:
                    self.task_run_s.append(t - self.task_in.pop(prev))
        if nxt:
            self.on_cpu[nxt] = cpu
            self.ran(nxt, cpu)
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
            ("idle_waiting_pickup_pct",
             100 * self.pickup_s / self.cpu_s if self.cpu_s else float("nan")),
            ("idle_waiting_left_pct", 100 * self.left_s / self.cpu_s if self.cpu_s else float("nan")),
        ]
        share_s = list(self.share_s)  # and what the tasks running at the end ran so far
        for cpu in self.since:
            i, ran = self.ran_since(cpu, self.last)
            if i is not None:
                share_s[i] += ran
        for p, v in zip(self.shares, share_s):
            name = "".join(c if c.isalnum() else "_" for c in p)
            out.append((f"share_{name}_pct", 100 * v / self.cpu_s if self.cpu_s else float("nan")))
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
    args = sys.argv[1:]
    after_forks = "--after-forks" in args
    args = [a for a in args if a != "--after-forks"]
    shares = []
    while "--share" in args:
        i = args.index("--share")
        if i + 1 == len(args):
            sys.exit("trace_stats.py: --share needs a PREFIX")
        shares.append(args[i + 1])
        del args[i:i + 2]
    with open(args[0], errors="replace") as f:
        lines = [line for line in f if not line.startswith("#")]
    # Where the last task was created: hackbench times only what follows its forks.
    start = 0
    if after_forks:
        start = max((i for i, line in enumerate(lines) if ": sched_wakeup_new: " in line),
                    default=-1) + 1
    tr = Trace(args[1] if len(args) > 1 else None, shares)
    for i, line in enumerate(lines):
        if i == start:
            tr.restart()
        tr.feed(line)
    for k, v in tr.report():
        print(k, f"{v:.4g}" if isinstance(v, float) else v)


if __name__ == "__main__":
    main()
