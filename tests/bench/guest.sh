#!/bin/bash
# Benchmark workloads, run inside the VM by scripts/bench.sh. Every workload runs under each
# scheduler in interleaved rounds (the order rotates each round). Results: CSV rows
# "round,sched,workload,metric,value" in $OUT/raw.csv; one line per scheduler that did not
# load, died or did not unload in $OUT/status (such a scheduler is left out from then on).
#   guest.sh OUT ROUNDS SCHED_SPEC...    (SCHED_SPEC: eevdf, or NAME=/path/to/binary [flags])
# $OUT/frames is tests/bench/frames.c, compiled by bench.sh.
set -u
OUT=$1; ROUNDS=$2; shift 2
SCHEDS=("$@")
N=$(nproc)
DUR=${BENCH_DUR:-15}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
RAW=$OUT/raw.csv
LOG=$OUT/bench.log
echo "round,sched,workload,metric,value" > "$RAW"
log() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$LOG" >&2; }
emit() { echo "$ROUND,$SNAME,$1,$2,$3" >> "$RAW"; log "$SNAME $1 $2=$3"; }
state() { cat /sys/kernel/sched_ext/state; }
mark() { echo "$ROUND,$SNAME,$1,$2" >> "$OUT/marks"; sync "$OUT/marks"; }

