//! Opening and loading the BPF scheduler: open the skeleton, set the ops flags and the
//! rodata knobs from the flags and the topology, size the task map, load, publish the first
//! procs, and attach from SCHED_FIFO.

use crate::bpf_skel::*;
use crate::cli::Opts;
use crate::procs_ctl::write_procs;
use crate::topo::TopoMaps;
use anyhow::{Context, Result};
use libbpf_rs::OpenObject;
use log::{info, warn};
use scx_utils::libbpf_clap_opts::LibbpfOpts;
use scx_utils::{scx_ops_attach, scx_ops_load, scx_ops_open};
use std::mem::MaybeUninit;

/// Open, configure, load and attach; `procs` are the CPUs of the first processor set.
pub fn load<'a>(
    opts: &Opts,
    topo: &TopoMaps,
    procs: &[usize],
    open_object: &'a mut MaybeUninit<OpenObject>,
    restarts: u64,
) -> Result<(BpfSkel<'a>, libbpf_rs::Link)> {
    // libbpf's messages reach the log through scx_utils (init_libbpf_logging), so the
    // builder's own debug switch, which would silence or redirect them, is left alone.
    let builder = BpfSkelBuilder::default();
    let open_opts = libbpf_open_opts(&opts.libbpf)?;
    let mut skel = scx_ops_open!(builder, open_object, gmp_ops, open_opts)
        .context("failed to open the BPF scheduler")?;
    set_ops(&mut skel, opts);
    set_rodata(&mut skel, opts, topo)?;
    let tasks = task_ctx_capacity(read_threads_max());
    skel.maps
        .task_ctxs
        .set_max_entries(tasks)
        .context("failed to size the task state map")?;

    let mut skel = scx_ops_load!(skel, gmp_ops, uei).context("failed to load the BPF scheduler")?;
    // The procs go in before attach: ops.init builds the cpumask from them.
    write_procs(&mut skel, topo, procs)?;
    let link = {
        let _rt = crate::rt_attach::RtGuard::raise();
        scx_ops_attach!(skel, gmp_ops).context("failed to attach the BPF scheduler")?
    };
    log_loaded(opts);
    // Only once loaded, so that bad input still gets its one error line.
    if restarts == 0 {
        let clock = std::path::Path::new(crate::preflight::CLOCKSOURCE);
        if let Some(w) = crate::preflight::slow_clock(clock) {
            warn!("{w}");
        }
    }
    Ok((skel, link))
}

/// libbpf's open options from the flags. scx_utils' conversion drops every option, silently,
/// when a path in them cannot be read, so the paths are checked here first: a mistyped
/// `--kconfig` is an error, not a load that ignores the user's other options.
fn libbpf_open_opts(o: &LibbpfOpts) -> Result<Option<libbpf_rs::libbpf_sys::bpf_object_open_opts>> {
    check_libbpf_paths(o)?;
    Ok(o.clone().into_bpf_open_opts())
}

/// Fail, naming the flag, unless every path in libbpf's options can be used.
pub fn check_libbpf_paths(o: &LibbpfOpts) -> Result<()> {
    if let Some(k) = &o.kconfig {
        std::fs::read_to_string(k).with_context(|| format!("--kconfig {k}: cannot read it"))?;
    }
    let paths = [
        ("--btf-custom-path", &o.btf_custom_path, false),
        ("--pin-root-path", &o.pin_root_path, true),
        ("--bpf-token-path", &o.bpf_token_path, true),
    ];
    for (flag, path, want_dir) in paths {
        // An empty --bpf-token-path is libbpf's way to turn BPF tokens off.
        let Some(p) = path.as_ref().filter(|p| !p.is_empty()) else {
            continue;
        };
        let meta = std::fs::metadata(p).with_context(|| format!("{flag} {p}"))?;
        if want_dir != meta.is_dir() {
            let want = if want_dir { "a directory" } else { "a file" };
            anyhow::bail!("{flag} {p}: not {want}");
        }
    }
    Ok(())
}

