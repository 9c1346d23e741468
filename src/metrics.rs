//! The stats as they travel over the scx_stats protocol (`--monitor`, scxtop and other tools),
//! the stats server's setup with every described type, `--help-stats` generated from those
//! descriptions, and the printer that turns two readings into one interval's report.
//! `--stats` in the scheduler's own process goes through the same printer.

use crate::stats::{Counters, Gauges, Report, Sample, WaitRec};
use scx_stats::{Meta, StatsData, StatsKind, StatsMeta, StatsServerData, ToJson};
use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

// What the stats server sends. The counters are cumulative: several clients may attach at
// once, and each takes its own interval deltas.

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(desc = "one CPU: where it is, its queue, its counters")]
pub struct CpuMetrics {
    #[stat(desc = "the CPU's NUMA node")]
    pub node: u32,
    #[stat(desc = "tasks in the CPU's local queue (cpu_dsq) now")]
    pub local_queued: u32,
    #[stat(desc = "the CPU's counters, cumulative")]
    pub counters: Counters,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(desc = "one NUMA node: its shared queue, its CPUs, its counters")]
pub struct NodeMetrics {
    #[stat(desc = "tasks in the node's shared queue (shared_dsq) now")]
    pub shared_queued: u32,
    #[stat(desc = "the node's CPUs, by id")]
    pub cpus: Vec<u32>,
    #[stat(desc = "the counters summed over the node's CPUs, cumulative")]
    pub counters: Counters,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, Stats)]
#[stat(
    top,
    desc = "the stats server's reply (scx_gmp --monitor, scx_gmp top, other tools): \
            state now and cumulative counters"
)]
pub struct Metrics {
    #[stat(desc = "milliseconds since scx_gmp started")]
    pub ts_ms: u64,
    #[stat(desc = "CPUs scx_gmp dispatches ordinary work to (the procs)")]
    pub procs: Vec<u32>,
    #[stat(desc = "procs running no scx_gmp task right now")]
    pub idle_procs: u64,
    #[stat(desc = "reloads after CPU hotplug")]
    pub restarts: u64,
    #[stat(desc = "per-task states held by the BPF side (one per task it schedules)")]
    pub task_ctxs: i64,
    #[stat(desc = "per-cgroup states held by the BPF side (one per cgroup)")]
    pub cgrp_ctxs: i64,
    #[stat(
        desc = "the root cgroup's active child cgroups and runnable tasks, as cgroup weights \
                count them"
    )]
    pub cgrp_root_active: i64,
    #[stat(desc = "the counters summed over every CPU, cumulative")]
    pub total: Counters,
    #[stat(desc = "per CPU, by CPU id")]
    pub cpus: BTreeMap<u32, CpuMetrics>,
    #[stat(desc = "per NUMA node, by node id")]
    pub nodes: BTreeMap<u32, NodeMetrics>,
    #[stat(
        desc = "wakeup-to-run latency histogram: exact below 4 us, then 4 buckets per power of two"
    )]
    pub lat_hist: Vec<u64>,
    #[stat(desc = "longest wait to run in the last second (us)")]
    pub longest_wait_us: u64,
    #[stat(desc = "pid of the task that waited longest")]
    pub longest_wait_pid: i32,
    #[stat(desc = "command of the task that waited longest")]
    pub longest_wait_comm: String,
    #[stat(desc = "1 if that task was still queued when seen")]
    pub longest_wait_still: u64,
    #[stat(desc = "--starve-warn-ms")]
    pub starve_warn_ms: u64,
}

