//! Opening, loading and attaching the BPF scheduler, and the loop that runs while it is loaded.

use crate::bpf_skel::*;
use crate::cli::Opts;
use crate::metrics::{Format, Metrics, Printer};
use crate::procs::{self, AutoProcs, ProcsSpec};
use crate::stats::{Gauges, Sample, WaitRec};
use crate::topo::{cpulist, TopoMaps};
use anyhow::{anyhow, Context, Result};
use crossbeam::channel::{Receiver, Sender};
use libbpf_rs::{MapCore, OpenObject};
use log::{info, warn};
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    topo: TopoMaps,
    restarts: u64,
    procs: ProcsState,
    longest_wait: WaitRec,
    starve_warn_ms: u64,
}

/// The processor set: CPUs in the order procs are added, how many are active, and in auto
/// mode the policy and the busy time it last saw.
struct ProcsState {
    order: Vec<usize>,
    active: usize,
    auto: Option<AutoProcs>,
    busy_ns: Vec<u64>,
    at: Instant,
}

impl ProcsState {
    fn active_cpus(&self) -> Vec<usize> {
        let mut v = self.order[..self.active].to_vec();
        v.sort_unstable();
        v
    }
}

/// How often the loader reads the longest waits and re-checks the procs (Go's sysmon
/// re-checks GOMAXPROCS about as often).
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// Saturation that makes auto mode grow before the next housekeeping (see fast_grow).
const FAST_GROW_AFTER: Duration = Duration::from_millis(100);

/// How the kernel names an exit kind (enum scx_exit_kind).
pub fn exit_kind_name(kind: i32) -> &'static str {
    match kind {
        0 => "none",
        1 => "done",
        64 => "unregistered by user space",
        65 => "unregistered by the BPF scheduler",
        66 => "unregistered by the kernel",
        67 => "SysRq-S",
        1024 => "runtime error",
        1025 => "scx_bpf_error",
        1026 => "watchdog stall",
        _ => "unknown",
    }
}