/// The struct_ops fields the flags change: exit dump size, per-node idle tracking, partial.
fn set_ops(skel: &mut OpenBpfSkel, opts: &Opts) {
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
}

/// The knobs of bpf/gmp.bpf.h, from the flags and the topology.
fn set_rodata(skel: &mut OpenBpfSkel, opts: &Opts, topo: &TopoMaps) -> Result<()> {
    let rodata = skel
        .maps
        .rodata_data
        .as_mut()
        .context("no rodata in the BPF object")?;
    rodata.nr_cpus = topo.nr_cpu_ids as u32;
    rodata.nr_nodes = topo.nr_nodes as u32;
    rodata.nr_mem_nodes = crate::topo::memory_nodes(topo.nr_nodes) as u32;
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
    rodata.test_strand_shared = opts.test_strand_shared;
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
    let (order, rings) = topo.steal_rings();
    rodata.steal_order[..order.len()].copy_from_slice(&order);
    // The skeleton has its own copy of struct steal_ring: same fields, another Rust type.
    for (slot, r) in rodata.steal_rings.iter_mut().zip(&rings) {
        slot.llc_first = r.llc_first;
        slot.llc_len = r.llc_len;
        slot.node_first = r.node_first;
        slot.node_len = r.node_len;
    }
    Ok(())
}

fn log_loaded(opts: &Opts) {
    info!(
        "scx_gmp {} scheduling: slice {} us, preempt after {} us, local cap {}, fair tick {}, runnext {}",
        crate::version::full(),
        opts.slice_us,
        opts.preempt_us,
        opts.local_cap,
        opts.fair_tick,
        if opts.no_runnext { "off" } else { "on" }
    );
}

/// kernel.threads-max, the most tasks the kernel lets exist; None if unreadable.
fn read_threads_max() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Entries for the task state map (task_ctxs in bpf/gmp.bpf.h). The kernel keeps at most
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
    #[test]
    fn libbpf_paths_are_checked_before_open() {
        use super::{libbpf_open_opts, LibbpfOpts};
        assert!(libbpf_open_opts(&LibbpfOpts::default()).unwrap().is_none());
        let e = |o: LibbpfOpts| format!("{:#}", libbpf_open_opts(&o).unwrap_err());
        let missing = "/nonexistent/kconfig".to_string();
        let msg = e(LibbpfOpts {
            kconfig: Some(missing),
            ..Default::default()
        });
        assert!(
            msg.starts_with("--kconfig /nonexistent/kconfig: cannot read it"),
            "{msg}"
        );
        let msg = e(LibbpfOpts {
            pin_root_path: Some("/proc/self/status".into()),
            ..Default::default()
        });
        assert_eq!(msg, "--pin-root-path /proc/self/status: not a directory");
        let msg = e(LibbpfOpts {
            btf_custom_path: Some("/".into()),
            ..Default::default()
        });
        assert_eq!(msg, "--btf-custom-path /: not a file");
        let ok = LibbpfOpts {
            kconfig: Some("/proc/self/status".into()),
            relaxed_maps: Some(true),
            ..Default::default()
        };
        assert!(libbpf_open_opts(&ok).unwrap().is_some());
        let no_token = LibbpfOpts {
            bpf_token_path: Some(String::new()),
            ..Default::default()
        };
        assert!(libbpf_open_opts(&no_token).unwrap().is_some());
    }

    use super::task_ctx_capacity;

    #[test]
    fn task_map_follows_threads_max_within_bounds() {
        assert_eq!(task_ctx_capacity(Some(95_000)), 190_000);
        assert_eq!(task_ctx_capacity(Some(100)), 1 << 16);
        assert_eq!(task_ctx_capacity(Some(u64::MAX)), 1 << 22);
        assert_eq!(task_ctx_capacity(None), 1 << 20);
    }
}
