#!/usr/bin/env python3
"""Summarise scripts/bench.sh results: median, min-max spread and ratio to EEVDF per workload
metric, as Markdown and CSV, plus the data file and gnuplot script for the ratio chart.

    report.py RAW_CSV OUT_DIR LAYOUT
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
    ("hackbench_proc", "time_s"): ("lower", "ratio <= 1.0"),
    ("hackbench_thread", "time_s"): ("lower", "ratio <= 1.0"),
    ("pipe", "usec_per_rt"): ("lower", "ratio <= 1.0"),
    ("stress_cpu", "bogo_ops_s"): ("higher", "ratio >= 1.0"),
    ("stress_cpu", "host_cpus"): ("-", None),
    ("stress_cpu", "bogo_per_host_cpu_s"): ("higher", None),
    ("fairness", "jain"): ("higher", "value >= 0.98"),
    ("numa", "bogo_ops_s"): ("higher", None),
    ("numa", "node0_share"): ("higher", "value >= 0.95"),
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
    rows = []
    for r in raw_rows:
        if (r["workload"], r["metric"]) != ("stress_cpu", "bogo_ops_s"):
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
        rows.append(dict(r, metric="host_cpus", value=f"{cpus:.3f}"))
        rows.append(dict(r, metric="bogo_per_host_cpu_s", value=f"{v / cpus:.2f}"))
    return rows


def meets(x, op, lim):
    return x <= float(lim) if op == "<=" else x >= float(lim)


def paired_ratio(runs, base):
    """Median over rounds of run / EEVDF's run in the same round; None without such pairs."""
    r = [v / base[k] for k, v in runs.items() if base.get(k)]
    return statistics.median(r) if r else None


def main():
    raw, out, layout = sys.argv[1], sys.argv[2], sys.argv[3]
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
    scheds.sort(key=lambda s: (s != "eevdf", s != "scx_gmp", s))
    keys = sorted({k for k, _ in vals}, key=lambda k: (k[0] != "cyclictest", k))

    md = [f"Layout: {layout}. Median of rounds, [min-max], ratio to EEVDF (median/median; "
          "paired: the median of the rounds' own ratios, each run against EEVDF's run of the "
          "same round, which the host's drift between rounds moves less).", ""]
    md.append("| workload | metric | better | " + " | ".join(scheds) + " | target | scx_gmp met |")
    md.append("|---|---|---|" + "---|" * len(scheds) + "---|---|")
    rows = [["workload", "metric", "sched", "median", "min", "max", "n", "ratio_to_eevdf",
             "paired_ratio"]]
    chart = []
    for key in keys:
        better, target = METRICS.get(key, ("lower", None))
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
            rows.append([key[0], key[1], s, f"{med:.4g}", f"{min(v):.4g}", f"{max(v):.4g}", len(v),
                         f"{ratio:.3f}" if ratio is not None else "",
                         f"{paired:.3f}" if paired is not None and s != "eevdf" else ""])
            cell = f"{med:.4g} [{min(v):.4g}-{max(v):.4g}]"
            if ratio is not None and s != "eevdf":
                cell += f" ({ratio:.2f}x" + (f"; paired {paired:.2f}x)" if paired is not None else ")")
                if not key[0].startswith("overhead") and better != "-":
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
        md.append(f"| {key[0]} | {key[1]} | {better} | " + " | ".join(cells) + f" | {target or ''} | {met} |")
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
        f.write(f"""set terminal pngcairo size 1100,560 font ',10' noenhanced
set output '{out}/bench.png'
set title "Ratio to EEVDF, median of rounds: below 1 is better for times and latency, above 1 for throughput and fairness\\n{layout}"
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
