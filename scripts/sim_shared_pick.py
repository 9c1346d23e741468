#!/usr/bin/env python3
"""How cpu.weight and waits hold up when many CPUs serve one shared queue: a model of shared_pick.

Event-driven model behind the shared-queue figures in docs/design.md. N CPUs serve one queue
holding N heavy tasks (turns of 22.5 ms: weight factor 2.25) and 2N light ones (3.75 ms,
factor 0.375), cgroup_deep's tree at one task per CPU and leaf. Each turn runs its length with
uniform jitter, plus --overrun-ms, as where the turn timer ends turns late. Prints, per order,
the heavy class's CPU time over the light class's (3.00 is what the weights ask for) and the
longest wait of any of these tasks from joining the queue to leaving it (or to the end), in ms.

Two orders of the queue:
  window=W  shared_pick today: the least-vtime task among the first W queued, or the head once
            it is due (PICKS_PER_PROC picks per CPU since it joined). W=1 is plain FIFO.
  tags      start tags, self-clocked: V is the greatest tag picked so far, and a task joins
            with the tag where its last turn ended (its tag plus the turn over its weight
            factor), at least V and at most V + --lag-slices slices; a task new to the queue
            joins at V + --fresh-slices. The least tag goes first. No window.

--lead S gives one heavy task S seconds of vtime before the start, as a task has that ran
outside the queue (on its CPU's own queue) for that long. --stream R adds R new tasks a second
per CPU that run one light turn and leave, as forks or woken tasks passing through; past about
260 a second per CPU they alone overload the CPUs.

    scripts/sim_shared_pick.py [--cpus 4,16,64,256] [--windows 1,8,32,128] [--tags]
        [--seconds 30] [--lag-slices 4] [--fresh-slices 1] [--lead S] [--stream R]
        [--overrun-ms MS]
"""

import argparse
import heapq
import itertools
import random

HEAVY_TURN_S, HEAVY_FACTOR = 0.0225, 2.25
LIGHT_TURN_S, LIGHT_FACTOR = 0.00375, 0.375
SLICE_S = 0.010  # a turn over its weight factor: the same for every task
PICKS_PER_PROC = 8  # SHARED_PICK_WAIT_TURNS in bpf/consts.bpf.h
JITTER = 0.3


class Task:
    def __init__(self, heavy, transient=False):
        self.heavy = heavy
        self.transient = transient
        self.turn = HEAVY_TURN_S if heavy else LIGHT_TURN_S
        self.factor = HEAVY_FACTOR if heavy else LIGHT_FACTOR
        self.vtime = 0.0  # CPU time over weight factor, as tctx->vtime
        self.finish = None  # tags: where its last turn ended; None while new to the queue
        self.cpu_s = 0.0
        self.joined = 0  # the pick count when it joined the queue
        self.joined_at = 0.0
        self.longest_wait = 0.0


class WindowQueue:
    """FIFO with a least-vtime pick among the first `window`, and the head first once due."""

    def __init__(self, ncpu, window):
        self.ncpu, self.window, self.items, self.picks = ncpu, window, [], 0

    def put(self, t):
        t.joined = self.picks
        self.items.append(t)

    def pick(self):
        q = self.items
        if not q:
            return None
        if self.picks - q[0].joined >= PICKS_PER_PROC * self.ncpu:
            i = 0
        else:
            i = min(range(min(self.window, len(q))), key=lambda k: q[k].vtime)
        self.picks += 1
        return q.pop(i)

    def ran(self, t, secs):
        pass

    def queued(self):
        return self.items


class TagQueue:
    """Start-tag order with a self-clocked V, tags capped at V + lag and new ones at V + fresh."""

    def __init__(self, lag, fresh):
        self.lag, self.fresh = lag, fresh
        self.heap, self.v, self.seq = [], 0.0, itertools.count()

    def put(self, t):
        if t.finish is None:
            t.tag = self.v + self.fresh
        else:
            t.tag = min(max(self.v, t.finish), self.v + self.lag)
        heapq.heappush(self.heap, (t.tag, next(self.seq), t))

    def pick(self):
        if not self.heap:
            return None
        tag, _, t = heapq.heappop(self.heap)
        self.v = max(self.v, tag)
        return t

    def ran(self, t, secs):
        t.finish = t.tag + secs / t.factor

    def queued(self):
        return [t for _, _, t in self.heap]


def run(ncpu, queue, seconds, lead=0.0, stream=0.0, overrun=0.0, seed=1):
    rnd = random.Random(seed)
    tasks = [Task(True) for _ in range(ncpu)] + [Task(False) for _ in range(2 * ncpu)]
    rnd.shuffle(tasks)
    if lead:
        t = next(t for t in tasks if t.heavy)
        t.vtime = t.finish = lead
    for t in tasks:
        queue.put(t)
    events, idle, seq = [], [], itertools.count()  # events: (time, seq, cpu, task, ran)

    def start(now, cpu):
        t = queue.pick()
        if t is None:
            idle.append(cpu)
            return
        t.longest_wait = max(t.longest_wait, now - t.joined_at)
        ran = t.turn * (1 + rnd.uniform(-JITTER, JITTER)) + overrun
        heapq.heappush(events, (now + ran, next(seq), cpu, t, ran))

    def join(now, t):
        t.joined_at = now
        queue.put(t)
        if idle:
            start(now, idle.pop())

    def next_arrival(now):
        heapq.heappush(events, (now + rnd.expovariate(stream * ncpu), next(seq), -1, None, 0.0))

    for cpu in range(ncpu):
        start(0.0, cpu)
    if stream:
        next_arrival(0.0)
    now = 0.0
    while events and events[0][0] <= seconds:
        now, _, cpu, t, ran = heapq.heappop(events)
        if t is None:  # a new task passing through
            join(now, Task(False, transient=True))
            next_arrival(now)
            continue
        t.cpu_s += ran
        t.vtime += ran / t.factor
        queue.ran(t, ran)
        if not t.transient:
            join(now, t)
        start(now, cpu)
    for t in queue.queued():  # still waiting at the end: that wait counts too
        t.longest_wait = max(t.longest_wait, seconds - t.joined_at)
    heavy = sum(t.cpu_s for t in tasks if t.heavy)
    light = sum(t.cpu_s for t in tasks if not t.heavy)
    return heavy / light, max(t.longest_wait for t in tasks) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="4,16,64,256")
    ap.add_argument("--windows", default="1,8,32,128")
    ap.add_argument("--tags", action="store_true", help="add a column for the start-tag order")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--lag-slices", type=float, default=4.0)
    ap.add_argument("--fresh-slices", type=float, default=1.0)
    ap.add_argument("--lead", type=float, default=0.0)
    ap.add_argument("--stream", type=float, default=0.0)
    ap.add_argument("--overrun-ms", type=float, default=0.0)
    args = ap.parse_args()
    orders = [(f"window={w}", lambda n, w=int(w): WindowQueue(n, w))
              for w in args.windows.split(",") if w]
    if args.tags:
        lag, fresh = args.lag_slices * SLICE_S, args.fresh_slices * SLICE_S
        orders.append(("tags", lambda n: TagQueue(lag, fresh)))
    print("cpus " + " ".join(f"{name + ': ratio, wait ms':<28}" for name, _ in orders))
    for n in (int(c) for c in args.cpus.split(",")):
        cells = []
        for _, make in orders:
            r, w = run(n, make(n), args.seconds, args.lead, args.stream, args.overrun_ms / 1000)
            cells.append(f"{r:.2f}, {w:.0f}".ljust(28))
        print(f"{n:<4} " + " ".join(cells))


if __name__ == "__main__":
    main()
