#!/usr/bin/env python3
"""How cpu.weight holds up when many CPUs serve one shared queue: a model of shared_pick.

Event-driven model behind the shared_pick figures in docs/design.md. N CPUs serve one FIFO
queue holding N heavy tasks (turns of 22.5 ms: weight factor 2.25) and 2N light ones (3.75 ms,
factor 0.375), cgroup_deep's tree at one task per CPU and leaf. Each turn runs its length with
uniform jitter and is always honoured, as on hardware, where the turn timer ends it on time. A
CPU picks the least-vtime task among the first WINDOW queued, or the head once it is due
(PICKS_PER_PROC picks per CPU since it joined), as shared_pick does. Prints the heavy class's
CPU time over the light class's: 3.00 is what the weights ask for.

    scripts/sim_shared_pick.py [--cpus 4,16,64,256] [--windows 1,8,32,128] [--seconds 30]
"""

import argparse
import heapq
import random

HEAVY_TURN_S, HEAVY_FACTOR = 0.0225, 2.25
LIGHT_TURN_S, LIGHT_FACTOR = 0.00375, 0.375
PICKS_PER_PROC = 8  # SHARED_PICK_WAIT_TURNS in bpf/gmp.bpf.h
JITTER = 0.3


class Task:
    def __init__(self, heavy):
        self.heavy = heavy
        self.turn = HEAVY_TURN_S if heavy else LIGHT_TURN_S
        self.factor = HEAVY_FACTOR if heavy else LIGHT_FACTOR
        self.vtime = 0.0
        self.cpu_s = 0.0
        self.joined = 0  # the pick count when it joined the queue


def ratio(ncpu, window, seconds, seed=1):
    rnd = random.Random(seed)
    tasks = [Task(True) for _ in range(ncpu)] + [Task(False) for _ in range(2 * ncpu)]
    rnd.shuffle(tasks)
    queue, picks, events = list(tasks), 0, []

    def pick():
        nonlocal picks
        if picks - queue[0].joined >= PICKS_PER_PROC * ncpu:
            i = 0
        else:
            i = min(range(min(window, len(queue))), key=lambda k: queue[k].vtime)
        picks += 1
        return queue.pop(i)

    def start(now, cpu):
        t = pick()
        ran = t.turn * (1 + rnd.uniform(-JITTER, JITTER))
        heapq.heappush(events, (now + ran, cpu, id(t), t, ran))

    for cpu in range(ncpu):
        start(0.0, cpu)
    while events:
        now, cpu, _, t, ran = heapq.heappop(events)
        if now > seconds:
            break
        t.cpu_s += ran
        t.vtime += ran / t.factor
        t.joined = picks
        queue.append(t)
        start(now, cpu)
    heavy = sum(t.cpu_s for t in tasks if t.heavy)
    light = sum(t.cpu_s for t in tasks if not t.heavy)
    return heavy / light


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="4,16,64,256")
    ap.add_argument("--windows", default="1,8,32,128")
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    print("cpus " + " ".join(f"window={w:<4}" for w in windows))
    for n in (int(c) for c in args.cpus.split(",")):
        print(f"{n:<4} " + " ".join(f"{ratio(n, w, args.seconds):<11.2f}" for w in windows))


if __name__ == "__main__":
    main()
