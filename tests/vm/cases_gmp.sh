# GMP run-queue model cases: runnext, sysmon fairness, fairness across nodes, the queue-jump
# budget, steal-half, overflow, fair tick, and robustness under affinity and policy races. Each
# asserts on scx_gmp's counters (JSON stats) and on what the tasks experienced.

t_runnext() {
  start_sched runnext --stats 1 --json || { fail runnext "did not load"; return; }
  perf bench sched pipe -l 30000 > "$LOGS/runnext-pipe.log" 2>&1; local prc=$?
  sleep 1.5
  stop_sched INT
  local f=$LOGS/runnext.out rn loc sh ft st di pair enq total share pshare
  rn=$(json_sum "$f" dispatch.runnext); loc=$(json_sum "$f" dispatch.local)
  sh=$(json_sum "$f" dispatch.shared); ft=$(json_sum "$f" dispatch.fair_tick)
  st=$(( $(json_sum "$f" dispatch.steal_llc) + $(json_sum "$f" dispatch.steal_node) + $(json_sum "$f" dispatch.steal_remote) ))
  di=$(json_sum "$f" enqueue.direct_idle)
  # A pair's hand-off goes straight to the local DSQ and starts without a dispatch.
  pair=$(json_sum "$f" enqueue.runnext_pair); enq=$(json_sum "$f" enqueue.runnext)
  total=$((loc + sh + ft + st + di + pair))
  share=$(awk -v a="$rn" -v b="$total" 'BEGIN { printf "%.2f", b ? a / b : 0 }')
  pshare=$(awk -v a="$pair" -v b="$enq" 'BEGIN { printf "%.2f", b ? a / b : 0 }')
  local usec; usec=$(awk '/usecs\/op/ { print $1 }' "$LOGS/runnext-pipe.log")
  if [ "$prc" -ne 0 ]; then fail runnext "perf bench exit $prc"
  elif [ "$SCHED_RC" -ne 0 ]; then fail runnext "scheduler exit $SCHED_RC"
  elif awk -v s="$share" 'BEGIN { exit !(s < 0.5) }'; then fail runnext "runnext share $share of $total task starts (want >= 0.5)"
  elif awk -v s="$pshare" 'BEGIN { exit !(s < 0.8) }'; then fail runnext "only $pair of $enq runnext hand-offs went to the local DSQ as a pair (share $pshare, want >= 0.8)"
  else pass runnext "pipe ping-pong: $rn of $total task starts through runnext (share $share), $pair of $enq hand-offs as a pair ($pshare), $usec us/op"
  fi
}

# perf's pipe pair pinned to CPU 1, where no wakee passes select_cpu. Each process writes and
# then reads, so its wakee should wait for it to sleep: preempted at the write, the writer
# found its reply written when it resumed, never slept again, read as a hog, and every one of
# the 20000 round trips cost a wakeup preemption. Judged by that count, not by time.
t_pinned_pipe() {
  local loops=20000 f pre usec
  start_sched pinpipe --stats 1 --json || { fail pinned_pipe "did not load"; return; }
  taskset -c 1 perf bench sched pipe -l "$loops" > "$LOGS/pinpipe-pipe.log" 2>&1; local prc=$?
  sleep 1.5
  stop_sched INT
  f=$LOGS/pinpipe.out
  pre=$(json_sum "$f" preempt.wakeup)
  usec=$(awk '/usecs\/op/ { print $1 }' "$LOGS/pinpipe-pipe.log")
  if [ "$prc" -ne 0 ]; then fail pinned_pipe "perf bench exit $prc"
  elif [ "$SCHED_RC" -ne 0 ]; then fail pinned_pipe "scheduler exit $SCHED_RC"
  elif [ "$pre" -gt $((loops / 10)) ]; then
    fail pinned_pipe "$pre wakeup preemptions in $loops round trips on one CPU (want <= $((loops / 10))); $usec us/op"
  else pass pinned_pipe "pipe pair pinned to CPU 1: $pre wakeup preemptions in $loops round trips, $usec us/op"
  fi
}

