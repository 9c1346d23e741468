//! The CPU topology as scx_gmp uses it: which node and LLC each CPU belongs to.

use anyhow::{bail, Context, Result};
use std::fmt::Write as _;

/// Limits compiled into the BPF side (bpf/intf.h).
pub const MAX_CPUS: usize = crate::bpf_intf::MAX_CPUS as usize;
pub const MAX_NODES: usize = crate::bpf_intf::MAX_NODES as usize;

/// A CPU's LLC and node as ranges of the steal order (generated from bpf/intf.h).
pub use crate::bpf_intf::steal_ring as StealRing;

/// One online CPU's place in the machine.
pub use crate::procs::Place as CpuPlace;

/// What the BPF side needs: per-CPU node and LLC ids, indexed by CPU id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopoMaps {
    /// Highest possible CPU id + 1 (the kernel's nr_cpu_ids).
    pub nr_cpu_ids: usize,
    /// Highest node id + 1.
    pub nr_nodes: usize,
    pub cpu_node: Vec<u32>,
    pub cpu_llc: Vec<u32>,
    /// Online CPUs, sorted.
    pub online: Vec<usize>,
    /// Node id -> its online CPUs.
    pub node_cpus: Vec<Vec<usize>>,
    /// Every online CPU's place (core, LLC, node), for choosing procs.
    pub places: Vec<CpuPlace>,
}

impl TopoMaps {
    /// Build the maps from the online CPUs. CPUs that are possible but offline keep node 0 and
    /// an LLC of their own: nothing is queued on them while they are offline.
    pub fn build(nr_cpu_ids: usize, places: &[CpuPlace]) -> Result<Self> {
        if places.is_empty() {
            bail!("the topology lists no online CPU");
        }
        if nr_cpu_ids > MAX_CPUS {
            bail!("{nr_cpu_ids} possible CPUs: scx_gmp supports at most {MAX_CPUS}");
        }
        let mut cpu_node = vec![0u32; nr_cpu_ids];
        let mut cpu_llc: Vec<u32> = (0..nr_cpu_ids).map(|c| (MAX_CPUS + c) as u32).collect();
        let mut nr_nodes = 0;
        let mut online = Vec::with_capacity(places.len());
        for p in places {
            if p.cpu >= nr_cpu_ids {
                bail!("CPU {} is beyond nr_cpu_ids {nr_cpu_ids}", p.cpu);
            }
            if p.node >= MAX_NODES {
                bail!(
                    "NUMA node {}: scx_gmp supports node ids below {MAX_NODES}",
                    p.node
                );
            }
            cpu_node[p.cpu] = p.node as u32;
            cpu_llc[p.cpu] = p.llc as u32;
            nr_nodes = nr_nodes.max(p.node + 1);
            online.push(p.cpu);
        }
        online.sort_unstable();
        online.dedup();
        let mut node_cpus = vec![Vec::new(); nr_nodes];
        for &c in &online {
            node_cpus[cpu_node[c] as usize].push(c);
        }
        Ok(Self {
            nr_cpu_ids,
            nr_nodes,
            cpu_node,
            cpu_llc,
            online,
            node_cpus,
            places: places.to_vec(),
        })
    }

    /// --no-numa: the same CPUs and LLCs, all in node 0.
    pub fn as_one_node(&self) -> Result<Self> {
        let places: Vec<CpuPlace> = self
            .places
            .iter()
            .map(|p| CpuPlace { node: 0, ..*p })
            .collect();
        Self::build(self.nr_cpu_ids, &places)
    }

    /// One online CPU per node (the lowest), a placement hint for the BPF side; nodes without
    /// online CPUs get CPU 0's id, which the kernel's idle pick treats as any other hint.
    pub fn node_rep_cpu(&self) -> Vec<u32> {
        self.node_cpus
            .iter()
            .map(|cpus| cpus.first().copied().unwrap_or(self.online[0]) as u32)
            .collect()
    }

    /// The victim search's rings (bpf/intf.h, struct steal_ring): the online CPUs sorted by
    /// node, LLC and id, and for each CPU id the ranges of that order that hold its LLC and
    /// its node. Offline CPUs get empty rings: they dispatch nothing.
    pub fn steal_rings(&self) -> (Vec<u16>, Vec<StealRing>) {
        let mut order = self.online.clone();
        order.sort_by_key(|&c| (self.cpu_node[c], self.cpu_llc[c], c));
        let range = |same: &dyn Fn(usize) -> bool| -> (u16, u16) {
            let first = order.iter().position(|&c| same(c)).unwrap_or(0);
            let len = order[first..].iter().take_while(|&&c| same(c)).count();
            (first as u16, len as u16)
        };
        let empty = StealRing {
            llc_first: 0,
            llc_len: 0,
            node_first: 0,
            node_len: 0,
        };
        let mut rings = vec![empty; self.nr_cpu_ids];
        for &c in &self.online {
            let (llc_first, llc_len) = range(&|v| {
                self.cpu_node[v] == self.cpu_node[c] && self.cpu_llc[v] == self.cpu_llc[c]
            });
            let (node_first, node_len) = range(&|v| self.cpu_node[v] == self.cpu_node[c]);
            rings[c] = StealRing {
                llc_first,
                llc_len,
                node_first,
                node_len,
            };
        }
        (order.iter().map(|&c| c as u16).collect(), rings)
    }

