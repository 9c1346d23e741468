//! Counters from the BPF side: the named counters (one list gives their fields, descriptions
//! and BPF slots), interval deltas, latency percentiles, and the two output formats (a
//! schedtrace-style line and the described `--json` object).

use crate::bpf_intf as intf;
use scx_stats_derive::Stats;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Slots per CPU and latency buckets, from bpf/intf.h.
pub const NR_STATS: usize = intf::gmp_stat_GMP_NR_STATS as usize;
pub const NR_LAT_BUCKETS: usize = intf::NR_LAT_BUCKETS as usize;

/// Declares the counters from one list of `slot => name: "what it counts"`, in the order of
/// `enum gmp_stat`: the `Counters` struct (a described u64 field per slot, which is what
/// `--help-stats` and the stats server's clients see) and the slot-to-field mapping. The
/// help is a `tt` so that the Stats derive gets a plain string literal.
macro_rules! counters {
    ($($slot:ident => $name:ident: $help:tt,)*) => {
        /// What the BPF side counts, one field per slot of `enum gmp_stat` (bpf/intf.h).
        /// Missing fields read as 0, so a client and a server of other versions still talk.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Stats)]
        #[serde(default)]
        #[stat(desc = "scx_gmp's counters, one per kind of event (deltas in the interval \
                       reports, cumulative from the stats server)")]
        pub struct Counters {
            $(#[stat(desc = $help)] pub $name: u64,)*
        }

        /// The slot of each field, in the order the fields are declared; its length is the
        /// enum's count, and the check below refuses a slot out of place.
        const SLOTS: [intf::gmp_stat; NR_STATS] = [$(intf::$slot),*];

        impl Counters {
            pub const ZERO: Counters = Counters { $($name: 0,)* };

            /// From the BPF side's array of slots (missing ones read as 0).
            pub fn from_slots(v: &[u64]) -> Self {
                Self { $($name: v.get(intf::$slot as usize).copied().unwrap_or(0),)* }
            }

            /// Two readings combined field by field.
            fn zip(&self, o: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
                Self { $($name: f(self.$name, o.$name),)* }
            }
        }
    };
}

counters! {
    gmp_stat_ST_DISP_LOCAL => disp_local:
        "dispatches from the CPU's own queue (runnext included, except a pair's)",
    gmp_stat_ST_DISP_RUNNEXT => disp_runnext:
        "task starts through the runnext slot",
    gmp_stat_ST_DISP_SHARED => disp_shared:
        "dispatches from the node's shared queue (local queue empty)",
    gmp_stat_ST_DISP_FAIR_TICK => disp_fair_tick:
        "dispatches from the shared queue first, on the fair tick",
    gmp_stat_ST_DISP_STEAL_LLC => disp_steal_llc:
        "steal events from a CPU of the same LLC",
    gmp_stat_ST_DISP_STEAL_NODE => disp_steal_node:
        "steal events from a CPU of the same node, other LLC",
    gmp_stat_ST_DISP_STEAL_REMOTE => disp_steal_remote:
        "steal events from another node (its CPUs or shared queue)",
    gmp_stat_ST_DISP_KEEP_PREV => disp_keep_prev:
        "dispatches that found nothing: the previous task kept the CPU",
    gmp_stat_ST_STOLEN_TASKS => stolen_tasks:
        "tasks moved by steals (a steal takes up to half a queue)",
    gmp_stat_ST_ENQ_LOCAL => enq_local:
        "wakeups queued on a CPU's local queue tail",
    gmp_stat_ST_ENQ_RUNNEXT => enq_runnext:
        "wakeups put in the waker CPU's runnext slot",
    gmp_stat_ST_ENQ_OVERFLOW => enq_overflow:
        "wakeups sent to the shared queue because the local queue was full",
    gmp_stat_ST_ENQ_PREEMPTED => enq_preempted:
        "preempted or yielding tasks sent to the shared queue tail",
    gmp_stat_ST_ENQ_DIRECT_IDLE => enq_direct_idle:
        "wakeups sent straight to an idle CPU",
    gmp_stat_ST_ENQ_PINNED => enq_pinned:
        "tasks that can run on one CPU only, queued there",
    gmp_stat_ST_ENQ_REENQ => enq_reenq:
        "tasks re-queued because a higher class took their CPU",
    gmp_stat_ST_PREEMPT_SYSMON => preempt_sysmon:
        "preemptions by sysmon (ran past --preempt-us with work waiting)",
    gmp_stat_ST_PREEMPT_SLICE => preempt_slice:
        "slice expiries",
    gmp_stat_ST_KICK_IDLE => kick_idle:
        "idle CPUs woken for new work",
    gmp_stat_ST_KICK_PREEMPT => kick_preempt:
        "preempt kicks sent by sysmon",
    gmp_stat_ST_NUMA_LOCAL => numa_local:
        "task starts on the task's home node",
    gmp_stat_ST_NUMA_REMOTE => numa_remote:
        "task starts away from the task's home node",
    gmp_stat_ST_MIGRATIONS => migrations:
        "task starts on another CPU than the task's last",
    gmp_stat_ST_MIGRATIONS_NODE => migrations_node:
        "task starts on another node than the task's last",
    gmp_stat_ST_SYSMON_RUNS => sysmon_runs:
        "sysmon timer runs",
    gmp_stat_ST_BUSY_NS => busy_ns:
        "nanoseconds the CPU ran scx_gmp tasks",
    gmp_stat_ST_LAT_SUM_US => lat_sum_us:
        "sum of wakeup-to-run latencies (us)",
    gmp_stat_ST_LAT_COUNT => lat_count:
        "wakeup-to-run latency samples",
    gmp_stat_ST_STOLEN_OUT => stolen_out:
        "tasks other CPUs stole from this CPU's queue",
    gmp_stat_ST_PREEMPT_WAKEUP => preempt_wakeup:
        "interactive wakeups (see --wakeup-preempt-us) that preempted the running task",
    gmp_stat_ST_PLACE_HOME => place_home:
        "wakeups placed on an idle CPU of the task's home node",
    gmp_stat_ST_PLACE_REMOTE => place_remote:
        "wakeups placed on an idle CPU of another node",
    gmp_stat_ST_ENQ_STRANDED => enq_stranded:
        "tasks allowed on no proc, queued on their own CPU outside the procs",
    gmp_stat_ST_EVICTED => evicted:
        "tasks moved off a CPU outside the procs to a proc's queue",
    gmp_stat_ST_STARVE_OVER => starve_over:
        "tasks that waited longer than --starve-warn-ms before running",
    gmp_stat_ST_DISP_LAG => disp_lag:
        "dispatches from another node's shared queue whose head trailed in weighted CPU time",
    gmp_stat_ST_ENQ_RESUMED => enq_resumed:
        "tasks preempted by a wakeup, put back at their queue's head with the rest of their turn",
    gmp_stat_ST_WAKE_IN_ORDER => wake_in_order:
        "interactive wakeups queued in order because the running task was interactive too",
    gmp_stat_ST_WAKE_NO_JUMP => wake_no_jump:
        "interactive wakeups queued in order because their CPU had spent its queue-jump budget",
    gmp_stat_ST_CTX_ALLOC_FAIL => ctx_alloc_fail:
        "task or cgroup states the BPF side could not allocate (map full or no memory)",
    gmp_stat_ST_KICK_STUCK => kick_stuck:
        "kicks to CPUs running no scx_gmp task while a task sat in their kernel local queue or \
         their own queue for two sysmon passes (a lost wakeup if the CPU was idle)",
    gmp_stat_ST_TURN_GIVEN_BACK => turn_given_back:
        "turns given back at once by a pinned task that owed a whole turn from late preemptions \
         (deficit round robin)",
    gmp_stat_ST_STEAL_TRIES => steal_tries:
        "steal attempts: dispatches of a proc that found nothing in its own or its node's queue",
    gmp_stat_ST_STEAL_LOOKS => steal_looks:
        "CPU queues those attempts looked at (bounded per attempt, whatever the CPU count)",
    gmp_stat_ST_SYSMON_VISITS => sysmon_visits:
        "CPUs sysmon's passes looked at (each pass looks at every CPU once)",
    gmp_stat_ST_TURN_TIMER => turn_timer:
        "turn-timer runs: a turn's exact deadline checked on its own CPU",
    gmp_stat_ST_SYSMON_NS => sysmon_ns:
        "nanoseconds sysmon's passes took",
    gmp_stat_ST_PICK_DUE => pick_due:
        "shared-queue picks that took the head in order because it had waited its bound",
    gmp_stat_ST_ENQ_BURST_REST => enq_burst_rest:
        "tasks whose turn ran out soon after they woke (the rest of a burst), queued at their \
         CPU's queue tail instead of the shared queue",
    gmp_stat_ST_ENQ_RUNNEXT_PAIR => enq_runnext_pair:
        "runnext wakeups between a pair handing off to each other, put straight into the \
         CPU's local DSQ (counted in enq_runnext too)",
    gmp_stat_ST_CG_FOLDS => cg_folds:
        "folds of the cgroup count changes a CPU held into the cgroup's shared counters (a \
         busy CPU folds at most once a millisecond unless tasks of several cgroups alternate \
         on it, an idle one at once)",
    gmp_stat_ST_PREEMPT_STALE => preempt_stale:
        "turns cut by a sysmon kick that landed after the turn it was meant for had ended; they \
         resume with the rest of their turn unless less than the minimum slice is left",
    gmp_stat_ST_WAKE_NOT_OWED => wake_not_owed:
        "wakeups of sleepers with long bursts queued in order: the running task had a higher \
         nice or cpu.weight and no more weighted CPU time than they had",
}

