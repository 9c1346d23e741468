#!/usr/bin/env python3
"""Summarise scripts/bench.sh results: median, min-max spread and ratio to EEVDF per workload
metric, the best peer scheduler's median and scx_gmp's ratio to it, as Markdown and CSV, plus
the data file and gnuplot script for the ratio chart.

    report.py RAW_CSV OUT_DIR LAYOUT ["PEER PEER..." [NR_NODES]]

PEERs are the published schedulers bench.sh ran for comparison; NR_NODES is the guest's node
count (0 or absent: unknown); OUT_DIR/status, if present, holds one line per scheduler that
was left out, printed under the table.
"""
import csv
import statistics
import sys
from collections import defaultdict

# Which direction is better, and the target (ratio to EEVDF or absolute) from issue 7.
METRICS = {
    ("cyclictest", "p50_us"): ("lower", None),
    ("cyclictest", "p99_us"): ("lower", "ratio <= 0.8"),
    ("cyclictest", "max_us"): ("lower", None),
    ("pipe", "usec_per_rt"): ("lower", "ratio <= 1.0"),
    ("stress_cpu", "bogo_ops_s"): ("higher", "ratio >= 1.0"),
    ("stress_cpu", "host_cpus"): ("-", None),
    ("stress_cpu", "bogo_per_host_cpu_s"): ("higher", None),
    ("stress_cpu", "cpus"): ("-", None),
    ("stress_cpu", "bogo_per_cpu_s"): ("higher", None),
    ("fairness", "jain"): ("higher", "value >= 0.98"),
    ("numa", "bogo_ops_s"): ("higher", None),
    ("numa", "node0_share"): ("higher", "value >= 0.95"),
    ("numa", "hint_faults"): ("-", None),
    ("numa", "pages_migrated"): ("-", None),
    ("numa", "switches"): ("-", None),
    ("numa", "migrations"): ("-", None),
}
# hackbench_{proc,thread}_gN for every group count: the same direction and target.
HACKBENCH = ("lower", "ratio <= 1.0")
# The frame-time workload and its SCHED_FIFO floor (guest.sh w_frames).
# Targets: fewer late frames than EEVDF, counted per refresh (frames.c: late_or_skipped), with
# the background's throughput at least 0.95x EEVDF's.
FRAMES = {
    "late_or_skipped": ("lower", "ratio < 1.0"),
    "late_gt2ms": ("lower", None),
    "late_gt2ms_pct": ("lower", None),
    "p99_late_ms": ("lower", None),
    "missed_pct": ("lower", None),
    "bg_cpu_bogo_ops_s": ("higher", "ratio >= 0.95"),
    "bg_fork_bogo_ops_s": ("higher", "ratio >= 0.95"),
    "cpu_ms_per_frame": ("-", None),
    "host_cpus": ("-", None),
    "bg_cpu_per_host_cpu_s": ("higher", None),
    "bg_fork_per_host_cpu_s": ("higher", None),
    "bg_cpu_cpus": ("-", None),
    "bg_fork_cpus": ("-", None),
    "bg_cpu_per_cpu_s": ("higher", None),
    "bg_fork_per_cpu_s": ("higher", None),
}


# Runs under EEVDF only that a workload's row is read against (the SCHED_FIFO floors, NUMA
# balancing off): that workload's direction, and no target, since no scheduler is judged on them.
REFERENCE = {"cyclictest_rt_floor": "cyclictest", "frametime_rt_floor": "frametime",
             "numa_balancing_off": "numa"}


def metric(key):
    """(better, target) of a workload metric: lower, higher or "-" (no direction)."""
    w, m = key
    if w.startswith("hackbench_"):
        return HACKBENCH
    if w in REFERENCE:
        return (metric((REFERENCE[w], m))[0], None)
    if w == "frametime":
        return FRAMES.get(m, ("lower", None))
    if w.startswith("trace_"):  # guest.sh w_trace: diagnostics of where time went
        return ("-", None)
    return METRICS.get(key, ("lower", None))


