#!/usr/bin/env bash
# Runs inside the VM (scripts/run.sh): load scx_gmp with the given flags, run a demo workload
# beside it, then unload it. Usage: demo.sh SCX_GMP DURATION FLAGS...
set -u
SCX=$1; DURATION=$2; shift 2
N=$(nproc)
"$SCX" "$@" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ "$(cat /sys/kernel/sched_ext/state)" = enabled ] && break
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
  sleep 0.1
done
echo "[demo] $(cat /sys/kernel/sched_ext/root/ops) is enabled; workload: CPU hogs, pipe ping-pong, hackbench"
end=$((SECONDS + DURATION))
while [ $SECONDS -lt $end ]; do
  left=$((end - SECONDS))
  stress-ng --temp-path /tmp -q -c $((N + 2)) -t $((left < 10 ? left : 10)) &
  spid=$!
  perf bench sched pipe -l 20000 > /dev/null 2>&1
  hackbench -g 2 -l 200 > /dev/null 2>&1
  wait "$spid"
done
kill -INT "$pid"
wait "$pid"; rc=$?
echo "[demo] scx_gmp exited with status $rc; sched_ext is $(cat /sys/kernel/sched_ext/state)"
exit $rc
