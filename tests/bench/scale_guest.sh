#!/bin/bash
# The scale benchmark's loads, run inside one VM by scripts/scale.sh: 2 hogs per CPU, a
# hackbench, and the fixed load (one hackbench group on CPUs 0 and 1), under EEVDF (nothing
# loaded) and under scx_gmp. Counts the work scx_gmp does (from its --json counters and the
# kernel's BPF run statistics) and the guest's kernel-time share under both. Results: CSV
# rows "cpus,sched,load,metric,value" appended to $OUT/raw.csv.
#   scale_guest.sh OUT SCX_GMP_BINARY
set -u
OUT=$1; SCX=$2
N=$(nproc)
DUR=${SCALE_DUR:-10}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
RAW=$OUT/raw.csv
LOG=$OUT/scale.log
log() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$LOG" >&2; }
emit() { echo "$N,$SNAME,$LOAD,$1,$2" >> "$RAW"; log "$N CPUs $SNAME $LOAD $1=$2"; }
state() { cat /sys/kernel/sched_ext/state; }
wait_state() { # STATE TENTHS
  local i
  for ((i = 0; i < $2; i++)); do [ "$(state)" = "$1" ] && return 0; sleep 0.1; done
  return 1
}

# The guest's CPU time in kernel mode (system, irq, softirq) and in all, from /proc/stat.
cpu_times() { awk '/^cpu / {print $4 + $7 + $8, $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# Each sched_ext program's run count and run time (kernel.bpf_stats_enabled), as JSON.
prog_stats() { bpftool -j prog show 2>/dev/null || echo '[]'; }

# One measured window around "$@" (a command that returns when the load is done): the
# kernel-time share, and under scx_gmp its counters over the window and each program's ns
# per call. The --json lines written during the window are those after line $before.
measure() {
  local k0 t0 k1 t1 before=0 p0 p1
  read -r k0 t0 < <(cpu_times)
  [ -n "$SPID" ] && before=$(wc -l < "$OUT/gmp-$N.json")
  p0=$(prog_stats)
  "$@"
  p1=$(prog_stats)
  read -r k1 t1 < <(cpu_times)
  emit kernel_share "$(awk -v k=$((k1 - k0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.4f", t ? k / t : 0 }')"
  [ -n "$SPID" ] || return 0
  sleep 1.2   # the interval that closed the window is written a second later
  { python3 - "$OUT/gmp-$N.json" "$before" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]
objs = [json.loads(l) for l in lines if l.startswith("{")][:-1] or [{}]
def total(path):
    # None when no line has the key (a build from before it was counted).
    s = None
    for o in objs:
        v = o
        for k in path.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            s = (s or 0) + v
    return s
secs = sum(o.get("interval_s", 0) for o in objs) or 1
for key in ("sysmon_runs", "sysmon_visits", "sysmon_ns", "turn_timer", "dispatch.steal_tries",
            "dispatch.steal_looks", "preempt.sysmon", "kicks.preempt", "ctx.cgroup_folds"):
    if total(key) is not None:
        print(key.replace(".", "_"), total(key))
print("seconds", "%.1f" % secs)
EOF
    python3 "$(dirname "$0")/prog_cost.py" <(echo "$p0") <(echo "$p1") --calls
  } | while read -r k v; do emit "$k" "$v"; done
}

hogs_for() { # SECONDS: 2 busy loops per CPU
  local pids=() i
  for ((i = 0; i < 2 * N; i++)); do sh -c 'while :; do :; done' & pids+=($!); done
  sleep "$1"
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
}
hackbench_run() { hackbench -g 4 -l 200 > /dev/null 2>&1; }
# The same work at every size: its two busy vCPUs never outnumber the host's cores, so its ns
# per call is the programs' own work rather than time the host took a vCPU away; what grows
# with the size in it is work per call that grows with the CPU count.
fixed_run() { taskset -c 0,1 hackbench -g 1 -l 400 > /dev/null 2>&1; }

run_loads() {
  LOAD=hogs; measure hogs_for "$DUR"
  LOAD=hackbench; measure hackbench_run
  LOAD=fixed; measure fixed_run
}

SPID=""
sysctl -q kernel.bpf_stats_enabled=1
hackbench -g 1 -l 20 > /dev/null 2>&1; bpftool version > /dev/null 2>&1; python3 -c pass
log "scale: $N CPUs, nodes $(cat /sys/devices/system/node/online), kernel $(uname -r)"
SNAME=eevdf; run_loads
SNAME=scx_gmp
"$SCX" --stats 1 --json > "$OUT/gmp-$N.json" 2> "$OUT/gmp-$N.err" & SPID=$!
if wait_state enabled 600; then
  sleep 2
  run_loads
  [ "$(state)" = enabled ] || log "scx_gmp was ejected: $(grep -m1 -i exit "$OUT/gmp-$N.err")"
else
  log "scx_gmp did not load: $(tail -1 "$OUT/gmp-$N.err")"
fi
kill -INT "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null
wait_state disabled 100
echo complete > "$OUT/complete-$N"
