#!/bin/bash
# The VM test suite: runs inside the guest (scripts/test.sh boots it), every case against the
# real scx_gmp in the real kernel. Usage: suite.sh REPO RESULTS_DIR [CASE...]
set -u
REPO=$1; RES=$2; shift 2
export REPO RES
. "$REPO/tests/vm/lib.sh"
. "$REPO/tests/vm/cases_lifecycle.sh"
. "$REPO/tests/vm/cases_gmp.sh"

NCPU=$(nproc)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
ulimit -n 65536 2>/dev/null || true
log "guest: kernel $(uname -r), $NCPU CPUs, nodes $(cat /sys/devices/system/node/online), state $(state)"

ALL_CASES=(load bad_input second_instance kill9 ci_stress
           runnext sysmon_fair steal overflow fair_tick race_affinity)
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=("${ALL_CASES[@]}")

for c in "${CASES[@]}"; do
  log "--- $c"
  if [ "$(state)" != disabled ]; then
    log "sched_ext is '$(state)' before $c; waiting"
    wait_state disabled 20 || { fail "$c" "sched_ext stuck in state $(state) before the case"; continue; }
  fi
  "t_$c"
done
echo complete > "$RES/complete"