# N+1 hogs on N CPUs with a 20 ms slice: sysmon's 10 ms limit falls inside the slice, so
# sysmon must preempt (with equal slice and limit the tick ends the turns and sysmon is only
# the backstop), and the CPU time must still be shared fairly. Its kicks land on the turns
# they were meant for, so few may read as stale (preempt.stale).
t_sysmon_fair() {
  local n=$((NCPU + 1)) dur=20 pids=() times=() i j sysmon slice stale
  start_sched sysmon --slice-us 20000 --stats 1 --json || { fail sysmon_fair "did not load"; return; }
  for ((i = 0; i < n; i++)); do spin & pids+=($!); done
  sleep "$dur"
  times=($(cputimes "${pids[@]}"))
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  stop_sched INT
  j=$(jain "${times[@]}")
  sysmon=$(json_sum "$LOGS/sysmon.out" preempt.sysmon)
  slice=$(json_sum "$LOGS/sysmon.out" preempt.slice)
  stale=$(json_sum "$LOGS/sysmon.out" preempt.stale)
  if [ "$SCHED_RC" -ne 0 ]; then fail sysmon_fair "scheduler exit $SCHED_RC"
  elif [ "$sysmon" -le 0 ]; then fail sysmon_fair "no sysmon preemptions ($slice slice expiries; cpu times ${times[*]})"
  elif awk -v j="$j" 'BEGIN { exit !(j < 0.95) }'; then fail sysmon_fair "Jain $j < 0.95 (cpu ticks ${times[*]})"
  elif [ $((stale * 20)) -gt "$sysmon" ]; then fail sysmon_fair "$stale of $sysmon sysmon preemptions taken for stale kicks (over 5%)"
  else pass sysmon_fair "$n hogs on $NCPU CPUs: Jain $j, cpu ticks ${times[*]}, sysmon preemptions $sysmon, slice expiries $slice, stale kicks $stale"
  fi
}

