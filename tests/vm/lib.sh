# Helpers for the VM test cases (sourced by tests/vm/suite.sh, runs inside the guest).
# Each case records "PASS name: detail" or "FAIL name: reason" in $RES/results.txt.

SCX=${SCX:-$REPO/target/release/scx_gmp}
SYS=/sys/kernel/sched_ext
LOGS=$RES/logs
mkdir -p "$LOGS"

log() { printf '[%s] %s\n' "$(date +%T)" "$*" | tee -a "$RES/suite.log" >&2; }
# One line per verdict: details are folded onto one line.
pass() { local d; d=$(tr '\n' ' ' <<< "${2:-ok}"); echo "PASS $1: $d" >> "$RES/results.txt"; log "PASS $1: $d"; }
skip() { local d; d=$(tr '\n' ' ' <<< "$2"); echo "SKIP $1: $d" >> "$RES/results.txt"; log "SKIP $1: $d"; }
fail() { local d; d=$(tr '\n' ' ' <<< "$2"); echo "FAIL $1: $d" >> "$RES/results.txt"; log "FAIL $1: $d"; }

state() { cat "$SYS/state" 2>/dev/null || echo absent; }
enable_seq() { cat "$SYS/enable_seq" 2>/dev/null || echo 0; }

# wait_state WANT SECONDS: poll until sched_ext's state is WANT; return 1 on timeout.
wait_state() {
  local want=$1 limit=$2 t=0
  while [ "$(state)" != "$want" ]; do
    sleep 0.1; t=$((t + 1))
    [ "$t" -ge $((limit * 10)) ] && return 1
  done
  return 0
}

# hang_dump TAG WHY: save what a hung-task report leaves out before the host stops the guest:
# every task's stack and the runqueues (SysRq-t prints both), the blocked tasks (w) and the
# CPUs' backtraces (l), with the sched_ext state, into $LOGS/TAG-hang-*.txt.
hang_dump() {
  echo "$1: $2, dumping tasks and runqueues" > /dev/kmsg
  cat $SYS/state > "$LOGS/$1-hang-state.txt" 2>&1
  echo w > /proc/sysrq-trigger; echo l > /proc/sysrq-trigger; echo t > /proc/sysrq-trigger
  sleep 2; dmesg > "$LOGS/$1-hang-dmesg.txt"
}

# local_storage_maps PID: ids of the BPF task and cgroup local-storage maps (types 29, 32)
# the process holds. scx_gmp must hold none: freeing one while a CPU goes offline can
# deadlock the kernel's CPU hotplug (see task_ctxs in bpf/gmp.bpf.h and docs/kernel-notes.md).
local_storage_maps() {
  local f
  for f in /proc/"$1"/fdinfo/*; do
    awk '/^map_type:/ {t = $2} /^map_id:/ {id = $2} END {if (t == 29 || t == 32) print id}' "$f" 2>/dev/null
  done | sort -un | tr '\n' ' '
}

# ctx_balance LOG: after a workload, do the BPF side's per-task and per-cgroup states (the
# last JSON stats line of LOG) match the tasks and cgroups alive? Prints "ok: <counts>" or
# the problem.
# Tasks: at most the threads alive plus slack for ones exiting right now (a leak grows with
# every fork, so a storm leaves thousands over); cgroups: the count of cgroup directories;
# the root cgroup's active count (cgroup weights): what a quiet guest has runnable, a few,
# where every count leaked by a removed cgroup would stay on top.
ctx_balance() {
  local threads cgroups
  threads=$(ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null | wc -l)
  cgroups=$(find /sys/fs/cgroup -mindepth 0 -type d 2>/dev/null | wc -l)
  python3 - "$1" "$threads" "$cgroups" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    if line.startswith('{'):
        last = json.loads(line)
threads, cgroups = int(sys.argv[2]), int(sys.argv[3])
if last is None or 'ctx' not in last:
    print('no stats line with ctx'); sys.exit()
c = last['ctx']
if c['tasks'] > threads + 64 or c['tasks'] < threads // 2:
    print(f"{c['tasks']} task states for {threads} threads")
elif abs(c['cgroups'] - cgroups) > 2:
    print(f"{c['cgroups']} cgroup states for {cgroups} cgroups")
elif c['alloc_fail']:
    print(f"{c['alloc_fail']} allocation failures")
elif abs(c.get('root_active', 0)) > 6:
    print(f"the root cgroup counts {c['root_active']} active children and tasks on a quiet guest")
else:
    print(f"ok: {c['tasks']} task states for {threads} threads, {c['cgroups']} cgroup states for {cgroups} cgroups, "
          f"root cgroup active {c.get('root_active')}")
PY
}

# Kernel log since the last mark, to judge each case on its own.
DMESG_MARK=0
dmesg_mark() { DMESG_MARK=$(dmesg | wc -l); }
dmesg_new() { dmesg | tail -n +$((DMESG_MARK + 1)); }
# kmsg_ms PATTERN_A PATTERN_B: milliseconds between the first kernel-log lines since the mark
# matching each (the kernel's own clock, so the shell's scheduling delays do not count); -1 if
# either is missing.
kmsg_ms() {
  local log a b
  log=$(dmesg_new)
  a=$(grep -m1 -e "$1" <<< "$log" | sed 's/^\[ *\([0-9.]*\)\].*/\1/')
  b=$(grep -m1 -e "$2" <<< "$log" | sed 's/^\[ *\([0-9.]*\)\].*/\1/')
  awk -v a="$a" -v b="$b" 'BEGIN { if (a == "" || b == "") print -1; else printf "%d", (b - a) * 1000 }'
}
# Print the kernel's complaints (oops, warnings, stalls, error exits) since the mark.
kernel_faults() {
  dmesg_new | grep -E 'BUG:|WARNING:|Oops|stall|runnable task stall|disabled \((runtime error|scx_bpf_error|watchdog)' || true
}