impl<'a> Scheduler<'a> {
    pub fn init(
        opts: &Opts,
        open_object: &'a mut MaybeUninit<OpenObject>,
        restarts: u64,
    ) -> Result<Self> {
        let mut topo = TopoMaps::from_system()?;
        if opts.no_numa {
            topo = topo.as_one_node()?;
        }
        let (order, active) =
            procs::resolve(&opts.procs, &topo.places, opts.procs_min, opts.procs_max)
                .map_err(|e| anyhow!(e))?;
        let auto = match opts.procs {
            ProcsSpec::Auto => {
                let (min, max) = procs::auto_bounds(opts.procs_min, opts.procs_max, order.len())
                    .map_err(|e| anyhow!(e))?;
                Some(AutoProcs::new(active, min, max))
            }
            _ => None,
        };
        info!("{}", topo.summary());
        let procs = ProcsState {
            order,
            active,
            auto,
            busy_ns: Vec::new(),
            at: Instant::now(),
        };
        info!(
            "procs ({}): {} of {} CPUs: [{}]{}",
            opts.procs,
            procs.active,
            topo.online.len(),
            cpulist(&procs.active_cpus()),
            match &procs.auto {
                Some(a) => format!(", growing and shrinking with the load (up to {})", a.max()),
                None => String::new(),
            }
        );

        // libbpf's messages reach the log through scx_utils (init_libbpf_logging), so the
        // builder's own debug switch, which would silence or redirect them, is left alone.
        let builder = BpfSkelBuilder::default();
        let mut skel = scx_ops_open!(
            builder,
            open_object,
            gmp_ops,
            None::<libbpf_rs::libbpf_sys::bpf_object_open_opts>
        )
        .context("failed to open the BPF scheduler")?;

        let ops = skel.struct_ops.gmp_ops_mut();
        ops.exit_dump_len = opts.exit_dump_len;
        if opts.no_numa {
            ops.flags &= !*scx_utils::compat::SCX_OPS_BUILTIN_IDLE_PER_NODE;
        }
        if opts.partial {
            ops.flags |= *scx_utils::compat::SCX_OPS_SWITCH_PARTIAL;
        }
        // Developer aid: GMP_VERIFIER_STATS=1 with -v logs the verifier's cost per program.
        if std::env::var_os("GMP_VERIFIER_STATS").is_some() {
            use libbpf_rs::skel::OpenSkel;
            for mut prog in skel.open_object_mut().progs_mut() {
                prog.set_log_level(4);
            }
        }
        let rodata = skel
            .maps
            .rodata_data
            .as_mut()
            .context("no rodata in the BPF object")?;
        rodata.nr_cpus = topo.nr_cpu_ids as u32;
        rodata.nr_nodes = topo.nr_nodes as u32;
        rodata.slice_ns = opts.slice_us * 1000;
        rodata.preempt_ns = opts.preempt_us * 1000;
        rodata.sysmon_ns = opts.sysmon_us * 1000;
        rodata.local_cap = opts.local_cap;
        rodata.fair_tick = opts.fair_tick;
        rodata.steal_max = opts.steal_max;
        rodata.numa_steal_min = opts.numa_steal_min;
        rodata.runnext_on = !opts.no_runnext;
        rodata.wakeup_preempt_ns = opts.wakeup_preempt_us * 1000;
        rodata.test_stall = opts.test_stall;
        rodata.numa_on = !opts.no_numa;
        rodata.cgroup_weights_on = !opts.no_cgroup_weights;
        rodata.starve_warn_ns = opts.starve_warn_ms * 1_000_000;
        for c in 0..topo.nr_cpu_ids {
            rodata.cpu_node[c] = topo.cpu_node[c];
            rodata.cpu_llc[c] = topo.cpu_llc[c];
        }
        for (n, c) in topo.node_rep_cpu().into_iter().enumerate() {
            rodata.node_rep_cpu[n] = c;
        }

        let tasks = task_ctx_capacity(read_threads_max());
        skel.maps
            .task_ctxs
            .set_max_entries(tasks)
            .context("failed to size the task state map")?;
        let mut skel =
            scx_ops_load!(skel, gmp_ops, uei).context("failed to load the BPF scheduler")?;
        // The procs go in before attach: ops.init builds the cpumask from them.
        write_procs(&mut skel, &topo, &procs.active_cpus())?;
        let link = {
            let _rt = crate::rt_attach::RtGuard::raise();
            scx_ops_attach!(skel, gmp_ops).context("failed to attach the BPF scheduler")?
        };
        info!(
            "scx_gmp {} scheduling: slice {} us, preempt after {} us, local cap {}, fair tick {}, runnext {}",
            crate::version::full(),
            opts.slice_us,
            opts.preempt_us,
            opts.local_cap,
            opts.fair_tick,
            if opts.no_runnext { "off" } else { "on" }
        );
        // Only once loaded, so that bad input still gets its one error line.
        if restarts == 0 {
            let clock = std::path::Path::new(crate::preflight::CLOCKSOURCE);
            if let Some(w) = crate::preflight::slow_clock(clock) {
                warn!("{w}");
            }
        }
        Ok(Self {
            skel,
            link: Some(link),
            topo,
            restarts,
            procs,
            longest_wait: WaitRec::default(),
            starve_warn_ms: opts.starve_warn_ms,
        })
    }

    /// Once a second: collect the longest waits the BPF side saw, warn about starvation, and
    /// in auto mode grow or shrink the procs.
    fn housekeeping(&mut self, sample: &Sample) -> Result<()> {
        self.longest_wait = self.take_longest_wait();
        if self.longest_wait.wait_us >= self.starve_warn_ms * 1000 {
            warn!(
                "starvation warning: {} (--starve-warn-ms {})",
                self.longest_wait.describe(),
                self.starve_warn_ms
            );
        }

        if let Some(bss) = self.skel.maps.bss_data.as_mut() {
            let err = std::mem::take(&mut bss.last_ctx_err);
            if err != 0 {
                warn!(
                    "could not allocate per-task or per-cgroup state: {} (those run without it)",
                    std::io::Error::from_raw_os_error((-err) as i32)
                );
            }
        }

        let busy_now: Vec<u64> = (0..self.topo.nr_cpu_ids)
            .map(|c| sample.cpu(c, "busy_ns"))
            .collect();
        let secs = self.procs.at.elapsed().as_secs_f64();
        let prev = std::mem::replace(&mut self.procs.busy_ns, busy_now);
        self.procs.at = Instant::now();
        if self.procs.auto.is_none() || prev.is_empty() || secs <= 0.0 {
            return Ok(());
        }
        let active = &self.procs.order[..self.procs.active];
        let busy: f64 = active
            .iter()
            .map(|&c| self.procs.busy_ns[c].saturating_sub(prev[c]) as f64)
            .sum::<f64>()
            / (secs * 1e9);
        self.observe_procs(busy, "")
    }

