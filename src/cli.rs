//! Command-line flags. Every flag has a default that works on any machine.

use crate::bpf_intf as intf;
use crate::procs::ProcsSpec;
use clap::{Parser, Subcommand};

/// What --slice-us and --preempt-us accept: the BPF side's turn bounds (bpf/intf.h). Below
/// the floor every turn would be the floor anyway; above the cap turns are cut.
const TURN_RANGE_US: std::ops::RangeInclusive<u64> =
    intf::SLICE_MIN_US as u64..=intf::TURN_MAX_US as u64;

/// The largest --fair-tick: a count this large never comes round in practice; the wait bound
/// (FAIR_TICK_MAX_MS) serves the shared queue long before. Untuned.
const FAIR_TICK_MAX: u32 = 1_000_000;

/// --fair-tick: 0 or 2..=FAIR_TICK_MAX. 1 would serve the shared queue first on every
/// dispatch, and a CPU's own queue would wait as long as the shared queue held anything.
fn parse_fair_tick(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a dispatch count"))?;
    match n {
        1 => Err(format!(
            "1 would serve the shared queue first on every dispatch and starve the CPUs' own \
             queues; use 2 or more, or 0 for the {} ms wait bound alone",
            intf::FAIR_TICK_MAX_MS
        )),
        n if n > FAIR_TICK_MAX => Err(format!("at most {FAIR_TICK_MAX}")),
        n => Ok(n),
    }
}

/// The largest --exit-dump-len: 16 MiB, 512 times the kernel's default dump (32 KiB). A
/// buffer of this size is allocated at load time, so the bound keeps a typo from asking for
/// gigabytes. Untuned.
pub const EXIT_DUMP_LEN_MAX: u32 = 16 << 20;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "scx_gmp",
    version = crate::version::full(),
    about = "A sched_ext scheduler modelled on Go's GMP runtime scheduler: per-CPU run queues, \
             runnext, a shared queue per NUMA node, work stealing and a sysmon that preempts \
             long runners."
)]
pub struct Opts {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Time slice in microseconds (Go preempts after 10 ms).
    #[arg(short = 's', long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(TURN_RANGE_US))]
    pub slice_us: u64,

    /// sysmon preempts a task that has run this long while others wait (microseconds); where
    /// the slice ends no later, the tick ends the turn and sysmon steps in a tick after it.
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(TURN_RANGE_US))]
    pub preempt_us: u64,

    /// A task whose CPU bursts run shorter than this (microseconds), or which sleeps at least
    /// as long as it runs, preempts on wakeup; 0: never.
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub wakeup_preempt_us: u64,

    /// sysmon's pass period in microseconds (at least 20); 0: 10 ms, Go's longest sysmon sleep.
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub sysmon_us: u64,

    /// Most tasks a CPU's local queue holds before new work overflows to the shared queue.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub local_cap: u32,

    /// Serve the shared queue first on every Nth dispatch of a CPU, and whenever its head has
    /// waited 250 ms (0: only the latter).
    #[arg(long, default_value_t = 61, value_parser = parse_fair_tick)]
    pub fair_tick: u32,

    /// Most tasks one steal moves (a steal takes half of the victim's queue up to this).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub steal_max: u32,

    /// Steal across NUMA nodes only from queues at least this long.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub numa_steal_min: u32,

    /// Do not put synchronously woken tasks in the waker's runnext slot.
    #[arg(long)]
    pub no_runnext: bool,

    /// CPUs that run ordinary work (GOMAXPROCS for the machine): all, auto (grow and shrink
    /// with the load), N (the N most compact CPUs: whole cores, one LLC and node first) or a
    /// CPU list such as 0-3,8 (one CPU: "5,").
    #[arg(long, default_value = "auto", value_name = "all|auto|N|CPULIST")]
    pub procs: ProcsSpec,

    /// With --procs auto: never fewer procs than this.
    #[arg(long, value_name = "N")]
    pub procs_min: Option<usize>,

    /// With --procs auto: never more procs than this.
    #[arg(long, value_name = "N")]
    pub procs_max: Option<usize>,

    /// Schedule only tasks whose policy is SCHED_EXT (start them with `scx_gmp run`).
    #[arg(long)]
    pub partial: bool,

    /// Ignore NUMA: treat the machine as one node (for comparison).
    #[arg(long)]
    pub no_numa: bool,

    /// Ignore cgroup cpu.weight (task weights from nice still apply).
    #[arg(long)]
    pub no_cgroup_weights: bool,

    /// Starvation early warning: report tasks that waited longer than this to run (ms).
    #[arg(long, default_value_t = 500, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub starve_warn_ms: u64,

    /// Print stats every N seconds while running.
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    pub stats: Option<f64>,

    /// Print stats as JSON lines (one object per interval) instead of schedtrace lines.
    #[arg(long)]
    pub json: bool,

    /// With --stats or --monitor, add a line per NUMA node and per CPU (like Go's scheddetail).
    #[arg(long)]
    pub stats_detail: bool,

    /// Load nothing: print the running scx_gmp's stats every N seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_interval, conflicts_with = "stats")]
    pub monitor: Option<f64>,

    /// Describe every stat in one line each and exit.
    #[arg(long)]
    pub help_stats: bool,

    /// Size of the kernel's debug dump on an error exit, in bytes (0: the kernel's default).
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=EXIT_DUMP_LEN_MAX as i64))]
    pub exit_dump_len: u32,

    /// TEST ONLY: stop dispatching so that the kernel's watchdog ejects the scheduler.
    #[arg(long, hide = true)]
    pub test_stall: bool,

    /// TEST ONLY: queue tasks that no proc may run on their node's shared queue, as a shrink
    /// of the procs can leave them, so that only sysmon's rescue moves them.
    #[arg(long, hide = true)]
    pub test_strand_shared: bool,

    /// Verbose output, including libbpf's.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// libbpf's object-open options, flattened as in the other scx schedulers: for kernels
    /// packaged without the usual Kconfig or BTF.
    #[command(flatten, next_help_heading = "Libbpf Options")]
    pub libbpf: scx_utils::libbpf_clap_opts::LibbpfOpts,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Full-screen live view of the running scx_gmp (attaches like --monitor; q quits).
    Top {
        /// Refresh period in seconds.
        #[arg(long, default_value_t = 1.0, value_parser = parse_interval)]
        interval: f64,
    },
    /// Run a command with the SCHED_EXT policy (for --partial; Debian 12's chrt lacks it).
    Run {
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<std::ffi::OsString>,
    },
}