const _: () = {
    let mut i = 0;
    while i < NR_STATS {
        assert!(
            SLOTS[i] as usize == i,
            "counters! is out of the order of enum gmp_stat"
        );
        i += 1;
    }
};

impl Counters {
    /// Counters minus an earlier reading's (saturating: a counter never runs backwards, but
    /// a restarted scheduler starts again from zero).
    pub fn since(&self, earlier: &Counters) -> Counters {
        self.zip(earlier, u64::saturating_sub)
    }

    pub fn add(&self, o: &Counters) -> Counters {
        self.zip(o, |a, b| a + b)
    }

    /// Sum of several CPUs' counters.
    pub fn sum<'a>(it: impl IntoIterator<Item = &'a Counters>) -> Counters {
        it.into_iter().fold(Counters::ZERO, |acc, c| acc.add(c))
    }
}

/// One reading of every CPU's counters and histogram.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Per CPU (index: CPU id), the counters.
    pub per_cpu: Vec<Counters>,
    /// Latency histogram summed over CPUs.
    pub lat: Vec<u64>,
}

impl Sample {
    /// Parse the per-CPU values of the `stats` map (one byte buffer per possible CPU): the
    /// counter slots, then the latency buckets.
    pub fn from_percpu(bufs: &[Vec<u8>]) -> Self {
        let mut per_cpu = Vec::with_capacity(bufs.len());
        let mut lat = vec![0u64; NR_LAT_BUCKETS];
        for buf in bufs {
            let words: Vec<u64> = buf
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                .collect();
            for (i, v) in words.iter().skip(NR_STATS).take(NR_LAT_BUCKETS).enumerate() {
                lat[i] += *v;
            }
            per_cpu.push(Counters::from_slots(&words));
        }
        Self { per_cpu, lat }
    }

    /// Add to each CPU's busy time what its task has run since `since[c]` (0: none) up to
    /// `now`. `since` must be read after the counters: each charge sets `running_since` to its
    /// own time, so what is added starts where the charges in the counters end or later, and
    /// no time is counted twice (a turn charged between the two reads is left to the next
    /// sample).
    pub fn add_running(&mut self, since: &[u64], now: u64) {
        for (cnt, &s) in self.per_cpu.iter_mut().zip(since) {
            if s != 0 && now > s {
                cnt.busy_ns += now - s;
            }
        }
    }

