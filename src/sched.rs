//! Opening, loading and attaching the BPF scheduler, and the loop that runs while it is loaded.

use crate::bpf_skel::*;
use crate::cli::Opts;
use crate::metrics::{Format, Metrics, Printer};
use crate::stats::{Gauges, Sample};
use crate::topo::TopoMaps;
use anyhow::{Context, Result};
use crossbeam::channel::{Receiver, Sender};
use libbpf_rs::{MapCore, OpenObject};
use log::info;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open, uei_exited, uei_report, UserExitInfo};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct Scheduler<'a> {
    skel: BpfSkel<'a>,
    link: Option<libbpf_rs::Link>,
    topo: TopoMaps,
    restarts: u64,
}

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
        let topo = TopoMaps::from_system()?;
        info!("{}", topo.summary());

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

        skel.struct_ops.gmp_ops_mut().exit_dump_len = opts.exit_dump_len;
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
        for c in 0..topo.nr_cpu_ids {
            rodata.cpu_node[c] = topo.cpu_node[c];
            rodata.cpu_llc[c] = topo.cpu_llc[c];
        }

        let mut skel =
            scx_ops_load!(skel, gmp_ops, uei).context("failed to load the BPF scheduler")?;
        let link = scx_ops_attach!(skel, gmp_ops).context("failed to attach the BPF scheduler")?;
        info!(
            "scx_gmp {} scheduling: slice {} us, preempt after {} us, local cap {}, fair tick {}, runnext {}",
            crate::version::full(),
            opts.slice_us,
            opts.preempt_us,
            opts.local_cap,
            opts.fair_tick,
            if opts.no_runnext { "off" } else { "on" }
        );
        Ok(Self {
            skel,
            link: Some(link),
            topo,
            restarts,
        })
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
            g.procs = self.topo.online.clone();
            g.idle_procs = g
                .procs
                .iter()
                .filter(|&&c| bss.cpu_ctxs[c].running_pid == 0)
                .count();
            g.local_queued = (0..self.topo.nr_cpu_ids)
                .map(|c| bss.cpu_ctxs[c].queued)
                .collect();
            g.shared_queued = bss.shared_queued[..self.topo.nr_nodes].to_vec();
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
        while !shutdown.load(Ordering::Relaxed) && !self.exited() {
            std::thread::sleep(Duration::from_millis(50));
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