    /// Auto mode, every loop turn: grow at once when sysmon has seen every proc busy with
    /// work waiting for FAST_GROW_AFTER (the once-a-second check would leave a burst that
    /// arrives on a shrunken set queued for up to a second).
    fn fast_grow(&mut self) -> Result<()> {
        let saturated_ns = match (&self.procs.auto, self.skel.maps.bss_data.as_ref()) {
            (Some(_), Some(bss)) => bss.saturated_ns,
            _ => return Ok(()),
        };
        if saturated_ns < FAST_GROW_AFTER.as_nanos() as u64 {
            return Ok(());
        }
        let busy = self.procs.active as f64;
        self.observe_procs(busy, ", saturated")
    }

    /// Feed one observation to the auto policy and publish the new set if it changes.
    fn observe_procs(&mut self, busy: f64, why: &str) -> Result<()> {
        let g = self.gauges();
        let waiting = self.procs.order[..self.procs.active]
            .iter()
            .map(|&c| g.local_queued.get(c).copied().unwrap_or(0) as f64)
            .sum::<f64>()
            + g.shared_queued.iter().map(|&q| q as f64).sum::<f64>();
        let change = self
            .procs
            .auto
            .as_mut()
            .and_then(|a| a.observe(busy, waiting));
        if let Some(n) = change {
            info!(
                "procs {} -> {} (busy {busy:.2} CPUs, {waiting:.0} waiting{why})",
                self.procs.active, n
            );
            self.procs.active = self.procs.auto.as_ref().map_or(n, |a| a.current());
            let cpus = self.procs.active_cpus();
            write_procs(&mut self.skel, &self.topo, &cpus)?;
            if let Some(bss) = self.skel.maps.bss_data.as_mut() {
                // sysmon starts its count over on the new set; do not act on the old one.
                bss.saturated_ns = 0;
            }
        }
        Ok(())
    }

    /// The longest wait any CPU recorded since the last call; the records are cleared.
    fn take_longest_wait(&mut self) -> WaitRec {
        let mut best = WaitRec::default();
        let Some(bss) = self.skel.maps.bss_data.as_mut() else {
            return best;
        };
        for rec in bss.wait_recs.iter_mut().take(self.topo.nr_cpu_ids) {
            let us = rec.wait_ns / 1000;
            if us > best.wait_us {
                let comm: Vec<u8> = rec
                    .comm
                    .iter()
                    .take_while(|&&b| b != 0)
                    .map(|&b| b as u8)
                    .collect();
                best = WaitRec {
                    wait_us: us,
                    pid: rec.pid,
                    comm: String::from_utf8_lossy(&comm).into_owned(),
                    still_waiting: rec.still_waiting != 0,
                };
            }
            rec.wait_ns = 0;
        }
        best
    }

    fn sample(&self) -> Result<Sample> {
        let bufs = self
            .skel
            .maps
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .context("failed to read the stats map")?
            .context("the stats map has no entry")?;
        Ok(Sample::from_percpu(&bufs))
    }

    fn gauges(&self) -> Gauges {
        let mut g = Gauges {
            restarts: self.restarts,
            ..Default::default()
        };
        if let Some(bss) = self.skel.maps.bss_data.as_ref() {
            g.procs = self.procs.active_cpus();
            g.cpu_node = self.topo.cpu_node.clone();
            g.longest_wait = self.longest_wait.clone();
            g.starve_warn_ms = self.starve_warn_ms;
            g.idle_procs = g
                .procs
                .iter()
                .filter(|&&c| bss.cpu_ctxs[c].running_pid == 0)
                .count();
            g.local_queued = (0..self.topo.nr_cpu_ids)
                .map(|c| bss.cpu_ctxs[c].queued)
                .collect();
            g.shared_queued = bss.shared_queued[..self.topo.nr_nodes].to_vec();
            g.task_ctxs = bss.nr_task_ctxs;
            g.cgrp_ctxs = bss.nr_cgrp_ctxs;
        }
        g
    }

    fn exited(&self) -> bool {
        uei_exited!(&self.skel, uei)
    }

    fn metrics(&self, started: Instant) -> Result<Metrics> {
        Ok(Metrics::new(
            started.elapsed().as_millis() as u64,
            &self.sample()?,
            &self.gauges(),
            &self.topo.cpu_node,
        ))
    }

