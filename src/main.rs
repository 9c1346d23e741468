//! scx_gmp: Go's GMP scheduler model as a sched_ext scheduler. See README.md.

mod bpf_intf;
mod bpf_skel;
mod cli;
mod counters;
mod exit;
mod load;
mod metrics;
mod preflight;
mod procs;
mod procs_ctl;
mod rt_attach;
mod run_cmd;
mod sched;
mod stats;
mod top;
mod topo;
mod version;

use anyhow::{Context, Result};
use log::{info, warn};
use scx_stats::prelude::*;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let opts = match cli::parse(std::env::args_os()) {
        Ok(o) => o,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                std::process::exit(0);
            }
            eprintln!("scx_gmp: {}", cli::one_line(&e));
            std::process::exit(2);
        }
    };
    if let Err(e) = run(opts) {
        eprintln!("scx_gmp: error: {e:#}");
        std::process::exit(1);
    }
}

fn init_logging(verbose: bool) {
    let level = if verbose {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let cfg = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .build();
    let _ = simplelog::TermLogger::init(
        level,
        cfg,
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    );
    // libbpf's warnings are worth seeing; its info lines (struct_ops members this kernel
    // lacks, and so on) only with -v.
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, libbpf_log)));
}

fn libbpf_log(level: libbpf_rs::PrintLevel, msg: String) {
    let msg = msg.trim_end();
    match level {
        // struct_ops maps are attached by scx_ops_attach!, not by the skeleton: not a fault.
        libbpf_rs::PrintLevel::Warn if !msg.contains("skeleton link is uninitialized") => {
            warn!("{msg}")
        }
        _ => log::debug!("{msg}"),
    }
}

fn run(opts: cli::Opts) -> Result<()> {
    if opts.help_stats {
        print!("{}", metrics::help_stats());
        return Ok(());
    }
    if let Some(cli::Command::Run { command }) = &opts.command {
        return run_cmd::exec(command);
    }
    init_logging(opts.verbose);

    let shutdown = Arc::new(AtomicBool::new(false));
    let flag = shutdown.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("failed to install the SIGINT/SIGTERM handler")?;

    if let Some(cli::Command::Top { interval }) = opts.command {
        return top::run(interval, &shutdown);
    }
    if let Some(secs) = opts.monitor {
        return monitor(secs, &opts, &shutdown);
    }

    // Bad paths are bad input: refused before anything else is checked or started.
    load::check_libbpf_paths(&opts.libbpf)?;
    preflight::check_all()?;
    // The OOM killer should pick anything but the scheduler's loader under memory pressure.
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", "-1000") {
        warn!("could not protect the loader from the OOM killer: {e}");
    }
    // Launched only now: the checks above made sure no other scheduler owns the socket.
    let stats_server = StatsServer::new(metrics::server_data())
        .launch()
        .context("failed to start the stats server")?;
    let stats_chan = stats_server.channels();

    let started = Instant::now();
    let mut restarts = 0;
    loop {
        let mut open_object = MaybeUninit::uninit();
        let mut sched = sched::Scheduler::init(&opts, &mut open_object, restarts)?;
        let uei = sched.run(&opts, &shutdown, started, &stats_chan)?;
        if uei.should_restart() && !shutdown.load(Ordering::Relaxed) {
            restarts += 1;
            warn!("the kernel asked for a restart (CPU hotplug): reloading with a fresh topology");
            continue;
        }
        info!("unloaded");
        return Ok(());
    }
}

/// --monitor: attach to the running scx_gmp's stats server; load nothing.
fn monitor(secs: f64, opts: &cli::Opts, shutdown: &AtomicBool) -> Result<()> {
    let format = metrics::Format {
        json: opts.json,
        detail: opts.stats_detail,
    };
    metrics::print_stream(secs, format, shutdown)
}
