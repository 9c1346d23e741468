//! The loaded scheduler and the loop that runs while it is loaded: answer the stats server,
//! print stats every `--stats` seconds, and once a second collect the longest waits and let
//! the procs controller observe the load. Loading is in `load`, counters in `counters`, the
//! procs policy's inputs and outputs in `procs_ctl`, the end of a load in `exit`.

use crate::bpf_skel::*;
use crate::cli::Opts;
use crate::counters;
use crate::metrics::{Format, Metrics, Printer};
use crate::procs_ctl::{write_procs, ProcsCtl};
use crate::stats::{Gauges, WaitRec};
use crate::topo::TopoMaps;
use anyhow::{Context, Result};
use crossbeam::channel::{Receiver, Sender};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::{uei_exited, UserExitInfo};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    topo: TopoMaps,
    restarts: u64,
    procs: ProcsCtl,
    longest_wait: WaitRec,
    starve_warn_ms: u64,
}

/// How often the loader reads the longest waits and re-checks the procs (Go's sysmon
/// re-checks GOMAXPROCS about as often).
const HOUSEKEEPING: Duration = Duration::from_secs(1);
/// Saturation that makes auto mode grow before the next housekeeping (see fast_grow).
const FAST_GROW_AFTER: Duration = Duration::from_millis(100);
/// How often the run loop wakes: the stats server's and fast_grow's latency.
const LOOP_TICK: Duration = Duration::from_millis(50);

impl<'a> Scheduler<'a> {
    /// Read the topology, pick the procs, and load the scheduler.
    pub fn init(
        opts: &Opts,
        open_object: &'a mut MaybeUninit<OpenObject>,
        restarts: u64,
    ) -> Result<Self> {
        let mut topo = TopoMaps::from_system()?;
        if opts.no_numa {
            topo = topo.as_one_node()?;
        }
        let procs = ProcsCtl::new(opts, &topo)?;
        info!("{}", topo.summary());
        info!("{}", procs.describe(&opts.procs, &topo));
        let (skel, link) =
            crate::load::load(opts, &topo, &procs.active_cpus(), open_object, restarts)?;
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

    /// Once a second: collect the longest waits the BPF side saw, warn about starvation and
    /// failed state allocations, and in auto mode let the procs observe the busy time.
    fn housekeeping(&mut self) -> Result<()> {
        self.longest_wait = counters::take_longest_wait(&mut self.skel, self.topo.nr_cpu_ids);
        if self.longest_wait.wait_us >= self.starve_warn_ms * 1000 {
            warn!(
                "starvation warning: {} (--starve-warn-ms {})",
                self.longest_wait.describe(),
                self.starve_warn_ms
            );
        }
        if let Some(err) = counters::take_ctx_error(&mut self.skel) {
            warn!("could not allocate per-task or per-cgroup state: {err} (those run without it)");
        }
        let sample = counters::sample(&self.skel)?;
        let busy_now = (0..self.topo.nr_cpu_ids)
            .map(|c| sample.cpu(c).busy_ns)
            .collect();
        match self.procs.busy_since_last(busy_now) {
            Some(busy) => {
                self.observe_procs(busy, "")?;
                self.grow_home()
            }
            None => Ok(()),
        }
    }

    /// Auto mode, once a second: grow the set where the memory of tasks running away from
    /// it is, when that node has no idle proc (sysmon counts them).
    fn grow_home(&mut self) -> Result<()> {
        let homeless = self.gauges().homeless_running;
        match self.procs.home_grow(&homeless) {
            Some(old) => self.publish_procs(
                old,
                format!("tasks away from their memory node: {homeless:?} per node"),
            ),
            None => Ok(()),
        }
    }

    /// Auto mode, every loop turn: grow at once when sysmon has seen every proc busy with
    /// work waiting for FAST_GROW_AFTER (the once-a-second check would leave a burst that
    /// arrives on a shrunken set queued for up to a second).
    fn fast_grow(&mut self) -> Result<()> {
        if !self.procs.is_auto()
            || counters::saturated_ns(&self.skel) < FAST_GROW_AFTER.as_nanos() as u64
        {
            return Ok(());
        }
        let busy = self.procs.active() as f64;
        self.observe_procs(busy, ", saturated")
    }

    /// Feed one observation to the auto policy and publish the new set if it changes.
    fn observe_procs(&mut self, busy: f64, why: &str) -> Result<()> {
        let waiting = self.procs.waiting(&self.gauges());
        match self.procs.observe(busy, waiting) {
            Some(old) => self.publish_procs(
                old,
                format!("busy {busy:.2} CPUs, {waiting:.0} waiting{why}"),
            ),
            None => Ok(()),
        }
    }

    /// The set changed from `old` procs: log why, publish it, and start sysmon's saturation
    /// count over.
    fn publish_procs(&mut self, old: usize, why: String) -> Result<()> {
        info!("procs {old} -> {} ({why})", self.procs.active());
        write_procs(&mut self.skel, &self.topo, &self.procs.active_cpus())?;
        counters::reset_saturation(&mut self.skel);
        Ok(())
    }

    fn gauges(&self) -> Gauges {
        let mut g = counters::gauges(&self.skel, &self.topo, self.procs.active_cpus());
        g.restarts = self.restarts;
        g.longest_wait = self.longest_wait.clone();
        g.starve_warn_ms = self.starve_warn_ms;
        g
    }

    fn metrics(&self, started: Instant) -> Result<Metrics> {
        let mut g = self.gauges();
        g.cgrp_root_active = counters::root_active(&self.skel);
        Ok(Metrics::new(
            started.elapsed().as_millis() as u64,
            &counters::sample(&self.skel)?,
            &g,
        ))
    }

    /// Answer every pending request of the stats server.
    fn serve_stats(&self, started: Instant, chan: &(Sender<Metrics>, Receiver<()>)) -> Result<()> {
        while chan.1.try_recv().is_ok() {
            chan.0
                .send(self.metrics(started)?)
                .context("stats server is gone")?;
        }
        Ok(())
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
        let mut next_print = interval.map(|iv| Instant::now() + iv);
        let mut next_housekeeping = Instant::now();
        while !shutdown.load(Ordering::Relaxed) && !uei_exited!(&self.skel, uei) {
            std::thread::sleep(LOOP_TICK);
            self.fast_grow()?;
            if Instant::now() >= next_housekeeping {
                self.housekeeping()?;
                next_housekeeping += HOUSEKEEPING;
            }
            self.serve_stats(started, stats_chan)?;
            let (Some(iv), Some(at)) = (interval, next_print) else {
                continue;
            };
            if Instant::now() < at {
                continue;
            }
            if let Some(report) = printer.feed(self.metrics(started)?) {
                println!("{report}");
            }
            next_print = Some(at + iv);
        }
        crate::exit::finish(&self.skel, self.link.take())
    }
}