impl Metrics {
    pub fn new(ts_ms: u64, sample: &Sample, g: &Gauges) -> Self {
        let ncpu = sample
            .per_cpu
            .len()
            .max(g.cpu_node.len())
            .max(g.local_queued.len());
        let node_of = |c: usize| g.cpu_node.get(c).copied().unwrap_or(0);
        let cpus = (0..ncpu)
            .map(|c| {
                let m = CpuMetrics {
                    node: node_of(c),
                    local_queued: g.local_queued.get(c).copied().unwrap_or(0),
                    counters: sample.cpu(c).clone(),
                };
                (c as u32, m)
            })
            .collect();
        let per_node = sample.per_node(&g.cpu_node, g.shared_queued.len());
        let nodes = g
            .shared_queued
            .iter()
            .zip(per_node)
            .enumerate()
            .map(|(n, (&shared_queued, counters))| {
                let m = NodeMetrics {
                    shared_queued,
                    cpus: (0..ncpu)
                        .filter(|&c| node_of(c) == n as u32)
                        .map(|c| c as u32)
                        .collect(),
                    counters,
                };
                (n as u32, m)
            })
            .collect();
        Self {
            ts_ms,
            procs: g.procs.iter().map(|&c| c as u32).collect(),
            idle_procs: g.idle_procs as u64,
            restarts: g.restarts,
            task_ctxs: g.task_ctxs,
            cgrp_ctxs: g.cgrp_ctxs,
            cgrp_root_active: g.cgrp_root_active,
            total: sample.total(),
            cpus,
            nodes,
            lat_hist: sample.lat.clone(),
            longest_wait_us: g.longest_wait.wait_us,
            longest_wait_pid: g.longest_wait.pid,
            longest_wait_comm: g.longest_wait.comm.clone(),
            longest_wait_still: g.longest_wait.still_waiting as u64,
            starve_warn_ms: g.starve_warn_ms,
        }
    }

    /// A value of every CPU, by CPU id (0 for an id the reading lacks).
    fn by_cpu<T: Clone + Default>(&self, f: impl Fn(&CpuMetrics) -> T) -> Vec<T> {
        let n = self
            .cpus
            .keys()
            .next_back()
            .map(|&c| c as usize + 1)
            .unwrap_or(0);
        let mut v = vec![T::default(); n];
        for (&c, m) in &self.cpus {
            v[c as usize] = f(m);
        }
        v
    }

    pub fn sample(&self) -> Sample {
        Sample {
            per_cpu: self.by_cpu(|m| m.counters.clone()),
            lat: self.lat_hist.clone(),
        }
    }

    /// The interval from `prev` to this reading: counter deltas, gauges now, and its length
    /// in seconds.
    pub fn since(&self, prev: &Metrics) -> (Sample, Gauges, f64) {
        let d = self.sample().delta(&prev.sample());
        let interval_s = self.ts_ms.saturating_sub(prev.ts_ms) as f64 / 1000.0;
        (d, self.gauges(), interval_s)
    }

    pub fn gauges(&self) -> Gauges {
        Gauges {
            procs: self.procs.iter().map(|&c| c as usize).collect(),
            idle_procs: self.idle_procs as usize,
            local_queued: self.by_cpu(|m| m.local_queued),
            shared_queued: self.nodes.values().map(|m| m.shared_queued).collect(),
            homeless_running: Vec::new(),
            restarts: self.restarts,
            task_ctxs: self.task_ctxs,
            cgrp_ctxs: self.cgrp_ctxs,
            cgrp_root_active: self.cgrp_root_active,
            cpu_node: self.by_cpu(|m| m.node),
            longest_wait: WaitRec {
                wait_us: self.longest_wait_us,
                pid: self.longest_wait_pid,
                comm: self.longest_wait_comm.clone(),
                still_waiting: self.longest_wait_still != 0,
            },
            starve_warn_ms: self.starve_warn_ms,
        }
    }
}

/// The described types, for the stats server's clients and `--help-stats` (which keeps this
/// order): the counters, the `--json` interval report, then what the server serves.
pub fn metas() -> Vec<scx_stats::StatsMeta> {
    use crate::stats::*;
    vec![
        Counters::meta(),
        Interval::meta(),
        Dispatch::meta(),
        Enqueue::meta(),
        Preempt::meta(),
        Kicks::meta(),
        Numa::meta(),
        NumaNode::meta(),
        Starvation::meta(),
        Latency::meta(),
        Ctx::meta(),
        Bool::meta(),
        Metrics::meta(),
        CpuMetrics::meta(),
        NodeMetrics::meta(),
    ]
}