    /// Counters minus an earlier sample's (see `Counters::since`).
    pub fn delta(&self, earlier: &Sample) -> Sample {
        let per_cpu = self
            .per_cpu
            .iter()
            .enumerate()
            .map(|(c, cnt)| cnt.since(earlier.cpu(c)))
            .collect();
        let lat = self
            .lat
            .iter()
            .enumerate()
            .map(|(i, v)| v.saturating_sub(earlier.lat.get(i).copied().unwrap_or(0)))
            .collect();
        Sample { per_cpu, lat }
    }

    /// The counters summed over the CPUs.
    pub fn total(&self) -> Counters {
        Counters::sum(&self.per_cpu)
    }

    /// CPU `cpu`'s counters (zero for a CPU the sample does not have).
    pub fn cpu(&self, cpu: usize) -> &Counters {
        self.per_cpu.get(cpu).unwrap_or(&Counters::ZERO)
    }

    /// The counters summed over the CPUs of each node (index: node id; `cpu_node` gives
    /// each CPU's node).
    pub fn per_node(&self, cpu_node: &[u32], nodes: usize) -> Vec<Counters> {
        let mut v = vec![Counters::ZERO; nodes];
        for (c, &n) in cpu_node.iter().enumerate() {
            if let Some(slot) = v.get_mut(n as usize) {
                *slot = slot.add(self.cpu(c));
            }
        }
        v
    }
}

/// Upper bound (exclusive, in us) of a latency bucket: exact below 4 us, then four buckets
/// per power of two (the BPF side's lat_bucket()).
pub fn bucket_upper_us(b: usize) -> u64 {
    if b < 4 {
        return b as u64 + 1;
    }
    let msb = b / 4 + 1;
    let sub = (b % 4) as u64;
    (4 + sub + 1) << (msb - 2)
}

/// The latency below which a fraction `q` of the samples fall (bucket upper bound), 0 if none.
pub fn percentile_us(hist: &[u64], q: f64) -> u64 {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0;
    }
    let target = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut cum = 0;
    for (b, n) in hist.iter().enumerate() {
        cum += n;
        if cum >= target {
            return bucket_upper_us(b);
        }
    }
    bucket_upper_us(hist.len() - 1)
}

pub fn max_us(hist: &[u64]) -> u64 {
    hist.iter()
        .rposition(|&n| n > 0)
        .map(bucket_upper_us)
        .unwrap_or(0)
}

/// Instantaneous state read alongside the counters.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// CPUs scx_gmp dispatches ordinary work to.
    pub procs: Vec<usize>,
    /// Of those, CPUs running no scx_gmp task right now.
    pub idle_procs: usize,
    /// cpu_dsq length per CPU (index: CPU id).
    pub local_queued: Vec<u32>,
    /// shared_dsq length per node.
    pub shared_queued: Vec<u32>,
    /// Per node: CPUs elsewhere running a task whose memory is there, while none of the
    /// node's procs is idle (sysmon's last pass).
    pub homeless_running: Vec<u32>,
    /// How many times the scheduler was reloaded (CPU hotplug).
    pub restarts: u64,
    /// Live per-task and per-cgroup states on the BPF side (they follow the task and
    /// cgroup counts; growth beyond them would be a leak).
    pub task_ctxs: i64,
    pub cgrp_ctxs: i64,
    /// The root cgroup's active children and runnable tasks, as cgroup weights count them.
    pub cgrp_root_active: i64,
    /// NUMA node of each CPU (index: CPU id).
    pub cpu_node: Vec<u32>,
    /// The longest wait to run seen in the last second.
    pub longest_wait: WaitRec,
    /// --starve-warn-ms.
    pub starve_warn_ms: u64,
}

/// A task's wait to run: the longest one the BPF side saw in a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitRec {
    pub wait_us: u64,
    pub pid: i32,
    pub comm: String,
    /// Still queued when seen (a queue head), rather than started after waiting.
    pub still_waiting: bool,
}

impl WaitRec {
    /// "pid 1234 (hog) waited 612ms", with "still waiting" when it had not run yet.
    pub fn describe(&self) -> String {
        format!(
            "pid {} ({}) waited {}ms{}",
            self.pid,
            self.comm,
            self.wait_us / 1000,
            if self.still_waiting {
                ", still waiting"
            } else {
                ""
            }
        )
    }
}

// The `--json` report of one interval, field by field, described like the served stats (and
// registered with them): the keys and value shapes are what scripts already read, so the
// field names and types here must not change; fields may be added. Counters are deltas over
// the interval.

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "scx_gmp --json: one interval, counters as deltas over it")]
pub struct Interval {
    #[stat(desc = "milliseconds since scx_gmp started, at the interval's end")]
    pub ts_ms: u64,
    #[stat(desc = "the interval's length in seconds")]
    pub interval_s: f64,
    #[stat(desc = "how many CPUs scx_gmp dispatches ordinary work to (the procs)")]
    pub procs: usize,
    #[stat(desc = "procs running no scx_gmp task at the interval's end")]
    pub idle_procs: usize,
    #[stat(desc = "tasks waiting in the shared queues, all nodes")]
    pub shared_queued: u64,
    #[stat(desc = "tasks waiting in each node's shared queue, by node id")]
    pub shared_queued_per_node: Vec<u32>,
    #[stat(desc = "tasks waiting in each proc's local queue, in the order of procs_cpus")]
    pub local_queued: Vec<u32>,
    #[stat(desc = "dispatches by where the task came from")]
    pub dispatch: Dispatch,
    #[stat(desc = "stolen_tasks in the interval")]
    pub stolen_tasks: u64,
    #[stat(desc = "enqueues by where the task went")]
    pub enqueue: Enqueue,
    #[stat(desc = "preemptions and queue jumps")]
    pub preempt: Preempt,
    #[stat(desc = "CPUs kicked")]
    pub kicks: Kicks,
    #[stat(desc = "the procs as a CPU list (0-3,8)")]
    pub procs_cpus: String,
    #[stat(desc = "task starts and placements on the home node versus elsewhere")]
    pub numa: Numa,
    #[stat(desc = "the longest wait to run in the last second")]
    pub starvation: Starvation,
    #[stat(desc = "wakeup-to-run latency over the interval (bucket upper bounds)")]
    pub latency_us: Latency,
    #[stat(desc = "share of the interval each proc ran scx_gmp tasks, in the order of procs_cpus")]
    pub busy_pct: Vec<f64>,
    #[stat(desc = "sysmon_runs in the interval")]
    pub sysmon_runs: u64,
    #[stat(desc = "sysmon_visits in the interval")]
    pub sysmon_visits: u64,
    #[stat(desc = "turn_timer in the interval")]
    pub turn_timer: u64,
    #[stat(desc = "sysmon_ns in the interval")]
    pub sysmon_ns: u64,
    #[stat(desc = "per-task and per-cgroup states the BPF side holds")]
    pub ctx: Ctx,
    #[stat(desc = "reloads after CPU hotplug, since scx_gmp started")]
    pub restarts: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "dispatches by where the task came from, in the interval")]