# N+1 hogs on N CPUs in two nodes, started split unevenly (one hog more on node 0 than its
# CPUs, node 1's CPUs one hog each) and then let loose. Each node serves its own shared queue,
# so the cross-node lag steal must even out their CPU time: a task moves each time the lag
# reaches two slices, about every 60 ms (275 steals in 12 s here). Before it, only stray idle
# steals moved one (7-12 lag steals in 12-15 s) and Jain ranged 0.974-0.999 between runs.
t_numa_fair() {
  local nn n0 n1 c pids=() t0=() t=() i j lag xnode
  nn=$(node_count)
  [ "$nn" -ge 2 ] || { skip numa_fair "one NUMA node"; return; }
  n0=$(node_cpus 0); n1=$(node_cpus 1)
  start_sched nfair --stats 1 --json || { fail numa_fair "did not load"; return; }
  for c in $n0 $(set -- $n0; echo "$1") $n1; do
    taskset -c "$c" sh -c "$HOG" & pids+=($!)
  done
  sleep 1
  for i in "${pids[@]}"; do taskset -a -p -c "0-$((NCPU - 1))" "$i" > /dev/null; done
  sleep 1
  t0=($(cputimes "${pids[@]}"))
  local mark; mark=$(wc -l < "$LOGS/nfair.out")
  sleep 12
  local t1; t1=($(cputimes "${pids[@]}"))
  for ((j = 0; j < ${#pids[@]}; j++)); do t+=($((t1[j] - t0[j]))); done
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  stop_sched INT
  tail -n +$((mark + 1)) "$LOGS/nfair.out" > "$LOGS/nfair.free"
  lag=$(json_sum "$LOGS/nfair.free" dispatch.lag)
  xnode=$(json_sum "$LOGS/nfair.free" numa.migrations_node)
  i=$(jain "${t[@]}")
  if [ "$SCHED_RC" -ne 0 ]; then fail numa_fair "scheduler exit $SCHED_RC"
  elif awk -v j="$i" 'BEGIN { exit !(j < 0.98) }'; then
    fail numa_fair "Jain $i < 0.98 (cpu ticks ${t[*]}; lag steals $lag, cross-node migrations $xnode)"
  elif [ "$lag" -lt 24 ]; then fail numa_fair "$lag lag steals in 12 s (want >= 2/s; Jain $i, cpu ticks ${t[*]})"
  else pass numa_fair "${#pids[@]} hogs on nodes {$n0} {$n1}: Jain $i, cpu ticks ${t[*]}, lag steals $lag, cross-node migrations $xnode in 12 s"
  fi
}

# Evenly loaded nodes keep their tasks: 2 hogs per CPU, half of them in a cgroup of 3 times the
# weight, so queue heads' vtimes differ by node. The lag steal may only pull from a node at
# least as crowded; when it also pulled from any node with 2 queued, tasks crossed nodes in
# both directions, 12-28 lag steals a second with 4 CPUs and 95-133 with 8 (after: 0-7, and
# 10.6 with 16 CPUs in 4 nodes). Each proc decides at its own dispatches, so the bound is per
# CPU: 2 a second, 6-8 times under the rate before.
t_numa_level() {
  local secs lag xnode
  [ "$(node_count)" -ge 2 ] || { skip numa_level "one NUMA node"; return; }
  grep -q cpu /sys/fs/cgroup/cgroup.controllers || { skip numa_level "no cpu controller"; return; }
  start_sched nlevel --stats 1 --json || { fail numa_level "did not load"; return; }
  cgroup_ratio 10 > /dev/null
  stop_sched INT
  # Past the first 2 intervals: every task switching in at load is placed then.
  tail -n +3 "$LOGS/nlevel.out" | grep '^{' > "$LOGS/nlevel.steady"
  secs=$(wc -l < "$LOGS/nlevel.steady")
  lag=$(json_sum "$LOGS/nlevel.steady" dispatch.lag)
  xnode=$(json_sum "$LOGS/nlevel.steady" numa.migrations_node)
  if [ "$SCHED_RC" -ne 0 ]; then fail numa_level "scheduler exit $SCHED_RC"
  elif [ "$secs" -lt 5 ]; then fail numa_level "only $secs stats intervals"
  elif [ "$lag" -gt $((2 * NCPU * secs)) ]; then fail numa_level "$lag lag steals in $secs s on $NCPU CPUs (want <= 2/s per CPU; cross-node migrations $xnode)"
  else pass numa_level "$((2 * NCPU)) hogs on evenly loaded nodes: $lag lag steals, $xnode cross-node migrations in $secs s"
  fi
}

# wake_jumps LOG: wakeups that jumped a CPU's queue over a --json stats log. Builds before
# wakeups queued in order behind interactive runners also jumped to a queue's head
# (wakeup_head, now always 0); the sum reads both when a case is run against one.
wake_jumps() { echo $(( $(json_sum "$1" preempt.wakeup) + $(json_sum "$1" preempt.wakeup_head) )); }

# Six tasks that spin 300 us and sleep 100 us, and a hog, all pinned to CPU 1 for 6 s. The
# spinners look interactive (short bursts) and jump the queue at each wakeup; the jump budget
# must cap what they take ahead of the tasks waiting in order (refusing some jumps), so no task
# waits long. Without the budget, waits of 240-470 ms were seen here; with it, 60-70 ms.
t_jump_budget() {
  local spinners=() i hog th ts=0 nojump jumps worst who
  start_sched jump --stats 1 --json || { fail jump_budget "did not load"; return; }
  for i in 1 2 3 4 5 6; do
    taskset -c 1 python3 -c 'import time
end = time.monotonic() + 8
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < 0.0003: pass
    time.sleep(0.0001)' & spinners+=($!)
  done
  sleep 1
  taskset -c 1 sh -c "$HOG" & hog=$!
  sleep 6
  th=$(cputime "$hog")
  for i in "${spinners[@]}"; do ts=$((ts + $(cputime "$i"))); done
  kill "$hog" 2>/dev/null; wait "$hog" "${spinners[@]}" 2>/dev/null
  stop_sched INT
  nojump=$(json_sum "$LOGS/jump.out" preempt.wakeup_no_jump)
  jumps=$(wake_jumps "$LOGS/jump.out")
  worst=$(json_max "$LOGS/jump.out" starvation.longest_wait_us)
  who=$(json_series "$LOGS/jump.out" starvation.comm | tr ' ' '\n' | sort | uniq -c | sort -rn | head -2 | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')
  if [ "$SCHED_RC" -ne 0 ]; then fail jump_budget "scheduler exit $SCHED_RC"
  elif [ "$nojump" -le 0 ]; then fail jump_budget "the jump budget never refused a jump ($jumps jumps; longest wait ${worst:-?} us)"
  elif [ "${worst:-999999999}" -ge 150000 ]; then fail jump_budget "longest wait ${worst:-?} us >= 150 ms ($who; $jumps jumps, $nojump refused)"
  else pass jump_budget "6 spinners + a hog on CPU 1: $jumps jumps, $nojump refused, longest wait $((worst / 1000)) ms (longest waiters per second: $who); cpu ticks hog $th, spinners $ts"
  fi
}

# judge_wake_delay CASE N P50_US SECS WHAT DETAIL [MIN_N]: the verdict of a periodic task's
# wakeup delays beside a CPU hog: it woke at least MIN_N (100) times in SECS and its median
# delay from its timer to running was under 2 ms.
judge_wake_delay() {
  local name=$1 n=$2 p50=$3 secs=$4 what=$5 detail=$6 min_n=${7:-100}
  if [ "$SCHED_RC" -ne 0 ]; then fail "$name" "scheduler exit $SCHED_RC"
  elif [ "$n" -lt "$min_n" ]; then
    fail "$name" "the periodic task woke only $n times in $secs s (want >= $min_n; median delay $p50 us)"
  elif [ "$p50" -ge 2000 ]; then fail "$name" "median wakeup delay $p50 us >= 2 ms over $n wakeups ($detail)"
  else pass "$name" "$what: median wakeup delay $p50 us over $n wakeups ($detail)"
  fi
}

# end_wake_case BG NAME: stop the background task BG and the scheduler started as NAME; read
# the periodic task's "N P50_US [EXTRA]" line from $out into n, p50 and extra (the caller's
# locals), and its wakeup jumps into jumps.
end_wake_case() {
  kill "$1" 2>/dev/null; wait "$1" 2>/dev/null
  stop_sched INT
  read -r n p50 extra < "$out"; n=${n:-0}; p50=${p50:-999999999}
  jumps=$(wake_jumps "$LOGS/$2.out")
}

# A periodic task whose bursts (3 ms) are far over --wakeup-preempt-us but which sleeps longer
# than it runs (5 ms), and a hog, both pinned to CPU 1 for 7 s: a frame loop beside a build.
# Its run share makes it interactive, so it preempts the hog on waking and runs within about a
# millisecond of its timer; counted by burst length alone, it waits in order for the hog's
# 10 ms turn to end.
t_sleeper_preempt() {
  local per hog out n p50 jumps extra
  start_sched sleeper --stats 1 --json || { fail sleeper_preempt "did not load"; return; }
  out="$LOGS/sleeper.late"
  taskset -c 1 python3 -c 'import time
end, late = time.monotonic() + 7, []
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < 0.003: pass
    t = time.monotonic(); time.sleep(0.005); late.append(time.monotonic() - t - 0.005)
late = sorted(late[len(late) // 7:])  # the first second: run share still settling
print(len(late), int(late[len(late) // 2] * 1e6), int(time.process_time() * 1000))' > "$out" & per=$!
  taskset -c 1 sh -c "$HOG" & hog=$!
  wait "$per"
  end_wake_case "$hog" sleeper
  judge_wake_delay sleeper_preempt "$n" "$p50" 6 "3 ms bursts, 5 ms sleeps beside a hog on CPU 1" \
    "$jumps wakeup jumps in all; the task ran ${extra:-?} ms of 7 s"
}

# A frame loop on a fixed 10 ms grid doing 4.8 ms of CPU a frame (48% of a CPU), and a hog,
# both pinned to CPU 1 for 7 s. A frame that starts late ends late and sleeps that much less
# before the next release; counted by burst and sleep alone its run share read over one half
# whenever it was late, and the loop, which starts as a new task (share one), earned the
# sleeper status only by chance: otherwise it waited out the hog's turns, a frame every 20-30
# ms (docs/benchmarks.md, "A frame loop counts its wait"). With the wait after each wakeup in
# its cycle the loop reads its work over its period and preempts the hog at every release.
t_sleeper_grid() {
  local hog out n p50 jumps extra
  start_sched sgrid --stats 1 --json || { fail sleeper_grid "did not load"; return; }
  out="$LOGS/sgrid.late"
  taskset -c 1 sh -c "$HOG" & hog=$!
  taskset -c 1 python3 -c 'import time
cpu = lambda: time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)
start = time.monotonic()
rel, late = start, []
while rel < start + 7:
    t = time.monotonic()
    if rel - start > 1.5: late.append(t - rel)  # the first 1.5 s: run share still settling
    c0 = cpu()
    while cpu() - c0 < 0.0048: pass
    rel += 0.010
    while rel < time.monotonic(): rel += 0.010  # a missed release is skipped, as under vsync
    time.sleep(max(0, rel - time.monotonic()))
late.sort()
print(len(late), int(late[len(late) // 2] * 1e6))' > "$out"
  end_wake_case "$hog" sgrid
  # 550 releases fall in the 5.5 s counted; a late loop skips those it overran: want 2/3.
  judge_wake_delay sleeper_grid "$n" "$p50" 5.5 "a frame loop at 48% of CPU 1 beside a hog" \
    "$n of 550 releases run, $jumps wakeup jumps in all" 366
}

# A task that slept often (bursts of microseconds: interactive by its history) and then spins
# without sleeping, beside a periodic task (0.2 ms of work, 2 ms sleeps), both pinned to CPU 1
# from the start (a spinner that ran alone first would owe turns and run short ones, hiding
# the wait). The spinner keeps its last burst's history until it sleeps again, so it stays
# interactive: wakeups must still preempt it once its burst is past twice --wakeup-preempt-us
# with no task woken, or each waits out its 10 ms turn (a variant that never preempted
# interactive runners did).
t_hog_after_sleeps() {
  local spin out n p50 jumps extra
  start_sched hogsleep --stats 1 --json || { fail hog_after_sleeps "did not load"; return; }
  out="$LOGS/hogsleep.late"
  taskset -c 1 python3 -c 'import time
for _ in range(300): time.sleep(0.0002)
end = time.monotonic() + 8
while time.monotonic() < end: pass' & spin=$!
  taskset -c 1 python3 -c 'import time
start = time.monotonic()
end, late = start + 6.5, []
while time.monotonic() < end:
    t = time.monotonic()
    while time.monotonic() - t < 0.0002: pass
    t = time.monotonic(); time.sleep(0.002)
    if t - start > 1.5: late.append(time.monotonic() - t - 0.002)
late.sort()
print(len(late), int(late[len(late) // 2] * 1e6))' > "$out"
  end_wake_case "$spin" hogsleep
  judge_wake_delay hog_after_sleeps "$n" "$p50" 5 "a spinner that slept 300 times first" \
    "$jumps wakeup jumps in all"
}

# Many hogs confined to CPU 0 by a cpuset, then released to every CPU at once: idle CPUs must
# steal them in batches and end up evenly busy.
t_steal() {
  local cg=/sys/fs/cgroup/gmp-steal pids=() i events stolen busy minb maxb
  [ "$NCPU" -ge 2 ] || { skip steal "one CPU: nothing to steal from"; return; }
  grep -q cpuset /sys/fs/cgroup/cgroup.controllers || { fail steal "no cpuset controller"; return; }
  echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
  mkdir -p "$cg" && echo 0 > "$cg/cpuset.cpus" && echo 0 > "$cg/cpuset.mems"
  # Every CPU a proc: this case is about stealing, not about --procs auto growing the set.
  start_sched steal --procs all --stats 1 --json || { fail steal "did not load"; return; }
  for ((i = 0; i < 2 * NCPU; i++)); do
    in_cgroup "$cg" timeout 25 sh -c "$HOG" & pids+=($!)
  done
  sleep 3
  : > "$LOGS/steal.mark"; local mark; mark=$(wc -l < "$LOGS/steal.out")
  echo "0-$((NCPU - 1))" > "$cg/cpuset.cpus"
  sleep 12
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  stop_sched INT
  tail -n +$((mark + 1)) "$LOGS/steal.out" > "$LOGS/steal.after"
  events=$(( $(json_sum "$LOGS/steal.after" dispatch.steal_llc) + $(json_sum "$LOGS/steal.after" dispatch.steal_node) + $(json_sum "$LOGS/steal.after" dispatch.steal_remote) ))
  stolen=$(json_sum "$LOGS/steal.after" stolen_tasks)
  # The victim search is bounded: at most STEAL_LOOKS_* (2 + 2 + 2) queues per attempt.
  local tries looks
  tries=$(json_sum "$LOGS/steal.out" dispatch.steal_tries); looks=$(json_sum "$LOGS/steal.out" dispatch.steal_looks)
  # Busy share per CPU over the last 6 intervals.
  busy=$(tail -n 7 "$LOGS/steal.after" | head -n 6 | python3 -c '
import json, sys
rows = [json.loads(l)["busy_pct"] for l in sys.stdin if l.startswith("{")]
avg = [sum(c) / len(rows) for c in zip(*rows)]
print(" ".join("%.0f" % a for a in avg))')
  minb=$(tr ' ' '\n' <<< "$busy" | sort -n | head -1); maxb=$(tr ' ' '\n' <<< "$busy" | sort -n | tail -1)
  rmdir "$cg" 2>/dev/null
  if [ "$SCHED_RC" -ne 0 ]; then fail steal "scheduler exit $SCHED_RC"
  elif [ "$events" -le 0 ] || [ "$stolen" -le "$events" ]; then fail steal "steal events $events, stolen tasks $stolen (want stolen > events > 0)"
  elif [ -z "$busy" ] || awk -v a="$minb" -v b="$maxb" 'BEGIN { exit !(a < 0.75 * b) }'; then fail steal "uneven busy % per CPU: $busy"
  elif [ "$tries" -le 0 ] || [ "$looks" -gt $((6 * tries)) ]; then fail steal "$looks queues looked at in $tries steal attempts (want 1..6 per attempt)"
  else pass steal "after release: $events steals moved $stolen tasks; busy % per CPU: $busy; $looks queues looked at in $tries attempts"
  fi
}

t_overflow() {
  start_sched overflow --local-cap 2 --stats 1 --json || { fail overflow "did not load"; return; }
  hackbench -g 4 -l 200 > "$LOGS/overflow-hackbench.log" 2>&1; local hrc=$?
  sleep 1.5
  stop_sched INT
  local of; of=$(json_sum "$LOGS/overflow.out" enqueue.overflow)
  if [ "$hrc" -ne 0 ]; then fail overflow "hackbench exit $hrc"
  elif [ "$SCHED_RC" -ne 0 ]; then fail overflow "scheduler exit $SCHED_RC"
  elif [ "$of" -le 0 ]; then fail overflow "no overflow to the shared queue with --local-cap 2"
  else pass overflow "--local-cap 2: $of wakeups overflowed to the shared queue; hackbench completed ($(awk '/Time:/ {print $2}' "$LOGS/overflow-hackbench.log") s)"
  fi
}

# A task that records the longest gap between two of its loop iterations: how long it was kept
# from running.
gap_probe() {
  python3 -c '
import sys, time
end = time.monotonic() + float(sys.argv[1]); last = time.monotonic(); mx = 0.0
while True:
    t = time.monotonic(); mx = max(mx, t - last); last = t
    if t > end: break
print("%.3f" % mx)' "$1"
}

t_fair_tick() {
  local pipes=() i gap ft
  start_sched fairtick --stats 1 --json || { fail fair_tick "did not load"; return; }
  # One ping-pong pair per CPU keeps every local queue busy through runnext hand-offs.
  for ((i = 0; i < NCPU; i++)); do perf bench sched pipe -l 100000000 > /dev/null 2>&1 & pipes+=($!); done
  sleep 2
  gap=$(gap_probe 12)
  kill "${pipes[@]}" 2>/dev/null; wait "${pipes[@]}" 2>/dev/null
  stop_sched INT
  ft=$(json_sum "$LOGS/fairtick.out" dispatch.fair_tick)
  if [ "$SCHED_RC" -ne 0 ]; then fail fair_tick "scheduler exit $SCHED_RC"
  elif [ -z "$gap" ]; then fail fair_tick "probe did not run"
  elif awk -v g="$gap" 'BEGIN { exit !(g > 1.0) }'; then fail fair_tick "a task waited $gap s beside $NCPU ping-pong pairs (bound 1 s)"
  else pass fair_tick "beside $NCPU ping-pong pairs the longest wait was $gap s (bound 1 s); $ft fair-tick dispatches"
  fi
}

t_race_affinity() {
  dmesg_mark
  local rc1 rc2 faults pids=() i
  start_sched race || { fail race_affinity "did not load"; return; }
  stress-ng --temp-path /tmp --race-sched 8 -t 20 > "$LOGS/race-sched.log" 2>&1; rc1=$?
  stress-ng --temp-path /tmp --affinity 4 --affinity-rand -t 15 > "$LOGS/race-affinity.log" 2>&1; rc2=$?
  # A taskset storm on running hogs.
  for ((i = 0; i < NCPU; i++)); do hog 12 & pids+=($!); done
  local end=$((SECONDS + 10))
  while [ $SECONDS -lt $end ]; do
    for p in $(pgrep -f "$HOG"); do taskset -p $((1 << (RANDOM % NCPU))) "$p" > /dev/null 2>&1; done
  done
  wait "${pids[@]}" 2>/dev/null
  local st; st=$(state)
  stop_sched INT
  faults=$(kernel_faults)
  if [ "$st" != enabled ]; then fail race_affinity "scheduler not loaded after the storms (state $st): $(tail -3 "$LOGS/race.err")"
  elif [ "$SCHED_RC" -ne 0 ]; then fail race_affinity "exit $SCHED_RC: $(tail -3 "$LOGS/race.err")"
  elif [ -n "$faults" ]; then fail race_affinity "kernel log: $faults"
  elif [ "$rc1" -ne 0 ] || [ "$rc2" -ne 0 ]; then fail race_affinity "stress-ng exit $rc1/$rc2"
  else pass race_affinity "race-sched 20 s, affinity-rand 15 s, taskset storm 10 s: still loaded, no kernel faults"
  fi
}