# Throughputs divided by the host CPU the VM got during their run (host_rows), and the rows
# that hold the quotient. Each run is marked in guest.sh (w_stress, frames_run).
PER_HOST_CPU = {
    ("stress_cpu", "bogo_ops_s"): "bogo_per_host_cpu_s",
    ("frametime", "bg_cpu_bogo_ops_s"): "bg_cpu_per_host_cpu_s",
    ("frametime", "bg_fork_bogo_ops_s"): "bg_fork_per_host_cpu_s",
}


def host_rows(out, raw_rows):
    """Rows for the host CPU the VM got during each marked run, from bench.sh's host sampler
    (host.samp: "epoch qemu_cpu_seconds marks_seen") and the guest's marks ("round,sched,
    workload,start|end"): host_cpus = qemu CPU time / wall time between the two marks, and the
    run's throughput divided by it. Under emulation the VM's share of the host drifts with the
    outer host, and this separates that drift from what the scheduler did with the CPU."""
    try:
        samp = [tuple(float(x) for x in l.split()) for l in open(f"{out}/host.samp")]
        marks = [l.strip().split(",") for l in open(f"{out}/marks") if l.strip()]
    except (OSError, ValueError):
        return []
    samp = [s for s in samp if len(s) == 3]

    def seen_at(i):  # host time of the first sample that saw mark i
        return next((s for s in samp if s[2] >= i + 1), None)

    at = {}
    for i, m in enumerate(marks):
        if len(m) == 4:
            at[tuple(m)] = seen_at(i)
    rows, counted = [], set()
    for r in raw_rows:
        w = "frametime" if r["workload"].startswith("frametime") else r["workload"]
        per_cpu = PER_HOST_CPU.get((w, r["metric"]))
        if not per_cpu:
            continue
        k = (r["round"], r["sched"], r["workload"])
        a, b = at.get(k + ("start",)), at.get(k + ("end",))
        try:
            v = float(r["value"])
        except ValueError:
            continue
        if not a or not b or b[0] <= a[0] or b[1] <= a[1]:
            continue
        cpus = (b[1] - a[1]) / (b[0] - a[0])
        if k not in counted:
            counted.add(k)
            rows.append(dict(r, metric="host_cpus", value=f"{cpus:.3f}"))
        rows.append(dict(r, metric=per_cpu, value=f"{v / cpus:.2f}"))
    return rows


def meets(x, op, lim):
    return {"<": x < float(lim), "<=": x <= float(lim), ">=": x >= float(lim)}[op]


def paired_ratio(runs, base):
    """Median over rounds of run / EEVDF's run in the same round; None without such pairs."""
    r = [v / base[k] for k, v in runs.items() if base.get(k)]
    return statistics.median(r) if r else None


def fmt_ratio(ratio, paired):
    if ratio is None:
        return ""
    return f"{ratio:.2f}x" + (f"; paired {paired:.2f}x" if paired is not None else "")


def best_peer(key, better, peers, vals):
    """The peer with the best median for this metric, and that median; None without one.
    A peer with fewer runs of it than EEVDF is not chosen: it stalled or was ejected in some
    round, and the median of the runs it finished would stand for a scheduler that failed."""
    rounds = len(vals.get((key, "eevdf"), []))
    meds = [(statistics.median(vals[(key, p)]), p) for p in peers
            if vals.get((key, p)) and len(vals[(key, p)]) >= rounds]
    # Each scheduler's overhead rows name its own BPF programs: nothing to compare across.
    if not meds or better not in ("lower", "higher") or key[0] == "overhead":
        return None
    return (min if better == "lower" else max)(meds)


EMULATED_NUMA = (
    "Under software emulation this bogo-ops figure is not a NUMA gain: qemu's memory is flat, "
    "and the same threads on the same node's CPUs, with the same host CPU per vCPU, read several "
    "times apart under different schedulers and between boots; node0_share is the placement "
    "figure (docs/benchmarks.md, \"The NUMA row is neither NUMA balancing nor placement\")."
)


ONE_NODE = ("numa: left out, the guest has one node: with no node to choose between, the "
            "memory-bound load says nothing about placement.")