/// The stats server's types and its one target: each request sends the run loop a () and
/// serves the reading it sends back (sched.rs answers between its ticks).
pub fn server_data() -> StatsServerData<(), Metrics> {
    metas()
        .into_iter()
        .fold(StatsServerData::new(), StatsServerData::add_meta)
        .add_stats(
            "top",
            Box::new(|_args, (tx, rx)| {
                tx.send(())?;
                rx.recv()?.to_json()
            }),
        )
}

/// Output formats of an interval report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Format {
    pub json: bool,
    pub detail: bool,
}

/// Turns successive readings into interval reports.
#[derive(Default)]
pub struct Printer {
    prev: Option<Metrics>,
    format: Format,
}

impl Printer {
    pub fn new(format: Format) -> Self {
        Self { prev: None, format }
    }

    /// The report for the interval ending with `cur`; None for the first reading.
    pub fn feed(&mut self, cur: Metrics) -> Option<String> {
        let prev = self.prev.replace(cur.clone())?;
        if cur.ts_ms <= prev.ts_ms {
            return None;
        }
        let (d, g, interval_s) = cur.since(&prev);
        let r = Report {
            elapsed_ms: cur.ts_ms,
            interval_s,
            d: &d,
            g: &g,
        };
        Some(if self.format.json {
            r.to_json().to_string()
        } else if self.format.detail {
            format!("{}\n{}", r.to_schedtrace(), detail(&r))
        } else {
            r.to_schedtrace()
        })
    }
}

/// Attach to the running scx_gmp's stats server and print a report every `interval_s`
/// seconds until `shutdown` is set (`--monitor`, and `top` when stdout is not a terminal).
pub fn print_stream(interval_s: f64, format: Format, shutdown: &AtomicBool) -> anyhow::Result<()> {
    let mut printer = Printer::new(format);
    scx_utils::monitor_stats::<Metrics>(
        &[],
        Duration::from_secs_f64(interval_s),
        || shutdown.load(Ordering::Relaxed),
        |m| {
            if let Some(report) = printer.feed(m) {
                println!("{report}");
            }
            Ok(())
        },
    )
}

/// Go's scheddetail: a line per node and per CPU.
fn detail(r: &Report) -> String {
    let mut out = String::new();
    let cpu_node = &r.g.cpu_node;
    let d = r.d;
    let nodes = r.g.shared_queued.len();
    for n in 0..nodes {
        let cpus: Vec<usize> =
            r.g.procs
                .iter()
                .copied()
                .filter(|&c| cpu_node.get(c) == Some(&(n as u32)))
                .collect();
        let busy: f64 = cpus.iter().map(|&c| r.busy_pct(c)).sum::<f64>() / cpus.len().max(1) as f64;
        let _ = writeln!(
            out,
            "  node{n}: cpus={} runqueue={} busy={busy:.0}%",
            crate::topo::cpulist(&cpus),
            r.g.shared_queued[n]
        );
    }
    for &c in &r.g.procs {
        let v = d.cpu(c);
        let _ = writeln!(
            out,
            "  P{c}: node={} runq={} busy={:.0}% local={} runnext={} shared={} fair={} steals_in={}/{} stolen_out={} preempt={}+{} keep={}",
            cpu_node.get(c).copied().unwrap_or(0),
            r.g.local_queued.get(c).copied().unwrap_or(0),
            r.busy_pct(c),
            v.disp_local,
            v.disp_runnext,
            v.disp_shared,
            v.disp_fair_tick,
            v.disp_steal_llc + v.disp_steal_node + v.disp_steal_remote,
            v.stolen_tasks,
            v.stolen_out,
            v.preempt_sysmon,
            v.preempt_slice,
            v.disp_keep_prev,
        );
    }
    out.pop();
    out
}

/// The described type a field holds, directly or as the elements of an array or map.
fn struct_of(data: &StatsData) -> Option<&str> {
    match data {
        StatsData::Datum(StatsKind::Struct(t))
        | StatsData::Array(StatsKind::Struct(t))
        | StatsData::Dict {
            datum: StatsKind::Struct(t),
            ..
        } => Some(t),
        _ => None,
    }
}

