# The processor set (--procs), NUMA placement and --partial. Each case asserts on what the
# tasks experienced (/proc/stat per-CPU busy time, the CPU each task last ran on,
# /proc/PID/sched) and reports scx_gmp's own counters beside it.

# A task that runs ~20 ms, sleeps 10 ms, again: it wakes often, so placement decides where.
periodic() { exec python3 -c '
import time
while True:
    end = time.monotonic() + 0.02
    while time.monotonic() < end:
        pass
    time.sleep(0.01)'; }

# --procs 2: unpinned hogs run only on the two compact CPUs; a task pinned outside still runs.
t_procs_fixed() {
  local pids=() pin i s1 s2 busy t0 t1 ticks cpus b
  start_sched procs_fixed --procs 2 --stats 1 --json || { fail procs_fixed "did not load"; return; }
  for ((i = 0; i < NCPU; i++)); do spin & pids+=($!); done
  taskset -c $((NCPU - 1)) sh -c "$HOG" & pin=$!
  sleep 3
  s1=$(cpu_snap); t0=$(cputime "$pin")
  sleep 6
  s2=$(cpu_snap); t1=$(cputime "$pin")
  kill "${pids[@]}" "$pin" 2>/dev/null; wait "${pids[@]}" "$pin" 2>/dev/null
  stop_sched INT
  busy=$(cpu_busy_pct "$s1" "$s2")
  ticks=$((t1 - t0))
  cpus=$(json_series "$LOGS/procs_fixed.out" procs_cpus | awk '{ print $NF }')
  read -r -a b <<< "$busy"
  # Compact order on this VM: node 0's CPUs first (0 and 1).
  if [ "$SCHED_RC" -ne 0 ]; then fail procs_fixed "scheduler exit $SCHED_RC"
  elif [ "$cpus" != "0-1" ]; then fail procs_fixed "procs $cpus (want 0-1)"
  elif [ "${b[0]}" -lt 85 ] || [ "${b[1]}" -lt 85 ]; then fail procs_fixed "procs not saturated: busy % per CPU $busy"
  elif [ "${b[2]}" -gt 15 ]; then fail procs_fixed "CPU 2 (not a proc) busy ${b[2]}% (want <= 15): $busy"
  elif [ "$ticks" -lt 300 ]; then fail procs_fixed "task pinned to CPU $((NCPU - 1)) got $ticks ticks in 6 s (want >= 300)"
  else pass procs_fixed "--procs 2 -> procs $cpus; $NCPU hogs: busy % per CPU $busy; the task pinned to CPU $((NCPU - 1)) got $ticks/600 ticks"
  fi
}

# --procs auto (the default) grows under load that needs every CPU and shrinks after it.
t_procs_auto() {
  local pids=() i trace maxp lastp
  [ "$NCPU" -ge 2 ] || { skip procs_auto "one CPU: the set cannot grow or shrink"; return; }
  start_sched procs_auto --stats 1 --json || { fail procs_auto "did not load"; return; }
  sleep 4
  for ((i = 0; i < 2 * NCPU; i++)); do spin & pids+=($!); done
  sleep 8
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  sleep 9
  stop_sched INT
  trace=$(json_series "$LOGS/procs_auto.out" procs)
  maxp=$(tr ' ' '\n' <<< "$trace" | sort -n | tail -1)
  lastp=$(awk '{ print $NF }' <<< "$trace")
  if [ "$SCHED_RC" -ne 0 ]; then fail procs_auto "scheduler exit $SCHED_RC"
  elif [ "$maxp" != "$NCPU" ]; then fail procs_auto "never grew to $NCPU procs: $trace"
  elif [ "$lastp" -ge "$NCPU" ]; then fail procs_auto "did not shrink after the load: $trace"
  else pass procs_auto "procs per second (idle 4 s, $((2 * NCPU)) hogs 8 s, idle 9 s): $trace"
  fi
}

# A cpuset that holds no proc (a container pinned outside them): its work must spread over
# the cpuset as under the kernel's scheduler, not queue on the one CPU it started on. With
# the procs fixed at one CPU, loads in the last two CPUs: two stress-ng hogs, four busy
# shells, a job forking short CPU-bound children two at a time, and (with two nodes, the
# cpuset on neither of CPU 0's) two hogs whose memory is bound to CPU 0's node: a home node
# the cpuset excludes must not hold them back on the CPU they forked on.
cpuset_busy() { # cpuset_busy CPU_A CPU_B: "busyA busyB" over 5 s, after 2 s to settle
  local s1 s2 b
  sleep 2; s1=$(cpu_snap); sleep 5; s2=$(cpu_snap)
  read -r -a b <<< "$(cpu_busy_pct "$s1" "$s2")"
  echo "${b[$1]} ${b[$2]}"
}
t_cpuset_outside() {
  local a=$((NCPU - 2)) z=$((NCPU - 1)) pids=() i hogs shells forks bad=""
  [ "$NCPU" -ge 3 ] || { skip cpuset_outside "needs 3 CPUs"; return; }
  start_sched cpuset_out --procs 1 --stats 1 --json || { fail cpuset_outside "did not load"; return; }
  taskset -c "$a,$z" stress-ng --temp-path /tmp -q --cpu 2 -t 9 & pids=($!)
  hogs=$(cpuset_busy "$a" "$z"); wait "${pids[@]}" 2>/dev/null; pids=()
  for ((i = 0; i < 4; i++)); do taskset -c "$a,$z" sh -c "$HOG" & pids+=($!); done
  shells=$(cpuset_busy "$a" "$z"); kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=()
  taskset -c "$a,$z" sh -c 'end=$(($(date +%s) + 9)); while [ "$(date +%s)" -lt "$end" ]; do
      for k in 1 2; do (n=0; while [ $n -lt 20000 ]; do n=$((n + 1)); done) & done; wait; done' & pids=($!)
  forks=$(cpuset_busy "$a" "$z"); wait "${pids[@]}" 2>/dev/null; pids=()
  local loads=("hogs:$hogs" "shells:$shells" "forks:$forks") n0 away
  n0=$(cpu_node 0)
  if [ "$(cpu_node "$a")" != "$n0" ] && [ "$(cpu_node "$z")" != "$n0" ]; then
    numactl --membind="$n0" taskset -c "$a,$z" stress-ng --temp-path /tmp -q --cpu 2 -t 9 & pids=($!)
    away=$(cpuset_busy "$a" "$z"); wait "${pids[@]}" 2>/dev/null
    loads+=("memory_elsewhere:$away")
  fi
  stop_sched INT
  for r in "${loads[@]}"; do
    read -r x y <<< "${r#*:}"
    local want=80; [ "${r%%:*}" = forks ] && want=60
    if [ "${x:-0}" -lt "$want" ] || [ "${y:-0}" -lt "$want" ]; then bad+=" ${r%%:*} busy $x/$y% (want >= $want each)"; fi
  done
  if [ "$SCHED_RC" -ne 0 ]; then fail cpuset_outside "scheduler exit $SCHED_RC"
  elif [ -n "$bad" ]; then fail cpuset_outside "cpuset $a,$z outside the procs (CPU 0):$bad"
  else pass cpuset_outside "cpuset $a,$z outside the procs (CPU 0), busy % of its CPUs: 2 hogs $hogs, 4 shells $shells, forking job $forks${away:+, 2 hogs with memory on node $n0 $away}"
  fi
}

# A cpuset is demand the procs must serve: when --procs auto shrinks the set, the procs that
# leave are the idlest, not the last added. Load every CPU (the set grows to all) with 2
# hogs in a cpuset of the last 2 CPUs, then take the other load away: the set shrinks, and
# the cpuset's hogs must keep both their CPUs (dropping the last added took one of them, and
# the two shared the other at half speed each).
t_cpuset_shrink() {
  local a=$((NCPU - 2)) z=$((NCPU - 1)) pids=() hogs=() i t0=() t1=() low sets
  [ "$NCPU" -ge 4 ] || { skip cpuset_shrink "needs 4 CPUs"; return; }
  start_sched shrink --stats 1 --json || { fail cpuset_shrink "did not load"; return; }
  for ((i = 0; i < 2 * NCPU; i++)); do spin & pids+=($!); done
  for i in 1 2; do taskset -c "$a,$z" sh -c "$HOG" & hogs+=($!); done
  sleep 8
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  sleep 7
  local mark; mark=$(wc -l < "$LOGS/shrink.out")
  t0=($(cputimes "${hogs[@]}"))
  sleep 8
  local now; now=($(cputimes "${hogs[@]}"))
  for ((i = 0; i < 2; i++)); do t1+=($((now[i] - t0[i]))); done
  kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null
  stop_sched INT
  tail -n +$((mark + 1)) "$LOGS/shrink.out" > "$LOGS/shrink.window"
  low=$(tr ' ' '\n' <<< "${t1[*]}" | sort -n | head -1)
  sets=$(json_series "$LOGS/shrink.window" procs_cpus | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
  local most; most=$(json_max "$LOGS/shrink.window" procs)
  if [ "$SCHED_RC" -ne 0 ]; then fail cpuset_shrink "scheduler exit $SCHED_RC"
  elif [ "${most:-$NCPU}" -ge "$NCPU" ]; then fail cpuset_shrink "the set did not shrink (procs $sets): nothing tested"
  elif [ "${low:-0}" -lt 640 ]; then fail cpuset_shrink "a hog of cpuset $a,$z got $low ticks in 8 s, want >= 640 (both: ${t1[*]}; procs $sets)"
  else pass cpuset_shrink "2 hogs in cpuset $a,$z, the set shrunk to $sets: ticks in 8 s ${t1[*]}"
  fi
}

# sysmon's rescue of a task that no proc may run from a shared queue: a shrink of the procs
# can leave one there (it waited while the last proc of its cpuset left), and no CPU serves
# it, as non-procs never look at shared queues. Left to itself that state is a race between
# the loader's look at the load and its write; --test-strand-shared (test only) sends every
# such enqueue there. Three hogs in a cpuset of the last two CPUs, the procs fixed at CPUs 0
# and 1: every turn's end strands a hog, and only the rescue brings it back (under the flag
# enqueue.stranded counts rescues alone). Without it the cpuset idles and the watchdog ejects
# the scheduler.
# Measured (2n, 2026-12-07): 739-740 rescues, busy 95-100%. A build without the rescue
# failed it: the watchdog ejected the scheduler ("taskset failed to run for 7.328s"). The
# floors sit far under the one and at cpuset_outside's 80% for the other.
RESCUE_MIN=100
RESCUE_BUSY_MIN=80
t_rescue_stranded() {
  local a=$((NCPU - 2)) z=$((NCPU - 1)) pids=() x y rescued
  [ "$NCPU" -ge 4 ] || { skip rescue_stranded "needs 4 CPUs"; return; }
  start_sched rescue --procs 0-1 --test-strand-shared --stats 1 --json ||
    { fail rescue_stranded "did not load"; return; }
  taskset -c "$a,$z" stress-ng --temp-path /tmp -q --cpu 3 -t 9 & pids=($!)
  read -r x y <<< "$(cpuset_busy "$a" "$z")"; wait "${pids[@]}" 2>/dev/null
  stop_sched INT
  rescued=$(json_sum "$LOGS/rescue.out" enqueue.stranded)
  if [ "$SCHED_RC" -ne 0 ]; then fail rescue_stranded "scheduler exit $SCHED_RC"
  elif [ "${rescued:-0}" -lt "$RESCUE_MIN" ]; then fail rescue_stranded "$rescued rescues, want >= $RESCUE_MIN: the flag stranded nothing"
  elif [ "${x:-0}" -lt "$RESCUE_BUSY_MIN" ] || [ "${y:-0}" -lt "$RESCUE_BUSY_MIN" ]; then
    fail rescue_stranded "cpuset $a,$z busy $x/$y% with 3 stranded hogs, want >= $RESCUE_BUSY_MIN each ($rescued rescues)"
  else pass rescue_stranded "3 hogs in cpuset $a,$z stranded at every turn's end: busy $x/$y%, $rescued rescues"
  fi
}

# Exactly N hogs on N CPUs: a hog alone on its CPU keeps it turn after turn (keep_prev), with
# no stop in between, and must still count as busy, so that --procs auto holds the set at N
# instead of shrinking it under a full job.
t_procs_hold() {
  local pids=() i procs busy minp avg
  start_sched procs_hold --stats 1 --json || { fail procs_hold "did not load"; return; }
  for ((i = 0; i < NCPU; i++)); do spin & pids+=($!); done
  sleep 22
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  stop_sched INT
  # The last 12 readings: the set has grown by then (it starts at one LLC's cores).
  procs=$(json_series "$LOGS/procs_hold.out" procs | tr ' ' '\n' | tail -13 | head -12 | tr '\n' ' ')
  busy=$(python3 - "$LOGS/procs_hold.out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][-13:-1]
vals = [b for r in rows for b in r["busy_pct"]]
print(f"{sum(vals) / max(len(vals), 1):.0f}")
PY
)
  minp=$(tr ' ' '\n' <<< "$procs" | grep . | sort -n | head -1)
  if [ "$SCHED_RC" -ne 0 ]; then fail procs_hold "scheduler exit $SCHED_RC"
  elif [ "${minp:-0}" -ne "$NCPU" ]; then fail procs_hold "procs fell below $NCPU under $NCPU hogs: $procs (busy ${busy}%)"
  elif [ "$busy" -lt 97 ]; then fail procs_hold "busy ${busy}% on average under $NCPU hogs (want >= 97): procs $procs"
  else pass procs_hold "$NCPU hogs, last 12 s: procs $procs, busy ${busy}% on average"
  fi
}

# Locality: hogs started on node 1 stay there once free to run anywhere; an overloaded node
# sheds work to an idle one.
# samples_on ROUNDS "CPUS" PID...: every 0.2 s for ROUNDS rounds, the CPU each task last ran
# on; prints how many samples were taken and how many of them were on one of CPUS.
samples_on() {
  local rounds=$1 cpus=$2 i p c samples=0 on=0; shift 2
  for ((i = 0; i < rounds; i++)); do
    for p in "$@"; do
      c=$(last_cpu "$p"); [ -n "$c" ] || continue
      samples=$((samples + 1))
      [[ " $cpus " == *" $c "* ]] && on=$((on + 1))
    done
    sleep 0.2
  done
  echo "$samples $on"
}

# The procs grow where the memory is: two hogs whose memory is on node 1 start once --procs
# auto has shrunk the idle set to node 0's first CPU. Busy and with nothing waiting, the set
# had no reason to grow on node 1, and the hogs ran on node 0 for good, away from their memory
# (or one of them, once the other had gone home to node 1's first proc). sysmon counts them
# (homeless_running); the set must grow on node 1 and both run there. Run twice, with the
# two signals a task's memory placement gives: a memory policy (numactl --membind=1), and a
# cpuset whose cpuset.mems is node 1 alone (a container or pod placed on the node), which in
# default mode left them 0% on node 1 until mem_node_of() read it.
home_grow_share() { # home_grow_share membind|cpuset: sets HG_SAMPLES HG_HOME HG_SETS
  local how=$1 n1 nh pids=() i cg=/sys/fs/cgroup/gmp-mems launch=(numactl --membind=1)
  HG_SAMPLES=0; HG_HOME=0; HG_SETS="?"
  n1=$(node_cpus 1)
  # Two hogs, or one where node 1 has one CPU online: more than its CPUs cannot all be there.
  nh=$(wc -w <<< "$n1"); [ "$nh" -gt 2 ] && nh=2
  if [ "$how" = cpuset ]; then
    echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    mkdir -p "$cg" && echo 1 > "$cg/cpuset.mems" || return 1
    launch=(in_cgroup "$cg")
  fi
  start_sched "homegrow_$how" --stats 1 --json || { rmdir "$cg" 2>/dev/null; return 1; }
  sleep 4
  for ((i = 0; i < nh; i++)); do "${launch[@]}" sh -c "$HOG" & pids+=($!); done
  sleep 8
  local mark; mark=$(wc -l < "$LOGS/homegrow_$how.out")
  read -r HG_SAMPLES HG_HOME < <(samples_on 25 "$n1" "${pids[@]}")
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  stop_sched INT
  rmdir "$cg" 2>/dev/null
  tail -n +$((mark + 1)) "$LOGS/homegrow_$how.out" > "$LOGS/homegrow_$how.window"
  HG_SETS=$(json_series "$LOGS/homegrow_$how.window" procs_cpus | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
}
t_numa_home_grow() {
  local how share bad="" detail=""
  [ "$(node_count)" -ge 2 ] || { skip numa_home_grow "one NUMA node"; return; }
  for how in membind cpuset; do
    home_grow_share "$how" || { fail numa_home_grow "$how: did not load"; return; }
    [ "$SCHED_RC" -ne 0 ] && { fail numa_home_grow "$how: scheduler exit $SCHED_RC"; return; }
    share=$(awk -v h="$HG_HOME" -v s="$HG_SAMPLES" 'BEGIN { printf "%.1f", s ? 100 * h / s : 0 }')
    detail+=" $how: $share% of $HG_SAMPLES samples on node 1, procs then ${HG_SETS% };"
    awk -v s="$share" 'BEGIN { exit !(s < 90) }' && bad+=" $how"
  done
  if [ -n "$bad" ]; then fail numa_home_grow "hogs with memory on node 1, started on node 0's procs:$detail want >= 90% each (failed:$bad)"
  else pass numa_home_grow "hogs with memory on node 1, started on node 0's procs:${detail%;}"
  fi
}

# A parent on node 0 beside hogs pinned to the node's other CPUs forks a child each time it
# wakes (every 20 ms), so node 0 has no idle CPU at each fork while node 1 has. A new task has
# no memory of its own to stay near, so it starts on an idle CPU of another node at once, as
# the kernel's fork balancing does. The parent sleeps between forks, so it wakes on its own
# idle CPU at home and stays on node 0 (a spinning parent's turns end in the shared queue, from
# which node 1 may steal it).
t_fork_spread() {
  local n0 first hogs=() c out n share detail
  [ "$(node_count)" -ge 2 ] || { skip fork_spread "one NUMA node"; return; }
  n0=$(node_cpus 0); first=${n0%% *}
  start_sched forkspread --procs all --stats 1 --json || { fail fork_spread "did not load"; return; }
  for c in ${n0#"$first"}; do taskset -c "$c" sh -c "$HOG" & hogs+=($!); done
  # Started on node 0's first CPU, where it wakes often enough to make node 0 its home, then
  # allowed everywhere.
  out=$(taskset -c "$first" python3 - "$n0" 2> "$LOGS/forkspread.parent" <<'PY'
import os, sys, time
node0 = {int(c) for c in sys.argv[1].split()}
for _ in range(20):
    time.sleep(0.002)
os.sched_setaffinity(0, range(os.cpu_count()))
def cpu():  # field 39 of /proc/self/stat: the CPU the caller runs on
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])
r, w = os.pipe()
forks, away, end = 0, [], time.monotonic() + 10
while forks < 40 and time.monotonic() < end:
    time.sleep(0.02)
    if cpu() not in node0:  # woke off node 0: its node is not full, so this fork tells nothing
        away.append(cpu())
        continue
    if os.fork() == 0:
        os.write(w, b"%d\n" % cpu())
        os._exit(0)
    forks += 1
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:  # every child reaped
        pass
os.close(w)
try:
    while True:
        os.wait()
except ChildProcessError:
    pass
print(os.read(r, 65536).decode(), end="")
print("parent woke off node 0 %d times (CPUs %s)" % (len(away), sorted(set(away))), file=sys.stderr)
PY
)
  kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null
  stop_sched INT
  echo "$out" > "$LOGS/forkspread.children"
  n=$(grep -c . <<< "$out")
  share=$(awk -v n0=" $n0 " 'NF { n++; away += index(n0, " " $1 " ") == 0 }
    END { printf "%.0f", n ? 100 * away / n : 0 }' <<< "$out")
  detail="$n children forked on node 0 (no idle CPU there, node 1 idle): $share% started on another node; $(tail -n 1 "$LOGS/forkspread.parent")"
  if [ "$SCHED_RC" -ne 0 ]; then fail fork_spread "scheduler exit $SCHED_RC"
  elif [ "$n" -lt 20 ] || [ "$share" -lt 80 ]; then fail fork_spread "$detail (want at least 20 children, 80% elsewhere)"
  else pass fork_spread "$detail"
  fi
}

t_numa_locality() {
  local nn n1 cg=/sys/fs/cgroup/gmp-numa pids=() i p c samples=0 home=0 share s1 s2 busy b0 hogs=()
  nn=$(node_count)
  [ "$nn" -ge 2 ] || { skip numa_locality "one NUMA node"; return; }
  grep -q cpuset /sys/fs/cgroup/cgroup.controllers || { fail numa_locality "no cpuset controller"; return; }
  n1=$(node_cpus 1)
  echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
  mkdir -p "$cg" && echo "${n1// /,}" > "$cg/cpuset.cpus" && echo 1 > "$cg/cpuset.mems"
  start_sched numa --procs all --stats 1 --json || { fail numa_locality "did not load"; rmdir "$cg"; return; }
  for c in $n1; do
    in_cgroup "$cg" sh -c "$(declare -f periodic); periodic" & pids+=($!)
  done
  sleep 2
  echo "0-$((NCPU - 1))" > "$cg/cpuset.cpus"
  local mark; mark=$(wc -l < "$LOGS/numa.out")
  read -r samples home < <(samples_on 50 "$n1" "${pids[@]}")
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  tail -n +$((mark + 1)) "$LOGS/numa.out" > "$LOGS/numa.free"
  local sl sr pl pr
  sl=$(json_sum "$LOGS/numa.free" numa.local); sr=$(json_sum "$LOGS/numa.free" numa.remote)
  pl=$(json_sum "$LOGS/numa.free" numa.place_home); pr=$(json_sum "$LOGS/numa.free" numa.place_remote)
  # Overload: 3 hogs per node-1 CPU, confined there, then released.
  echo "${n1// /,}" > "$cg/cpuset.cpus"
  for c in $n1 $n1 $n1; do
    in_cgroup "$cg" sh -c "$HOG" & hogs+=($!)
  done
  sleep 2
  echo "0-$((NCPU - 1))" > "$cg/cpuset.cpus"
  sleep 2
  s1=$(cpu_snap); sleep 4; s2=$(cpu_snap)
  kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null
  stop_sched INT
  rmdir "$cg" 2>/dev/null
  busy=$(cpu_busy_pct "$s1" "$s2")
  b0=$(for c in $(node_cpus 0); do echo "$busy" | awk -v i=$((c + 1)) '{ print $i }'; done | sort -n | head -1)
  share=$(awk -v h="$home" -v s="$samples" 'BEGIN { printf "%.1f", s ? 100 * h / s : 0 }')
  local detail="$samples samples of ${#pids[@]} waking tasks started on node 1: $share% on node 1; starts home/remote $sl/$sr, idle placements home/remote $pl/$pr; overload of node 1 released: busy % per CPU $busy"
  if [ "$SCHED_RC" -ne 0 ]; then fail numa_locality "scheduler exit $SCHED_RC"
  elif awk -v s="$share" 'BEGIN { exit !(s < 95) }'; then fail numa_locality "$detail (want >= 95%)"
  elif [ "${b0:-0}" -lt 60 ]; then fail numa_locality "$detail (node 0 stayed idle: min busy $b0%, want >= 60)"
  else pass numa_locality "$detail"
  fi
}

# --partial: only tasks started with `scx_gmp run` are scheduled by scx_gmp, on its procs.
t_partial() {
  local ext=() other i p c bad="" samples=0 pol en oen
  start_sched partial --partial --procs 2-3 --stats 1 --json || { fail partial "did not load"; return; }
  for i in 1 2 3; do "$SCX" run sh -c "$HOG" & ext+=($!); done
  spin & other=$!
  sleep 3
  pol=$(sched_field "${ext[0]}" policy); en=$(sched_field "${ext[0]}" ext.enabled)
  oen=$(sched_field "$other" ext.enabled)
  for ((i = 0; i < 20; i++)); do
    for p in "${ext[@]}"; do
      c=$(last_cpu "$p"); samples=$((samples + 1))
      [ "$c" = 2 ] || [ "$c" = 3 ] || bad+="$p@$c "
    done
    sleep 0.2
  done
  kill "${ext[@]}" "$other" 2>/dev/null; wait "${ext[@]}" "$other" 2>/dev/null
  stop_sched INT
  if [ "$SCHED_RC" -ne 0 ]; then fail partial "scheduler exit $SCHED_RC"
  elif [ "$pol" != 7 ] || [ "$en" != 1 ]; then fail partial "task started by 'scx_gmp run': policy $pol, ext.enabled $en (want 7, 1)"
  elif [ "$oen" != 0 ]; then fail partial "an ordinary task has ext.enabled $oen under --partial"
  elif [ -n "$bad" ]; then fail partial "SCHED_EXT tasks ran outside procs 2-3: $bad"
  else pass partial "'scx_gmp run' tasks: policy 7, ext.enabled 1, $samples samples all on procs 2-3; an ordinary task: ext.enabled 0"
  fi
}

# Bad --procs values: one line, exit 2 (parse) or 1 (topology), nothing loaded.
t_procs_bad_input() {
  local out rc bad=""
  for args in "--procs 0" "--procs 1-x" "--procs 0-$NCPU" "--procs 2 --procs-min 1" "--procs auto --procs-min 3 --procs-max 2" "--procs $((NCPU + 1))"; do
    # shellcheck disable=SC2086
    out=$("$SCX" $args 2>&1); rc=$?
    [ "$rc" -ne 0 ] || bad+="'$args' exit 0; "
    [ "$(wc -l <<< "$out")" -eq 1 ] || bad+="'$args' printed $(wc -l <<< "$out") lines; "
    [ "$(state)" = disabled ] || bad+="'$args' left state $(state); "
  done
  out=$("$SCX" --procs "0-$NCPU" 2>&1)
  if [ -n "$bad" ]; then fail procs_bad_input "$bad"
  elif ! grep -q "CPU $NCPU does not exist or is offline" <<< "$out"; then fail procs_bad_input "message for an absent CPU: $out"
  else pass procs_bad_input "6 bad --procs values: one line each, non-zero exit, nothing loaded; e.g. '$out'"
  fi
}