# start_sched NAME ARGS...: start scx_gmp in the background, logs under $LOGS/NAME.*,
# and wait for it to be enabled. Sets SCHED_PID.
start_sched() {
  local name=$1; shift
  "$SCX" "$@" > "$LOGS/$name.out" 2> "$LOGS/$name.err" &
  SCHED_PID=$!
  if ! wait_state enabled 90; then
    log "$name: scheduler did not become enabled; stderr:"; cat "$LOGS/$name.err" >&2
    return 1
  fi
  return 0
}

# stop_sched [SIGNAL]: stop it and wait; sets SCHED_RC.
stop_sched() {
  kill -"${1:-INT}" "$SCHED_PID" 2>/dev/null
  wait "$SCHED_PID"; SCHED_RC=$?
  wait_state disabled 10 || true
}

# Jain's fairness index of the numbers given: (sum x)^2 / (n * sum x^2).
jain() { awk '{ for (i = 1; i <= NF; i++) { s += $i; q += $i * $i; n++ } } END { if (q == 0) print 0; else printf "%.4f\n", s * s / (n * q) }' <<< "$*"; }

# CPU time (utime+stime, clock ticks) of a process.
cputime() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# The ticks of several running processes at one instant (one awk over all their stat files):
# read one by one, each read lags behind hogs that keep running, so later ones read higher.
# A process that is gone reads 0 in its place, so the positions stay those of the pids given.
cputimes() {
  local i files=()
  for i in "$@"; do files+=("/proc/$i/stat"); done
  awk 'BEGIN { for (i = 1; i < ARGC; i++) { v = 0
    if ((getline l < ARGV[i]) > 0) { split(l, f, " "); v = f[14] + f[15] }
    printf "%d ", v } }' "${files[@]}"
}

# Sum a field over the JSON stats lines of a log: json_sum FILE 'jq-like.path' (dots only).
json_sum() { json_series "$1" "$2" | tr ' ' '\n' | awk '$1 != "None" && $1 != "" { s += $1 } END { printf "%d\n", s }'; }

# The largest value of a field over the JSON stats lines of a log; nothing if it has none.
json_max() { json_series "$1" "$2" | tr ' ' '\n' | awk '$1 != "None" && $1 != "" && (m == "" || $1 + 0 > m) { m = $1 + 0 } END { if (m != "") print m }'; }

# The shell line every CPU hog runs. Exported: survive runs its work in a child bash, where
# cgroup_task_churn starts hogs too.
export HOG='while :; do :; done'

# A CPU hog that exits after $1 seconds.
hog() { timeout "$1" sh -c "$HOG"; }

# Become COMMAND... in the cgroup directory $1, which the process joins before it execs, so
# the command and all it forks start there. Like spin, it replaces the calling shell: start it
# with & (its own pid is then $!) or inside ( ).
in_cgroup() { exec sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' in_cgroup "$@"; }

# Start a CPU hog in the background whose own pid is $! (kill it when done).
spin() { exec sh -c "$HOG"; }

# Per-CPU tick counters from /proc/stat, one line per CPU: "id busy total".
cpu_snap() { awk '/^cpu[0-9]/ { b = $2 + $3 + $4 + $7 + $8 + $9; print substr($1, 4), b, b + $5 + $6 }' /proc/stat; }
# cpu_busy_pct SNAP_BEFORE SNAP_AFTER: busy % of each CPU in between, space-separated by CPU id.
cpu_busy_pct() {
  paste -d' ' <(echo "$1") <(echo "$2") |
    awk '{ db = $5 - $2; dt = $6 - $3; printf "%s%.0f", (NR > 1 ? " " : ""), dt ? 100 * db / dt : 0 } END { print "" }'
}
# The CPU a task last ran on (field 39 of /proc/PID/stat).
last_cpu() { awk '{ print $39 }' "/proc/$1/stat" 2>/dev/null; }
# A field of /proc/PID/sched ("policy", "ext.enabled").
sched_field() { awk -v k="$2" '$1 == k { print $3 }' "/proc/$1/sched" 2>/dev/null; }
# How many NUMA nodes the guest has.
node_count() { ls -d /sys/devices/system/node/node[0-9]* | wc -l; }
# The NUMA node of a CPU (0 where the kernel shows none).
cpu_node() {
  local d
  for d in /sys/devices/system/cpu/cpu"$1"/node[0-9]*; do [ -e "$d" ] && { echo "${d##*node}"; return; }; done
  echo 0
}
# CPUs of a NUMA node as a list of ids.
node_cpus() { python3 -c '
import sys
out = []
for part in open("/sys/devices/system/node/node%s/cpulist" % sys.argv[1]).read().strip().split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print(" ".join(map(str, out)))' "$1"; }
# Values of a JSON field over the stats lines of a log, space-separated (dots only).
json_series() {
  python3 - "$1" "$2" <<'PY'
import json, sys
vals = []
for line in open(sys.argv[1]):
    if not line.startswith('{'):
        continue
    v = json.loads(line)
    for k in sys.argv[2].split('.'):
        v = v.get(k) if isinstance(v, dict) else None
    vals.append(str(v))
print(" ".join(vals))
PY
}