def numa_note(vals, by_round, layout="", nr_nodes=0):
    """What the EEVDF run with NUMA balancing off says about the numa row, and under emulation
    what its bogo-ops do not say. On one node (@nr_nodes, as the guest counted them; 0 when
    unknown), where neither NUMA balancing nor placement has a choice to make, the guest leaves
    the load out: say so."""
    on, off = (("numa", "bogo_ops_s"), "eevdf"), (("numa_balancing_off", "bogo_ops_s"), "eevdf")
    if nr_nodes == 1:
        return [] if vals.get(on) else [ONE_NODE]
    if not vals.get(on) or not vals.get(off):
        return []
    m_on, m_off = statistics.median(vals[on]), statistics.median(vals[off])
    p = paired_ratio(by_round[off], by_round[on])
    line = (f"NUMA balancing: EEVDF's memory-bound numa load read {m_on:.4g} bogo-ops/s with "
            f"automatic NUMA balancing on (the default) and {m_off:.4g} with it off "
            f"({fmt_ratio(m_off / m_on if m_on else None, p)})")
    g = (("numa", "bogo_ops_s"), "scx_gmp")
    if vals.get(g) and m_off:
        m_gmp = statistics.median(vals[g])
        line += (f"; scx_gmp's {m_gmp:.4g} is {fmt_ratio(m_gmp / m_off, None)} EEVDF's with "
                 f"balancing off (paired {paired_ratio(by_round[g], by_round[off]) or 0:.2f}x)")
    f_on, f_off = (("numa", "hint_faults"), "eevdf"), (("numa_balancing_off", "hint_faults"), "eevdf")
    if vals.get(f_on) and vals.get(f_off):
        line += (f". NUMA hinting faults per run: {statistics.median(vals[f_on]):.0f} on, "
                 f"{statistics.median(vals[f_off]):.0f} off")
    line += "."
    if "software emulation" in layout:
        line += " " + EMULATED_NUMA
    return [line]