    /// Read the machine's topology (sysfs, through scx_utils). A CPU going offline while
    /// sysfs is read makes files vanish mid-read; that is retried for up to two seconds.
    pub fn from_system() -> Result<Self> {
        let mut tries = 0;
        let topo = loop {
            match scx_utils::Topology::new() {
                Ok(t) => break t,
                Err(e) if tries < 40 => {
                    log::debug!("topology read raced with CPU hotplug ({e:#}); retrying");
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => return Err(e).context("failed to read the CPU topology"),
            }
        };
        let places: Vec<CpuPlace> = topo
            .all_cpus
            .values()
            .map(|c| CpuPlace {
                cpu: c.id,
                core: c.core_id,
                llc: c.llc_id,
                node: c.node_id,
            })
            .collect();
        Self::build(*scx_utils::NR_CPU_IDS, &places)
    }

    /// A one-screen summary: each node with its CPUs.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} online CPUs in {} NUMA node(s):",
            self.online.len(),
            self.nr_nodes
        );
        for (n, cpus) in self.node_cpus.iter().enumerate() {
            if !cpus.is_empty() {
                let _ = write!(s, " node{n}=[{}]", cpulist(cpus));
            }
        }
        s
    }
}

/// Format CPU ids as a compact list: 0-3,8,10-11.
pub use crate::procs::cpulist;

/// The kernel's list of NUMA nodes that have memory.
const HAS_MEMORY: &str = "/sys/devices/system/node/has_memory";

/// How many NUMA nodes have memory, from the kernel's node list ("0-1"); `nr_nodes` where the
/// list is missing or unreadable (a kernel without NUMA: every node counts).
pub fn memory_nodes(nr_nodes: usize) -> usize {
    std::fs::read_to_string(HAS_MEMORY)
        .ok()
        .and_then(|s| count_node_list(&s))
        .unwrap_or(nr_nodes)
}

/// The number of nodes in a kernel node list, or None if it does not parse.
fn count_node_list(s: &str) -> Option<usize> {
    crate::procs::parse_cpu_list(s.trim()).ok().map(|v| v.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_count_their_nodes() {
        assert_eq!(count_node_list("0-1\n"), Some(2));
        assert_eq!(count_node_list("0,2-3"), Some(3));
        assert_eq!(count_node_list("0"), Some(1));
        assert_eq!(count_node_list(""), None);
        assert_eq!(count_node_list("x"), None);
    }

    fn place(cpu: usize, core: usize, llc: usize, node: usize) -> CpuPlace {
        CpuPlace {
            cpu,
            core,
            llc,
            node,
        }
    }

    #[test]
    fn steal_rings_group_each_llc_inside_its_node() {
        // CPU ids interleaved across nodes (as on many two-socket servers), two LLCs in
        // node 0, CPU 5 possible but offline.
        let t = TopoMaps::build(
            6,
            &[
                place(0, 0, 0, 0),
                place(1, 1, 2, 1),
                place(2, 2, 1, 0),
                place(3, 3, 2, 1),
                place(4, 4, 0, 0),
            ],
        )
        .unwrap();
        let (order, rings) = t.steal_rings();
        assert_eq!(order, vec![0, 4, 2, 1, 3]);
        let r = |c: usize| {
            let g = rings[c];
            (g.llc_first, g.llc_len, g.node_first, g.node_len)
        };
        assert_eq!(r(0), (0, 2, 0, 3));
        assert_eq!(r(4), (0, 2, 0, 3));
        assert_eq!(r(2), (2, 1, 0, 3));
        assert_eq!(r(1), (3, 2, 3, 2));
        assert_eq!(r(5), (0, 0, 0, 0));
    }

    #[test]
    fn two_nodes_of_two() {
        let t = TopoMaps::build(
            4,
            &[
                place(0, 0, 0, 0),
                place(1, 1, 0, 0),
                place(2, 2, 1, 1),
                place(3, 3, 1, 1),
            ],
        )
        .unwrap();
        assert_eq!(t.nr_nodes, 2);
        assert_eq!(t.cpu_node, vec![0, 0, 1, 1]);
        assert_eq!(t.cpu_llc, vec![0, 0, 1, 1]);
        assert_eq!(t.node_cpus, vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(
            t.summary(),
            "4 online CPUs in 2 NUMA node(s): node0=[0-1] node1=[2-3]"
        );
        assert_eq!(t.node_rep_cpu(), vec![0, 2]);
        let one = t.as_one_node().unwrap();
        assert_eq!(one.nr_nodes, 1);
        assert_eq!(one.cpu_llc, vec![0, 0, 1, 1]);
        assert_eq!(one.node_cpus, vec![vec![0, 1, 2, 3]]);
    }

    #[test]
    fn offline_cpu_gets_a_private_llc() {
        let t = TopoMaps::build(
            4,
            &[place(0, 0, 0, 0), place(1, 1, 0, 0), place(3, 3, 0, 0)],
        )
        .unwrap();
        assert_eq!(t.online, vec![0, 1, 3]);
        assert_ne!(t.cpu_llc[2], t.cpu_llc[0]);
    }

    #[test]
    fn too_many_cpus_is_an_error() {
        assert!(TopoMaps::build(MAX_CPUS + 1, &[place(0, 0, 0, 0)]).is_err());
        assert!(TopoMaps::build(4, &[]).is_err());
        assert!(TopoMaps::build(2, &[place(2, 0, 0, 0)]).is_err());
    }

    #[test]
    fn cpulist_compacts_ranges() {
        assert_eq!(cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpulist(&[5]), "5");
        assert_eq!(cpulist(&[]), "");
    }
}