pub struct Dispatch {
    #[stat(desc = "disp_runnext in the interval")]
    pub runnext: u64,
    #[stat(desc = "disp_local in the interval")]
    pub local: u64,
    #[stat(desc = "disp_shared in the interval")]
    pub shared: u64,
    #[stat(desc = "disp_fair_tick in the interval")]
    pub fair_tick: u64,
    #[stat(desc = "disp_steal_llc in the interval")]
    pub steal_llc: u64,
    #[stat(desc = "disp_steal_node in the interval")]
    pub steal_node: u64,
    #[stat(desc = "disp_steal_remote in the interval")]
    pub steal_remote: u64,
    #[stat(desc = "disp_keep_prev in the interval")]
    pub keep_prev: u64,
    #[stat(desc = "disp_lag in the interval")]
    pub lag: u64,
    #[stat(desc = "pick_due in the interval")]
    pub pick_due: u64,
    #[stat(desc = "steal_tries in the interval")]
    pub steal_tries: u64,
    #[stat(desc = "steal_looks in the interval")]
    pub steal_looks: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "enqueues by where the task went, in the interval")]
pub struct Enqueue {
    #[stat(desc = "enq_local in the interval")]
    pub local: u64,
    #[stat(desc = "enq_runnext in the interval")]
    pub runnext: u64,
    #[stat(desc = "enq_overflow in the interval")]
    pub overflow: u64,
    #[stat(desc = "enq_preempted in the interval")]
    pub preempted: u64,
    #[stat(desc = "enq_direct_idle in the interval")]
    pub direct_idle: u64,
    #[stat(desc = "enq_pinned in the interval")]
    pub pinned: u64,
    #[stat(desc = "enq_reenq in the interval")]
    pub reenq: u64,
    #[stat(desc = "enq_stranded in the interval")]
    pub stranded: u64,
    #[stat(desc = "evicted in the interval")]
    pub evicted: u64,
    #[stat(desc = "enq_resumed in the interval")]
    pub resumed: u64,
    #[stat(desc = "enq_burst_rest in the interval")]
    pub burst_rest: u64,
    #[stat(desc = "enq_runnext_pair in the interval")]
    pub runnext_pair: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "preemptions and queue jumps in the interval")]
pub struct Preempt {
    #[stat(desc = "preempt_sysmon in the interval")]
    pub sysmon: u64,
    #[stat(desc = "preempt_slice in the interval")]
    pub slice: u64,
    #[stat(desc = "preempt_wakeup in the interval")]
    pub wakeup: u64,
    /// Always 0: wakeups no longer jump to a runner's head (see wakeup_in_order). Kept
    /// because scripts read every key this object ever had.
    #[stat(desc = "always 0, kept for readers of earlier versions")]
    pub wakeup_head: u64,
    #[stat(desc = "wake_in_order in the interval")]
    pub wakeup_in_order: u64,
    #[stat(desc = "wake_no_jump in the interval")]
    pub wakeup_no_jump: u64,
    #[stat(desc = "wake_not_owed in the interval")]
    pub wakeup_not_owed: u64,
    #[stat(desc = "turn_given_back in the interval")]
    pub given_back: u64,
    #[stat(desc = "preempt_stale in the interval")]
    pub stale: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "CPUs kicked in the interval")]
pub struct Kicks {
    #[stat(desc = "kick_idle in the interval")]
    pub idle: u64,
    #[stat(desc = "kick_preempt in the interval")]
    pub preempt: u64,
    #[stat(desc = "kick_stuck in the interval")]
    pub stuck: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "task starts and placements on the home node versus elsewhere, in the interval")]
pub struct Numa {
    #[stat(desc = "numa_local in the interval")]
    pub local: u64,
    #[stat(desc = "numa_remote in the interval")]
    pub remote: u64,
    #[stat(desc = "place_home in the interval")]
    pub place_home: u64,
    #[stat(desc = "place_remote in the interval")]
    pub place_remote: u64,
    #[stat(desc = "migrations in the interval")]
    pub migrations: u64,
    #[stat(desc = "migrations_node in the interval")]
    pub migrations_node: u64,
    #[stat(desc = "disp_steal_remote in the interval")]
    pub steals_remote: u64,
    #[stat(desc = "the same per node, counted on the CPU where each event happened")]
    pub per_node: Vec<NumaNode>,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "one node's home-versus-remote counters in the interval")]
pub struct NumaNode {
    #[stat(desc = "node id")]
    pub node: usize,
    #[stat(desc = "numa_local on the node's CPUs")]
    pub starts_home: u64,
    #[stat(desc = "numa_remote on the node's CPUs")]
    pub starts_remote: u64,
    #[stat(desc = "place_home on the node's CPUs")]
    pub place_home: u64,
    #[stat(desc = "place_remote on the node's CPUs")]
    pub place_remote: u64,
    #[stat(desc = "disp_steal_remote by the node's CPUs")]
    pub steals_remote: u64,
    #[stat(desc = "migrations_node onto the node's CPUs")]
    pub migrations_in: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "the longest wait to run in the last second")]
