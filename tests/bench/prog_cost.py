#!/usr/bin/env python3
"""Each sched_ext BPF program's average ns per call between two `bpftool -j prog show`
snapshots (kernel.bpf_stats_enabled on): lines "ns_NAME NS", and with --calls also
"calls_NAME COUNT".

    prog_cost.py BEFORE.json AFTER.json [--calls]
"""
import json
import sys


def main():
    before = {p["id"]: p for p in json.load(open(sys.argv[1]))}
    calls = "--calls" in sys.argv[3:]
    for p in json.load(open(sys.argv[2])):
        if p.get("type") != "struct_ops":
            continue
        q = before.get(p["id"], {})
        cnt = p.get("run_cnt", 0) - q.get("run_cnt", 0)
        ns = p.get("run_time_ns", 0) - q.get("run_time_ns", 0)
        if cnt > 0:
            print("ns_%s" % p["name"], "%.0f" % (ns / cnt))
            if calls:
                print("calls_%s" % p["name"], cnt)


if __name__ == "__main__":
    main()