    /// Run until asked to stop or until the kernel unloads the scheduler; answer the stats
    /// server's requests and print stats every `--stats` seconds. Returns how it ended (an
    /// error if the kernel ejected it).
    pub fn run(
        &mut self,
        opts: &Opts,
        shutdown: &AtomicBool,
        started: Instant,
        stats_chan: &(Sender<Metrics>, Receiver<()>),
    ) -> Result<UserExitInfo> {
        let interval = opts.stats.map(Duration::from_secs_f64);
        let mut printer = Printer::new(Format {
            json: opts.json,
            detail: opts.stats_detail,
        });
        printer.feed(self.metrics(started)?);
        let mut next = interval.map(|iv| Instant::now() + iv);
        let mut next_housekeeping = Instant::now();
        while !shutdown.load(Ordering::Relaxed) && !self.exited() {
            std::thread::sleep(Duration::from_millis(50));
            self.fast_grow()?;
            if Instant::now() >= next_housekeeping {
                let sample = self.sample()?;
                self.housekeeping(&sample)?;
                next_housekeeping += HOUSEKEEPING;
            }
            while stats_chan.1.try_recv().is_ok() {
                stats_chan
                    .0
                    .send(self.metrics(started)?)
                    .context("stats server is gone")?;
            }
            let (Some(iv), Some(at)) = (interval, next) else {
                continue;
            };
            if Instant::now() < at {
                continue;
            }
            if let Some(report) = printer.feed(self.metrics(started)?) {
                println!("{report}");
            }
            next = Some(at + iv);
        }

        // Detach: the kernel unloads the scheduler and records why.
        self.link.take();
        wait_disabled(Duration::from_secs(5));
        let kind = self
            .skel
            .maps
            .data_data
            .as_ref()
            .map(|d| d.uei.kind)
            .unwrap_or(0);
        if kind >= 1024 || kind == 67 {
            eprintln!(
                "scx_gmp: the kernel unloaded the scheduler: exit kind {kind} ({})",
                exit_kind_name(kind)
            );
        }
        uei_report!(&self.skel, uei)
    }
}

/// Publish the procs to the BPF side: proc_on per CPU, then the all-CPUs shortcut, then a new
/// generation so sysmon rebuilds its cpumask.
fn write_procs(skel: &mut BpfSkel, topo: &TopoMaps, cpus: &[usize]) -> Result<()> {
    let bss = skel
        .maps
        .bss_data
        .as_mut()
        .context("no bss in the BPF object")?;
    for c in 0..topo.nr_cpu_ids {
        bss.proc_on[c] = cpus.binary_search(&c).is_ok() as u8;
    }
    bss.procs_subset = !topo.online.iter().all(|c| cpus.binary_search(c).is_ok());
    bss.procs_gen += 1;
    Ok(())
}

/// Wait until sched_ext reports `disabled`, so a reload does not race the teardown.
fn wait_disabled(limit: Duration) {
    let t = Instant::now();
    while t.elapsed() < limit {
        match std::fs::read_to_string("/sys/kernel/sched_ext/state") {
            Ok(s) if s.trim() != "disabled" => std::thread::sleep(Duration::from_millis(20)),
            _ => return,
        }
    }
}

/// kernel.threads-max, the most tasks the kernel lets exist; None if unreadable.
fn read_threads_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Entries for the task state map (bpf/main.bpf.c task_ctxs). The kernel keeps at most
/// threads-max tasks, but a task's state lives until its task_struct is freed, which can be
/// after it has been counted out: twice threads-max leaves room for those and for a later
/// raise of the sysctl. Empty entries cost a hash bucket (16 bytes) each, hence the cap.
fn task_ctx_capacity(threads_max: Option<u64>) -> u32 {
    const MIN: u64 = 1 << 16;
    const MAX: u64 = 1 << 22;
    let want = threads_max.map_or(1 << 20, |t| t.saturating_mul(2));
    want.clamp(MIN, MAX) as u32
}

#[cfg(test)]
mod tests {
    use super::task_ctx_capacity;

    #[test]
    fn task_map_follows_threads_max_within_bounds() {
        assert_eq!(task_ctx_capacity(Some(95_000)), 190_000);
        assert_eq!(task_ctx_capacity(Some(100)), 1 << 16);
        assert_eq!(task_ctx_capacity(Some(u64::MAX)), 1 << 22);
        assert_eq!(task_ctx_capacity(None), 1 << 20);
    }
}