pub struct Starvation {
    #[stat(desc = "how long it waited (us)")]
    pub longest_wait_us: u64,
    #[stat(desc = "the task's pid")]
    pub pid: i32,
    #[stat(desc = "the task's command")]
    pub comm: String,
    #[stat(desc = "whether it was still queued when seen (a queue head), not started yet")]
    pub still_waiting: Bool,
    #[stat(desc = "starve_over in the interval")]
    pub over_threshold: u64,
    #[stat(desc = "--starve-warn-ms")]
    pub threshold_ms: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "wakeup-to-run latency over the interval (bucket upper bounds)")]
pub struct Latency {
    #[stat(desc = "median (us)")]
    pub p50: u64,
    #[stat(desc = "99th percentile (us)")]
    pub p99: u64,
    #[stat(desc = "longest (us)")]
    pub max: u64,
    #[stat(desc = "lat_count in the interval")]
    pub samples: u64,
}

#[derive(Clone, Debug, Serialize, Stats)]
#[stat(desc = "per-task and per-cgroup states the BPF side holds")]
pub struct Ctx {
    #[stat(desc = "per-task states now (one per task it schedules)")]
    pub tasks: i64,
    #[stat(desc = "per-cgroup states now (one per cgroup)")]
    pub cgroups: i64,
    #[stat(desc = "ctx_alloc_fail in the interval")]
    pub alloc_fail: u64,
    #[stat(desc = "cg_folds in the interval")]
    pub cgroup_folds: u64,
    #[stat(
        desc = "the root cgroup's active child cgroups and runnable tasks, as cgroup weights \
                count them now (0 with --no-cgroup-weights)"
    )]
    pub root_active: i64,
}

/// A JSON boolean. scx_stats describes integers, floats, strings and structs only; this
/// keeps `true`/`false` on the wire and names the kind in the description.
#[derive(Clone, Copy, Debug, Serialize, Stats)]
#[serde(transparent)]
#[stat(desc = "a JSON boolean: true or false")]
pub struct Bool(pub bool);

/// One interval's report.
pub struct Report<'a> {
    pub elapsed_ms: u64,
    pub interval_s: f64,
    pub d: &'a Sample,
    pub g: &'a Gauges,
}

