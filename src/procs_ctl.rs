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
/// mode the policy, the busy time it last saw and each CPU's busy time over the last interval.
pub struct ProcsCtl {
    order: Vec<usize>,
    active: usize,
    auto: Option<AutoProcs>,
    busy_ns: Vec<u64>,
    recent_ns: Vec<u64>,
    cpu_node: Vec<u32>,
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
            recent_ns: Vec::new(),
            cpu_node: topo.cpu_node.clone(),
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
        self.recent_ns = self
            .busy_ns
            .iter()
            .zip(&prev)
            .map(|(now, before)| now.saturating_sub(*before))
            .collect();
        let ran: f64 = self.order[..self.active]
            .iter()
            .map(|&c| self.recent_ns[c] as f64)
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
        let new = auto.current();
        if new < old {
            self.drop_idlest(new, old);
        }
        self.active = new;
        Some(old)
    }

    /// Grow toward the memory: `homeless[n]` CPUs run tasks whose memory is on node `n`, none
    /// of whose procs is idle (sysmon's count). Adds that many of node n's CPUs (the node with
    /// the most), in compact order, so the tasks can go home; the procs they leave idle go at
    /// the next shrink (drop_idlest). Some(old size) if the set grew.
    pub fn home_grow(&mut self, homeless: &[u32]) -> Option<usize> {
        let auto = self.auto.as_mut()?;
        let (node, &want) = homeless.iter().enumerate().max_by_key(|&(_, w)| *w)?;
        let on_node = |c: &usize| self.cpu_node.get(*c) == Some(&(node as u32));
        let old = self.active;
        let mut rest = self.order[old..].to_vec();
        // Stable: the node's CPUs first, each group in compact order.
        rest.sort_by_key(|c| !on_node(c));
        let step = (want as usize).min(rest.iter().take_while(|c| on_node(c)).count());
        auto.grow_by(step)?;
        self.order[old..].copy_from_slice(&rest);
        self.active = auto.current();
        Some(old)
    }

    /// Before the set shrinks from `old` to `new` procs, move the least busy of the last
    /// interval to the positions that leave. The busy ones run what is left (a cpuset's
    /// job, tasks near their memory): dropping the last added instead took CPUs from a
    /// cpuset still running at full speed, whose tasks then shared the procs left in it.
    /// Among equally busy procs the compact order decides, the last added leaving first, so
    /// an idle machine shrinks as before; kept and leaving procs each keep their order.
    fn drop_idlest(&mut self, new: usize, old: usize) {
        let busy = |c: usize| self.recent_ns.get(c).copied().unwrap_or(0);
        let mut by_busy: Vec<usize> = (0..old).collect();
        by_busy.sort_by(|&a, &b| {
            busy(self.order[b])
                .cmp(&busy(self.order[a]))
                .then(a.cmp(&b))
        });
        let mut kept = by_busy[..new].to_vec();
        let mut leaving = by_busy[new..].to_vec();
        kept.sort_unstable();
        leaving.sort_unstable();
        let reordered: Vec<usize> = kept
            .iter()
            .chain(&leaving)
            .map(|&i| self.order[i])
            .collect();
        self.order[..old].copy_from_slice(&reordered);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Auto mode over CPUs 0-3 (compact order 0, 1, 2, 3), all four active.
    fn four_active(recent_ns: Vec<u64>) -> ProcsCtl {
        ProcsCtl {
            order: vec![0, 1, 2, 3],
            active: 4,
            auto: Some(AutoProcs::new(4, 1, 4)),
            busy_ns: Vec::new(),
            recent_ns,
            cpu_node: vec![0, 0, 1, 1],
            at: Instant::now(),
        }
    }

    #[test]
    fn home_grow_adds_the_memory_nodes_cpus() {
        let mut p = four_active(vec![0; 4]);
        p.drop_idlest(2, 4);
        p.active = 2;
        p.auto = Some(AutoProcs::new(2, 1, 4));
        // Nothing away from its memory: no change.
        assert_eq!(p.home_grow(&[0, 0]), None);
        // One task of node 1 runs on node 0: one CPU of node 1 joins, in compact order.
        assert_eq!(p.home_grow(&[0, 1]), Some(2));
        assert_eq!(p.active_cpus(), vec![0, 1, 2]);
        // More than node 1 has left: only its CPUs join.
        assert_eq!(p.home_grow(&[0, 5]), Some(3));
        assert_eq!(p.active_cpus(), vec![0, 1, 2, 3]);
        assert_eq!(p.home_grow(&[0, 5]), None);
    }

    #[test]
    fn home_grow_respects_max_and_fixed_sets() {
        let mut p = four_active(vec![0; 4]);
        p.active = 1;
        p.auto = Some(AutoProcs::new(1, 1, 2));
        assert_eq!(p.home_grow(&[0, 2]), Some(1));
        assert_eq!(p.active_cpus(), vec![0, 2]);
        p.auto = None;
        assert_eq!(p.home_grow(&[0, 2]), None);
    }

    #[test]
    fn shrink_keeps_the_busy_procs() {
        // A job in cpuset 2-3 keeps those two busy while 0 and 1 idle.
        let mut p = four_active(vec![0, 0, 900, 900]);
        p.drop_idlest(3, 4);
        p.active = 3;
        assert_eq!(p.active_cpus(), vec![0, 2, 3]);
        p.drop_idlest(2, 3);
        p.active = 2;
        assert_eq!(p.active_cpus(), vec![2, 3]);
        // Growing again adds back the compact order's CPUs, most recently dropped last.
        assert_eq!(p.order, vec![2, 3, 0, 1]);
    }

    #[test]
    fn idle_machine_shrinks_in_compact_order() {
        let mut p = four_active(vec![0; 4]);
        p.drop_idlest(2, 4);
        p.active = 2;
        assert_eq!(p.active_cpus(), vec![0, 1]);
        assert_eq!(p.order, vec![0, 1, 2, 3]);
    }

    #[test]
    fn missing_busy_figures_count_as_idle() {
        let mut p = four_active(vec![5]);
        p.drop_idlest(1, 4);
        p.active = 1;
        assert_eq!(p.active_cpus(), vec![0]);
        p.drop_idlest(0, 1);
        assert_eq!(p.order.len(), 4);
    }

    #[test]
    fn observe_drops_the_idlest() {
        let mut p = four_active(vec![0, 0, 900, 0]);
        // Three light intervals with nothing waiting shrink the set by a quarter.
        let mut changed = None;
        for _ in 0..3 {
            changed = changed.or(p.observe(0.9, 0.0));
        }
        assert_eq!(changed, Some(4));
        assert!(p.active_cpus().contains(&2), "{:?}", p.active_cpus());
    }
}