/// `--help-stats`: every field of the described types, one line each, from their metas (the
/// same descriptions the stats server gives its clients). A type held by several fields (the
/// counters) gets a section of its own first; then each top-level type's fields are walked
/// down, their paths written as jq paths (`x[]` is every element of array or map x).
pub fn help_stats() -> String {
    let metas = metas();
    let by_name: BTreeMap<&str, &StatsMeta> = metas.iter().map(|m| (m.name.as_str(), m)).collect();
    let mut held: BTreeMap<&str, usize> = BTreeMap::new();
    for f in metas.iter().flat_map(|m| m.fields.values()) {
        if let Some(t) = struct_of(&f.data) {
            *held.entry(t).or_default() += 1;
        }
    }
    let shared = metas
        .iter()
        .filter(|m| held.get(m.name.as_str()) > Some(&1));
    let tops = metas.iter().filter(|m| !held.contains_key(m.name.as_str()));
    let sections: Vec<&StatsMeta> = shared.chain(tops).collect();
    let section_names: Vec<&str> = sections.iter().map(|m| m.name.as_str()).collect();

    let mut out = String::new();
    for m in sections {
        let mut rows = Vec::new();
        help_rows(&by_name, &section_names, m, "", &mut rows);
        let pw = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let kw = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "[{}] {}",
            m.name,
            m.attrs.desc.as_deref().unwrap_or("")
        );
        for (path, kind, desc) in rows {
            let _ = writeln!(out, "  {path:pw$} {kind:kw$} : {desc}");
        }
    }
    out
}