impl Report<'_> {
    fn local_of_procs(&self) -> Vec<u32> {
        self.g
            .procs
            .iter()
            .map(|&c| self.g.local_queued.get(c).copied().unwrap_or(0))
            .collect()
    }

    pub fn numa_local_pct(&self) -> f64 {
        let l = self.d.total().numa_local as f64;
        let r = self.d.total().numa_remote as f64;
        if l + r == 0.0 {
            100.0
        } else {
            100.0 * l / (l + r)
        }
    }

    /// The interval as the described `--json` object.
    pub fn interval(&self) -> Interval {
        let d = self.d;
        let t = d.total();
        let w = &self.g.longest_wait;
        Interval {
            ts_ms: self.elapsed_ms,
            interval_s: self.interval_s,
            procs: self.g.procs.len(),
            idle_procs: self.g.idle_procs,
            shared_queued: self.g.shared_queued.iter().map(|&v| v as u64).sum(),
            shared_queued_per_node: self.g.shared_queued.clone(),
            local_queued: self.local_of_procs(),
            dispatch: Dispatch {
                runnext: t.disp_runnext,
                local: t.disp_local,
                shared: t.disp_shared,
                fair_tick: t.disp_fair_tick,
                steal_llc: t.disp_steal_llc,
                steal_node: t.disp_steal_node,
                steal_remote: t.disp_steal_remote,
                keep_prev: t.disp_keep_prev,
                lag: t.disp_lag,
                pick_due: t.pick_due,
                steal_tries: t.steal_tries,
                steal_looks: t.steal_looks,
            },
            stolen_tasks: t.stolen_tasks,
            enqueue: Enqueue {
                local: t.enq_local,
                runnext: t.enq_runnext,
                overflow: t.enq_overflow,
                preempted: t.enq_preempted,
                direct_idle: t.enq_direct_idle,
                pinned: t.enq_pinned,
                reenq: t.enq_reenq,
                stranded: t.enq_stranded,
                evicted: t.evicted,
                resumed: t.enq_resumed,
                burst_rest: t.enq_burst_rest,
                runnext_pair: t.enq_runnext_pair,
            },
            preempt: Preempt {
                sysmon: t.preempt_sysmon,
                slice: t.preempt_slice,
                wakeup: t.preempt_wakeup,
                wakeup_head: 0,
                wakeup_in_order: t.wake_in_order,
                wakeup_no_jump: t.wake_no_jump,
                wakeup_not_owed: t.wake_not_owed,
                given_back: t.turn_given_back,
                stale: t.preempt_stale,
            },
            kicks: Kicks {
                idle: t.kick_idle,
                preempt: t.kick_preempt,
                stuck: t.kick_stuck,
            },
            procs_cpus: crate::topo::cpulist(&self.g.procs),
            numa: Numa {
                local: t.numa_local,
                remote: t.numa_remote,
                place_home: t.place_home,
                place_remote: t.place_remote,
                migrations: t.migrations,
                migrations_node: t.migrations_node,
                steals_remote: t.disp_steal_remote,
                per_node: self.per_node(),
            },
            starvation: Starvation {
                longest_wait_us: w.wait_us,
                pid: w.pid,
                comm: w.comm.clone(),
                still_waiting: Bool(w.still_waiting),
                over_threshold: t.starve_over,
                threshold_ms: self.g.starve_warn_ms,
            },
            latency_us: Latency {
                p50: percentile_us(&d.lat, 0.50),
                p99: percentile_us(&d.lat, 0.99),
                max: max_us(&d.lat),
                samples: t.lat_count,
            },
            busy_pct: self.g.procs.iter().map(|&c| self.busy_pct(c)).collect(),
            sysmon_runs: t.sysmon_runs,
            sysmon_visits: t.sysmon_visits,
            turn_timer: t.turn_timer,
            sysmon_ns: t.sysmon_ns,
            ctx: Ctx {
                tasks: self.g.task_ctxs,
                cgroups: self.g.cgrp_ctxs,
                alloc_fail: t.ctx_alloc_fail,
                cgroup_folds: t.cg_folds,
                root_active: self.g.cgrp_root_active,
            },
            restarts: self.g.restarts,
        }
    }

    /// The `--json` object. Through a `Value`, so that its keys come out sorted as they
    /// always have, whatever the order of the fields.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.interval()).expect("an Interval always serializes")
    }

    /// Home-versus-remote counters per node (counted on the CPU where each event happened).
    fn per_node(&self) -> Vec<NumaNode> {
        let nodes = self.g.shared_queued.len();
        self.d
            .per_node(&self.g.cpu_node, nodes)
            .iter()
            .enumerate()
            .map(|(n, c)| NumaNode {
                node: n,
                starts_home: c.numa_local,
                starts_remote: c.numa_remote,
                place_home: c.place_home,
                place_remote: c.place_remote,
                steals_remote: c.disp_steal_remote,
                migrations_in: c.migrations_node,
            })
            .collect()
    }

    /// Share of the interval CPU `c` spent running scx_gmp tasks, in percent.
    pub fn busy_pct(&self, c: usize) -> f64 {
        let ns = self.d.cpu(c).busy_ns as f64;
        let pct = 100.0 * ns / (self.interval_s * 1e9);
        (pct.min(100.0) * 10.0).round() / 10.0
    }

    /// Go's schedtrace line, with scx_gmp's own fields.
    pub fn to_schedtrace(&self) -> String {
        let d = self.d;
        let t = d.total();
        let local: Vec<String> = self
            .local_of_procs()
            .iter()
            .map(|v| v.to_string())
            .collect();
        let steals = t.disp_steal_llc + t.disp_steal_node + t.disp_steal_remote;
        let w = &self.g.longest_wait;
        let starving = if t.starve_over > 0 || w.wait_us >= self.g.starve_warn_ms * 1000 {
            format!(" STARVING={} longest={}", t.starve_over, w.describe())
        } else {
            String::new()
        };
        // Rare events, shown only when they happened.
        let rare: String = [
            (t.ctx_alloc_fail, "CTX_ALLOC_FAIL"),
            (t.kick_stuck, "KICK_STUCK"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, tag)| format!(" {tag}={n}"))
        .collect();
        format!(
            "SCHED {}ms: procs={} idle={} runqueue={} [{}] runnext={} local={} shared={} \
             fair={} steals={}/{} preempt={}+{}+{} kicks={} numa={:.0}% p50={}us p99={}us max={}us \
             maxwait={}ms{}{}",
            self.elapsed_ms,
            self.g.procs.len(),
            self.g.idle_procs,
            self.g.shared_queued.iter().map(|&v| v as u64).sum::<u64>(),
            local.join(" "),
            t.disp_runnext,
            t.disp_local,
            t.disp_shared,
            t.disp_fair_tick,
            steals,
            t.stolen_tasks,
            t.preempt_sysmon,
            t.preempt_slice,
            t.preempt_wakeup,
            t.kick_idle,
            self.numa_local_pct(),
            percentile_us(&d.lat, 0.50),
            percentile_us(&d.lat, 0.99),
            max_us(&d.lat),
            w.wait_us / 1000,
            rare,
            starving,
        )
    }
}

