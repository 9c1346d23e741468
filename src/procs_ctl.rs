//! The procs controller: the processor set the loader keeps, the observations that feed the
//! `--procs auto` policy (busy time once a second, saturation seen by sysmon), and the
//! publication of a new set to the BPF side.

use crate::bpf_skel::BpfSkel;
use crate::cli::Opts;
use crate::procs::{self, AutoProcs, ProcsSpec};
use crate::stats::Gauges;
use crate::topo::{cpulist, TopoMaps};
use anyhow::{anyhow, Context, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The processor set: CPUs in the order procs are added, how many are active, and in auto
/// mode the policy and the busy time it last saw.
pub struct ProcsCtl {
    order: Vec<usize>,
    active: usize,
    auto: Option<AutoProcs>,
    busy_ns: Vec<u64>,
    at: Instant,
}

impl ProcsCtl {
    /// The set `--procs` asks for on this topology, and the auto policy if it is `auto`.
    pub fn new(opts: &Opts, topo: &TopoMaps) -> Result<Self> {
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
        Ok(Self {
            order,
            active,
            auto,
            busy_ns: Vec::new(),
            at: Instant::now(),
        })
    }

    /// The log line that names the set.
    pub fn describe(&self, spec: &ProcsSpec, topo: &TopoMaps) -> String {
        format!(
            "procs ({spec}): {} of {} CPUs: [{}]{}",
            self.active,
            topo.online.len(),
            cpulist(&self.active_cpus()),
            match &self.auto {
                Some(a) => format!(", growing and shrinking with the load (up to {})", a.max()),
                None => String::new(),
            }
        )
    }

    pub fn active(&self) -> usize {
        self.active
    }

    pub fn is_auto(&self) -> bool {
        self.auto.is_some()
    }

    /// The active procs, sorted.
    pub fn active_cpus(&self) -> Vec<usize> {
        let mut v = self.order[..self.active].to_vec();
        v.sort_unstable();
        v
    }

    /// How busy the active procs were (in CPUs) since the last call, from each CPU's
    /// cumulative busy time; None on the first call or outside auto mode.
    pub fn busy_since_last(&mut self, busy_now: Vec<u64>) -> Option<f64> {
        let secs = self.at.elapsed().as_secs_f64();
        let prev = std::mem::replace(&mut self.busy_ns, busy_now);
        self.at = Instant::now();
        if self.auto.is_none() || prev.is_empty() || secs <= 0.0 {
            return None;
        }
        let ran: f64 = self.order[..self.active]
            .iter()
            .map(|&c| self.busy_ns[c].saturating_sub(prev[c]) as f64)
            .sum();
        Some(ran / (secs * 1e9))
    }

    /// Tasks waiting for the active procs: their own queues and the shared queues.
    pub fn waiting(&self, g: &Gauges) -> f64 {
        self.order[..self.active]
            .iter()
            .map(|&c| g.local_queued.get(c).copied().unwrap_or(0) as f64)
            .sum::<f64>()
            + g.shared_queued.iter().map(|&q| q as f64).sum::<f64>()
    }

    /// Feed one observation to the auto policy; Some(old size) if the set changed.
    pub fn observe(&mut self, busy: f64, waiting: f64) -> Option<usize> {
        let auto = self.auto.as_mut()?;
        auto.observe(busy, waiting)?;
        let old = self.active;
        self.active = auto.current();
        Some(old)
    }
}

/// Publish the procs to the BPF side. The BPF side reads proc_on[] and procs_subset only
/// after it sees a new procs_gen (sync_procs_mask), so the generation is written last, with
/// a release store that pairs with sync_procs_mask's acquire load: a CPU that sees the new
/// generation sees the mask written before it (on arm64 too, and whatever the compiler does).
pub fn write_procs(skel: &mut BpfSkel, topo: &TopoMaps, cpus: &[usize]) -> Result<()> {
    let bss = skel
        .maps
        .bss_data
        .as_mut()
        .context("no bss in the BPF object")?;
    for c in 0..topo.nr_cpu_ids {
        bss.proc_on[c] = cpus.binary_search(&c).is_ok() as u8;
    }
    bss.procs_subset = !topo.online.iter().all(|c| cpus.binary_search(c).is_ok());
    let gen = bss.procs_gen.wrapping_add(1);
    // SAFETY: procs_gen is a naturally aligned u64 of the mmap'ed bss, which lives as long as
    // the skeleton; BPF programs only read it.
    unsafe { AtomicU64::from_ptr(&mut bss.procs_gen) }.store(gen, Ordering::Release);
    Ok(())
}