# A scheduler that fails is reported once in $OUT/status and skipped in later rounds, so that
# one peer that does not work on this kernel costs a line in the report, not the whole run.
SPID=""; FAILED=" "
status() { echo "$*" >> "$OUT/status"; log "$*"; }
wait_state() { # STATE TENTHS: whether sched_ext reached STATE within TENTHS tenths of a second
  local i
  for ((i = 0; i < $2; i++)); do [ "$(state)" = "$1" ] && return 0; sleep 0.1; done
  return 1
}
start_sched() { # SPEC
  local spec=$1 i t0
  SNAME=${spec%%=*}
  [ "$spec" = eevdf ] && { SNAME=eevdf; return 0; }
  [[ $FAILED == *" $SNAME "* ]] && return 1
  local cmd=${spec#*=} slog="$OUT/$SNAME-r$ROUND.log"
  t0=$EPOCHREALTIME
  # shellcheck disable=SC2086
  $cmd > "$slog" 2>&1 &
  SPID=$!
  for ((i = 0; i < 900; i++)); do
    if [ "$(state)" = enabled ]; then
      log "$SNAME loaded (ops $(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)) in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
      return 0
    fi
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
  done
  local why; why=$(grep -v '^\s*$' "$slog" | tail -1 | cut -c1-160)
  kill -INT "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""
  wait_state disabled 100
  status "$SNAME: did not load in the guest (${why:-no output}); left out"
  FAILED+="$SNAME "
  return 1
}
stop_sched() {
  [ -n "$SPID" ] || return 0
  # A scheduler the kernel ejected (watchdog, error exit) has unloaded already: its figures
  # for this round then mix it with EEVDF, which the status line says.
  if ! kill -0 "$SPID" 2>/dev/null || [ "$(state)" != enabled ]; then
    status "$SNAME: exited during round $ROUND ($(grep -v '^\s*$' "$OUT/$SNAME-r$ROUND.log" | tail -1 | cut -c1-160)); left out"
    FAILED+="$SNAME "
  fi
  kill -INT "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""
  if ! wait_state disabled 100; then
    # Every later figure would be measured under it: stop, and bench.sh reports no result.
    status "$SNAME: still $(state) 10 s after SIGINT; stopping the run"; exit 1
  fi
}

# cyclictest (SCHED_OTHER threads, so the scheduler under test places them) while CPU hogs
# oversubscribe the CPUs: wakeup latency percentiles from its histogram. Under EEVDF the same
# run with SCHED_FIFO threads (which preempt at once, whatever sched_ext does) gives the floor
# the VM itself sets: timer delivery and vCPUs the host deschedules.
w_cyclictest() {
  cyc_run cyclictest --policy=other
  if [ "$SNAME" = eevdf ]; then cyc_run cyclictest_rt_floor --policy=fifo -p 50; fi
}
cyc_run() { # WORKLOAD POLICY-ARGS...
  local w=$1; shift
  stress-ng --temp-path /tmp -q -c $((2 * N)) -t $((DUR + 3)) &
  local hp=$!
  sleep 1
  cyclictest "$@" -m -q -t "$N" -i 1000 -D "$DUR" -h 200000 > "$OUT/cyc.tmp" 2>&1
  wait "$hp"
  python3 - "$OUT/cyc.tmp" <<'EOF' | while read -r k v; do emit "$w" "$k" "$v"; done
import sys
hist = {}
mx = 0
for line in open(sys.argv[1]):
    if line.startswith("# Max Latencies"):
        mx = max(int(x) for x in line.split(":")[1].split())
    if line[:1].isdigit():
        f = line.split()
        hist[int(f[0])] = hist.get(int(f[0]), 0) + sum(int(x) for x in f[1:])
total = sum(hist.values())
def pct(q):
    c = 0
    for us in sorted(hist):
        c += hist[us]
        if c >= q * total:
            return us
    return mx
print("p50_us", pct(0.5)); print("p99_us", pct(0.99)); print("max_us", mx)
EOF
}

# Message passing from a light to a heavy load: 1, 2, 4 and 8 groups of 20 senders and 20
# receivers (40 to 320 tasks on N CPUs), processes and threads. Every run passes the same
# 160,000 messages (groups x loops = 400), about 1-3 s under emulation.
w_hackbench() {
  local g t
  for g in 1 2 4 8; do
    t=$(hackbench -g "$g" -l $((400 / g)) 2>&1 | awk '/^Time:/ {print $2}'); emit "hackbench_proc_g$g" time_s "${t:-nan}"
    t=$(hackbench -T -g "$g" -l $((400 / g)) 2>&1 | awk '/^Time:/ {print $2}'); emit "hackbench_thread_g$g" time_s "${t:-nan}"
  done
}

w_pipe() {
  local u; u=$(perf bench sched pipe -l 40000 2>&1 | awk '/usecs\/op/ {print $1}')
  emit pipe usec_per_rt "${u:-nan}"
}

# The marks around it let bench.sh divide by the host CPU time the VM got meanwhile (the host
# sampler counts the lines of $OUT/marks), since that share drifts with the outer host.
w_stress() {
  mark stress_cpu start
  stress-ng --temp-path /tmp -c $((2 * N)) -t "$DUR" --metrics-brief > "$OUT/stress.tmp" 2>&1
  mark stress_cpu end
  emit stress_cpu bogo_ops_s "$(stressor_metric cpu ops_s "$OUT/stress.tmp")"
  emit stress_cpu cpus "$(stressor_metric cpu cpus "$OUT/stress.tmp")"
  emit stress_cpu bogo_per_cpu_s "$(stressor_metric cpu per_cpu_s "$OUT/stress.tmp")"
}
# stressor_metric STRESSOR WHAT FILE: from stress-ng's --metrics-brief line of STRESSOR (bogo
# ops, real s, usr s, sys s, ops/s, ops per usr+sys s): ops_s, the throughput; cpus, the CPUs'
# worth its processes ran ((usr + sys) / real); per_cpu_s, the ops per CPU-second they ran.
# The last two tell a scheduler that gave a stressor less CPU from one under which its CPU
# time bought less work (costlier switches, colder caches). nan if the line is missing.
stressor_metric() {
  awk -v s="$1" -v w="$2" '$4 == s && $5 ~ /^[0-9]+$/ {
      if (w == "ops_s") v = $9; else if (w == "per_cpu_s") v = $10
      else if ($6 > 0) v = sprintf("%.3f", ($7 + $8) / $6)
    } END { print (v == "" ? "nan" : v) }' "$3"
}

