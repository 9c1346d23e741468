//! Reading what the BPF side counts: the per-CPU stat map, the gauges kept in bss (queue
//! lengths, running tasks, state counts), the longest-wait records and the last failed state
//! allocation. The records are cleared as they are read.

use crate::bpf_intf::cgrp_ctx;
use crate::bpf_skel::BpfSkel;
use crate::stats::{Gauges, Sample, WaitRec};
use crate::topo::TopoMaps;
use anyhow::{Context, Result};
use libbpf_rs::MapCore;
use nix::time::{clock_gettime, ClockId};

/// One reading of every CPU's counters and latency histogram, busy time up to now: a CPU
/// charges its task's run time only as a turn ends or renews, so without the part still
/// running a long turn fell into one interval whole (clamped at 100%) and the next read low.
pub fn sample(skel: &BpfSkel) -> Result<Sample> {
    let bufs = skel
        .maps
        .stats
        .lookup_percpu(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .context("failed to read the stats map")?
        .context("the stats map has no entry")?;
    // In this order: the counters, then where each turn's uncharged part starts, then now.
    let since = running_since(skel);
    let now = clock_gettime(ClockId::CLOCK_MONOTONIC).context("failed to read the clock")?;
    let mut sample = Sample::from_percpu(&bufs);
    sample.add_running(
        &since,
        now.tv_sec() as u64 * 1_000_000_000 + now.tv_nsec() as u64,
    );
    Ok(sample)
}

/// Each CPU's `running_since` (the BPF clock, CLOCK_MONOTONIC; 0: no task running uncharged).
/// Read volatile: the BPF side writes these while the loader reads.
fn running_since(skel: &BpfSkel) -> Vec<u64> {
    let Some(bss) = skel.maps.bss_data.as_ref() else {
        return Vec::new();
    };
    bss.cpu_ctxs
        .iter()
        // SAFETY: a u64 field of the mapped bss, aligned and live while `skel` is borrowed.
        .map(|c| unsafe { std::ptr::read_volatile(&c.running_since) })
        .collect()
}

/// The instantaneous state beside the counters, for the active `procs`.
pub fn gauges(skel: &BpfSkel, topo: &TopoMaps, procs: Vec<usize>) -> Gauges {
    let mut g = Gauges::default();
    let Some(bss) = skel.maps.bss_data.as_ref() else {
        return g;
    };
    g.idle_procs = procs
        .iter()
        .filter(|&&c| bss.cpu_ctxs[c].running_pid == 0)
        .count();
    g.procs = procs;
    g.cpu_node = topo.cpu_node.clone();
    g.local_queued = (0..topo.nr_cpu_ids).map(|c| bss.cpu_queued[c]).collect();
    g.shared_queued = bss.shared_queued[..topo.nr_nodes].to_vec();
    g.homeless_running = bss.homeless_running[..topo.nr_nodes].to_vec();
    g.task_ctxs = bss.nr_task_ctxs;
    g.cgrp_ctxs = bss.nr_cgrp_ctxs;
    g
}

/// The root cgroup's `nr_active` as the weights count it (active top-level cgroups and
/// runnable tasks directly in the root); 0 without cgroup weights or before the root's state
/// exists. Counts that leaked would leave it above the live work once the machine is quiet.
/// A map lookup (a syscall), so it is read for the report only, not by `gauges`, which the
/// `--procs auto` policy calls too.
pub fn root_active(skel: &BpfSkel) -> i64 {
    let root_id = skel.maps.bss_data.as_ref().map_or(0, |b| b.cg_root_id);
    if root_id == 0 {
        return 0;
    }
    let Ok(Some(v)) = skel
        .maps
        .cgrp_ctxs
        .lookup(&root_id.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
    else {
        return 0;
    };
    if v.len() < std::mem::size_of::<cgrp_ctx>() {
        return 0;
    }
    // SAFETY: the map's value is a struct cgrp_ctx (bpf/intf.h), checked long enough above;
    // read unaligned since the Vec's buffer need not be aligned for it.
    let c: cgrp_ctx = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
    c.nr_active
}

/// The longest wait any CPU recorded since the last call; the records are cleared.
pub fn take_longest_wait(skel: &mut BpfSkel, nr_cpu_ids: usize) -> WaitRec {
    let mut best = WaitRec::default();
    let Some(bss) = skel.maps.bss_data.as_mut() else {
        return best;
    };
    for rec in bss.wait_recs.iter_mut().take(nr_cpu_ids) {
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

/// The errno of the last per-task or per-cgroup state the BPF side failed to allocate since
/// the last call, if any; cleared.
pub fn take_ctx_error(skel: &mut BpfSkel) -> Option<std::io::Error> {
    let bss = skel.maps.bss_data.as_mut()?;
    let err = std::mem::take(&mut bss.last_ctx_err);
    (err != 0).then(|| std::io::Error::from_raw_os_error((-err) as i32))
}

/// How long sysmon has seen every proc busy with work waiting (ns).
pub fn saturated_ns(skel: &BpfSkel) -> u64 {
    skel.maps.bss_data.as_ref().map_or(0, |b| b.saturated_ns)
}

/// sysmon starts its saturation count over on a new set; the loader must not act on the old.
pub fn reset_saturation(skel: &mut BpfSkel) {
    if let Some(bss) = skel.maps.bss_data.as_mut() {
        bss.saturated_ns = 0;
    }
}