/// The lines of `m`'s fields under `prefix`, and of the fields of the types they hold but
/// those with a section of their own.
fn help_rows(
    by_name: &BTreeMap<&str, &StatsMeta>,
    sections: &[&str],
    m: &StatsMeta,
    prefix: &str,
    rows: &mut Vec<(String, String, String)>,
) {
    for (name, f) in &m.fields {
        let path = format!("{prefix}{name}");
        let desc = f.attrs.desc.clone().unwrap_or_default();
        rows.push((path.clone(), format!("({})", f.data), desc));
        let Some(inner) = struct_of(&f.data).filter(|t| !sections.contains(t)) else {
            continue;
        };
        let Some(inner) = by_name.get(inner) else {
            continue;
        };
        let sub = match f.data {
            StatsData::Datum(_) => format!("{path}."),
            _ => format!("{path}[]."),
        };
        help_rows(by_name, sections, inner, &sub, rows);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::NR_STATS;

    /// A reading of 4 CPUs on 2 nodes, CPU 2 out of the procs, where every counter of every
    /// CPU has its own value (k times the slot's and the CPU's number) and the CPUs ran
    /// k/8 s, 2k/8 s, ... in all: a field read from the wrong place shows.
    pub(crate) fn varied(ts: u64, k: u64) -> Metrics {
        let busy = crate::bpf_intf::gmp_stat_ST_BUSY_NS as usize;
        let per_cpu = (0..4u64)
            .map(|c| {
                let mut v: Vec<u64> = (0..NR_STATS as u64)
                    .map(|i| k * (i + 1) * (c + 1))
                    .collect();
                v[busy] = k * 125_000_000 * (c + 1);
                Counters::from_slots(&v)
            })
            .collect();
        let sample = Sample {
            per_cpu,
            lat: (0..crate::stats::NR_LAT_BUCKETS as u64)
                .map(|b| k * (b % 5))
                .collect(),
        };
        let g = Gauges {
            procs: vec![0, 1, 3],
            idle_procs: 1,
            local_queued: vec![3, 0, 1, 5],
            shared_queued: vec![2, 7],
            homeless_running: Vec::new(),
            restarts: 1,
            task_ctxs: 12,
            cgrp_ctxs: 3,
            cgrp_root_active: 2,
            cpu_node: vec![0, 0, 1, 1],
            longest_wait: WaitRec {
                wait_us: 1500 * k,
                pid: 7,
                comm: "sh".into(),
                still_waiting: false,
            },
            starve_warn_ms: 500,
        };
        Metrics::new(ts, &sample, &g)
    }

    /// What a printer in `format` prints for the interval from `a` to `b` (nothing for `a`).
    fn interval(json: bool, detail: bool, a: Metrics, b: Metrics) -> String {
        let mut p = Printer::new(Format { json, detail });
        assert!(p.feed(a).is_none());
        p.feed(b).unwrap()
    }

    /// The whole --stats-detail output for one interval, as it was before the counters got
    /// named fields.
    #[test]
    fn detail_is_pinned() {
        let out = interval(false, true, varied(1000, 1), varied(2000, 3));
        let want = [
            "SCHED 2000ms: procs=3 idle=1 runqueue=9 [3 0 5] runnext=40 local=20 shared=60 \
             fair=80 steals=360/180 preempt=340+360+600 kicks=380 numa=49% p50=12288us \
             p99=67108864us max=67108864us maxwait=4ms CTX_ALLOC_FAIL=800 KICK_STUCK=820 \
             STARVING=700 longest=pid 7 (sh) waited 4ms",
            "  node0: cpus=0-1 runqueue=2 busy=38%",
            "  node1: cpus=3 runqueue=7 busy=100%",
            "  P0: node=0 runq=3 busy=25% local=2 runnext=4 shared=6 fair=8 steals_in=36/18 \
             stolen_out=58 preempt=34+36 keep=16",
            "  P1: node=0 runq=0 busy=50% local=4 runnext=8 shared=12 fair=16 steals_in=72/36 \
             stolen_out=116 preempt=68+72 keep=32",
            "  P3: node=1 runq=5 busy=100% local=8 runnext=16 shared=24 fair=32 \
             steals_in=144/72 stolen_out=232 preempt=136+144 keep=64",
        ];
        assert_eq!(out, want.join("\n"));
    }

    fn metrics(ts: u64, k: u64) -> Metrics {
        let sample = Sample {
            per_cpu: vec![
                Counters::from_slots(&[k; NR_STATS]),
                Counters::from_slots(&[2 * k; NR_STATS]),
            ],
            lat: vec![k; crate::stats::NR_LAT_BUCKETS],
        };
        let g = Gauges {
            procs: vec![0, 1],
            idle_procs: 1,
            local_queued: vec![1, 2],
            shared_queued: vec![3],
            cpu_node: vec![0, 0],
            ..Default::default()
        };
        Metrics::new(ts, &sample, &g)
    }

    #[test]
    fn first_reading_prints_nothing_then_deltas() {
        let line = interval(true, false, metrics(1000, 1), metrics(2000, 3));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        // cpu0: 3-1, cpu1: 6-2
        assert_eq!(v["dispatch"]["local"], 2 + 4);
        assert_eq!(v["interval_s"], 1.0);
    }

    #[test]
    fn detail_has_a_line_per_node_and_cpu() {
        let out = interval(false, true, metrics(1000, 1), metrics(2000, 2));
        assert!(out.lines().next().unwrap().starts_with("SCHED 2000ms"));
        assert!(out.contains("  node0: cpus=0-1 runqueue=3"), "{out}");
        assert!(out.contains("  P1: node=0 runq=2"), "{out}");
    }

    /// Every struct a described field holds is described too, so that a client (and
    /// `--help-stats`) can follow every field down to numbers and strings.
    #[test]
    fn every_nested_type_is_registered() {
        use scx_stats::{StatsData, StatsKind};
        let metas = metas();
        let names: Vec<&str> = metas.iter().map(|m| m.name.as_str()).collect();
        for m in &metas {
            for (f, field) in &m.fields {
                let (StatsData::Datum(k) | StatsData::Array(k) | StatsData::Dict { datum: k, .. }) =
                    &field.data;
                if let StatsKind::Struct(inner) = k {
                    assert!(names.contains(&inner.as_str()), "{}.{f}: {inner}", m.name);
                }
            }
        }
    }

    #[test]
    fn served_stats_are_named() {
        let v = serde_json::to_value(varied(5, 1)).unwrap();
        // Counters by name: CPU c's slot i holds (i + 1) * (c + 1).
        assert_eq!(v["cpus"]["2"]["counters"]["disp_runnext"], 2 * 3);
        assert_eq!(v["cpus"]["2"]["node"], 1);
        assert_eq!(v["cpus"]["3"]["local_queued"], 5);
        assert_eq!(v["nodes"]["1"]["cpus"], serde_json::json!([2, 3]));
        assert_eq!(v["nodes"]["1"]["shared_queued"], 7);
        assert_eq!(v["nodes"]["1"]["counters"]["disp_local"], 3 + 4);
        assert_eq!(v["total"]["disp_local"], 1 + 2 + 3 + 4);
    }

    #[test]
    fn metrics_survive_json() {
        let m = varied(5, 7);
        let back: Metrics = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.sample().per_cpu, m.sample().per_cpu);
        assert_eq!(back.sample().lat, m.sample().lat);
        let (g, b) = (m.gauges(), back.gauges());
        assert_eq!(
            (b.local_queued, b.shared_queued, b.cpu_node, b.longest_wait),
            (g.local_queued, g.shared_queued, g.cpu_node, g.longest_wait)
        );
    }

    /// The paths `--help-stats` describes: each line's first word, under its section.
    fn help_paths() -> Vec<(String, String)> {
        let mut section = String::new();
        let mut paths = Vec::new();
        for line in help_stats().lines() {
            if let Some(rest) = line.strip_prefix('[') {
                section = rest.split(']').next().unwrap().to_string();
            } else if let Some(word) = line.strip_prefix("  ").and_then(|l| l.split(' ').next()) {
                paths.push((section.clone(), word.to_string()));
            }
        }
        paths
    }

    #[test]
    fn help_lists_every_counter() {
        let paths = help_paths();
        for n in Counters::meta().fields.keys() {
            assert!(paths.contains(&("Counters".into(), n.clone())), "{n}");
        }
    }

    #[test]
    fn help_lists_every_key_of_the_json() {
        let line = interval(true, false, varied(1000, 1), varied(2000, 3));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let paths = help_paths();
        for (key, _) in crate::stats::json_paths(&v) {
            // An array's elements are described by the array's line.
            if key.ends_with("[]") {
                continue;
            }
            assert!(paths.contains(&("Interval".into(), key.clone())), "{key}");
        }
    }

    #[test]
    fn every_field_is_described() {
        for m in metas() {
            assert!(m.attrs.desc.is_some_and(|d| !d.is_empty()), "{}", m.name);
            for (f, field) in m.fields {
                let desc = field.attrs.desc.unwrap_or_default();
                assert!(!desc.trim().is_empty(), "{}.{f}", m.name);
            }
        }
    }

    /// The library's own walk over the served types finds every type it needs.
    #[test]
    fn served_metas_describe() {
        let mut out = Vec::new();
        server_data().describe_meta(&mut out, None).unwrap();
        assert!(String::from_utf8(out).unwrap().starts_with("[Metrics"));
    }

    /// A client of the real server (on a socket of its own) gets back the reading the run
    /// loop answered with, field for field, and the described types.
    #[test]
    fn server_round_trip() {
        let dir = std::env::temp_dir().join(format!("scx_gmp-stats-test-{}", std::process::id()));
        let path = dir.join("stats");
        let server = scx_stats::StatsServer::new(server_data())
            .set_path(&path)
            .launch()
            .unwrap();
        let (tx, rx) = server.channels();
        let want = varied(5, 1);
        let reading = want.clone();
        std::thread::spawn(move || {
            while rx.recv().is_ok() {
                if tx.send(reading.clone()).is_err() {
                    break;
                }
            }
        });
        let mut client = scx_stats::StatsClient::new()
            .set_path(&path)
            .connect(None)
            .unwrap();
        let got: Metrics = client.request("stats", vec![]).unwrap();
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            serde_json::to_value(&want).unwrap()
        );
        let served: BTreeMap<String, StatsMeta> = client.request("stats_meta", vec![]).unwrap();
        for m in metas() {
            assert!(served.contains_key(&m.name), "{}", m.name);
        }
        drop(client);
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