# A 60 Hz frame loop doing FRAME_ITERS of work (about 4 ms on the idle guest, calibrated once
# in the warm-up so that every scheduler gets the same work) while a build-like background
# fills the machine: N CPU hogs and N workers that fork and reap children. Lateness is the
# time a frame waited for a CPU (frames.c); the background's bogo-ops/s is what the frames'
# priority cost it, marked as w_stress is. Under EEVDF the same run with the frame loop
# SCHED_FIFO gives the floor.
w_frames() {
  frames_run frametime
  if [ "$SNAME" = eevdf ]; then frames_run frametime_rt_floor chrt -f 50; fi
}
frames_run() { # WORKLOAD [PREFIX...]
  local w=$1; shift
  stress-ng --temp-path /tmp --cpu "$N" --fork "$N" -t $((DUR + 2)) --metrics-brief > "$OUT/bg.tmp" 2>&1 &
  local bp=$!
  mark "$w" start
  sleep 1
  "$@" "$OUT/frames" "$FRAME_ITERS" 60 "$DUR" > "$OUT/frames.tmp" 2>&1
  wait "$bp"
  mark "$w" end
  local k v
  while read -r k v; do
    case $k in late_gt2ms|late_gt2ms_pct|late_or_skipped|p99_late_ms|missed_pct|cpu_ms_per_frame) emit "$w" "$k" "$v" ;; esac
  done < "$OUT/frames.tmp"
  grep -q '^p99_late_ms ' "$OUT/frames.tmp" || emit "$w" p99_late_ms nan
  local s
  for s in cpu fork; do
    emit "$w" "bg_${s}_bogo_ops_s" "$(stressor_metric "$s" ops_s "$OUT/bg.tmp")"
    emit "$w" "bg_${s}_cpus" "$(stressor_metric "$s" cpus "$OUT/bg.tmp")"
    emit "$w" "bg_${s}_per_cpu_s" "$(stressor_metric "$s" per_cpu_s "$OUT/bg.tmp")"
  done
}

# N+1 CPU hogs on N CPUs: Jain's index of their CPU time.
w_fair() {
  local pids=() i t=""
  for ((i = 0; i <= N; i++)); do sh -c 'while :; do :; done' & pids+=($!); done
  sleep "$DUR"
  for i in "${pids[@]}"; do t+=" $(awk '{print $14 + $15}' /proc/$i/stat)"; done
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
  emit fairness jain "$(awk '{ for (i = 1; i <= NF; i++) { s += $i; q += $i * $i; n++ } } END { printf "%.4f", s * s / (n * q) }' <<< "$t")"
}