def main():
    raw, out, layout = sys.argv[1], sys.argv[2], sys.argv[3]
    peers = sys.argv[4].split() if len(sys.argv) > 4 else []
    nr_nodes = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5].isdigit() else 0
    vals = defaultdict(list)
    by_round = defaultdict(dict)
    scheds = []
    with open(raw) as f:
        raw_rows = list(csv.DictReader(f))
    for row in raw_rows + host_rows(out, raw_rows):
        try:
            v = float(row["value"])
        except (TypeError, ValueError):
            continue
        key = (row["workload"], row["metric"])
        vals[(key, row["sched"])].append(v)
        by_round[(key, row["sched"])][row["round"]] = v
        if row["sched"] not in scheds:
            scheds.append(row["sched"])
    peers = [p for p in peers if p in scheds]
    scheds.sort(key=lambda s: (s != "eevdf", s != "scx_gmp", s not in peers,
                               peers.index(s) if s in peers else 0, s))

    def order(k):  # cyclictest first, hackbench by kind then group count, the rest by name
        w = k[0]
        if w.startswith("hackbench_"):
            kind, _, g = w[len("hackbench_"):].partition("_g")
            return (1, "hackbench", kind, int(g) if g.isdigit() else 0, k[1])
        return (0 if w.startswith("cyclictest") else 1, w, "", 0, k[1])
    keys = sorted({k for k, _ in vals}, key=order)

    md = [f"Layout: {layout}. Median of rounds, [min-max], ratio to EEVDF (median/median; "
          "paired: the median of the rounds' own ratios, each run against EEVDF's run of the "
          "same round, which the host's drift between rounds moves less). Best peer: the peer "
          "scheduler with the best median (" + (", ".join(peers) or "none ran") + ") over "
          "as many runs as EEVDF's; scx_gmp's ratio to it is paired the same way.", ""]
    md.append("| workload | metric | better | " + " | ".join(scheds) +
              " | best peer | scx_gmp / best peer | target | scx_gmp met |")
    md.append("|---|---|---|" + "---|" * len(scheds) + "---|---|---|---|")
    rows = [["workload", "metric", "sched", "median", "min", "max", "n", "ratio_to_eevdf",
             "paired_ratio", "ratio_to_best_peer", "paired_ratio_to_best_peer"]]
    chart = []
    for key in keys:
        better, target = metric(key)
        best = best_peer(key, better, peers, vals)
        gmp = vals.get((key, "scx_gmp"))
        to_best = to_best_paired = None
        if best and gmp and best[0]:
            to_best = statistics.median(gmp) / best[0]
            to_best_paired = paired_ratio(by_round[(key, "scx_gmp")], by_round[(key, best[1])])
        base = vals.get((key, "eevdf"))
        base_med = statistics.median(base) if base else None
        cells = []
        met = ""
        for s in scheds:
            v = vals.get((key, s))
            if not v:
                cells.append("-")
                continue
            med = statistics.median(v)
            ratio = med / base_med if base_med else None
            paired = paired_ratio(by_round[(key, s)], by_round[(key, "eevdf")])
            gmp_row = s == "scx_gmp"
            rows.append([key[0], key[1], s, f"{med:.4g}", f"{min(v):.4g}", f"{max(v):.4g}", len(v),
                         f"{ratio:.3f}" if ratio is not None else "",
                         f"{paired:.3f}" if paired is not None and s != "eevdf" else "",
                         f"{to_best:.3f}" if gmp_row and to_best is not None else "",
                         f"{to_best_paired:.3f}" if gmp_row and to_best_paired is not None else ""])
            cell = f"{med:.4g} [{min(v):.4g}-{max(v):.4g}]"
            if ratio is not None and s != "eevdf":
                cell += f" ({ratio:.2f}x" + (f"; paired {paired:.2f}x)" if paired is not None else ")")
                # late_gt2ms_pct carries the same ratio as the count.
                if not key[0].startswith("overhead") and better != "-" and key[1] != "late_gt2ms":
                    chart.append((f"{key[0]}:{key[1]}", s, ratio))
            cells.append(cell)
            if s == "scx_gmp" and target:
                what, op, lim = target.split()
                x = ratio if what == "ratio" else med
                if x is not None:
                    ok = meets(x, op, lim)
                    met = "yes" if ok else "no"
                    # A ratio target counts as met only if the paired ratio agrees: a win
                    # or loss that only the medians show is the host's drift between rounds.
                    if what == "ratio" and paired is not None and meets(paired, op, lim) != ok:
                        met = f"median only (paired {paired:.2f}x)" if ok else f"paired only ({paired:.2f}x)"
        best_cell = f"{best[0]:.4g} ({best[1]})" if best else "-"
        md.append(f"| {key[0]} | {key[1]} | {better} | " + " | ".join(cells) +
                  f" | {best_cell} | {fmt_ratio(to_best, to_best_paired)} | {target or ''} | {met} |")
    notes = numa_note(vals, by_round, layout, nr_nodes)
    try:
        notes += [l.strip() for l in open(f"{out}/status") if l.strip()]
    except OSError:
        pass
    if notes:
        md += [""] + [f"- {n}" for n in notes]
    with open(f"{out}/bench.md", "w") as f:
        f.write("\n".join(md) + "\n")
    with open(f"{out}/bench.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    others = [s for s in scheds if s != "eevdf"]
    labels = []
    for label, _, _ in chart:
        if label not in labels:
            labels.append(label)
    with open(f"{out}/ratios.dat", "w") as f:
        # A comment: as a data row, gnuplot would plot the header as an empty first bar.
        f.write("# metric " + " ".join(others) + "\n")
        for l in labels:
            f.write(l + " " + " ".join(
                next((f"{r:.4f}" for (ll, s, r) in chart if ll == l and s == o), "NaN") for o in others) + "\n")
    cols = ", ".join(f"'' u {i + 2}:xtic(1) t '{o}'" if i else f"'{out}/ratios.dat' u {i + 2}:xtic(1) t '{o}'"
                     for i, o in enumerate(others))
    with open(f"{out}/ratios.gp", "w") as f:
        # noenhanced: names such as scx_gmp and p99_us are not gnuplot subscripts. The title
        # is two lines so that the layout fits the chart's width.
        # Wide enough for every metric's cluster of bars, one bar per scheduler.
        width = max(1100, 40 + len(labels) * (12 * len(others) + 16))
        f.write(f"""set terminal pngcairo size {width},600 font ',10' noenhanced
set output '{out}/bench.png'
set title "Ratio to EEVDF (the dashed line), median of rounds: below 1 is better for times and latency, above 1 for throughput and fairness\\n{layout}"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set xtics rotate by -30
set rmargin 16
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb 'black'
set yrange [0:*]
plot {cols}
""")
    print("\n".join(md))


if __name__ == "__main__":
    main()