fn parse_interval(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(0.1..=3600.0).contains(&v) {
        return Err(format!("{v} is outside 0.1..3600 seconds"));
    }
    Ok(v)
}

/// Parse the arguments; on a usage error return the one-line message to print.
pub fn parse<I, T>(args: I) -> Result<Opts, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Opts::try_parse_from(args)
}

/// The first meaningful line of a clap error, without its "error: " prefix.
pub fn one_line(err: &clap::Error) -> String {
    let text = err.to_string();
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    line.trim_start_matches("error: ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The README's `## Flags` table: (long flag, default column) per flag it names.
    fn readme_flags() -> Vec<(String, String)> {
        let readme = include_str!("../README.md");
        let table = readme
            .split("\n## Flags")
            .nth(1)
            .expect("README.md has a ## Flags section");
        let mut flags = Vec::new();
        for row in table.lines().skip_while(|l| !l.starts_with('|')) {
            if !row.starts_with('|') {
                break;
            }
            let cols: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            if cols.len() < 2 || !cols[0].starts_with('`') {
                continue;
            }
            let names: Vec<&str> = cols[0].split(" / ").collect();
            let defaults: Vec<&str> = cols[1].split(" / ").collect();
            for (i, name) in names.iter().enumerate() {
                let long = name
                    .trim_matches('`')
                    .split([',', ' '])
                    .find(|t| t.starts_with("--"))
                    .unwrap_or_else(|| panic!("no long flag in README row {row}"));
                let default = defaults.get(i).or(defaults.first()).copied().unwrap_or("");
                flags.push((long.to_string(), default.to_string()));
            }
        }
        flags
    }

    #[test]
    fn readme_flags_table_matches_help() {
        let mut cmd = Opts::command();
        cmd.build();
        let readme = readme_flags();
        let mut problems = Vec::new();
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if arg.is_hide_set() || long == "help" {
                continue;
            }
            let flag = format!("--{long}");
            let Some((_, doc)) = readme.iter().find(|(f, _)| *f == flag) else {
                problems.push(format!("{flag} is in --help but not in the README table"));
                continue;
            };
            let clap_default: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let ok = match clap_default.as_slice() {
                [] => true,
                [d] if d == "false" => doc.is_empty() || doc == "off",
                [d] => doc == d,
                _ => false,
            };
            if !ok {
                problems.push(format!(
                    "{flag}: README says default '{doc}', --help says {clap_default:?}"
                ));
            }
        }
        for (flag, _) in &readme {
            let known = cmd
                .get_arguments()
                .any(|a| a.get_long().is_some_and(|l| format!("--{l}") == *flag));
            if !known {
                problems.push(format!("{flag} is in the README table but not in --help"));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn turn_and_fair_tick_bounds() {
        assert!(p(&["--slice-us", "249"]).is_err());
        assert_eq!(p(&["--slice-us", "250"]).unwrap().slice_us, 250);
        assert!(p(&["--preempt-us", "250001"]).is_err());
        assert!(p(&["--slice-us", "1000000"]).is_err());
        let one = p(&["--fair-tick", "1"]).unwrap_err();
        assert!(one_line(&one).contains("starve"), "{}", one_line(&one));
        assert_eq!(p(&["--fair-tick", "0"]).unwrap().fair_tick, 0);
        assert_eq!(p(&["--fair-tick", "2"]).unwrap().fair_tick, 2);
        assert!(p(&["--fair-tick", "1000001"]).is_err());
    }

    /// --help states the wait bound the BPF side enforces (bpf/intf.h), not a stale copy.
    #[test]
    fn fair_tick_help_names_the_wait_bound() {
        let help = Opts::command().render_long_help().to_string();
        let bound = format!("waited {} ms", intf::FAIR_TICK_MAX_MS);
        assert!(help.contains(&bound), "--help does not say '{bound}'");
        let one = p(&["--fair-tick", "1"]).unwrap_err();
        assert!(one_line(&one).contains(&format!("{} ms", intf::FAIR_TICK_MAX_MS)));
    }

    #[test]
    fn exit_dump_len_is_bounded() {
        assert_eq!(
            p(&["--exit-dump-len", "65536"]).unwrap().exit_dump_len,
            65536
        );
        assert!(p(&["--exit-dump-len", "4000000000"]).is_err());
    }

    fn p(args: &[&str]) -> Result<Opts, clap::Error> {
        parse(std::iter::once("scx_gmp").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_follow_go() {
        let o = p(&[]).unwrap();
        assert_eq!(o.slice_us, 10_000);
        assert_eq!(o.preempt_us, 10_000);
        assert_eq!(o.local_cap, 256);
        assert_eq!(o.fair_tick, 61);
        assert!(!o.no_runnext);
        assert!(o.stats.is_none());
    }

    #[test]
    fn zero_slice_is_rejected_with_one_line() {
        let e = p(&["--slice-us", "0"]).unwrap_err();
        let msg = one_line(&e);
        assert!(msg.contains("--slice-us"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn unknown_flag_is_rejected() {
        let e = p(&["--no-such-flag"]).unwrap_err();
        assert!(one_line(&e).contains("--no-such-flag"));
    }

    #[test]
    fn stats_interval_bounds() {
        assert_eq!(p(&["--stats", "0.5"]).unwrap().stats, Some(0.5));
        assert!(p(&["--stats", "0"]).is_err());
        assert!(p(&["--stats", "abc"]).is_err());
    }

    #[test]
    fn procs_flags() {
        assert_eq!(p(&[]).unwrap().procs, ProcsSpec::Auto);
        assert_eq!(p(&["--procs", "2"]).unwrap().procs, ProcsSpec::Count(2));
        assert_eq!(
            p(&["--procs", "0-1,3"]).unwrap().procs,
            ProcsSpec::List(vec![0, 1, 3])
        );
        let e = p(&["--procs", "1-x"]).unwrap_err();
        let msg = one_line(&e);
        assert!(msg.contains("--procs"), "{msg}");
        assert!(p(&["--procs", "0"]).is_err());
    }

    #[test]
    fn run_subcommand_takes_the_rest() {
        let o = p(&["run", "stress-ng", "--cpu", "2"]).unwrap();
        match o.command {
            Some(Command::Run { command }) => assert_eq!(command, vec!["stress-ng", "--cpu", "2"]),
            other => panic!("{other:?}"),
        }
        assert!(p(&["run"]).is_err());
    }

    #[test]
    fn starve_warn_bounds() {
        assert_eq!(p(&[]).unwrap().starve_warn_ms, 500);
        assert!(p(&["--starve-warn-ms", "0"]).is_err());
    }

    #[test]
    fn short_slice_flag() {
        assert_eq!(p(&["-s", "5000"]).unwrap().slice_us, 5000);
    }
}