/// Every key path of a JSON value with its shape, jq style (`numa.per_node[].node`); an
/// array's elements are described by its first one.
#[cfg(test)]
pub(crate) fn json_paths(v: &Value) -> Vec<(String, &'static str)> {
    fn walk(v: &Value, path: &str, out: &mut Vec<(String, &'static str)>) {
        let shape = match v {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(n) if n.is_f64() => "float",
            Value::Number(_) => "int",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !path.is_empty() {
            out.push((path.to_string(), shape));
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(x, &p, out);
                }
            }
            Value::Array(a) => {
                if let Some(x) = a.first() {
                    walk(x, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use scx_stats::Meta;

    #[test]
    fn every_counter_is_described() {
        let fields = Counters::meta().fields;
        assert_eq!(fields.len(), NR_STATS);
        for (n, f) in fields {
            let desc = f.attrs.desc.unwrap_or_default();
            assert!(!desc.trim().is_empty(), "{n} has no description");
        }
    }

    #[test]
    fn every_field_reads_its_own_slot() {
        let slots: Vec<u64> = (1..=NR_STATS as u64).collect();
        let v = serde_json::to_value(Counters::from_slots(&slots)).unwrap();
        let mut got: Vec<u64> = v
            .as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, slots);
        assert_eq!(
            Counters::from_slots(&slots).busy_ns,
            slots[intf::gmp_stat_ST_BUSY_NS as usize]
        );
    }

    #[test]
    fn bucket_bounds_match_bpf_bucketing() {
        // The BPF side's lat_bucket(), written again here to check the inverse.
        fn bucket(us: u64) -> usize {
            if us < 4 {
                return us as usize;
            }
            let msb = 63 - us.leading_zeros() as u64;
            let b = (msb - 1) * 4 + ((us >> (msb - 2)) & 3);
            (b as usize).min(NR_LAT_BUCKETS - 1)
        }
        for us in 0..100_000u64 {
            let b = bucket(us);
            assert!(us < bucket_upper_us(b), "us={us} b={b}");
            if b > 0 {
                assert!(us >= bucket_upper_us(b - 1), "us={us} b={b}");
            }
        }
    }

    #[test]
    fn percentiles() {
        let mut h = vec![0u64; NR_LAT_BUCKETS];
        h[1] = 98; // 1 us
        h[20] = 1; // 64..80 us
        h[30] = 1;
        assert_eq!(percentile_us(&h, 0.5), 2);
        assert_eq!(percentile_us(&h, 0.99), bucket_upper_us(20));
        assert_eq!(max_us(&h), bucket_upper_us(30));
        assert_eq!(percentile_us(&vec![0; NR_LAT_BUCKETS], 0.99), 0);
    }

    fn sample(v: u64) -> Sample {
        let mut buf = Vec::new();
        for i in 0..(NR_STATS + NR_LAT_BUCKETS) {
            buf.extend_from_slice(&(v * (i as u64 + 1)).to_ne_bytes());
        }
        Sample::from_percpu(&[buf.clone(), buf])
    }

    /// A long turn still running counts in the interval it runs in, not in the one it ends in;
    /// a CPU that runs nothing adds nothing.
    #[test]
    fn running_turns_count_as_busy() {
        let mut s = sample(0);
        s.per_cpu.push(Counters::ZERO);
        s.add_running(&[1_000, 2_500, 0], 5_000);
        assert_eq!(s.cpu(0).busy_ns, 4_000);
        assert_eq!(s.cpu(1).busy_ns, 2_500);
        assert_eq!(s.cpu(2).busy_ns, 0);
        // Clock behind the start (a racing update): nothing, not a wrapped count.
        s.add_running(&[9_000], 5_000);
        assert_eq!(s.cpu(0).busy_ns, 4_000);
    }

    #[test]
    fn deltas_and_totals() {
        let a = sample(1);
        let b = sample(3);
        let d = b.delta(&a);
        assert_eq!(d.total().disp_local, 2 * 2);
        assert_eq!(d.cpu(1).disp_runnext, 2 * 2);
        assert_eq!(d.lat[0], 2 * 2 * (NR_STATS as u64 + 1));
        // A restart resets counters: no underflow.
        assert_eq!(a.delta(&b).total().disp_local, 0);
    }

    /// Two CPUs of node 0, one waiter past --starve-warn-ms.
    fn gauges() -> Gauges {
        Gauges {
            procs: vec![0, 1],
            idle_procs: 1,
            local_queued: vec![3, 0],
            shared_queued: vec![2],
            homeless_running: Vec::new(),
            restarts: 0,
            task_ctxs: 0,
            cgrp_ctxs: 0,
            cgrp_root_active: 0,
            cpu_node: vec![0, 0],
            longest_wait: WaitRec {
                wait_us: 612_000,
                pid: 42,
                comm: "hog".into(),
                still_waiting: true,
            },
            starve_warn_ms: 500,
        }
    }

    fn report<'a>(d: &'a Sample, g: &'a Gauges) -> Report<'a> {
        Report {
            elapsed_ms: 1000,
            interval_s: 1.0,
            d,
            g,
        }
    }

    /// The whole schedtrace line and JSON object for one input, as the formats were before
    /// the counters got named fields: every slot has its own value, so a counter read from
    /// the wrong slot shows.
    #[test]
    fn formats_are_pinned() {
        let (d, g) = (sample(1), gauges());
        let r = report(&d, &g);
        assert_eq!(
            r.to_schedtrace(),
            "SCHED 1000ms: procs=2 idle=1 runqueue=2 [3 0] runnext=4 local=2 shared=6 fair=8 \
             steals=36/18 preempt=34+36+60 kicks=38 numa=49% p50=98304us p99=67108864us \
             max=67108864us maxwait=612ms CTX_ALLOC_FAIL=80 KICK_STUCK=82 STARVING=70 \
             longest=pid 42 (hog) waited 612ms, still waiting"
        );
        assert_eq!(r.to_json().to_string(), PINNED_JSON);
    }

    const PINNED_JSON: &str = concat!(
        r#"{"busy_pct":[0.0,0.0],"#,
        r#""ctx":{"alloc_fail":80,"cgroup_folds":102,"cgroups":0,"root_active":0,"tasks":0},"#,
        r#""dispatch":{"fair_tick":8,"keep_prev":16,"lag":72,"local":2,"pick_due":96,"runnext":4,"#,
        r#""shared":6,"steal_llc":10,"steal_looks":88,"steal_node":12,"steal_remote":14,"#,
        r#""steal_tries":86},"#,
        r#""enqueue":{"burst_rest":98,"direct_idle":28,"evicted":68,"local":20,"overflow":24,"pinned":30,"#,
        r#""preempted":26,"reenq":32,"resumed":74,"runnext":22,"runnext_pair":100,"#,
        r#""stranded":66},"#,
        r#""idle_procs":1,"interval_s":1.0,"kicks":{"idle":38,"preempt":40,"stuck":82},"#,
        r#""latency_us":{"max":67108864,"p50":98304,"p99":67108864,"samples":56},"#,
        r#""local_queued":[3,0],"numa":{"local":42,"migrations":46,"migrations_node":48,"#,
        r#""per_node":[{"migrations_in":48,"node":0,"place_home":62,"place_remote":64,"#,
        r#""starts_home":42,"starts_remote":44,"steals_remote":14}],"place_home":62,"#,
        r#""place_remote":64,"remote":44,"steals_remote":14},"#,
        r#""preempt":{"given_back":84,"slice":36,"stale":104,"sysmon":34,"wakeup":60,"#,
        r#""wakeup_head":0,"wakeup_in_order":76,"#,
        r#""wakeup_no_jump":78,"wakeup_not_owed":106},"procs":2,"procs_cpus":"0-1","restarts":0,"#,
        r#""shared_queued":2,"#,
        r#""shared_queued_per_node":[2],"starvation":{"comm":"hog","longest_wait_us":612000,"#,
        r#""over_threshold":70,"pid":42,"still_waiting":true,"threshold_ms":500},"#,
        r#""stolen_tasks":18,"sysmon_ns":94,"sysmon_runs":50,"sysmon_visits":90,"ts_ms":1000,"turn_timer":92}"#
    );

    /// Every key (at every depth) of the `--json` object and its shape, as they were when the
    /// object was first described field by field. Keys may be added; none may go or change
    /// shape, since scripts and dashboards read them.
    const PINNED_KEYS: &[(&str, &str)] = &[
        ("busy_pct", "array"),
        ("busy_pct[]", "float"),
        ("ctx", "object"),
        ("ctx.alloc_fail", "int"),
        ("ctx.cgroups", "int"),
        ("ctx.tasks", "int"),
        ("dispatch", "object"),
        ("dispatch.fair_tick", "int"),
        ("dispatch.keep_prev", "int"),
        ("dispatch.lag", "int"),
        ("dispatch.local", "int"),
        ("dispatch.runnext", "int"),
        ("dispatch.shared", "int"),
        ("dispatch.steal_llc", "int"),
        ("dispatch.steal_node", "int"),
        ("dispatch.steal_remote", "int"),
        ("enqueue", "object"),
        ("enqueue.burst_rest", "int"),
        ("enqueue.direct_idle", "int"),
        ("enqueue.evicted", "int"),
        ("enqueue.local", "int"),
        ("enqueue.overflow", "int"),
        ("enqueue.pinned", "int"),
        ("enqueue.preempted", "int"),
        ("enqueue.reenq", "int"),
        ("enqueue.resumed", "int"),
        ("enqueue.runnext", "int"),
        ("enqueue.runnext_pair", "int"),
        ("enqueue.stranded", "int"),
        ("idle_procs", "int"),
        ("interval_s", "float"),
        ("kicks", "object"),
        ("kicks.idle", "int"),
        ("kicks.preempt", "int"),
        ("kicks.stuck", "int"),
        ("latency_us", "object"),
        ("latency_us.max", "int"),
        ("latency_us.p50", "int"),
        ("latency_us.p99", "int"),
        ("latency_us.samples", "int"),
        ("local_queued", "array"),
        ("local_queued[]", "int"),
        ("numa", "object"),
        ("numa.local", "int"),
        ("numa.migrations", "int"),
        ("numa.migrations_node", "int"),
        ("numa.per_node", "array"),
        ("numa.per_node[]", "object"),
        ("numa.per_node[].migrations_in", "int"),
        ("numa.per_node[].node", "int"),
        ("numa.per_node[].place_home", "int"),
        ("numa.per_node[].place_remote", "int"),
        ("numa.per_node[].starts_home", "int"),
        ("numa.per_node[].starts_remote", "int"),
        ("numa.per_node[].steals_remote", "int"),
        ("numa.place_home", "int"),
        ("numa.place_remote", "int"),
        ("numa.remote", "int"),
        ("numa.steals_remote", "int"),
        ("preempt", "object"),
        ("preempt.given_back", "int"),
        ("preempt.slice", "int"),
        ("preempt.stale", "int"),
        ("preempt.sysmon", "int"),
        ("preempt.wakeup", "int"),
        ("preempt.wakeup_head", "int"),
        ("preempt.wakeup_in_order", "int"),
        ("preempt.wakeup_no_jump", "int"),
        ("preempt.wakeup_not_owed", "int"),
        ("procs", "int"),
        ("procs_cpus", "string"),
        ("restarts", "int"),
        ("shared_queued", "int"),
        ("shared_queued_per_node", "array"),
        ("shared_queued_per_node[]", "int"),
        ("starvation", "object"),
        ("starvation.comm", "string"),
        ("starvation.longest_wait_us", "int"),
        ("starvation.over_threshold", "int"),
        ("starvation.pid", "int"),
        ("starvation.still_waiting", "bool"),
        ("starvation.threshold_ms", "int"),
        ("stolen_tasks", "int"),
        ("sysmon_runs", "int"),
        ("ts_ms", "int"),
    ];

    #[test]
    fn json_keeps_every_pinned_key() {
        let (d, g) = (sample(1), gauges());
        let paths = json_paths(&report(&d, &g).to_json());
        for (key, shape) in PINNED_KEYS {
            let got = paths.iter().find(|(p, _)| p == key).map(|(_, s)| *s);
            assert_eq!(got, Some(*shape), "{key}");
        }
    }

    #[test]
    fn report_formats() {
        let (d, g) = (sample(1), gauges());
        let r = report(&d, &g);
        let line = r.to_schedtrace();
        assert!(
            line.starts_with("SCHED 1000ms: procs=2 idle=1 runqueue=2 [3 0]"),
            "{line}"
        );
        let j = r.to_json();
        assert_eq!(j["procs"], 2);
        assert_eq!(j["local_queued"], serde_json::json!([3, 0]));
        assert_eq!(j["dispatch"]["local"], 2);
        assert!(j["latency_us"]["p99"].as_u64().is_some());
        let over = d.total().starve_over;
        assert!(
            line.ends_with(&format!(
                "STARVING={over} longest=pid 42 (hog) waited 612ms, still waiting"
            )),
            "{line}"
        );
        assert_eq!(j["starvation"]["pid"], 42);
        assert_eq!(j["starvation"]["over_threshold"], over);
        // Both CPUs are in node 0: the node's column is the total.
        assert_eq!(
            j["numa"]["per_node"][0]["starts_home"],
            d.total().numa_local
        );
        assert_eq!(j["procs_cpus"], "0-1");
    }

    #[test]
    fn quiet_when_nothing_waits_long() {
        let d = Sample {
            per_cpu: vec![Counters::ZERO],
            lat: vec![0; NR_LAT_BUCKETS],
        };
        let g = Gauges {
            procs: vec![0],
            local_queued: vec![0],
            shared_queued: vec![0],
            cpu_node: vec![0],
            longest_wait: WaitRec {
                wait_us: 3_000,
                pid: 7,
                comm: "sh".into(),
                still_waiting: false,
            },
            starve_warn_ms: 500,
            ..Default::default()
        };
        let r = Report {
            elapsed_ms: 1000,
            interval_s: 1.0,
            d: &d,
            g: &g,
        };
        let line = r.to_schedtrace();
        assert!(line.ends_with("maxwait=3ms"), "{line}");
    }
}