# Memory-bound threads whose memory lives on node 0 (numactl --membind), as many as node 0
# has CPUs: throughput, the share of samples in which they ran on node 0, their context
# switches and CPU migrations, and the NUMA balancing page faults (numa_hint_faults) and page
# migrations the kernel made meanwhile. NUMA
# balancing scans a task's memory from the fair class's tick, which tasks of a sched_ext
# scheduler do not get; under EEVDF the run is repeated with it off, to see what it costs.
w_numa() {
  numa_run numa
  [ "$SNAME" = eevdf ] && [ -w /proc/sys/kernel/numa_balancing ] || return 0
  local was; was=$(cat /proc/sys/kernel/numa_balancing)
  echo 0 > /proc/sys/kernel/numa_balancing
  numa_run numa_balancing_off
  echo "$was" > /proc/sys/kernel/numa_balancing
}
vmstat_numa() { awk '$1 == "numa_hint_faults" || $1 == "numa_pages_migrated" {printf "%s ", $2}' /proc/vmstat; }
numa_run() { # WORKLOAD
  local w=$1 node0 nthreads v0 v1
  node0=$(cat /sys/devices/system/node/node0/cpulist)
  nthreads=$(python3 -c "
s='$node0'; n=0
for part in s.split(','):
    a,_,b=part.partition('-'); n += (int(b)-int(a)+1) if b else 1
print(n)")
  read -ra v0 <<< "$(vmstat_numa)"
  numactl --membind=0 stress-ng --temp-path /tmp --stream "$nthreads" --stream-l3-size 4M -t "$DUR" --metrics-brief > "$OUT/numa.tmp" 2>&1 &
  local sp=$!
  sleep 2
  python3 - "$node0" "$((DUR - 3))" <<'EOF' > "$OUT/numa-share.tmp"
import glob, sys, time
cpus = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    cpus.update(range(int(a), int(b or a) + 1))
on = tot = 0
counts = {}  # tid: (switches, migrations), the latest read: the threads exit with the run
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for st in glob.glob("/proc/[0-9]*/task/*/stat"):
        try:
            s = open(st).read()
            if "(stress-ng-stre" not in s:
                continue
            sched = dict(l.split(":", 1) for l in open(st[:-4] + "sched") if ":" in l)
        except OSError:
            continue
        sched = {k.strip(): v for k, v in sched.items()}
        counts[st] = (int(float(sched.get("nr_switches", 0))), int(float(sched.get("se.nr_migrations", 0))))
        f = s.rsplit(")", 1)[1].split()
        if f[0] != "R":
            continue
        tot += 1
        on += int(f[36]) in cpus
    time.sleep(0.05)
sw = sum(c[0] for c in counts.values())
mig = sum(c[1] for c in counts.values())
print("%.4f %d %d" % (on / tot if tot else 0, sw, mig))
EOF
  wait "$sp"
  read -ra v1 <<< "$(vmstat_numa)"
  emit "$w" bogo_ops_s "$(awk '/ stream / {print $(NF-1); exit}' "$OUT/numa.tmp")"
  local share sw mig
  read -r share sw mig < "$OUT/numa-share.tmp"
  emit "$w" node0_share "$share"
  emit "$w" switches "${sw:-nan}"
  emit "$w" migrations "${mig:-nan}"
  if [ "${#v0[@]}" = 2 ] && [ "${#v1[@]}" = 2 ]; then
    emit "$w" hint_faults $((v1[0] - v0[0]))
    emit "$w" pages_migrated $((v1[1] - v0[1]))
  fi
}

# Average ns per call of each scx BPF program while a mixed load runs (bpf_stats_enabled).
w_overhead() {
  [ -n "$SPID" ] || return 0
  sysctl -q kernel.bpf_stats_enabled=1
  local before; before=$(bpftool -j prog show 2>/dev/null)
  hackbench -g 4 -l 300 > /dev/null 2>&1
  perf bench sched pipe -l 20000 > /dev/null 2>&1
  local after; after=$(bpftool -j prog show 2>/dev/null)
  sysctl -q kernel.bpf_stats_enabled=0
  python3 "$(dirname "$0")/prog_cost.py" <(echo "$before") <(echo "$after") |
    while read -r k v; do emit overhead "$k" "$v"; done
}

# Where the time of the rows scx_gmp misses goes (docs/benchmarks.md): a short run of each
# under a sched_switch/sched_waking/sched_migrate_task trace, summarised by trace_stats.py
# (wakeup to running, wakeups run on another CPU, preemptions, idle CPU time while a task
# waited). The trace slows every run; its figures are for comparing schedulers, not timings.
TRACEFS=/sys/kernel/tracing
trace_on() {
  [ -d "$TRACEFS/events" ] || mount -t tracefs tracefs "$TRACEFS" 2>/dev/null
  echo 0 > "$TRACEFS/tracing_on"; echo > "$TRACEFS/trace"
  # 128 MiB in all, whatever the CPU count (the guest has 3 GiB).
  echo $((131072 / N < 16384 ? 131072 / N : 16384)) > "$TRACEFS/buffer_size_kb"
  local e
  for e in sched_switch sched_waking sched_wakeup_new sched_migrate_task; do
    echo 1 > "$TRACEFS/events/sched/$e/enable"
  done
  echo 1 > "$TRACEFS/tracing_on"
}
trace_off() { # WORKLOAD [trace_stats.py flags] [COMM]: stops the trace and emits its summary
  echo 0 > "$TRACEFS/tracing_on"
  local lost; lost=$(awk '/^overrun:/ { s += $2 } END { print s + 0 }' "$TRACEFS"/per_cpu/cpu*/stats)
  cat "$TRACEFS/trace" > "$OUT/trace.tmp"
  echo 0 > "$TRACEFS/events/enable"
  emit "$1" lost_events "$lost"
  local w=$1; shift
  python3 "$(dirname "$0")/trace_stats.py" "$OUT/trace.tmp" "$@" |
    while read -r k v; do emit "$w" "$k" "$v"; done
  rm -f "$OUT/trace.tmp"
}
# Each traced run follows an untraced one of the same command: the parse before it leaves the
# guest nearly idle for seconds, after which scx_gmp's --procs auto has shrunk its set, and a
# traced burst from a shrunk set measured the set growing (docs/benchmarks.md).
# hackbench's figures count from its last fork (--after-forks), as its timer does.
traced() { # WORKLOAD TRACE_STATS_FLAG COMMAND...
  local w=$1 flag=$2; shift 2
  "$@" > /dev/null 2>&1
  trace_on; "$@" > /dev/null 2>&1; trace_off "$w" ${flag:+"$flag"}
}
w_trace() {
  traced trace_hackbench_thread_g4 --after-forks hackbench -T -g 4 -l 25
  traced trace_hackbench_proc_g8 --after-forks hackbench -g 8 -l 12
  # Two groups: the light load where processes trail the peers and threads do not.
  traced trace_hackbench_proc_g2 --after-forks hackbench -g 2 -l 50
  traced trace_hackbench_thread_g2 --after-forks hackbench -T -g 2 -l 50
  traced trace_pipe "" perf bench sched pipe -l 5000
  stress-ng --temp-path /tmp -q --cpu "$N" --fork "$N" -t 6 &
  local bp=$!
  "$OUT/frames" "$FRAME_ITERS" 60 5 > /dev/null 2>&1 &
  local fp=$!
  # Which tasks get the machine: the background's two stressors and the frame loop.
  sleep 1; trace_on; sleep 3
  trace_off trace_frames --share stress-ng-cpu --share stress-ng-fork --share frames frames
  wait "$fp" "$bp"
}

WORKLOADS=(cyclictest hackbench pipe stress frames fair numa overhead)
# Run only when named (bench.sh --workloads trace): diagnostics, not rows of the README table.
OPTIONAL_WORKLOADS=(trace)
# bench.sh --workloads: a subset, checked against the list above on the host.
[ -n "${BENCH_WORKLOADS:-}" ] && read -ra WORKLOADS <<< "$BENCH_WORKLOADS"
# On one node the memory-bound load has no node to choose between: its rows would read as a
# NUMA figure where there is none, so the table leaves them out.
# The count goes to $OUT/nodes for the report, which says so beside the table.
# (A kernel without NUMA has no node directory: one node.)
NR_NODES=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' 2>/dev/null | wc -l)
[ "$NR_NODES" -ge 1 ] || NR_NODES=1
echo "$NR_NODES" > "$OUT/nodes"
if [ "$NR_NODES" -lt 2 ]; then
  for wi in "${!WORKLOADS[@]}"; do [ "${WORKLOADS[wi]}" = numa ] && unset "WORKLOADS[wi]"; done
  WORKLOADS=("${WORKLOADS[@]}")
fi

# Warm-up, not measured: the guest reads binaries over 9p, and the first stress-ng of a boot
# faulted in ~800 pages of its text from there, its workers blocked on those reads (traced:
# ~700 D-state switches in 3 s against none in a later run) in whichever scheduler ran first.
warm_up() {
  stress-ng --temp-path /tmp -q -c "$N" -t 2
  numactl --membind=0 stress-ng --temp-path /tmp -q --stream 1 --stream-l3-size 4M -t 2
  cyclictest -m -q -t 1 -i 1000 -D 1 > /dev/null 2>&1
  hackbench -g 1 -l 20 > /dev/null 2>&1
  perf bench sched pipe -l 1000 > /dev/null 2>&1
  python3 -c pass; bpftool version > /dev/null 2>&1
  stress-ng --temp-path /tmp -q --fork 1 -t 1
  # On the idle guest, before any scheduler is loaded: the work of one frame, ~4 ms.
  FRAME_ITERS=$("$OUT/frames" --calibrate 4)
}
: > "$OUT/marks"
warm_up
log "bench: $N CPUs, nodes $(cat /sys/devices/system/node/online), kernel $(uname -r), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), rounds $ROUNDS, scheds: ${SCHEDS[*]}"
log "workloads: ${WORKLOADS[*]}"
log "frame work: $FRAME_ITERS iterations (4 ms on the idle guest); numa_balancing $(cat /proc/sys/kernel/numa_balancing 2>/dev/null || echo absent)"
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  k=${#SCHEDS[@]}
  for ((j = 0; j < k; j++)); do
    spec=${SCHEDS[$(((j + ROUND - 1) % k))]}
    start_sched "$spec" || continue
    for w in "${WORKLOADS[@]}"; do "w_$w"; done
    stop_sched
  done
done
echo complete > "$OUT/complete"
